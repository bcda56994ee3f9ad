//! `AtomicBloomFilter` against `fastbloom::AtomicBloomFilter`, side by side in one run.
//!
//! Groups `insert`, `contains_hit`, `contains_miss`; functions `seen_word`, `seen_line`,
//! `seen_word_batch` (`insert_counting_new` / `count_contained` over 1024 keys at a time), `fastbloom_atomic`;
//! parameter `{items}/{threads}t`. Filters are sized for `items` at fpr 0.01; keys are u64.
//!
//! - `insert` inserts fresh keys into a filter that is rebuilt (untimed) whenever it reaches
//!   capacity, so it measures inserts of *new* items at fills from 0 to 100%.
//! - `contains_hit` / `contains_miss` query a filter holding `items` keys, with inserted keys /
//!   keys never inserted.
//!
//! A second target, `layouts`, compares the layouts at p = 0.1, 0.01 and 0.001 (10M items, one
//! thread; groups `layout_insert`, `layout_contains_hit`, `layout_contains_miss`, function
//! `{layout}/p={p}`), and first prints each filter's bits per item and its false-positive rate
//! measured over 10M fresh keys, next to fastbloom's at the same targets.
//!
//! Run: `cargo bench -p seen-benches --bench atomic_bloom` (about 10 minutes). Add a filter such as
//! `-- 10M` or `-- layout` to run a part. Results in `docs/benchmarks.md`.

use std::hint::black_box;
use std::time::Duration;

mod common;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use seen::{AtomicBloomFilter, Layout};

const FPR: f64 = 0.01;
const SIZES: [(u64, &str); 3] = [
    (1_000_000, "1M"),
    (10_000_000, "10M"),
    (100_000_000, "100M"),
];
const THREADS: [u64; 2] = [1, 2];
const MISS: u64 = 1 << 63;
const CHUNK: usize = 1024;

/// What the benchmark needs of a filter.
trait Filter: Sync {
    fn insert(&self, key: &u64) -> bool;
    fn contains(&self, key: &u64) -> bool;
    /// Inserts `keys`; the batch variant overrides it.
    fn insert_chunk(&self, keys: &[u64]) -> usize {
        keys.iter().filter(|k| self.insert(k)).count()
    }
    fn contains_chunk(&self, keys: &[u64]) -> usize {
        keys.iter().filter(|k| self.contains(k)).count()
    }
}

struct Seen(AtomicBloomFilter);
struct SeenBatch(AtomicBloomFilter);
struct FastBloom(fastbloom::AtomicBloomFilter);

impl Filter for Seen {
    fn insert(&self, key: &u64) -> bool {
        self.0.insert(key)
    }
    fn contains(&self, key: &u64) -> bool {
        self.0.contains(key)
    }
}

impl Filter for SeenBatch {
    fn insert(&self, key: &u64) -> bool {
        self.0.insert(key)
    }
    fn contains(&self, key: &u64) -> bool {
        self.0.contains(key)
    }
    fn insert_chunk(&self, keys: &[u64]) -> usize {
        self.0.insert_counting_new(keys)
    }
    fn contains_chunk(&self, keys: &[u64]) -> usize {
        self.0.count_contained(keys)
    }
}

impl Filter for FastBloom {
    fn insert(&self, key: &u64) -> bool {
        // fastbloom's `insert` returns whether the item was *already* present.
        !self.0.insert(key)
    }
    fn contains(&self, key: &u64) -> bool {
        self.0.contains(key)
    }
}

type Make = fn(u64) -> Box<dyn Filter>;

fn seen(layout: Layout, n: u64) -> AtomicBloomFilter {
    AtomicBloomFilter::builder(n)
        .fpr(FPR)
        .layout(layout)
        .build()
        .unwrap()
}

const IMPLS: [(&str, Make); 4] = [
    ("seen_word", |n| Box::new(Seen(seen(Layout::Word, n)))),
    ("seen_word_batch", |n| {
        Box::new(SeenBatch(seen(Layout::Word, n)))
    }),
    ("seen_line", |n| Box::new(Seen(seen(Layout::Line, n)))),
    ("fastbloom_atomic", |n| {
        Box::new(FastBloom(
            fastbloom::AtomicBloomFilter::with_false_pos(FPR).expected_items(n as usize),
        ))
    }),
];

/// Runs `op` over keys `first..first + count`, split between `threads` threads, in chunks of
/// [`CHUNK`] keys; returns the wall time.
fn timed(threads: u64, first: u64, count: u64, op: &(dyn Fn(&[u64]) -> usize + Sync)) -> Duration {
    let run = |lo: u64, hi: u64| {
        let mut buf = [0u64; CHUNK];
        let mut at = lo;
        while at < hi {
            let len = ((hi - at) as usize).min(CHUNK);
            for (i, slot) in buf[..len].iter_mut().enumerate() {
                *slot = at + i as u64;
            }
            black_box(op(&buf[..len]));
            at += len as u64;
        }
    };
    common::timed_split(threads, first, count, &run)
}

fn benches(c: &mut Criterion) {
    for (n, label) in SIZES {
        for (name, make) in IMPLS {
            // insert: fresh keys; rebuild the filter (untimed) when it is full.
            let mut group = c.benchmark_group("insert");
            group.throughput(Throughput::Elements(1));
            for threads in THREADS {
                // Built on first use, so that a filtered-out benchmark allocates nothing.
                let mut filter: Option<Box<dyn Filter>> = None;
                let mut next = 0u64;
                group.bench_function(BenchmarkId::new(name, format!("{label}/{threads}t")), |b| {
                    b.iter_custom(|iters| {
                        let mut elapsed = Duration::ZERO;
                        let mut left = iters;
                        while left > 0 {
                            if next >= n || filter.is_none() {
                                filter = Some(make(n));
                                next = 0;
                            }
                            let count = left.min(n - next);
                            let f = filter.as_deref().expect("built above");
                            elapsed += timed(threads, next, count, &|keys| f.insert_chunk(keys));
                            next += count;
                            left -= count;
                        }
                        elapsed
                    })
                });
            }
            group.finish();

            // contains: a filter holding keys 0..n, built on first use.
            let prefilled = std::cell::OnceCell::new();
            let filter = || -> &dyn Filter {
                &**prefilled.get_or_init(|| {
                    let filter = make(n);
                    timed(2, 0, n, &|keys| filter.insert_chunk(keys));
                    filter
                })
            };
            for (group_name, offset) in [("contains_hit", 0), ("contains_miss", MISS)] {
                let mut group = c.benchmark_group(group_name);
                group.throughput(Throughput::Elements(1));
                for threads in THREADS {
                    let mut next = 0u64;
                    group.bench_function(
                        BenchmarkId::new(name, format!("{label}/{threads}t")),
                        |b| {
                            let filter = filter();
                            b.iter_custom(|iters| {
                                let mut elapsed = Duration::ZERO;
                                let mut left = iters;
                                while left > 0 {
                                    let count = left.min(n - next);
                                    elapsed += timed(threads, offset + next, count, &|keys| {
                                        filter.contains_chunk(keys)
                                    });
                                    next = (next + count) % n;
                                    left -= count;
                                }
                                elapsed
                            })
                        },
                    );
                }
                group.finish();
            }
        }
    }
}

const LAYOUT_ITEMS: u64 = 10_000_000;

fn layouts(c: &mut Criterion) {
    // Memory and measured false-positive rate: insert 10M keys, query 10M keys never inserted.
    println!("\nfilter | target p | bits/item | measured fpr over {LAYOUT_ITEMS} fresh keys");
    for p in [0.1, 0.01, 0.001] {
        let fast =
            fastbloom::AtomicBloomFilter::with_false_pos(p).expected_items(LAYOUT_ITEMS as usize);
        let report =
            |name: &str, bits: u64, insert: &dyn Fn(u64), contains: &dyn Fn(u64) -> bool| {
                (0..LAYOUT_ITEMS).for_each(insert);
                let hits = (0..LAYOUT_ITEMS).filter(|&k| contains(k | MISS)).count();
                println!(
                    "{name} | {p} | {:.2} | {:.5}",
                    bits as f64 / LAYOUT_ITEMS as f64,
                    hits as f64 / LAYOUT_ITEMS as f64
                );
            };
        for layout in [Layout::Word, Layout::Line] {
            let f = AtomicBloomFilter::builder(LAYOUT_ITEMS)
                .fpr(p)
                .layout(layout)
                .build()
                .unwrap();
            let name = format!("seen {layout:?} (k = {})", f.hashes());
            report(
                &name,
                f.bit_len(),
                &|k| {
                    f.insert(&k);
                },
                &|k| f.contains(&k),
            );
        }
        let name = format!("fastbloom_atomic (k = {})", fast.num_hashes());
        report(
            &name,
            fast.num_bits() as u64,
            &|k| {
                fast.insert(&k);
            },
            &|k| fast.contains(&k),
        );
    }

    // Cost per layout and target, one thread.
    for p in [0.1, 0.01, 0.001] {
        for layout in [Layout::Word, Layout::Line] {
            let make = || {
                AtomicBloomFilter::builder(LAYOUT_ITEMS)
                    .fpr(p)
                    .layout(layout)
                    .build()
                    .unwrap()
            };
            let id = format!("{layout:?}/p={p}");
            let mut filter = make();
            let mut next = 0u64;
            let mut group = c.benchmark_group("layout_insert");
            group.throughput(Throughput::Elements(1));
            group.bench_function(&id, |b| {
                b.iter_custom(|iters| {
                    let mut elapsed = Duration::ZERO;
                    let mut left = iters;
                    while left > 0 {
                        if next >= LAYOUT_ITEMS {
                            filter = make();
                            next = 0;
                        }
                        let count = left.min(LAYOUT_ITEMS - next);
                        let f = &filter;
                        elapsed += timed(1, next, count, &|keys| {
                            keys.iter().filter(|k| f.insert(*k)).count()
                        });
                        next += count;
                        left -= count;
                    }
                    elapsed
                })
            });
            group.finish();
            let filter = make();
            filter.insert_counting_new(&(0..LAYOUT_ITEMS).collect::<Vec<_>>());
            for (group_name, offset) in [("layout_contains_hit", 0), ("layout_contains_miss", MISS)]
            {
                let mut group = c.benchmark_group(group_name);
                group.throughput(Throughput::Elements(1));
                let mut next = 0u64;
                group.bench_function(&id, |b| {
                    b.iter_custom(|iters| {
                        let mut elapsed = Duration::ZERO;
                        let mut left = iters;
                        while left > 0 {
                            let count = left.min(LAYOUT_ITEMS - next);
                            elapsed += timed(1, offset + next, count, &|keys| {
                                keys.iter().filter(|k| filter.contains(*k)).count()
                            });
                            next = (next + count) % LAYOUT_ITEMS;
                            left -= count;
                        }
                        elapsed
                    })
                });
                group.finish();
            }
        }
    }
}

criterion_group! {
    name = atomic_bloom;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(20);
    targets = benches, layouts
}
criterion_main!(atomic_bloom);
