//! Damaged and crafted files are refused, never panicked on: a proptest that damages small
//! files of every kind at random, every truncation of a file, and headers re-signed to pass the
//! checksum that say something impossible (for the window and growing files, see
//! `window_files.rs` and `growing_files.rs`; field by field, `crafted_headers.rs`).

mod common;

use std::io::Read;

use common::files::{bloom, bytes_of, put_u64, resign, scratch, window_bytes};
use proptest::prelude::*;
use seen::{
    AtomicBloomFilter, Corruption, Error, ExactOverwriteMap, GrowingBloomFilter, Layout,
    OverwriteMap, SemiConcurrentBloomFilter, WindowedBloomFilter,
};

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
