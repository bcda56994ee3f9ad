//! Sizing of the [`WindowedBloomFilter`](crate::WindowedBloomFilter): `G` generations of a
//! word-layout filter side by side, one word of each per block, so that a lookup of every
//! generation reads one cache line. Derivation in
//! [the sizing notes](crate::docs::sizing#windowed-filters).

use super::{BlockedSizing, blocked, check_fpr, max_bits};
use crate::{Error, Layout};

/// The most generations a window may have: 63 live ones and the spare fill 64 words (8 lines)
/// per block.
pub const MAX_GENERATIONS: u32 = 63;

/// The size of a [`WindowedBloomFilter`](crate::WindowedBloomFilter): what [`window`] answers
/// and what the filter allocates (its `sizing()` returns this value).
///
/// Each block holds one 64-bit word per *slot*: the `generations` live ones and one spare (the
/// generation being cleared for the next rotation). The block is `stride_words` long: up to 8
/// slots (7 generations), the slots rounded up to a power of two, so that the block sits in one
/// cache line and a lookup of the whole window costs one cache miss; from 9 slots, exactly the
/// slots, with no padding (9 and 10 slots, 8 and 9 generations, read two lines, as a padded
/// block of 16 words would; see [`lines_per_lookup`](Self::lines_per_lookup)). A filter loaded
/// from a file written before blocks were packed keeps that file's padded blocks.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct WindowSizing {
    /// One generation: a word-layout filter for `items_per_period` items at
    /// [`generation_fpr`](Self::generation_fpr). Every generation has this size.
    pub generation: BlockedSizing,
    /// The number of live generations a lookup checks, `G`: the window's periods plus the
    /// current one.
    pub generations: u32,
    /// The words per block: `generations + 1` slots, rounded up to a power of two up to 8
    /// (one cache line); a filter loaded from an older file may have them rounded up above 8.
    pub stride_words: u32,
    /// The target false-positive rate of a lookup over the whole window, as asked for.
    pub fpr: f64,
    /// The rate each generation is sized for: `1 - (1 - fpr)^(1/G)`, so that `G` full
    /// generations together stay at or under `fpr`.
    pub generation_fpr: f64,
    /// The expected false-positive rate of a lookup when every generation holds
    /// `items_per_period` items: `1 - (1 - e)^G` for `e` the generation's expected rate, an
    /// upper bound (the sizing notes show why).
    pub expected_fpr: f64,
    /// The number of bits the filter allocates, spare and padding included.
    pub bits: u64,
}

impl WindowSizing {
    /// The size in bytes.
    pub const fn bytes(&self) -> u64 {
        self.bits / 8
    }

    /// The number of items each generation is sized for.
    pub const fn items_per_period(&self) -> u64 {
        self.generation.capacity
    }

    /// Slots per block: the live generations and the spare.
    pub const fn slots(&self) -> u32 {
        self.generations + 1
    }

    /// The most 64-byte cache lines one lookup of the whole window reads: 1 up to 7
    /// generations; a block of `S` words starts at a multiple of `gcd(S, 8)` words into a line,
    /// so at most `ceil((S + 8 - gcd(S, 8)) / 8)` (2 for 8 and 9 generations, 3 for 10).
    pub const fn lines_per_lookup(&self) -> u32 {
        let s = self.stride_words;
        // gcd(s, 8): the largest power of two up to 8 that divides s.
        let gcd = 1
            << (if s.trailing_zeros() < 3 {
                s.trailing_zeros()
            } else {
                3
            });
        (s + 8 - gcd).div_ceil(8)
    }

    /// Bits per item of the whole window when full (`generations · items_per_period` items).
    pub fn bits_per_item(&self) -> f64 {
        self.bits as f64 / (self.generation.capacity as f64 * f64::from(self.generations))
    }

    /// The number of blocks (each `stride_words` words).
    pub(crate) fn blocks(&self) -> u64 {
        self.generation.blocks
    }

    /// The number of 64-bit words.
    pub(crate) fn words(&self) -> usize {
        (self.bits / 64) as usize
    }
}

/// The size of a windowed filter of `generations` live generations of `items_per_period`
/// distinct items each, with a false-positive rate of at most `fpr` for a lookup over the
/// whole window when every generation is full. A window of `n` periods
/// ([`periods(n)`](crate::builder::BloomBuilder::periods)) has `n + 1` live generations: the
/// current one and `n` full ones.
///
/// Each generation is a [`Layout::Word`] filter sized by [`blocked`] for
/// `1 - (1 - fpr)^(1/G)` (about `fpr / G`); the memory is that of `G + 1` such filters (the
/// spare is cleared ahead of each rotation), plus padding of each block to a power of two words
/// when `G + 1` is 3 (to 4 words), 5, 6 or 7 (to 8, a cache line; see [`WindowSizing`]).
///
/// # Errors
///
/// [`Error::ZeroCapacity`]; [`Error::InvalidFpr`] for `fpr` outside (0, 1);
/// [`Error::InvalidParameter`] for `generations` outside 1 to [`MAX_GENERATIONS`];
/// [`Error::FprBelowLayoutLimit`] when one generation's rate falls below the word layout's
/// limit (6.4e-6: for 7 generations, a window rate below about 4.5e-5);
/// [`Error::TooLarge`] when the bits exceed this machine's address space.
///
/// # Examples
///
/// ```
/// use seen::sizing::window;
///
/// // The last 6 days and today, 10 million new items a day, 1% false positives over the
/// // whole window: `periods(6)`, 7 generations.
/// let w = window(10_000_000, 7, 0.01)?;
/// assert_eq!((w.stride_words, w.lines_per_lookup()), (8, 1)); // 7 days + the spare: one line
/// assert!(w.expected_fpr <= 0.01);
/// assert!(w.generation_fpr < 0.01 / 7.0 * 1.01);
/// assert_eq!(w.bytes(), 8 * w.generation.bytes());
/// # Ok::<(), seen::Error>(())
/// ```
pub fn window(items_per_period: u64, generations: u32, fpr: f64) -> Result<WindowSizing, Error> {
    check_fpr(fpr)?;
    if !(1..=MAX_GENERATIONS).contains(&generations) {
        return Err(Error::InvalidParameter(
            "generations must be between 1 and 63",
        ));
    }
    let generation_fpr = generation_fpr(fpr, generations);
    let generation =
        blocked(items_per_period, generation_fpr, Layout::Word).map_err(|e| match e {
            // Report the limit for the window, which is what the caller asked for.
            Error::FprBelowLayoutLimit {
                layout, min_fpr, ..
            } => Error::FprBelowLayoutLimit {
                layout,
                fpr,
                min_fpr: window_fpr(min_fpr, generations),
                use_layout: None,
            },
            other => other,
        })?;
    let stride_words = stride_words(generations);
    let bits = generation
        .bits
        .checked_mul(u64::from(stride_words))
        .filter(|&bits| bits <= max_bits())
        .ok_or(Error::TooLarge {
            what: "bits",
            requested: generation.bits as f64 * f64::from(stride_words),
            limit: max_bits(),
        })?;
    let expected_fpr = window_fpr(generation.expected_fpr, generations);
    Ok(WindowSizing {
        generation,
        generations,
        stride_words,
        fpr,
        generation_fpr,
        expected_fpr,
        bits,
    })
}

/// The words per block that [`window`] gives `generations`: the slots (`G + 1`) rounded up to
/// a power of two up to 8, so that the block is in one line; exactly the slots from 9 (a padded
/// block would take as many lines or more, and up to twice the memory).
pub(crate) const fn stride_words(generations: u32) -> u32 {
    let slots = generations + 1;
    if slots <= 8 {
        slots.next_power_of_two()
    } else {
        slots
    }
}

/// The rate each of `generations` generations is sized for, so that a lookup over all of them
/// meets `fpr`: `1 - (1 - fpr)^(1/G)`, without cancellation as `-expm1(ln(1 - fpr) / G)`.
pub(crate) fn generation_fpr(fpr: f64, generations: u32) -> f64 {
    -((-fpr).ln_1p() / f64::from(generations)).exp_m1()
}

/// The rate of a lookup over `generations` generations of rate `generation_fpr` each:
/// `1 - (1 - e)^G`, as `-expm1(G ln(1 - e))`.
pub(crate) fn window_fpr(generation_fpr: f64, generations: u32) -> f64 {
    -(f64::from(generations) * (-generation_fpr).ln_1p()).exp_m1()
}

#[cfg(all(test, not(seen_loom)))]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn one_line_up_to_seven_generations_then_packed_blocks() {
        for (g, stride, lines) in [
            (1, 2, 1),
            (3, 4, 1),
            (4, 8, 1),
            (7, 8, 1),
            (8, 9, 2),
            (9, 10, 2),
            (10, 11, 3),
            (11, 12, 2),
            (15, 16, 2),
            (24, 25, 4),
            (63, 64, 8),
        ] {
            let w = window(1000, g, 0.01).unwrap();
            assert_eq!(
                (w.stride_words, w.lines_per_lookup()),
                (stride, lines),
                "{g}"
            );
            assert_eq!(w.bits, w.generation.bits * u64::from(stride));
            assert_eq!(w.bits % 512, 0);
        }
    }

    /// `lines_per_lookup` is the most lines any block spans, counted block by block (block `b`
    /// starts at word `b × S` of a run that starts a line).
    #[test]
    fn lines_per_lookup_is_the_most_lines_a_block_spans() {
        for g in 1..=MAX_GENERATIONS {
            let w = window(1000, g, 0.5).unwrap();
            let s = u64::from(w.stride_words);
            let most = (0..8).map(|b| (b * s % 8 + s).div_ceil(8)).max().unwrap();
            assert_eq!(u64::from(w.lines_per_lookup()), most, "{g}");
        }
    }

    /// From 8 generations the window takes `(G + 1) / G` the memory of `G` separate word-layout
    /// filters at the same overall rate (each at the generation's rate): the spare, no padding.
    /// Below, at most twice (1 generation and its spare; 2 or 4 padded to a line).
    #[test]
    fn the_window_takes_the_memory_of_its_slots() {
        for items in [1000, 2_000_000, 10_000_000] {
            for fpr in [0.1, 0.01, 1e-3] {
                for g in 1..=MAX_GENERATIONS {
                    let Ok(w) = window(items, g, fpr) else {
                        continue;
                    };
                    let one = blocked(items, w.generation_fpr, Layout::Word).unwrap();
                    assert_eq!(w.generation, one);
                    let separate = f64::from(g) * one.bits as f64;
                    let ratio = w.bits as f64 / separate;
                    if g >= 8 {
                        assert_eq!(w.bits, u64::from(g + 1) * one.bits);
                        assert!(ratio <= 1.125);
                    } else {
                        assert!(ratio <= 2.0, "{g}: {ratio}");
                    }
                }
            }
        }
    }

    #[test]
    fn bad_parameters_are_errors() {
        assert_eq!(window(0, 7, 0.01).unwrap_err(), Error::ZeroCapacity);
        for g in [0, 64, u32::MAX] {
            assert!(matches!(
                window(10, g, 0.01),
                Err(Error::InvalidParameter(_))
            ));
        }
        for p in [0.0, 1.0, -0.5, f64::NAN, 2.0] {
            assert!(matches!(window(10, 7, p), Err(Error::InvalidFpr(_))), "{p}");
        }
        // The limit named is the window's: 1 - (1 - 6.4e-6)^7.
        match window(10, 7, 1e-5) {
            Err(Error::FprBelowLayoutLimit {
                fpr,
                min_fpr,
                use_layout: None,
                ..
            }) => {
                assert_eq!(fpr, 1e-5);
                assert!((min_fpr - 7.0 * 6.4e-6).abs() < 1e-9, "{min_fpr}");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            window(u64::MAX / 8, 63, 0.01),
            Err(Error::TooLarge { .. })
        ));
    }

    proptest! {
        /// Over the whole domain the window meets its target, each generation is sized for
        /// about `fpr / G` (never more), and a tighter target never gets fewer bits.
        #[test]
        fn the_window_meets_its_target_and_is_monotone(
            items in 1u64..=1_000_000_000_000,
            g in 1u32..=63,
            exp in 0.0f64..1.0,
        ) {
            // fpr from 0.5 down to near the word layout's limit times G (about 5e-4 for G = 63),
            // with room for the 0.9 times tighter target below.
            let lo = (7.5e-6 * f64::from(g)).ln();
            let fpr = (0.5f64.ln() + exp * (lo - 0.5f64.ln())).exp();
            let w = window(items, g, fpr).unwrap();
            prop_assert!(w.expected_fpr <= fpr, "{} > {fpr}", w.expected_fpr);
            // 1 - (1 - p)^(1/G) lies in [p/G, -ln(1 - p)/G]: never below the union bound's
            // share, so the window never costs more than G filters at p/G.
            let share = fpr / f64::from(g);
            prop_assert!(w.generation_fpr >= share * (1.0 - 1e-12));
            prop_assert!(w.generation_fpr <= -(-fpr).ln_1p() / f64::from(g) * (1.0 + 1e-12));
            let tighter = window(items, g, fpr * 0.9).unwrap();
            prop_assert!(tighter.bits >= w.bits);
            if g < 63 && fpr / f64::from(g + 1) >= 6.5e-6 {
                let longer = window(items, g + 1, fpr).unwrap();
                prop_assert!(longer.bits >= w.bits);
            }
        }
    }
}
