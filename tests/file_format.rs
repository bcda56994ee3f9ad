//! The file format: a loaded structure answers as the saved one, the bytes of each kind of file
//! as the format notes describe them, the hasher's name and seed checked on load, chunked export
//! and import, and serde.

mod common;

use common::files::{bloom, bytes_of, scratch};
use seen::hash::{ItemHasher, StableHasher};
use seen::{
    AtomicBloomFilter, Corruption, Error, ExactOverwriteMap, Layout, OverwriteMap,
    SemiConcurrentBloomFilter, WindowedBloomFilter,
};

#[test]
fn a_loaded_filter_answers_exactly_as_the_saved_one() {
    for layout in [Layout::Word, Layout::Line] {
        for (capacity, fpr) in [(1, 0.5), (1000, 0.01), (200_000, 1e-4)] {
            let filter = bloom(capacity, fpr, layout);
            let inserted = common::keys(1, capacity as usize);
            filter.insert_counting_new(&inserted);
            let file = bytes_of(&filter);
            let loaded = AtomicBloomFilter::read_from(&file[..]).unwrap();
            assert_eq!(loaded.sizing(), filter.sizing());
            assert_eq!(loaded.memory_bytes(), filter.memory_bytes());
            assert!(inserted.iter().all(|k| loaded.contains(k)));
            let others = common::keys(2, 50_000);
            for k in &others {
                assert_eq!(
                    loaded.contains(k),
                    filter.contains(k),
                    "{layout:?} {capacity}"
                );
            }
            // The loaded filter writes the same bytes back: nothing was lost or added.
            assert_eq!(bytes_of(&loaded), file);
            // And it is a live filter.
            assert!(loaded.insert(&u64::MAX) || filter.contains(&u64::MAX));
        }
    }
}

#[test]
fn the_file_is_the_header_plus_the_bits_plus_a_checksum_per_mebibyte() {
    let filter = bloom(1_000_000, 0.01, Layout::Word);
    let file = bytes_of(&filter);
    let payload = filter.memory_bytes();
    let header = ((86 + "seen/xxh3-128/2".len()).next_multiple_of(8) + 8) as u64;
    assert_eq!(
        file.len() as u64,
        header + payload + 8 * payload.div_ceil(1 << 20)
    );
    assert_eq!(&file[..8], b"\x89seen\r\n\x1a");
}

#[test]
fn the_seed_travels_with_the_file_and_other_hashers_are_checked() {
    let seeded = AtomicBloomFilter::builder(1000)
        .hasher(StableHasher::with_seed(5))
        .build()
        .unwrap();
    seeded.insert("a");
    let file = bytes_of(&seeded);
    let loaded = AtomicBloomFilter::read_from(&file[..]).unwrap();
    assert_eq!(loaded.hasher().seed(), 5);
    assert!(loaded.contains("a"));

    let same = AtomicBloomFilter::read_from_with_hasher(&file[..], StableHasher::with_seed(5));
    assert!(same.unwrap().contains("a"));
    let other = AtomicBloomFilter::read_from_with_hasher(&file[..], StableHasher::with_seed(6));
    match other {
        Err(Error::HasherMismatch { file, given }) => {
            assert_eq!(file.unwrap().seed(), 5);
            assert_eq!(given.unwrap().seed(), 6);
        }
        other => panic!("{other:?}"),
    }

    // A hasher that cannot name itself: its files load only when the caller vouches for it.
    let random = std::hash::RandomState::new();
    let unnamed = AtomicBloomFilter::builder(1000)
        .hasher(random.clone())
        .build()
        .unwrap();
    unnamed.insert("a");
    let file = bytes_of(&unnamed);
    assert!(matches!(
        AtomicBloomFilter::read_from(&file[..]),
        Err(Error::HasherMismatch { file: None, .. })
    ));
    assert!(matches!(
        AtomicBloomFilter::read_from_with_hasher(&file[..], random.clone()),
        Err(Error::HasherMismatch {
            file: None,
            given: None
        })
    ));
    let trusted = AtomicBloomFilter::read_from_trusting_hasher(&file[..], random).unwrap();
    assert!(trusted.contains("a"));
    let message = AtomicBloomFilter::read_from(&file[..])
        .unwrap_err()
        .to_string();
    assert!(message.contains("read_from_trusting_hasher"), "{message}");
}

/// A hasher of the caller's own that names itself `name`, seed `seed` (and hashes as the
/// default one).
#[derive(Clone, Debug)]
struct Named(&'static str, u64);

impl ItemHasher for Named {
    fn hash_item<T: std::hash::Hash + ?Sized>(&self, item: &T) -> seen::hash::Hash128 {
        StableHasher::new().hash_item(item)
    }
    fn hash_bytes(&self, bytes: &[u8]) -> seen::hash::Hash128 {
        StableHasher::new().hash_bytes(bytes)
    }
    fn identity(&self) -> Option<seen::hash::HasherIdentity> {
        Some(seen::hash::HasherIdentity::new(self.0, self.1))
    }
}

/// An identity with an empty name is no name: the file records none (and no seed), loads when
/// the caller vouches for the hasher, and is never a file this crate wrote but cannot read (it
/// wrote the seed of an unnamed hasher, which the reader refuses as corrupt).
#[test]
fn a_hasher_with_an_empty_name_writes_a_file_of_an_unnamed_hasher() {
    for seed in [0, 5] {
        let filter = AtomicBloomFilter::builder(1000)
            .hasher(Named("", seed))
            .build()
            .unwrap();
        filter.insert("a");
        let file = bytes_of(&filter);
        let trusted = AtomicBloomFilter::read_from_trusting_hasher(&file[..], Named("", seed));
        assert!(trusted.unwrap().contains("a"), "seed {seed}");
        assert!(matches!(
            AtomicBloomFilter::read_from_with_hasher(&file[..], Named("", seed)),
            Err(Error::HasherMismatch {
                file: None,
                given: None
            })
        ));
        let unnamed = AtomicBloomFilter::builder(1000)
            .hasher(std::hash::RandomState::new())
            .build()
            .unwrap();
        assert_eq!(file.len(), bytes_of(&unnamed).len());
    }
}

#[test]
fn maps_load_what_they_remembered() {
    let keys = common::keys(20, 50_000);
    let map = OverwriteMap::with_buckets(200_000).unwrap();
    let exact = ExactOverwriteMap::with_buckets(100_000).unwrap();
    for k in &keys {
        map.insert(k);
        exact.insert(&k.to_le_bytes());
    }
    map.forget(&keys[0]);
    exact.forget(&keys[0].to_le_bytes());
    let dir = scratch("maps");
    map.save(dir.join("map.seen")).unwrap();
    exact.save(dir.join("exact.seen")).unwrap();
    let map2 = OverwriteMap::load(dir.join("map.seen")).unwrap();
    let exact2 = ExactOverwriteMap::load(dir.join("exact.seen")).unwrap();
    assert_eq!((map2.buckets(), exact2.buckets()), (200_000, 100_000));
    for k in &keys {
        assert_eq!(map2.contains(k), map.contains(k));
        assert_eq!(
            exact2.contains(&k.to_le_bytes()),
            exact.contains(&k.to_le_bytes())
        );
    }
    assert!(!map2.contains(&keys[0]) && !exact2.contains(&keys[0].to_le_bytes()));
    // Live maps: inserts and forgets work on the loaded ones.
    assert!(!exact2.insert(&keys[1].to_le_bytes()) || !exact.contains(&keys[1].to_le_bytes()));
    assert!(exact2.forget(&keys[2].to_le_bytes()) == exact.contains(&keys[2].to_le_bytes()));
    // A map file is not a filter, and the other way round.
    assert!(matches!(
        AtomicBloomFilter::load(dir.join("map.seen")),
        Err(Error::WrongStructure { .. })
    ));
    assert!(matches!(
        ExactOverwriteMap::load(dir.join("map.seen")),
        Err(Error::WrongStructure { .. })
    ));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The maps' files, byte by byte as the format notes describe them (kinds 3 and 4): header
/// fields, the overwrite map's slots, the exact map's bitmap and length-prefixed keys.
#[test]
fn map_files_are_laid_out_as_the_format_notes_say() {
    const N: u64 = 70;
    let u64_at = |file: &[u8], at: usize| u64::from_le_bytes(file[at..at + 8].try_into().unwrap());
    // The hash whose slot is `slot` (`(h1 × N) >> 64`).
    let at = |slot: u64, h2: u64| seen::hash::Hash128 {
        h1: ((u128::from(slot) << 64).div_ceil(u128::from(N))) as u64,
        h2,
    };
    // 86 fixed bytes and the 15 of "seen/xxh3-128/2", to a multiple of 8, and the checksum.
    const H: usize = 112;
    let check_header = |file: &[u8], kind: u8, payload: u64, records: u64| {
        assert_eq!(
            u32::from_le_bytes(file[12..16].try_into().unwrap()),
            H as u32
        );
        assert_eq!((file[16], file[17]), (kind, 0));
        assert_eq!(&file[20..48], &[0; 28][..]); // k, capacity, both rates
        assert_eq!(u64_at(file, 48), N);
        assert_eq!(u64_at(file, 56), payload);
        assert_eq!(u64_at(file, 64), records);
        assert_eq!(file.len(), H + payload as usize + 8); // one chunk
        let sum = xxhash_rust::xxh3::xxh3_64_with_seed(&file[H..file.len() - 8], 0);
        assert_eq!(u64_at(file, file.len() - 8), sum);
    };

    let map = OverwriteMap::with_buckets(N).unwrap();
    map.insert_hash(at(0, 7));
    map.insert_hash(at(69, 0)); // the fingerprint is max(h2, 1)
    let mut file = Vec::new();
    map.write_to(&mut file).unwrap();
    check_header(&file, 3, 8 * N, 0);
    let slots: Vec<u64> = (0..N as usize).map(|i| u64_at(&file, H + 8 * i)).collect();
    let mut expected = vec![0; N as usize];
    (expected[0], expected[69]) = (7, 1);
    assert_eq!(slots, expected);

    let exact = ExactOverwriteMap::with_buckets(N).unwrap();
    exact.insert_hashed(at(69, 0), "xy");
    exact.insert_hashed(at(3, 0), "abc");
    exact.insert_hashed(at(64, 0), "");
    let mut file = Vec::new();
    exact.write_to(&mut file).unwrap();
    check_header(&file, 4, 16 + 7 + 4 + 6, 3);
    let mut payload = Vec::new();
    payload.extend_from_slice(&(1u64 << 3).to_le_bytes());
    payload.extend_from_slice(&(1u64 | 1 << 5).to_le_bytes());
    payload.extend_from_slice(b"\x03\0\0\0abc\0\0\0\0\x02\0\0\0xy");
    assert_eq!(&file[H..file.len() - 8], &payload[..]);
}

#[test]
fn a_semi_concurrent_filter_loads_its_snapshot_and_its_pending_hashes() {
    let mut filter = SemiConcurrentBloomFilter::builder(100_000)
        .insertions_before_compact(1 << 20)
        .build()
        .unwrap();
    let keys = common::keys(40, 100_000);
    filter.extend(&keys[..60_000]);
    filter.compact();
    filter.extend(&keys[60_000..]);
    // (Fewer than 40,000: an insert that the snapshot already answers is not pended.)
    assert!(filter.pending_len() > 39_000, "{}", filter.pending_len());
    let mut file = Vec::new();
    filter.write_to(&mut file).unwrap();
    let loaded = SemiConcurrentBloomFilter::read_from(&file[..]).unwrap();
    assert_eq!(loaded.pending_len(), 0);
    assert_eq!(loaded.snapshot().sizing(), filter.snapshot().sizing());
    assert!(keys.iter().all(|k| loaded.contains(k)));
    // The snapshot alone, as a Bloom filter file: what was compacted, not what was pending.
    let mut snapshot = Vec::new();
    filter.snapshot().write_to(&mut snapshot).unwrap();
    // The loaded filter is the saved one compacted: the same bits, the same answers.
    let bits = |f: &SemiConcurrentBloomFilter| {
        let mut out = Vec::new();
        f.snapshot().write_to(&mut out).unwrap();
        out
    };
    filter.compact();
    assert_eq!(bits(&loaded), bits(&filter));
    for k in common::keys(41, 100_000) {
        assert_eq!(loaded.contains(&k), filter.contains(&k));
    }
    let atomic = AtomicBloomFilter::read_from(&snapshot[..]).unwrap();
    assert!(keys[..60_000].iter().all(|k| atomic.contains(k)));
    assert_eq!(atomic.sizing(), filter.snapshot().sizing());
    // Kinds are not interchangeable.
    assert!(matches!(
        AtomicBloomFilter::read_from(&file[..]),
        Err(Error::WrongStructure { .. })
    ));
}

/// A semi-concurrent filter saves and loads whatever its segment size: one line, sizes that are
/// not whole lines, the default's neighbours, and segments far larger than the filter (the
/// builder's way to ask for one segment), which the save must not allocate.
#[test]
fn a_semi_filter_of_any_segment_size_saves_and_loads() {
    let keys = common::keys(90, 20_000);
    for segment_bytes in [1, 100, 4095, 4097, 1 << 20, 1 << 40, usize::MAX] {
        for layout in [Layout::Word, Layout::Line] {
            let mut filter = SemiConcurrentBloomFilter::builder(20_000)
                .layout(layout)
                .segment_bytes(segment_bytes)
                .insertions_before_compact(300)
                .build()
                .unwrap();
            filter.extend(&keys[..15_000]);
            filter.compact();
            let mut snapshot = Vec::new();
            filter.snapshot().write_to(&mut snapshot).unwrap();
            let atomic = AtomicBloomFilter::read_from(&snapshot[..]).unwrap();
            assert!(keys[..15_000].iter().all(|k| atomic.contains(k)));
            filter.extend(&keys[15_000..]);
            let mut file = Vec::new();
            filter.write_to(&mut file).unwrap();
            let loaded = SemiConcurrentBloomFilter::read_from(&file[..]).unwrap();
            assert!(keys.iter().all(|k| loaded.contains(k)));
            // The saved filter compacted has the loaded one's bits, byte for byte.
            filter.compact();
            let bits = |f: &SemiConcurrentBloomFilter| {
                let mut out = Vec::new();
                f.snapshot().write_to(&mut out).unwrap();
                out
            };
            assert_eq!(bits(&loaded), bits(&filter), "{segment_bytes} {layout:?}");
        }
    }
}

/// Exports each structure in pieces of several sizes and imports them back: the same bytes as
/// `write_to`; a piece dropped, repeated or swapped is refused, an extra one too.
#[test]
fn chunked_export_and_import_move_every_structure_through_a_size_limited_store() {
    macro_rules! check {
        ($structure:expr, $type:ty) => {{
            let structure = $structure;
            let mut whole = Vec::new();
            structure.write_to(&mut whole).unwrap();
            for max in [1, 7, 64, 1000, whole.len() - 1, whole.len(), 1 << 30] {
                let mut pieces: Vec<Vec<u8>> = Vec::new();
                let count = structure
                    .export_chunks(max, |piece| {
                        pieces.push(piece.to_vec());
                        Ok(())
                    })
                    .unwrap();
                assert_eq!(count as usize, pieces.len());
                assert!(pieces.iter().all(|p| p.len() <= max && !p.is_empty()));
                assert_eq!(pieces.concat(), whole, "{max}");
                let loaded = <$type>::import_chunks(&pieces).unwrap();
                let mut again = Vec::new();
                loaded.write_to(&mut again).unwrap();
                if max == 1000 {
                    // Damaged transfers: every one refused.
                    let mut dropped = pieces.clone();
                    dropped.remove(dropped.len() / 2);
                    assert!(matches!(
                        <$type>::import_chunks(&dropped),
                        Err(Error::Corrupt(_))
                    ));
                    let mut repeated = pieces.clone();
                    repeated.insert(repeated.len() / 2, pieces[pieces.len() / 2].clone());
                    assert!(matches!(
                        <$type>::import_chunks(&repeated),
                        Err(Error::Corrupt(_))
                    ));
                    let mut swapped = pieces.clone();
                    let n = swapped.len();
                    swapped.swap(n / 2, n / 2 + 1);
                    assert!(<$type>::import_chunks(&swapped).is_err());
                    let mut extra = pieces.clone();
                    extra.push(vec![0]);
                    assert_eq!(
                        <$type>::import_chunks(&extra).unwrap_err(),
                        Error::Corrupt(Corruption::TrailingBytes)
                    );
                }
            }
            assert!(matches!(
                structure.export_chunks(0, |_| Ok(())),
                Err(Error::InvalidParameter(_))
            ));
            let failing =
                structure.export_chunks(100, |_| Err(std::io::Error::other("store down")));
            assert!(matches!(failing, Err(Error::Io { .. })));
        }};
    }
    let keys = common::keys(90, 5_000);
    let filter = bloom(10_000, 0.01, Layout::Line);
    filter.insert_counting_new(&keys);
    check!(&filter, AtomicBloomFilter);
    let mut semi = SemiConcurrentBloomFilter::with_capacity(10_000, 0.01).unwrap();
    semi.extend(&keys[..4_500]);
    semi.compact();
    semi.extend(&keys[4_500..]);
    check!(&semi, SemiConcurrentBloomFilter);
    let mut map = OverwriteMap::with_buckets(10_000).unwrap();
    map.extend(&keys);
    check!(&map, OverwriteMap);
    let exact = ExactOverwriteMap::with_buckets(10_000).unwrap();
    keys.iter().for_each(|k| _ = exact.insert(&k.to_le_bytes()));
    check!(&exact, ExactOverwriteMap);
    let window = WindowedBloomFilter::builder(2_000)
        .periods(2)
        .rotate_after(2_000)
        .build()
        .unwrap();
    keys.iter().for_each(|k| _ = window.insert(k));
    check!(&window, WindowedBloomFilter);
}

/// With the `serde` feature, every saved structure goes through serde as its file's bytes, and a
/// damaged one is an error of the deserializer, not a panic.
#[cfg(feature = "serde")]
#[test]
fn serde_carries_the_file_format() {
    use common::files::window_bytes;
    use seen::clock::ManualClock;
    use std::time::Duration;

    let keys = common::keys(95, 1_000);
    let filter = bloom(2_000, 0.01, Layout::Word);
    filter.insert_counting_new(&keys);
    let json = serde_json::to_string(&filter).unwrap();
    let back: AtomicBloomFilter = serde_json::from_str(&json).unwrap();
    assert_eq!(bytes_of(&back), bytes_of(&filter));
    let mut map = OverwriteMap::with_buckets(4_000).unwrap();
    map.extend(&keys);
    let back: OverwriteMap = serde_json::from_str(&serde_json::to_string(&map).unwrap()).unwrap();
    assert!(keys.iter().filter(|k| back.contains(*k)).count() > 800);
    let exact = ExactOverwriteMap::with_buckets(4_000).unwrap();
    exact.insert("msg-42");
    let back: ExactOverwriteMap =
        serde_json::from_str(&serde_json::to_string(&exact).unwrap()).unwrap();
    assert!(back.contains("msg-42"));
    let semi = SemiConcurrentBloomFilter::with_capacity(2_000, 0.01).unwrap();
    semi.insert("pending");
    let back: SemiConcurrentBloomFilter =
        serde_json::from_str(&serde_json::to_string(&semi).unwrap()).unwrap();
    assert!(back.contains("pending"));
    // A window serializes whatever its clock, and deserializes with the system clock.
    let window = WindowedBloomFilter::builder(2_000)
        .rotate_every(Duration::from_secs(60))
        .clock(ManualClock::new(Duration::from_secs(1_000_000)))
        .build()
        .unwrap();
    window.insert("w");
    let back: WindowedBloomFilter =
        serde_json::from_str(&serde_json::to_string(&window).unwrap()).unwrap();
    assert!(back.contains("w"));
    assert_eq!(window_bytes(&back), window_bytes(&window));
    // A flipped byte in the middle of the JSON array: a deserializer error.
    let mut bytes: Vec<u8> = serde_json::from_str(&json).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x10;
    let damaged = serde_json::to_string(&bytes).unwrap();
    let err = serde_json::from_str::<AtomicBloomFilter>(&damaged).unwrap_err();
    assert!(err.to_string().contains("checksum"), "{err}");
}
