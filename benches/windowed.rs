//! `WindowedBloomFilter` against separate `AtomicBloomFilter`s, one per period: a lookup of the
//! whole window in one cache line, against one lookup (one miss) per generation.
//!
//! Groups `contains_miss`, `contains_hit`, `insert`; function = structure; parameter
//! `{items}/{threads}t`. `items` is the number of u64 keys per generation: 10M, or 1M with
//! `WINDOWED_ITEMS=1M` (a quick run). Every generation of every structure is full (`items` keys)
//! before the lookups; the target rate is 0.01 over the window.
//!
//! - `seen_window`: `WindowedBloomFilter` with G = 7 live generations and the spare: 8 words per
//!   block, one 64-byte line. Rotated by hand (`rotate_manually`, `rotate()` between
//!   generations).
//! - `seen_window_g8`: G = 8: 9 slots in 9 words (two lines: a block starts anywhere in a line)
//!   per block, at the rate
//!   `sizing::window` gives 8 generations. Filled at epochs 8 to 15, so that the spare is slot 7
//!   and the oldest generation slot 8: a lookup that misses reads both lines (8 epochs in 9 do),
//!   and a hit on the oldest generation is found last (the loop goes by slot).
//! - `separate_sequential`: 8 `AtomicBloomFilter`s (the 8-day ingest), each built for `items` at
//!   the window's per-generation rate, `sizing::window(items, 7, 0.01).generation_fpr`: the 8
//!   take exactly the memory of `seen_window` (checked and printed). A lookup is `contains` on
//!   each in turn, newest first, stopping at the first hit (so a hit on the oldest walks all 8,
//!   hashing the key 8 times).
//! - `separate_sequential_hash_once`: the same, with the key hashed once (`contains_hash` on
//!   each filter: they share the hasher).
//! - `separate_8_threads`: the same 8 filters, each owned by one of 8 worker threads (a
//!   persistent pool, parked on a barrier between batches; 8 threads on this 2-core machine are
//!   oversubscribed). Keys go in batches of 65,536: the main thread publishes the batch and
//!   wakes the workers (one barrier), each worker runs `contains` of its filter over the whole
//!   batch into a bitset of its own (no short-circuit: a worker cannot know what the others
//!   found), the main thread waits for all 8 (a second barrier) and ORs the 8 bitsets (and
//!   counts the hits). All of that is timed; the pool's threads are started once, untimed. For
//!   `insert`, the 7 older filters are checked this way and the main thread then inserts the
//!   keys none of them held into the current filter.
//! - `one_filter` (lookups only): one of the separate filters alone, the cost of a lookup of one
//!   generation; `one_filter_8x`: one `AtomicBloomFilter` for 8 x `items` keys at the same
//!   rate, holding 8 x `items` keys: one lookup in a table as large as `seen_window`.
//!
//! Operations, single calls on one thread unless named `8t`; keys pre-generated outside the
//! timed loop:
//!
//! - `contains_miss`: keys never inserted (every generation is checked).
//! - `contains_hit`: the keys of the oldest generation (the sequential lookup walks all 8).
//! - `insert`: fresh keys, each checked against every live generation and inserted into the
//!   current one (`seen_window_batch`: `insert_many`, 1,024 keys per call, against the loop of
//!   `insert` of `seen_window`). The first insert rotates (untimed) onto an empty generation; after `items`
//!   inserts the structure rotates again (untimed, its time printed): the window's
//!   `rotate()` (its spare is cleared by the inserts, one insert in 64 clearing 32 blocks: timed,
//!   as part of its insert), the separate filters' `clear()` of the oldest, which becomes the
//!   current one.
//!
//! It prints first the memory of each structure, and its false-positive rate over 1M keys never
//! inserted when it is built.
//!
//! Run: `cargo bench -p seen-benches --bench windowed` (2.5 minutes on a busy 2-core VM, of
//! which 35 to 50 s build and fill the structures; 1.3 GB of memory at 10M). Structures are
//! built on first use, so a criterion filter after `--` (`-- 'seen_window/'`) builds only what
//! it runs. Quick check: `WINDOWED_ITEMS=1M cargo bench -p seen-benches --bench windowed --
//! --warm-up-time 0.5 --measurement-time 1` (under a minute; 1m47s with the default times).
//! Results in `docs/benchmarks.md`.

use std::cell::{OnceCell, RefCell};
use std::hint::black_box;
use std::sync::{Barrier, Mutex, OnceLock, RwLock};
use std::time::{Duration, Instant};

mod common;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use seen::hash::ItemHasher;
use seen::sizing::window;
use seen::{AtomicBloomFilter, WindowedBloomFilter};

const FPR: f64 = 0.01;
/// The separate filters: the 8-day ingest.
const FILTERS: usize = 8;
/// Keys never inserted: no generation's keys have this bit.
const MISS: u64 = 1 << 63;
/// The keys of generation `g` (0 the oldest) are `g << GEN_SHIFT | i`; fresh keys for `insert`
/// start at generation [`FRESH`].
const GEN_SHIFT: u32 = 40;
const FRESH: u64 = 1000;
/// Keys per batch handed to the 8 worker threads.
const BATCH: usize = 1 << 16;
const CHUNK: usize = 1024;

fn items() -> (u64, String) {
    let wanted = std::env::var("WINDOWED_ITEMS").unwrap_or_else(|_| "10M".into());
    let n = match wanted.strip_suffix('M') {
        Some(m) => m.parse::<u64>().map(|m| m * 1_000_000),
        None => match wanted.strip_suffix('K') {
            Some(k) => k.parse::<u64>().map(|k| k * 1_000),
            None => wanted.parse::<u64>(),
        },
    }
    .expect("WINDOWED_ITEMS: a count such as 1M, 10M or 250K");
    (n, wanted)
}

fn generation_keys(g: u64, n: u64) -> Vec<u64> {
    (0..n).map(|i| g << GEN_SHIFT | i).collect()
}

/// Inserts the keys of generation `g` with two threads, in chunks; returns the wall time.
fn fill(g: u64, n: u64, insert: &(dyn Fn(&[u64]) + Sync)) -> Duration {
    common::timed_split(2, 0, n, &|lo, hi| {
        let mut buf = Vec::with_capacity(CHUNK);
        let mut at = lo;
        while at < hi {
            buf.clear();
            buf.extend((at..hi.min(at + CHUNK as u64)).map(|i| g << GEN_SHIFT | i));
            insert(&buf);
            at += buf.len() as u64;
        }
    })
}

/// The measured false-positive rate over 1M keys never inserted (other than the benchmark's).
fn measured_fpr(contains: impl Fn(u64) -> bool) -> f64 {
    let probes = 1_000_000;
    let hits = (0..probes)
        .filter(|&i| contains(MISS | 1 << 62 | i))
        .count();
    hits as f64 / probes as f64
}

fn windowed(generations: u32, n: u64) -> WindowedBloomFilter {
    WindowedBloomFilter::builder(n)
        .fpr(FPR)
        .periods(generations - 1)
        .rotate_manually()
        .build()
        .unwrap()
}

/// A window of `generations`, rotated `skip` times while empty, then filled with generations
/// `0..generations` of `n` keys (rotating between them).
fn filled_window(generations: u32, skip: u32, n: u64, name: &str) -> WindowedBloomFilter {
    let start = Instant::now();
    let w = windowed(generations, n);
    for _ in 0..skip {
        w.rotate();
    }
    for g in 0..u64::from(generations) {
        if g > 0 {
            w.rotate();
        }
        fill(g, n, &|keys| {
            for k in keys {
                w.insert(k);
            }
        });
    }
    println!(
        "built: {name} | epoch {} | {} bytes | filled in {:.1} s | fpr {:.5} over {} generations",
        w.generation(),
        w.memory_bytes(),
        start.elapsed().as_secs_f64(),
        measured_fpr(|k| w.contains(&k)),
        generations,
    );
    w
}

/// The 8 separate filters as a ring: `filters[current]` is the newest.
struct Separate {
    filters: Vec<AtomicBloomFilter>,
    current: usize,
}

impl Separate {
    fn build(n: u64, rate: f64) -> Self {
        let start = Instant::now();
        let filters: Vec<_> = (0..FILTERS as u64)
            .map(|g| {
                let f = AtomicBloomFilter::builder(n).fpr(rate).build().unwrap();
                fill(g, n, &|keys| {
                    f.insert_counting_new(keys);
                });
                f
            })
            .collect();
        let s = Self {
            filters,
            current: FILTERS - 1,
        };
        println!(
            "built: separate (8 filters) | {} bytes | filled in {:.1} s | fpr {:.5} over 8 generations",
            s.bytes(),
            start.elapsed().as_secs_f64(),
            measured_fpr(|k| s.contains(&k)),
        );
        s
    }

    fn bytes(&self) -> u64 {
        self.filters
            .iter()
            .map(AtomicBloomFilter::memory_bytes)
            .sum()
    }

    /// The filters newest first.
    fn newest_first(&self) -> impl Iterator<Item = &AtomicBloomFilter> {
        (0..FILTERS).map(move |age| &self.filters[(self.current + FILTERS - age) % FILTERS])
    }

    #[inline]
    fn contains(&self, key: &u64) -> bool {
        self.newest_first().any(|f| f.contains(key))
    }

    #[inline]
    fn contains_hash_once(&self, key: &u64) -> bool {
        let hash = self.filters[0].hasher().hash_item(key);
        self.newest_first().any(|f| f.contains_hash(hash))
    }

    /// Inserts into the current filter if none of the 7 older holds the key.
    #[inline]
    fn insert(&self, key: &u64) -> bool {
        !self.newest_first().skip(1).any(|f| f.contains(key))
            && self.filters[self.current].insert(key)
    }

    #[inline]
    fn insert_hash_once(&self, key: &u64) -> bool {
        let hash = self.filters[0].hasher().hash_item(key);
        !self.newest_first().skip(1).any(|f| f.contains_hash(hash))
            && self.filters[self.current].insert_hash(hash)
    }

    /// Forgets the oldest filter, which becomes the current one.
    fn rotate(&mut self) {
        self.current = (self.current + 1) % FILTERS;
        self.filters[self.current].clear();
    }
}

// ---- the pool of 8 workers, one per separate filter ----

#[derive(Clone, Copy, PartialEq, Eq)]
enum Keys {
    Hit,
    Miss,
    Fresh,
}

#[derive(Clone, Copy)]
struct Job {
    keys: Keys,
    lo: usize,
    hi: usize,
    /// Which filters (by index) to check.
    filters: u32,
    quit: bool,
}

struct Pool<'a> {
    hits: &'a [u64],
    misses: &'a [u64],
    fresh: RwLock<Vec<u64>>,
    separate: &'a OnceLock<RwLock<Separate>>,
    job: Mutex<Job>,
    start: Barrier,
    done: Barrier,
    /// One bitset per worker: bit `j` is whether its filter holds the batch's key `j`.
    found: Vec<Mutex<Vec<u64>>>,
}

impl<'a> Pool<'a> {
    fn new(hits: &'a [u64], misses: &'a [u64], separate: &'a OnceLock<RwLock<Separate>>) -> Self {
        Self {
            hits,
            misses,
            fresh: RwLock::new(Vec::new()),
            separate,
            job: Mutex::new(Job {
                keys: Keys::Hit,
                lo: 0,
                hi: 0,
                filters: 0,
                quit: false,
            }),
            start: Barrier::new(FILTERS + 1),
            done: Barrier::new(FILTERS + 1),
            found: (0..FILTERS)
                .map(|_| Mutex::new(vec![0; BATCH / 64]))
                .collect(),
        }
    }

    fn worker(&self, i: usize) {
        loop {
            self.start.wait();
            let job = *self.job.lock().unwrap();
            if job.quit {
                return;
            }
            if job.filters & 1 << i != 0 {
                let separate = self.separate.get().expect("built").read().unwrap();
                let filter = &separate.filters[i];
                let fresh = self.fresh.read().unwrap();
                let keys = match job.keys {
                    Keys::Hit => self.hits,
                    Keys::Miss => self.misses,
                    Keys::Fresh => &fresh,
                };
                let mut found = self.found[i].lock().unwrap();
                for (word, chunk) in found.iter_mut().zip(keys[job.lo..job.hi].chunks(64)) {
                    let mut bits = 0u64;
                    for (b, k) in chunk.iter().enumerate() {
                        bits |= u64::from(filter.contains(k)) << b;
                    }
                    *word = bits;
                }
            }
            self.done.wait();
        }
    }

    /// Runs one batch on the workers; returns when all are done.
    fn run(&self, job: Job) {
        *self.job.lock().unwrap() = job;
        self.start.wait();
        self.done.wait();
    }

    /// Checks keys `lo..hi` (at most [`BATCH`]) of `keys` in the filters of `mask`, one worker
    /// each; calls `each(j, held)` for every key `j` of the batch, `held` the OR of the filters'
    /// answers.
    fn check(
        &self,
        keys: Keys,
        lo: usize,
        hi: usize,
        mask: u32,
        mut each: impl FnMut(usize, bool),
    ) {
        self.run(Job {
            keys,
            lo,
            hi,
            filters: mask,
            quit: false,
        });
        let found: Vec<_> = (0..FILTERS)
            .filter(|i| mask & 1 << i != 0)
            .map(|i| self.found[i].lock().unwrap())
            .collect();
        for w in 0..(hi - lo).div_ceil(64) {
            let any = found.iter().fold(0, |acc, f| acc | f[w]);
            for b in 0..64.min(hi - lo - w * 64) {
                each(w * 64 + b, any >> b & 1 == 1);
            }
        }
    }

    fn quit(&self) {
        *self.job.lock().unwrap() = Job {
            keys: Keys::Hit,
            lo: 0,
            hi: 0,
            filters: 0,
            quit: true,
        };
        self.start.wait();
    }
}

// ---- the benchmarks ----

/// Lazily built structures, shared by the groups.
struct Structures<'a> {
    n: u64,
    rate: f64,
    window: OnceCell<WindowedBloomFilter>,
    window_g8: OnceCell<WindowedBloomFilter>,
    separate: &'a OnceLock<RwLock<Separate>>,
    one_8x: OnceCell<AtomicBloomFilter>,
}

impl Structures<'_> {
    fn window(&self) -> &WindowedBloomFilter {
        self.window
            .get_or_init(|| filled_window(7, 0, self.n, "seen_window"))
    }
    fn window_g8(&self) -> &WindowedBloomFilter {
        self.window_g8
            .get_or_init(|| filled_window(8, 8, self.n, "seen_window_g8"))
    }
    fn separate(&self) -> &RwLock<Separate> {
        self.separate
            .get_or_init(|| RwLock::new(Separate::build(self.n, self.rate)))
    }
    fn one_8x(&self) -> &AtomicBloomFilter {
        self.one_8x.get_or_init(|| {
            let start = Instant::now();
            let f = AtomicBloomFilter::builder(8 * self.n)
                .fpr(self.rate)
                .build()
                .unwrap();
            for g in 0..FILTERS as u64 {
                fill(g, self.n, &|keys| {
                    f.insert_counting_new(keys);
                });
            }
            println!(
                "built: one_filter_8x | {} bytes | filled in {:.1} s | fpr {:.5}",
                f.memory_bytes(),
                start.elapsed().as_secs_f64(),
                measured_fpr(|k| f.contains(&k)),
            );
            f
        })
    }
}

/// Times `lookup` over `iters` keys of `keys`, from `*next` on, cycling.
fn timed_lookups(
    keys: &[u64],
    next: &mut usize,
    iters: u64,
    lookup: impl Fn(&u64) -> bool,
) -> Duration {
    let mut left = iters as usize;
    let mut hits = 0usize;
    let start = Instant::now();
    while left > 0 {
        let count = left.min(keys.len() - *next);
        for k in &keys[*next..*next + count] {
            hits += usize::from(lookup(k));
        }
        *next = (*next + count) % keys.len();
        left -= count;
    }
    let elapsed = start.elapsed();
    black_box(hits);
    elapsed
}

/// Times `lookup` over `iters` keys of `keys` in calls of at most 1,024 keys, from `*next` on,
/// cycling; `lookup` returns how many it found.
fn timed_batches(
    keys: &[u64],
    next: &mut usize,
    iters: u64,
    mut lookup: impl FnMut(&[u64]) -> usize,
) -> Duration {
    let mut left = iters as usize;
    let mut hits = 0usize;
    let start = Instant::now();
    while left > 0 {
        let count = left.min(keys.len() - *next).min(1024);
        hits += lookup(&keys[*next..*next + count]);
        *next = (*next + count) % keys.len();
        left -= count;
    }
    let elapsed = start.elapsed();
    black_box(hits);
    elapsed
}

fn bench_contains(c: &mut Criterion, s: &Structures, pool: &Pool, label: &str) {
    for (group_name, which) in [("contains_miss", Keys::Miss), ("contains_hit", Keys::Hit)] {
        let keys = if which == Keys::Hit {
            pool.hits
        } else {
            pool.misses
        };
        let mut group = c.benchmark_group(group_name);
        group.throughput(Throughput::Elements(1));
        let id = |name: &str, threads: u32| BenchmarkId::new(name, format!("{label}/{threads}t"));
        let mut next = 0;
        group.bench_function(id("seen_window", 1), |b| {
            let w = s.window();
            b.iter_custom(|iters| timed_lookups(keys, &mut next, iters, |k| w.contains(k)));
        });
        group.bench_function(id("seen_window_g8", 1), |b| {
            let w = s.window_g8();
            b.iter_custom(|iters| timed_lookups(keys, &mut next, iters, |k| w.contains(k)));
        });
        group.bench_function(id("separate_sequential", 1), |b| {
            let sep = s.separate().read().unwrap();
            b.iter_custom(|iters| timed_lookups(keys, &mut next, iters, |k| sep.contains(k)));
        });
        group.bench_function(id("separate_sequential_hash_once", 1), |b| {
            let sep = s.separate().read().unwrap();
            b.iter_custom(|iters| {
                timed_lookups(keys, &mut next, iters, |k| sep.contains_hash_once(k))
            });
        });
        group.bench_function(id("separate_8_threads", 8), |b| {
            s.separate();
            b.iter_custom(|iters| {
                let mut left = iters as usize;
                let mut hits = 0usize;
                let start = Instant::now();
                while left > 0 {
                    let count = left.min(keys.len() - next).min(BATCH);
                    pool.check(
                        which,
                        next,
                        next + count,
                        u32::MAX >> (32 - FILTERS),
                        |_, held| {
                            hits += usize::from(held);
                        },
                    );
                    next = (next + count) % keys.len();
                    left -= count;
                }
                let elapsed = start.elapsed();
                black_box(hits);
                elapsed
            });
        });
        // The batch APIs: 1,024 keys per call, hashed lazily inside the call.
        group.bench_function(id("seen_window_batch", 1), |b| {
            let w = s.window();
            let mut hits = Vec::with_capacity(1024);
            b.iter_custom(|iters| {
                timed_batches(keys, &mut next, iters, |chunk| {
                    hits.clear();
                    let h = w.hasher();
                    w.contains_many_hashes(chunk.iter().map(|k| h.hash_item(k)), &mut hits)
                })
            });
        });
        group.bench_function(id("separate_sequential_batch", 1), |b| {
            let sep = s.separate().read().unwrap();
            let (mut any, mut hits) = (Vec::with_capacity(1024), Vec::with_capacity(1024));
            b.iter_custom(|iters| {
                timed_batches(keys, &mut next, iters, |chunk| {
                    // Each filter's batch lookup in turn, newest first, OR-ed: the batch
                    // version of the ingest job's loop (no short-circuit per key).
                    any.clear();
                    any.resize(chunk.len(), false);
                    for f in sep.newest_first() {
                        hits.clear();
                        f.contains_many(chunk, &mut hits);
                        any.iter_mut().zip(&hits).for_each(|(a, &h)| *a |= h);
                    }
                    any.iter().filter(|&&a| a).count()
                })
            });
        });
        group.bench_function(id("one_filter", 1), |b| {
            let sep = s.separate().read().unwrap();
            // The oldest filter: it holds the hit keys.
            let oldest = sep.newest_first().last().expect("8 filters");
            b.iter_custom(|iters| timed_lookups(keys, &mut next, iters, |k| oldest.contains(k)));
        });
        group.bench_function(id("one_filter_8x", 1), |b| {
            let f = s.one_8x();
            b.iter_custom(|iters| timed_lookups(keys, &mut next, iters, |k| f.contains(k)));
        });
        group.finish();
    }
}

/// The rotations the insert benchmarks did, and their times, printed after the group.
type Rotations = RefCell<Vec<(&'static str, Duration)>>;

fn timed_rotation(rotations: &Rotations, name: &'static str, rotate: impl FnOnce()) {
    let start = Instant::now();
    rotate();
    rotations.borrow_mut().push((name, start.elapsed()));
}

/// The state of one structure's insert benchmark: the fresh keys of the current generation
/// (`next` of them used). At first use, and whenever a generation has taken `n` keys, the
/// structure rotates onto an empty generation and the next `n` fresh keys are generated, both
/// untimed.
struct InsertRun {
    n: u64,
    keys: Vec<u64>,
    round: u64,
    next: usize,
}

impl InsertRun {
    fn new(n: u64) -> Self {
        Self {
            n,
            keys: Vec::new(),
            round: 0,
            next: 0,
        }
    }

    /// Inserts `iters` fresh keys with `insert`, which takes a slice of at most `limit` keys and
    /// returns the time it took; `rotate` gets the new generation's keys.
    fn run(
        &mut self,
        iters: u64,
        limit: usize,
        mut rotate: impl FnMut(&[u64]),
        mut insert: impl FnMut(&[u64], usize) -> Duration,
    ) -> Duration {
        let mut left = iters as usize;
        let mut elapsed = Duration::ZERO;
        while left > 0 {
            if self.next == self.keys.len() {
                self.keys.clear();
                let round = (FRESH + self.round) << GEN_SHIFT;
                self.keys.extend((0..self.n).map(|i| round | i));
                self.round += 1;
                self.next = 0;
                rotate(&self.keys);
            }
            let count = left.min(self.keys.len() - self.next).min(limit);
            elapsed += insert(&self.keys[self.next..self.next + count], self.next);
            self.next += count;
            left -= count;
        }
        elapsed
    }
}

/// Times `insert` over `keys`; returns the time (the count of new items goes to `black_box`).
fn timed_inserts(keys: &[u64], insert: impl Fn(&u64) -> bool) -> Duration {
    let start = Instant::now();
    let new = keys.iter().filter(|k| insert(k)).count();
    let elapsed = start.elapsed();
    black_box(new);
    elapsed
}

fn bench_insert(c: &mut Criterion, s: &Structures, pool: &Pool, label: &str) {
    let mut group = c.benchmark_group("insert");
    group.throughput(Throughput::Elements(1));
    let id = |name: &str, threads: u32| BenchmarkId::new(name, format!("{label}/{threads}t"));
    let rotations = Rotations::default();

    for (name, g8) in [("seen_window", false), ("seen_window_g8", true)] {
        let mut run = InsertRun::new(s.n);
        group.bench_function(id(name, 1), |b| {
            let w = if g8 { s.window_g8() } else { s.window() };
            b.iter_custom(|iters| {
                run.run(
                    iters,
                    usize::MAX,
                    |_| {
                        timed_rotation(&rotations, name, || {
                            w.rotate();
                        })
                    },
                    |keys, _| timed_inserts(keys, |k| w.insert(k)),
                )
            });
        });
    }

    // The batch API, 1,024 keys per call hashed inside it, against the loop of `insert` above
    // (`seen_window`). The same window: its keys start at other rounds, so they are fresh too.
    let mut run = InsertRun::new(s.n);
    run.round = 500;
    group.bench_function(id("seen_window_batch", 1), |b| {
        let w = s.window();
        let mut new = Vec::with_capacity(1024);
        b.iter_custom(|iters| {
            run.run(
                iters,
                1024,
                |_| {
                    timed_rotation(&rotations, "seen_window_batch", || {
                        w.rotate();
                    })
                },
                |keys, _| {
                    let start = Instant::now();
                    new.clear();
                    black_box(w.insert_many(keys, &mut new));
                    start.elapsed()
                },
            )
        });
    });

    let rotate_separate = |name: &'static str| {
        timed_rotation(&rotations, name, || s.separate().write().unwrap().rotate());
    };
    for (name, hash_once) in [
        ("separate_sequential", false),
        ("separate_sequential_hash_once", true),
    ] {
        let mut run = InsertRun::new(s.n);
        group.bench_function(id(name, 1), |b| {
            b.iter_custom(|iters| {
                run.run(
                    iters,
                    usize::MAX,
                    |_| rotate_separate(name),
                    |keys, _| {
                        let sep = s.separate().read().unwrap();
                        if hash_once {
                            timed_inserts(keys, |k| sep.insert_hash_once(k))
                        } else {
                            timed_inserts(keys, |k| sep.insert(k))
                        }
                    },
                )
            });
        });
    }

    let mut run = InsertRun::new(s.n);
    group.bench_function(id("separate_8_threads", 8), |b| {
        b.iter_custom(|iters| {
            run.run(
                iters,
                BATCH,
                |keys| {
                    rotate_separate("separate_8_threads");
                    let mut fresh = pool.fresh.write().unwrap();
                    fresh.clear();
                    fresh.extend_from_slice(keys);
                },
                |keys, lo| {
                    let sep = s.separate().read().unwrap();
                    let current = &sep.filters[sep.current];
                    let older = (u32::MAX >> (32 - FILTERS)) & !(1 << sep.current);
                    let mut new = 0usize;
                    let start = Instant::now();
                    pool.check(Keys::Fresh, lo, lo + keys.len(), older, |j, held| {
                        new += usize::from(!held && current.insert(&keys[j]));
                    });
                    let elapsed = start.elapsed();
                    black_box(new);
                    elapsed
                },
            )
        });
    });
    group.finish();

    let mut by_name: Vec<(&str, Vec<Duration>)> = Vec::new();
    for (name, time) in rotations.take() {
        match by_name.iter_mut().find(|(n, _)| *n == name) {
            Some((_, times)) => times.push(time),
            None => by_name.push((name, vec![time])),
        }
    }
    for (name, mut times) in by_name {
        times.sort();
        println!(
            "rotations (untimed above): {name} | {} | median {:.3} ms, max {:.3} ms",
            times.len(),
            times[times.len() / 2].as_secs_f64() * 1e3,
            times[times.len() - 1].as_secs_f64() * 1e3,
        );
    }
}

fn benches(c: &mut Criterion) {
    let (n, label) = items();
    let sizing = window(n, 7, FPR).unwrap();
    let rate = sizing.generation_fpr;
    let one = AtomicBloomFilter::builder(n).fpr(rate).build().unwrap();
    println!(
        "\nmemory at {label} items per generation, fpr {FPR} over the window (per-generation rate {rate:.6}, k = {})",
        one.hashes()
    );
    println!(
        "memory: seen_window (G = 7 + spare, 8 words per block) | {} bytes",
        sizing.bytes()
    );
    println!(
        "memory: separate (8 x AtomicBloomFilter for {n} at {rate:.6}) | 8 x {} = {} bytes{}",
        one.memory_bytes(),
        8 * one.memory_bytes(),
        if 8 * one.memory_bytes() == sizing.bytes() {
            " (equal)"
        } else {
            " (DIFFERENT)"
        }
    );
    for g in [8, 9] {
        // The window of G generations against G separate filters at its per-generation rate
        // (the same overall rate): (G + 1) / G.
        let w = window(n, g, FPR).unwrap();
        let each = AtomicBloomFilter::builder(n)
            .fpr(w.generation_fpr)
            .build()
            .unwrap()
            .memory_bytes();
        println!(
            "memory: window of G = {g} (+ spare, {} words per block, rate {:.6}) | {} bytes, \
             {:.2} bytes per key | {g} separate filters at that rate: {} bytes | {:.3}x",
            w.stride_words,
            w.generation_fpr,
            w.bytes(),
            w.bytes() as f64 / (n as f64 * f64::from(g)),
            u64::from(g) * each,
            w.bytes() as f64 / (u64::from(g) * each) as f64,
        );
    }

    drop(one);

    let hits = generation_keys(0, n);
    let misses: Vec<u64> = (0..n).map(|i| MISS | i).collect();
    let separate = OnceLock::new();
    let structures = Structures {
        n,
        rate,
        window: OnceCell::new(),
        window_g8: OnceCell::new(),
        separate: &separate,
        one_8x: OnceCell::new(),
    };
    let pool = Pool::new(&hits, &misses, &separate);
    std::thread::scope(|scope| {
        for i in 0..FILTERS {
            let pool = &pool;
            scope.spawn(move || pool.worker(i));
        }
        bench_contains(c, &structures, &pool, &label);
        bench_insert(c, &structures, &pool, &label);
        pool.quit();
    });
}

criterion_group! {
    name = windowed_group;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(10);
    targets = benches
}
criterion_main!(windowed_group);
