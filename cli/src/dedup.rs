//! `seen dedup`: print each record the first time its key is seen.
//!
//! # How a run is organized
//!
//! The input is read in chunks of whole records ([`Reader`]) by a reader thread. A chunk is
//! *prepared* (split into records, each record's key extracted and hashed) by any of
//! `--threads` workers, in any order. Each record is then *decided* in its key's shard: one
//! shard per worker, each with a mutex, deciding its records chunk after chunk in input order
//! ([`decide_in_shards`]): whichever worker holds a shard's mutex decides every chunk that is
//! ready for it. The main thread writes the decided chunks in input order.
//!
//! A key's records all go to one shard, which sees them in input order, so a key is new at its
//! first record whatever the threads do: the exact set prints exactly the one-thread output
//! (unless two keys' 96-bit fingerprints collide: `dedup/exact.rs`).
//! The shards share the filter, though, and run at their own pace: a false positive of a Bloom
//! or growing filter depends on the bits the other shards' keys had set by then, and a growing
//! filter that cannot grow fails at a record that depends on them. So with 2 or more threads
//! the filters' output may differ from the one-thread output, only in false positives (rarely
//! below capacity: none or a few in a million at --fpr 1e-4). The structures whose decisions
//! depend on the order of different keys are decided in one shard, in input order: the
//! windowed filter on the records' times (`--time-field`, the clock follows the records) and
//! the overwrite map (`--remember`, a bucket keeps the last of the keys that share it).
//!
//! The sequencer's state (output, counters) is behind a mutex that the writer holds while it
//! writes a chunk (and, with one thread, while it decides it). On SIGINT or SIGTERM the
//! pipeline stops reading, decides and writes the chunks already read, saves `--state` and
//! exits; with one thread, a handler takes that mutex between two chunks and does the same.
//! The state then holds exactly the keys of the records written, so a later run neither
//! repeats nor loses a record.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, BufWriter, IsTerminal, Read, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use clap::Args;
use seen::hash::Hash128;

use crate::Failure;

mod exact;
mod filter;
mod key;

use crate::units::{parse_duration, parse_size};
use exact::ExactSet;
use filter::{Filter, generations, now};
use key::{Key, Keyer};

#[derive(Args, Clone)]
#[command(group = clap::ArgGroup::new("structure").multiple(false).args(["exact", "grow", "window", "remember", "memory"]))]
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
    /// `user.id`, `items.0.sku` for an array's first element; a string's text, any other
    /// value's JSON). A record without it has the empty key.
    #[arg(long, value_name = "PATH", conflicts_with = "field")]
    json_key: Option<String>,
    /// Keep a 96-bit fingerprint of every key (14 to 18 bytes a key: memory grows with the
    /// distinct keys). Exact but for fingerprint collisions: with N distinct keys, the
    /// probability that any new record of the run is dropped is at most N²/2^97 (2.5e-15 for
    /// 20 million keys, 6.3e-12 for a billion), for keys not crafted to collide under xxh3.
    #[arg(long, help_heading = "Structure (one of)")]
    exact: bool,
    /// Grow the filter past --capacity (RedisBloom's scaling filter) instead of letting its
    /// false-positive rate rise.
    #[arg(long, help_heading = "Structure (one of)")]
    grow: bool,
    /// Forget keys after a window of time: a key is a duplicate for at least WINDOW - PERIOD
    /// and at most WINDOW after it was first printed (a windowed filter of WINDOW / PERIOD
    /// generations of --capacity keys each). Time is the wall clock, or --time-field. Up to
    /// 7 generations share one cache line: `--window 7d --period 1d` takes about half the
    /// memory of `8d` (see `seen size --window 8d --period 1d`).
    #[arg(long, value_name = "WINDOW", value_parser = parse_duration, requires = "period", help_heading = "Structure (one of)")]
    window: Option<Duration>,
    /// With --window: how often the oldest generation is forgotten (`1d`; WINDOW must be a
    /// multiple of it, from 1 to 63 times; more than 15 times needs a --fpr above 1e-4, 4e-4
    /// for 63).
    #[arg(long, value_name = "PERIOD", value_parser = parse_duration, requires = "window", help_heading = "Structure (one of)")]
    period: Option<Duration>,
    /// With --window: take each record's time from field N (with -f's --delimiter) or, with
    /// --json-key, from the JSON value at PATH: Unix seconds (`1700000000`, `1700000000.25`)
    /// or RFC 3339 (`2026-11-22T09:30:00Z`, `2026-11-22`). Time never runs backwards: a record
    /// older than one before it counts at the newer time. A record dated more than WINDOW
    /// after the wall clock is an error.
    #[arg(
        long,
        value_name = "N|PATH",
        requires = "window",
        help_heading = "Structure (one of)"
    )]
    time_field: Option<String>,
    /// Never drop a new record: an overwrite map that remembers a key across N later records
    /// with probability --remember-probability, and may print a duplicate it forgot.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..), help_heading = "Structure (one of)")]
    remember: Option<u64>,
    /// With --remember: the probability that a key is still remembered N records later.
    #[arg(
        long,
        value_name = "Q",
        default_value_t = 0.9,
        requires = "remember",
        help_heading = "Structure (one of)"
    )]
    remember_probability: f64,
    /// Distinct keys the filter is sized for (the first layer's with --grow, each period's
    /// with --window).
    #[arg(
        long,
        default_value_t = 10_000_000,
        value_name = "N",
        help_heading = "Sizing"
    )]
    capacity: u64,
    /// The false-positive rate at capacity: the probability that a new record is dropped
    /// (over the whole window with --window).
    #[arg(
        long,
        default_value_t = 1e-4,
        value_name = "P",
        help_heading = "Sizing"
    )]
    fpr: f64,
    /// Size the filter by its memory instead of --capacity: the most distinct keys that
    /// SIZE holds at --fpr (`256MiB`, `1GiB`, `500MB`; K, M, G are binary, KB, MB, GB decimal).
    #[arg(long, value_name = "SIZE", value_parser = parse_size, conflicts_with_all = ["capacity", "state"], help_heading = "Sizing")]
    memory: Option<u64>,
    /// Print only the duplicates (each time a key is seen again).
    #[arg(long, conflicts_with = "count", help_heading = "Output")]
    repeated: bool,
    /// Print the number of new and of duplicate records instead of the records.
    #[arg(long, help_heading = "Output")]
    count: bool,
    /// Print a summary on standard error at the end: records, duplicates, records/s, the
    /// structure's memory and estimated false-positive rate.
    #[arg(long, help_heading = "Output")]
    stats: bool,
    /// No progress bar (it shows on standard error only when that is a terminal).
    #[arg(long, help_heading = "Output")]
    no_progress: bool,
    /// Load the filter from FILE if it exists, and save it there at the end and on SIGINT or
    /// SIGTERM (crash-safely: a temporary file renamed over it), so that a daily run remembers
    /// the days before. A failed run (exit status 2) leaves FILE as it was.
    #[arg(long, value_name = "FILE", conflicts_with = "exact")]
    state: Option<PathBuf>,
    /// Threads that split, hash and decide records (default: one per core). With 2 or more,
    /// one more thread reads and the main thread writes, in input order. Every key is decided
    /// by one thread in input order, so the output is in input order and no key is printed
    /// twice. With --exact, --remember or --time-field it is the same for every count; a
    /// Bloom filter's rare false positives may differ.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..1025))]
    threads: Option<u64>,
}

/// Bytes read at a time; a chunk holds at least this much input (or what one read of a pipe
/// gave), cut after its last complete record.
const CHUNK: usize = 1 << 18;

/// The status of a run ended by SIGINT or SIGTERM (128 + SIGINT's number, as shells report).
const INTERRUPTED_STATUS: i32 = 130;

/// A chunk of input on its way through the pipeline.
#[derive(Default)]
struct Work {
    /// The chunk's place in the input.
    seq: u64,
    /// The input it came from (an index into the input names).
    input: usize,
    /// Whole records, each followed by its terminator (the input's last record may lack it).
    bytes: Vec<u8>,
    /// A read failure after this chunk's records (the reader stops there).
    failed: Option<String>,
    /// Prepared: where each record ends (before its terminator).
    ends: Vec<usize>,
    /// Prepared: each record's key hash (the filter's hasher; the exact set's is xxh3-128).
    hashes: Vec<Hash128>,
    /// Prepared, with --time-field: each record's time (ns since the Unix epoch).
    times: Vec<u64>,
    /// Prepared: the first record that could not be keyed, and why (the records before it
    /// are prepared).
    bad: Option<(usize, String)>,
    /// Decided, by each shard: whether each of its records is new, in order; and the first
    /// record it could not insert.
    decided: Vec<OnceLock<Decided>>,
    /// The shards that have not decided yet.
    undecided: AtomicUsize,
}

/// One shard's decisions for one chunk.
#[derive(Default)]
struct Decided {
    new: Vec<bool>,
    failed: Option<(usize, String)>,
}

impl Work {
    /// Splits the chunk into records, keys and hashes them.
    fn prepare(&mut self, keyer: &Keyer, filter: &Filter, terminator: u8, shards: usize) {
        self.ends.clear();
        self.hashes.clear();
        self.times.clear();
        self.bad = None;
        let mut start = 0;
        while start < self.bytes.len() {
            let end = memchr::memchr(terminator, &self.bytes[start..])
                .map_or(self.bytes.len(), |i| start + i);
            let record = &self.bytes[start..end];
            match keyer.of(record) {
                Ok((key, time)) => {
                    self.hashes.push(filter.hash(&key));
                    if let Some(t) = time {
                        self.times.push(t);
                    }
                }
                Err(why) => {
                    self.bad = Some((self.ends.len(), why));
                    break;
                }
            }
            self.ends.push(end);
            start = end + 1;
        }
        self.decided.clear();
        self.decided.resize_with(shards, OnceLock::new);
        self.undecided = AtomicUsize::new(shards);
    }
}

/// The shard of a key: all records of one key go to one shard, which decides them in input
/// order, so a key is new exactly at its first record whatever the threads do.
fn shard_of(hash: Hash128, shards: usize) -> usize {
    (((hash.h2 >> 32) * shards as u64) >> 32) as usize
}

/// A shard: decides its records chunk after chunk, in input order, under its mutex.
#[derive(Default)]
struct Shard {
    /// The next chunk to decide, and the chunks prepared ahead of it.
    next: u64,
    ready: BTreeMap<u64, Arc<Work>>,
    /// The exact set's keys of this shard (their fingerprints).
    exact: ExactSet,
    /// With --time-field (one shard): the latest time seen.
    time: u64,
    /// The windowed filter's period last maintained.
    period_index: u64,
}

impl Shard {
    /// Decides the records of `work` that are this shard's (`s` of `shards`), in order.
    fn decide(&mut self, filter: &Filter, work: &Work, s: usize, shards: usize) -> Decided {
        let mut mine =
            (0..work.ends.len()).filter(|&i| shards == 1 || shard_of(work.hashes[i], shards) == s);
        let mut decided = Decided::default();
        let new = &mut decided.new;
        match filter {
            Filter::Exact => {
                if let Err(e) = self
                    .exact
                    .insert_many(mine.clone().map(|i| work.hashes[i]), new)
                {
                    let i = mine
                        .nth(new.len())
                        .expect("the record that failed is this shard's");
                    decided.failed = Some((i, e.to_string()));
                }
            }
            Filter::Bloom(f) => {
                f.insert_many_hashes(mine.map(|i| work.hashes[i]), new);
            }
            Filter::Remember(m) => {
                m.insert_many_hashes(mine.map(|i| work.hashes[i]), new);
            }
            Filter::Growing(f) => {
                for i in mine {
                    match f.insert_hash(work.hashes[i]) {
                        Ok(n) => new.push(n),
                        Err(e) => {
                            decided.failed = Some((i, format!("cannot insert: {e}")));
                            break;
                        }
                    }
                }
            }
            Filter::Windowed {
                filter,
                clock,
                period,
                from_records,
            } => {
                let period = period.as_nanos() as u64;
                let tick = |t: u64, shard: &mut Self| {
                    clock.set(Duration::from_nanos(t));
                    if t / period != shard.period_index {
                        shard.period_index = t / period;
                        filter.maintain();
                    }
                };
                let wall = now().as_nanos() as u64;
                if !*from_records {
                    tick(wall, self);
                }
                // A record dated past the wall clock by more than the window would forget
                // every key and hold the clock there: refused.
                let window = period.saturating_mul(u64::from(filter.generations()));
                let latest = wall.saturating_add(window);
                for i in mine {
                    if *from_records && work.times[i] > self.time {
                        if work.times[i] > latest {
                            decided.failed = Some((
                                i,
                                "its time is more than --window after the wall clock (it \
                                 would forget every key, and hold the clock there)"
                                    .to_string(),
                            ));
                            break;
                        }
                        self.time = work.times[i];
                        tick(self.time, self);
                    }
                    new.push(filter.insert_hash(work.hashes[i]));
                }
            }
        }
        decided
    }
}

/// Hands a prepared chunk to every shard; each decides what is ready in order. Returns the
/// chunks this call completed (all shards decided), for the writer.
fn decide_in_shards(
    work: Arc<Work>,
    shards: &[Mutex<Shard>],
    filter: &Filter,
    mut done: impl FnMut(Arc<Work>),
) {
    let n = shards.len();
    for (s, shard) in shards.iter().enumerate() {
        let mut shard = shard.lock().unwrap_or_else(PoisonError::into_inner);
        shard.ready.insert(work.seq, Arc::clone(&work));
        loop {
            let next = shard.next;
            let Some(ready) = shard.ready.remove(&next) else {
                break;
            };
            shard.next += 1;
            let decided = shard.decide(filter, &ready, s, n);
            let _ = ready.decided[s].set(decided);
            if ready.undecided.fetch_sub(1, Ordering::AcqRel) == 1 {
                done(ready);
            }
        }
    }
}

/// Reads the inputs in chunks of whole records.
struct Reader {
    inputs: Vec<Option<PathBuf>>,
    /// The input being read, and its reader.
    at: usize,
    open: Option<Box<dyn Read + Send>>,
    /// The bytes read past the last whole record.
    carry: Vec<u8>,
    terminator: u8,
    seq: u64,
    done: bool,
}

impl Reader {
    fn new(inputs: Vec<Option<PathBuf>>, terminator: u8) -> Self {
        Self {
            inputs,
            at: 0,
            open: None,
            carry: Vec::new(),
            terminator,
            seq: 0,
            done: false,
        }
    }

    /// The next chunk (in `spare`'s buffers), or `None` after the last. A chunk with `failed`
    /// set is the last.
    fn next(&mut self, mut spare: Work) -> Option<Work> {
        if self.done {
            return None;
        }
        spare.bytes.clear();
        spare.failed = None;
        spare.bytes.append(&mut self.carry);
        // `spare.bytes[..clean]` holds no terminator (the carry is what followed the last
        // one): a long record is searched once, not again after every read.
        let mut clean = spare.bytes.len();
        while self.at < self.inputs.len() {
            let input = self.at;
            if self.open.is_none() {
                match &self.inputs[input] {
                    None => self.open = Some(Box::new(io::stdin())),
                    Some(path) => match File::open(path) {
                        Ok(file) => self.open = Some(Box::new(file)),
                        Err(e) => return Some(self.fail(spare, e)),
                    },
                }
            }
            let reader = self.open.as_mut().expect("opened above");
            loop {
                let len = spare.bytes.len();
                // At most a chunk at a time: the buffer is zeroed before each read, and a
                // pipe gives 64 KiB a read, so more would cost more than the read.
                let want = CHUNK;
                spare.bytes.resize(len + want, 0);
                let read = reader.read(&mut spare.bytes[len..]);
                spare.bytes.truncate(len + *read.as_ref().unwrap_or(&0));
                let n = match read {
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Some(self.fail(spare, e)),
                };
                if n == 0 {
                    // The end of this input (its last record may lack a terminator).
                    self.open = None;
                    self.at += 1;
                    if spare.bytes.is_empty() {
                        break;
                    }
                    return Some(self.chunk(spare, input));
                }
                // A full chunk, or a short read (a pipe that has nothing more yet): pass on
                // the whole records read so far, keep the rest.
                if spare.bytes.len() >= CHUNK || n < want {
                    match memchr::memrchr(self.terminator, &spare.bytes[clean..]) {
                        Some(i) => {
                            let last = clean + i;
                            self.carry.extend_from_slice(&spare.bytes[last + 1..]);
                            spare.bytes.truncate(last + 1);
                            return Some(self.chunk(spare, input));
                        }
                        None => clean = spare.bytes.len(),
                    }
                }
            }
        }
        self.done = true;
        None
    }

    fn chunk(&mut self, mut work: Work, input: usize) -> Work {
        work.seq = self.seq;
        work.input = input;
        self.seq += 1;
        work
    }

    /// A chunk that reports `e` after the records read before it.
    fn fail(&mut self, mut work: Work, e: io::Error) -> Work {
        work.failed = Some(e.to_string());
        self.done = true;
        let input = self.at;
        self.chunk(work, input)
    }
}

/// The in-order end of a run: writes, counts, saves.
struct Sequencer {
    args: Dedup,
    filter: Arc<Filter>,
    shards: Arc<[Mutex<Shard>]>,
    out: BufWriter<io::Stdout>,
    terminator: u8,
    names: Vec<String>,
    /// The input being counted, and its records so far (for error messages).
    input: usize,
    input_records: u64,
    records: u64,
    new: u64,
    bytes: u64,
    started: Instant,
    progress: Option<indicatif::ProgressBar>,
    last_draw: Instant,
    /// Whether a pipeline's writer loop ends an interrupted run (else the signal's thread).
    pipeline: bool,
    /// Set once the run has ended (normally, by a failure, or interrupted).
    finished: bool,
}

impl Sequencer {
    /// Writes one decided chunk (the next in input order) and counts it.
    fn consume(&mut self, work: &Work) -> Result<(), Failure> {
        if work.input != self.input {
            self.input = work.input;
            self.input_records = 0;
        }
        // Each shard's decisions, in record order; the first record not decided.
        let shards = work.decided.len();
        let mut cursors: Vec<_> = work
            .decided
            .iter()
            .map(|d| d.get().map_or(&[][..], |d| &d.new[..]).iter())
            .collect();
        let mut failed: Option<(usize, &str)> = work.bad.as_ref().map(|(i, w)| (*i, w.as_str()));
        for d in work.decided.iter().filter_map(OnceLock::get) {
            if let Some((i, why)) = &d.failed
                && failed.is_none_or(|(f, _)| *i < f)
            {
                failed = Some((*i, why));
            }
        }
        let decided = failed.map_or(work.ends.len(), |(i, _)| i);
        let mut run: Option<(usize, usize)> = None;
        let starts = std::iter::once(0).chain(work.ends.iter().map(|&e| e + 1));
        for (i, (start, &end)) in starts.zip(&work.ends).take(decided).enumerate() {
            let shard = if shards == 1 {
                0
            } else {
                shard_of(work.hashes[i], shards)
            };
            let is_new = *cursors[shard]
                .next()
                .expect("every shard decided its records");
            self.new += u64::from(is_new);
            if self.args.count || is_new == self.args.repeated {
                if let Some((s, e)) = run.take() {
                    self.write_run(&work.bytes, s, e)?;
                }
                continue;
            }
            // Records are back to back, and a dropped one ends the run above: a kept record
            // extends the run, or starts one.
            run = Some((run.map_or(start, |(s, _)| s), end));
        }
        if let Some((s, e)) = run {
            self.write_run(&work.bytes, s, e)?;
        }
        self.records += decided as u64;
        self.input_records += decided as u64;
        self.bytes += work.bytes.len() as u64;
        self.draw();
        let name = &self.names[work.input];
        if let Some((_, why)) = failed {
            let unit = if self.terminator == b'\n' {
                "line"
            } else {
                "record"
            };
            return Err(Failure(format!(
                "{name}, {unit} {}: {why}",
                self.input_records + 1
            )));
        }
        if let Some(why) = &work.failed {
            return Err(Failure(format!("cannot read {name}: {why}")));
        }
        Ok(())
    }

    /// Writes the records `bytes[start..end]` (whole records, the terminators between them
    /// included) and a terminator.
    fn write_run(&mut self, bytes: &[u8], start: usize, end: usize) -> Result<(), Failure> {
        self.out
            .write_all(&bytes[start..end])
            .and_then(|()| self.out.write_all(&[self.terminator]))
            .map_err(write_failure)
    }

    fn draw(&mut self) {
        let Some(bar) = &self.progress else { return };
        if self.last_draw.elapsed() < Duration::from_millis(100) {
            return;
        }
        self.last_draw = Instant::now();
        let secs = self.started.elapsed().as_secs_f64().max(1e-9);
        bar.set_position(self.bytes);
        bar.set_message(format!(
            "{} records, {} duplicates, {:.2}M records/s",
            indicatif::HumanCount(self.records),
            indicatif::HumanCount(self.records - self.new),
            self.records as f64 / secs / 1e6
        ));
    }

    /// Ends the run: the counts (`--count`), the output flushed, the state saved, the summary
    /// (`--stats`). `save` is false after a failure: the state file keeps the last good run.
    fn finish(&mut self, save: bool) -> Result<(), Failure> {
        self.finished = true;
        if let Some(bar) = self.progress.take() {
            bar.finish_and_clear();
        }
        if self.args.count {
            writeln!(
                self.out,
                "{} new\n{} duplicates",
                self.new,
                self.records - self.new
            )
            .map_err(write_failure)?;
        }
        match self.out.flush() {
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {}
            other => other.map_err(write_failure)?,
        }
        if save && let Some(path) = &self.args.state {
            self.filter
                .save(path)
                .map_err(|e| Failure(format!("cannot save the state {}: {e}", path.display())))?;
        }
        if self.args.stats {
            let secs = self.started.elapsed().as_secs_f64();
            say!(
                "seen: {} records, {} new, {} duplicates, {:.0} records/s",
                self.records,
                self.new,
                self.records - self.new,
                self.records as f64 / secs.max(1e-9)
            );
            say!(
                "seen: {}",
                self.filter.describe(exact_set(&self.shards), &self.args)
            );
        }
        Ok(())
    }
}

fn write_failure(e: io::Error) -> Failure {
    if e.kind() == io::ErrorKind::BrokenPipe {
        // The reader of the output has gone (`seen dedup | head`): stop quietly.
        std::process::exit(0);
    }
    Failure(format!("cannot write the output: {e}"))
}

/// Locks the sequencer, whatever a panicking holder left.
fn lock(m: &Mutex<Sequencer>) -> MutexGuard<'_, Sequencer> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
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
        (None, Some(n)) => Key::Field(n),
        (None, None) => Key::Whole,
    };
    let time = match &args.time_field {
        None => None,
        Some(spec) if args.json_key.is_some() => {
            Some(Key::Json(spec.split('.').map(str::to_string).collect()))
        }
        Some(spec) => match spec.parse::<u64>() {
            Ok(n) if n >= 1 => Some(Key::Field(n)),
            _ => {
                return Err(Failure(format!(
                    "--time-field {spec:?}: a field number from 1 (or a JSON path with \
                     --json-key)"
                )));
            }
        },
    };
    if let (Some(window), Some(period)) = (args.window, args.period) {
        generations(window, period)?;
    }
    let terminator = if args.zero_terminated { 0 } else { b'\n' };
    let filter = Arc::new(Filter::open(args)?);
    let keyer = Keyer {
        key,
        time,
        delimiter,
    };
    let inputs: Vec<Option<PathBuf>> = if args.files.is_empty() {
        vec![None]
    } else {
        args.files
            .iter()
            .map(|p| (p.as_os_str() != "-").then(|| p.clone()))
            .collect()
    };
    let names = inputs
        .iter()
        .map(|i| {
            i.as_ref()
                .map_or("standard input".into(), |p| p.display().to_string())
        })
        .collect();
    // The progress bar's length: the files' sizes, when every input is a file.
    let total: Option<u64> = inputs
        .iter()
        .map(|i| {
            std::fs::metadata(i.as_ref()?)
                .ok()
                .filter(|m| m.is_file())
                .map(|m| m.len())
        })
        .sum();
    let progress = (!args.no_progress && io::stderr().is_terminal()).then(|| {
        let bar = match total {
            Some(len) => indicatif::ProgressBar::new(len).with_style(
                indicatif::ProgressStyle::with_template(
                    "{bar:30} {bytes}/{total_bytes} {bytes_per_sec} {msg} ({eta} left)",
                )
                .expect("a valid template"),
            ),
            None => indicatif::ProgressBar::new_spinner().with_style(
                indicatif::ProgressStyle::with_template("{spinner} {bytes} {bytes_per_sec} {msg}")
                    .expect("a valid template"),
            ),
        };
        bar.with_finish(indicatif::ProgressFinish::AndClear)
    });
    let threads = args.threads.map_or_else(
        || std::thread::available_parallelism().map_or(1, |n| n.get()),
        |n| n as usize,
    );
    // Records with their own times are decided in one order (the clock follows them), and so
    // is the overwrite map (a bucket keeps the last of the keys that share it: the order of
    // different keys counts); the other concurrent structures by one shard per thread.
    let shards = if threads == 1 || args.time_field.is_some() || args.remember.is_some() {
        1
    } else {
        threads
    };
    let shards: Arc<[Mutex<Shard>]> = (0..shards).map(|_| Mutex::default()).collect();
    let sequencer = Arc::new(Mutex::new(Sequencer {
        args: args.clone(),
        filter: Arc::clone(&filter),
        shards: Arc::clone(&shards),
        out: BufWriter::with_capacity(1 << 17, io::stdout()),
        terminator,
        names,
        input: 0,
        input_records: 0,
        records: 0,
        new: 0,
        bytes: 0,
        started: Instant::now(),
        progress,
        last_draw: Instant::now(),
        pipeline: threads > 1,
        finished: false,
    }));
    on_interrupt(Arc::clone(&sequencer));
    let reader = Reader::new(inputs, terminator);
    let result = if threads <= 1 {
        one_thread(reader, &keyer, &filter, &shards, &sequencer, terminator)
    } else {
        pipeline(
            reader, keyer, filter, shards, &sequencer, terminator, threads,
        )
    };
    let mut s = lock(&sequencer);
    match result {
        Ok(()) => s.finish(true),
        Err(failure) => {
            // Write out what was decided; keep the last good state.
            let _ = s.finish(false);
            Err(failure)
        }
    }
}

/// The keys in the exact set's shards, and the bytes they take.
fn exact_set(shards: &[Mutex<Shard>]) -> (usize, usize) {
    shards.iter().fold((0, 0), |(keys, bytes), s| {
        let s = s.lock().unwrap_or_else(PoisonError::into_inner);
        (keys + s.exact.len(), bytes + s.exact.memory_bytes())
    })
}

/// Whether SIGINT or SIGTERM arrived.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// A signal this soon after the first is the same one delivered twice (GNU `timeout` sends
/// the signal it forwards to the command and to its process group), not a second one.
const SAME_SIGNAL: Duration = Duration::from_millis(250);

/// On SIGINT or SIGTERM: the run ends after the chunks read so far are written (by the
/// pipeline's writer, or here between two chunks of a one-thread run), with the state saved
/// ([`interrupted`]). A second signal (at least [`SAME_SIGNAL`] after the first) exits at
/// once; the state file then keeps its last complete save (a save is renamed into place
/// whole).
fn on_interrupt(sequencer: Arc<Mutex<Sequencer>>) {
    static FIRST: OnceLock<Instant> = OnceLock::new();
    let installed = ctrlc::set_handler(move || {
        if INTERRUPTED.swap(true, Ordering::SeqCst) {
            if FIRST.get().is_some_and(|at| at.elapsed() < SAME_SIGNAL) {
                return;
            }
            std::process::exit(INTERRUPTED_STATUS);
        }
        let _ = FIRST.set(Instant::now());
        let sequencer = Arc::clone(&sequencer);
        // The handler must return to see a second signal: finish on another thread.
        std::thread::spawn(move || {
            let mut s = lock(&sequencer);
            if !s.pipeline {
                interrupted(&mut s);
            }
        });
    });
    // Without a handler (another one is installed), a signal ends the process as usual: the
    // state file keeps its last save.
    let _ = installed;
}

/// Ends an interrupted run: the records decided are written, the state saved, then the
/// process exits with status 130. Nothing if the run had already finished.
fn interrupted(s: &mut Sequencer) {
    if s.finished {
        return;
    }
    let status = match s.finish(true) {
        Ok(()) => INTERRUPTED_STATUS,
        Err(Failure(why)) => {
            say!("seen: {why}");
            2
        }
    };
    say!("seen: interrupted after {} records", s.records);
    std::process::exit(status);
}

/// Everything on the calling thread: read, prepare, decide, write.
fn one_thread(
    mut reader: Reader,
    keyer: &Keyer,
    filter: &Filter,
    shards: &[Mutex<Shard>],
    sequencer: &Mutex<Sequencer>,
    terminator: u8,
) -> Result<(), Failure> {
    let mut spare = Work::default();
    while let Some(mut work) = reader.next(spare) {
        work.prepare(keyer, filter, terminator, 1);
        // The sequencer is held from the decisions to the write: a signal's thread that saves
        // the state between them would save keys whose records are never written.
        let mut s = lock(sequencer);
        if s.finished {
            // Interrupted, and ended by the signal's thread.
            return Ok(());
        }
        let mut shard = shards[0].lock().unwrap_or_else(PoisonError::into_inner);
        let decided = shard.decide(filter, &work, 0, 1);
        drop(shard);
        let _ = work.decided[0].set(decided);
        s.consume(&work)?;
        // A short chunk: the input trickles in (a pipe, a terminal), and the next read may
        // wait: let the output out first.
        if work.bytes.len() < CHUNK / 2 {
            s.out.flush().map_err(write_failure)?;
        }
        spare = work;
    }
    Ok(())
}

/// Chunks read but not yet written, and whether the reader may add more.
#[derive(Default)]
struct Intake {
    read: u64,
    closed: bool,
}

/// A reader thread, `threads` workers that prepare chunks and decide them in their shards,
/// and the calling thread, which writes them in order. The threads are not joined: after a
/// failure the reader may be blocked on a read that never ends, and the process exits
/// without it.
fn pipeline(
    mut reader: Reader,
    keyer: Keyer,
    filter: Arc<Filter>,
    shards: Arc<[Mutex<Shard>]>,
    sequencer: &Mutex<Sequencer>,
    terminator: u8,
    threads: usize,
) -> Result<(), Failure> {
    use crossbeam_channel::{RecvTimeoutError, bounded, unbounded};
    // The chunks in flight, read but not yet written: their buffers circulate, so the
    // reader waits when the writer falls behind.
    let in_flight = 4 * threads;
    let (to_workers, for_workers) = unbounded::<Work>();
    let (to_writer, for_writer) = unbounded::<Arc<Work>>();
    let (recycle, recycled) = bounded::<Work>(in_flight);
    for _ in 0..in_flight {
        let _ = recycle.send(Work::default());
    }
    let intake = Arc::new(Mutex::new(Intake::default()));
    let reader_intake = Arc::clone(&intake);
    std::thread::spawn(move || {
        while let Ok(spare) = recycled.recv() {
            let Some(work) = reader.next(spare) else {
                break;
            };
            let mut intake = reader_intake.lock().unwrap_or_else(PoisonError::into_inner);
            if intake.closed {
                break;
            }
            intake.read += 1;
            drop(intake);
            if to_workers.send(work).is_err() {
                break;
            }
        }
    });
    let keyer = Arc::new(keyer);
    for _ in 0..threads {
        let (input, output) = (for_workers.clone(), to_writer.clone());
        let (keyer, filter, shards) =
            (Arc::clone(&keyer), Arc::clone(&filter), Arc::clone(&shards));
        std::thread::spawn(move || {
            for mut work in input {
                work.prepare(&keyer, &filter, terminator, shards.len());
                decide_in_shards(Arc::new(work), &shards, &filter, |done| {
                    let _ = output.send(done);
                });
            }
        });
    }
    drop((for_workers, to_writer));
    let mut pending: BTreeMap<u64, Arc<Work>> = BTreeMap::new();
    let mut next = 0u64;
    // Once interrupted: the number of chunks read, all of which are written before the end.
    let mut last: Option<u64> = None;
    loop {
        while let Some(work) = pending.remove(&next) {
            next += 1;
            lock(sequencer).consume(&work)?;
            // The buffers go back to the reader (a fresh set if a worker still holds these).
            let _ = recycle.try_send(Arc::try_unwrap(work).unwrap_or_default());
        }
        if INTERRUPTED.load(Ordering::SeqCst) && last.is_none() {
            let mut intake = intake.lock().unwrap_or_else(PoisonError::into_inner);
            intake.closed = true;
            last = Some(intake.read);
        }
        if last.is_some_and(|last| next >= last) {
            interrupted(&mut lock(sequencer));
        }
        // Nothing ready: let the output out before waiting (for a stream such as
        // `tail -f log | seen dedup`).
        let work = match for_writer.try_recv() {
            Ok(work) => Ok(work),
            Err(_) => {
                lock(sequencer).out.flush().map_err(write_failure)?;
                for_writer.recv_timeout(Duration::from_millis(100))
            }
        };
        match work {
            Ok(work) => {
                pending.insert(work.seq, work);
            }
            Err(RecvTimeoutError::Timeout) => lock(sequencer).draw(),
            Err(RecvTimeoutError::Disconnected) => return Ok(()),
        }
    }
}
