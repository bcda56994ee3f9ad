//! `seen bench`: each structure on the same keys, to pick one: insert and lookup time, the
//! measured false-positive rate, the keys it still finds, its memory.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::ops::Range;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use dashmap::DashMap;
use seen::hash::{ItemHasher, StableHasher};
use seen::{
    AtomicBloomFilter, Error, GrowingBloomFilter, Layout, OverwriteMap, SemiConcurrentBloomFilter,
    WindowedBloomFilter,
};
use serde_json::json;

use crate::Failure;
use crate::flags::{DEFAULT_FPR, DEFAULT_REMEMBER_PROBABILITY, capacity, probability, threads};
use crate::plot::{BarChart, PlotFile};
use crate::table::{self, Table, given, grouped, human_bytes, rate};

#[derive(Args)]
#[command(after_help = "\
Examples:
  seen bench                                        1M generated keys, every structure, 1 thread
  seen bench --items 10000000 --fpr 0.01 --threads 1,2
  seen bench --input keys.txt --structures line,semi,exact --json
  seen bench --items 1000000 --plot bench.svg")]
pub(crate) struct Bench {
    /// Generated keys to insert: 16-byte hex strings, the same every run.
    #[arg(long, value_name = "N", default_value_t = 1_000_000,
          value_parser = clap::value_parser!(u64).range(1..), conflicts_with = "input")]
    items: u64,
    /// Insert the keys of FILE instead, one per line (the line without its newline). Duplicate
    /// lines are inserted again; lookups of absent keys use generated keys not in the file.
    #[arg(long, value_name = "FILE")]
    input: Option<PathBuf>,
    /// The keys each structure is sized for [default: the number of distinct keys inserted].
    /// The windowed filter splits them over its generations; the overwrite map remembers a
    /// key across this many later insertions with probability --remember-probability.
    #[arg(long, value_name = "N", value_parser = capacity)]
    capacity: Option<u64>,
    /// The Bloom filters' false-positive rate at capacity, strictly between 0 and 1 (the windowed filter's over its
    /// whole window, the growing filter's however much it grows).
    #[arg(
        long,
        default_value_t = DEFAULT_FPR,
        value_name = "P",
        value_parser = probability,
        allow_negative_numbers = true
    )]
    fpr: f64,
    /// The structures to measure, in this order: word and line (AtomicBloomFilter in each
    /// layout), semi (SemiConcurrentBloomFilter, word layout), grow (GrowingBloomFilter), window
    /// (WindowedBloomFilter), overwrite (OverwriteMap), exact (the baseline: the keys in a
    /// dashmap DashMap that every thread shares, the concurrent set a user would pick).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        value_name = "LIST",
        default_value = "word,line,semi,grow,window,overwrite,exact"
    )]
    structures: Vec<Structure>,
    /// Thread counts to measure with (each 1 to 1024), each a separate run on a new structure: the keys are
    /// split into that many consecutive parts, one per thread.
    #[arg(long, value_delimiter = ',', value_name = "LIST", default_value = "1",
          value_parser = threads())]
    threads: Vec<u32>,
    /// The windowed filter's generations: the keys are inserted in this many periods of
    /// --capacity / G keys, the filter rotated between them, so every key is in the window
    /// (1 to 63).
    #[arg(long, value_name = "G", default_value_t = 7,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(seen::sizing::MAX_GENERATIONS)))]
    generations: u32,
    /// The overwrite map's probability of remembering a key after --capacity later insertions,
    /// strictly between 0 and 1.
    #[arg(
        long,
        value_name = "Q",
        default_value_t = DEFAULT_REMEMBER_PROBABILITY,
        value_parser = probability,
        allow_negative_numbers = true
    )]
    remember_probability: f64,
    /// Use the batch operations (`insert_many_hashes`, `contains_many_hashes`, 1,024 keys at a
    /// time) where a structure has them: every structure but exact.
    #[arg(long)]
    batch: bool,
    /// Print the results as one JSON object instead of a table.
    #[arg(long)]
    json: bool,
    /// Also draw a bar chart of ns per operation for each structure and thread count to FILE
    /// (SVG).
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
}

/// A structure `seen bench` can measure.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Structure {
    Word,
    Line,
    Semi,
    Grow,
    Window,
    Overwrite,
    Exact,
}

impl Structure {
    fn name(self) -> &'static str {
        match self {
            Self::Word => "word",
            Self::Line => "line",
            Self::Semi => "semi",
            Self::Grow => "grow",
            Self::Window => "window",
            Self::Overwrite => "overwrite",
            Self::Exact => "exact",
        }
    }

    /// Whether it is a Bloom filter: it must find every key inserted.
    fn finds_every_key(self) -> bool {
        !matches!(self, Self::Overwrite)
    }
}

/// Keys back to back in one buffer, and where each ends.
#[derive(Default)]
struct Keys {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl Keys {
    fn push(&mut self, key: &[u8]) {
        self.bytes.extend_from_slice(key);
        self.ends.push(self.bytes.len());
    }

    fn len(&self) -> usize {
        self.ends.len()
    }

    fn get(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.bytes[start..self.ends[i]]
    }
}

/// The keys of a run: those inserted (and looked up as present), and as many never inserted.
struct Workload {
    source: String,
    present: Keys,
    distinct: u64,
    absent: Keys,
}

/// SplitMix64: a bijection of `u64`, so distinct inputs give distinct keys.
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Generated key `i`: 16 hex digits.
fn generated(i: u64) -> [u8; 16] {
    let mut key = [0u8; 16];
    let _ = std::io::Write::write_fmt(&mut &mut key[..], format_args!("{:016x}", mix(i)));
    key
}

impl Workload {
    /// Keys `0..n` inserted, `n..2n` absent: 48 bytes each, allocated first (a count past
    /// the memory is an error that says so).
    fn generated(n: u64) -> Result<Self, Failure> {
        let mut present = Keys::default();
        let mut absent = Keys::default();
        let too_many = || {
            Failure(format!(
                "--items {n}: the keys take {} bytes, more than this machine gives",
                u128::from(n) * 48
            ))
        };
        let len = usize::try_from(n).map_err(|_| too_many())?;
        crate::oom::fallible(|| {
            for keys in [&mut present, &mut absent] {
                keys.bytes
                    .try_reserve_exact(len.checked_mul(16).ok_or(())?)
                    .map_err(drop)?;
                keys.ends.try_reserve_exact(len).map_err(drop)?;
            }
            Ok::<(), ()>(())
        })
        .map_err(|()| too_many())?;
        for i in 0..n {
            present.push(&generated(i));
            absent.push(&generated(n + i));
        }
        Ok(Self {
            source: format!("{} generated keys", grouped(n)),
            present,
            distinct: n,
            absent,
        })
    }

    /// The lines of `path`, and as many generated keys that are not among them.
    fn from_file(path: &std::path::Path) -> Result<Self, Failure> {
        let name = path.display();
        let text = std::fs::read(path).map_err(|e| Failure(format!("cannot read {name}: {e}")))?;
        let text = text.strip_suffix(b"\n").unwrap_or(&text);
        if text.is_empty() {
            return Err(Failure(format!("{name} holds no keys")));
        }
        let mut present = Keys::default();
        let mut distinct = HashSet::new();
        for line in text.split(|&b| b == b'\n') {
            present.push(line);
            distinct.insert(line);
        }
        let mut absent = Keys::default();
        let mut i = 0u64;
        while absent.len() < distinct.len() {
            let key = generated(u64::MAX - i);
            if !distinct.contains(&key[..]) {
                absent.push(&key);
            }
            i += 1;
        }
        Ok(Self {
            source: format!(
                "{} keys of {name} ({} distinct)",
                grouped(present.len() as u64),
                grouped(distinct.len() as u64)
            ),
            distinct: distinct.len() as u64,
            present,
            absent,
        })
    }
}

/// A structure built for the run.
enum Built {
    Bloom(AtomicBloomFilter),
    // With its hasher (the filter's snapshot has it; the filter does not lend it). Boxed: its
    // padded counters make it several times larger than the others.
    Semi(Box<SemiConcurrentBloomFilter>, StableHasher),
    Grow(GrowingBloomFilter),
    // Boxed: its padded counters make it several times larger than the others.
    Window(Box<WindowedBloomFilter>),
    Overwrite(OverwriteMap),
    /// What `DashSet<Box<[u8]>>` wraps; the map itself, for its shards (the memory estimate).
    Exact(DashMap<Box<[u8]>, ()>),
}

/// Keys per batch with --batch.
const BATCH: usize = 1024;

impl Built {
    /// `structure` for `capacity` keys. The exact set is sized up front, as a user who knows
    /// the count would, for the `distinct` keys it will hold (or `capacity` if fewer: it then
    /// grows past it).
    fn new(
        structure: Structure,
        args: &Bench,
        capacity: u64,
        distinct: u64,
    ) -> Result<Self, Error> {
        let bloom = |layout| {
            AtomicBloomFilter::builder(capacity)
                .fpr(args.fpr)
                .layout(layout)
                .build()
        };
        Ok(match structure {
            Structure::Word => Self::Bloom(bloom(Layout::Word)?),
            Structure::Line => Self::Bloom(bloom(Layout::Line)?),
            Structure::Semi => {
                let f = SemiConcurrentBloomFilter::builder(capacity)
                    .fpr(args.fpr)
                    .layout(Layout::Word)
                    .build()?;
                let hasher = *f.hasher();
                Self::Semi(Box::new(f), hasher)
            }
            Structure::Grow => Self::Grow(GrowingBloomFilter::with_capacity(capacity, args.fpr)?),
            Structure::Window => {
                // G live generations: the current one and G - 1 full periods.
                let periods = args
                    .generations
                    .checked_sub(1)
                    .filter(|&p| p < seen::sizing::MAX_GENERATIONS)
                    .ok_or(Error::InvalidParameter(
                        "generations must be between 1 and 63",
                    ))?;
                Self::Window(Box::new(
                    WindowedBloomFilter::builder(per_period(capacity, args.generations))
                        .fpr(args.fpr)
                        .periods(periods)
                        .rotate_manually()
                        .build()?,
                ))
            }
            Structure::Overwrite => Self::Overwrite(OverwriteMap::for_window(
                capacity,
                args.remember_probability,
            )?),
            // `distinct` keys are in memory already: the count fits a `usize`.
            Structure::Exact => Self::Exact(DashMap::with_capacity(
                usize::try_from(capacity.min(distinct)).unwrap_or(usize::MAX),
            )),
        })
    }

    /// Inserts the keys of `range`; how many were new.
    fn insert(&self, keys: &Keys, range: Range<usize>, batch: bool) -> Result<u64, Error> {
        let mut out = Vec::with_capacity(BATCH);
        let mut new = 0u64;
        match self {
            Self::Bloom(f) if batch => {
                for chunk in chunks(range) {
                    out.clear();
                    let hashes = chunk.map(|i| f.hasher().hash_bytes(keys.get(i)));
                    new += f.insert_many_hashes(hashes, &mut out) as u64;
                }
            }
            Self::Semi(f, hasher) if batch => {
                for chunk in chunks(range) {
                    out.clear();
                    let hashes = chunk.map(|i| hasher.hash_bytes(keys.get(i)));
                    new += f.insert_many_hashes(hashes, &mut out) as u64;
                }
            }
            Self::Grow(f) if batch => {
                for chunk in chunks(range) {
                    out.clear();
                    let hashes = chunk.map(|i| f.hasher().hash_bytes(keys.get(i)));
                    new += f.insert_many_hashes(hashes, &mut out)? as u64;
                }
            }
            Self::Window(f) if batch => {
                for chunk in chunks(range) {
                    out.clear();
                    let hashes = chunk.map(|i| f.hasher().hash_bytes(keys.get(i)));
                    new += f.insert_many_hashes(hashes, &mut out) as u64;
                }
            }
            Self::Overwrite(m) if batch => {
                for chunk in chunks(range) {
                    out.clear();
                    let hashes = chunk.map(|i| m.hasher().hash_bytes(keys.get(i)));
                    new += m.insert_many_hashes(hashes, &mut out) as u64;
                }
            }
            _ => {
                for i in range {
                    new += u64::from(self.insert_one(keys.get(i))?);
                }
            }
        }
        Ok(new)
    }

    /// Inserts one key (hashed with `hash_bytes`, as `seen dedup` does); whether it was new.
    fn insert_one(&self, key: &[u8]) -> Result<bool, Error> {
        Ok(match self {
            Self::Bloom(f) => f.insert_hash(f.hasher().hash_bytes(key)),
            Self::Semi(f, hasher) => f.insert_hash(hasher.hash_bytes(key)),
            Self::Grow(f) => f.insert_hash(f.hasher().hash_bytes(key))?,
            Self::Window(f) => f.insert_hash(f.hasher().hash_bytes(key)),
            Self::Overwrite(m) => m.insert_hash(m.hasher().hash_bytes(key)),
            // Looked up first, so that a duplicate allocates nothing (and takes only a read
            // lock). Two threads racing on one new key both miss it; `insert` then tells them
            // apart under the shard's write lock: exactly one is told it was new.
            Self::Exact(set) => !set.contains_key(key) && set.insert(key.into(), ()).is_none(),
        })
    }

    /// How many keys of `range` the structure reports present.
    fn found(&self, keys: &Keys, range: Range<usize>, batch: bool) -> u64 {
        let mut out = Vec::with_capacity(BATCH);
        let mut found = 0u64;
        match self {
            Self::Bloom(f) if batch => {
                for chunk in chunks(range) {
                    out.clear();
                    let hashes = chunk.map(|i| f.hasher().hash_bytes(keys.get(i)));
                    found += f.contains_many_hashes(hashes, &mut out) as u64;
                }
            }
            Self::Semi(f, hasher) if batch => {
                for chunk in chunks(range) {
                    out.clear();
                    let hashes = chunk.map(|i| hasher.hash_bytes(keys.get(i)));
                    found += f.contains_many_hashes(hashes, &mut out) as u64;
                }
            }
            Self::Grow(f) if batch => {
                for chunk in chunks(range) {
                    out.clear();
                    let hashes = chunk.map(|i| f.hasher().hash_bytes(keys.get(i)));
                    found += f.contains_many_hashes(hashes, &mut out) as u64;
                }
            }
            Self::Window(f) if batch => {
                for chunk in chunks(range) {
                    out.clear();
                    let hashes = chunk.map(|i| f.hasher().hash_bytes(keys.get(i)));
                    found += f.contains_many_hashes(hashes, &mut out) as u64;
                }
            }
            Self::Overwrite(m) if batch => {
                for chunk in chunks(range) {
                    out.clear();
                    let hashes = chunk.map(|i| m.hasher().hash_bytes(keys.get(i)));
                    found += m.contains_many_hashes(hashes, &mut out) as u64;
                }
            }
            _ => {
                for i in range {
                    found += u64::from(self.contains_one(keys.get(i)));
                }
            }
        }
        found
    }

    /// Whether the structure reports `key` present.
    fn contains_one(&self, key: &[u8]) -> bool {
        match self {
            Self::Bloom(f) => f.contains_hash(f.hasher().hash_bytes(key)),
            Self::Semi(f, hasher) => f.contains_hash(hasher.hash_bytes(key)),
            Self::Grow(f) => f.contains_hash(f.hasher().hash_bytes(key)),
            Self::Window(f) => f.contains_hash(f.hasher().hash_bytes(key)),
            Self::Overwrite(m) => m.contains_hash(m.hasher().hash_bytes(key)),
            Self::Exact(set) => set.contains_key(key),
        }
    }

    /// The bytes it takes, and whether that is an estimate.
    fn memory(&self) -> (u64, bool) {
        match self {
            Self::Bloom(f) => (f.memory_bytes(), false),
            Self::Semi(f, _) => (f.memory_bytes(), true),
            Self::Grow(f) => (f.memory_bytes(), false),
            Self::Window(f) => (f.memory_bytes(), false),
            Self::Overwrite(m) => (m.memory_bytes(), false),
            Self::Exact(set) => (dash_map_bytes(set), true),
        }
    }

    /// What was built, in a few words.
    fn describe(&self) -> String {
        match self {
            Self::Bloom(f) => format!(
                "AtomicBloomFilter, {} layout, k = {}",
                if f.layout() == Layout::Line {
                    "line"
                } else {
                    "word"
                },
                f.hashes()
            ),
            Self::Semi(f, _) => {
                let sizing = f.sizing();
                format!(
                    "SemiConcurrentBloomFilter, {} layout, k = {}, a compaction every {} inserts \
                     ({} run, {} keys pending at the end); memory estimated",
                    if sizing.layout == Layout::Line {
                        "line"
                    } else {
                        "word"
                    },
                    sizing.hashes,
                    grouped(f.insertions_before_compact() as u64),
                    grouped(f.compaction_stats().won),
                    grouped(f.pending_len() as u64),
                )
            }
            Self::Grow(f) => format!(
                "GrowingBloomFilter, {} layer{} after the inserts",
                f.layers(),
                if f.layers() == 1 { "" } else { "s" }
            ),
            Self::Window(f) => format!(
                "WindowedBloomFilter, {} generations of {} keys, rotated between them",
                f.generations(),
                grouped(f.capacity())
            ),
            Self::Overwrite(m) => format!("OverwriteMap of {} buckets", grouped(m.buckets())),
            Self::Exact(set) => format!(
                "dashmap::DashMap<Box<[u8]>, ()> (a DashSet), {} shards, SipHash; memory estimated",
                set.shards().len()
            ),
        }
    }
}

/// The keys per generation of a window of `generations` holding `capacity` keys.
fn per_period(capacity: u64, generations: u32) -> u64 {
    capacity.div_ceil(u64::from(generations.max(1)))
}

/// `range` in consecutive pieces of [`BATCH`].
fn chunks(range: Range<usize>) -> impl Iterator<Item = Range<usize>> {
    range
        .clone()
        .step_by(BATCH)
        .map(move |start| start..(start + BATCH).min(range.end))
}

/// The heap block glibc's malloc hands out for a request of `len` bytes: the length plus 8
/// bytes of header, up to a multiple of 16, at least 32.
fn malloc_block(len: u64) -> u64 {
    ((len + 8).div_ceil(16) * 16).max(32)
}

/// An estimate of the heap the exact set takes: its shards (each a cache-padded lock around a
/// hashbrown table), each table's allocation (its power-of-two number of buckets, read from the
/// shard, each a 16-byte `Box<[u8]>` and a control byte, plus 16 control bytes), and each key's
/// allocation as glibc's malloc rounds it. The allocator's own free lists and the keys'
/// fragmentation are not counted.
fn dash_map_bytes(map: &DashMap<Box<[u8]>, ()>) -> u64 {
    let slot = std::mem::size_of::<(Box<[u8]>, dashmap::SharedValue<()>)>() as u64 + 1;
    let shards = std::mem::size_of_val(map.shards()) as u64;
    let tables: u64 = map
        .shards()
        .iter()
        .map(|shard| {
            let table = shard.read();
            // An empty table points at a shared static group: no allocation.
            if table.capacity() == 0 {
                0
            } else {
                table.buckets() as u64 * slot + 16
            }
        })
        .sum();
    let keys: u64 = map
        .iter()
        .filter(|entry| !entry.key().is_empty())
        .map(|entry| malloc_block(entry.key().len() as u64))
        .sum();
    shards + tables + keys
}

/// `range` split into `parts` consecutive pieces of nearly equal length.
fn split(range: Range<usize>, parts: usize) -> Vec<Range<usize>> {
    let (len, parts) = (range.len(), parts.max(1));
    (0..parts)
        .map(|p| range.start + len * p / parts..range.start + len * (p + 1) / parts)
        .collect()
}

/// Runs `work` on `range` split over `threads` scoped threads; the wall-clock time and the sum
/// of what the threads returned.
fn on_threads(
    range: Range<usize>,
    threads: usize,
    work: impl Fn(Range<usize>) -> Result<u64, Error> + Sync,
) -> Result<(Duration, u64), Error> {
    let started = Instant::now();
    let results: Vec<Result<u64, Error>> = std::thread::scope(|s| {
        let handles: Vec<_> = split(range, threads)
            .into_iter()
            .map(|part| s.spawn(|| work(part)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    });
    let elapsed = started.elapsed();
    let mut total = 0;
    for result in results {
        total += result?;
    }
    Ok((elapsed, total))
}

/// One structure measured with one thread count.
struct Measured {
    structure: Structure,
    description: String,
    threads: u32,
    insert: Duration,
    /// The inserts that answered "new".
    new: u64,
    absent: Duration,
    present: Duration,
    false_positives: u64,
    present_found: u64,
    memory: u64,
    estimated: bool,
}

fn ns_per_op(elapsed: Duration, ops: usize) -> f64 {
    elapsed.as_nanos() as f64 / ops.max(1) as f64
}

fn measure(
    structure: Structure,
    args: &Bench,
    capacity: u64,
    threads: u32,
    work: &Workload,
) -> Result<Measured, Failure> {
    let name = structure.name();
    let built = Built::new(structure, args, capacity, work.distinct).map_err(|e| {
        // A rate one structure cannot reach, others may: say how to measure them.
        let hint = if beyond_layout(&e) {
            " (leave it out with --structures)"
        } else {
            ""
        };
        Failure(format!(
            "cannot build {name} for --capacity {capacity} --fpr {}: {e}{hint}",
            given(args.fpr)
        ))
    })?;
    let t = threads as usize;
    let keys = &work.present;
    let insert = |range| built.insert(keys, range, args.batch);
    let failed = |e: Error| {
        let hint = if beyond_layout(&e) {
            " (raise --capacity, or leave it out with --structures)"
        } else {
            ""
        };
        Failure(format!("{name}: an insert failed: {e}{hint}"))
    };
    let (insert_time, new) = match &built {
        // The window's periods one after the other, each split over the threads, and a
        // rotation between them: every key stays in the window.
        Built::Window(f) => {
            let (mut total, mut new) = (Duration::ZERO, 0);
            let periods = split(0..keys.len(), args.generations as usize);
            let last = periods.len() - 1;
            for (p, period) in periods.into_iter().enumerate() {
                let started = Instant::now();
                new += on_threads(period, t, insert).map_err(failed)?.1;
                if p < last {
                    f.rotate();
                }
                total += started.elapsed();
            }
            (total, new)
        }
        _ => on_threads(0..keys.len(), t, insert).map_err(failed)?,
    };
    let absent_keys = &work.absent;
    let (absent_time, false_positives) = on_threads(0..absent_keys.len(), t, |range| {
        Ok(built.found(absent_keys, range, args.batch))
    })
    .map_err(failed)?;
    let (present_time, present_found) = on_threads(0..keys.len(), t, |range| {
        Ok(built.found(keys, range, args.batch))
    })
    .map_err(failed)?;
    let (memory, estimated) = built.memory();
    Ok(Measured {
        structure,
        description: built.describe(),
        threads,
        insert: insert_time,
        new,
        absent: absent_time,
        present: present_time,
        false_positives,
        present_found,
        memory,
        estimated,
    })
}

/// Whether `e` is a rate the structure's layout cannot reach (when built, or at a growth),
/// where other structures may: the failure says how to leave it out.
fn beyond_layout(e: &Error) -> bool {
    matches!(
        e,
        Error::FprBelowLayoutLimit { .. } | Error::GrowingFprBelowLayoutLimit { .. }
    )
}

pub(crate) fn run(args: &Bench) -> Result<(), Failure> {
    // First: a plot path that cannot be written fails now, not after the measurements.
    let plot = args.plot.as_deref().map(PlotFile::open).transpose()?;
    if let (Some(plot), Some(input)) = (&plot, &args.input)
        && plot.is_file_at(input)
    {
        return Err(Failure(format!(
            "--plot {} is the --input file: the plot would replace the keys",
            input.display()
        )));
    }
    let work = match &args.input {
        Some(path) => Workload::from_file(path)?,
        None => Workload::generated(args.items)?,
    };
    let capacity = args.capacity.unwrap_or(work.distinct);
    // Each structure once, in the order first named.
    let mut structures = args.structures.clone();
    let mut named = Vec::new();
    structures.retain(|&s| {
        let first = !named.contains(&s);
        named.push(s);
        first
    });
    // A structure that cannot be built or refuses an insert (a rate its layout cannot reach,
    // a growing filter past its last layer) does not cost the others their results: they are
    // still measured and shown, and its failure is reported after them.
    let mut results = Vec::new();
    let mut failures = Vec::new();
    for &threads in &args.threads {
        for &structure in &structures {
            match measure(structure, args, capacity, threads, &work) {
                Ok(measured) => results.push(measured),
                Err(Failure(why)) => {
                    if !failures.contains(&why) {
                        failures.push(why);
                    }
                }
            }
        }
    }
    if results.is_empty() {
        return Err(Failure(failures.join("; ")));
    }
    if let Some(plot) = plot {
        plot.write(&chart(&results, &work, capacity, args).to_svg())?;
    }
    if args.json {
        table::print(&format!("{}\n", to_json(&results, &work, capacity, args)))?;
    } else {
        table::print(&to_table(&results, &work, capacity, args))?;
    }
    // A Bloom filter that misses a key it holds is broken: say so, and fail.
    let missed: Vec<String> = results
        .iter()
        .filter(|r| r.structure.finds_every_key() && r.present_found < work.present.len() as u64)
        .map(|r| {
            format!(
                "{} with {} threads missed {} inserted keys",
                r.structure.name(),
                r.threads,
                work.present.len() as u64 - r.present_found
            )
        })
        .collect();
    if !missed.is_empty() {
        failures.push(format!(
            "false negatives, a bug in the library: {}",
            missed.join("; ")
        ));
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(Failure(failures.join("; ")))
    }
}

fn to_table(results: &[Measured], work: &Workload, capacity: u64, args: &Bench) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} inserted, {} absent looked up; capacity {}, fpr {}{}\n",
        work.source,
        grouped(work.absent.len() as u64),
        grouped(capacity),
        given(args.fpr),
        if args.batch { ", batches of 1,024" } else { "" }
    );
    let mut table = Table::new(&[
        "structure",
        "threads",
        "insert ns/op",
        "absent ns/op",
        "present ns/op",
        "measured fpr",
        "false pos.",
        "present found",
        "bytes",
        "memory",
    ]);
    for r in results {
        let present = work.present.len();
        table.row(vec![
            r.structure.name().to_string(),
            r.threads.to_string(),
            format!("{:.1}", ns_per_op(r.insert, present)),
            format!("{:.1}", ns_per_op(r.absent, work.absent.len())),
            format!("{:.1}", ns_per_op(r.present, present)),
            rate(r.false_positives as f64 / work.absent.len() as f64),
            grouped(r.false_positives),
            found_percent(r.present_found, present as u64),
            format!(
                "{}{}",
                grouped(r.memory),
                if r.estimated { "*" } else { "" }
            ),
            human_bytes(r.memory),
        ]);
    }
    let _ = write!(out, "{table}");
    out.push('\n');
    let mut described = HashSet::new();
    for r in results {
        if described.insert(r.structure.name()) {
            let _ = writeln!(out, "{:<10}{}", r.structure.name(), r.description);
        }
    }
    let _ = writeln!(
        out,
        "\nns/op: wall-clock time over all threads / keys. measured fpr: the absent keys found. \
         present found: the inserted keys found\n(every one for a Bloom filter; the overwrite \
         map forgets some by design). *: estimated (exact: the table and the keys' heap blocks;\n\
         semi: both copies of the bits, the buffer, the summary and the overflow)."
    );
    out
}

/// `found` of `total` as a percentage: `100%` only when every key was found; otherwise
/// rounded down to 2 decimals, so that one key missed in a million does not print as 100.00%.
fn found_percent(found: u64, total: u64) -> String {
    if found == total {
        return "100%".to_string();
    }
    let hundredths = (u128::from(found) * 10_000 / u128::from(total.max(1))) as u64;
    format!("{}.{:02}%", hundredths / 100, hundredths % 100)
}

fn to_json(
    results: &[Measured],
    work: &Workload,
    capacity: u64,
    args: &Bench,
) -> serde_json::Value {
    let present = work.present.len();
    let absent = work.absent.len();
    json!({
        "keys": {
            "source": match &args.input { Some(_) => "file", None => "generated" },
            "file": args.input.as_ref().map(|p| p.display().to_string()),
            "inserted": present,
            "distinct": work.distinct,
            "absent": absent,
        },
        "capacity": capacity,
        "fpr": args.fpr,
        "batch": args.batch,
        "results": results.iter().map(|r| json!({
            "structure": r.structure.name(),
            "description": r.description,
            "threads": r.threads,
            "insert_ns_per_op": ns_per_op(r.insert, present),
            "inserts_new": r.new,
            "absent_ns_per_op": ns_per_op(r.absent, absent),
            "present_ns_per_op": ns_per_op(r.present, present),
            "false_positives": r.false_positives,
            "measured_fpr": r.false_positives as f64 / absent as f64,
            "present_found": r.present_found,
            "present_found_fraction": r.present_found as f64 / present as f64,
            "memory_bytes": r.memory,
            "memory_estimated": r.estimated,
        })).collect::<Vec<_>>(),
    })
}

fn chart(results: &[Measured], work: &Workload, capacity: u64, args: &Bench) -> BarChart {
    let (present, absent) = (work.present.len(), work.absent.len());
    let series = |name: &str, time: fn(&Measured) -> Duration, ops: usize| {
        (
            name.to_string(),
            results.iter().map(|r| ns_per_op(time(r), ops)).collect(),
        )
    };
    BarChart {
        title: format!(
            "ns per operation, lower is better\n{}, capacity {}, fpr {}",
            work.source,
            grouped(capacity),
            given(args.fpr)
        ),
        y_label: "ns per operation (wall-clock / keys)".to_string(),
        groups: results
            .iter()
            .map(|r| format!("{} ×{}", r.structure.name(), r.threads))
            .collect(),
        series: vec![
            series("insert", |r| r.insert, present),
            series("lookup, absent", |r| r.absent, absent),
            series("lookup, present", |r| r.present, present),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_distinct_and_split_covers_the_range() {
        let w = Workload::generated(1000).ok().unwrap();
        let all: HashSet<&[u8]> = (0..1000)
            .map(|i| w.present.get(i))
            .chain((0..1000).map(|i| w.absent.get(i)))
            .collect();
        assert_eq!(all.len(), 2000);
        assert_eq!(w.present.get(0).len(), 16);
        let parts = split(3..10, 3);
        assert_eq!(parts, [3..5, 5..7, 7..10]);
        assert_eq!(
            chunks(0..2500).collect::<Vec<_>>(),
            [0..1024, 1024..2048, 2048..2500]
        );
    }

    #[test]
    fn a_missed_key_never_prints_as_all() {
        assert_eq!(found_percent(5, 5), "100%");
        assert_eq!(found_percent(999_999, 1_000_000), "99.99%");
        assert_eq!(found_percent(18_984, 20_000), "94.92%");
        assert_eq!(found_percent(0, 7), "0.00%");
    }

    #[test]
    fn the_set_estimate_counts_shards_tables_and_keys() {
        // 4 shards of 128-byte padded locks (on x86-64; the size of the array on any target).
        let set: DashMap<Box<[u8]>, ()> = DashMap::with_shard_amount(4);
        let shards = std::mem::size_of_val(set.shards()) as u64;
        assert_eq!(dash_map_bytes(&set), shards);
        for i in 0..400u32 {
            set.insert(format!("{i:016}").into_bytes().into(), ());
        }
        // 400 keys over 4 shards, about 100 each: 128 buckets a shard (112 fit), or 256 for a
        // shard past 112. Each bucket 17 bytes, 16 control bytes more; 16-byte keys take 32.
        let buckets: u64 = set.shards().iter().map(|s| s.read().buckets() as u64).sum();
        assert!(buckets == 4 * 128 || buckets == 3 * 128 + 256, "{buckets}");
        assert_eq!(
            dash_map_bytes(&set),
            shards + buckets * 17 + 4 * 16 + 400 * 32
        );
        // A duplicate changes nothing.
        set.insert(b"0000000000000000".to_vec().into(), ());
        assert_eq!(set.len(), 400);
    }

    /// Two threads insert the same keys in step (both spin until the other has arrived at the
    /// key), so that both often look a key up before either has added it: exactly one is told
    /// it was new. A version that answers "new" after any insert fails it whenever the two
    /// threads get a core each (thousands of keys new twice; on a 2-core machine loaded by other
    /// jobs, 2 runs in 6 had them at the same time).
    #[test]
    fn the_exact_set_tells_one_racing_thread_a_key_is_new() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        const KEYS: usize = 10_000;
        let work = Workload::generated(KEYS as u64).ok().unwrap();
        let set = Built::Exact(DashMap::new());
        let arrived = AtomicUsize::new(0);
        let new: u64 = std::thread::scope(|s| {
            let racer = || {
                s.spawn(|| {
                    (0..KEYS)
                        .map(|i| {
                            arrived.fetch_add(1, Ordering::SeqCst);
                            let mut spins = 0u32;
                            while arrived.load(Ordering::SeqCst) < 2 * (i + 1) {
                                spins += 1;
                                // Yield after a while: the other thread may be waiting for
                                // this core.
                                if spins.is_multiple_of(1 << 12) {
                                    std::thread::yield_now();
                                } else {
                                    std::hint::spin_loop();
                                }
                            }
                            u64::from(set.insert_one(work.present.get(i)).ok().unwrap())
                        })
                        .sum::<u64>()
                })
            };
            let (a, b) = (racer(), racer());
            a.join().unwrap() + b.join().unwrap()
        });
        assert_eq!(new, KEYS as u64);
        assert!(set.found(&work.present, 0..KEYS, false) == KEYS as u64);
    }

    #[test]
    fn the_semi_estimate_counts_both_copies_the_buffer_and_the_summary() {
        let f = SemiConcurrentBloomFilter::builder(10_000)
            .fpr(0.01)
            .insertions_before_compact(64)
            .build()
            .ok()
            .unwrap();
        let bits = f.snapshot().memory_bytes();
        // Two tables of 256 slots (16 bytes each), 1,024 summary slots (4 bytes each).
        let fixed = 2 * 256 * 16 + 1024 * 4;
        assert_eq!(f.memory_bytes(), 2 * bits + fixed);
        for i in 0..10u32 {
            f.insert(&i);
        }
        // In the buffer: no allocation.
        assert_eq!(f.memory_bytes(), 2 * bits + fixed);
        assert!(f.compact());
        assert_eq!(f.memory_bytes(), 2 * bits + fixed);
    }
}
