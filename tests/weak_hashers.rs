//! Build hashers whose low bits follow the key's (FxHash 1.x, any multiplicative hash) and a std
//! `BuildHasher` on aligned keys: the growing filter still grows on schedule, and the window
//! still rotates on its count and clears its spare.
#![cfg(not(seen_loom))]

mod common;

use std::hash::{BuildHasher, Hasher};

use common::keys;
use seen::{GrowingBloomFilter, WindowedBloomFilter};

/// rustc-hash 1.x's `FxHasher` for one `u64` (`(0.rotl(5) ^ x) * K`, `finish` returns the
/// state): a popular `BuildHasher` that the crate accepts through its blanket `ItemHasher`
/// impl. Its high bits are well mixed (what `reduce` uses to pick a block); its low bits are
/// the key's low bits times an odd constant.
#[derive(Clone, Default)]
struct Fx1;

struct Fx1Hasher(u64);

impl Hasher for Fx1Hasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(5) ^ x).wrapping_mul(0x517c_c1b7_2722_0a95);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

impl BuildHasher for Fx1 {
    type Hasher = Fx1Hasher;

    fn build_hasher(&self) -> Fx1Hasher {
        Fx1Hasher(0)
    }
}

/// With a `BuildHasher` whose low bits follow the key's (FxHash 1.x, and any multiplicative hash)
/// and odd keys, the filter still grows on schedule. A count sampled on the raw `h1`'s low zero
/// bits (layers of 2^17 items and more) would count no item: the filter would never grow and
/// would silently fill far past its capacity, its false-positive rate going to 100%.
#[test]
fn a_build_hasher_with_weak_low_bits_must_still_grow_the_filter() {
    let c0 = 1u64 << 17;
    let f = GrowingBloomFilter::builder(c0)
        .fpr(0.01)
        .hasher(Fx1)
        .build()
        .unwrap();
    // The same keys through an AtomicBloomFilter with this hasher are fine (high bits pick the
    // block, a remix of h1 the bits); only the growing filter's count looks at the low bits.
    let items: Vec<u64> = keys(21, 8 * c0 as usize).iter().map(|k| k | 1).collect();
    for k in &items {
        f.insert(k).unwrap();
    }
    let info = f.info();
    assert!(
        f.layers() >= 4,
        "8 x c0 odd keys left the filter at {} layer(s): {info}",
        f.layers()
    );
    assert!(info.estimated_fpr <= 0.01, "{info}");
}

/// The other side of the same hazard: keys that are multiples of 2^s, which a count sampled on
/// the raw `h1`'s low bits would all sample, each as 2^s items, do not make the filter grow
/// 2^s times too early (memory, and every lookup checks the extra layers).
#[test]
fn aligned_keys_with_a_std_build_hasher_must_not_grow_the_filter_early() {
    let c0 = 1u64 << 20; // sample_shift 4: every 16th hash counts 16
    let f = GrowingBloomFilter::builder(c0)
        .fpr(0.01)
        .hasher(Fx1)
        .build()
        .unwrap();
    for k in keys(22, c0 as usize / 2) {
        f.insert(&(k << 4)).unwrap();
    }
    assert_eq!(f.layers(), 1, "c0/2 items grew the filter: {}", f.info());
}

/// Count mode rotates within a few percent of the count, with the default hasher and with a
/// hasher whose low bits are weak, keys 0, 8, 16, ... (all low bits of the key zero).
#[test]
fn windowed_count_mode_rotates_at_the_count_with_weak_low_bits() {
    for n in [1000u64, 50_000, 1_000_000] {
        for stride in [1u64, 8, 1 << 16] {
            let weak = WindowedBloomFilter::builder(n)
                .periods(3)
                .hasher(Fx1)
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
        .hasher(Fx1)
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
            .hasher(Fx1)
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
