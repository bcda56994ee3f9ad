//! The golden files under `tests/data/`: one file of each kind, written by the first version of
//! the format, loads and answers as pinned; the file of the retired default hasher's name is
//! refused and converts; a window file from before the clock field loads, and one of padded
//! blocks from before blocks were packed.

mod common;

use std::path::Path;
use std::time::Duration;

use common::files::{bloom, scratch, window_bytes};
use seen::builder::Rotation;
use seen::clock::{ManualClock, TimeBase};
use seen::hash::StableHasher;
use seen::{
    AtomicBloomFilter, Error, ExactOverwriteMap, GrowingBloomFilter, Layout, OverwriteMap,
    SemiConcurrentBloomFilter, WindowedBloomFilter,
};

/// The keys the golden files hold, and the keys their false positives are counted on.
fn golden_keys() -> (Vec<u64>, Vec<u64>) {
    (common::keys(100, 1000), common::keys(101, 20_000))
}

/// A golden file: how to write it (once, when the format version changes) and the answers the
/// loaded structure gives for `inserted` followed by `others`.
struct Golden {
    name: &'static str,
    write: fn(&Path, &[u64]),
    answers: fn(&Path, &[u64]) -> Vec<bool>,
    /// Positive answers among `inserted` and among `others`, and xxh3-64 of every answer (one
    /// byte each, in order): pins each answer, not only the counts.
    positives: (usize, usize),
    digest: u64,
}

fn golden_bloom(layout: Layout, path: &Path, inserted: &[u64]) {
    let filter = bloom(1000, 0.01, layout);
    filter.insert_counting_new(inserted);
    filter.save(path).unwrap();
}

/// The golden window's clock: day 20,000 of the UNIX epoch, half past midnight.
fn golden_window_start() -> Duration {
    Duration::from_secs(20_000 * 86_400 + 1800)
}

fn goldens() -> [Golden; 8] {
    [
        Golden {
            name: "semi-concurrent-bloom-v1.seen",
            write: |path, keys| {
                let mut f = SemiConcurrentBloomFilter::builder(1000).build().unwrap();
                f.extend(&keys[..600]);
                f.compact();
                f.extend(&keys[600..]);
                assert!(f.pending_len() > 390);
                f.save(path).unwrap();
            },
            answers: |path, keys| {
                let f = SemiConcurrentBloomFilter::load(path).unwrap();
                let s = f.snapshot();
                assert_eq!(
                    (s.layout(), s.capacity(), s.fpr()),
                    (Layout::Word, 1000, 0.01)
                );
                keys.iter().map(|k| f.contains(k)).collect()
            },
            // The same bits as the word-layout file's: same sizing, same keys, same probe.
            positives: (1000, 173),
            digest: 0xb424_2181_b474_5de3,
        },
        Golden {
            name: "bloom-word-v1.seen",
            write: |path, keys| golden_bloom(Layout::Word, path, keys),
            answers: |path, keys| {
                let f = AtomicBloomFilter::load(path).unwrap();
                assert_eq!(
                    (f.layout(), f.capacity(), f.fpr()),
                    (Layout::Word, 1000, 0.01)
                );
                keys.iter().map(|k| f.contains(k)).collect()
            },
            positives: (1000, 173),
            digest: 0xb424_2181_b474_5de3,
        },
        Golden {
            name: "bloom-line-v1.seen",
            write: |path, keys| golden_bloom(Layout::Line, path, keys),
            answers: |path, keys| {
                let f = AtomicBloomFilter::load(path).unwrap();
                assert_eq!(
                    (f.layout(), f.capacity(), f.fpr()),
                    (Layout::Line, 1000, 0.01)
                );
                keys.iter().map(|k| f.contains(k)).collect()
            },
            positives: (1000, 150),
            digest: 0x84b3_2966_868d_9b9b,
        },
        Golden {
            name: "overwrite-map-v1.seen",
            write: |path, keys| {
                let map = OverwriteMap::with_buckets(4000).unwrap();
                keys.iter().for_each(|k| _ = map.insert(k));
                map.save(path).unwrap();
            },
            answers: |path, keys| {
                let map = OverwriteMap::load(path).unwrap();
                assert_eq!(map.buckets(), 4000);
                keys.iter().map(|k| map.contains(k)).collect()
            },
            positives: (885, 0),
            digest: 0x4f60_857b_eeac_f541,
        },
        Golden {
            name: "exact-overwrite-map-v1.seen",
            write: |path, keys| {
                let map = ExactOverwriteMap::with_buckets(2000).unwrap();
                keys.iter().for_each(|k| _ = map.insert(&golden_key(*k)));
                map.save(path).unwrap();
            },
            answers: |path, keys| {
                let map = ExactOverwriteMap::load(path).unwrap();
                assert_eq!(map.buckets(), 2000);
                keys.iter().map(|k| map.contains(&golden_key(*k))).collect()
            },
            positives: (768, 0),
            digest: 0xe8b5_4623_6532_8140,
        },
        Golden {
            name: "windowed-bloom-v1.seen",
            // Four hours of 250 keys each, rotated on the hour: the first hour's keys are
            // out of the 3-hour window, the other 750 in it.
            write: |path, keys| {
                let hour = Duration::from_secs(3600);
                let clock = ManualClock::new(golden_window_start());
                let f = WindowedBloomFilter::builder(1000)
                    .periods(2)
                    .rotate_every_aligned(hour)
                    .clock(clock.clone())
                    .build()
                    .unwrap();
                for (i, batch) in keys.chunks(250).enumerate() {
                    if i > 0 {
                        clock.advance(hour);
                        assert_eq!(f.maintain(), 1);
                    }
                    batch.iter().for_each(|k| _ = f.insert(k));
                }
                assert_eq!(f.generation(), 3);
                f.save(path).unwrap();
            },
            answers: |path, keys| {
                let f = WindowedBloomFilter::load(path).unwrap();
                let hour = Duration::from_secs(3600);
                assert_eq!(
                    (f.generation(), f.generations(), f.rotation()),
                    (3, 3, Rotation::EveryAligned(hour))
                );
                assert_eq!((f.capacity(), f.fpr()), (1000, 0.01));
                let answers = keys.iter().map(|k| f.contains(k)).collect();
                // The next rotation is at 04:00, as when saved.
                let four = golden_window_start() - hour / 2 + 4 * hour;
                let clock = ManualClock::new(four - Duration::from_nanos(1));
                let f = f.with_clock(clock.clone());
                assert_eq!(f.maintain(), 0);
                clock.set(four);
                assert_eq!((f.maintain(), f.generation()), (1, 4));
                answers
            },
            // The first hour's 250 keys forgotten, and one false positive: the window holds
            // a quarter of its capacity.
            positives: (750, 1),
            digest: 0x861f_935d_7b8f_9984,
        },
        Golden {
            // 9 generations in packed blocks: 10 slots in 10 words (two lines).
            name: "windowed-bloom-v1-g9.seen",
            write: |path, keys| golden_long_window(8, path, keys),
            answers: |path, keys| {
                let f = WindowedBloomFilter::load(path).unwrap();
                assert_eq!((f.generation(), f.generations()), (9, 9));
                assert_eq!(f.sizing().stride_words, 10);
                assert_eq!(f.memory_bytes(), 10 * f.sizing().generation.bytes());
                // Saved again, byte for byte the golden file (the packed layout is pinned).
                assert_eq!(window_bytes(&f), std::fs::read(path).unwrap());
                keys.iter().map(|k| f.contains(k)).collect()
            },
            // The last 9 periods' 900 keys and 1 false positive among the 100 forgotten; 194
            // of 20,000 others (1.0 %: the window holds its capacity).
            positives: (901, 194),
            digest: 0xbf05_c2f9_f7d8_64ef,
        },
        Golden {
            name: "growing-bloom-v1.seen",
            // 1,000 keys into layers of 100, 200, 400, 800 items (line layout, expansion 2,
            // tightening 0.8): four layers, the last part full.
            write: |path, keys| {
                let f = GrowingBloomFilter::builder(100)
                    .layout(Layout::Line)
                    .build()
                    .unwrap();
                keys.iter().for_each(|k| _ = f.insert(k).unwrap());
                assert_eq!(f.layers(), 4);
                f.save(path).unwrap();
            },
            answers: |path, keys| {
                let f = GrowingBloomFilter::load(path).unwrap();
                assert_eq!((f.layers(), f.capacity(), f.fpr()), (4, 100, 0.01));
                assert_eq!(
                    (
                        f.sizing().layout,
                        f.sizing().expansion,
                        f.sizing().tightening
                    ),
                    (Layout::Line, 2, 0.8)
                );
                let answers = keys.iter().map(|k| f.contains(k)).collect();
                // The loaded filter grows on: 600 more new items take a fifth layer.
                for k in common::keys(102, 600) {
                    f.insert(&k).unwrap();
                }
                assert_eq!(f.layers(), 5);
                answers
            },
            positives: (1000, 62),
            digest: 0xc5d6_de89_f8e7_c35d,
        },
    ]
}

/// The exact map's keys: bytes of varied lengths (8 to 24).
fn golden_key(k: u64) -> Vec<u8> {
    let mut key = k.to_le_bytes().repeat(3);
    key.truncate(8 + (k % 17) as usize);
    key
}

/// The golden files under `tests/data/`: each must load and answer the pinned keys exactly as
/// pinned. Set `SEEN_WRITE_GOLDEN=1` to write them (only when a format version is added: a v1
/// file, once committed, is never rewritten; a change that needs it is a breaking change). They
/// were rewritten once, before the first release, when the default hasher was renamed
/// `seen/xxh3-128/2`: only the header's name changed, and the answers stayed as pinned (the keys
/// are integers, which hash as before). The file of the old name is kept, see
/// `a_file_of_the_retired_default_hasher_is_refused_and_converts_by_trusting`.
#[test]
fn golden_files_load_and_answer_as_pinned() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let (inserted, others) = golden_keys();
    let all: Vec<u64> = inserted.iter().chain(&others).copied().collect();
    for golden in goldens() {
        let path = data.join(golden.name);
        let writing = std::env::var_os("SEEN_WRITE_GOLDEN").is_some();
        if writing {
            (golden.write)(&path, &inserted);
        }
        let answers = (golden.answers)(&path, &all);
        let (a, b) = answers.split_at(inserted.len());
        let positives = (
            a.iter().filter(|x| **x).count(),
            b.iter().filter(|x| **x).count(),
        );
        let bytes: Vec<u8> = answers.iter().map(|&x| u8::from(x)).collect();
        let digest = xxhash_rust::xxh3::xxh3_64(&bytes);
        println!(
            "{}: positives {positives:?}, digest {digest:#x}",
            golden.name
        );
        if writing {
            continue; // pin the printed values
        }
        assert_eq!(positives, golden.positives, "{}: positives", golden.name);
        assert_eq!(
            digest, golden.digest,
            "{}: the answers changed",
            golden.name
        );
    }
}

/// `bloom-word-v1-retired-hasher.seen` is `bloom-word-v1.seen` as written before the default
/// hasher was renamed (header name `seen/xxh3-128`, seed 0). Every default loader refuses it
/// with an error that names the old hasher and says how to convert; loading it trusting the
/// hasher gives the pinned answers (integer keys hash as before), and the saved copy carries the
/// new name and loads.
#[test]
fn a_file_of_the_retired_default_hasher_is_refused_and_converts_by_trusting() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let old = data.join("bloom-word-v1-retired-hasher.seen");
    let retired = seen::hash::HasherIdentity::new("seen/xxh3-128", 0);
    let bytes = std::fs::read(&old).unwrap();
    let refusals = [
        AtomicBloomFilter::load(&old).unwrap_err(),
        AtomicBloomFilter::read_from(&bytes[..]).unwrap_err(),
        AtomicBloomFilter::import_chunks(bytes.chunks(100)).unwrap_err(),
        AtomicBloomFilter::load_with_hasher(&old, StableHasher::new()).unwrap_err(),
        AtomicBloomFilter::read_from_with_hasher(&bytes[..], StableHasher::with_seed(3))
            .unwrap_err(),
    ];
    for error in refusals {
        assert_eq!(
            error,
            Error::RetiredHasher {
                file: retired.clone()
            }
        );
        let message = error.to_string();
        for part in [
            "\"seen/xxh3-128\" with seed 0",
            "read_from_trusting_hasher(input, StableHasher::with_seed(0))",
            "rebuilt",
        ] {
            assert!(message.contains(part), "{part:?} not in: {message}");
        }
    }
    // Another kind of structure asked for: that is the error, before the hasher.
    assert!(matches!(
        OverwriteMap::load(&old),
        Err(Error::WrongStructure { .. })
    ));

    let converted =
        AtomicBloomFilter::read_from_trusting_hasher(&bytes[..], StableHasher::with_seed(0))
            .unwrap();
    let (inserted, others) = golden_keys();
    let answers: Vec<u8> = inserted
        .iter()
        .chain(&others)
        .map(|k| u8::from(converted.contains(k)))
        .collect();
    let bloom_word = &goldens()[1];
    assert_eq!(bloom_word.name, "bloom-word-v1.seen");
    assert_eq!(xxhash_rust::xxh3::xxh3_64(&answers), bloom_word.digest);
    let new = scratch("retired").join("converted.seen");
    converted.save(&new).unwrap();
    assert_eq!(
        std::fs::read(&new).unwrap(),
        std::fs::read(data.join("bloom-word-v1.seen")).unwrap()
    );
    assert!(
        AtomicBloomFilter::load(&new)
            .unwrap()
            .contains(&inserted[0])
    );
}

/// A window file written before the record had a clock field (its bytes were reserved, 0)
/// loads with an unknown time base: the golden file, written then.
#[test]
fn a_window_file_from_before_the_clock_field_loads_with_an_unknown_time_base() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/windowed-bloom-v1.seen");
    let file = std::fs::read(&path).unwrap();
    assert_eq!(&file[112 + 20..112 + 24], &[0, 0, 0, 0]);
    let f = WindowedBloomFilter::load(&path).unwrap();
    assert_eq!(f.time_base(), TimeBase::Unknown);
    assert_eq!((f.generations(), f.periods()), (3, 2));
    // It stays unknown through `with_clock` and a save, until the program says otherwise.
    let f = f.with_clock(ManualClock::new(golden_window_start()));
    assert_eq!(f.time_base(), TimeBase::Unknown);
    let again = WindowedBloomFilter::read_from(&window_bytes(&f)[..]).unwrap();
    assert_eq!(again.time_base(), TimeBase::Unknown);
}

/// The window goldens of 8 generations (padded) and 9 (packed): periods of 100 keys each (the golden keys in
/// order), rotated by hand, 10 periods: generation 9, the first `10 - G` periods forgotten.
fn golden_long_window(periods: u32, path: &Path, keys: &[u64]) {
    let f = WindowedBloomFilter::builder(100)
        .periods(periods)
        .rotate_manually()
        .build()
        .unwrap();
    for (i, batch) in keys.chunks(100).enumerate() {
        if i > 0 {
            f.rotate();
        }
        batch.iter().for_each(|k| _ = f.insert(k));
    }
    assert_eq!(f.generation(), 9);
    f.save(path).unwrap();
}

/// The positives among the golden keys (inserted, then others) and the digest of every answer.
fn pinned_answers(f: &WindowedBloomFilter) -> ((usize, usize), u64) {
    let (inserted, others) = golden_keys();
    let answers: Vec<u8> = inserted
        .iter()
        .chain(&others)
        .map(|k| u8::from(f.contains(k)))
        .collect();
    let (a, b) = answers.split_at(inserted.len());
    let count = |x: &[u8]| x.iter().filter(|&&x| x == 1).count();
    ((count(a), count(b)), xxhash_rust::xxh3::xxh3_64(&answers))
}

/// `windowed-bloom-v1-g8-padded.seen`: 8 generations as every window of more than 7 was saved
/// before blocks of `G + 1` words, 9 slots padded to 16 words per block (written by
/// `golden_long_window(7, ..)` of that version). It loads, answers as pinned (the first 2
/// periods forgotten), keeps its shape, and saves byte for byte as it was.
#[test]
fn a_window_file_of_padded_blocks_loads_answers_as_pinned_and_saves_as_it_was() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/windowed-bloom-v1-g8-padded.seen");
    let f = WindowedBloomFilter::load(&path).unwrap();
    assert_eq!((f.generation(), f.generations()), (9, 8));
    assert_eq!(f.sizing().stride_words, 16);
    assert_eq!(f.memory_bytes(), 16 * f.sizing().generation.bytes());
    let (positives, digest) = pinned_answers(&f);
    println!("padded g8: positives {positives:?}, digest {digest:#x}");
    // 800 in the window and 1 false positive among the 200 forgotten; 167 among 20,000 others
    // (0.8 %: the window holds its capacity).
    assert_eq!(positives, (801, 167));
    assert_eq!(digest, 0x1f0c_a87e_ae24_0c5c);
    assert_eq!(window_bytes(&f), std::fs::read(&path).unwrap());
}
