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
//! Run: `cargo bench -p seen-benches --bench persist` (about 5 minutes, 4 GB of memory). With
//! `PERSIST_HEAVY_100M=1` it times instead, once each, the semi-concurrent filter and the exact
//! map at 100M items (about 10 minutes, 12 GB).
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

/// The same four operations, timed once each (for structures whose one operation takes seconds
/// at this size: criterion's ten samples would take many minutes).
fn measure_once<S: Saved>(name: &str, label: &str, structure: &S) {
    let time = |what: &str, bytes: usize, op: &mut dyn FnMut()| {
        let start = std::time::Instant::now();
        op();
        let secs = start.elapsed().as_secs_f64();
        println!(
            "once: {name}/{what}/{label} | {:.3} s | {:.1} MiB/s",
            secs,
            bytes as f64 / secs / (1 << 20) as f64
        );
    };
    let mut bytes = Vec::new();
    structure.write(&mut bytes);
    let len = bytes.len();
    println!("file size: {name} | {label} | {len} bytes");
    let path = dir().join(format!("{name}-{label}.seen"));
    let mut out = Vec::with_capacity(len);
    time("write_to", len, &mut || structure.write(&mut out));
    drop(out);
    time("read_from", len, &mut || drop(black_box(S::read(&bytes))));
    drop(bytes);
    time("save", len, &mut || structure.save(&path));
    time("load", len, &mut || drop(black_box(S::load(&path))));
    std::fs::remove_file(&path).unwrap();
}

fn persist(c: &mut Criterion) {
    if std::env::var_os("PERSIST_HEAVY_100M").is_some() {
        // The two structures the criterion run stops at 10M, at 100M, each operation once.
        let n = 100_000_000u64;
        let mut semi = SemiConcurrentBloomFilter::with_capacity(n, 0.01).unwrap();
        semi.extend(&(0..n).collect::<Vec<_>>());
        measure_once("semi_bloom", "100M", &semi);
        drop(semi);
        let exact = ExactOverwriteMap::with_buckets(n).unwrap();
        (0..n).for_each(|k| _ = exact.insert(&k.to_le_bytes()));
        measure_once("exact_overwrite_map", "100M", &exact);
        return;
    }
    for (n, label) in [(10_000_000u64, "10M"), (100_000_000, "100M")] {
        let filter = AtomicBloomFilter::builder(n)
            .layout(Layout::Word)
            .build()
            .unwrap();
        filter.insert_counting_new(&(0..n).collect::<Vec<_>>());
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
