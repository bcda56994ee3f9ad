//! What the Bloom filters share: the block layouts, their sized parameters (computed by
//! [`crate::sizing::blocked`]), and the probe positions.
//!
//! Every item is hashed once to a [`Hash128`](crate::hash::Hash128). `h1` picks a block by
//! multiply-shift (`(h1 · blocks) >> 64`: no `%`, uniform, correct for any number of blocks up to
//! 2^64); `h2` is cut into 6-bit (word) or 9-bit (line) fields that pick the `k` bit positions
//! in the block (with replacement: a fixed, branch-free number of draws); when the fields run out,
//! the next come from `remix(h2)`, `remix(remix(h2))`, ...

mod atomic;
mod frozen;
mod semi;

pub use atomic::{AtomicBloomFilter, AtomicBloomFilterBuilder};
pub use frozen::FrozenBloomFilter;
pub use semi::{CompactionStats, SemiConcurrentBloomFilter, SemiConcurrentBloomFilterBuilder};

use crate::Error;
use crate::bits::LINE_WORDS;
use crate::hash::remix;

/// Where an item's `k` bits live. All of them are in one block, so an operation touches one cache
/// line (one memory access) however large the filter is.
///
/// | layout | block | `insert` is | among racing inserts of one new item | bits per item at 1% |
/// |---|---|---|---|---|
/// | [`Word`](Layout::Word) | 64 bits | one `fetch_or` | **exactly one** gets `true` | see `docs/design.md` |
/// | [`Line`](Layout::Line) | 512 bits (a cache line) | up to 8 `fetch_or`s in one line | at least one gets `true` | fewer |
///
/// Blocking costs false-positive rate at equal memory (items cluster unevenly over blocks), and the
/// smaller the block the more: every constructor sizes the filter so that the rate at capacity
/// still meets the target, so [`Word`](Layout::Word) spends more bits than [`Line`](Layout::Line)
/// for the same target ([`sizing::blocked`](crate::sizing::blocked) tells how many). Below
/// 6.4e-6 (`Word`) or 4.7e-15 (`Line`) a layout would need more than 4 times the bits of a
/// classic Bloom filter, and the constructors refuse the target with
/// [`Error::FprBelowLayoutLimit`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Layout {
    /// All `k` bits in one 64-bit word: `insert` is a single atomic read-modify-write, so it is
    /// linearizable and an exactly-once gate. The default.
    #[default]
    Word,
    /// All `k` bits in one 512-bit cache line: a better false-positive rate per bit, but `insert`
    /// sets up to 8 words one after the other, so racing inserters of the same new item may both
    /// be told it is new.
    Line,
}

impl Layout {
    /// The block size in bits.
    ///
    /// ```
    /// use seen::Layout;
    /// assert_eq!((Layout::Word.block_bits(), Layout::Line.block_bits()), (64, 512));
    /// assert_eq!(Layout::default(), Layout::Word);
    /// ```
    pub const fn block_bits(self) -> u32 {
        match self {
            Self::Word => 64,
            Self::Line => 512,
        }
    }
}

/// A sized blocked filter: its layout, `k`, and how many blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Params {
    pub(crate) layout: Layout,
    pub(crate) hashes: u32,
    /// Number of blocks (words for `Word`, lines for `Line`); always whole cache lines of words.
    pub(crate) blocks: u64,
}

impl Params {
    /// The smallest filter of this layout whose expected false-positive rate after `capacity`
    /// items meets `fpr`, with the `k` that needs the fewest blocks: [`crate::sizing::blocked`].
    pub(crate) fn for_capacity(capacity: u64, fpr: f64, layout: Layout) -> Result<Self, Error> {
        let sizing = crate::sizing::blocked(capacity, fpr, layout)?;
        Ok(Self {
            layout,
            hashes: sizing.hashes,
            blocks: sizing.bits / u64::from(layout.block_bits()),
        })
    }

    /// The number of cache lines the bits take.
    pub(crate) fn lines(&self) -> usize {
        match self.layout {
            Layout::Word => (self.blocks / LINE_WORDS as u64) as usize,
            Layout::Line => self.blocks as usize,
        }
    }

    /// The number of bits.
    pub(crate) fn bits(&self) -> u64 {
        self.blocks * u64::from(self.layout.block_bits())
    }

    /// The block that `h1` selects, by multiply-shift.
    #[inline]
    pub(crate) fn block(&self, h1: u64) -> usize {
        crate::hash::reduce(h1, self.blocks) as usize
    }
}

/// The word layout's mask: `k` bit positions drawn from `h2` as 6-bit fields, lowest first
/// (then from `remix(h2)`, `remix(remix(h2))`, ... after 10 fields). Positions may repeat: a
/// fixed number of draws keeps the loop branch-free, and the sizing model (`src/sizing/blocked.rs`)
/// counts the repeats.
#[inline]
pub(crate) fn word_mask(h2: u64, k: u32) -> u64 {
    let (mut state, mut left, mut mask) = (h2, k, 0u64);
    loop {
        let mut x = state;
        for _ in 0..left.min(10) {
            mask |= 1u64 << (x & 63);
            x >>= 6;
        }
        left = left.saturating_sub(10);
        if left == 0 {
            return mask;
        }
        state = remix(state);
    }
}

/// The line layout's masks, one per word: `k` positions drawn from `h2` as 9-bit fields (7 per
/// 64 bits, then from `remix(h2)`, ...). Positions may repeat, as in [`word_mask`].
#[inline]
pub(crate) fn line_masks(h2: u64, k: u32) -> [u64; LINE_WORDS] {
    let (mut state, mut left) = (h2, k);
    let mut masks = [0u64; LINE_WORDS];
    loop {
        let mut x = state;
        for _ in 0..left.min(7) {
            let pos = (x & 511) as usize;
            masks[pos >> 6] |= 1u64 << (pos & 63);
            x >>= 9;
        }
        left = left.saturating_sub(7);
        if left == 0 {
            return masks;
        }
        state = remix(state);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn masks_have_at_most_k_bits_and_usually_k() {
        let mut total = [0u64; 2];
        for h in (0..2000u64).map(remix) {
            for k in 1..=20 {
                let word = word_mask(h, k).count_ones();
                let line: u32 = line_masks(h, k).iter().map(|m| m.count_ones()).sum();
                assert!((1..=k).contains(&word) && (1..=k).contains(&line));
                total[0] += u64::from(word);
                total[1] += u64::from(line);
            }
        }
        // Expected distinct positions: B (1 - (1 - 1/B)^k), summed over k = 1..=20, 2000 times.
        for (got, b) in total.iter().zip([64.0f64, 512.0]) {
            let want: f64 = (1..=20)
                .map(|k| b * (1.0 - (1.0 - 1.0 / b).powi(k)))
                .sum::<f64>()
                * 2000.0;
            assert!((*got as f64 / want - 1.0).abs() < 0.01, "{got} vs {want}");
        }
    }

    #[test]
    fn masks_of_the_first_fields_are_the_documented_positions() {
        // h2 = fields 5, 1, 63 (6-bit, lowest first): bits 5, 1, 63. Part of the persisted format.
        let h2 = 5 | 1 << 6 | 63 << 12;
        assert_eq!(word_mask(h2, 3), 1 << 5 | 1 << 1 | 1 << 63);
        // 9-bit fields 70 (word 1, bit 6) and 511 (word 7, bit 63).
        let masks = line_masks(70 | 511 << 9, 2);
        assert_eq!(masks, [0, 1 << 6, 0, 0, 0, 0, 0, 1 << 63]);
    }

    #[test]
    fn block_selection_covers_the_range_without_modulo_bias() {
        let p = Params {
            layout: Layout::Word,
            hashes: 7,
            blocks: 3 << 40, // past 2^32 blocks
        };
        assert_eq!(p.block(0), 0);
        assert_eq!(p.block(u64::MAX), (3 << 40) - 1);
        assert_eq!(p.block(1 << 63), 3 << 39);
        let small = Params { blocks: 10, ..p };
        let mut counts = [0u32; 10];
        for h in (0..100_000u64).map(remix) {
            counts[small.block(h)] += 1;
        }
        assert!(
            counts.iter().all(|&c| (9_500..10_500).contains(&c)),
            "{counts:?}"
        );
    }

    #[test]
    fn params_are_the_blocked_sizing_and_blocking_costs_bits() {
        for fpr in [0.1, 0.01, 0.001] {
            let classic = crate::sizing::BloomSizing::optimal(1_000_000, fpr).unwrap();
            let mut bits = [0; 2];
            for (i, layout) in [Layout::Word, Layout::Line].into_iter().enumerate() {
                let p = Params::for_capacity(1_000_000, fpr, layout).unwrap();
                let s = crate::sizing::blocked(1_000_000, fpr, layout).unwrap();
                assert_eq!((p.bits(), p.hashes, p.layout), (s.bits, s.hashes, layout));
                assert_eq!(p.lines() as u64 * 512, p.bits());
                assert!(s.expected_fpr <= 0.97 * fpr, "{layout:?} {fpr}");
                assert!(p.bits() > classic.bits, "{layout:?} {fpr}");
                bits[i] = p.bits();
            }
            assert!(bits[0] >= bits[1], "{fpr}: the word layout costs more");
        }
    }

    #[test]
    fn params_reject_what_the_sizing_rejects() {
        assert_eq!(
            Params::for_capacity(0, 0.01, Layout::Word),
            Err(Error::ZeroCapacity)
        );
        assert!(matches!(
            Params::for_capacity(10, 1.5, Layout::Line),
            Err(Error::InvalidFpr(_))
        ));
        assert!(matches!(
            Params::for_capacity(10, 1e-6, Layout::Word),
            Err(Error::FprBelowLayoutLimit {
                use_layout: Some(Layout::Line),
                ..
            })
        ));
        assert!(matches!(
            Params::for_capacity(u64::MAX / 4, 0.01, Layout::Word),
            Err(Error::TooLarge { .. })
        ));
    }
}
