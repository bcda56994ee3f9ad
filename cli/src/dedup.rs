//! `seen dedup`: print each record the first time its key is seen.

use std::collections::HashSet;
use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use seen::hash::ItemHasher;
use seen::{AtomicBloomFilter, BloomInfo, Error, GrowingBloomFilter};

use crate::Failure;
use crate::units::parse_size;

#[derive(Args)]
pub(crate) struct Dedup {
    /// Files to read, in order; standard input when none is given, or for `-`.
    files: Vec<PathBuf>,
    /// Records end with NUL, not newline (input and output).
    #[arg(short = 'z', long)]
    zero_terminated: bool,
    /// The key is field N of the record (from 1), fields split by --delimiter.
    #[arg(short = 'f', long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    field: Option<u64>,
    /// The field delimiter, one byte.
    #[arg(short = 'd', long, default_value = "\t", value_name = "BYTE")]
    delimiter: String,
    /// Records are JSON objects, one per line; the key is the value at PATH (dotted:
    /// `user.id`; a string's text, any other value's JSON). A record without it has the
    /// empty key.
    #[arg(long, value_name = "PATH", conflicts_with = "field")]
    json_key: Option<String>,
    /// Keep every key in a hash set: exact, memory grows with the distinct keys.
    #[arg(long, conflicts_with = "grow")]
    exact: bool,
    /// Grow the filter past --capacity (RedisBloom's scaling filter) instead of letting its
    /// false-positive rate rise.
    #[arg(long)]
    grow: bool,
    /// Distinct keys the filter is sized for (the first layer's, with --grow).
    #[arg(long, default_value_t = 10_000_000, value_name = "N")]
    capacity: u64,
    /// The false-positive rate at capacity: the probability that a new record is dropped.
    #[arg(long, default_value_t = 1e-4, value_name = "P")]
    fpr: f64,
    /// Size the filter by its memory instead of --capacity: the most distinct keys that
    /// SIZE holds at --fpr (`256MiB`, `1GiB`, `500MB`; K, M, G are binary, KB, MB, GB decimal).
    #[arg(long, value_name = "SIZE", value_parser = parse_size, conflicts_with_all = ["capacity", "exact", "grow", "state"])]
    memory: Option<u64>,
    /// Print only the duplicates (each time a key is seen again).
    #[arg(long, conflicts_with = "count")]
    repeated: bool,
    /// Print the number of new and of duplicate records instead of the records.
    #[arg(long)]
    count: bool,
    /// Print a summary on standard error at the end.
    #[arg(long)]
    stats: bool,
    /// Load the filter from FILE if it exists, and save it there at the end (crash-safely:
    /// a temporary file renamed over it), so that a daily run remembers the days before.
    #[arg(long, value_name = "FILE", conflicts_with = "exact")]
    state: Option<PathBuf>,
}

/// Where a key is looked up and recorded.
enum Seen {
    Exact(HashSet<Box<[u8]>>),
    Bloom(AtomicBloomFilter),
    Growing(GrowingBloomFilter),
}

impl Seen {
    /// The filter of `--state` if its file exists (checked against the arguments), else a
    /// new one.
    fn open(args: &Dedup) -> Result<Self, Failure> {
        let Some(path) = args.state.as_ref().filter(|p| p.exists()) else {
            return Self::new(args).map_err(|e| Failure(format!("cannot build the filter: {e}")));
        };
        let name = path.display();
        let loaded = if args.grow {
            Self::Growing(
                GrowingBloomFilter::load(path)
                    .map_err(|e| Failure(format!("cannot load the state {name}: {e}")))?,
            )
        } else {
            Self::Bloom(
                AtomicBloomFilter::load(path)
                    .map_err(|e| Failure(format!("cannot load the state {name}: {e}")))?,
            )
        };
        let (capacity, fpr) = match &loaded {
            Self::Growing(f) => (f.capacity(), f.fpr()),
            Self::Bloom(f) => (f.capacity(), f.fpr()),
            Self::Exact(_) => unreachable!("--state conflicts with --exact"),
        };
        if (capacity, fpr) != (args.capacity, args.fpr) {
            return Err(Failure(format!(
                "the state {name} holds a filter for --capacity {capacity} --fpr {fpr}, not \
                 --capacity {} --fpr {}: pass those, or another state file",
                args.capacity, args.fpr
            )));
        }
        Ok(loaded)
    }

    /// Saves the filter to `path` (a temporary file, then a rename).
    fn save(&self, path: &std::path::Path) -> Result<(), Error> {
        match self {
            Self::Bloom(f) => f.save(path),
            Self::Growing(f) => f.save(path),
            Self::Exact(_) => Ok(()),
        }
    }

    fn new(args: &Dedup) -> Result<Self, Error> {
        if let Some(bytes) = args.memory {
            let capacity = capacity_for(bytes, args.fpr)?;
            return Ok(Self::Bloom(
                AtomicBloomFilter::builder(capacity)
                    .fpr(args.fpr)
                    .layout(seen::Layout::Line)
                    .build()?,
            ));
        }
        Ok(if args.exact {
            Self::Exact(HashSet::new())
        } else if args.grow {
            Self::Growing(GrowingBloomFilter::with_capacity(args.capacity, args.fpr)?)
        } else {
            Self::Bloom(
                AtomicBloomFilter::builder(args.capacity)
                    .fpr(args.fpr)
                    .layout(seen::Layout::Line)
                    .build()?,
            )
        })
    }

    /// Records `key`; whether it was new.
    fn insert(&mut self, key: &[u8]) -> Result<bool, Error> {
        match self {
            Self::Exact(set) => Ok(!set.contains(key) && set.insert(key.into())),
            Self::Bloom(f) => Ok(f.insert_hash(f.hasher().hash_bytes(key))),
            Self::Growing(f) => f.insert_hash(f.hasher().hash_bytes(key)),
        }
    }

    /// Records every key of the batch, in order, into `batch.new`; on an error, the index of
    /// the record that failed (the records before it are recorded).
    fn decide(&mut self, batch: &mut Batch, key: &Key) -> Result<(), (usize, String)> {
        let mut new = std::mem::take(&mut batch.new);
        new.clear();
        let result = match self {
            Self::Bloom(f) => {
                let hasher = f.hasher();
                let mut hashes = Vec::with_capacity(batch.len());
                let keyed = batch.records().enumerate().try_for_each(|(i, record)| {
                    hashes.push(hasher.hash_bytes(&key.of(record).map_err(|e| (i, e))?));
                    Ok(())
                });
                // The records before a bad one are decided, as one by one.
                f.insert_many_hashes(hashes, &mut new);
                keyed
            }
            _ => batch.records().enumerate().try_for_each(|(i, record)| {
                let k = key.of(record).map_err(|e| (i, e))?;
                new.push(self.insert(&k).map_err(|e| (i, e.to_string()))?);
                Ok(())
            }),
        };
        batch.new = new;
        result
    }

    fn info(&self) -> Option<BloomInfo> {
        match self {
            Self::Exact(_) => None,
            Self::Bloom(f) => Some(f.info()),
            Self::Growing(f) => Some(f.info()),
        }
    }
}

/// Records read together: their bytes back to back, where each ends, and what was decided.
#[derive(Default)]
struct Batch {
    bytes: Vec<u8>,
    ends: Vec<usize>,
    new: Vec<bool>,
}

impl Batch {
    /// Records per batch.
    const RECORDS: usize = 1024;

    /// Replaces the batch with up to [`RECORDS`](Self::RECORDS) records from `reader`, each
    /// without its terminator; whether the input may hold more.
    fn fill(&mut self, reader: &mut dyn BufRead, terminator: u8) -> io::Result<bool> {
        self.bytes.clear();
        self.ends.clear();
        self.new.clear();
        while self.ends.len() < Self::RECORDS {
            let start = self.bytes.len();
            if reader.read_until(terminator, &mut self.bytes)? == 0 {
                return Ok(false);
            }
            if self.bytes.len() > start && self.bytes.last() == Some(&terminator) {
                self.bytes.pop();
            }
            self.ends.push(self.bytes.len());
        }
        Ok(true)
    }

    fn len(&self) -> usize {
        self.ends.len()
    }

    fn records(&self) -> impl Iterator<Item = &[u8]> {
        let starts = core::iter::once(0).chain(self.ends.iter().copied());
        starts
            .zip(&self.ends)
            .map(|(start, &end)| &self.bytes[start..end])
    }
}

/// The most distinct keys a line-layout filter of at most `bytes` holds at `fpr` (a binary
/// search over the library's own sizing, so the filter built is at most `bytes`).
fn capacity_for(bytes: u64, fpr: f64) -> Result<u64, Error> {
    let fits = |capacity: u64| -> Result<bool, Error> {
        match seen::sizing::blocked(capacity, fpr, seen::Layout::Line) {
            Ok(s) => Ok(s.bytes() <= bytes),
            Err(Error::TooLarge { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    };
    if !fits(1)? {
        return Err(Error::InvalidParameter(
            "--memory is below the smallest filter at this --fpr (one cache line)",
        ));
    }
    // Every filter needs at least a bit per key: the answer is below 8 · bytes.
    let (mut lo, mut hi) = (1u64, bytes.saturating_mul(8));
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if fits(mid)? {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    Ok(lo)
}

/// Which part of a record is its key.
enum Key {
    Whole,
    Field { n: u64, delimiter: u8 },
    Json(Vec<String>),
}

impl Key {
    /// The key of `record` (its terminator removed), borrowed from it where it can be.
    fn of<'r>(&self, record: &'r [u8]) -> Result<std::borrow::Cow<'r, [u8]>, String> {
        use std::borrow::Cow;
        Ok(match self {
            Self::Whole => Cow::Borrowed(record),
            Self::Field { n, delimiter } => Cow::Borrowed(
                record
                    .split(|b| b == delimiter)
                    .nth(*n as usize - 1)
                    .unwrap_or(&[]),
            ),
            Self::Json(path) => {
                let value: serde_json::Value = serde_json::from_slice(record)
                    .map_err(|e| format!("not a JSON record: {e}"))?;
                let mut at = &value;
                for part in path {
                    match at.get(part) {
                        Some(next) => at = next,
                        None => return Ok(Cow::Borrowed(&[])),
                    }
                }
                Cow::Owned(match at {
                    serde_json::Value::String(s) => s.clone().into_bytes(),
                    other => other.to_string().into_bytes(),
                })
            }
        })
    }
}

pub(crate) fn run(args: &Dedup) -> Result<(), Failure> {
    let delimiter = match args.delimiter.as_bytes() {
        [b] => *b,
        _ => {
            return Err(Failure(format!(
                "the delimiter must be one byte, got {:?}",
                args.delimiter
            )));
        }
    };
    let key = match (&args.json_key, args.field) {
        (Some(path), _) => Key::Json(path.split('.').map(str::to_string).collect()),
        (None, Some(n)) => Key::Field { n, delimiter },
        (None, None) => Key::Whole,
    };
    let terminator = if args.zero_terminated { 0 } else { b'\n' };
    let mut seen = Seen::open(args)?;
    let stdout = io::stdout();
    let mut out = BufWriter::with_capacity(1 << 16, stdout.lock());
    let (mut records, mut new) = (0u64, 0u64);
    let started = Instant::now();
    let inputs: Vec<Option<&PathBuf>> = if args.files.is_empty() {
        vec![None]
    } else {
        args.files
            .iter()
            .map(|p| (p.as_os_str() != "-").then_some(p))
            .collect()
    };
    // Records are read and decided in batches, so that a Bloom filter larger than the caches
    // overlaps the batch's cache misses (`insert_many_hashes`).
    let mut batch = Batch::default();
    for input in inputs {
        let name = input.map_or("standard input".to_string(), |p| p.display().to_string());
        let mut reader: Box<dyn BufRead> = match input {
            None => Box::new(BufReader::with_capacity(1 << 16, io::stdin().lock())),
            Some(path) => Box::new(BufReader::with_capacity(
                1 << 16,
                File::open(path).map_err(|e| Failure(format!("cannot read {name}: {e}")))?,
            )),
        };
        loop {
            let more = batch
                .fill(&mut reader, terminator)
                .map_err(|e| Failure(format!("cannot read {name}: {e}")))?;
            let first = records + 1;
            records += batch.len() as u64;
            seen.decide(&mut batch, &key)
                .map_err(|(i, e)| Failure(format!("{name}, record {}: {e}", first + i as u64)))?;
            for (record, &is_new) in batch.records().zip(&batch.new) {
                new += u64::from(is_new);
                if !args.count && is_new != args.repeated {
                    write_record(&mut out, record, terminator)?;
                }
            }
            if !more {
                break;
            }
        }
    }
    if args.count {
        writeln!(out, "{new} new\n{} duplicates", records - new).map_err(write_failure)?;
    }
    match out.flush() {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {}
        other => other.map_err(write_failure)?,
    }
    if let Some(path) = &args.state {
        seen.save(path)
            .map_err(|e| Failure(format!("cannot save the state {}: {e}", path.display())))?;
    }
    if args.stats {
        let secs = started.elapsed().as_secs_f64();
        eprintln!(
            "seen: {records} records, {new} new, {} duplicates, {:.0} records/s",
            records - new,
            records as f64 / secs.max(1e-9)
        );
        match seen.info() {
            Some(info) => eprintln!("seen: {info}"),
            None => eprintln!("seen: exact set of {new} keys"),
        }
    }
    Ok(())
}

fn write_record(out: &mut impl Write, record: &[u8], terminator: u8) -> Result<(), Failure> {
    out.write_all(record)
        .and_then(|()| out.write_all(&[terminator]))
        .map_err(write_failure)
}

fn write_failure(e: io::Error) -> Failure {
    Failure(format!("cannot write the output: {e}"))
}
