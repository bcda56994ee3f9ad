//! What the Bloom filters share: the block layouts, their sizing, and the probe positions.
//!
//! Every item is hashed once to a [`Hash128`](crate::hash::Hash128). `h1` picks a block by
//! multiply-shift (`(h1 · blocks) >> 64`: no `%`, uniform, correct for any number of blocks up to
//! 2^64); `h2` is cut into 6-bit (word) or 9-bit (line) fields that pick `k` **distinct** bits in
//! the block; when they run out, the next fields come from `remix(h2)`, `remix(remix(h2))`, ...

mod atomic;

pub use atomic::{AtomicBloomFilter, AtomicBloomFilterBuilder};

use crate::Error;
use crate::bits::LINE_WORDS;

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
    let mut log_pmf = -lambda; // ln P(j = 0)
    let mut sum = 0.0;
    for (j, fpr) in table.iter().enumerate() {
        sum += log_pmf.exp() * fpr;
        log_pmf += (lambda / (j + 1) as f64).ln();
    }
    sum
}

/// `F(j)` for `j = 0..len`: the probability that a query's `k` distinct bits are all set in a
/// block holding `j` items.
///
/// - Word layout, exactly: the set bits are the union of `j` uniform `k`-subsets of 64, whose size
///   `S` is a Markov chain (adding a subset to `s` set bits sets `t` new ones with hypergeometric
///   probability `C(64 - s, t) C(s, k - t) / C(64, k)`), and `F(j) = E[C(S, k)] / C(64, k)`.
/// - Line layout: the chain has 513 states, too slow to run at every construction, so the
///   independent-bits approximation `(1 - (1 - k/512)^j)^k`, which the measurements in
///   `docs/design.md` show to be within a few percent at this block size.
fn load_fpr_table(k: u32, layout: Layout, len: usize) -> Vec<f64> {
    let k = k as usize;
    match layout {
        Layout::Line => {
            let unset_per_item = 1.0 - k as f64 / 512.0;
            (0..len)
                .map(|j| (1.0 - unset_per_item.powi(j as i32)).powi(k as i32))
                .collect()
        }
        Layout::Word => {
            const B: usize = 64;
            let mut binom = vec![[0.0f64; B + 1]; B + 1]; // 34 KB: on the heap, not the stack
            for n in 0..=B {
                binom[n][0] = 1.0;
                for r in 1..=n {
                    binom[n][r] = binom[n - 1][r - 1] + if r < n { binom[n - 1][r] } else { 0.0 };
                }
            }
            let all = binom[B][k];
            let mut dist = [0.0f64; B + 1];
            dist[0] = 1.0;
            let mut table = Vec::with_capacity(len);
            for _ in 0..len {
                table.push((k..=B).map(|s| dist[s] * binom[s][k]).sum::<f64>() / all);
                let mut next = [0.0f64; B + 1];
                for (s, &p) in dist.iter().enumerate() {
                    if p == 0.0 {
                        continue;
                    }
                    for t in 0..=k.min(B - s) {
                        if k - t <= s {
                            next[s + t] += p * binom[B - s][t] * binom[s][k - t] / all;
                        }
                    }
                }
                dist = next;
            }
            table
        }
    }
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

/// A fixed bijection of 64-bit values (the splitmix64 finalizer after adding an odd constant):
/// a fresh stream of bits when one runs out. Part of the persisted format: never change it.
#[inline]
fn remix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The `k` distinct bits of the word layout, from `h2`: 6-bit fields, lowest first.
#[inline]
pub(crate) fn word_mask(h2: u64, k: u32) -> u64 {
    let (mut state, mut x, mut left) = (h2, h2, 10u32);
    let (mut mask, mut set) = (0u64, 0u32);
    while set < k {
        if left == 0 {
            state = remix(state);
            x = state;
            left = 10;
        }
        let bit = 1u64 << (x & 63);
        x >>= 6;
        left -= 1;
        set += u32::from(mask & bit == 0);
        mask |= bit;
    }
    mask
}

/// The `k` distinct bits of the line layout, from `h2`: 9-bit fields, lowest first, as one mask
/// per word of the line.
#[inline]
pub(crate) fn line_masks(h2: u64, k: u32) -> [u64; LINE_WORDS] {
    let (mut state, mut x, mut left) = (h2, h2, 7u32);
    let mut masks = [0u64; LINE_WORDS];
    let mut set = 0u32;
    while set < k {
        if left == 0 {
            state = remix(state);
            x = state;
            left = 7;
        }
        let pos = (x & 511) as usize;
        x >>= 9;
        left -= 1;
        let (word, bit) = (pos >> 6, 1u64 << (pos & 63));
        set += u32::from(masks[word] & bit == 0);
        masks[word] |= bit;
    }
    masks
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn masks_have_exactly_k_distinct_bits() {
        for h in (0..2000u64).map(remix) {
            for k in 1..=20 {
                assert_eq!(word_mask(h, k).count_ones(), k);
                let total: u32 = line_masks(h, k).iter().map(|m| m.count_ones()).sum();
                assert_eq!(total, k);
            }
        }
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
    fn exact_word_model_agrees_with_simple_cases() {
        // One item in the block: a query is a false positive iff its k-subset is that item's,
        // probability 1 / C(64, k).
        let table = load_fpr_table(2, Layout::Word, 3);
        assert_eq!(table[0], 0.0);
        assert!((table[1] - 1.0 / 2016.0).abs() < 1e-15, "{}", table[1]);
        // k = 1: S is the number of distinct cells hit by j balls, E[S] / 64.
        let table = load_fpr_table(1, Layout::Word, 4);
        let expected = 1.0 - (63.0f64 / 64.0).powi(3);
        assert!(
            (table[3] - expected).abs() < 1e-12,
            "{} vs {expected}",
            table[3]
        );
        // The Poisson mixture is a probability, and grows with the load.
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
