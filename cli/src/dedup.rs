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
//! With `--state`, a record is decided by a lookup: new when its key is neither in the
//! structure nor pending in its shard. Its key is *committed* (inserted into the structure)
//! only once the record is written, that is accepted by the system ([`output`]): the shards
//! commit the keys of the chunks written when they next decide, and the end of the run commits
//! the rest up to the last record written ([`pending`]). So the `--state` saved holds exactly
//! the keys of the records written, however the run ends: at the end of the input, on SIGINT
//! or SIGTERM (the chunks already read are decided and written first), or when the reader of
//! the output goes away (`seen dedup --state s | head`), and a later run neither repeats nor
//! loses a record. One run at a time holds a state ([`lock`]). Without `--state` nothing
//! shows what the structure holds, and a key goes into it as it is decided (one access, not
//! a lookup and a later insert: about half the time per record).
//!
//! The sequencer's state (output, counters) is behind a mutex that the writer holds while it
//! writes a chunk (and, with one thread, while it decides it); with one thread, a signal's
//! handler takes that mutex between two chunks to end the run.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::hash::BuildHasherDefault;
use std::io::{self, IsTerminal, Read};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use clap::Args;
use seen::hash::Hash128;

use crate::Failure;

mod exact;
mod filter;
mod key;
mod lock;
mod output;
mod pending;

use crate::units::{parse_duration, parse_size};
use exact::ExactSet;
use filter::{Filter, generations, now};
use key::{Key, Keyer, Missing};
use output::{Cut, Output};
use pending::{Entry, Pending, Spread};

#[derive(Args, Clone)]
#[command(group = clap::ArgGroup::new("structure").multiple(false).args(["exact", "grow", "fixed", "window", "remember", "memory"]))]
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
    /// value's JSON). A record that is not JSON is an error; one without a value at PATH
    /// (`null` counts as none), or that is not an object, is handled by --missing-key.
    #[arg(long, value_name = "PATH", conflicts_with = "field")]
    json_key: Option<String>,
    /// What a record without a key is (one with fewer fields than -f N, or without --json-key's
    /// PATH): `error` (the default) stops the run at it with its line number; `print` prints
    /// it, never deduplicated (counted apart in --stats). Such records are never given a
    /// shared key: that would drop all but the first as duplicates.
    #[arg(long, value_enum, default_value_t = Missing::Error, value_name = "WHAT")]
    missing_key: Missing,
    /// Keep a 96-bit fingerprint of every key (14 to 18 bytes a key: memory grows with the
    /// distinct keys). Exact but for fingerprint collisions: with N distinct keys, the
    /// probability that any new record of the run is dropped is at most N²/2^97 (2.5e-15 for
    /// 20 million keys, 6.3e-12 for a billion), for keys not crafted to collide under xxh3.
    #[arg(long, help_heading = "Structure (one of)")]
    exact: bool,
    /// Grow the filter past --capacity (RedisBloom's scaling filter), so that its
    /// false-positive rate stays under --fpr for any number of keys. The default.
    #[arg(long, help_heading = "Structure (one of)")]
    grow: bool,
    /// A filter of fixed size for --capacity keys (or --memory): bounded memory, but past
    /// its capacity it drops more new records than --fpr says (a warning tells when).
    #[arg(long, help_heading = "Structure (one of)")]
    fixed: bool,
    /// Forget keys after a window of time: a repeat within WINDOW of a key's first printed
    /// record is always dropped; one more than WINDOW + PERIOD later is always printed
    /// (between the two, it depends on the time of day the key came). A windowed filter of
    /// WINDOW / PERIOD + 1 generations of --capacity keys each. Time is the wall clock, or
    /// --time-field. Up to 7 generations share one cache line: `--window 6d --period 1d`
    /// takes about half the memory of `7d` (see `seen size --window 7d --period 1d`).
    #[arg(long, value_name = "WINDOW", value_parser = parse_duration, requires = "period", help_heading = "Structure (one of)")]
    window: Option<Duration>,
    /// With --window: how often the oldest generation is forgotten (`1d`; WINDOW must be a
    /// multiple of it, from 1 to 62 times; more than 14 times needs a --fpr above 1e-4, 4e-4
    /// for 62).
    #[arg(long, value_name = "PERIOD", value_parser = parse_duration, requires = "window", help_heading = "Structure (one of)")]
    period: Option<Duration>,
    /// With --window: take each record's time from field N (with -f's --delimiter) or, with
    /// --json-key, from the JSON value at PATH: Unix seconds (`1700000000`, `1700000000.25`)
    /// or RFC 3339 (`2026-11-22T09:30:00Z`, `2026-11-22`). Time never runs backwards: a record
    /// older than one before it (or than the --state's time) counts at the newer time;
    /// --stats counts them, and a warning says when one is more than WINDOW older. A record
    /// dated more than WINDOW after the wall clock is an error. A --state remembers which
    /// clock it follows: a run that would switch between --time-field and the wall clock is
    /// refused.
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
    /// Distinct keys the filter is sized for (the first layer's when it grows, each period's
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
    /// A fixed-size filter of at most SIZE instead of --capacity: the most distinct keys that
    /// SIZE holds at --fpr (`256MiB`, `1GiB`, `500MB`; K, M, G are binary, KB, MB, GB
    /// decimal). Past them it drops more new records than --fpr (a warning tells when).
    #[arg(long, value_name = "SIZE", value_parser = parse_size, conflicts_with_all = ["capacity", "state"], help_heading = "Sizing")]
    memory: Option<u64>,
    /// Print only the duplicates (each time a key is seen again).
    #[arg(long, conflicts_with = "count", help_heading = "Output")]
    repeated: bool,
    /// Print the number of new and of duplicate records instead of the records.
    #[arg(long, help_heading = "Output")]
    count: bool,
    /// Print a summary on standard error at the end: records, new, duplicates (and how many
    /// of them may be false positives), records/s, the structure's memory and estimated
    /// false-positive rate.
    #[arg(long, help_heading = "Output")]
    stats: bool,
    /// No progress bar (it shows on standard error only when that is a terminal).
    #[arg(long, help_heading = "Output")]
    no_progress: bool,
    /// Load the filter from FILE if it exists, and save it there at the end, on SIGINT or
    /// SIGTERM, and when the reader of the output goes away (crash-safely: a temporary file
    /// renamed over it, through a symbolic link to its target, keeping its permissions), so
    /// that a daily run remembers the days before. FILE then holds exactly the keys of the
    /// records written. A failed run (exit status 2) leaves FILE as it was. One run at a time:
    /// another run on FILE fails at once (the lock is FILE.lock).
    #[arg(long, value_name = "FILE", conflicts_with = "exact")]
    state: Option<PathBuf>,
    /// Threads that split, hash and decide records (default: one per core). With 2 or more,
    /// one more thread reads and the main thread writes, in input order. Every key is decided
    /// by one thread in input order, so the output is in input order and no key is printed
    /// twice. With --exact (fingerprint collisions aside), --remember or --time-field it is
    /// the same for every count; a Bloom filter's rare false positives may differ.
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
    /// Prepared: each record's key hash (the filter's hasher; the exact set keeps it too).
    hashes: Vec<Hash128>,
    /// Prepared, with `--missing-key print`: which records have no key (empty when all do).
    keyless: Vec<bool>,
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
    /// With --time-field: the records older than the clock (counted at its time), and of
    /// those the ones more than the window older.
    late: u64,
    very_late: u64,
}

impl Work {
    /// Splits the chunk into records, keys and hashes them.
    fn prepare(&mut self, keyer: &Keyer, filter: &Filter, terminator: u8, shards: usize) {
        self.ends.clear();
        self.hashes.clear();
        self.keyless.clear();
        self.times.clear();
        self.bad = None;
        let mut start = 0;
        while start < self.bytes.len() {
            let end = memchr::memchr(terminator, &self.bytes[start..])
                .map_or(self.bytes.len(), |i| start + i);
            let record = &self.bytes[start..end];
            match keyer.of(record) {
                Ok((key, time)) => {
                    match key {
                        Some(key) => {
                            self.hashes.push(filter.hash(&key));
                            if !self.keyless.is_empty() {
                                self.keyless.push(false);
                            }
                        }
                        None => {
                            // Printed as it is, decided by no shard.
                            self.hashes.push(Hash128 { h1: 0, h2: 0 });
                            self.keyless.resize(self.hashes.len() - 1, false);
                            self.keyless.push(true);
                        }
                    }
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

    /// Whether record `i` has a key.
    fn keyed(&self, i: usize) -> bool {
        !self.keyless.get(i).copied().unwrap_or(false)
    }

    /// The shard of record `i` (`None`: it has no key, and is printed undecided).
    fn shard(&self, i: usize, shards: usize) -> Option<usize> {
        self.keyed(i).then(|| {
            if shards == 1 {
                0
            } else {
                shard_of(self.hashes[i], shards)
            }
        })
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
    /// The keys found new whose records are not written yet.
    pending: Pending,
    /// The exact set's keys of this shard (their fingerprints).
    exact: ExactSet,
    /// With --remember: the last pending key of each bucket that has one, and its tag (its
    /// record's place).
    buckets: HashMap<u64, (Hash128, u64), BuildHasherDefault<Spread>>,
    /// With --time-field (one shard): the latest time seen, where the decisions are.
    time: u64,
    /// The windowed filter's period last maintained (with --time-field: the period the
    /// commits have rotated it to, behind `time`'s).
    period_index: u64,
    /// Whether keys wait to be committed until their records are written (with `--state`).
    deferred: bool,
    /// This shard's records of the chunk being decided, and scratch space for lookups.
    mine: Vec<usize>,
    hits: Vec<bool>,
    tags: Vec<u64>,
}

impl Shard {
    /// Decides the records of `work` that are this shard's (`s` of `shards`), in order, after
    /// committing the keys of the records written before `written`.
    fn decide(
        &mut self,
        filter: &Filter,
        work: &Work,
        s: usize,
        shards: usize,
        written: Cut,
    ) -> Decided {
        // The exact set takes no --state: it is never deferred.
        if !self.deferred || matches!(filter, Filter::Exact) {
            return self.decide_at_once(filter, work, s, shards);
        }
        let mut decided = Decided::default();
        if let Err(why) = self.commit(filter, written) {
            decided.failed = Some((0, why));
            return decided;
        }
        let mut mine = std::mem::take(&mut self.mine);
        let mut hits = std::mem::take(&mut self.hits);
        let mut tags = std::mem::take(&mut self.tags);
        mine.clear();
        mine.extend((0..work.ends.len()).filter(|&i| work.shard(i, shards) == Some(s)));
        hits.clear();
        tags.clear();
        let hashes = mine.iter().map(|&i| work.hashes[i]);
        // A windowed filter's `G`: a pending key is found only while its tag is within
        // `G - 1` generations (or periods) of the record's. Other structures keep every key.
        let mut window: Option<u64> = None;
        match filter {
            // Decided at once (above).
            Filter::Exact => {}
            Filter::Bloom(f) => {
                f.contains_many_hashes(hashes, &mut hits);
            }
            Filter::Remember(m) => {
                m.contains_many_hashes(hashes, &mut hits);
            }
            Filter::Growing(f) => hits.extend(hashes.map(|h| f.contains_hash(h))),
            Filter::Windowed {
                filter,
                clock,
                period,
                from_records: false,
            } => {
                // The wall clock, read once a chunk: the filter rotates now. A key is tagged
                // with the generation it was found new in.
                let period = period.as_nanos() as u64;
                let wall = now().as_nanos() as u64;
                clock.set(Duration::from_nanos(wall));
                if wall / period != self.period_index {
                    self.period_index = wall / period;
                    filter.maintain();
                }
                let generation = filter.generation();
                window = Some(u64::from(filter.generations()));
                filter.contains_many_hashes(hashes, &mut hits);
                tags.resize(hits.len(), generation);
            }
            Filter::Windowed {
                filter,
                period,
                from_records: true,
                ..
            } => {
                // The records' times: the filter rotates as their keys are committed (in
                // [`commit`](Self::commit)), so a lookup asks for the generations that will
                // be live at the record's period, `self.period_index` being the filter's. A
                // key is tagged with its record's period.
                let period = period.as_nanos() as u64;
                let g = u64::from(filter.generations());
                let span = period.saturating_mul(g - 1);
                // A record dated past the wall clock by more than the window would forget
                // every key and hold the clock there: refused.
                let latest = (now().as_nanos() as u64).saturating_add(span);
                let mut refused = None;
                for (at, &i) in mine.iter().enumerate() {
                    if self
                        .advance(work.times[i], latest, span, &mut decided)
                        .is_none()
                    {
                        decided.failed = Some((i, TOO_LATE.to_string()));
                        refused = Some(at);
                        break;
                    }
                    let at_period = self.time / period;
                    let ahead = at_period.saturating_sub(self.period_index);
                    let since = (filter.generation() + ahead + 1).saturating_sub(g);
                    hits.push(filter.contains_hash_since(work.hashes[i], since));
                    tags.push(at_period);
                }
                if let Some(at) = refused {
                    mine.truncate(at);
                }
                window = Some(g);
            }
        }
        tags.resize(hits.len(), 0);
        let map = match filter {
            Filter::Remember(m) => Some(m),
            _ => None,
        };
        decided
            .new
            .extend(mine.iter().zip(&hits).zip(&tags).map(|((&i, &hit), &tag)| {
                let hash = work.hashes[i];
                let live = |pending: u64| window.is_none_or(|g| tag - pending < g);
                let new = match map {
                    // A bucket holds the last key that went there: a pending key has evicted
                    // the one the map holds in its bucket, so the decisions are those of a
                    // map that took every key at once, however late the commits come.
                    Some(m) => match self.buckets.get(&bucket(m, hash)) {
                        Some(&(last, place))
                            if self.pending.is_pending(place >> 32, place as u32 as usize) =>
                        {
                            last.h2.max(1) != hash.h2.max(1)
                        }
                        _ => !hit,
                    },
                    None => !hit && !self.pending.get(hash).is_some_and(live),
                };
                if new {
                    match map {
                        Some(m) => {
                            // The record's place as its tag: the bucket's entry is this one's.
                            let place = work.seq << 32 | i as u64;
                            self.pending.add(work.seq, i, hash, place);
                            self.buckets.insert(bucket(m, hash), (hash, place));
                        }
                        None => self.pending.add(work.seq, i, hash, tag),
                    }
                }
                new
            }));
        self.mine = mine;
        self.hits = hits;
        self.tags = tags;
        decided
    }

    /// [`decide`](Self::decide) without a `--state`: each key goes into the structure as it
    /// is decided (one access instead of a lookup now and an insert later), since no file
    /// will show which keys the structure holds.
    fn decide_at_once(&mut self, filter: &Filter, work: &Work, s: usize, shards: usize) -> Decided {
        let mine = (0..work.ends.len()).filter(|&i| work.shard(i, shards) == Some(s));
        let mut decided = Decided::default();
        let new = &mut decided.new;
        match filter {
            Filter::Exact => {
                let mut mine = mine;
                // A growth the system refuses is the set's error, which names --exact.
                let exact = &mut self.exact;
                if let Err(e) = crate::oom::fallible(|| {
                    exact.insert_many(mine.clone().map(|i| work.hashes[i]), new)
                }) {
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
                    match crate::oom::fallible(|| f.insert_hash(work.hashes[i])) {
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
                let span = period.saturating_mul(u64::from(filter.generations() - 1));
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
                let latest = wall.saturating_add(span);
                for i in mine {
                    if *from_records {
                        match self.advance(work.times[i], latest, span, &mut decided) {
                            None => {
                                decided.failed = Some((i, TOO_LATE.to_string()));
                                break;
                            }
                            Some(true) => tick(self.time, self),
                            Some(false) => {}
                        }
                    }
                    decided.new.push(filter.insert_hash(work.hashes[i]));
                }
            }
        }
        decided
    }

    /// Moves the records' clock to `t`, never back: `Some(true)` when it moved on,
    /// `Some(false)` for a record older than the clock (counted late, and very late when older
    /// by more than `span`, the window), `None` for a time past `latest` (refused: it would
    /// forget every key, and hold the clock there).
    fn advance(&mut self, t: u64, latest: u64, span: u64, decided: &mut Decided) -> Option<bool> {
        if t > latest {
            return None;
        }
        if t >= self.time {
            self.time = t;
            return Some(true);
        }
        decided.late += 1;
        decided.very_late += u64::from(self.time - t > span);
        Some(false)
    }

    /// Inserts into the structure the pending keys of the records before `cut`, in input
    /// order. A windowed filter on the records' times rotates to each key's period first; a
    /// key whose generation (or period) left the window meanwhile is not inserted.
    fn commit(&mut self, filter: &Filter, cut: Cut) -> Result<(), String> {
        let period_index = &mut self.period_index;
        let scratch = &mut self.hits;
        self.pending.commit(cut, |run| {
            match filter {
                // Never pending: decided at once.
                Filter::Exact => {}
                Filter::Bloom(f) => {
                    scratch.clear();
                    f.insert_many_hashes(run.iter().map(|e| e.hash), scratch);
                }
                Filter::Remember(m) => {
                    scratch.clear();
                    m.insert_many_hashes(run.iter().map(|e| e.hash), scratch);
                }
                Filter::Growing(f) => {
                    for (done, e) in run.iter().enumerate() {
                        // Growing allocates a layer: a refusal is the filter's error.
                        crate::oom::fallible(|| f.insert_hash(e.hash))
                            .map_err(|why| (done, format!("cannot insert: {why}")))?;
                    }
                }
                Filter::Windowed {
                    filter,
                    clock,
                    period,
                    from_records,
                } => {
                    let g = u64::from(filter.generations());
                    for &Entry { hash, tag, .. } in run {
                        if *from_records {
                            if tag > *period_index {
                                // The start of the key's period: the rotations up to it are
                                // due.
                                clock.set(Duration::from_nanos(
                                    tag.saturating_mul(period.as_nanos() as u64),
                                ));
                                filter.maintain();
                                *period_index = tag;
                            }
                            if *period_index - tag < g {
                                filter.insert_hash(hash);
                            }
                        } else if filter.generation() - tag < g {
                            filter.insert_hash(hash);
                        }
                    }
                }
            }
            Ok(())
        })?;
        // The buckets' entries of records committed: the map holds them (or later keys).
        if self.buckets.len() > 2 * self.pending.live() + 4096 {
            let pending = &self.pending;
            self.buckets.retain(|_, &mut (_, place)| {
                pending.is_pending(place >> 32, place as u32 as usize)
            });
        }
        Ok(())
    }
}

/// The overwrite map's bucket of a key (the map's own: the high half of `h1 × buckets`).
fn bucket(map: &seen::OverwriteMap, hash: Hash128) -> u64 {
    ((u128::from(hash.h1) * map.buckets() as u128) >> 64) as u64
}

/// Why a record dated past the wall clock by more than the window is refused.
const TOO_LATE: &str = "its time is more than --window after the wall clock (it would forget \
                        every key, and hold the clock there)";

/// Set when the run is ending: the shards decide no more chunks (their keys could not be
/// committed).
static STOPPING: AtomicBool = AtomicBool::new(false);

/// Hands a prepared chunk to every shard; each decides what is ready in order. Returns the
/// chunks this call completed (all shards decided), for the writer.
fn decide_in_shards(
    work: Arc<Work>,
    shards: &[Mutex<Shard>],
    filter: &Filter,
    written: &AtomicU64,
    mut done: impl FnMut(Arc<Work>),
) {
    let n = shards.len();
    for (s, shard) in shards.iter().enumerate() {
        let mut shard = shard.lock().unwrap_or_else(PoisonError::into_inner);
        shard.ready.insert(work.seq, Arc::clone(&work));
        loop {
            if STOPPING.load(Ordering::SeqCst) {
                return;
            }
            let next = shard.next;
            let Some(ready) = shard.ready.remove(&next) else {
                break;
            };
            shard.next += 1;
            let cut = Cut {
                chunk: written.load(Ordering::Acquire),
                record: 0,
            };
            let decided = shard.decide(filter, &ready, s, n, cut);
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
                // A record without an end (`seen dedup < /dev/zero`) grows the buffer until
                // the memory runs out: an error that names it.
                if crate::oom::fallible(|| spare.bytes.try_reserve(want)).is_err() {
                    let why = io::Error::new(
                        io::ErrorKind::OutOfMemory,
                        if len >= 4 * CHUNK {
                            format!(
                                "out of memory: a record of more than {len} bytes (no \
                                 terminator in them)"
                            )
                        } else {
                            "out of memory: no room for the next bytes of input".to_string()
                        },
                    );
                    // The records before it are whole; the partial one is dropped (its
                    // memory with it).
                    let whole = memchr::memrchr(self.terminator, &spare.bytes).map_or(0, |i| i + 1);
                    spare.bytes.truncate(whole);
                    spare.bytes.shrink_to_fit();
                    return Some(self.fail(spare, why));
                }
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

/// Why a run stopped before the end of its input.
enum Stop {
    /// A record that cannot be keyed or decided, or an input that cannot be read: the run
    /// fails, and the state is not saved.
    Input(Failure),
    /// A write failed ([`Output`] knows where and why).
    Output,
}

/// How a run that did not fail ended.
#[derive(Clone, Copy, PartialEq, Eq)]
enum End {
    /// At the end of its input (or of its output's reader).
    Done,
    /// By SIGINT or SIGTERM.
    Interrupted,
}

/// The exit status after the reader of the output went away, as a tool killed by SIGPIPE
/// reports it (`seq 10 | head -1` leaves `seq` with 141 in `PIPESTATUS`).
const BROKEN_PIPE_STATUS: i32 = 141;

/// The in-order end of a run: writes, counts, saves.
struct Sequencer {
    args: Dedup,
    filter: Arc<Filter>,
    shards: Arc<[Mutex<Shard>]>,
    out: Output,
    /// The chunks whose records are all written, for the shards to commit.
    written: Arc<AtomicU64>,
    terminator: u8,
    names: Vec<String>,
    /// The input being counted, and its records so far (for error messages).
    input: usize,
    input_records: u64,
    records: u64,
    new: u64,
    /// Records without a key (`--missing-key print`), printed undecided.
    keyless: u64,
    /// With --time-field: records older than the clock, and more than the window older.
    late: u64,
    very_late: u64,
    bytes: u64,
    started: Instant,
    progress: Option<indicatif::ProgressBar>,
    last_draw: Instant,
    /// Past a fixed size: warned once.
    overfill: Overfill,
    /// Whether a pipeline's writer loop ends an interrupted run (else the signal's thread).
    pipeline: bool,
    /// Set once the run has ended (normally, by a failure, or interrupted).
    finished: bool,
}

/// A structure that can be filled past what it was sized for: the count of new keys it
/// holds, to warn once (on standard error, `--stats` or not) when it passes its capacity.
pub(super) struct Overfill {
    /// The capacity, of the whole filter or of each period.
    pub(super) capacity: Option<u64>,
    /// Per period (a windowed filter's generation), not for the whole filter.
    pub(super) per_period: bool,
    /// The keys held (in the current generation, per period).
    pub(super) count: u64,
    pub(super) generation: u64,
    pub(super) warned: bool,
}

impl Sequencer {
    /// Writes one decided chunk (the next in input order) and counts it.
    fn consume(&mut self, work: &Work) -> Result<(), Stop> {
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
            self.late += d.late;
            self.very_late += d.very_late;
        }
        let decided = failed.map_or(work.ends.len(), |(i, _)| i);
        let new_before = self.new;
        // The first write that failed: the writes after it fail too.
        let mut written = Ok(());
        // The run of records to print: its first record, and its bytes.
        let mut run: Option<(usize, usize, usize)> = None;
        let starts = std::iter::once(0).chain(work.ends.iter().map(|&e| e + 1));
        for (i, (start, &end)) in starts.zip(&work.ends).take(decided).enumerate() {
            let print = match work.shard(i, shards) {
                Some(shard) => {
                    let is_new = *cursors[shard]
                        .next()
                        .expect("every shard decided its records");
                    self.new += u64::from(is_new);
                    !self.args.count && is_new != self.args.repeated
                }
                None => {
                    self.keyless += 1;
                    !self.args.count && !self.args.repeated
                }
            };
            if !print {
                if let Some((first, s, e)) = run.take() {
                    written =
                        written.and_then(|()| self.out.run(work.seq, first, &work.bytes[s..e]));
                }
                continue;
            }
            // Records are back to back, and a dropped one ends the run above: a kept record
            // extends the run, or starts one.
            run = Some(run.map_or((i, start, end), |(first, s, _)| (first, s, end)));
        }
        if let Some((first, s, e)) = run {
            written = written.and_then(|()| self.out.run(work.seq, first, &work.bytes[s..e]));
        }
        // Counted whether or not the writes went through (the output knows how far it got).
        self.records += decided as u64;
        self.input_records += decided as u64;
        self.bytes += work.bytes.len() as u64;
        if failed.is_none() {
            written = written.and_then(|()| self.out.chunk_done(work.seq));
            self.written
                .store(self.out.written_chunks(), Ordering::Release);
        }
        written.map_err(|_| Stop::Output)?;
        self.check_overfill(self.new - new_before);
        self.draw();
        let name = &self.names[work.input];
        if let Some((_, why)) = failed {
            let unit = if self.terminator == b'\n' {
                "line"
            } else {
                "record"
            };
            return Err(Stop::Input(Failure(format!(
                "{name}, {unit} {}: {why}",
                self.input_records + 1
            ))));
        }
        if let Some(why) = &work.failed {
            return Err(Stop::Input(Failure(format!("cannot read {name}: {why}"))));
        }
        Ok(())
    }

    /// Writes the output gathered, so that the shards can commit its keys.
    fn flush(&mut self) -> Result<(), Stop> {
        self.out.flush().map_err(|_| Stop::Output)?;
        self.written
            .store(self.out.written_chunks(), Ordering::Release);
        Ok(())
    }

    /// Counts `new` keys into a fixed-size structure, and warns once when it passes its
    /// capacity.
    fn check_overfill(&mut self, new: u64) {
        let o = &mut self.overfill;
        let Some(capacity) = o.capacity else { return };
        if o.per_period {
            let generation = self.filter.generation();
            if generation != o.generation {
                o.generation = generation;
                o.count = 0;
            }
        }
        o.count = o.count.saturating_add(new);
        // Only new keys pass the capacity (a loaded state's estimate may sit just above it).
        if new > 0 && o.count > capacity && !o.warned {
            o.warned = true;
            let why = self.filter.overfill_warning(&self.args, capacity);
            if let Some(bar) = &self.progress {
                bar.suspend(|| say!("seen: warning: {why}"));
            } else {
                say!("seen: warning: {why}");
            }
        }
    }

    fn draw(&mut self) {
        let Some(bar) = &self.progress else { return };
        if self.last_draw.elapsed() < Duration::from_millis(100) {
            return;
        }
        self.last_draw = Instant::now();
        let secs = self.started.elapsed().as_secs_f64().max(1e-9);
        bar.set_position(self.bytes);
        // The time left, from the bytes left at the rate so far (files only).
        let left = bar.length().map(|total| {
            let rate = self.bytes as f64 / secs;
            Duration::from_secs_f64(
                (total.saturating_sub(self.bytes) as f64 / rate.max(1.0)).min(1e9),
            )
        });
        bar.set_message(progress_message(
            self.records,
            self.records - self.new - self.keyless,
            self.records as f64 / secs,
            left,
        ));
    }

    /// Ends the run: the counts (`--count`), the output written, the keys of the records
    /// written committed, the state saved (not after a failure: the state file keeps the last
    /// good run), the summary (`--stats`). Returns the exit status, or the failure.
    fn finish(&mut self, end: End, failure: Option<Failure>) -> Result<i32, Failure> {
        self.finished = true;
        STOPPING.store(true, Ordering::SeqCst);
        if let Some(bar) = self.progress.take() {
            bar.finish_and_clear();
        }
        let mut counts = format!(
            "{} new\n{} duplicates\n",
            self.new,
            self.records - self.new - self.keyless
        );
        if self.keyless > 0 {
            counts.push_str(&format!("{} without a key\n", self.keyless));
        }
        let written = if self.args.count && failure.is_none() {
            self.out.text(&counts)
        } else {
            self.out.flush()
        };
        let pipe = self.out.broken_pipe();
        let failure = failure.or_else(|| match written {
            Err(e) if !pipe => Some(Failure(format!("cannot write the output: {e}"))),
            _ => None,
        });
        if failure.is_none() {
            // The keys of the records written, and no others.
            let cut = self.out.cut();
            for shard in self.shards.iter() {
                let mut shard = shard.lock().unwrap_or_else(PoisonError::into_inner);
                shard.commit(&self.filter, cut).map_err(Failure)?;
                shard.pending.clear();
            }
            if let Some(path) = &self.args.state {
                set_save(SAVING);
                self.filter.save(path).map_err(|e| {
                    set_save(FAILED);
                    Failure(format!("cannot save the state {}: {e}", path.display()))
                })?;
            }
            set_save(SAVED);
        }
        if self.args.stats {
            self.summary();
        }
        if self.very_late > 0 {
            say!(
                "seen: warning: {} records were more than --window older than a record before \
                 them (or than the --state's time): they were decided at the newer time, so a \
                 repeat of an older key may have been printed again; feed records in time order",
                self.very_late
            );
        }
        match failure {
            Some(failure) => Err(failure),
            None if pipe => Ok(BROKEN_PIPE_STATUS),
            None if end == End::Interrupted => Ok(INTERRUPTED_STATUS),
            None => Ok(0),
        }
    }

    /// `--stats`: two lines on standard error.
    fn summary(&self) {
        let secs = self.started.elapsed().as_secs_f64();
        let duplicates = self.records - self.new - self.keyless;
        let mut line = format!(
            "seen: {} records: {} new, {} duplicates",
            self.records, self.new, duplicates
        );
        if let Some(fpr) = self.filter.estimated_fpr() {
            // Each new key was looked up once at a rate at most the final one (the filters
            // only fill, past a rotation too, on the whole): an upper estimate.
            let false_positives =
                (self.new as f64 * fpr / (1.0 - fpr).max(f64::MIN_POSITIVE)).min(duplicates as f64);
            line.push_str(&format!(
                " (of which at most about {} may be false positives: new records taken for \
                 duplicates)",
                round_count(false_positives)
            ));
        }
        if self.keyless > 0 {
            line.push_str(&format!(", {} without a key", self.keyless));
        }
        line.push_str(&format!(
            ", {:.0} records/s",
            self.records as f64 / secs.max(1e-9)
        ));
        say!("{line}");
        if self.late > 0 {
            say!(
                "seen: {} records were older than a record before them (or than the --state's \
                 time), and counted at the newer time; {} of them by more than --window",
                self.late,
                self.very_late
            );
        }
        say!(
            "seen: {}",
            self.filter.describe(exact_set(&self.shards), &self.args)
        );
    }
}

/// A count estimated from a rate: whole, 0 when below one half.
fn round_count(x: f64) -> String {
    if x < 0.5 {
        "0".to_string()
    } else if x < 10.0 {
        format!("{x:.1}")
    } else {
        format!("{:.0}", x)
    }
}

/// A count in at most six characters: `999`, `12.3k`, `4.6M`, `789.0G`, `18.4E`.
fn short_count(n: u64) -> String {
    const UNITS: [&str; 7] = ["", "k", "M", "G", "T", "P", "E"];
    let (mut x, mut unit) = (n as f64, 0);
    // Below 999.95, so that one decimal never rounds up to four digits.
    while x >= 999.95 && unit < UNITS.len() - 1 {
        x /= 1000.0;
        unit += 1;
    }
    if unit == 0 {
        n.to_string()
    } else {
        format!("{x:.1}{}", UNITS[unit])
    }
}

/// The progress bar's message: records, duplicates, records per second, and the time left.
fn progress_message(
    records: u64,
    duplicates: u64,
    per_second: f64,
    left: Option<Duration>,
) -> String {
    let mut message = format!(
        "{} rec {} dup {}/s",
        short_count(records),
        short_count(duplicates),
        short_count(per_second as u64)
    );
    if let Some(left) = left {
        let s = left.as_secs();
        let left = match s {
            0..60 => format!("{s}s"),
            60..3_600 => format!("{}m", s / 60),
            3_600..86_400 => format!("{}h", s / 3_600),
            _ => format!("{}d", (s / 86_400).min(999)),
        };
        message.push_str(&format!(" {left} left"));
    }
    message
}

/// The progress bar's templates: at most 80 columns, whatever the sizes and counts.
const PROGRESS_FILES: &str = "{bar:14} {bytes}/{total_bytes} {msg}";
const PROGRESS_STREAM: &str = "{spinner} {bytes} {bytes_per_sec} {msg}";

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
    // Held to the end of the process: from before the state is loaded to after it is saved.
    let _lock = args.state.as_deref().map(lock::lock).transpose()?;
    let filter = Arc::new(crate::oom::fallible(|| Filter::open(args))?);
    let overfill = filter.overfill();
    let keyer = Keyer {
        key,
        time,
        delimiter,
        missing: args.missing_key,
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
                indicatif::ProgressStyle::with_template(PROGRESS_FILES).expect("a valid template"),
            ),
            None => indicatif::ProgressBar::new_spinner().with_style(
                indicatif::ProgressStyle::with_template(PROGRESS_STREAM).expect("a valid template"),
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
    let (time, period_index) = filter.start();
    let shards: Arc<[Mutex<Shard>]> = (0..shards)
        .map(|_| {
            Mutex::new(Shard {
                time,
                period_index,
                deferred: args.state.is_some(),
                ..Shard::default()
            })
        })
        .collect();
    let out =
        Output::stdout(terminator).map_err(|e| Failure(format!("cannot write the output: {e}")))?;
    let sequencer = Arc::new(Mutex::new(Sequencer {
        args: args.clone(),
        filter: Arc::clone(&filter),
        shards: Arc::clone(&shards),
        out,
        written: Arc::new(AtomicU64::new(0)),
        terminator,
        names,
        input: 0,
        input_records: 0,
        records: 0,
        new: 0,
        keyless: 0,
        late: 0,
        very_late: 0,
        bytes: 0,
        started: Instant::now(),
        progress,
        last_draw: Instant::now(),
        overfill,
        pipeline: threads > 1,
        finished: false,
    }));
    on_interrupt(Arc::clone(&sequencer), args.state.is_some());
    let reader = Reader::new(inputs, terminator);
    let result = if threads <= 1 {
        one_thread(reader, &keyer, &filter, &shards, &sequencer, terminator)
    } else {
        pipeline(
            reader, keyer, filter, shards, &sequencer, terminator, threads,
        )
    };
    let mut s = lock(&sequencer);
    let status = match result {
        Ok(()) | Err(Stop::Output) => s.finish(End::Done, None),
        // Write out what was decided; keep the last good state.
        Err(Stop::Input(failure)) => s.finish(End::Done, Some(failure)),
    }?;
    if status != 0 {
        std::process::exit(status);
    }
    Ok(())
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

/// How far the state's save got, for a second signal: [`UNSAVED`], [`SAVING`], [`SAVED`]
/// (also when there is nothing to save) or [`FAILED`]. A mutex, not an atomic: a signal's
/// decision and the start of the save exclude each other, so the line it prints is true.
static SAVE: Mutex<u8> = Mutex::new(UNSAVED);
const UNSAVED: u8 = 0;
const SAVING: u8 = 1;
const SAVED: u8 = 2;
const FAILED: u8 = 3;

fn set_save(to: u8) {
    *SAVE.lock().unwrap_or_else(PoisonError::into_inner) = to;
}

/// The signals after the first that were not the first delivered twice.
static AGAIN: AtomicU8 = AtomicU8::new(0);

/// A signal this soon after the first is the same one delivered twice (GNU `timeout` sends
/// the signal it forwards to the command and to its process group), not a second one.
const SAME_SIGNAL: Duration = Duration::from_millis(250);

/// On SIGINT or SIGTERM: the run ends after the chunks read so far are written (by the
/// pipeline's writer, or here between two chunks of a one-thread run), with the state saved
/// ([`interrupted`]). A second signal (at least [`SAME_SIGNAL`] after the first) ends the run
/// at once, and its status says what the state file holds:
///
/// - no `--state`, or saved: 130, as for one signal;
/// - the save not begun: 2, with a line saying that the state file keeps its previous save,
///   without this run's records (the next run prints them again);
/// - the save under way: it is waited for (a line says so), then 130 (or 2 if it failed); a
///   third signal stops at once, with status 2 and a line saying that the file holds the
///   previous save or this run's, whole (a save is renamed into place in one step; the
///   temporary file a stopped save leaves is removed by the next save).
fn on_interrupt(sequencer: Arc<Mutex<Sequencer>>, state: bool) {
    static FIRST: OnceLock<Instant> = OnceLock::new();
    let installed = ctrlc::set_handler(move || {
        if INTERRUPTED.swap(true, Ordering::SeqCst) {
            if FIRST.get().is_some_and(|at| at.elapsed() < SAME_SIGNAL) {
                return;
            }
            if AGAIN.fetch_add(1, Ordering::SeqCst) > 0 {
                say!(
                    "seen: interrupted during the save of --state: the file holds its previous \
                     save or this run's, whole"
                );
                std::process::exit(2);
            }
            // Held to the exit: the save does not begin meanwhile.
            let save = SAVE.lock().unwrap_or_else(PoisonError::into_inner);
            match *save {
                _ if !state => std::process::exit(INTERRUPTED_STATUS),
                SAVED => std::process::exit(INTERRUPTED_STATUS),
                SAVING => {
                    drop(save);
                    say!(
                        "seen: saving --state, which ends in a moment (a third signal stops \
                         without waiting)"
                    );
                    let wait = || {
                        loop {
                            std::thread::sleep(Duration::from_millis(10));
                            match *SAVE.lock().unwrap_or_else(PoisonError::into_inner) {
                                SAVED => std::process::exit(INTERRUPTED_STATUS),
                                // The run reports why, and exits 2.
                                FAILED => return,
                                _ => {}
                            }
                        }
                    };
                    // On another thread, so that the handler returns to see a third signal
                    // (here, if the system gives no thread).
                    if std::thread::Builder::new().spawn(wait).is_err() {
                        wait();
                    }
                }
                _ => {
                    say!(
                        "seen: interrupted again before --state was saved: it keeps its \
                         previous save, without the records printed by this run (the next run \
                         prints them again)"
                    );
                    std::process::exit(2);
                }
            }
            return;
        }
        let _ = FIRST.set(Instant::now());
        let sequencer = Arc::clone(&sequencer);
        // The handler must return to see a second signal: finish on another thread (here,
        // if the system gives no thread).
        let end = |sequencer: Arc<Mutex<Sequencer>>| {
            let mut s = lock(&sequencer);
            if !s.pipeline {
                interrupted(&mut s);
            }
        };
        let other = Arc::clone(&sequencer);
        if std::thread::Builder::new()
            .spawn(move || end(other))
            .is_err()
        {
            end(Arc::clone(&sequencer));
        }
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
    let status = match s.finish(End::Interrupted, None) {
        Ok(status) => status,
        Err(Failure(why)) => {
            say!("seen: {why}");
            2
        }
    };
    if status == INTERRUPTED_STATUS {
        say!("seen: interrupted after {} records", s.records);
    }
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
) -> Result<(), Stop> {
    let mut spare = Work::default();
    while let Some(mut work) = reader.next(spare) {
        work.prepare(keyer, filter, terminator, 1);
        // The sequencer is held from the decisions to the write: a signal's thread that ends
        // the run between them would find a chunk decided and not written.
        let mut s = lock(sequencer);
        if s.finished {
            // Interrupted, and ended by the signal's thread.
            return Ok(());
        }
        let written = Cut {
            chunk: s.out.written_chunks(),
            record: 0,
        };
        let mut shard = shards[0].lock().unwrap_or_else(PoisonError::into_inner);
        let decided = shard.decide(filter, &work, 0, 1, written);
        drop(shard);
        let _ = work.decided[0].set(decided);
        s.consume(&work)?;
        // A short chunk: the input trickles in (a pipe, a terminal), and the next read may
        // wait: let the output out first.
        if work.bytes.len() < CHUNK / 2 {
            s.flush()?;
        }
        spare = work;
    }
    Ok(())
}

/// Starts a thread of the pipeline; a system that cannot give one (out of memory, a limit on
/// threads) is the run's failure, one line, not a panic.
fn spawn(f: impl FnOnce() + Send + 'static) -> Result<(), Stop> {
    std::thread::Builder::new().spawn(f).map(drop).map_err(|e| {
        Stop::Input(Failure(format!(
            "cannot start a thread: {e} (try --threads 1)"
        )))
    })
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
) -> Result<(), Stop> {
    use crossbeam_channel::{RecvTimeoutError, bounded, unbounded};
    let written = Arc::clone(&lock(sequencer).written);
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
    spawn(move || {
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
    })?;
    let keyer = Arc::new(keyer);
    for _ in 0..threads {
        let (input, output) = (for_workers.clone(), to_writer.clone());
        let (keyer, filter, shards, written) = (
            Arc::clone(&keyer),
            Arc::clone(&filter),
            Arc::clone(&shards),
            Arc::clone(&written),
        );
        spawn(move || {
            for mut work in input {
                work.prepare(&keyer, &filter, terminator, shards.len());
                decide_in_shards(Arc::new(work), &shards, &filter, &written, |done| {
                    let _ = output.send(done);
                });
            }
        })?;
    }
    drop((for_workers, to_writer));
    let mut pending: BTreeMap<u64, Arc<Work>> = BTreeMap::new();
    let mut next = 0u64;
    // Once interrupted: the number of chunks read, all of which are written before the end.
    let mut last: Option<u64> = None;
    // A failed run reads no more.
    let stop = |why: Stop| {
        intake.lock().unwrap_or_else(PoisonError::into_inner).closed = true;
        why
    };
    loop {
        while let Some(work) = pending.remove(&next) {
            next += 1;
            lock(sequencer).consume(&work).map_err(stop)?;
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
                lock(sequencer).flush().map_err(stop)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The progress line fits an 80-column terminal with the widest sizes, counts, rates and
    /// times left (drawn on a wider one, so that nothing is cut to fit).
    #[test]
    fn the_progress_line_fits_80_columns() {
        use indicatif::{InMemoryTerm, ProgressBar, ProgressDrawTarget, ProgressStyle};
        let widest = [999_999_999_999, 999_999_999_999];
        for (template, total) in [
            (PROGRESS_FILES, Some(1023 << 30)),
            (PROGRESS_FILES, Some(u64::MAX)),
            (PROGRESS_STREAM, None),
        ] {
            let term = InMemoryTerm::new(3, 400);
            let target = ProgressDrawTarget::term_like(Box::new(term.clone()));
            let bar = ProgressBar::with_draw_target(total, target)
                .with_style(ProgressStyle::with_template(template).unwrap());
            bar.set_position(total.map_or(1023 << 30, |t| t / 2 + 1) | 0x3ff_0000_0000);
            let left = total.map(|_| Duration::from_secs(999 * 86_400));
            bar.set_message(progress_message(widest[0], widest[1], 999.9e9, left));
            bar.tick();
            let drawn = term.contents();
            assert!(drawn.contains("left") || total.is_none(), "{drawn:?}");
            for line in drawn.lines() {
                let width = line.trim_end().chars().count();
                assert!(width <= 80, "{width} columns: {line:?}");
            }
            assert!(drawn.contains("rec"), "nothing drawn: {drawn:?}");
        }
    }

    #[test]
    fn counts_take_at_most_six_characters() {
        for n in [
            0,
            999,
            1_000,
            999_949,
            999_999,
            1_000_000,
            999_999_999_999,
            u64::MAX,
        ] {
            assert!(short_count(n).len() <= 6, "{n}: {}", short_count(n));
        }
        assert_eq!(short_count(12_345), "12.3k");
        assert_eq!(round_count(0.2), "0");
        assert_eq!(round_count(3.26), "3.3");
        assert_eq!(round_count(1234.4), "1234");
    }
}
