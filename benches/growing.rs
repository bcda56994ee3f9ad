//! `GrowingBloomFilter`'s batch lookup (`contains_many`) against a loop of `contains`, on fixed
//! sets of keys, so that every sample of both measures the same keys in the same layers.
//!
//! The filter starts at 1/100 of `items` (100M, or 10M with `GROWING_ITEMS=10M`) at fpr 0.01
//! and is filled with keys `0..items` (7 word-layout layers, as after growing 100 times over:
//! the configuration of `seen_growing` in `benches/peers.rs`). Group `growing_lookups`,
//! function `loop` (`contains_hash` per key) or `batch` (`contains_many_hashes` over 1,024 keys
//! per call, results into a reused vector), parameter the key set, 262,144 keys hashed before
//! the timing:
//!
//! - `oldest`: the first keys inserted, all in the first layer at 100M (at 10M, 38% in the
//!   first and 62% in the second): every layer is read for each.
//!   A loop of `contains` over inserted keys in insertion order, as `contains_hit` in
//!   `benches/peers.rs` runs it, spends its time on such keys.
//! - `uniform`: keys drawn uniformly from all inserted keys, in random order: each layer's share
//!   of the keys (the newest layer holds 37% of them, the first 1%), the layers of consecutive
//!   keys independent.
//! - `absent`: keys never inserted: every layer is read for each.
//!
//! Run: `cargo bench -p seen-benches --bench growing` (about 3 minutes, 400 MB of memory).
//! Results in `docs/benchmarks.md`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use seen::GrowingBloomFilter;
use seen::hash::{Hash128, ItemHasher};

/// Keys per set.
const KEYS: u64 = 1 << 18;
/// Keys per `contains_many` call.
const BATCH: usize = 1024;

fn items() -> u64 {
    match std::env::var("GROWING_ITEMS").as_deref() {
        Ok("10M") => 10_000_000,
        _ => 100_000_000,
    }
}

fn lookups(c: &mut Criterion) {
    let n = items();
    let filter = GrowingBloomFilter::builder(n / 100)
        .fpr(0.01)
        .build()
        .unwrap();
    let keys: Vec<u64> = (0..n).collect();
    let mut new = Vec::with_capacity(BATCH);
    for chunk in keys.chunks(1 << 16) {
        new.clear();
        filter.insert_many(chunk, &mut new).unwrap();
    }
    drop(keys);
    let hasher = *filter.hasher();
    let hash = |k: u64| hasher.hash_item(&k);
    // A multiplicative stride: distinct keys, uniform over `0..n`, neighbours far apart in
    // insertion order (in the same layer 21% of the time, 27% for independent draws).
    let uniform = |i: u64| (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 11) % n;
    let sets: [(&str, Vec<Hash128>); 3] = [
        ("oldest", (0..KEYS).map(hash).collect()),
        ("uniform", (0..KEYS).map(|i| hash(uniform(i))).collect()),
        ("absent", (0..KEYS).map(|i| hash(n + 1 + i)).collect()),
    ];
    println!(
        "growing filter: {} items, {} layers, {} bytes",
        n,
        filter.layers(),
        filter.memory_bytes()
    );
    let mut group = c.benchmark_group("growing_lookups");
    group.throughput(Throughput::Elements(KEYS));
    for (name, set) in &sets {
        let expected = set.iter().filter(|&&h| filter.contains_hash(h)).count();
        let mut hits = Vec::with_capacity(BATCH);
        let mut batched = 0;
        for chunk in set.chunks(BATCH) {
            hits.clear();
            batched += filter.contains_many_hashes(chunk.iter().copied(), &mut hits);
        }
        assert_eq!(batched, expected, "{name}: the batch answers as the loop");
        group.bench_function(BenchmarkId::new("loop", name), |b| {
            b.iter(|| {
                set.iter()
                    .filter(|&&h| filter.contains_hash(black_box(h)))
                    .count()
            })
        });
        group.bench_function(BenchmarkId::new("batch", name), |b| {
            b.iter(|| {
                let mut found = 0;
                for chunk in set.chunks(BATCH) {
                    hits.clear();
                    found += filter.contains_many_hashes(chunk.iter().copied(), &mut hits);
                }
                found
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = growing;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4))
        .sample_size(10);
    targets = lookups
}
criterion_main!(growing);
