//! `OverwriteMap` (fingerprints) and `ExactOverwriteMap` against exact dedup with
//! `dashmap::DashSet` and `Mutex<HashSet>`, side by side in one run.
//!
//! Groups `overwrite_insert` (fresh keys; every structure is rebuilt, untimed, after `buckets`
//! inserts) and `overwrite_contains` (keys `0..buckets` inserted, then queried); functions
//! `seen_fingerprint`, `seen_exact`, `dashset`, `mutex_hashset`; parameter
//! `{buckets}/{key}/{threads}t` at the two sizes of the sizing examples (1,563,461 and
//! 34,168,399 buckets), u64 and 32-byte keys, 1 and 2 threads. The peers use their default
//! hasher (SipHash); they keep every key, the maps keep one per bucket.
//!
//! Run: `cargo bench -p seen-benches --bench overwrite` (about 10 minutes). Results in `docs/benchmarks.md`.

use std::collections::HashSet;
use std::hash::Hash;
use std::hint::black_box;
use std::sync::Mutex;
use std::time::Duration;

mod common;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use dashmap::DashSet;
use seen::{ExactOverwriteMap, OverwriteMap};

const SIZES: [(u64, &str); 2] = [(1_563_461, "1.5M"), (34_168_399, "34M")];
const THREADS: [u64; 2] = [1, 2];

/// A benchmark key: `u64` or 32 bytes, made from a counter.
trait Key: Hash + Eq + Copy + Send + Sync + 'static {
    const NAME: &'static str;
    fn make(i: u64) -> Self;
    fn bytes<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R;
}

impl Key for u64 {
    const NAME: &'static str = "u64";
    fn make(i: u64) -> Self {
        i
    }
    fn bytes<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        f(&self.to_le_bytes())
    }
}

impl Key for [u8; 32] {
    const NAME: &'static str = "bytes32";
    fn make(i: u64) -> Self {
        let mut key = [0u8; 32];
        for (j, chunk) in key.chunks_mut(8).enumerate() {
            chunk.copy_from_slice(&(i ^ (j as u64) << 56).to_le_bytes());
        }
        key
    }
    fn bytes<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        f(self)
    }
}

/// What the benchmark needs of a dedup structure.
trait Set<K>: Sync {
    fn insert(&self, key: &K) -> bool;
    fn contains(&self, key: &K) -> bool;
}

impl<K: Key> Set<K> for OverwriteMap {
    fn insert(&self, key: &K) -> bool {
        OverwriteMap::insert(self, key)
    }
    fn contains(&self, key: &K) -> bool {
        OverwriteMap::contains(self, key)
    }
}

impl<K: Key> Set<K> for ExactOverwriteMap {
    fn insert(&self, key: &K) -> bool {
        key.bytes(|b| ExactOverwriteMap::insert(self, b))
    }
    fn contains(&self, key: &K) -> bool {
        key.bytes(|b| ExactOverwriteMap::contains(self, b))
    }
}

impl<K: Key> Set<K> for DashSet<K> {
    fn insert(&self, key: &K) -> bool {
        DashSet::insert(self, *key)
    }
    fn contains(&self, key: &K) -> bool {
        DashSet::contains(self, key)
    }
}

impl<K: Key> Set<K> for Mutex<HashSet<K>> {
    fn insert(&self, key: &K) -> bool {
        self.lock().unwrap().insert(*key)
    }
    fn contains(&self, key: &K) -> bool {
        self.lock().unwrap().contains(key)
    }
}

/// Builds a structure for `n` keys.
type Make<K> = fn(u64) -> Box<dyn Set<K>>;

fn impls<K: Key>() -> [(&'static str, Make<K>); 4] {
    [
        ("seen_fingerprint", |n| {
            Box::new(OverwriteMap::with_buckets(n).unwrap())
        }),
        ("seen_exact", |n| {
            Box::new(ExactOverwriteMap::with_buckets(n).unwrap())
        }),
        ("dashset", |_| Box::new(DashSet::<K>::new())),
        ("mutex_hashset", |_| {
            Box::new(Mutex::new(HashSet::<K>::new()))
        }),
    ]
}

/// Runs `op` on keys `first..first + count`, split between `threads` threads; the wall time.
fn timed<K: Key>(
    threads: u64,
    first: u64,
    count: u64,
    op: &(dyn Fn(&K) -> bool + Sync),
) -> Duration {
    let run = |lo: u64, hi: u64| {
        for i in lo..hi {
            black_box(op(&K::make(i)));
        }
    };
    common::timed_split(threads, first, count, &run)
}

fn bench_key<K: Key>(c: &mut Criterion) {
    for (n, label) in SIZES {
        for (name, make) in impls::<K>() {
            let mut group = c.benchmark_group("overwrite_insert");
            group.throughput(Throughput::Elements(1));
            for threads in THREADS {
                let mut set: Option<Box<dyn Set<K>>> = None;
                let mut next = 0u64;
                let id = BenchmarkId::new(name, format!("{label}/{}/{threads}t", K::NAME));
                group.bench_function(id, |b| {
                    b.iter_custom(|iters| {
                        let mut elapsed = Duration::ZERO;
                        let mut left = iters;
                        while left > 0 {
                            if next >= n || set.is_none() {
                                set = None; // free the old one first
                                set = Some(make(n));
                                next = 0;
                            }
                            let count = left.min(n - next);
                            let s = set.as_deref().expect("built above");
                            elapsed += timed::<K>(threads, next, count, &|k| s.insert(k));
                            next += count;
                            left -= count;
                        }
                        elapsed
                    })
                });
            }
            group.finish();

            let prefilled = std::cell::OnceCell::new();
            let mut group = c.benchmark_group("overwrite_contains");
            group.throughput(Throughput::Elements(1));
            for threads in THREADS {
                let mut next = 0u64;
                let id = BenchmarkId::new(name, format!("{label}/{}/{threads}t", K::NAME));
                group.bench_function(id, |b| {
                    let set: &dyn Set<K> = &**prefilled.get_or_init(|| {
                        let set = make(n);
                        timed::<K>(2, 0, n, &|k| set.insert(k));
                        set
                    });
                    b.iter_custom(|iters| {
                        let mut elapsed = Duration::ZERO;
                        let mut left = iters;
                        while left > 0 {
                            let count = left.min(n - next);
                            elapsed += timed::<K>(threads, next, count, &|k| set.contains(k));
                            next = (next + count) % n;
                            left -= count;
                        }
                        elapsed
                    })
                });
            }
            group.finish();
        }
    }
}

fn benches(c: &mut Criterion) {
    bench_key::<u64>(c);
    bench_key::<[u8; 32]>(c);
}

criterion_group! {
    name = overwrite;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(10);
    targets = benches
}
criterion_main!(overwrite);
