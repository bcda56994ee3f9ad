//! Saving and loading `GrowingBloomFilter` (kind 6): a loaded filter counts and grows on as the
//! original, chunked export and serde, and crafted files whose schedule and layers disagree are
//! refused before any layer's bits are allocated.
#![cfg(not(seen_loom))]

mod common;

use common::files::{put_u64, resign};
use common::keys;
use seen::{AtomicBloomFilter, Corruption, Error, GrowingBloomFilter, Layout};

/// The header's length for the default hasher's name.
const H: usize = 112;

fn bytes_of(f: &GrowingBloomFilter) -> Vec<u8> {
    let mut out = Vec::new();
    f.write_to(&mut out).unwrap();
    out
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

/// A growing filter's file whose header, growth record or layer records say something
/// impossible, re-signed so that only that is wrong: each a typed error, before any layer's
/// bits are allocated.
#[test]
fn crafted_growing_files_are_refused_for_what_they_say() {
    // Three word layers of 60, 120 and 240 items.
    let f = GrowingBloomFilter::builder(60).fpr(0.05).build().unwrap();
    common::keys(160, 300)
        .iter()
        .for_each(|k| _ = f.insert(k).unwrap());
    assert_eq!(f.layers(), 3);
    let mut good = Vec::new();
    f.write_to(&mut good).unwrap();
    const H: usize = 112;
    const R: usize = H; // the growth record, then the layer records, 32 bytes each
    let refused = |file: &[u8], what: &str| {
        let err = GrowingBloomFilter::read_from(file).map(|_| ()).unwrap_err();
        assert!(
            matches!(err, Error::Corrupt(Corruption::Header(_))),
            "{what}: {err:?}"
        );
    };
    let cases: [(&str, usize, &[u8]); 15] = [
        ("expansion 0", 0, &0u32.to_le_bytes()),
        ("expansion 2^17", 0, &(1u32 << 17).to_le_bytes()),
        ("scaling 2", 4, &2u32.to_le_bytes()),
        ("non-scaling with 3 layers", 4, &0u32.to_le_bytes()),
        ("tightening 1", 8, &1f64.to_bits().to_le_bytes()),
        ("tightening NaN", 8, &f64::NAN.to_bits().to_le_bytes()),
        ("reserved", 16, &[1]),
        ("first layer's blocks", 32, &8u64.to_le_bytes()),
        ("first layer's k", 40, &9u32.to_le_bytes()),
        ("layer reserved", 44, &1u32.to_le_bytes()),
        ("count 2^63", 48, &(1u64 << 63).to_le_bytes()),
        ("expected rate 2", 56, &2f64.to_bits().to_le_bytes()),
        ("k 0 in layer 1", 72, &0u32.to_le_bytes()),
        ("7 word blocks in layer 1", 64, &7u64.to_le_bytes()),
        ("more blocks in layer 2", 96, &(1u64 << 40).to_le_bytes()),
    ];
    for (what, at, bytes) in cases {
        let mut file = good.clone();
        file[R + at..R + at + bytes.len()].copy_from_slice(bytes);
        common::reseal(&mut file);
        refused(&file, what);
    }
    // The header: the number of layers (records) and the payload length.
    let payload = u64::from_le_bytes(good[56..64].try_into().unwrap());
    for (what, at, value) in [
        ("0 layers", 64, 0),
        ("65 layers", 64, 65),
        ("2 layers", 64, 2),
        ("payload 64 longer", 56, payload + 64),
        ("payload without the records", 56, 32),
    ] {
        let mut file = good.clone();
        put_u64(&mut file, at, value);
        let err = GrowingBloomFilter::read_from(&file[..])
            .map(|_| ())
            .unwrap_err();
        assert!(matches!(err, Error::Corrupt(_)), "{what}: {err:?}");
    }
    // Unchanged, it loads, and the loaded filter grows on from where it was.
    let loaded = GrowingBloomFilter::read_from(&good[..]).unwrap();
    assert_eq!(loaded.layer_info(), f.layer_info());
    // A filter of another kind is refused by name.
    assert!(matches!(
        AtomicBloomFilter::read_from(&good[..]),
        Err(Error::WrongStructure {
            found: "a growing Bloom filter",
            ..
        })
    ));
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
