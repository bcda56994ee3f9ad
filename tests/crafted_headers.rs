//! Files made to pass every checksum, with one field changed: each is refused with
//! `Corruption::Header` naming the field, for every kind of file; the unchanged file loads; and
//! every file the crate writes, over its parameters, passes the checks.
//!
//! A file is cut into its header and its payload (the chunk checksums dropped), changed, and put
//! back together with the header checksum (xxh3-64) and each chunk's (xxh3-64 seeded with the
//! chunk's index) computed again, as the format notes say: what a hostile writer can do.

mod common;

use proptest::prelude::*;
use seen::{
    AtomicBloomFilter, Corruption, Error, ExactOverwriteMap, GrowingBloomFilter, Layout,
    OverwriteMap, SemiConcurrentBloomFilter, WindowedBloomFilter,
};
use xxhash_rust::xxh3::{xxh3_64, xxh3_64_with_seed};

/// Header offsets (docs/format.md).
const K: usize = 20;
const CAPACITY: usize = 24;
const FPR: usize = 32;
const EXPECTED: usize = 40;
const BLOCKS: usize = 48;
const PAYLOAD: usize = 56;
const RECORDS: usize = 64;

/// A file's header (checksum included, rewritten by [`join`]) and its payload without the chunk
/// checksums.
#[derive(Clone)]
struct File {
    header: Vec<u8>,
    payload: Vec<u8>,
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap())
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap())
}

fn f64_at(bytes: &[u8], at: usize) -> f64 {
    f64::from_bits(u64_at(bytes, at))
}

fn put_u32(bytes: &mut [u8], at: usize, value: u32) {
    bytes[at..at + 4].copy_from_slice(&value.to_le_bytes());
}

fn put_u64(bytes: &mut [u8], at: usize, value: u64) {
    bytes[at..at + 8].copy_from_slice(&value.to_le_bytes());
}

fn put_f64(bytes: &mut [u8], at: usize, value: f64) {
    put_u64(bytes, at, value.to_bits());
}

fn change_u32(bytes: &mut [u8], at: usize, f: impl Fn(u32) -> u32) {
    put_u32(bytes, at, f(u32_at(bytes, at)));
}

fn change_u64(bytes: &mut [u8], at: usize, f: impl Fn(u64) -> u64) {
    put_u64(bytes, at, f(u64_at(bytes, at)));
}

fn change_f64(bytes: &mut [u8], at: usize, f: impl Fn(f64) -> f64) {
    put_f64(bytes, at, f(f64_at(bytes, at)));
}

fn chunk_bytes(header: &[u8]) -> usize {
    u32_at(header, 80) as usize
}

fn split(file: &[u8]) -> File {
    let len = u32_at(file, 12) as usize;
    let header = file[..len].to_vec();
    let (size, chunk) = (u64_at(&header, PAYLOAD) as usize, chunk_bytes(&header));
    let mut payload = Vec::with_capacity(size);
    let mut at = len;
    while payload.len() < size {
        let take = chunk.min(size - payload.len());
        payload.extend_from_slice(&file[at..at + take]);
        at += take + 8;
    }
    assert_eq!(at, file.len(), "one file, whole");
    File { header, payload }
}

/// The bytes of `file`, every checksum computed again (the payload cut at the header's chunk
/// size, whatever the header's payload length says).
fn join(file: &File) -> Vec<u8> {
    let mut out = file.header.clone();
    let len = out.len();
    let sum = xxh3_64(&out[..len - 8]);
    out[len - 8..].copy_from_slice(&sum.to_le_bytes());
    for (i, chunk) in file.payload.chunks(chunk_bytes(&file.header)).enumerate() {
        out.extend_from_slice(chunk);
        out.extend_from_slice(&xxh3_64_with_seed(chunk, i as u64).to_le_bytes());
    }
    out
}

/// One change of a file, and the word the refusal must name.
struct Case {
    what: String,
    names: &'static str,
    change: Box<dyn Fn(&mut File)>,
}

fn case(
    what: impl Into<String>,
    names: &'static str,
    change: impl Fn(&mut File) + 'static,
) -> Case {
    Case {
        what: what.into(),
        names,
        change: Box::new(change),
    }
}

/// Whether `message` names `field`: as a word, or as a phrase for one of several words.
fn names(message: &str, field: &str) -> bool {
    if field.contains(' ') {
        message.contains(field)
    } else {
        message
            .split(|c: char| !c.is_alphanumeric())
            .any(|word| word == field)
    }
}

/// Loads `good` (as written, and put together again: the test's checksums are the format's),
/// then every changed file: each must be refused with `Corruption::Header` naming its field.
/// Lists every change that is not.
fn every_change_is_refused<T>(
    good: &[u8],
    load: impl Fn(&[u8]) -> Result<T, Error>,
    cases: Vec<Case>,
) {
    assert!(load(good).is_ok(), "the unchanged file loads");
    let file = split(good);
    assert_eq!(
        join(&file),
        good,
        "the checksums are computed as the writer's"
    );
    let mut wrong = Vec::new();
    for case in &cases {
        let mut changed = file.clone();
        (case.change)(&mut changed);
        let bytes = join(&changed);
        assert_ne!(bytes, good, "{}: no change", case.what);
        match load(&bytes) {
            Err(Error::Corrupt(Corruption::Header(message))) if names(message, case.names) => {}
            Ok(_) => wrong.push(format!("{}: loaded", case.what)),
            Err(e) => wrong.push(format!(
                "{}: {e}, which does not name {:?}",
                case.what, case.names
            )),
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} changes:\n{}",
        wrong.len(),
        cases.len(),
        wrong.join("\n")
    );
}

/// Changes of the Bloom fields every Bloom filter file has in its header.
fn bloom_header_cases(capacity: u64, fpr: f64) -> Vec<Case> {
    let mut cases = vec![
        case("k + 1", "k", |f| change_u32(&mut f.header, K, |v| v + 1)),
        case("k - 1", "k", |f| change_u32(&mut f.header, K, |v| v - 1)),
        case("k = 0", "k", |f| put_u32(&mut f.header, K, 0)),
        case("k = 64", "k", |f| put_u32(&mut f.header, K, 64)),
        case("k = 65", "k", |f| put_u32(&mut f.header, K, 65)),
        case("expected rate 1.5 times", "expected", |f| {
            change_f64(&mut f.header, EXPECTED, |v| v * 1.5)
        }),
        case("expected rate halved", "expected", |f| {
            change_f64(&mut f.header, EXPECTED, |v| v * 0.5)
        }),
        case("expected rate 0", "expected", |f| {
            put_f64(&mut f.header, EXPECTED, 0.0)
        }),
        case("expected rate 2", "expected", |f| {
            put_f64(&mut f.header, EXPECTED, 2.0)
        }),
        case("blocks + 8, payload as it was", "blocks", |f| {
            change_u64(&mut f.header, BLOCKS, |v| v + 8)
        }),
    ];
    for (label, value) in [
        ("capacity + 1", capacity + 1),
        ("capacity - 1", capacity - 1),
        ("capacity doubled", capacity * 2),
        ("capacity halved", capacity / 2),
        ("capacity 0", 0),
        ("capacity u64::MAX", u64::MAX),
    ] {
        cases.push(case(label, "capacity", move |f| {
            put_u64(&mut f.header, CAPACITY, value)
        }));
    }
    for (label, value) in [
        ("target rate halved", fpr / 2.0),
        ("target rate 0.9 times", fpr * 0.9),
        ("target rate doubled", fpr * 2.0),
        ("target rate 0.9", 0.9),
        ("target rate 1e-300", 1e-300),
        ("target rate 0", 0.0),
        ("target rate 1", 1.0),
        ("target rate NaN", f64::NAN),
    ] {
        cases.push(case(label, "target", move |f| {
            put_f64(&mut f.header, FPR, value)
        }));
    }
    cases
}

/// The blocks changed together with the payload's length and bits (zeros added or the last
/// line dropped): the header's sizes agree, its rates do not.
fn bloom_block_cases(layout: Layout) -> Vec<Case> {
    let per_line = match layout {
        Layout::Word => 8,
        _ => 1,
    };
    vec![
        case("blocks doubled, with the bits", "blocks", |f| {
            let blocks = u64_at(&f.header, BLOCKS);
            let bits = u64_at(&f.header, PAYLOAD);
            put_u64(&mut f.header, BLOCKS, blocks * 2);
            put_u64(&mut f.header, PAYLOAD, bits * 2);
            f.payload.extend(std::iter::repeat_n(0, bits as usize));
        }),
        case("one line fewer, with the bits", "blocks", move |f| {
            let blocks = u64_at(&f.header, BLOCKS);
            let bits = u64_at(&f.header, PAYLOAD);
            put_u64(&mut f.header, BLOCKS, blocks - per_line);
            put_u64(&mut f.header, PAYLOAD, bits - 64);
            f.payload.truncate(bits as usize - 64);
        }),
    ]
}

fn written(write: impl FnOnce(&mut Vec<u8>) -> Result<(), Error>) -> Vec<u8> {
    let mut bytes = Vec::new();
    write(&mut bytes).unwrap();
    bytes
}

/// Kind 1. Before these checks, a file with another `k`, capacity, target or expected rate
/// loaded with a valid checksum (with k = 64, every item inserted read as absent).
#[test]
fn crafted_bloom_filter_headers_are_refused() {
    let keys = common::keys(231, 2_000);
    for layout in [Layout::Word, Layout::Line] {
        let filter = AtomicBloomFilter::builder(10_000)
            .fpr(0.01)
            .layout(layout)
            .build()
            .unwrap();
        filter.insert_counting_new(&keys);
        let good = written(|out| filter.write_to(out));
        let load = |bytes: &[u8]| AtomicBloomFilter::read_from(bytes);
        let mut cases = bloom_header_cases(10_000, 0.01);
        cases.extend(bloom_block_cases(layout));
        if layout == Layout::Word {
            cases.push(case("k = 33 in the word layout", "k", |f| {
                put_u32(&mut f.header, K, 33)
            }));
        }
        every_change_is_refused(&good, load, cases);
        // The frozen snapshot writes the same kind.
        let mut semi = SemiConcurrentBloomFilter::builder(10_000)
            .layout(layout)
            .build()
            .unwrap();
        semi.extend(&keys);
        semi.compact();
        let frozen = written(|out| semi.snapshot().write_to(out));
        every_change_is_refused(&frozen, load, bloom_header_cases(10_000, 0.01));
    }
}

/// Kind 2: the same fields, with pending hashes after the bits.
#[test]
fn crafted_semi_concurrent_headers_are_refused() {
    let keys = common::keys(232, 3_000);
    let mut semi = SemiConcurrentBloomFilter::with_capacity(10_000, 0.01).unwrap();
    semi.extend(&keys[..2_000]);
    semi.compact();
    semi.extend(&keys[2_000..2_100]);
    assert!(semi.pending_len() > 0);
    let good = written(|out| semi.write_to(out));
    let mut cases = bloom_header_cases(10_000, 0.01);
    cases.push(case("records + 1", "records", |f| {
        change_u64(&mut f.header, RECORDS, |v| v + 1)
    }));
    every_change_is_refused(&good, |b| SemiConcurrentBloomFilter::read_from(b), cases);
}

/// A map's header holds no Bloom fields, and its buckets and records agree with the payload.
fn map_cases() -> Vec<Case> {
    vec![
        case("layout word", "layout", |f| f.header[17] = 1),
        case("k = 7", "k", |f| put_u32(&mut f.header, K, 7)),
        case("capacity 1000", "capacity", |f| {
            put_u64(&mut f.header, CAPACITY, 1000)
        }),
        case("target rate 0.01", "target", |f| {
            put_f64(&mut f.header, FPR, 0.01)
        }),
        case("target rate -0", "target", |f| {
            put_f64(&mut f.header, FPR, -0.0)
        }),
        case("expected rate 0.01", "expected", |f| {
            put_f64(&mut f.header, EXPECTED, 0.01)
        }),
        case("buckets 0", "buckets", |f| {
            put_u64(&mut f.header, BLOCKS, 0)
        }),
        case("buckets doubled", "buckets", |f| {
            change_u64(&mut f.header, BLOCKS, |v| v * 2)
        }),
        case("records + 1", "records", |f| {
            change_u64(&mut f.header, RECORDS, |v| v + 1)
        }),
    ]
}

/// Kinds 3 and 4 (refused before these checks too).
#[test]
fn crafted_map_headers_are_refused() {
    let keys = common::keys(233, 500);
    let map = OverwriteMap::with_buckets(1_000).unwrap();
    keys.iter().for_each(|k| _ = map.insert(k));
    let mut cases = map_cases();
    cases.push(case("buckets + 1", "buckets", |f| {
        change_u64(&mut f.header, BLOCKS, |v| v + 1)
    }));
    every_change_is_refused(
        &written(|out| map.write_to(out)),
        |b| OverwriteMap::read_from(b),
        cases,
    );

    let exact = ExactOverwriteMap::with_buckets(1_000).unwrap();
    keys.iter().for_each(|k| _ = exact.insert(&k.to_le_bytes()));
    let mut cases = map_cases();
    cases.push(case("records - 1", "records", |f| {
        change_u64(&mut f.header, RECORDS, |v| v - 1)
    }));
    let good = written(|out| exact.write_to(out));
    every_change_is_refused(&good, |b| ExactOverwriteMap::read_from(b), cases);
}

/// Window record offsets, from the start of the payload.
const GENERATIONS: usize = 0;
const STRIDE: usize = 4;
const GENERATION_FPR: usize = 48;
const GENERATION_EXPECTED: usize = 56;

/// Kind 5: the header's Bloom fields (one generation's probe, the window's rates) and the
/// window record's generations, words per block and generation rates. Before these checks the
/// rates, the capacity and `k` could be changed freely (within their ranges).
#[test]
fn crafted_window_headers_are_refused() {
    let window = WindowedBloomFilter::builder(2_000)
        .fpr(0.01)
        .periods(2)
        .rotate_manually()
        .build()
        .unwrap();
    common::keys(234, 1_500)
        .iter()
        .for_each(|k| _ = window.insert(k));
    let good = written(|out| window.write_to(out));
    let mut cases = bloom_header_cases(2_000, 0.01);
    cases.extend([
        case("k = 33", "k", |f| put_u32(&mut f.header, K, 33)),
        case("generations 3 -> 2", "generations", |f| {
            put_u32(&mut f.payload, GENERATIONS, 2)
        }),
        case("generations 3 -> 1", "generations", |f| {
            put_u32(&mut f.payload, GENERATIONS, 1)
        }),
        case("generations 3 -> 4", "generations", |f| {
            put_u32(&mut f.payload, GENERATIONS, 4)
        }),
        case("generations 3 -> 0", "generations", |f| {
            put_u32(&mut f.payload, GENERATIONS, 0)
        }),
        case("words per block 4 -> 8", "words per block", |f| {
            put_u32(&mut f.payload, STRIDE, 8)
        }),
        case(
            "generation rate 1.01 times",
            "generation false-positive rate",
            |f| change_f64(&mut f.payload, GENERATION_FPR, |v| v * 1.01),
        ),
        case(
            "generation rate the window's",
            "generation false-positive rate",
            |f| put_f64(&mut f.payload, GENERATION_FPR, f64_at(&f.header, FPR)),
        ),
        case("generation expected rate 1.5 times", "expected", |f| {
            let e = f64_at(&f.payload, GENERATION_EXPECTED);
            put_f64(&mut f.payload, GENERATION_EXPECTED, e * 1.5)
        }),
        case(
            "both expected rates 1.5 times, consistent",
            "expected",
            |f| {
                let e = f64_at(&f.payload, GENERATION_EXPECTED) * 1.5;
                put_f64(&mut f.payload, GENERATION_EXPECTED, e);
                put_f64(&mut f.header, EXPECTED, 1.0 - (1.0 - e).powi(3));
            },
        ),
    ]);
    every_change_is_refused(&good, |b| WindowedBloomFilter::read_from(b), cases);
}

/// Growth and layer record offsets, from the start of the payload.
const EXPANSION: usize = 0;
const SCALING: usize = 4;
const TIGHTENING: usize = 8;
fn layer(i: usize, at: usize) -> usize {
    32 + 32 * i + at
}

/// Kind 6: the header's Bloom fields (the first layer's and the schedule's), the growth record
/// and the layer records.
#[test]
fn crafted_growing_headers_are_refused() {
    let filter = GrowingBloomFilter::with_capacity(1_000, 0.01).unwrap();
    for k in common::keys(235, 2_500) {
        filter.insert(&k).unwrap();
    }
    assert_eq!(filter.layers(), 2);
    let good = written(|out| filter.write_to(out));
    let cases = vec![
        case("k + 1", "k", |f| change_u32(&mut f.header, K, |v| v + 1)),
        case("k and the first layer's k + 1", "k", |f| {
            change_u32(&mut f.header, K, |v| v + 1);
            change_u32(&mut f.payload, layer(0, 8), |v| v + 1);
        }),
        case("blocks + 8", "blocks", |f| {
            change_u64(&mut f.header, BLOCKS, |v| v + 8)
        }),
        case("expected rate 1.5 times", "expected", |f| {
            change_f64(&mut f.header, EXPECTED, |v| v * 1.5)
        }),
        case("initial capacity + 1", "initial capacity", |f| {
            put_u64(&mut f.header, CAPACITY, 1_001)
        }),
        case("initial capacity doubled", "initial capacity", |f| {
            put_u64(&mut f.header, CAPACITY, 2_000)
        }),
        case("initial capacity halved", "initial capacity", |f| {
            put_u64(&mut f.header, CAPACITY, 500)
        }),
        case("target rate halved", "target", |f| {
            put_f64(&mut f.header, FPR, 0.005)
        }),
        case("target rate doubled", "target", |f| {
            put_f64(&mut f.header, FPR, 0.02)
        }),
        case("target rate 1e-300", "target", |f| {
            put_f64(&mut f.header, FPR, 1e-300)
        }),
        case("expansion 2 -> 3", "expansion", |f| {
            put_u32(&mut f.payload, EXPANSION, 3)
        }),
        case("expansion 2 -> 1", "expansion", |f| {
            put_u32(&mut f.payload, EXPANSION, 1)
        }),
        case("tightening 0.8 -> 0.5", "tightening", |f| {
            put_f64(&mut f.payload, TIGHTENING, 0.5)
        }),
        case("tightening 0.8 -> 0.9", "tightening", |f| {
            put_f64(&mut f.payload, TIGHTENING, 0.9)
        }),
        case("non-scaling", "scaling", |f| {
            put_u32(&mut f.payload, SCALING, 0)
        }),
        case("layer 1: k + 1", "k", |f| {
            change_u32(&mut f.payload, layer(1, 8), |v| v + 1)
        }),
        case("layer 1: k - 1", "k", |f| {
            change_u32(&mut f.payload, layer(1, 8), |v| v - 1)
        }),
        case("layer 1: blocks + 8", "blocks", |f| {
            change_u64(&mut f.payload, layer(1, 0), |v| v + 8)
        }),
        case("layer 1: expected rate 1.5 times", "expected", |f| {
            change_f64(&mut f.payload, layer(1, 24), |v| v * 1.5)
        }),
        case("layer 0: counted below its capacity", "counted", |f| {
            put_u64(&mut f.payload, layer(0, 16), 999)
        }),
    ];
    every_change_is_refused(&good, |b| GrowingBloomFilter::read_from(b), cases);
}

/// `p` log-uniform in [1e-30, 0.99] half of the time, in [6.4e-6, 0.99] the other half (below
/// the layouts' limits the crate builds nothing).
fn fpr() -> impl Strategy<Value = f64> {
    prop_oneof![-30.0f64..-0.0044, -5.19f64..-0.0044].prop_map(|e| 10f64.powf(e))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Every filter the crate builds, of small sizes (the unit tests check the headers of
    /// every size, without allocating), saves to a file that loads. Capacities from 1 to
    /// 100,000; for a window, generations from 1 to 63 of up to 10,000 items each.
    #[test]
    fn every_filter_the_crate_saves_loads(
        capacity in (0.0f64..5.0).prop_map(|e| 10f64.powf(e) as u64),
        fpr in fpr(),
        line: bool,
        generations in 1u32..=63,
    ) {
        let layout = if line { Layout::Line } else { Layout::Word };
        if let Ok(filter) = AtomicBloomFilter::builder(capacity).fpr(fpr).layout(layout).build() {
            let bytes = written(|out| filter.write_to(out));
            prop_assert!(AtomicBloomFilter::read_from(&bytes[..]).is_ok());
        }
        if let Ok(semi) = SemiConcurrentBloomFilter::builder(capacity).fpr(fpr).layout(layout).build() {
            semi.insert(&1u64);
            let bytes = written(|out| semi.write_to(out));
            prop_assert!(SemiConcurrentBloomFilter::read_from(&bytes[..]).is_ok());
        }
        let items = capacity.min(10_000);
        if let Ok(window) = WindowedBloomFilter::builder(items)
            .fpr(fpr)
            .periods(generations - 1)
            .rotate_manually()
            .build()
        {
            let bytes = written(|out| window.write_to(out));
            prop_assert!(WindowedBloomFilter::read_from(&bytes[..]).is_ok());
        }
        if let Ok(growing) = GrowingBloomFilter::builder(items.min(1_000)).fpr(fpr).layout(layout).build() {
            // Three layers, each counted to its capacity.
            let keys = common::keys(capacity, (items.min(1_000) * 7) as usize);
            for k in &keys {
                if growing.insert(k).is_err() || growing.layers() > 3 {
                    break;
                }
            }
            let bytes = written(|out| growing.write_to(out));
            prop_assert!(GrowingBloomFilter::read_from(&bytes[..]).is_ok());
        }
    }
}
