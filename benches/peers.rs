//! `seen`'s structures against their peers, side by side in one run: the reference suite.
//!
//! Groups `insert`, `contains_hit`, `contains_miss`; function = structure; parameter
//! `{items}/{threads}t` for items in 1M, 10M, 100M and 1 or 2 threads. u64 keys; Bloom filters
//! sized for `items` at fpr 0.01, exact sets and overwrite maps for `items` keys (the
//! fingerprint map with 4 buckets per item, 8 bytes each; the exact map with 2).
//!
//! - `insert`: fresh keys into a structure rebuilt (untimed) whenever it holds `items` keys: new
//!   items, at fills from 0 to 100%.
//! - `contains_hit` / `contains_miss`: a structure holding `items` keys, queried with inserted
//!   keys / keys never inserted.
//! - Each operation hashes its key: rows named `..._xxh3` use the xxh3 hash `seen` uses
//!   (`seen`'s own `Hash128` for `sbbf_xxh3`, which takes a precomputed 64-bit hash; `xxhash-rust`'s
//!   `Xxh3DefaultBuilder` for peers that take a `BuildHasher`); other peer rows use the peer's
//!   default hasher.
//! - `seen_word_many` and `seen_growing_many` are `insert_many` / `contains_many` over 1,024
//!   keys at a time, results into a reused `Vec<bool>`; every other row is a loop of single calls.
//! - `bound_random_reads` (in `contains_hit`): independent random reads of an array as large as
//!   `seen_word`'s filter, the memory-level-parallelism bound of the machine (4 KiB pages).
//!   `bound_random_fetch_or` and `bound_random_or` (in `insert`): one bit set in a random word
//!   of the same array, by an atomic `fetch_or` and by a plain `|=`: the floor of a write
//!   through `&self` that threads share, and of one through `&mut self`.
//! - Group `insert_token64`: `seen_word` and `seen_word_many` inserting 64-byte tokens through
//!   the byte hash, where hashing takes long enough to keep a loop of single calls from
//!   overlapping its misses.
//! - `seen_growing` (word layout), `seen_growing_line` and `growable_grown` (growable-bloom-filter
//!   at the same total bound) start at 1/100 of `items` and grow: after `items` they have 7
//!   layers, as after 100 times their initial capacity; `seen_word` and `seen_line` are the fixed
//!   filters of the final size. `growable_bloom` is growable-bloom-filter sized for `items` (one
//!   layer).
//! - Structures that insert through `&mut self` (not thread-safe) run with one thread only;
//!   `xorf_bfuse8` is static (built from all keys at once): lookups only.
//!
//! It also prints each structure's memory at each size (its own count where it has one, else
//! the growth of resident memory while it is built and filled in a fresh child process), its
//! false-positive rate over 1M keys never inserted, and first the **duplicate race**: two threads insert the same 1M keys (one from the front, one from the back, meeting in the
//! middle, then overtaking each other), and the table counts keys that both threads were told
//! were new. An exactly-once structure has 0.
//!
//! Order: per size, the `insert` cells of every structure one after another, then every
//! structure built and filled at once, then the `contains_hit` cells of all of them and the
//! `contains_miss` cells: the cells a ratio compares run seconds apart.
//!
//! Run: `cargo bench -p seen-benches --bench peers` (about 30 minutes; at 100M every structure
//! is held at once during the lookups, about 12 GB).
//! Criterion's filter after `--` picks benchmarks, but every structure is still built and
//! filled; to build fewer, set `PEERS_SIZES=1M,10M` (sizes), `PEERS_ONLY=seen_word,sbbf_xxh3`
//! (structures; `bound_random_reads` and `tokens` name the bound and the token group) and
//! `PEERS_RACE=0` (skip the race table). Results in `docs/benchmarks.md`.

use std::hint::black_box;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

mod common;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use seen::hash::{Hash128, ItemHasher, StableHasher};
use seen::{
    AtomicBloomFilter, ExactOverwriteMap, GrowingBloomFilter, Layout, OverwriteMap,
    SemiConcurrentBloomFilter,
};
use xorf::Filter as _;
use xxhash_rust::xxh3::Xxh3DefaultBuilder;

const FPR: f64 = 0.01;
const SIZES: [(u64, &str); 3] = [
    (1_000_000, "1M"),
    (10_000_000, "10M"),
    (100_000_000, "100M"),
];
const MISS: u64 = 1 << 63;
const CHUNK: usize = 1024;

/// `seen`'s default hasher, which the `_xxh3` peer rows are fed too.
fn xxh3(key: u64) -> Hash128 {
    StableHasher::new().hash_item(&key)
}

/// A structure every thread may use at once through `&self`.
trait Shared: Sync {
    /// Inserts `keys`; returns how many it reported new.
    fn insert(&self, keys: &[u64]) -> usize;
    /// How many of `keys` it reports present.
    fn contains(&self, keys: &[u64]) -> usize;
}

/// What the harness needs of a structure: single-threaded use, and the shared view if any.
trait Structure {
    fn insert(&mut self, keys: &[u64]) -> usize;
    fn contains(&self, keys: &[u64]) -> usize;
    fn shared(&self) -> Option<&dyn Shared> {
        None
    }
    /// Its own count of its memory, if it has one.
    fn bytes(&self) -> Option<u64> {
        None
    }
}

/// A [`Shared`] structure used as a [`Structure`].
struct Conc<T>(T);

impl<T: Shared + Sized + BytesOf> Structure for Conc<T> {
    fn insert(&mut self, keys: &[u64]) -> usize {
        self.0.insert(keys)
    }
    fn contains(&self, keys: &[u64]) -> usize {
        self.0.contains(keys)
    }
    fn shared(&self) -> Option<&dyn Shared> {
        Some(&self.0)
    }
    fn bytes(&self) -> Option<u64> {
        self.0.bytes_of()
    }
}

trait BytesOf {
    fn bytes_of(&self) -> Option<u64> {
        None
    }
}

// ---- seen ----

struct SeenBloom(AtomicBloomFilter);
struct SeenBloomMany(AtomicBloomFilter);
struct SeenSemi(SemiConcurrentBloomFilter);
struct SeenGrowing(GrowingBloomFilter);
struct SeenGrowingMany(GrowingBloomFilter);
struct SeenMap(OverwriteMap);
struct SeenExactMap(ExactOverwriteMap);

impl Shared for SeenBloom {
    fn insert(&self, keys: &[u64]) -> usize {
        keys.iter().filter(|k| self.0.insert(*k)).count()
    }
    fn contains(&self, keys: &[u64]) -> usize {
        keys.iter().filter(|k| self.0.contains(*k)).count()
    }
}
impl BytesOf for SeenBloom {
    fn bytes_of(&self) -> Option<u64> {
        Some(self.0.memory_bytes())
    }
}

impl Shared for SeenGrowing {
    fn insert(&self, keys: &[u64]) -> usize {
        keys.iter()
            .filter(|k| self.0.insert(*k).expect("the growth never fails here"))
            .count()
    }
    fn contains(&self, keys: &[u64]) -> usize {
        keys.iter().filter(|k| self.0.contains(*k)).count()
    }
}
impl BytesOf for SeenGrowing {
    fn bytes_of(&self) -> Option<u64> {
        Some(self.0.memory_bytes())
    }
}

/// The batch API, results into a vector each thread reuses.
impl Shared for SeenGrowingMany {
    fn insert(&self, keys: &[u64]) -> usize {
        RESULTS.with_borrow_mut(|out| {
            out.clear();
            self.0
                .insert_many(keys, out)
                .expect("the growth never fails here")
        })
    }
    fn contains(&self, keys: &[u64]) -> usize {
        RESULTS.with_borrow_mut(|out| {
            out.clear();
            self.0.contains_many(keys, out)
        })
    }
}
impl BytesOf for SeenGrowingMany {
    fn bytes_of(&self) -> Option<u64> {
        Some(self.0.memory_bytes())
    }
}

/// A growing filter that starts at 1/100 of the items it will hold: after `items` new items it
/// has 7 layers (1 + 2 + ... + 64 = 127 hundredths), as after 100 times its initial capacity.
fn growing(layout: Layout, n: u64) -> GrowingBloomFilter {
    GrowingBloomFilter::builder((n / 100).max(1))
        .fpr(FPR)
        .layout(layout)
        .build()
        .unwrap()
}

/// The batch API, results into a vector each thread reuses.
impl Shared for SeenBloomMany {
    fn insert(&self, keys: &[u64]) -> usize {
        RESULTS.with_borrow_mut(|out| {
            out.clear();
            self.0.insert_many(keys, out)
        })
    }
    fn contains(&self, keys: &[u64]) -> usize {
        RESULTS.with_borrow_mut(|out| {
            out.clear();
            self.0.contains_many(keys, out)
        })
    }
}
impl BytesOf for SeenBloomMany {
    fn bytes_of(&self) -> Option<u64> {
        Some(self.0.memory_bytes())
    }
}

thread_local! {
    static RESULTS: std::cell::RefCell<Vec<bool>> = std::cell::RefCell::new(Vec::with_capacity(CHUNK));
}

impl Shared for SeenSemi {
    fn insert(&self, keys: &[u64]) -> usize {
        keys.iter().filter(|k| self.0.insert(*k)).count()
    }
    fn contains(&self, keys: &[u64]) -> usize {
        keys.iter().filter(|k| self.0.contains(*k)).count()
    }
}
impl BytesOf for SeenSemi {}

impl Shared for SeenMap {
    fn insert(&self, keys: &[u64]) -> usize {
        keys.iter().filter(|k| self.0.insert(*k)).count()
    }
    fn contains(&self, keys: &[u64]) -> usize {
        keys.iter().filter(|k| self.0.contains(*k)).count()
    }
}
impl BytesOf for SeenMap {
    fn bytes_of(&self) -> Option<u64> {
        Some(self.0.memory_bytes())
    }
}

/// Exact keys are bytes: the key's 8 little-endian bytes.
impl Shared for SeenExactMap {
    fn insert(&self, keys: &[u64]) -> usize {
        keys.iter()
            .filter(|k| self.0.insert(&k.to_le_bytes()))
            .count()
    }
    fn contains(&self, keys: &[u64]) -> usize {
        keys.iter()
            .filter(|k| self.0.contains(&k.to_le_bytes()))
            .count()
    }
}
impl BytesOf for SeenExactMap {}

// ---- concurrent peers ----

struct FastAtomic<S>(fastbloom::AtomicBloomFilter<S>);
impl<S: std::hash::BuildHasher + Sync> Shared for FastAtomic<S> {
    fn insert(&self, keys: &[u64]) -> usize {
        // fastbloom's `insert` returns whether the item was *already* present.
        keys.iter().filter(|k| !self.0.insert(*k)).count()
    }
    fn contains(&self, keys: &[u64]) -> usize {
        keys.iter().filter(|k| self.0.contains(*k)).count()
    }
}
impl<S: std::hash::BuildHasher> BytesOf for FastAtomic<S> {
    fn bytes_of(&self) -> Option<u64> {
        Some(self.0.num_bits() as u64 / 8)
    }
}

struct Dash(dashmap::DashSet<u64>);
impl Shared for Dash {
    fn insert(&self, keys: &[u64]) -> usize {
        keys.iter().filter(|&&k| self.0.insert(k)).count()
    }
    fn contains(&self, keys: &[u64]) -> usize {
        keys.iter().filter(|k| self.0.contains(*k)).count()
    }
}
impl BytesOf for Dash {}

struct Papaya(papaya::HashSet<u64>);
impl Shared for Papaya {
    fn insert(&self, keys: &[u64]) -> usize {
        let set = self.0.pin();
        keys.iter().filter(|&&k| set.insert(k)).count()
    }
    fn contains(&self, keys: &[u64]) -> usize {
        let set = self.0.pin();
        keys.iter().filter(|k| set.contains(*k)).count()
    }
}
impl BytesOf for Papaya {}

struct Scc(scc::HashSet<u64>);
impl Shared for Scc {
    fn insert(&self, keys: &[u64]) -> usize {
        keys.iter()
            .filter(|&&k| self.0.insert_sync(k).is_ok())
            .count()
    }
    fn contains(&self, keys: &[u64]) -> usize {
        keys.iter().filter(|k| self.0.contains_sync(*k)).count()
    }
}
impl BytesOf for Scc {}

// ---- single-threaded peers ----

struct Sbbf(sbbf_rs_safe::Filter);
impl Structure for Sbbf {
    fn insert(&mut self, keys: &[u64]) -> usize {
        // sbbf's `insert_hash` returns whether the hash was *already* present.
        keys.iter()
            .filter(|&&k| !self.0.insert_hash(xxh3(k).h1))
            .count()
    }
    fn contains(&self, keys: &[u64]) -> usize {
        keys.iter()
            .filter(|&&k| self.0.contains_hash(xxh3(k).h1))
            .count()
    }
    fn bytes(&self) -> Option<u64> {
        Some(self.0.as_bytes().len() as u64)
    }
}

struct Fast<S>(fastbloom::BloomFilter<S>);
impl<S: std::hash::BuildHasher> Structure for Fast<S> {
    fn insert(&mut self, keys: &[u64]) -> usize {
        keys.iter().filter(|k| !self.0.insert(*k)).count()
    }
    fn contains(&self, keys: &[u64]) -> usize {
        keys.iter().filter(|k| self.0.contains(*k)).count()
    }
    fn bytes(&self) -> Option<u64> {
        Some(self.0.num_bits() as u64 / 8)
    }
}

struct BloomCrate(bloomfilter::Bloom<u64>);
impl Structure for BloomCrate {
    fn insert(&mut self, keys: &[u64]) -> usize {
        // `check_and_set` returns whether the item was *already* present.
        keys.iter().filter(|k| !self.0.check_and_set(k)).count()
    }
    fn contains(&self, keys: &[u64]) -> usize {
        keys.iter().filter(|k| self.0.check(k)).count()
    }
    fn bytes(&self) -> Option<u64> {
        Some(self.0.as_slice().len() as u64)
    }
}

struct Growable(growable_bloom_filter::GrowableBloom);
impl Structure for Growable {
    fn insert(&mut self, keys: &[u64]) -> usize {
        keys.iter().filter(|k| self.0.insert(*k)).count()
    }
    fn contains(&self, keys: &[u64]) -> usize {
        keys.iter().filter(|k| self.0.contains(*k)).count()
    }
}

struct Quotient(qfilter::Filter);
impl Structure for Quotient {
    fn insert(&mut self, keys: &[u64]) -> usize {
        keys.iter()
            .filter(|k| self.0.insert(*k).expect("sized for every key"))
            .count()
    }
    fn contains(&self, keys: &[u64]) -> usize {
        keys.iter().filter(|k| self.0.contains(*k)).count()
    }
    fn bytes(&self) -> Option<u64> {
        Some(self.0.memory_usage() as u64)
    }
}

/// Static: built from all the keys' hashes at once; `insert` is not supported.
struct Xor(xorf::BinaryFuse8);
impl Shared for Xor {
    fn insert(&self, _: &[u64]) -> usize {
        unreachable!("static filter")
    }
    fn contains(&self, keys: &[u64]) -> usize {
        keys.iter()
            .filter(|&&k| self.0.contains(&xxh3(k).h1))
            .count()
    }
}
impl BytesOf for Xor {
    fn bytes_of(&self) -> Option<u64> {
        Some(self.0.fingerprints.len() as u64)
    }
}

// ---- the table of structures ----

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Insert and lookups.
    Dynamic,
    /// Built from the keys; lookups only.
    Static,
}

struct Entry {
    name: &'static str,
    kind: Kind,
    /// The largest size it runs at (the semi-concurrent filter and the slowest peers stop early).
    max_items: u64,
    make: fn(u64) -> Box<dyn Structure>,
}

fn bloom(layout: Layout, n: u64) -> AtomicBloomFilter {
    AtomicBloomFilter::builder(n)
        .fpr(FPR)
        .layout(layout)
        .build()
        .unwrap()
}

const ALL: u64 = u64::MAX;

const ENTRIES: &[Entry] = &[
    Entry {
        name: "seen_word",
        kind: Kind::Dynamic,
        max_items: ALL,
        make: |n| Box::new(Conc(SeenBloom(bloom(Layout::Word, n)))),
    },
    Entry {
        name: "seen_word_many",
        kind: Kind::Dynamic,
        max_items: ALL,
        make: |n| Box::new(Conc(SeenBloomMany(bloom(Layout::Word, n)))),
    },
    Entry {
        name: "seen_line",
        kind: Kind::Dynamic,
        max_items: ALL,
        make: |n| Box::new(Conc(SeenBloom(bloom(Layout::Line, n)))),
    },
    Entry {
        name: "sbbf_xxh3",
        kind: Kind::Dynamic,
        max_items: ALL,
        // 10 bits per key: 12.5 MB at 10M, the reference configuration (k = 8 per 256-bit block).
        make: |n| Box::new(Sbbf(sbbf_rs_safe::Filter::new(10, n as usize))),
    },
    Entry {
        name: "fastbloom_atomic",
        kind: Kind::Dynamic,
        max_items: ALL,
        make: |n| {
            Box::new(Conc(FastAtomic(
                fastbloom::AtomicBloomFilter::with_false_pos(FPR).expected_items(n as usize),
            )))
        },
    },
    Entry {
        name: "fastbloom_atomic_xxh3",
        kind: Kind::Dynamic,
        max_items: ALL,
        make: |n| {
            Box::new(Conc(FastAtomic(
                fastbloom::AtomicBloomFilter::with_false_pos(FPR)
                    .hasher(Xxh3DefaultBuilder)
                    .expected_items(n as usize),
            )))
        },
    },
    Entry {
        name: "fastbloom",
        kind: Kind::Dynamic,
        max_items: ALL,
        make: |n| {
            Box::new(Fast(
                fastbloom::BloomFilter::with_false_pos(FPR).expected_items(n as usize),
            ))
        },
    },
    Entry {
        name: "fastbloom_xxh3",
        kind: Kind::Dynamic,
        max_items: ALL,
        make: |n| {
            Box::new(Fast(
                fastbloom::BloomFilter::with_false_pos(FPR)
                    .hasher(Xxh3DefaultBuilder)
                    .expected_items(n as usize),
            ))
        },
    },
    Entry {
        name: "bloomfilter",
        kind: Kind::Dynamic,
        max_items: ALL,
        make: |n| {
            Box::new(BloomCrate(
                bloomfilter::Bloom::new_for_fp_rate(n as usize, FPR).unwrap(),
            ))
        },
    },
    Entry {
        name: "growable_bloom",
        kind: Kind::Dynamic,
        max_items: ALL,
        make: |n| {
            Box::new(Growable(growable_bloom_filter::GrowableBloom::new(
                FPR, n as usize,
            )))
        },
    },
    Entry {
        name: "seen_growing",
        kind: Kind::Dynamic,
        max_items: ALL,
        make: |n| Box::new(Conc(SeenGrowing(growing(Layout::Word, n)))),
    },
    Entry {
        name: "seen_growing_many",
        kind: Kind::Dynamic,
        max_items: ALL,
        make: |n| Box::new(Conc(SeenGrowingMany(growing(Layout::Word, n)))),
    },
    Entry {
        name: "seen_growing_line",
        kind: Kind::Dynamic,
        max_items: ALL,
        make: |n| Box::new(Conc(SeenGrowing(growing(Layout::Line, n)))),
    },
    Entry {
        // growable-bloom-filter grown from 1/100 of the items, as `seen_growing`. Its first
        // layer gets the whole rate it is given and its bound is rate / (1 - 0.85), so it is
        // given 0.15 · FPR: the same total bound as the others.
        name: "growable_grown",
        kind: Kind::Dynamic,
        max_items: ALL,
        make: |n| {
            Box::new(Growable(growable_bloom_filter::GrowableBloom::new(
                0.15 * FPR,
                (n / 100).max(1) as usize,
            )))
        },
    },
    Entry {
        name: "qfilter",
        kind: Kind::Dynamic,
        max_items: ALL,
        make: |n| Box::new(Quotient(qfilter::Filter::new(n, FPR).unwrap())),
    },
    Entry {
        name: "xorf_bfuse8",
        kind: Kind::Static,
        max_items: ALL,
        make: |n| {
            let hashes: Vec<u64> = (0..n).map(|k| xxh3(k).h1).collect();
            Box::new(Conc(Xor(xorf::BinaryFuse8::try_from(&hashes).unwrap())))
        },
    },
    Entry {
        name: "seen_semi",
        kind: Kind::Dynamic,
        max_items: 10_000_000,
        make: |n| {
            Box::new(Conc(SeenSemi(
                SemiConcurrentBloomFilter::with_capacity(n, FPR).unwrap(),
            )))
        },
    },
    Entry {
        name: "seen_overwrite",
        kind: Kind::Dynamic,
        max_items: ALL,
        make: |n| Box::new(Conc(SeenMap(OverwriteMap::with_buckets(4 * n).unwrap()))),
    },
    Entry {
        name: "seen_exact_overwrite",
        kind: Kind::Dynamic,
        max_items: ALL,
        make: |n| {
            Box::new(Conc(SeenExactMap(
                ExactOverwriteMap::with_buckets(2 * n).unwrap(),
            )))
        },
    },
    Entry {
        name: "dashmap",
        kind: Kind::Dynamic,
        max_items: ALL,
        make: |n| Box::new(Conc(Dash(dashmap::DashSet::with_capacity(n as usize)))),
    },
    Entry {
        name: "papaya",
        kind: Kind::Dynamic,
        max_items: ALL,
        make: |n| Box::new(Conc(Papaya(papaya::HashSet::with_capacity(n as usize)))),
    },
    Entry {
        name: "scc",
        kind: Kind::Dynamic,
        max_items: ALL,
        make: |n| Box::new(Conc(Scc(scc::HashSet::with_capacity(n as usize)))),
    },
];

// ---- the harness ----

/// Fills `buf` with keys `at..` and returns the filled part.
fn keys(buf: &mut [u64; CHUNK], at: u64, hi: u64) -> &[u64] {
    let len = ((hi - at) as usize).min(CHUNK);
    for (i, slot) in buf[..len].iter_mut().enumerate() {
        *slot = at + i as u64;
    }
    &buf[..len]
}

/// Runs `op` over keys `first..first + count` in chunks of [`CHUNK`], on one thread; returns
/// the time taken.
fn timed_local(first: u64, count: u64, mut op: impl FnMut(&[u64]) -> usize) -> Duration {
    let start = std::time::Instant::now();
    let mut buf = [0u64; CHUNK];
    let mut at = first;
    while at < first + count {
        let chunk = keys(&mut buf, at, first + count);
        at += chunk.len() as u64;
        black_box(op(chunk));
    }
    start.elapsed()
}

/// Runs `op` over keys `first..first + count`, split between `threads` threads; wall time.
fn timed_shared(
    threads: u64,
    first: u64,
    count: u64,
    op: &(dyn Fn(&[u64]) -> usize + Sync),
) -> Duration {
    common::timed_split(threads, first, count, &|lo, hi| {
        let mut buf = [0u64; CHUNK];
        let mut at = lo;
        while at < hi {
            let chunk = keys(&mut buf, at, hi);
            at += chunk.len() as u64;
            black_box(op(chunk));
        }
    })
}

/// Inserts keys `0..n` (both threads when shared).
fn fill(s: &mut dyn Structure, n: u64) {
    match s.shared() {
        Some(shared) => {
            timed_shared(2, 0, n, &|k| shared.insert(k));
        }
        None => {
            timed_local(0, n, |k| s.insert(k));
        }
    }
}

fn sizes() -> Vec<(u64, &'static str)> {
    let wanted = std::env::var("PEERS_SIZES").unwrap_or_default();
    SIZES
        .into_iter()
        .filter(|(_, label)| wanted.is_empty() || wanted.split(',').any(|w| w == *label))
        .collect()
}

/// Resident memory of this process, in bytes.
fn resident() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

/// Keys that both of two racing threads were told were new, of `n` keys that both insert in
/// the same order, meeting at a barrier every 256 keys so that neither runs ahead (on a busy
/// machine one thread can otherwise lag by thousands of keys, and an overwrite map then
/// forgets keys between the two inserts, which is not a race).
fn duplicate_race(s: &dyn Shared, n: u64) -> u64 {
    let step = std::sync::Barrier::new(2);
    let run = || {
        let mut new = Vec::with_capacity(n as usize);
        for block in (0..n).collect::<Vec<_>>().chunks(256) {
            step.wait();
            new.extend(block.iter().map(|&k| s.insert(&[k]) == 1));
        }
        new
    };
    let (a, b) = std::thread::scope(|scope| {
        let a = scope.spawn(run);
        let b = scope.spawn(run);
        (a.join().unwrap(), b.join().unwrap())
    });
    a.iter().zip(&b).filter(|(x, y)| **x && **y).count() as u64
}

/// The duplicate race of every thread-safe dynamic structure, on 1M keys.
fn race_table() {
    println!("\nduplicate race: structure | keys both threads were told were new, of 1M");
    for entry in ENTRIES
        .iter()
        .filter(|e| e.kind == Kind::Dynamic && selected(e.name))
    {
        // Sized for 4M items: a map then has 16M buckets (8M for the exact one), so a slot
        // overwritten between two inserts of one key 256 keys apart is rare.
        let s = (entry.make)(4_000_000);
        if let Some(shared) = s.shared() {
            println!(
                "duplicate race: {} | {}",
                entry.name,
                duplicate_race(shared, 1_000_000)
            );
        }
    }
}

fn bench_insert(c: &mut Criterion, entry: &Entry, n: u64, label: &str) {
    let mut group = c.benchmark_group("insert");
    group.throughput(Throughput::Elements(1));
    let mut state: Option<Box<dyn Structure>> = None;
    let mut next = 0u64;
    for threads in [1, 2] {
        let id = BenchmarkId::new(entry.name, format!("{label}/{threads}t"));
        group.bench_function(id, |b| {
            b.iter_custom(|iters| {
                let mut elapsed = Duration::ZERO;
                let mut left = iters;
                while left > 0 {
                    if next >= n || state.is_none() {
                        state = None; // free the old one first
                        state = Some((entry.make)(n));
                        next = 0;
                    }
                    let count = left.min(n - next);
                    let s = state.as_deref_mut().expect("built above");
                    elapsed += match (threads, s.shared()) {
                        (1, _) => timed_local(next, count, |k| s.insert(k)),
                        (_, Some(shared)) => {
                            timed_shared(threads, next, count, &|k| shared.insert(k))
                        }
                        // Single-threaded structure: no 2-thread row (filtered out below).
                        (_, None) => unreachable!(),
                    };
                    next += count;
                    left -= count;
                }
                elapsed
            })
        });
        if state.as_ref().is_some_and(|s| s.shared().is_none()) {
            break;
        }
    }
    group.finish();
}

/// The environment variable that makes this binary a child that measures one structure's
/// memory: `name,items`.
const MEMORY_OF: &str = "PEERS_MEMORY_OF";

/// In a child started by [`resident_growth_in_child`]: builds and fills the structure named in
/// [`MEMORY_OF`], prints the growth of resident memory, and exits.
fn measure_memory_if_child() {
    let Ok(what) = std::env::var(MEMORY_OF) else {
        return;
    };
    let (name, n) = what.split_once(',').expect("name,items");
    let n: u64 = n.parse().expect("items");
    let entry = ENTRIES
        .iter()
        .find(|e| e.name == name)
        .expect("a structure");
    let before = resident();
    let mut s = (entry.make)(n);
    if entry.kind == Kind::Dynamic {
        fill(&mut *s, n);
    }
    println!("{}", resident().saturating_sub(before));
    black_box(s);
    std::process::exit(0);
}

/// The memory of a structure that does not count its own: the growth of resident memory while
/// it is built and filled, in a fresh process (in this one, memory freed by earlier structures
/// is reused, and the growth reads low or 0). `None` when the child fails.
fn resident_growth_in_child(entry: &Entry, n: u64) -> Option<u64> {
    let exe = std::env::current_exe().ok()?;
    let out = std::process::Command::new(exe)
        .env(MEMORY_OF, format!("{},{n}", entry.name))
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout).trim().parse().ok()
}

/// Builds and fills `entry` at `n` items for the lookup groups, and prints its memory and rate.
fn built_for_lookups(entry: &Entry, n: u64, label: &str) -> Box<dyn Structure> {
    let mut s = (entry.make)(n);
    if entry.kind == Kind::Dynamic {
        fill(&mut *s, n);
    }
    let bytes = s
        .bytes()
        .or_else(|| resident_growth_in_child(entry, n))
        .unwrap_or(0);
    let probe = 1_000_000.min(n);
    let mut fp = 0;
    timed_local(MISS | 1 << 62, probe, |k| {
        fp += s.contains(k);
        0
    });
    println!(
        "memory and fpr: {} | {label} | {bytes} bytes | {:.2} bytes/item | fpr {:.5}",
        entry.name,
        bytes as f64 / n as f64,
        fp as f64 / probe as f64
    );
    s
}

/// The lookup groups of one size: every structure is built first, then each group measures them
/// one after another, so that the cells a ratio compares are seconds apart, not minutes (on a
/// shared machine, memory latency drifts between the two).
fn bench_contains(c: &mut Criterion, built: &[(&Entry, Box<dyn Structure>)], n: u64, label: &str) {
    for (group_name, offset) in [("contains_hit", 0), ("contains_miss", MISS)] {
        let mut group = c.benchmark_group(group_name);
        group.throughput(Throughput::Elements(1));
        for (entry, s) in built {
            let threads_max = if s.shared().is_some() { 2 } else { 1 };
            for threads in 1..=threads_max {
                let mut next = 0u64;
                let id = BenchmarkId::new(entry.name, format!("{label}/{threads}t"));
                group.bench_function(id, |b| {
                    b.iter_custom(|iters| {
                        let mut elapsed = Duration::ZERO;
                        let mut left = iters;
                        while left > 0 {
                            let count = left.min(n - next);
                            elapsed += match s.shared() {
                                Some(shared) if threads > 1 => {
                                    timed_shared(threads, offset + next, count, &|k| {
                                        shared.contains(k)
                                    })
                                }
                                _ => timed_local(offset + next, count, |k| s.contains(k)),
                            };
                            next = (next + count) % n;
                            left -= count;
                        }
                        elapsed
                    })
                });
            }
        }
        group.finish();
    }
}

/// The structures to run: all, or those named in `PEERS_ONLY` (comma-separated).
fn selected(name: &str) -> bool {
    let only = std::env::var("PEERS_ONLY").unwrap_or_default();
    only.is_empty() || only.split(',').any(|o| o == name)
}

/// The memory-level-parallelism bound: independent random 8-byte reads from an array as large
/// as `seen_word`'s filter, one multiply per index and nothing else, so the processor keeps
/// as many misses in flight as it can. The array is a plain `Vec` (4 KiB pages). Then the same
/// for writes of one bit: atomic (`fetch_or`) and plain (`|=`).
fn bench_bound(c: &mut Criterion, n: u64, label: &str) {
    let words = (bloom(Layout::Word, n).memory_bytes() / 8) as usize;
    let array: Vec<u64> = (0..words as u64).collect();
    let mut group = c.benchmark_group("contains_hit");
    group.throughput(Throughput::Elements(1));
    let mut next = 0u64;
    group.bench_function(
        BenchmarkId::new("bound_random_reads", format!("{label}/1t")),
        |b| {
            b.iter_custom(|iters| {
                let start = std::time::Instant::now();
                let mut sum = 0u64;
                for i in next..next + iters {
                    let h = i.wrapping_mul(0x9e37_79b9_7f4a_7c15);
                    sum = sum.wrapping_add(array[((u128::from(h) * words as u128) >> 64) as usize]);
                }
                black_box(sum);
                next += iters;
                start.elapsed()
            })
        },
    );
    group.finish();
    // The same for writes: one bit set in a random word, as an atomic `fetch_or` (what any
    // filter that threads share through `&self` must do, in some form) and as a plain `|=`
    // (what a filter behind `&mut self`, such as sbbf-rs, does).
    let atomic: Vec<AtomicU64> = (0..words as u64).map(AtomicU64::new).collect();
    let mut plain = array;
    let mut group = c.benchmark_group("insert");
    group.throughput(Throughput::Elements(1));
    let mut next = 0u64;
    group.bench_function(
        BenchmarkId::new("bound_random_fetch_or", format!("{label}/1t")),
        |b| {
            b.iter_custom(|iters| {
                let start = std::time::Instant::now();
                let mut any = 0u64;
                for i in next..next + iters {
                    let h = i.wrapping_mul(0x9e37_79b9_7f4a_7c15);
                    let word = &atomic[((u128::from(h) * words as u128) >> 64) as usize];
                    any |= word.fetch_or(1 << (h >> 58), Relaxed);
                }
                black_box(any);
                next += iters;
                start.elapsed()
            })
        },
    );
    let mut next = 0u64;
    group.bench_function(
        BenchmarkId::new("bound_random_or", format!("{label}/1t")),
        |b| {
            b.iter_custom(|iters| {
                let start = std::time::Instant::now();
                for i in next..next + iters {
                    let h = i.wrapping_mul(0x9e37_79b9_7f4a_7c15);
                    plain[((u128::from(h) * words as u128) >> 64) as usize] |= 1 << (h >> 58);
                }
                black_box(&plain);
                next += iters;
                start.elapsed()
            })
        },
    );
    group.finish();
}

/// 64-byte tokens (a push-notification device token, a session id): one `insert` per token
/// through the hasher's byte path, against `insert_many_hashes` over 1,024 tokens at a time.
fn bench_tokens(c: &mut Criterion, n: u64, label: &str) {
    let token = |k: u64| -> [u8; 64] {
        let mut t = [0u8; 64];
        for (i, part) in t.chunks_exact_mut(8).enumerate() {
            part.copy_from_slice(&(k ^ (i as u64) << 56).to_le_bytes());
        }
        t
    };
    let mut group = c.benchmark_group("insert_token64");
    group.throughput(Throughput::Elements(1));
    for many in [false, true] {
        let name = if many { "seen_word_many" } else { "seen_word" };
        let mut filter: Option<AtomicBloomFilter> = None;
        let mut next = 0u64;
        let mut tokens = Vec::with_capacity(CHUNK);
        let mut out = Vec::with_capacity(CHUNK);
        group.bench_function(BenchmarkId::new(name, format!("{label}/1t")), |b| {
            b.iter_custom(|iters| {
                let mut elapsed = Duration::ZERO;
                let mut left = iters;
                while left > 0 {
                    if next >= n || filter.is_none() {
                        filter = None;
                        filter = Some(bloom(Layout::Word, n));
                        next = 0;
                    }
                    let f = filter.as_ref().expect("built above");
                    let count = left.min(n - next).min(CHUNK as u64);
                    tokens.clear();
                    tokens.extend((next..next + count).map(token));
                    let start = std::time::Instant::now();
                    let new = if many {
                        out.clear();
                        let hashes = tokens.iter().map(|t| f.hasher().hash_bytes(t));
                        f.insert_many_hashes(hashes, &mut out)
                    } else {
                        tokens
                            .iter()
                            .filter(|t| f.insert_hash(f.hasher().hash_bytes(*t)))
                            .count()
                    };
                    elapsed += start.elapsed();
                    black_box(new);
                    next += count;
                    left -= count;
                }
                elapsed
            })
        });
    }
    group.finish();
}

fn peers(c: &mut Criterion) {
    measure_memory_if_child();
    if std::env::var("PEERS_RACE").map_or(true, |v| v != "0") {
        race_table();
    }
    for (n, label) in sizes() {
        if selected("bound_random_reads") {
            bench_bound(c, n, label);
        }
        if selected("tokens") {
            bench_tokens(c, n, label);
        }
        let entries: Vec<&Entry> = ENTRIES
            .iter()
            .filter(|e| n <= e.max_items && selected(e.name))
            .collect();
        for entry in entries.iter().filter(|e| e.kind == Kind::Dynamic) {
            bench_insert(c, entry, n, label);
        }
        let built: Vec<_> = entries
            .iter()
            .map(|&entry| (entry, built_for_lookups(entry, n, label)))
            .collect();
        bench_contains(c, &built, n, label);
    }
}

criterion_group! {
    name = peers_group;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2))
        .sample_size(10);
    targets = peers
}
criterion_main!(peers_group);
