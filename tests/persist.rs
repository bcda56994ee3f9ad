//! Saving and loading: round trips, the hasher checks, crash-safe saves, golden files, saves
//! racing inserts, and every kind of bad file (a proptest that damages small files at random).

mod common;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use std::time::Duration;

use proptest::prelude::*;
use seen::builder::Rotation;
use seen::clock::{Clock, ManualClock, TimeBase};
use seen::hash::{ItemHasher, StableHasher};
use seen::{
    AtomicBloomFilter, Corruption, Error, ExactOverwriteMap, GrowingBloomFilter, Layout,
    OverwriteMap, SemiConcurrentBloomFilter, WindowedBloomFilter,
};

fn bloom(capacity: u64, fpr: f64, layout: Layout) -> AtomicBloomFilter {
    AtomicBloomFilter::builder(capacity)
        .fpr(fpr)
        .layout(layout)
        .build()
        .unwrap()
}

fn bytes_of(filter: &AtomicBloomFilter<impl ItemHasher>) -> Vec<u8> {
    let mut out = Vec::new();
    filter.write_to(&mut out).unwrap();
    out
}

/// A directory of this test's own, emptied.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("seen-persist-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

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
fn save_replaces_the_file_whole_and_leaves_no_temporary_file() {
    let dir = scratch("save");
    let path = dir.join("filter.seen");
    let first = bloom(10_000, 0.01, Layout::Word);
    first.insert("first");
    first.save(&path).unwrap();
    let second = bloom(20_000, 0.01, Layout::Line);
    second.insert("second");
    second.save(&path).unwrap();
    assert_eq!(files_in(&dir), ["filter.seen"]);
    let loaded = AtomicBloomFilter::load(&path).unwrap();
    assert_eq!(loaded.sizing(), second.sizing());
    assert!(loaded.contains("second"));
    assert_eq!(std::fs::read(&path).unwrap(), bytes_of(&second));

    // A relative path in the current directory works too (the parent is "").
    let relative = format!("seen-persist-relative-{}.seen", std::process::id());
    first.save(&relative).unwrap();
    assert!(
        AtomicBloomFilter::load(&relative)
            .unwrap()
            .contains("first")
    );
    std::fs::remove_file(&relative).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The temporary file's name must fit the file system's limit (255 bytes on the usual ones)
/// whenever the target's does: a 250-byte name, and a non-UTF-8 one that a lossy conversion
/// would triple, both save.
#[test]
fn save_takes_any_file_name_the_file_system_takes() {
    let dir = scratch("long-name");
    let filter = bloom(1000, 0.01, Layout::Word);
    filter.insert("a");
    let mut names = vec![std::ffi::OsString::from("n".repeat(250))];
    #[cfg(unix)]
    names.push(
        <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(&[0xff; 200]).to_os_string(),
    );
    for name in names {
        let path = dir.join(&name);
        filter.save(&path).unwrap();
        assert!(AtomicBloomFilter::load(&path).unwrap().contains("a"));
        std::fs::remove_file(&path).unwrap();
        assert!(files_in(&dir).is_empty());
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A path that is not a regular file (a named pipe: `load <(zcat filter.seen.gz)`) has no
/// length to check the header against (its metadata says 0): it is read as a stream, not
/// refused as truncated.
#[cfg(unix)]
#[test]
fn load_reads_a_named_pipe_as_a_stream() {
    let dir = scratch("fifo");
    let pipe = dir.join("pipe");
    let made = std::process::Command::new("mkfifo").arg(&pipe).status();
    if !made.is_ok_and(|s| s.success()) {
        return; // no mkfifo here: nothing to test
    }
    let filter = bloom(1000, 0.01, Layout::Line);
    filter.insert("a");
    for extra in [&[][..], &[0][..]] {
        let mut file = bytes_of(&filter);
        file.extend_from_slice(extra);
        let writer = {
            let pipe = pipe.clone();
            std::thread::spawn(move || std::fs::write(pipe, file))
        };
        let loaded = AtomicBloomFilter::load(&pipe);
        let _ = writer.join().unwrap(); // a broken pipe if the load stopped early
        if extra.is_empty() {
            assert!(loaded.unwrap().contains("a"));
        } else {
            assert_eq!(
                loaded.unwrap_err(),
                Error::Corrupt(Corruption::TrailingBytes)
            );
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn io_failures_are_errors_that_name_the_path() {
    let dir = scratch("io");
    let missing = dir.join("no-such-file.seen");
    match AtomicBloomFilter::load(&missing) {
        Err(Error::Io { kind, message }) => {
            assert_eq!(kind, std::io::ErrorKind::NotFound);
            assert!(message.contains("no-such-file.seen"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    let filter = bloom(1000, 0.01, Layout::Word);
    let nowhere = dir.join("no-such-dir").join("f.seen");
    match filter.save(&nowhere) {
        Err(Error::Io { message, .. }) => assert!(message.contains("no-such-dir"), "{message}"),
        other => panic!("{other:?}"),
    }
    // A directory is not a filter file.
    assert!(matches!(
        AtomicBloomFilter::load(&dir),
        Err(Error::Io { .. })
    ));
    // Nor can one be saved over: the rename fails after the whole file was written, and the
    // temporary file is removed.
    std::fs::create_dir(dir.join("taken")).unwrap();
    std::fs::write(dir.join("taken").join("inside"), b"x").unwrap();
    match filter.save(dir.join("taken")) {
        Err(Error::Io { message, .. }) => assert!(message.contains("taken"), "{message}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(files_in(&dir), ["taken"]);
    assert_eq!(files_in(&dir.join("taken")), ["inside"]);
    // A writer that fails midway: the error is returned, not a panic.
    struct Full(usize);
    impl std::io::Write for Full {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if self.0 < buf.len() {
                return Err(std::io::Error::new(std::io::ErrorKind::StorageFull, "full"));
            }
            self.0 -= buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let big = bloom(1_000_000, 0.01, Layout::Word);
    for room in [0, 100, 5000, 1 << 20] {
        assert!(matches!(big.write_to(Full(room)), Err(Error::Io { .. })));
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The header's fields as a test can rewrite them, re-signed with a valid checksum: a file made
/// to pass the checksum must still be refused for what it says.
fn resign(file: &mut [u8]) {
    let len = u32::from_le_bytes(file[12..16].try_into().unwrap()) as usize;
    let sum = xxhash_rust::xxh3::xxh3_64(&file[..len - 8]);
    file[len - 8..len].copy_from_slice(&sum.to_le_bytes());
}

fn put_u64(file: &mut [u8], at: usize, value: u64) {
    file[at..at + 8].copy_from_slice(&value.to_le_bytes());
    resign(file);
}

#[test]
fn crafted_headers_are_refused_for_what_they_say() {
    let filter = bloom(1000, 0.01, Layout::Word);
    filter.insert("a");
    let good = bytes_of(&filter);
    let dir = scratch("crafted");
    let load = |bytes: &[u8]| {
        let path = dir.join("f.seen");
        std::fs::write(&path, bytes).unwrap();
        AtomicBloomFilter::load(&path)
    };

    let mut future = good.clone();
    future[8..12].copy_from_slice(&2u32.to_le_bytes());
    resign(&mut future);
    assert_eq!(
        AtomicBloomFilter::read_from(&future[..]).unwrap_err(),
        Error::UnsupportedVersion {
            found: 2,
            supported: 1
        }
    );

    let mut magic = good.clone();
    magic[1] = b'S';
    assert_eq!(
        load(&magic).unwrap_err(),
        Error::Corrupt(Corruption::NotASeenFile)
    );

    // About 2^61 bytes of bits: the header is the sizing of a real filter (its fields agree,
    // its length fits a u64), the file is not, and nothing is allocated for the bits.
    let sizing = seen::sizing::blocked(1 << 60, 0.01, Layout::Word).unwrap();
    let mut huge = good.clone();
    huge[20..24].copy_from_slice(&sizing.hashes.to_le_bytes());
    put_u64(&mut huge, 24, sizing.capacity);
    put_u64(&mut huge, 40, sizing.expected_fpr.to_bits());
    put_u64(&mut huge, 48, sizing.blocks);
    put_u64(&mut huge, 56, sizing.bytes()); // payload bytes
    assert_eq!(
        load(&huge).unwrap_err(),
        Error::Corrupt(Corruption::Truncated)
    );
    // From a stream, whose length is unknown, the read fails when the bytes run out; it
    // allocates only as they arrive (this would abort or be killed otherwise).
    assert_eq!(
        AtomicBloomFilter::read_from(&huge[..]).unwrap_err(),
        Error::Corrupt(Corruption::Truncated)
    );

    // Sizes that disagree with each other.
    let mut odd_blocks = good.clone();
    put_u64(&mut odd_blocks, 48, 7);
    assert!(matches!(
        AtomicBloomFilter::read_from(&odd_blocks[..]),
        Err(Error::Corrupt(Corruption::Header(_)))
    ));
    let mut zero_capacity = good.clone();
    put_u64(&mut zero_capacity, 24, 0);
    assert!(matches!(
        load(&zero_capacity),
        Err(Error::Corrupt(Corruption::Header(_)))
    ));
    let mut nan = good.clone();
    put_u64(&mut nan, 32, f64::NAN.to_bits());
    assert!(matches!(
        load(&nan),
        Err(Error::Corrupt(Corruption::Header(_)))
    ));
    let mut kind = good.clone();
    kind[16] = 3;
    resign(&mut kind);
    assert!(matches!(load(&kind), Err(Error::WrongStructure { .. })));
    let mut trailing = good.clone();
    trailing.push(0);
    assert_eq!(
        load(&trailing).unwrap_err(),
        Error::Corrupt(Corruption::TrailingBytes)
    );
    // A stream holds more than one file: `read_from` reads exactly one.
    let mut two = good.clone();
    two.extend_from_slice(&good);
    let mut input = &two[..];
    assert!(
        AtomicBloomFilter::read_from(&mut input)
            .unwrap()
            .contains("a")
    );
    assert!(
        AtomicBloomFilter::read_from(&mut input)
            .unwrap()
            .contains("a")
    );
    assert!(input.is_empty());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// 2^55 lines of the line layout: the blocks and the payload length (2^61 bytes) agree and fit
/// a `u64`, but the bits (2^64) do not. Refused as too large, before the bits are counted (the
/// count overflowed: a panic in a debug build, a sizing of 0 bits in a release one).
#[test]
fn a_header_whose_bits_overflow_a_u64_is_refused() {
    let good = bytes_of(&bloom(1000, 0.01, Layout::Line));
    let mut huge = good[..good.len() - 64 - 8].to_vec();
    put_u64(&mut huge, 48, 1 << 55); // line blocks
    put_u64(&mut huge, 56, 1 << 61); // payload bytes
    huge.extend_from_slice(&[0; 100]);
    assert!(matches!(
        AtomicBloomFilter::read_from(&huge[..]),
        Err(Error::TooLarge { what: "bits", .. })
    ));
}

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

fn goldens() -> [Golden; 7] {
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

/// Two threads insert while a third saves and loads again and again: every key a writer had
/// published (Release, after its insert returned) before a save began is in that save. Checks
/// the last 1,000 keys published before each save (the ones racing it) and every 8th before
/// them, so that many saves run while the writers do: the writers hold their last key until
/// at least 3 saves are done, however busy the machine is.
#[test]
fn a_save_racing_two_writers_keeps_every_insert_that_happened_before_it() {
    const KEYS: usize = 2_000_000;
    for layout in [Layout::Word, Layout::Line] {
        let filter = &bloom(2 * KEYS as u64, 0.01, layout);
        let keys = [common::keys(10, KEYS), common::keys(11, KEYS)];
        let published = [AtomicU64::new(0), AtomicU64::new(0)];
        let saved = &AtomicU64::new(0);
        let (saves, lost) = std::thread::scope(|s| {
            for (keys, published) in keys.iter().zip(&published) {
                s.spawn(move || {
                    for (i, k) in keys.iter().enumerate() {
                        if i == KEYS - 1 {
                            while saved.load(Ordering::Acquire) < 3 {
                                std::thread::yield_now();
                            }
                        }
                        filter.insert(k);
                        published.store(i as u64 + 1, Ordering::Release);
                    }
                });
            }
            let saver = s.spawn(|| {
                let (mut saves, mut lost) = (0, 0usize);
                let mut file = Vec::new();
                loop {
                    let before = published
                        .each_ref()
                        .map(|p| p.load(Ordering::Acquire) as usize);
                    let finished = before.iter().all(|&n| n == KEYS);
                    file.clear();
                    filter.write_to(&mut file).unwrap();
                    let loaded = AtomicBloomFilter::read_from(&file[..]).unwrap();
                    for (keys, n) in keys.iter().zip(before) {
                        let recent = n.saturating_sub(1000);
                        let checked = keys[..recent].iter().step_by(8).chain(&keys[recent..n]);
                        lost += checked.filter(|k| !loaded.contains(*k)).count();
                    }
                    if finished {
                        return (saves, lost);
                    }
                    saves += 1;
                    saved.store(saves, Ordering::Release);
                }
            });
            saver.join().unwrap()
        });
        assert_eq!(lost, 0, "{layout:?}: keys lost over {saves} saves");
        assert!(
            saves >= 3,
            "{layout:?}: only {saves} saves ran while the writers did"
        );
    }
}

/// A small saved file of each structure, to damage, with a loader that reads a stream and
/// writes what it loaded back (or the error).
struct Small {
    name: &'static str,
    file: Vec<u8>,
    reload: fn(&mut &[u8]) -> Result<Vec<u8>, Error>,
}

fn rewrite<T>(
    loaded: Result<T, Error>,
    write: impl Fn(&T, &mut Vec<u8>),
) -> Result<Vec<u8>, Error> {
    loaded.map(|value| {
        let mut out = Vec::new();
        write(&value, &mut out);
        out
    })
}

fn small_files() -> Vec<Small> {
    let keys = common::keys(3, 300);
    let mut files = Vec::new();
    for (name, layout) in [("word", Layout::Word), ("line", Layout::Line)] {
        let filter = bloom(300, 0.01, layout);
        filter.insert_counting_new(&keys);
        files.push(Small {
            name,
            file: bytes_of(&filter),
            reload: |input| {
                rewrite(AtomicBloomFilter::read_from(input), |f, out| {
                    f.write_to(out).unwrap()
                })
            },
        });
    }
    let mut semi = SemiConcurrentBloomFilter::with_capacity(300, 0.01).unwrap();
    semi.extend(&keys[..200]);
    semi.compact();
    semi.extend(&keys[200..]);
    let mut file = Vec::new();
    semi.write_to(&mut file).unwrap();
    files.push(Small {
        name: "semi",
        file,
        reload: |input| {
            rewrite(SemiConcurrentBloomFilter::read_from(input), |f, out| {
                f.write_to(out).unwrap()
            })
        },
    });
    let mut map = OverwriteMap::with_buckets(200).unwrap();
    map.extend(&keys);
    let mut file = Vec::new();
    map.write_to(&mut file).unwrap();
    files.push(Small {
        name: "map",
        file,
        reload: |input| {
            rewrite(OverwriteMap::read_from(input), |m, out| {
                m.write_to(out).unwrap()
            })
        },
    });
    let exact = ExactOverwriteMap::with_buckets(200).unwrap();
    for k in &keys[..150] {
        exact.insert(&k.to_le_bytes()[..(k % 9) as usize]);
    }
    let mut file = Vec::new();
    exact.write_to(&mut file).unwrap();
    files.push(Small {
        name: "exact",
        file,
        reload: |input| {
            rewrite(ExactOverwriteMap::read_from(input), |m, out| {
                m.write_to(out).unwrap()
            })
        },
    });
    let growing = GrowingBloomFilter::builder(60).fpr(0.05).build().unwrap();
    keys.iter().for_each(|k| _ = growing.insert(k).unwrap());
    assert_eq!(growing.layers(), 3);
    let mut file = Vec::new();
    growing.write_to(&mut file).unwrap();
    files.push(Small {
        name: "growing",
        file,
        reload: |input| {
            rewrite(GrowingBloomFilter::read_from(input), |f, out| {
                f.write_to(out).unwrap()
            })
        },
    });
    files.push(Small {
        name: "windowed",
        file: small_window_file(&keys),
        reload: |input| {
            rewrite(WindowedBloomFilter::read_from(input), |f, out| {
                f.write_to(out).unwrap()
            })
        },
    });
    files
}

/// A small window that has rotated by count (2 generations, so its blocks have a padding
/// word besides the spare), part way into its third generation.
fn small_window_file(keys: &[u64]) -> Vec<u8> {
    let window = WindowedBloomFilter::builder(300)
        .periods(1)
        .rotate_after(120)
        .build()
        .unwrap();
    keys.iter().for_each(|k| _ = window.insert(k));
    assert_eq!(window.generation(), 2);
    assert_eq!(window.sizing().stride_words, 4);
    window_bytes(&window)
}

fn window_bytes<C: Clock>(filter: &WindowedBloomFilter<StableHasher, C>) -> Vec<u8> {
    let mut out = Vec::new();
    filter.write_to(&mut out).unwrap();
    out
}

#[derive(Clone, Debug)]
enum Damage {
    Flip { at: usize, bit: u8 },
    Truncate { to: usize },
    Overwrite { at: usize, bytes: Vec<u8> },
    Append { bytes: Vec<u8> },
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        (any::<usize>(), 0u8..8).prop_map(|(at, bit)| Damage::Flip { at, bit }),
        any::<usize>().prop_map(|to| Damage::Truncate { to }),
        (any::<usize>(), prop::collection::vec(any::<u8>(), 1..40))
            .prop_map(|(at, bytes)| Damage::Overwrite { at, bytes }),
        prop::collection::vec(any::<u8>(), 1..40).prop_map(|bytes| Damage::Append { bytes }),
    ]
}

fn apply(file: &[u8], damage: &Damage) -> Vec<u8> {
    let mut out = file.to_vec();
    match damage {
        Damage::Flip { at, bit } => out[at % file.len()] ^= 1 << bit,
        Damage::Truncate { to } => out.truncate(to % file.len()),
        Damage::Overwrite { at, bytes } => {
            let at = at % file.len();
            for (i, b) in bytes.iter().enumerate() {
                if let Some(slot) = out.get_mut(at + i) {
                    *slot = *b;
                }
            }
        }
        Damage::Append { bytes } => out.extend_from_slice(bytes),
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 10_000, ..ProptestConfig::default() })]

    /// Every damaged file of every structure is refused with a typed error, never a panic; the
    /// only damage that loads is damage that changed nothing (an overwrite with the same bytes)
    /// or bytes appended after the file, which a stream read leaves unread. Each case applies
    /// its damage to the file of each of the 7 files (6 structures, the Bloom filter in both
    /// layouts): 10,000 cases per file.
    #[test]
    fn damaged_files_are_refused_not_panicked_on(damage in damage()) {
        static FILES: std::sync::OnceLock<Vec<Small>> = std::sync::OnceLock::new();
        for small in FILES.get_or_init(small_files) {
            let bad = apply(&small.file, &damage);
            let mut input = &bad[..];
            match (small.reload)(&mut input) {
                Ok(rewritten) => {
                    // Unchanged bytes or an append: the same structure, the appended bytes
                    // unread.
                    prop_assert_eq!(
                        &bad[..small.file.len()], &small.file[..], "{} {:?}", small.name, damage
                    );
                    prop_assert_eq!(input.len(), bad.len() - small.file.len());
                    // (A semi-concurrent filter loads its pending hashes into its snapshot, so
                    // it writes back what a load of the undamaged file writes back.)
                    prop_assert_eq!(rewritten, (small.reload)(&mut &small.file[..]).unwrap());
                }
                Err(e) => prop_assert!(matches!(
                    e,
                    Error::Corrupt(_) | Error::UnsupportedVersion { .. }
                        | Error::WrongStructure { .. } | Error::HasherMismatch { .. }
                ), "{}: {:?}", small.name, e),
            }
        }
    }
}

/// The proptest above builds its files once per case; this checks the whole-file loader on
/// every truncation length of one file (each must fail, and say so).
#[test]
fn every_truncation_of_a_file_is_refused() {
    let dir = scratch("truncate");
    let path = dir.join("f.seen");
    for small in small_files() {
        let file = &small.file;
        for len in 0..file.len() {
            std::fs::write(&path, &file[..len]).unwrap();
            let err = match small.name {
                "word" | "line" => AtomicBloomFilter::load(&path).map(|_| ()),
                "semi" => SemiConcurrentBloomFilter::load(&path).map(|_| ()),
                "map" => OverwriteMap::load(&path).map(|_| ()),
                "exact" => ExactOverwriteMap::load(&path).map(|_| ()),
                "growing" => GrowingBloomFilter::load(&path).map(|_| ()),
                _ => WindowedBloomFilter::load(&path).map(|_| ()),
            }
            .unwrap_err();
            assert!(
                matches!(err, Error::Corrupt(_)),
                "{} {len}: {err:?}",
                small.name
            );
            let err = (small.reload)(&mut &file[..len]).unwrap_err();
            assert!(
                matches!(err, Error::Corrupt(_)),
                "{} {len}: {err:?}",
                small.name
            );
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
    // A reader that returns an error other than end-of-file: passed through as `Io`.
    struct Broken;
    impl Read for Broken {
        fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
            Err(std::io::Error::other("disk on fire"))
        }
    }
    assert!(matches!(
        AtomicBloomFilter::read_from(Broken),
        Err(Error::Io { .. })
    ));
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

/// Two threads insert into a map while a third saves: every key a writer published before a
/// save began is in the save, unless another key took its slot: then the live map no longer
/// holds it either, ever (each key is inserted once), which the test checks after the save.
#[test]
fn a_map_save_racing_two_writers_keeps_what_the_map_remembers() {
    let map = OverwriteMap::with_buckets(4_000_000).unwrap();
    let keys = [common::keys(30, 100_000), common::keys(31, 100_000)];
    let published = [AtomicU64::new(0), AtomicU64::new(0)];
    let lost = std::thread::scope(|s| {
        for (keys, published) in keys.iter().zip(&published) {
            let map = &map;
            s.spawn(move || {
                for (i, k) in keys.iter().enumerate() {
                    map.insert(k);
                    published.store(i as u64 + 1, Ordering::Release);
                }
            });
        }
        let mut lost = 0;
        let mut file = Vec::new();
        loop {
            let finished = published
                .iter()
                .all(|p| p.load(Ordering::Acquire) == 100_000);
            let before = published.each_ref().map(|p| p.load(Ordering::Acquire));
            file.clear();
            map.write_to(&mut file).unwrap();
            let loaded = OverwriteMap::read_from(&file[..]).unwrap();
            for (keys, n) in keys.iter().zip(before) {
                // A key missing from the save must be missing from the live map too: its slot
                // was overwritten before the save read it, and it never comes back.
                lost += keys[..n as usize]
                    .iter()
                    .filter(|k| !loaded.contains(*k) && map.contains(*k))
                    .count();
            }
            if finished {
                return lost;
            }
        }
    });
    assert_eq!(lost, 0);
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

/// Two threads insert into a semi-concurrent filter (which compacts as it goes, plus a thread
/// that compacts in a loop) while the test saves and loads again and again: every key published
/// before a save began is in it.
#[test]
fn a_semi_save_racing_writers_and_compactions_keeps_every_insert_before_it() {
    const KEYS: usize = 100_000;
    let filter = &SemiConcurrentBloomFilter::builder(2 * KEYS as u64)
        .insertions_before_compact(512)
        .build()
        .unwrap();
    let keys = [common::keys(50, KEYS), common::keys(51, KEYS)];
    let published = [AtomicU64::new(0), AtomicU64::new(0)];
    let saved = &AtomicU64::new(0);
    let (saves, lost) = std::thread::scope(|s| {
        for (keys, published) in keys.iter().zip(&published) {
            s.spawn(move || {
                for (i, k) in keys.iter().enumerate() {
                    // The writers hold their last key until 3 saves are done, however busy
                    // the machine is.
                    if i == KEYS - 1 {
                        while saved.load(Ordering::Acquire) < 3 {
                            std::thread::yield_now();
                        }
                    }
                    filter.insert(k);
                    published.store(i as u64 + 1, Ordering::Release);
                }
            });
        }
        let published = &published;
        s.spawn(move || {
            while published
                .iter()
                .any(|p| p.load(Ordering::Acquire) < KEYS as u64)
            {
                filter.compact();
            }
        });
        let (mut saves, mut lost) = (0, 0usize);
        let mut file = Vec::new();
        loop {
            let before = published
                .each_ref()
                .map(|p| p.load(Ordering::Acquire) as usize);
            let finished = before.iter().all(|&n| n == KEYS);
            file.clear();
            filter.write_to(&mut file).unwrap();
            let loaded = SemiConcurrentBloomFilter::read_from(&file[..]).unwrap();
            for (keys, n) in keys.iter().zip(before) {
                lost += keys[..n].iter().filter(|k| !loaded.contains(*k)).count();
            }
            if finished {
                return (saves, lost);
            }
            saves += 1;
            saved.store(saves, Ordering::Release);
        }
    });
    assert_eq!(lost, 0, "keys lost over {saves} saves");
    assert!(saves >= 3, "only {saves} saves ran while the writers did");
}

#[test]
fn shards_built_apart_merge_into_one_filter() {
    // Three workers build shards of one campaign; the shards travel as files; one union.
    let keys = common::keys(60, 300_000);
    let shards: Vec<Vec<u8>> = keys
        .chunks(100_000)
        .map(|part| {
            let shard = bloom(400_000, 0.01, Layout::Word);
            shard.insert_counting_new(part);
            bytes_of(&shard)
        })
        .collect();
    let merged = bloom(400_000, 0.01, Layout::Word);
    for file in &shards {
        merged
            .union(&AtomicBloomFilter::read_from(&file[..]).unwrap())
            .unwrap();
    }
    assert!(keys.iter().all(|k| merged.contains(k)));
    let estimate = merged.estimated_len() as f64;
    assert!((estimate - 300_000.0).abs() < 6_000.0, "{estimate}");
    // Overlapping sets count once.
    let again = bloom(400_000, 0.01, Layout::Word);
    again.insert_counting_new(&keys[..200_000]);
    merged.union(&again).unwrap();
    let estimate = merged.estimated_len() as f64;
    assert!((estimate - 300_000.0).abs() < 6_000.0, "{estimate}");
    let others = common::keys(61, 100_000);
    let fp = others.iter().filter(|k| merged.contains(*k)).count();
    assert!(
        fp < 1_000,
        "{fp} false positives of 100,000 at 3/4 of capacity"
    );
}

#[test]
fn merging_filters_that_place_items_differently_is_an_error() {
    let a = bloom(1000, 0.01, Layout::Word);
    a.insert("a");
    let before = bytes_of(&a);
    let incompatible = |other: &AtomicBloomFilter<_>| a.union(other).unwrap_err();
    assert_eq!(
        incompatible(&bloom(1000, 0.01, Layout::Line)),
        Error::Incompatible { what: "layout" }
    );
    assert_eq!(
        incompatible(&bloom(5000, 0.01, Layout::Word)),
        Error::Incompatible { what: "blocks" }
    );
    let seeded = AtomicBloomFilter::builder(1000)
        .hasher(StableHasher::with_seed(1))
        .build()
        .unwrap();
    assert_eq!(
        a.union(&AtomicBloomFilter::read_from(&bytes_of(&seeded)[..]).unwrap())
            .unwrap_err(),
        Error::Incompatible { what: "hasher" }
    );
    assert_eq!(bytes_of(&a), before, "a refused union changes nothing");
    // A hasher that cannot name itself cannot be checked: refused too.
    let random = std::hash::RandomState::new();
    let x = AtomicBloomFilter::builder(1000)
        .hasher(random.clone())
        .build()
        .unwrap();
    let y = AtomicBloomFilter::builder(1000)
        .hasher(random)
        .build()
        .unwrap();
    assert_eq!(
        x.union(&y).unwrap_err(),
        Error::Incompatible { what: "hasher" }
    );
}

#[test]
fn intersect_keeps_what_both_hold() {
    let keys = common::keys(70, 30_000);
    let mut a = bloom(100_000, 0.001, Layout::Line);
    let b = bloom(100_000, 0.001, Layout::Line);
    a.insert_counting_new(&keys[..20_000]);
    b.insert_counting_new(&keys[10_000..]);
    a.intersect(&b).unwrap();
    assert!(keys[10_000..20_000].iter().all(|k| a.contains(k)));
    let only_one = keys[..10_000].iter().chain(&keys[20_000..]);
    let reported = only_one.filter(|k| a.contains(*k)).count();
    assert!(
        reported < 200,
        "{reported} of 20,000 items of only one filter reported"
    );
}

/// A union racing inserts into both filters loses nothing: every key inserted into either
/// before the union began, and every key inserted into the target at any time, is found after.
#[test]
fn a_union_racing_inserts_into_both_filters_loses_nothing() {
    // Five rounds: one round catches a union that stores instead of ORing 2 times in 3.
    for round in 0..5u64 {
        const KEYS: usize = 1_000_000;
        // Small filters (about 1.5 MB): the unions sweep them many times while the writers run.
        let target = &bloom(KEYS as u64, 0.01, Layout::Word);
        let source = &bloom(KEYS as u64, 0.01, Layout::Word);
        let before = common::keys(80 + 10 * round, KEYS / 4);
        source.insert_counting_new(&before);
        let [into_target, into_source] = [
            common::keys(81 + 10 * round, KEYS / 2),
            common::keys(82 + 10 * round, KEYS / 4),
        ];
        let writing = AtomicU64::new(2);
        let merged = &AtomicU64::new(0);
        // Each writer holds its last key until a union is done, however busy the machine is.
        let write = |filter: &AtomicBloomFilter, keys: &[u64]| {
            let (last, rest) = keys.split_last().unwrap();
            rest.iter().for_each(|k| _ = filter.insert(k));
            while merged.load(Ordering::Acquire) < 1 {
                std::thread::yield_now();
            }
            filter.insert(last);
            writing.fetch_sub(1, Ordering::Release);
        };
        let unions = std::thread::scope(|s| {
            s.spawn(|| write(target, &into_target));
            s.spawn(|| write(source, &into_source));
            let mut unions = 0;
            while writing.load(Ordering::Acquire) > 0 {
                target.union(source).unwrap();
                unions += 1;
                merged.store(unions, Ordering::Release);
            }
            unions
        });
        assert!(
            unions >= 1,
            "only {unions} unions ran while the writers did"
        );
        assert!(before.iter().all(|k| target.contains(k)));
        assert!(into_target.iter().all(|k| target.contains(k)));
        target.union(source).unwrap();
        assert!(into_source.iter().all(|k| target.contains(k)));
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

/// A semi-concurrent filter's file whose count of pending hashes lies (one more or one less than
/// the payload holds, or 2^36, or so many that `P` overflows), re-signed so that only the count
/// is wrong: a typed error from `load` and from `read_from`, never a panic or a huge allocation.
#[test]
fn a_semi_file_whose_pending_count_lies_is_refused() {
    let mut filter = SemiConcurrentBloomFilter::builder(1000)
        .insertions_before_compact(1 << 20)
        .build()
        .unwrap();
    filter.extend(&common::keys(91, 50));
    let mut good = Vec::new();
    filter.write_to(&mut good).unwrap();
    let records = u64::from_le_bytes(good[64..72].try_into().unwrap());
    let payload = u64::from_le_bytes(good[56..64].try_into().unwrap());
    let bits = payload - 16 * records;
    let dir = scratch("semi-count");
    let path = dir.join("f.seen");
    for (r, p) in [
        (records + 1, payload + 16),
        (records - 1, payload - 16),
        (1 << 36, bits + (16 << 36)),
        (u64::MAX / 16, payload),
        (0, payload),
        (records, payload + 8),
    ] {
        let mut file = good.clone();
        put_u64(&mut file, 56, p);
        put_u64(&mut file, 64, r);
        std::fs::write(&path, &file).unwrap();
        for result in [
            SemiConcurrentBloomFilter::load(&path),
            SemiConcurrentBloomFilter::read_from(&file[..]),
        ] {
            assert!(
                matches!(result, Err(Error::Corrupt(_))),
                "records {r}, P {p}: {result:?}"
            );
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The period of the time-mode windows below.
const HOUR: Duration = Duration::from_secs(3600);

/// A window of 3 generations, 1,000 items each, on `clock`, rotated as `rotation` says.
fn window_on(
    rotation: Rotation,
    clock: &ManualClock,
) -> WindowedBloomFilter<StableHasher, ManualClock> {
    let builder = WindowedBloomFilter::builder(1000).periods(2);
    let builder = match rotation {
        Rotation::AfterInserts(n) => builder.rotate_after(n),
        Rotation::Every(p) => builder.rotate_every(p),
        Rotation::EveryAligned(p) => builder.rotate_every_aligned(p),
        _ => builder.rotate_manually(),
    };
    builder.clock(clock.clone()).build().unwrap()
}

/// A window saved in each rotation mode loads with the same bits, generation, rotation, count
/// and next rotation time: it answers as the saved one, writes the same bytes back, rotates
/// after the same number of new items (count mode) or at the same instant (time modes).
#[test]
fn a_loaded_window_keeps_its_answers_generation_and_schedule() {
    let start = Duration::from_secs(20_000 * 86_400 + 1234);
    let keys = common::keys(120, 1_500);
    let others = common::keys(121, 20_000);
    for rotation in [
        Rotation::AfterInserts(400),
        Rotation::Every(HOUR),
        Rotation::EveryAligned(HOUR),
        Rotation::Manual,
    ] {
        let clock = ManualClock::new(start);
        let f = window_on(rotation, &clock);
        // The first rotation time: an hour after the build, or the next full hour.
        let mut due = match rotation {
            Rotation::EveryAligned(_) => Duration::from_secs(20_000 * 86_400 + 3600),
            _ => start + HOUR,
        };
        // New items since the last rotation: the count a count-mode filter holds (every item
        // counts below 2,048 per generation).
        let mut counted = 0u64;
        for (i, batch) in keys.chunks(500).enumerate() {
            if i > 0 && !matches!(rotation, Rotation::AfterInserts(_)) {
                clock.set(due);
                due += HOUR;
                if matches!(rotation, Rotation::Manual) {
                    f.rotate().unwrap();
                } else {
                    assert_eq!(f.maintain(), 1, "{rotation:?}");
                }
            }
            for k in batch {
                let generation = f.generation();
                if f.insert(k) {
                    counted += 1;
                }
                if f.generation() != generation {
                    counted = 0;
                }
            }
        }
        assert!(f.generation() >= 2, "{rotation:?}");
        let file = window_bytes(&f);
        let mine = ManualClock::new(clock.now());
        let loaded = WindowedBloomFilter::read_from(&file[..])
            .unwrap()
            .with_clock(mine.clone());
        assert_eq!(
            (loaded.generation(), loaded.rotation(), loaded.sizing()),
            (f.generation(), f.rotation(), f.sizing()),
            "{rotation:?}"
        );
        for k in keys.iter().chain(&others) {
            assert_eq!(loaded.contains(k), f.contains(k), "{rotation:?}");
        }
        assert_eq!(window_bytes(&loaded), file, "{rotation:?}");
        let generation = loaded.generation();
        match rotation {
            Rotation::AfterInserts(n) => {
                // The count survived: the loaded filter rotates at the (n - counted)-th new
                // item (its spare is clear, so at once).
                assert!(counted < n);
                let mut new = 0;
                for k in common::keys(122, 1_000) {
                    new += u64::from(loaded.insert(&k));
                    if loaded.generation() != generation {
                        break;
                    }
                }
                assert_eq!(new, n - counted);
                assert_eq!(loaded.generation(), generation + 1);
            }
            Rotation::Every(_) | Rotation::EveryAligned(_) => {
                // The next rotation time survived, to the nanosecond.
                mine.set(due - Duration::from_nanos(1));
                assert_eq!(loaded.maintain(), 0, "{rotation:?}");
                mine.set(due);
                assert_eq!(loaded.maintain(), 1, "{rotation:?}");
                assert_eq!(loaded.generation(), generation + 1);
            }
            _ => {
                mine.set(due + 100 * HOUR);
                assert_eq!(loaded.maintain(), 0);
                assert!(loaded.rotate().is_some());
                assert_eq!(loaded.generation(), generation + 1);
            }
        }
    }
}

/// The spare is saved as zeros, and loaded as clear and ready: after one rotation, the loaded
/// window answers as the saved one does after its own (which clears its spare first). The
/// spare holds a generation of items, out of the window but not yet cleared, when saved.
#[test]
fn a_loaded_window_starts_its_next_generation_empty() {
    let clock = ManualClock::new(HOUR);
    let f = window_on(Rotation::Manual, &clock);
    let batches: Vec<Vec<u64>> = (0..4).map(|i| common::keys(130 + i, 500)).collect();
    for (i, batch) in batches.iter().enumerate() {
        if i > 0 {
            f.rotate().unwrap();
        }
        batch.iter().for_each(|k| _ = f.insert(k));
    }
    // Generation 4: the batches of generations 2 and 3 live (and 4, empty), the one of
    // generation 1 in the spare, out of the window.
    f.rotate().unwrap();
    assert_eq!(f.generation(), 4);
    let file = window_bytes(&f);
    let loaded = WindowedBloomFilter::read_from(&file[..]).unwrap();
    let found = |w: &dyn Fn(&u64) -> bool, batch: &[u64]| batch.iter().filter(|&&k| w(&k)).count();
    assert_eq!(
        found(&|k| loaded.contains(k), &batches[1]),
        found(&|k| f.contains(k), &batches[1])
    );
    loaded.rotate().unwrap();
    f.rotate().unwrap();
    assert_eq!((loaded.generation(), f.generation()), (5, 5));
    for batch in &batches {
        for k in batch {
            assert_eq!(loaded.contains(k), f.contains(k));
        }
    }
    // Only batch 3 is live now; batch 1, in the spare when saved, is not back.
    assert_eq!(found(&|k| loaded.contains(k), &batches[3]), 500);
    let stale = found(&|k| loaded.contains(k), &batches[1]);
    assert!(stale <= 10, "{stale} of 500 keys from the spare came back");
}

/// A time-mode window loaded after its next rotation time catches up at `maintain`: one period
/// late, it forgets its oldest generation; more than `G` periods late, everything; the next
/// rotation is then a period after the catch-up (aligned: the next boundary).
#[test]
fn a_window_loaded_late_forgets_what_the_missed_periods_forget() {
    let start = Duration::from_secs(20_000 * 86_400);
    let batches: Vec<Vec<u64>> = (0..3).map(|i| common::keys(140 + i, 300)).collect();
    for rotation in [Rotation::Every(HOUR), Rotation::EveryAligned(HOUR)] {
        let clock = ManualClock::new(start);
        let f = window_on(rotation, &clock);
        for (i, batch) in batches.iter().enumerate() {
            if i > 0 {
                clock.advance(HOUR);
                assert_eq!(f.maintain(), 1);
            }
            batch.iter().for_each(|k| _ = f.insert(k));
        }
        // Generation 2, the next rotation at 03:00: saved at 02:00.
        let file = window_bytes(&f);
        let load_at = |time: Duration| {
            let clock = ManualClock::new(time);
            let f = WindowedBloomFilter::read_from(&file[..])
                .unwrap()
                .with_clock(clock.clone());
            (f, clock)
        };
        let found = |f: &WindowedBloomFilter<_, _>, batch: &[u64]| {
            batch.iter().filter(|k| f.contains(*k)).count()
        };

        // An hour and a half later: one period missed.
        let (late, late_clock) = load_at(start + 2 * HOUR + 3 * HOUR / 2);
        assert_eq!(late.generation(), 2);
        assert_eq!(found(&late, &batches[0]), 300, "{rotation:?}");
        assert_eq!(late.maintain(), 1);
        assert_eq!(late.generation(), 3);
        // The first hour's keys are out; the two others in (a few false positives allowed:
        // the window's rate is 1% when full, and it holds 600 of 3,000).
        assert!(found(&late, &batches[0]) < 10, "{rotation:?}");
        assert_eq!(
            (found(&late, &batches[1]), found(&late, &batches[2])),
            (300, 300)
        );
        // The next rotation: a period after the late one ran (03:30 to 04:30), or, aligned,
        // at the next boundary (04:00).
        let next = |ran: Duration| match rotation {
            Rotation::Every(p) => ran + p,
            _ => HOUR * (ran.as_secs() / 3600 + 1) as u32,
        };
        let due = next(start + 2 * HOUR + 3 * HOUR / 2);
        late_clock.set(due - Duration::from_nanos(1));
        assert_eq!(late.maintain(), 0);
        late_clock.set(due);
        assert_eq!(late.maintain(), 1);

        // Ten and a half hours later: more than the window. `G` rotations, every generation
        // new and empty.
        let (stale, stale_clock) = load_at(start + 12 * HOUR + HOUR / 2);
        assert_eq!(stale.maintain(), 3, "{rotation:?}");
        assert_eq!(stale.generation(), 5);
        assert_eq!(batches.iter().map(|b| found(&stale, b)).sum::<usize>(), 0);
        // Ten periods passed (03:00 to 12:00): the next rotation is a period after 12:30
        // (aligned: 13:00).
        assert_eq!(stale.maintain(), 0);
        let due = next(start + 12 * HOUR + HOUR / 2);
        stale_clock.set(due - Duration::from_nanos(1));
        assert_eq!(stale.maintain(), 0);
        stale_clock.set(due);
        assert_eq!(stale.maintain(), 1);
    }
}

/// The window record's `clock` field (payload offset 20): each time base a filter records is
/// written as its number, loads back, and survives `with_clock` and a second save; a file of
/// any other number is refused.
#[test]
fn a_window_file_keeps_what_time_its_filter_rotated_by() {
    const R: usize = 112 + 20; // the record's clock field
    let day = Duration::from_secs(86_400);
    let manual = ManualClock::new(20_000 * day);
    let builder = || {
        WindowedBloomFilter::builder(1000)
            .periods(2)
            .rotate_every_aligned(day)
    };
    let cases: [(
        &str,
        WindowedBloomFilter<StableHasher, ManualClock>,
        TimeBase,
        u8,
    ); 5] = [
        (
            "the system clock",
            builder().build().unwrap().with_clock(manual.clone()),
            TimeBase::Wall,
            1,
        ),
        (
            "a manual clock",
            builder().clock(manual.clone()).build().unwrap(),
            TimeBase::Other,
            2,
        ),
        (
            "a manual clock marked as the wall clock",
            builder()
                .clock(manual.clone())
                .time_base(TimeBase::Wall)
                .build()
                .unwrap(),
            TimeBase::Wall,
            1,
        ),
        (
            "the system clock marked as another",
            builder()
                .time_base(TimeBase::Other)
                .build()
                .unwrap()
                .with_clock(manual.clone()),
            TimeBase::Other,
            2,
        ),
        (
            "a manual clock marked as unknown",
            builder()
                .clock(manual.clone())
                .build()
                .unwrap()
                .with_time_base(TimeBase::Unknown),
            TimeBase::Unknown,
            0,
        ),
    ];
    for (what, f, base, number) in cases {
        assert_eq!(f.time_base(), base, "{what}");
        f.insert("a");
        let file = window_bytes(&f);
        assert_eq!(&file[R..R + 4], &[number, 0, 0, 0], "{what}");
        // Loaded with the system clock, then given a manual one: the file's time base stays.
        let loaded = WindowedBloomFilter::read_from(&file[..]).unwrap();
        assert_eq!(loaded.time_base(), base, "{what}");
        let loaded = loaded.with_clock(manual.clone());
        assert_eq!(loaded.time_base(), base, "{what}");
        assert!(loaded.contains("a"));
        assert_eq!(window_bytes(&loaded), file, "{what}");
        // A program that goes on by the wall clock records it.
        let wall = loaded.with_time_base(TimeBase::Wall);
        assert_eq!(&window_bytes(&wall)[R..R + 4], &[1, 0, 0, 0], "{what}");
    }
    // No writer writes 3 or more: refused, naming the field.
    let mut file = window_bytes(&builder().clock(manual.clone()).build().unwrap());
    for number in [3u32, 255, u32::MAX] {
        file[R..R + 4].copy_from_slice(&number.to_le_bytes());
        common::reseal(&mut file);
        assert_eq!(
            WindowedBloomFilter::read_from(&file[..]).unwrap_err(),
            Error::Corrupt(Corruption::Header("unknown clock")),
            "clock {number}"
        );
    }
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

/// A file holds generation numbers below 2^63: a filter at 2^63 - 1 (loaded from a crafted
/// file; honestly reached, 292 years of a rotation every nanosecond) does not rotate past it,
/// by `rotate`, `maintain`, a count or the clock, so that what it saves loads again, with
/// everything it held.
#[test]
fn a_window_at_the_last_generation_rotates_no_more_and_saves_a_file_that_loads() {
    const LAST: u64 = (1 << 63) - 1;
    const R: usize = 112; // the window record
    let hour = Duration::from_secs(3600);
    let start = Duration::from_secs(20_000 * 86_400);
    let clock = ManualClock::new(start);
    let keys = common::keys(130, 300);
    for rotation in [
        Rotation::Manual,
        Rotation::AfterInserts(100),
        Rotation::Every(hour),
        Rotation::EveryAligned(hour),
    ] {
        clock.set(start);
        // 3 generations and the spare: generation 3, like 2^63 - 1, lives in slot 3.
        let f = window_on(rotation, &clock);
        for _ in 0..3 {
            f.rotate().unwrap();
        }
        keys[..50].iter().for_each(|k| _ = f.insert(k));
        let mut file = window_bytes(&f);
        file[R + 8..R + 16].copy_from_slice(&LAST.to_le_bytes());
        common::reseal(&mut file);
        let f = WindowedBloomFilter::read_from(&file[..])
            .unwrap()
            .with_clock(clock.clone());
        assert_eq!(f.generation(), LAST, "{rotation:?}");
        // Every way to rotate: none does.
        assert_eq!(f.rotate(), None, "{rotation:?}");
        keys.iter().for_each(|k| _ = f.insert(k)); // 250 more: past a count of 100
        clock.advance(10 * hour); // past the next rotation time
        keys.iter().for_each(|k| _ = f.insert(k));
        assert_eq!(f.maintain(), 0, "{rotation:?}");
        assert_eq!(f.rotate(), None, "{rotation:?}");
        assert_eq!(f.generation(), LAST, "{rotation:?}");
        // Saved, it loads, holding every key.
        let loaded = WindowedBloomFilter::read_from(&window_bytes(&f)[..]).unwrap();
        assert_eq!(loaded.generation(), LAST, "{rotation:?}");
        assert!(keys.iter().all(|k| loaded.contains(k)), "{rotation:?}");
    }
    // One generation earlier, the last rotation happens; the next does not.
    let f = window_on(Rotation::Manual, &clock);
    let mut file = window_bytes(&f);
    file[R + 8..R + 16].copy_from_slice(&(LAST - 1).to_le_bytes());
    common::reseal(&mut file);
    let f = WindowedBloomFilter::read_from(&file[..]).unwrap();
    assert_eq!((f.rotate(), f.rotate()), (Some(LAST), None));
    WindowedBloomFilter::read_from(&window_bytes(&f)[..]).unwrap();
}

/// A windowed filter's file whose header or window record says something impossible, re-signed
/// so that only that is wrong: each a typed error, from `load` and from `read_from`, before any
/// allocation of the size it names.
#[test]
fn crafted_window_files_are_refused_for_what_they_say() {
    // 2 generations: 4 words per block, slot 3 is padding; generation 1's spare is slot 2.
    let f = WindowedBloomFilter::builder(300)
        .periods(1)
        .rotate_manually()
        .build()
        .unwrap();
    common::keys(150, 200).iter().for_each(|k| _ = f.insert(k));
    f.rotate();
    common::keys(151, 200).iter().for_each(|k| _ = f.insert(k));
    let good = window_bytes(&f);
    const H: usize = 112;
    const R: usize = H; // the window record: the first 64 payload bytes
    let blocks = u64::from_le_bytes(good[48..56].try_into().unwrap()) as usize;
    assert_eq!(good.len(), H + 64 + blocks * 4 * 8 + 8);
    let dir = scratch("crafted-window");
    let path = dir.join("w.seen");
    let refused = |file: &[u8], what: &str| {
        std::fs::write(&path, file).unwrap();
        for result in [
            WindowedBloomFilter::load(&path).map(|_| ()),
            WindowedBloomFilter::read_from(file).map(|_| ()),
        ] {
            assert!(
                matches!(result, Err(Error::Corrupt(_) | Error::TooLarge { .. })),
                "{what}: {result:?}"
            );
        }
        // And a stream read names the field (the file's length is not checked first).
        WindowedBloomFilter::read_from(file).unwrap_err()
    };
    // The record's fields, each set to something no filter writes.
    let record_cases: [(&str, usize, &[u8]); 16] = [
        ("0 generations", 0, &0u32.to_le_bytes()),
        ("64 generations", 0, &64u32.to_le_bytes()),
        ("4 generations in 4 words", 0, &4u32.to_le_bytes()),
        ("8 words per block", 4, &8u32.to_le_bytes()),
        ("generation 2^63", 8, &(1u64 << 63).to_le_bytes()),
        ("rotation mode 0", 16, &0u32.to_le_bytes()),
        ("rotation mode 5", 16, &5u32.to_le_bytes()),
        ("clock 3", 20, &3u32.to_le_bytes()),
        ("a manual period", 24, &5u64.to_le_bytes()),
        ("a count of 0", 16, &1u32.to_le_bytes()),
        ("a period of 0", 16, &2u32.to_le_bytes()),
        ("a manual rotation time", 32, &7u64.to_le_bytes()),
        ("a manual count", 40, &3u64.to_le_bytes()),
        ("generation rate 0", 48, &0f64.to_bits().to_le_bytes()),
        ("generation rate NaN", 48, &f64::NAN.to_bits().to_le_bytes()),
        ("expected rate 2", 56, &2f64.to_bits().to_le_bytes()),
    ];
    for (what, at, bytes) in record_cases {
        let mut file = good.clone();
        file[R + at..R + at + bytes.len()].copy_from_slice(bytes);
        common::reseal(&mut file);
        let err = refused(&file, what);
        assert!(
            matches!(err, Error::Corrupt(Corruption::Header(_))),
            "{what}: {err:?}"
        );
    }
    // An aligned rotation whose next time is off its period.
    let mut file = good.clone();
    file[R + 16..R + 20].copy_from_slice(&3u32.to_le_bytes());
    file[R + 24..R + 32].copy_from_slice(&1000u64.to_le_bytes());
    file[R + 32..R + 40].copy_from_slice(&1500u64.to_le_bytes());
    common::reseal(&mut file);
    refused(&file, "aligned off its period");
    file[R + 32..R + 40].copy_from_slice(&2000u64.to_le_bytes());
    common::reseal(&mut file);
    let aligned = WindowedBloomFilter::read_from(&file[..]).unwrap();
    assert_eq!(
        aligned.rotation(),
        Rotation::EveryAligned(Duration::from_micros(1))
    );
    // A set bit in the spare (slot 2 of generation 1) or in the padding (slot 3): no filter
    // saves one.
    for (what, slot) in [("spare", 2), ("padding", 3)] {
        let mut file = good.clone();
        let word = R + 64 + 8 * (4 * (blocks / 2) + slot);
        file[word] |= 1;
        common::reseal(&mut file);
        let err = refused(&file, what);
        assert!(
            matches!(err, Error::Corrupt(Corruption::Header(_))),
            "{what}: {err:?}"
        );
    }
    // The header's fields.
    let payload = (64 + blocks * 32) as u64;
    for (what, at, value) in [
        ("7 blocks", 48, 7),
        ("0 blocks", 48, 0),
        ("1 record", 64, 1),
        ("payload 8 longer", 56, payload + 8),
        ("payload without the record", 56, payload - 64),
        ("payload of 3 words per block", 56, 64 + blocks as u64 * 24),
        (
            "payload of 128 words per block",
            56,
            64 + blocks as u64 * 1024,
        ),
        ("k 0", 20, 0),
        ("capacity 0", 24, 0),
    ] {
        let mut file = good.clone();
        if at == 20 {
            file[20..24].copy_from_slice(&(value as u32).to_le_bytes());
            resign(&mut file);
        } else {
            put_u64(&mut file, at, value);
        }
        let err = refused(&file, what);
        assert!(
            matches!(err, Error::Corrupt(Corruption::Header(_))),
            "{what}: {err:?}"
        );
    }
    for layout in [0u8, 2] {
        let mut file = good.clone();
        file[17] = layout;
        resign(&mut file);
        refused(&file, "layout");
    }
    // 2^60 bytes of bits, consistent with the blocks: refused from the file's length, and
    // from a stream when its bytes run out (allocating as they arrive); 2^66 bits, too large.
    let mut huge = good.clone();
    put_u64(&mut huge, 48, 1 << 55);
    put_u64(&mut huge, 56, 64 + (1 << 60));
    std::fs::write(&path, &huge).unwrap();
    assert_eq!(
        WindowedBloomFilter::load(&path).unwrap_err(),
        Error::Corrupt(Corruption::Truncated)
    );
    assert!(matches!(
        WindowedBloomFilter::read_from(&huge[..]),
        Err(Error::Corrupt(
            Corruption::Truncated | Corruption::ChunkChecksum { .. }
        ))
    ));
    put_u64(&mut huge, 48, 1 << 58);
    put_u64(&mut huge, 56, 64 + (1 << 63));
    assert!(matches!(
        WindowedBloomFilter::read_from(&huge[..]),
        Err(Error::TooLarge { what: "bits", .. })
    ));
    // Kinds are not interchangeable.
    assert!(matches!(
        AtomicBloomFilter::read_from(&good[..]),
        Err(Error::WrongStructure { .. })
    ));
    let atomic = bytes_of(&bloom(300, 0.01, Layout::Word));
    assert!(matches!(
        WindowedBloomFilter::read_from(&atomic[..]),
        Err(Error::WrongStructure { .. })
    ));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// What a writer of the window stress test recorded of each key before publishing it: the
/// generation before its insert, the one after, and whether the insert said "new". The insert's
/// generation `e` lies between the two.
struct Marks {
    before: Vec<AtomicU64>,
    after: Vec<AtomicU64>,
    new: Vec<AtomicU64>,
    published: AtomicU64,
}

impl Marks {
    fn new(n: usize) -> Self {
        let zeros = || (0..n).map(|_| AtomicU64::new(0)).collect();
        Self {
            before: zeros(),
            after: zeros(),
            new: zeros(),
            published: AtomicU64::new(0),
        }
    }

    /// The first of the `n` published keys whose mark `of` is at least `at` (marks grow with
    /// the keys: each writer reads the generation in order).
    fn first(&self, of: &[AtomicU64], n: usize, at: u64) -> usize {
        of[..n].partition_point(|m| m.load(Ordering::Relaxed) < at)
    }
}

/// Two threads insert into a window while a third rotates it as fast as it can (onto a new
/// generation as soon as a key is in the current one), and the test saves and loads it again
/// and again. In each save, every key published before the save began
/// (its insert returned before) whose insert said "new" and whose generation is still live at
/// the saved generation `E` (`e >= E - G + 1`) must be in the file; and after one more rotation
/// of the loaded filter, the keys whose generation left the window (`e <= E - G + 1`, the
/// generation the spare held when saved among them) must be gone, false positives aside.
#[test]
fn a_window_save_racing_writers_and_rotations_keeps_every_live_insert() {
    const KEYS: usize = 1_000_000;
    const G: u64 = 3;
    const PER_GENERATION: usize = 5_000;
    let filter = &WindowedBloomFilter::builder(4 * PER_GENERATION as u64)
        .periods(G as u32 - 1)
        .rotate_manually()
        .build()
        .unwrap();
    let keys = [common::keys(160, KEYS), common::keys(161, KEYS)];
    let marks = [Marks::new(KEYS), Marks::new(KEYS)];
    let done = AtomicU64::new(0);
    // The newest generation a writer has inserted into: the rotator leaves none empty, so
    // that the generation in the spare when a save begins holds keys to check.
    let filled = &AtomicU64::new(0);
    let saves_done = &AtomicU64::new(0);
    let (saves, checked, lost, gone, back, rotations) = std::thread::scope(|s| {
        for (keys, marks) in keys.iter().zip(&marks) {
            let done = &done;
            s.spawn(move || {
                let (mut current, mut here) = (u64::MAX, 0);
                for (i, k) in keys.iter().enumerate() {
                    // The writers hold their last key until 3 saves are done, however busy
                    // the machine is.
                    if i == KEYS - 1 {
                        while saves_done.load(Ordering::Acquire) < 3 {
                            std::thread::yield_now();
                        }
                    }
                    // At most a quarter of a generation's capacity per writer and generation,
                    // waiting for the rotator when it is descheduled: an overfull generation
                    // would answer "seen" to most keys, forgotten or not.
                    let mut before = filter.generation();
                    while before == current && here == PER_GENERATION {
                        std::thread::yield_now();
                        before = filter.generation();
                    }
                    if before != current {
                        (current, here) = (before, 0);
                    }
                    here += 1;
                    marks.before[i].store(before, Ordering::Relaxed);
                    let new = filter.insert(k);
                    marks.after[i].store(filter.generation(), Ordering::Relaxed);
                    marks.new[i].store(u64::from(new), Ordering::Relaxed);
                    marks.published.store(i as u64 + 1, Ordering::Release);
                    if here == 1 {
                        filled.fetch_max(before, Ordering::Relaxed);
                    }
                }
                done.fetch_add(1, Ordering::Release);
            });
        }
        let rotator = s.spawn(|| {
            let mut rotations = 0u64;
            while done.load(Ordering::Acquire) < 2 {
                if filled.load(Ordering::Relaxed) < filter.generation() {
                    std::hint::spin_loop();
                    continue;
                }
                rotations += u64::from(filter.rotate().is_some());
            }
            rotations
        });
        let (mut saves, mut checked, mut lost, mut gone, mut back) = (0, 0, 0, 0, 0);
        let mut file = Vec::new();
        loop {
            let finished = done.load(Ordering::Acquire) == 2;
            let before = marks
                .each_ref()
                .map(|m| m.published.load(Ordering::Acquire) as usize);
            file.clear();
            filter.write_to(&mut file).unwrap();
            let loaded = WindowedBloomFilter::read_from(&file[..]).unwrap();
            let saved = loaded.generation();
            for ((keys, marks), n) in keys.iter().zip(&marks).zip(before) {
                if n == 0 {
                    continue;
                }
                let last = marks.after[n - 1].load(Ordering::Relaxed);
                assert!(last <= saved, "a save older than an insert before it");
                let live = marks.first(&marks.before, n, (saved + 1).saturating_sub(G));
                for (i, k) in keys.iter().enumerate().take(n).skip(live) {
                    if marks.new[i].load(Ordering::Relaxed) == 1 {
                        checked += 1;
                        lost += usize::from(!loaded.contains(k));
                    }
                }
            }
            // One rotation: generation `saved + 1` starts in the slot of the spare.
            loaded.rotate().unwrap();
            for ((keys, marks), n) in keys.iter().zip(&marks).zip(before) {
                // Inserted in generations `saved - 2G` to `saved - G + 1` (the recent ones).
                let from = marks.first(&marks.before, n, saved.saturating_sub(2 * G));
                let to = marks.first(&marks.after, n, (saved + 2).saturating_sub(G));
                for (i, k) in keys.iter().enumerate().take(to).skip(from) {
                    if marks.new[i].load(Ordering::Relaxed) == 1 {
                        gone += 1;
                        back += usize::from(loaded.contains(k));
                    }
                }
            }
            if finished {
                let rotations = rotator.join().unwrap();
                return (saves, checked, lost, gone, back, rotations);
            }
            saves += 1;
            saves_done.store(saves, Ordering::Release);
        }
    });
    println!(
        "{saves} saves, {rotations} rotations: {lost} of {checked} live keys lost, \
         {back} of {gone} forgotten keys back"
    );
    assert_eq!(lost, 0, "live keys lost over {saves} saves");
    // A forgotten key is found only as a false positive (the window's rate is at most 1%),
    // or (rarely) when its insert was suspended for a whole window and wrote into a later one.
    assert!(
        back <= gone / 200 + 20,
        "{back} of {gone} forgotten keys came back"
    );
    assert!(saves >= 3, "only {saves} saves ran while the writers did");
    assert!(
        checked >= 1000 && gone >= 100,
        "too few keys checked: {checked} live, {gone} forgotten"
    );
}

/// A window's file, byte by byte as the format notes describe kind 5: the header's Bloom fields,
/// the window record, and the bits (a generation in its slot, the spare's words as zeros).
#[test]
fn window_files_are_laid_out_as_the_format_notes_say() {
    let u32_at = |file: &[u8], at: usize| u32::from_le_bytes(file[at..at + 4].try_into().unwrap());
    let u64_at = |file: &[u8], at: usize| u64::from_le_bytes(file[at..at + 8].try_into().unwrap());
    let f = WindowedBloomFilter::builder(1000)
        .periods(1)
        .rotate_manually()
        .build()
        .unwrap();
    let sizing = f.sizing();
    let blocks = sizing.generation.blocks;
    // The hash whose block is `block` (`(h1 × B) >> 64`).
    let at = |block: u64, h2: u64| seen::hash::Hash128 {
        h1: ((u128::from(block) << 64).div_ceil(u128::from(blocks))) as u64,
        h2,
    };
    // Generation 0 in slot 0, generation 1 in slot 1; at generation 2, slot 0 is the spare.
    assert!(f.insert_hash(at(5, 0x0123_4567_89ab_cdef)));
    f.rotate().unwrap();
    assert!(f.insert_hash(at(7, 0xfedc_ba98_7654_3210)));
    f.rotate().unwrap();
    let file = window_bytes(&f);
    const H: usize = 112;
    let payload = 64 + 8 * blocks * 4;
    assert_eq!((file[16], file[17]), (5, 1));
    assert_eq!(u32_at(&file, 20), sizing.generation.hashes);
    assert_eq!(u64_at(&file, 24), 1000);
    assert_eq!(u64_at(&file, 32), 0.01f64.to_bits());
    assert_eq!(u64_at(&file, 40), sizing.expected_fpr.to_bits());
    assert_eq!(u64_at(&file, 48), blocks);
    assert_eq!(u64_at(&file, 56), payload);
    assert_eq!(u64_at(&file, 64), 0);
    assert_eq!(file.len(), H + payload as usize + 8); // one chunk
    let r = |at: usize| H + at;
    assert_eq!((u32_at(&file, r(0)), u32_at(&file, r(4))), (2, 4));
    assert_eq!(u64_at(&file, r(8)), 2);
    // Manual rotation; built on the system clock: the wall clock.
    assert_eq!((u32_at(&file, r(16)), u32_at(&file, r(20))), (4, 1));
    assert_eq!(u64_at(&file, r(24)), 0);
    assert_eq!(u64_at(&file, r(32)), u64::MAX);
    assert_eq!(u64_at(&file, r(40)), 0);
    assert_eq!(u64_at(&file, r(48)), sizing.generation_fpr.to_bits());
    assert_eq!(
        u64_at(&file, r(56)),
        sizing.generation.expected_fpr.to_bits()
    );
    // One word set: block 7's slot 1 (generation 1). Block 5's slot 0, generation 0's word,
    // is the spare's: saved as zero (the filter itself has not cleared it yet).
    let words: Vec<u64> = (0..4 * blocks as usize)
        .map(|i| u64_at(&file, r(64 + 8 * i)))
        .collect();
    let set: Vec<usize> = (0..words.len()).filter(|&i| words[i] != 0).collect();
    assert_eq!(set, [7 * 4 + 1]);
    assert!(words[29].count_ones() <= sizing.generation.hashes);
    let loaded = WindowedBloomFilter::read_from(&file[..]).unwrap();
    assert!(loaded.contains_hash(at(7, 0xfedc_ba98_7654_3210)));
    assert!(!loaded.contains_hash(at(5, 0x0123_4567_89ab_cdef)));
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
