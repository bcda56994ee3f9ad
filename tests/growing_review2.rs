//! Second hostile review of `GrowingBloomFilter` (persistence, kind 6; the sampling fixes; the
//! docs). Each test asserts the behaviour the contract promises.
//!
//! Findings: the `*_is_refused*` tests. They failed on the reviewed commit (b52303f), whose
//! kind-6 reader checked each layer's blocks and `k` against their ranges only, never against
//! the capacity and rate the schedule (initial capacity, expansion, tightening, scaling flag)
//! assigns the layer, so a re-signed file whose schedule and bits disagree loaded as a silently
//! wrong filter. They pass since the reader checks each layer against the exact rate model.
//!
//! The rest are checks that held, kept as regression tests.
#![cfg(not(seen_loom))]

mod common;

use common::keys;
use seen::{Corruption, Error, GrowingBloomFilter, Layout, WindowedBloomFilter};
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// The header's length for the default hasher's name.
const H: usize = 112;

fn bytes_of(f: &GrowingBloomFilter) -> Vec<u8> {
    let mut out = Vec::new();
    f.write_to(&mut out).unwrap();
    out
}

/// Re-signs the header after a test rewrote it.
fn resign(file: &mut [u8]) {
    let len = u32::from_le_bytes(file[12..16].try_into().unwrap()) as usize;
    let sum = xxhash_rust::xxh3::xxh3_64(&file[..len - 8]);
    file[len - 8..len].copy_from_slice(&sum.to_le_bytes());
}

fn put(file: &mut [u8], at: usize, bytes: &[u8]) {
    file[at..at + bytes.len()].copy_from_slice(bytes);
}

/// Three word layers of 60, 120 and 240 items.
fn three_layers() -> GrowingBloomFilter {
    let f = GrowingBloomFilter::builder(60).fpr(0.05).build().unwrap();
    keys(160, 300).iter().for_each(|k| _ = f.insert(k).unwrap());
    assert_eq!(f.layers(), 3);
    f
}

/// A file whose expansion was rewritten from 2 to 65,536 (in range, and every layer capacity
/// fits a u64) loads: layer 2, 240 items' worth of bits, now "holds" 60 · 2^32 items, so the
/// filter never grows again and its rate climbs towards 1 with no error. The reader checks
/// each layer's blocks against nothing but its range.
#[test]
fn a_layer_whose_bits_cannot_hold_its_scheduled_capacity_is_refused() {
    let f = three_layers();
    let mut file = bytes_of(&f);
    put(&mut file, H, &65_536u32.to_le_bytes());
    common::reseal(&mut file);
    match GrowingBloomFilter::read_from(&file[..]) {
        Err(Error::Corrupt(Corruption::Header(_))) => {}
        Err(e) => panic!("refused, but not as a header: {e:?}"),
        Ok(loaded) => {
            let caps: Vec<u64> = loaded.layer_info().iter().map(|l| l.capacity).collect();
            for k in keys(161, 20_000) {
                loaded.insert(&k).unwrap();
            }
            let info = loaded.info();
            panic!(
                "loaded with capacities {caps:?}; after 20,000 more items: {} layers, \
                 estimated rate {} (target {})",
                info.layers, info.estimated_fpr, info.fpr
            );
        }
    }
}

/// The same through the header: the initial capacity rewritten from 60 to 60 million (the
/// first layer's blocks and `k` still match the header's, which is all the reader compares).
#[test]
fn a_header_capacity_the_first_layer_cannot_hold_is_refused() {
    let f = three_layers();
    let mut file = bytes_of(&f);
    put(&mut file, 24, &60_000_000u64.to_le_bytes());
    resign(&mut file);
    match GrowingBloomFilter::read_from(&file[..]) {
        Err(Error::Corrupt(Corruption::Header(_))) => {}
        Err(e) => panic!("refused, but not as a header: {e:?}"),
        Ok(loaded) => {
            let caps: Vec<u64> = loaded.layer_info().iter().map(|l| l.capacity).collect();
            panic!(
                "loaded with capacities {caps:?} for {} bytes",
                loaded.memory_bytes()
            );
        }
    }
}

/// A non-scaling file (one layer sized at the whole target `P`) with its scaling flag set to
/// 1 loads as a scaling filter whose first layer claims `P (1 - t)`: as it grows, the layers'
/// rates add up to about `1.8 P`, past the target the type promises to stay under.
#[test]
fn a_non_scaling_file_flipped_to_scaling_is_refused_or_keeps_the_target() {
    let f = GrowingBloomFilter::builder(2000)
        .scaling(false)
        .build()
        .unwrap();
    for k in keys(180, 1999) {
        f.insert(&k).unwrap();
    }
    let mut file = bytes_of(&f);
    put(&mut file, H + 4, &1u32.to_le_bytes());
    common::reseal(&mut file);
    let Ok(loaded) = GrowingBloomFilter::read_from(&file[..]) else {
        return; // refused: fine
    };
    assert!(loaded.is_scaling());
    for k in keys(181, 200_000) {
        loaded.insert(&k).unwrap();
    }
    let absent = keys(182, 200_000);
    let rate = absent.iter().filter(|k| loaded.contains(*k)).count() as f64 / 200_000.0;
    assert!(
        rate < loaded.fpr(),
        "measured rate {rate} against the target {} ({} layers; estimated {})",
        loaded.fpr(),
        loaded.layers(),
        loaded.info().estimated_fpr
    );
}

/// The header's expected rate is documented as the first layer's; a header that disagrees
/// with layer record 0 is not refused (only blocks and `k` are compared), so two readers may
/// report different rates for one file.
#[test]
fn a_header_expected_rate_other_than_the_first_layers_is_refused() {
    let f = three_layers();
    let mut file = bytes_of(&f);
    put(&mut file, 40, &0.5f64.to_bits().to_le_bytes());
    resign(&mut file);
    let result = GrowingBloomFilter::read_from(&file[..]).map(|f| f.sizing());
    assert!(
        matches!(result, Err(Error::Corrupt(Corruption::Header(_)))),
        "{result:?}"
    );
}

/// The same with a layer record's blocks shrunk to one cache line (payload length and
/// checksums made consistent): a 240-item layer of 512 bits loads and takes items silently.
#[test]
fn a_layer_of_one_cache_line_for_240_items_is_refused() {
    let f = three_layers();
    let good = bytes_of(&f);
    let info = f.layer_info();
    let (b0, b1, b2) = (
        info[0].bytes as usize,
        info[1].bytes as usize,
        info[2].bytes as usize,
    );
    let records = 32 + 3 * 32;
    let payload = &good[H..good.len() - 8];
    assert_eq!(payload.len(), records + b0 + b1 + b2);
    let mut new_payload = payload[..records + b0 + b1 + 64].to_vec();
    put(&mut new_payload, 32 + 2 * 32, &8u64.to_le_bytes()); // layer 2: 8 word blocks
    let mut file = good[..H].to_vec();
    put(&mut file, 56, &(new_payload.len() as u64).to_le_bytes());
    resign(&mut file);
    file.extend_from_slice(&new_payload);
    file.extend_from_slice(&[0; 8]);
    common::reseal(&mut file);
    match GrowingBloomFilter::read_from(&file[..]) {
        Err(Error::Corrupt(Corruption::Header(_))) => {}
        Err(e) => panic!("refused, but not as a header: {e:?}"),
        Ok(loaded) => {
            let l = &loaded.layer_info()[2];
            panic!(
                "loaded: layer 2 has {} bytes for a capacity of {} at rate {}",
                l.bytes, l.capacity, l.fpr
            );
        }
    }
}

/// A scaling file whose newest layer has counted its capacity grows at the next new item.
#[test]
fn a_scaling_file_whose_newest_layer_is_full_grows_at_the_next_new_insert() {
    let f = three_layers();
    let mut file = bytes_of(&f);
    for count in [240u64, 241, 10_000] {
        put(&mut file, H + 32 + 2 * 32 + 16, &count.to_le_bytes());
        common::reseal(&mut file);
        let loaded = GrowingBloomFilter::read_from(&file[..]).unwrap();
        assert_eq!(loaded.layers(), 3);
        // An item already in: no growth.
        assert_eq!(loaded.insert(&keys(160, 1)[0]), Ok(false));
        assert_eq!(loaded.layers(), 3);
        let mut grew_at = None;
        for (i, k) in keys(162, 10).iter().enumerate() {
            if loaded.insert(k).unwrap() {
                grew_at = Some(i);
                break;
            }
        }
        assert_eq!(grew_at, Some(0));
        assert_eq!(loaded.layers(), 4, "count {count}");
        assert_eq!(loaded.layer_info()[3].sampled_new_items, 1);
    }
}

/// A non-scaling file at its capacity refuses new items; one short of it takes exactly one.
#[test]
fn a_non_scaling_file_counts_on_exactly() {
    let f = GrowingBloomFilter::builder(100)
        .scaling(false)
        .build()
        .unwrap();
    for k in keys(163, 50) {
        assert!(f.insert(&k).unwrap());
    }
    let mut file = bytes_of(&f);
    let loaded = GrowingBloomFilter::read_from(&file[..]).unwrap();
    assert!(!loaded.is_scaling());
    assert_eq!(loaded.info().sampled_new_items, Some(50));
    let mut accepted = 0;
    for k in keys(164, 200) {
        match loaded.insert(&k) {
            Ok(true) => accepted += 1,
            Ok(false) => {}
            Err(e) => assert_eq!(e, Error::Full { capacity: 100 }),
        }
    }
    assert_eq!(accepted, 50);
    for (count, more) in [(100u64, 0), (99, 1), (5000, 0)] {
        put(&mut file, H + 32 + 16, &count.to_le_bytes());
        common::reseal(&mut file);
        let loaded = GrowingBloomFilter::read_from(&file[..]).unwrap();
        let accepted = keys(165, 50)
            .iter()
            .filter(|k| loaded.insert(*k) == Ok(true))
            .count();
        assert_eq!(accepted, more, "count {count}");
        assert_eq!(loaded.layers(), 1);
    }
}

/// Non-scaling: `Error::Full` at exactly the capacity on one thread; at most capacity + 1
/// accepted with two.
#[test]
fn non_scaling_refuses_at_exactly_the_capacity() {
    for cap in [1u64, 2, 100, 1000, 200_000] {
        let f = GrowingBloomFilter::builder(cap)
            .scaling(false)
            .build()
            .unwrap();
        let mut new = 0u64;
        let mut first_full = None;
        for (i, k) in keys(166, 2 * cap as usize + 100).iter().enumerate() {
            match f.insert(k) {
                Ok(true) => new += 1,
                Ok(false) => {}
                Err(Error::Full { capacity }) => {
                    assert_eq!(capacity, cap);
                    first_full.get_or_insert(i);
                }
                Err(e) => panic!("{e:?}"),
            }
        }
        assert_eq!(new, cap, "capacity {cap}");
        assert!(first_full.is_some());
        assert_eq!(f.info().sampled_new_items, Some(cap));
    }
    for round in 0..20 {
        let cap = 5000;
        let f = GrowingBloomFilter::builder(cap)
            .scaling(false)
            .build()
            .unwrap();
        let a = keys(200 + round, 6000);
        let b = keys(300 + round, 6000);
        let run = |ks: &[u64]| ks.iter().filter(|k| f.insert(*k) == Ok(true)).count() as u64;
        let (x, y) = std::thread::scope(|s| {
            let x = s.spawn(|| run(&a));
            let y = s.spawn(|| run(&b));
            (x.join().unwrap(), y.join().unwrap())
        });
        assert!(x + y <= cap + 1, "{} accepted", x + y);
        assert!(x + y >= cap, "{} accepted", x + y);
    }
}

/// Saves while two threads insert and the filter grows: every insert that returned before the
/// save began is in the file.
#[test]
fn a_save_during_growth_holds_every_insert_that_returned_before_it() {
    let f = GrowingBloomFilter::with_capacity(500, 0.01).unwrap();
    let a = keys(170, 200_000);
    let b = keys(171, 200_000);
    let (pa, pb) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let stop = AtomicBool::new(false);
    let run = |ks: &[u64], p: &AtomicUsize| {
        for (i, k) in ks.iter().enumerate() {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            f.insert(k).unwrap();
            p.store(i + 1, Ordering::Release);
        }
    };
    let mut checked = 0;
    std::thread::scope(|s| {
        s.spawn(|| run(&a, &pa));
        s.spawn(|| run(&b, &pb));
        // Until both writers are done (a fixed number of saves can all run before the writers
        // start, on a loaded machine).
        loop {
            let (na, nb) = (pa.load(Ordering::Acquire), pb.load(Ordering::Acquire));
            let file = bytes_of(&f);
            let loaded = GrowingBloomFilter::read_from(&file[..]).unwrap();
            let lost = a[..na]
                .iter()
                .chain(&b[..nb])
                .filter(|k| !loaded.contains(*k))
                .count();
            assert_eq!(
                lost,
                0,
                "{na} + {nb} inserted before the save, {} layers",
                loaded.layers()
            );
            checked += na + nb;
            if na == a.len() && nb == b.len() {
                break;
            }
        }
        stop.store(true, Ordering::Relaxed);
    });
    assert!(checked > 0);
}

/// Loaded mid-layer, the copy and the original grow in lockstep on the same further inserts:
/// the same layers, the same counts, the same info.
#[test]
fn a_loaded_filter_grows_on_as_the_original() {
    for layout in [Layout::Word, Layout::Line] {
        // 300,000 items: layers past 2^17 of capacity count by sampling.
        let f = GrowingBloomFilter::builder(50_000)
            .layout(layout)
            .build()
            .unwrap();
        for k in keys(172, 300_000) {
            f.insert(&k).unwrap();
        }
        let loaded = GrowingBloomFilter::read_from(&bytes_of(&f)[..]).unwrap();
        assert_eq!(loaded.layer_info(), f.layer_info());
        assert_eq!(loaded.info(), f.info());
        for k in keys(173, 600_000) {
            assert_eq!(loaded.insert(&k), f.insert(&k));
        }
        assert_eq!(loaded.layers(), f.layers());
        assert_eq!(loaded.layer_info(), f.layer_info());
        assert_eq!(loaded.info(), f.info());
    }
}

/// `export_chunks` / `import_chunks` of a filter of several layers, cut into odd pieces.
#[test]
fn export_and_import_chunks_round_trip() {
    let f = three_layers();
    let mut pieces = Vec::new();
    f.export_chunks(77, |p| {
        pieces.push(p.to_vec());
        Ok(())
    })
    .unwrap();
    let loaded = GrowingBloomFilter::import_chunks(&pieces).unwrap();
    assert_eq!(loaded.layer_info(), f.layer_info());
    pieces.swap(1, 2);
    assert!(matches!(
        GrowingBloomFilter::import_chunks(&pieces),
        Err(Error::Corrupt(_))
    ));
}

#[cfg(feature = "serde")]
#[test]
fn serde_round_trip() {
    let f = three_layers();
    let json = serde_json::to_string(&f).unwrap();
    let loaded: GrowingBloomFilter = serde_json::from_str(&json).unwrap();
    assert_eq!(loaded.layer_info(), f.layer_info());
    assert_eq!(loaded.info(), f.info());
    let nf = GrowingBloomFilter::builder(10)
        .scaling(false)
        .build()
        .unwrap();
    let loaded: GrowingBloomFilter =
        serde_json::from_str(&serde_json::to_string(&nf).unwrap()).unwrap();
    assert!(!loaded.is_scaling());
}

/// A file promising a layer of 16 GiB, holding its first chunk only, read from a stream of
/// unknown length: refused without allocating gigabytes.
#[test]
fn a_small_stream_promising_a_huge_layer_fails_cheaply() {
    if !common::in_capped_child(
        "a_small_stream_promising_a_huge_layer_fails_cheaply",
        1 << 20,
    ) {
        return;
    }
    let f = three_layers();
    let good = bytes_of(&f);
    let info = f.layer_info();
    let (b0, b1) = (info[0].bytes, info[1].bytes);
    let huge: u64 = 16 << 30;
    let records = 32 + 3 * 32;
    let mut head = good[..H].to_vec();
    put(
        &mut head,
        56,
        &(records as u64 + b0 + b1 + huge).to_le_bytes(),
    );
    resign(&mut head);
    let mut chunk = good[H..H + records + (b0 + b1) as usize].to_vec();
    put(&mut chunk, 32 + 2 * 32, &(huge / 8).to_le_bytes()); // word blocks of 8 bytes
    chunk.resize(1 << 20, 0);
    let sum = xxhash_rust::xxh3::xxh3_64_with_seed(&chunk, 0);
    let mut file = head;
    file.extend_from_slice(&chunk);
    file.extend_from_slice(&sum.to_le_bytes());
    let err = GrowingBloomFilter::read_from(&file[..])
        .map(|_| ())
        .unwrap_err();
    assert!(matches!(err, Error::Corrupt(_)), "{err:?}");
}

/// A multiplicative hasher of integer keys (FxHash-like): its low bits follow the key's.
#[derive(Clone, Default)]
struct Fx;
struct FxState(u64);
impl Hasher for FxState {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 =
                (self.0.rotate_left(5) ^ u64::from(*b)).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}
impl BuildHasher for Fx {
    type Hasher = FxState;
    fn build_hasher(&self) -> FxState {
        FxState(0)
    }
}

/// Count mode rotates within a few percent of the count, with the default hasher and with a
/// hasher whose low bits are weak, keys 0, 8, 16, ... (all low bits of the key zero).
#[test]
fn windowed_count_mode_rotates_at_the_count_with_weak_low_bits() {
    for n in [1000u64, 50_000, 1_000_000] {
        for stride in [1u64, 8, 1 << 16] {
            let weak = WindowedBloomFilter::builder(n)
                .periods(3)
                .hasher(Fx)
                .build()
                .unwrap();
            let strong = WindowedBloomFilter::builder(n).periods(3).build().unwrap();
            let total = 10 * n;
            let (mut nw, mut ns) = (0u64, 0u64);
            for i in 0..total {
                nw += u64::from(weak.insert(&(i * stride)));
                ns += u64::from(strong.insert(&(i * stride)));
            }
            for (name, f, new) in [
                ("weak", weak.generation(), nw),
                ("strong", strong.generation(), ns),
            ] {
                let expect = new as f64 / n as f64;
                assert!(
                    (f as f64 - expect).abs() <= 0.06 * expect + 1.0,
                    "{name}, n {n}, stride {stride}: {f} rotations for {new} new items"
                );
            }
        }
    }
}

/// The clearing of the spare keeps up in count mode: right after each rotation, the new
/// current generation holds none of the items of G generations ago (no ghost positives).
#[test]
fn windowed_spare_is_clear_at_each_rotation_with_weak_low_bits() {
    let n = 20_000u64;
    let f = WindowedBloomFilter::builder(n)
        .periods(1)
        .hasher(Fx)
        .build()
        .unwrap();
    let mut gens: Vec<Vec<u64>> = vec![Vec::new()];
    let mut g = f.generation();
    for i in 0..40 * n {
        let k = i * 1024;
        f.insert(&k);
        if f.generation() != g {
            g = f.generation();
            gens.push(Vec::new());
        }
        gens.last_mut().unwrap().push(k);
    }
    // Items of generations more than G ago: false positives only (about 1 %).
    let old: Vec<u64> = gens[..gens.len() - 4].concat();
    let hits = old.iter().filter(|k| f.contains(*k)).count();
    assert!(
        (hits as f64) < 0.03 * old.len() as f64,
        "{hits} of {} old items still answered",
        old.len()
    );
}

/// Count mode with a count far below the capacity the filter was sized for (many chunks of
/// spare to clear per counted item), weak low bits: rotations at the count, and the spare
/// clear at each rotation.
#[test]
fn windowed_small_count_in_a_large_filter_rotates_and_clears_with_weak_low_bits() {
    for (capacity, count) in [(1_000_000u64, 1000u64), (4_000_000, 70_000)] {
        let f = WindowedBloomFilter::builder(capacity)
            .periods(2)
            .rotate_after(count)
            .hasher(Fx)
            .build()
            .unwrap();
        let mut gens: Vec<Vec<u64>> = vec![Vec::new()];
        let mut g = f.generation();
        let mut new = 0u64;
        for i in 0..30 * count {
            let k = i << 20;
            new += u64::from(f.insert(&k));
            if f.generation() != g {
                g = f.generation();
                gens.push(Vec::new());
            }
            gens.last_mut().unwrap().push(k);
        }
        let expect = new as f64 / count as f64;
        assert!(
            (f.generation() as f64 - expect).abs() <= 0.06 * expect + 1.0,
            "{} rotations for {new} new items, count {count}",
            f.generation()
        );
        let old: Vec<u64> = gens[..gens.len() - 5].concat();
        let hits = old.iter().filter(|k| f.contains(*k)).count();
        assert!(
            (hits as f64) < 0.03 * old.len() as f64,
            "{hits} of {} old items still answered",
            old.len()
        );
    }
}
