//! `SemiConcurrentBloomFilter`: what a compaction costs with copy-on-write segments against a
//! full copy of the filter, and what inserts and lookups cost next to `AtomicBloomFilter`.
//!
//! - Group `compact`, functions `segmented_4KiB` and `full_copy` (one segment as large as the
//!   filter), parameter `{items}`: 1,024 fresh keys are inserted (untimed), then one
//!   `compact()` is timed. Filters sized for `items` at fpr 0.01.
//! - Groups `semi_insert` / `semi_contains_hit`, functions `semi_concurrent` (compacting every
//!   1,024 inserts) and `atomic_word`, 10M items, one thread.
//!
//! Run: `cargo bench -p seen-benches --bench semi_concurrent` (about 3 minutes). Results in
//! `docs/benchmarks.md`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use seen::{AtomicBloomFilter, SemiConcurrentBloomFilter};

const BATCH: u64 = 1024;

fn semi(items: u64, segment_bytes: usize) -> SemiConcurrentBloomFilter {
    SemiConcurrentBloomFilter::builder(items)
        .fpr(0.01)
        .insertions_before_compact(usize::MAX)
        .segment_bytes(segment_bytes)
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
        for (name, segment) in [("segmented_4KiB", 4096), ("full_copy", usize::MAX / 2)] {
            let mut filter: Option<SemiConcurrentBloomFilter> = None;
            let mut next = 0u64;
            group.bench_function(BenchmarkId::new(name, label), |b| {
                let f = filter.get_or_insert_with(|| semi(items, segment));
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
    }
    group.finish();
}

const N: u64 = 10_000_000;

/// Times inserts of fresh keys into a filter of capacity `N`, rebuilt (untimed) when full.
fn fresh_inserts<F>(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    make: fn() -> F,
    insert: fn(&F, u64) -> bool,
) {
    let mut f = make();
    let mut next = 0u64;
    group.bench_function(BenchmarkId::new(name, "10M"), |b| {
        b.iter_custom(|iters| {
            let mut elapsed = Duration::ZERO;
            let mut left = iters;
            while left > 0 {
                if next == N {
                    f = make();
                    next = 0;
                }
                let count = left.min(N - next);
                let start = Instant::now();
                for k in next..next + count {
                    black_box(insert(&f, k));
                }
                elapsed += start.elapsed();
                next += count;
                left -= count;
            }
            elapsed
        })
    });
}

fn operations(c: &mut Criterion) {
    let semi_filter = semi_compacting(N);
    let atomic = AtomicBloomFilter::with_capacity(N, 0.01).unwrap();
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
        group.finish();
    }
    for k in 0..1_000_000u64 {
        semi_filter.insert(&(k + 1));
        atomic.insert(&(k + 1));
    }
    let mut group = c.benchmark_group("semi_contains_hit");
    group.throughput(Throughput::Elements(1));
    let mut i = 0u64;
    group.bench_function(BenchmarkId::new("semi_concurrent", "10M"), |b| {
        b.iter(|| {
            i = (i + 7919) % 1_000_000;
            black_box(semi_filter.contains(&(i + 1)))
        })
    });
    let mut i = 0u64;
    group.bench_function(BenchmarkId::new("atomic_word", "10M"), |b| {
        b.iter(|| {
            i = (i + 7919) % 1_000_000;
            black_box(atomic.contains(&(i + 1)))
        })
    });
    group.finish();
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
