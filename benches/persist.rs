//! Saving and loading, at page-cache speed: `write_to` into memory, `save` to a file, `load`
//! from a file the page cache holds, `read_from` out of memory, for each structure at 10M and
//! 100M items (the exact overwrite map and the semi-concurrent filter at 10M only: the first's
//! 100M file is 1.2 GB of keys, the second takes minutes to fill).
//!
//! Group `persist`; function `{structure}/{operation}`; parameter `{items}`; throughput in bytes
//! of the file, so criterion prints GB/s. Files go to `target/persist-bench/` (set
//! `PERSIST_DIR` to use another directory, say on another disk), and are removed at the end.
//! Every saved file is flushed to disk by `save` (`fsync`): the `save` rows measure the disk's
//! write speed as well, the `load` rows the page cache's read speed.
//!
//! Run: `cargo bench -p seen-benches --bench persist` (about 3 minutes, 4 GB of memory).
//! Results in `docs/benchmarks.md`.

use std::hint::black_box;
use std::path::PathBuf;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use seen::{AtomicBloomFilter, ExactOverwriteMap, Layout, OverwriteMap, SemiConcurrentBloomFilter};

/// The operations every structure is measured on.
trait Saved: Sized {
    fn write(&self, out: &mut Vec<u8>);
    fn read(bytes: &[u8]) -> Self;
    fn save(&self, path: &std::path::Path);
    fn load(path: &std::path::Path) -> Self;
}

macro_rules! saved {
    ($type:ty) => {
        impl Saved for $type {
            fn write(&self, out: &mut Vec<u8>) {
                self.write_to(out).unwrap();
            }
            fn read(bytes: &[u8]) -> Self {
                Self::read_from(bytes).unwrap()
            }
            fn save(&self, path: &std::path::Path) {
                self.save(path).unwrap();
            }
            fn load(path: &std::path::Path) -> Self {
                Self::load(path).unwrap()
            }
        }
    };
}
saved!(AtomicBloomFilter);
saved!(OverwriteMap);
saved!(ExactOverwriteMap);
saved!(SemiConcurrentBloomFilter);

fn dir() -> PathBuf {
    let dir = std::env::var_os("PERSIST_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/persist-bench"),
        PathBuf::from,
    );
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn measure<S: Saved>(c: &mut Criterion, name: &str, label: &str, structure: &S) {
    let mut bytes = Vec::new();
    structure.write(&mut bytes);
    let path = dir().join(format!("{name}-{label}.seen"));
    println!("file size: {name} | {label} | {} bytes", bytes.len());
    let mut group = c.benchmark_group("persist");
    group.throughput(Throughput::Bytes(bytes.len() as u64));
    group.bench_function(BenchmarkId::new(format!("{name}/write_to"), label), |b| {
        let mut out = Vec::with_capacity(bytes.len());
        b.iter(|| {
            out.clear();
            structure.write(&mut out);
            black_box(out.len())
        })
    });
    group.bench_function(BenchmarkId::new(format!("{name}/read_from"), label), |b| {
        b.iter(|| black_box(S::read(&bytes)))
    });
    group.bench_function(BenchmarkId::new(format!("{name}/save"), label), |b| {
        b.iter(|| structure.save(&path))
    });
    group.bench_function(BenchmarkId::new(format!("{name}/load"), label), |b| {
        b.iter(|| black_box(S::load(&path)))
    });
    group.finish();
    std::fs::remove_file(&path).unwrap();
}

fn persist(c: &mut Criterion) {
    for (n, label) in [(10_000_000u64, "10M"), (100_000_000, "100M")] {
        let filter = AtomicBloomFilter::builder(n)
            .layout(Layout::Word)
            .build()
            .unwrap();
        filter.insert_all(&(0..n).collect::<Vec<_>>());
        measure(c, "bloom_word", label, &filter);
        drop(filter);

        let map = OverwriteMap::with_buckets(n).unwrap();
        (0..n).for_each(|k| _ = map.insert(&k));
        measure(c, "overwrite_map", label, &map);
        drop(map);

        if n <= 10_000_000 {
            // As it is used: compacting every 1,024 inserts (the default), a few pending.
            let mut semi = SemiConcurrentBloomFilter::with_capacity(n, 0.01).unwrap();
            semi.extend(&(0..n).collect::<Vec<_>>());
            measure(c, "semi_bloom", label, &semi);
            drop(semi);

            let exact = ExactOverwriteMap::with_buckets(n).unwrap();
            (0..n).for_each(|k| _ = exact.insert(&k.to_le_bytes()));
            measure(c, "exact_overwrite_map", label, &exact);
        }
    }
}

criterion_group! {
    name = persist_group;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(10);
    targets = persist
}
criterion_main!(persist_group);
