//! The default hash against std's SipHash (`DefaultHasher`), on u64 and 32-byte keys.
//!
//! Run: `cargo bench -p seen-benches --bench hash`. Results and the machine are in `docs/benchmarks.md`.

use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use seen::hash::{ItemHasher, StableHasher};

const BATCH: u64 = 1024;

/// Counters spread over all 64 bits by an odd multiplier (any will do: the hashes' cost does not
/// depend on the values).
fn keys_u64() -> Vec<u64> {
    (0..BATCH)
        .map(|i| i.wrapping_mul(0xd6e8_feb8_6659_fd93))
        .collect()
}

fn keys_32() -> Vec<[u8; 32]> {
    keys_u64()
        .into_iter()
        .map(|k| {
            let mut key = [0u8; 32];
            for (i, chunk) in key.chunks_mut(8).enumerate() {
                chunk.copy_from_slice(&(k ^ i as u64).to_le_bytes());
            }
            key
        })
        .collect()
}

fn hash(c: &mut Criterion) {
    let mut group = c.benchmark_group("hash");
    group.throughput(Throughput::Elements(BATCH));
    let stable = StableHasher::new();
    let sip = BuildHasherDefault::<DefaultHasher>::default();

    let u64s = keys_u64();
    group.bench_with_input(
        BenchmarkId::new("seen_xxh3_128", "u64"),
        &u64s,
        |b, keys| {
            b.iter(|| {
                for k in keys {
                    black_box(stable.hash_item(black_box(k)));
                }
            })
        },
    );
    group.bench_with_input(
        BenchmarkId::new("std_siphash_64", "u64"),
        &u64s,
        |b, keys| {
            b.iter(|| {
                for k in keys {
                    black_box(sip.hash_one(black_box(k)));
                }
            })
        },
    );

    let k32 = keys_32();
    group.bench_with_input(
        BenchmarkId::new("seen_xxh3_128", "bytes32"),
        &k32,
        |b, keys| {
            b.iter(|| {
                for k in keys {
                    black_box(stable.hash_item(black_box(k)));
                }
            })
        },
    );
    group.bench_with_input(
        BenchmarkId::new("seen_xxh3_128_bytes", "bytes32"),
        &k32,
        |b, keys| {
            b.iter(|| {
                for k in keys {
                    black_box(stable.hash_bytes(black_box(k)));
                }
            })
        },
    );
    group.bench_with_input(
        BenchmarkId::new("std_siphash_64", "bytes32"),
        &k32,
        |b, keys| {
            b.iter(|| {
                for k in keys {
                    black_box(sip.hash_one(black_box(k)));
                }
            })
        },
    );
    group.finish();
}

criterion_group!(benches, hash);
criterion_main!(benches);
