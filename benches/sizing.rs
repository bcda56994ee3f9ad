//! The cost of one call of each sizing function, over a spread of inputs: the table rows, the
//! inputs that used to hang the overwrite sizing (probabilities next to 1), and the blocked
//! sizing that every Bloom filter constructor runs, per layout and target.
//!
//! Run: `cargo bench -p seen-benches --bench sizing`. Results and the machine are in `docs/sizing.md`, "Cost of
//! the sizing functions".

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use seen::sizing::{BloomSizing, blocked, overwrite_buckets, overwrite_window};
use seen::{AtomicBloomFilter, Layout};

/// `(label, later insertions, remember probability)`; the last five took from a second to many
/// minutes before the search was bounded.
const BUCKETS: [(&str, u64, f64); 7] = [
    ("x=3.6e6,r=0.9", 3_600_000, 0.9),
    ("x=3.6e6,r=0.1", 3_600_000, 0.1),
    ("x=1,r=1-1e-12", 1, 1.0 - 1e-12),
    ("x=1,r=1-1e-13", 1, 1.0 - 1e-13),
    ("x=1e3,r=1-1e-11", 1_000, 1.0 - 1e-11),
    ("x=3.6e6,r=1-1e-10", 3_600_000, 1.0 - 1e-10),
    ("x=1,r=1-2^-53", 1, 1.0 - f64::EPSILON / 2.0),
];

/// `(label, buckets, remember probability)`.
const WINDOWS: [(&str, u64, f64); 4] = [
    ("n=100,r=0.01", 100, 0.01),
    ("n=3.4e7,r=0.9", 34_168_399, 0.9),
    ("n=2^63,r=0.5", 1 << 63, 0.5),
    ("n=1e12,r=1-1e-12", 1_000_000_000_000, 1.0 - 1e-12),
];

fn overwrite(c: &mut Criterion) {
    let mut group = c.benchmark_group("overwrite_buckets");
    group.throughput(Throughput::Elements(1));
    for (label, x, r) in BUCKETS {
        group.bench_with_input(BenchmarkId::new("seen", label), &(x, r), |b, &(x, r)| {
            b.iter(|| overwrite_buckets(black_box(x), black_box(r)))
        });
    }
    group.finish();

    let mut group = c.benchmark_group("overwrite_window");
    group.throughput(Throughput::Elements(1));
    for (label, n, r) in WINDOWS {
        group.bench_with_input(BenchmarkId::new("seen", label), &(n, r), |b, &(n, r)| {
            b.iter(|| overwrite_window(black_box(n), black_box(r)))
        });
    }
    group.finish();
}

fn bloom(c: &mut Criterion) {
    let mut group = c.benchmark_group("bloom_sizing");
    group.throughput(Throughput::Elements(1));
    for p in [0.01, 1e-6, 1e-20] {
        let id = format!("n=1e7,p={p:e}");
        group.bench_with_input(BenchmarkId::new("optimal", &id), &p, |b, &p| {
            b.iter(|| BloomSizing::optimal(black_box(10_000_000), black_box(p)))
        });
        group.bench_with_input(BenchmarkId::new("guaranteed", &id), &p, |b, &p| {
            b.iter(|| BloomSizing::guaranteed(black_box(10_000_000), black_box(p)))
        });
    }
    group.finish();

    // What every filter constructor runs: the k search over the exact blocked model.
    let mut group = c.benchmark_group("blocked_sizing");
    group.throughput(Throughput::Elements(1));
    // Down to each layout's limit (6.4e-6 and 4.7e-15).
    let word = [0.5, 0.1, 0.01, 1e-3, 1e-5, 6.4e-6];
    let line = [0.5, 0.1, 0.01, 1e-3, 1e-6, 1e-9, 1e-12, 4.7e-15];
    for (layout, targets) in [(Layout::Word, &word[..]), (Layout::Line, &line[..])] {
        for &p in targets {
            let id = format!("{layout:?}/p={p:e}");
            group.bench_with_input(BenchmarkId::new("seen", id), &p, |b, &p| {
                b.iter(|| blocked(black_box(1_000_000), black_box(p), layout))
            });
        }
    }
    // And through a constructor, with its (small) allocation.
    for layout in [Layout::Word, Layout::Line] {
        let id = format!("{layout:?}/n=1000,p=0.01");
        group.bench_function(BenchmarkId::new("seen_build", id), |b| {
            b.iter(|| {
                AtomicBloomFilter::builder(black_box(1000))
                    .fpr(0.01)
                    .layout(layout)
                    .build()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, overwrite, bloom);
criterion_main!(benches);
