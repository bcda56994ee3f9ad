//! `SemiConcurrentBloomFilter`: what a compaction costs at two sizes of the filter, and what
//! inserts and lookups cost next to `AtomicBloomFilter`.
//!
//! - Group `compact`, function `semi_concurrent`, parameter `{items}` (1M and 100M): 1,024
//!   fresh keys are inserted (untimed), then one `compact()` is timed: a drain of one table of
//!   the buffer (8,192 slots), and 2,048 probes written into the copy lookups do not read.
//!   Filters sized for `items` at fpr 0.01.
//! - Groups `semi_insert` / `semi_contains_hit` / `semi_contains_miss`, functions
//!   `semi_concurrent` (compacting every 1,024 inserts) and `atomic_word`, parameter
//!   `10M/{threads}t`: filters sized for 10M items at 1%, 1 and 2 threads. Inserts are of fresh
//!   keys (the filter is rebuilt, untimed, when full); lookups query a filter holding 1M keys,
//!   for keys it holds (hit) and keys it never saw (miss). With 2 threads, the time per
//!   operation is the wall time of both divided by the operations of both.
//! - The floors the design sets, in the same groups: `pending_set_alone` (in `semi_insert`) is
//!   the crossbeam-skiplist `SkipList` the filter buffers its inserts in, doing only what the
//!   filter asks of it: one `get_or_insert_with` of each key's 128-bit hash, and every 1,024
//!   keys one thread takes them all and removes each under one epoch pin (a compaction's share
//!   of the set's work), with no snapshot, summary or bits. `atomic_word_behind_arc_swap` (in
//!   the lookup groups) is the word filter reached through an `arc_swap::ArcSwap`, as the
//!   filter reaches its snapshot: one `load` per lookup. Next to it, what the lookups would
//!   cost without that `load`: `atomic_word_behind_arc_swap_cache` reaches the same kind of
//!   filter through a per-thread `arc_swap::Cache` (a thread-local, revalidated by one plain
//!   load of the `ArcSwap`'s pointer per lookup, no locked instruction; the row also pays the
//!   thread-local access and a `RefCell` borrow per lookup, and each thread builds its cache
//!   on its first lookup, inside the timing), and
//!   `semi_snapshot_held` is a `FrozenBloomFilter` snapshot (a copy) of a compacted
//!   semi-concurrent filter, held by the caller and looked up directly (no summary, no buffer:
//!   the snapshot's segmented words alone).
//!
//! Run: `cargo bench -p seen-benches --bench semi_concurrent` (about 4 minutes). Results in
//! `docs/benchmarks.md`.

use std::hint::black_box;
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use std::cell::RefCell;

use arc_swap::{ArcSwap, Cache};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use crossbeam_skiplist::SkipList;
use seen::hash::{ItemHasher, StableHasher};
use seen::{AtomicBloomFilter, FrozenBloomFilter, SemiConcurrentBloomFilter};

mod common;

const BATCH: u64 = 1024;

/// A filter for `items` at 1% whose inserts do not compact before 2,048 are pending (the
/// bench compacts every 1,024).
fn semi(items: u64) -> SemiConcurrentBloomFilter {
    SemiConcurrentBloomFilter::builder(items)
        .fpr(0.01)
        .insertions_before_compact(2048)
        .build()
        .unwrap()
}

/// A filter for `items` at 1% that compacts every 1,024 inserts.
fn semi_compacting(items: u64) -> SemiConcurrentBloomFilter {
    SemiConcurrentBloomFilter::builder(items)
        .fpr(0.01)
        .insertions_before_compact(1024)
        .build()
        .unwrap()
}

fn compaction(c: &mut Criterion) {
    let mut group = c.benchmark_group("compact");
    for (items, label) in [(1_000_000u64, "1M"), (100_000_000, "100M")] {
        let mut filter: Option<SemiConcurrentBloomFilter> = None;
        let mut next = 0u64;
        group.bench_function(BenchmarkId::new("semi_concurrent", label), |b| {
            let f = filter.get_or_insert_with(|| semi(items));
            b.iter_custom(|iters| {
                let mut elapsed = Duration::ZERO;
                for _ in 0..iters {
                    for k in next..next + BATCH {
                        f.insert(&k);
                    }
                    next += BATCH;
                    let start = Instant::now();
                    black_box(f.compact());
                    elapsed += start.elapsed();
                }
                elapsed
            })
        });
        filter = None;
        black_box(&filter);
    }
    group.finish();
}

/// The semi-concurrent filter's pending set with nothing around it: the floor of its insert.
struct PendingSetAlone {
    set: SkipList<u128, u64>,
    /// Taken with `try_lock` by the one thread that empties the set, as the filter's compactor.
    compactor: std::sync::Mutex<()>,
    hasher: StableHasher,
}

impl PendingSetAlone {
    fn new() -> Self {
        PendingSetAlone {
            set: SkipList::new(crossbeam_epoch::default_collector().clone()),
            compactor: std::sync::Mutex::new(()),
            hasher: StableHasher::new(),
        }
    }

    /// What the filter's insert asks of the set: link the key's 128-bit hash without replacing
    /// an entry (`get_or_insert_with`, whose closure the filter uses to take a summary ticket;
    /// here it only notes that it ran), and when 1,024 are pending, take them all and remove
    /// each. The filter pins once more per compaction (for its iteration and its removals);
    /// this one reuses the insert's pin, so it is, if anything, a little cheaper.
    fn insert(&self, key: u64) -> bool {
        let hash = self.hasher.hash_item(&key);
        let value = u128::from(hash.h1) << 64 | u128::from(hash.h2);
        let guard = &crossbeam_epoch::pin();
        let mut linked = false;
        self.set
            .get_or_insert_with(
                value,
                || {
                    linked = true;
                    0
                },
                guard,
            )
            .release(guard);
        if self.set.len() >= BATCH as usize
            && let Ok(_compactor) = self.compactor.try_lock()
        {
            let batch: Vec<u128> = self.set.iter(guard).map(|entry| *entry.key()).collect();
            for value in &batch {
                if let Some(entry) = self.set.remove(value, guard) {
                    entry.release(guard);
                }
            }
        }
        linked
    }
}

const N: u64 = 10_000_000;
const THREADS: [u64; 2] = [1, 2];
/// Keys from here on were never inserted: the `semi_contains_miss` queries.
const MISS: u64 = 1 << 40;

/// Times inserts of fresh keys, split between `threads` threads, into a filter of capacity `N`
/// rebuilt (untimed) when full.
fn fresh_inserts<F: Sync>(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    make: fn() -> F,
    insert: fn(&F, u64) -> bool,
) {
    for threads in THREADS {
        let mut f: Option<F> = None;
        let mut next = 0u64;
        group.bench_function(BenchmarkId::new(name, format!("10M/{threads}t")), |b| {
            b.iter_custom(|iters| {
                let mut elapsed = Duration::ZERO;
                let mut left = iters;
                while left > 0 {
                    if next == N || f.is_none() {
                        f = Some(make());
                        next = 0;
                    }
                    let count = left.min(N - next);
                    let filter = f.as_ref().expect("built above");
                    elapsed += common::timed_split(threads, next, count, &|lo, hi| {
                        for k in lo..hi {
                            black_box(insert(filter, k));
                        }
                    });
                    next += count;
                    left -= count;
                }
                elapsed
            })
        });
    }
}

/// Times lookups of `base + (i % HELD)`, split between `threads` threads.
fn lookups<F: Sync>(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    filter: &F,
    base: u64,
    contains: fn(&F, u64) -> bool,
) {
    for threads in THREADS {
        let mut next = 0u64;
        group.bench_function(BenchmarkId::new(name, format!("10M/{threads}t")), |b| {
            b.iter_custom(|iters| {
                let elapsed = common::timed_split(threads, next, iters, &|lo, hi| {
                    for i in lo..hi {
                        black_box(contains(filter, base + 1 + i % HELD));
                    }
                });
                next = (next + iters) % HELD;
                elapsed
            })
        });
    }
}

/// The word filter of `atomic_word_behind_arc_swap_cache`: a `Cache` borrows its `ArcSwap`, and
/// each thread keeps its own in `CACHE`.
static BEHIND_CACHE: LazyLock<ArcSwap<AtomicBloomFilter>> =
    LazyLock::new(|| ArcSwap::from_pointee(AtomicBloomFilter::with_capacity(N, 0.01).unwrap()));

thread_local! {
    static CACHE: RefCell<Option<Cache<&'static ArcSwap<AtomicBloomFilter>, Arc<AtomicBloomFilter>>>> =
        const { RefCell::new(None) };
}

/// The keys the lookup benches' filters hold: `1..=HELD`.
const HELD: u64 = 1_000_000;

fn operations(c: &mut Criterion) {
    {
        // Fresh keys into a filter rebuilt (untimed) when it reaches capacity, as in
        // `benches/atomic_bloom.rs`: inserts of new items at fills from 0 to 100%.
        let mut group = c.benchmark_group("semi_insert");
        group.throughput(Throughput::Elements(1));
        fresh_inserts(
            &mut group,
            "semi_concurrent",
            || semi_compacting(N),
            |f, k| f.insert(&k),
        );
        fresh_inserts(
            &mut group,
            "atomic_word",
            || AtomicBloomFilter::with_capacity(N, 0.01).unwrap(),
            |f, k| f.insert(&k),
        );
        fresh_inserts(
            &mut group,
            "pending_set_alone",
            PendingSetAlone::new,
            PendingSetAlone::insert,
        );
        group.finish();
    }
    let semi_filter = semi_compacting(N);
    let atomic = AtomicBloomFilter::with_capacity(N, 0.01).unwrap();
    let behind_arc_swap = ArcSwap::from_pointee(AtomicBloomFilter::with_capacity(N, 0.01).unwrap());
    let compacted = semi_compacting(N);
    for k in 1..=HELD {
        semi_filter.insert(&k);
        atomic.insert(&k);
        behind_arc_swap.load().insert(&k);
        compacted.insert(&k);
        BEHIND_CACHE.load().insert(&k);
    }
    compacted.compact();
    let held: Arc<FrozenBloomFilter> = compacted.snapshot();
    for (group_name, base) in [("semi_contains_hit", 0), ("semi_contains_miss", MISS)] {
        let mut group = c.benchmark_group(group_name);
        group.throughput(Throughput::Elements(1));
        lookups(&mut group, "semi_concurrent", &semi_filter, base, |f, k| {
            f.contains(&k)
        });
        lookups(&mut group, "atomic_word", &atomic, base, |f, k| {
            f.contains(&k)
        });
        lookups(
            &mut group,
            "atomic_word_behind_arc_swap",
            &behind_arc_swap,
            base,
            |f, k| f.load().contains(&k),
        );
        lookups(
            &mut group,
            "atomic_word_behind_arc_swap_cache",
            &&*BEHIND_CACHE,
            base,
            |_, k| {
                CACHE.with(|cache| {
                    cache
                        .borrow_mut()
                        .get_or_insert_with(|| Cache::new(&*BEHIND_CACHE))
                        .load()
                        .contains(&k)
                })
            },
        );
        lookups(&mut group, "semi_snapshot_held", &held, base, |f, k| {
            f.contains(&k)
        });
        group.finish();
    }
}

criterion_group! {
    name = semi_concurrent;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(10);
    targets = compaction, operations
}
criterion_main!(semi_concurrent);
