//! What the Bloom filters share: the block layouts, their sizing, and the probe positions.
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
/// for the same target.
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

    /// Largest `k` the sizing considers (far above any optimum: the search stops at the best).
    const fn max_hashes(self) -> u32 {
        match self {
            Self::Word => 32,
            Self::Line => 64,
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
    /// items is at most `fpr` (by [`block_fpr`]), with the `k` that needs the fewest blocks.
    pub(crate) fn for_capacity(capacity: u64, fpr: f64, layout: Layout) -> Result<Self, Error> {
        // Validates the arguments and fails early for absurd sizes.
        crate::sizing::BloomSizing::optimal(capacity, fpr)?;
        let mut best: Option<(f64, u32)> = None;
        for k in 1..=layout.max_hashes() {
            let lambda = max_items_per_block(k, layout, fpr * SIZING_MARGIN);
            match best {
                Some((best_lambda, _)) if lambda <= best_lambda => {
                    if lambda < best_lambda * 0.98 {
                        break; // past the optimum, and the curve is unimodal in k
                    }
                }
                _ => best = Some((lambda, k)),
            }
        }
        let (lambda, hashes) = best.filter(|(l, _)| *l > 0.0).ok_or(Error::TooLarge {
            what: "bits",
            requested: f64::INFINITY,
            limit: u64::MAX,
        })?;
        let blocks = (capacity as f64 / lambda).ceil().max(1.0);
        let per_line = match layout {
            Layout::Word => LINE_WORDS as f64,
            Layout::Line => 1.0,
        };
        let lines = (blocks / per_line).ceil();
        let max_lines = (isize::MAX as u64 / 64).min(usize::MAX as u64) as f64;
        if lines > max_lines {
            return Err(Error::TooLarge {
                what: "bits",
                requested: lines * 512.0,
                limit: (max_lines as u64).saturating_mul(512),
            });
        }
        Ok(Self {
            layout,
            hashes,
            blocks: (lines * per_line) as u64,
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
        ((u128::from(h1) * u128::from(self.blocks)) >> 64) as usize
    }
}

/// The filters are sized for `fpr · SIZING_MARGIN`, so that the rate measured on a finite sample
/// stays at or below `fpr`: see `docs/design.md` for the statistics.
const SIZING_MARGIN: f64 = 0.97;

/// The expected false-positive rate of a filter of this layout with `lambda` items per block on
/// average and `k` distinct bits per item.
///
/// Items fall into blocks as a Poisson process, so a query's block holds `j` items with
/// probability `e^{-λ} λ^j / j!`; the rate is `Σ_j P(j) · F(j)` with `F(j)` from [`load_fpr_table`].
#[cfg(all(test, not(loom)))]
pub(crate) fn expected_fpr(lambda: f64, k: u32, layout: Layout) -> f64 {
    poisson_mix(lambda, &load_fpr_table(k, layout, poisson_terms(lambda)))
}

/// How many terms of the Poisson sum matter for mean `lambda` (12 standard deviations past it).
fn poisson_terms(lambda: f64) -> usize {
    (lambda + 12.0 * lambda.sqrt() + 30.0).ceil() as usize
}

/// `Σ_j P(j) · table[j]` for `j ~ Poisson(lambda)`.
fn poisson_mix(lambda: f64, table: &[f64]) -> f64 {
    let mut sum = 0.0;
    if lambda < 700.0 {
        // P(j + 1) = P(j) · λ / (j + 1), from P(0) = e^{-λ} (which does not underflow here).
        let mut pmf = (-lambda).exp();
        for (j, fpr) in table.iter().enumerate() {
            sum += pmf * fpr;
            pmf *= lambda / (j + 1) as f64;
        }
    } else {
        let mut log_pmf = -lambda;
        for (j, fpr) in table.iter().enumerate() {
            sum += log_pmf.exp() * fpr;
            log_pmf += (lambda / (j + 1) as f64).ln();
        }
    }
    sum
}

/// `F(j)` for `j = 0..len`: the probability that a query is a false positive in a block of
/// `B` bits holding `j` items, when every item (and the query) draws `k` uniform positions with
/// replacement. Exact, with no independence approximation:
///
/// - the query's draws hit `d` distinct positions with probability `P(d)` (an occupancy chain:
///   a draw lands on a new position with probability `(B - d) / B`);
/// - `d` given positions are all among the `j·k` draws of the block's items with probability
///   `Σ_{i=0..d} (-1)^i C(d, i) (1 - i/B)^{jk}` (inclusion-exclusion over the positions missed);
///
/// so `F(j) = Σ_i c_i r_i^j` with `r_i = (1 - i/B)^k` and `c_i = (-1)^i Σ_{d>=i} P(d) C(d, i)`.
fn load_fpr_table(k: u32, layout: Layout, len: usize) -> Vec<f64> {
    let k = k as usize;
    let b = f64::from(layout.block_bits());
    let mut distinct = vec![0.0f64; k + 1];
    distinct[0] = 1.0;
    for _ in 0..k {
        for d in (0..=k).rev() {
            let stay = distinct[d] * d as f64 / b;
            let arrive = if d > 0 {
                distinct[d - 1] * (b - (d - 1) as f64) / b
            } else {
                0.0
            };
            distinct[d] = stay + arrive;
        }
    }
    let mut binom = vec![0.0f64; k + 1]; // row d of Pascal's triangle, built up as d grows
    let mut coeff = vec![0.0f64; k + 1];
    binom[0] = 1.0;
    for (d, &p) in distinct.iter().enumerate() {
        if d > 0 {
            for i in (1..=d).rev() {
                binom[i] += binom[i - 1];
            }
        }
        for i in 0..=d {
            let sign = if i % 2 == 0 { 1.0 } else { -1.0 };
            coeff[i] += sign * p * binom[i];
        }
    }
    let ratios: Vec<f64> = (0..=k)
        .map(|i| (1.0 - i as f64 / b).powi(k as i32))
        .collect();
    let mut powers = vec![1.0f64; k + 1];
    let mut table = Vec::with_capacity(len);
    for _ in 0..len {
        let f: f64 = coeff.iter().zip(&powers).map(|(c, r)| c * r).sum();
        table.push(f.clamp(0.0, 1.0));
        for (power, ratio) in powers.iter_mut().zip(&ratios) {
            *power *= ratio;
        }
    }
    table
}

/// The largest mean load (items per block) at which [`expected_fpr`] stays at or below `target`,
/// or 0 if none does.
fn max_items_per_block(k: u32, layout: Layout, target: f64) -> f64 {
    let mut hi = f64::from(layout.block_bits()); // one bit per item: far too full for any sane p
    let mut table = load_fpr_table(k, layout, poisson_terms(hi));
    while poisson_mix(hi, &table) <= target {
        hi *= 2.0;
        if hi > 1e6 {
            return hi;
        }
        table = load_fpr_table(k, layout, poisson_terms(hi));
    }
    let mut lo = 0.0f64;
    for _ in 0..50 {
        let mid = 0.5 * (lo + hi);
        if poisson_mix(mid, &table) <= target {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

/// The word layout's mask: `k` bit positions drawn from `h2` as 6-bit fields, lowest first
/// (then from `remix(h2)`, `remix(remix(h2))`, ... after 10 fields). Positions may repeat: a
/// fixed number of draws keeps the loop branch-free, and [`load_fpr_table`] models the repeats.
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
    fn exact_model_agrees_with_simple_cases() {
        // k = 1: F(j) is the chance that one uniform position is among j uniform draws.
        for layout in [Layout::Word, Layout::Line] {
            let b = f64::from(layout.block_bits());
            let table = load_fpr_table(1, layout, 5);
            for (j, f) in table.iter().enumerate() {
                let want = 1.0 - (1.0 - 1.0 / b).powi(j as i32);
                assert!((f - want).abs() < 1e-12, "{layout:?} j={j}: {f} vs {want}");
            }
        }
        // k = 2, one item in a word: the query's 2 draws must land on the item's draws. Both
        // distinct (prob 63/64): the item must cover both, 2/64^2; both equal (1/64): the item
        // covers it, 1 - (63/64)^2.
        let f = load_fpr_table(2, Layout::Word, 2)[1];
        let want = 63.0 / 64.0 * 2.0 / 4096.0 + 1.0 / 64.0 * (1.0 - (63.0f64 / 64.0).powi(2));
        assert!((f - want).abs() < 1e-15, "{f} vs {want}");
        assert_eq!(load_fpr_table(3, Layout::Word, 1)[0], 0.0);
        let (a, b) = (
            expected_fpr(5.0, 5, Layout::Word),
            expected_fpr(6.0, 5, Layout::Word),
        );
        assert!(0.0 < a && a < b && b < 1.0);
    }

    #[test]
    fn sizing_meets_the_model_and_blocking_costs_bits() {
        for fpr in [0.1, 0.01, 0.001] {
            let classic = crate::sizing::BloomSizing::optimal(1_000_000, fpr).unwrap();
            for layout in [Layout::Word, Layout::Line] {
                let p = Params::for_capacity(1_000_000, fpr, layout).unwrap();
                let lambda = 1_000_000.0 / p.blocks as f64;
                let rate = expected_fpr(lambda, p.hashes, layout);
                assert!(rate <= fpr * SIZING_MARGIN, "{layout:?} {fpr}: {rate}");
                assert!(p.bits() > classic.bits, "{layout:?} {fpr}");
            }
            let word = Params::for_capacity(1_000_000, fpr, Layout::Word).unwrap();
            let line = Params::for_capacity(1_000_000, fpr, Layout::Line).unwrap();
            assert!(word.bits() >= line.bits());
        }
    }

    #[test]
    fn sizing_rejects_what_sizing_rejects() {
        assert_eq!(
            Params::for_capacity(0, 0.01, Layout::Word),
            Err(Error::ZeroCapacity)
        );
        assert!(matches!(
            Params::for_capacity(10, 1.5, Layout::Line),
            Err(Error::InvalidFpr(_))
        ));
        assert!(matches!(
            Params::for_capacity(u64::MAX / 4, 0.01, Layout::Word),
            Err(Error::TooLarge { .. })
        ));
    }
}
