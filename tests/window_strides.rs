//! Review of packed window blocks: every generation count round-trips, and a file re-laid in
//! every words-per-block value around the boundaries either loads and answers as the saved
//! filter did (and saves the same bytes) or is refused with a typed error, never a panic.

mod common;

use common::files::{resign, window_bytes};
use seen::{Corruption, Error, WindowedBloomFilter};

const H: usize = 112;

fn u32_at(file: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(file[at..at + 4].try_into().unwrap())
}
fn u64_at(file: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(file[at..at + 8].try_into().unwrap())
}

/// A filter of `g` generations rotated past a wrap of its slots, with keys in every live
/// generation; the keys inserted per generation.
fn filled(g: u32, per: usize) -> (WindowedBloomFilter, Vec<Vec<u64>>) {
    let f = WindowedBloomFilter::builder(per as u64)
        .periods(g - 1)
        .fpr(0.05)
        .rotate_manually()
        .build()
        .unwrap();
    let mut batches = Vec::new();
    for e in 0..(g as u64 + 3) {
        if e > 0 {
            assert_eq!(f.rotate(), Some(e));
        }
        let keys = common::keys(1000 + e, per);
        keys.iter().for_each(|k| _ = f.insert(k));
        batches.push(keys);
    }
    (f, batches)
}

/// The file `good` (one chunk) with its bits re-laid at `stride` words per block (slots past
/// the stride dropped, new ones zero), the record saying `record_stride` and the header's
/// payload length `payload` (or that of the new bits).
fn relaid(good: &[u8], stride: u64, record_stride: u32, payload: Option<u64>) -> Vec<u8> {
    assert_eq!(u32_at(good, 12) as usize, H);
    let blocks = u64_at(good, 48);
    let old = u64::from(u32_at(good, H + 4));
    let bits = &good[H + 64..good.len() - 8];
    assert_eq!(bits.len() as u64, blocks * old * 8);
    let mut file = good[..H].to_vec();
    let len = payload.unwrap_or(64 + blocks * stride * 8);
    file[56..64].copy_from_slice(&len.to_le_bytes());
    resign(&mut file);
    let mut record = good[H..H + 64].to_vec();
    record[4..8].copy_from_slice(&record_stride.to_le_bytes());
    file.extend_from_slice(&record);
    for b in 0..blocks {
        for s in 0..stride {
            let word = if s < old {
                u64_at(bits, 8 * (b * old + s) as usize)
            } else {
                0
            };
            file.extend_from_slice(&word.to_le_bytes());
        }
    }
    file.extend_from_slice(&[0; 8]);
    common::reseal(&mut file);
    file
}

fn same_answers(a: &WindowedBloomFilter, b: &WindowedBloomFilter, batches: &[Vec<u64>]) {
    for keys in batches {
        for k in keys {
            assert_eq!(a.contains(k), b.contains(k));
        }
    }
    for k in common::keys(77, 2000) {
        assert_eq!(a.contains(&k), b.contains(&k));
    }
}

#[test]
fn every_generation_count_round_trips_and_every_stride_loads_or_is_refused() {
    let mut loaded_strides = 0;
    for g in 1..=seen::sizing::MAX_GENERATIONS {
        let (f, batches) = filled(g, 3);
        let good = window_bytes(&f);
        let stride = f.sizing().stride_words;
        let slots = g + 1;
        assert_eq!(
            stride,
            if slots <= 8 {
                slots.next_power_of_two()
            } else {
                slots
            }
        );
        assert_eq!(
            f.memory_bytes(),
            u64::from(stride) * f.sizing().generation.bytes()
        );
        let loaded = WindowedBloomFilter::read_from(&good[..]).unwrap();
        assert_eq!(loaded.sizing(), f.sizing());
        same_answers(&f, &loaded, &batches);
        // Live keys: the last g generations.
        for keys in &batches[batches.len() - g as usize..] {
            assert!(keys.iter().all(|k| loaded.contains(k)), "g {g}");
        }
        assert_eq!(window_bytes(&loaded), good);
        let info = loaded.info();
        assert_eq!(info.bytes, loaded.memory_bytes());
        assert_eq!(info.layers, g);

        let padded = slots.next_power_of_two();
        let mut strides: Vec<u64> = vec![
            0, 1, 2, 3, 4, 5, 7, 8, 9, 10, 15, 16, 17, 31, 32, 33, 63, 64, 65, 128,
        ];
        strides.extend([slots - 1, slots, slots + 1, padded, padded * 2].map(u64::from));
        strides.sort_unstable();
        strides.dedup();
        for s in strides {
            // The record agrees with the payload.
            let file = relaid(&good, s, s as u32, None);
            let ok = s == u64::from(stride) || (s == u64::from(padded) && slots > 8);
            let result = WindowedBloomFilter::read_from(&file[..]);
            match result {
                Ok(l) => {
                    assert!(ok, "g {g} stride {s} loaded");
                    loaded_strides += 1;
                    assert_eq!(u64::from(l.sizing().stride_words), s);
                    assert_eq!(l.memory_bytes(), s * l.sizing().generation.bytes());
                    same_answers(&f, &l, &batches);
                    assert_eq!(window_bytes(&l), file, "g {g} stride {s} saves as loaded");
                    // A set bit in the spare, or in a padding word, of the last block: refused.
                    let blocks = u64_at(&file, 48);
                    let spare = (u64_at(&file, H + 8) + 1) % u64::from(slots);
                    for slot in [spare, u64::from(slots), s - 1] {
                        if slot >= s || (slot != spare && slot < u64::from(slots)) {
                            continue;
                        }
                        let mut bad = file.clone();
                        bad[H + 64 + 8 * ((blocks - 1) * s + slot) as usize] |= 0x80;
                        common::reseal(&mut bad);
                        let e = WindowedBloomFilter::read_from(&bad[..]).unwrap_err();
                        assert!(
                            matches!(e, Error::Corrupt(Corruption::Header(_))),
                            "g {g} stride {s} slot {slot}: {e:?}"
                        );
                    }
                    // Goes on: rotations across the slots keep answers as the original's.
                    let o = WindowedBloomFilter::read_from(&good[..]).unwrap();
                    for e in 0..(g as u64 + 2) {
                        let k = common::keys(5000 + e, 3);
                        o.rotate();
                        l.rotate();
                        for k in &k {
                            assert_eq!(o.insert(k), l.insert(k));
                        }
                        same_answers(&o, &l, &batches);
                    }
                }
                Err(e) => {
                    assert!(!ok, "g {g} stride {s} refused: {e:?}");
                    assert!(
                        matches!(e, Error::Corrupt(Corruption::Header(_))),
                        "g {g} stride {s}: {e:?}"
                    );
                }
            }
            // The record disagrees with the payload: refused.
            for r in [
                s + 1,
                s.saturating_sub(1),
                u64::from(stride),
                u64::from(padded),
            ] {
                if r == s {
                    continue;
                }
                let file = relaid(&good, s, r as u32, None);
                let e = WindowedBloomFilter::read_from(&file[..]).unwrap_err();
                assert!(
                    matches!(e, Error::Corrupt(Corruption::Header(_))),
                    "g {g} stride {s} record {r}: {e:?}"
                );
            }
        }
        // A payload length off the stride by a word, or by a few bytes.
        for extra in [8, 4, 1] {
            let blocks = u64_at(&good, 48);
            let len = 64 + blocks * u64::from(stride) * 8 + extra;
            let file = relaid(&good, u64::from(stride), stride, Some(len));
            let e = WindowedBloomFilter::read_from(&file[..]).unwrap_err();
            assert!(matches!(e, Error::Corrupt(_)), "g {g} +{extra}: {e:?}");
        }
        // Huge record strides.
        for r in [u32::MAX, 1 << 31, 65] {
            let file = relaid(&good, u64::from(stride), r, None);
            let e = WindowedBloomFilter::read_from(&file[..]).unwrap_err();
            assert!(matches!(e, Error::Corrupt(Corruption::Header(_))), "{e:?}");
        }
    }
    // Each g loads at its own stride, and g of 8 slots and more at the padded one too.
    assert_eq!(loaded_strides, 63 + (63 - 7) - 3);
}

/// One item per period, every generation count: an item in the last block (and the first) is
/// found through its whole window and forgotten after it, in the filter and in its loaded copy.
#[test]
fn one_item_per_period_and_the_last_block_through_the_window() {
    for g in 1..=seen::sizing::MAX_GENERATIONS {
        let Ok(f) = WindowedBloomFilter::builder(1)
            .periods(g - 1)
            .fpr(0.5)
            .rotate_manually()
            .build()
        else {
            continue;
        };
        let blocks = f.sizing().generation.blocks;
        assert_eq!(
            f.memory_bytes(),
            blocks * 8 * u64::from(f.sizing().stride_words)
        );
        let at = |block: u64, h2: u64| seen::hash::Hash128 {
            h1: ((u128::from(block) << 64).div_ceil(u128::from(blocks))) as u64,
            h2,
        };
        for e in 0..(3 * u64::from(g) + 2) {
            if e > 0 {
                f.rotate();
            }
            let (last, first) = (at(blocks - 1, e + 1), at(0, !e));
            f.insert_hash(last);
            f.insert_hash(first);
            let l = WindowedBloomFilter::read_from(&window_bytes(&f)[..]).unwrap();
            for back in 0..=e {
                let (last, first) = (at(blocks - 1, back + 1), at(0, !back));
                for w in [&f, &l] {
                    if e - back < u64::from(g) {
                        assert!(
                            w.contains_hash(last) && w.contains_hash(first),
                            "g {g} e {e}"
                        );
                    }
                    assert_eq!(w.contains_hash(last), f.contains_hash(last));
                    assert_eq!(w.contains_hash(first), f.contains_hash(first));
                }
            }
        }
    }
}

/// A packed window of several chunks (blocks of 10 words across the 1 MiB chunk boundaries)
/// saves and loads, from a path and from a stream, with the same answers and bytes.
#[test]
fn a_packed_window_of_several_chunks_round_trips() {
    let f = WindowedBloomFilter::builder(200_000)
        .periods(8)
        .rotate_manually()
        .build()
        .unwrap();
    assert_eq!(f.sizing().stride_words, 10);
    assert!(f.memory_bytes() > 3 << 20);
    let mut batches = Vec::new();
    for e in 0..12u64 {
        if e > 0 {
            f.rotate();
        }
        let keys = common::keys(900 + e, 20_000);
        keys.iter().for_each(|k| _ = f.insert(k));
        batches.push(keys);
    }
    let bytes = window_bytes(&f);
    let dir = common::files::scratch("packed-chunks");
    let path = dir.join("w.seen");
    f.save(&path).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
    for l in [
        WindowedBloomFilter::load(&path).unwrap(),
        WindowedBloomFilter::read_from(&bytes[..]).unwrap(),
    ] {
        assert_eq!(l.sizing(), f.sizing());
        same_answers(&f, &l, &batches);
        assert_eq!(window_bytes(&l), bytes);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
