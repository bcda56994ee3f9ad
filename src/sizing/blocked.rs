//! Sizing of the crate's blocked Bloom filters: an exact false-positive model of their probe, the
//! limits below which a layout is refused, and the search for `k` and the load per block.
//! Derivations in [the sizing notes](crate::docs::sizing#blocked-filters).

use super::{check_capacity, check_fpr, max_bits};
use crate::{Error, Layout};

/// The size of one of the crate's blocked Bloom filters, exactly as their constructors compute
/// it: [`AtomicBloomFilter`] and [`SemiConcurrentBloomFilter`] are built from this value (their
/// `sizing()` returns it), so `bytes()` here is what they allocate.
///
/// [`AtomicBloomFilter`]: crate::AtomicBloomFilter
/// [`SemiConcurrentBloomFilter`]: crate::SemiConcurrentBloomFilter
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct BlockedSizing {
    /// Where each item's bits live.
    pub layout: Layout,
    /// The number of items the filter is sized for.
    pub capacity: u64,
    /// The target false-positive rate at capacity, as asked for.
    pub fpr: f64,
    /// The number of bits: whole 512-bit cache lines.
    pub bits: u64,
    /// The number of blocks: `bits` over the layout's block size (64 or 512 bits).
    pub blocks: u64,
    /// The number of bit positions each item draws, `k`.
    pub hashes: u32,
    /// The expected false-positive rate after `capacity` distinct items, by the exact model of
    /// [the sizing notes](crate::docs::sizing#the-exact-model): at most `0.97 · fpr`.
    pub expected_fpr: f64,
}

impl BlockedSizing {
    /// The size in bytes.
    pub const fn bytes(&self) -> u64 {
        self.bits / 8
    }

    /// Bits per item at capacity.
    pub fn bits_per_item(&self) -> f64 {
        self.bits as f64 / self.capacity as f64
    }

    /// The distinct items a filter of this sizing holds when `bits_set` of its bits are set
    /// (the inverse of the expected fill: `-blocks · ln(1 - X/m) / f`, `f` the expected
    /// fraction of a block's bits one item sets); `u64::MAX` when every bit is set. What
    /// [`AtomicBloomFilter::estimated_len`](crate::AtomicBloomFilter::estimated_len) computes
    /// from its words, for a filter whose bits are counted elsewhere (a server's `BITCOUNT`).
    ///
    /// # Examples
    ///
    /// ```
    /// let f = seen::AtomicBloomFilter::with_capacity(100_000, 0.01)?;
    /// f.insert_counting_new(&(0..50_000u64).collect::<Vec<_>>());
    /// let mut words = vec![0u64; (f.sizing().bits / 64) as usize];
    /// f.read_words(0, &mut words)?;
    /// let set: u64 = words.iter().map(|w| u64::from(w.count_ones())).sum();
    /// assert_eq!(f.sizing().estimated_len(set), f.estimated_len());
    /// # Ok::<(), seen::Error>(())
    /// ```
    pub fn estimated_len(&self, bits_set: u64) -> u64 {
        let m = self.bits as f64;
        let set = bits_set as f64;
        if set >= m {
            return u64::MAX;
        }
        let per_item = per_item_fill(f64::from(self.hashes), self.layout);
        (-(self.blocks as f64) * (-set / m).ln_1p() / per_item).round() as u64
    }

    /// The expected false-positive rate of a filter of this sizing holding `items` distinct
    /// items, by the exact model [`blocked`] sizes with (at `capacity` items, at most `0.97 ·
    /// fpr`); 1 for a saturated filter.
    ///
    /// # Examples
    ///
    /// ```
    /// let s = seen::sizing::blocked(1_000_000, 0.01, seen::Layout::Word)?;
    /// assert!(s.fpr_at(s.capacity) <= 0.97 * 0.01);
    /// assert!(s.fpr_at(2 * s.capacity) > 0.05);
    /// assert_eq!(s.fpr_at(0), 0.0);
    /// # Ok::<(), seen::Error>(())
    /// ```
    pub fn fpr_at(&self, items: u64) -> f64 {
        if items == 0 {
            return 0.0;
        }
        if self.blocks == 0 {
            return 1.0;
        }
        expected_fpr(self.layout, self.hashes, items as f64 / self.blocks as f64).min(1.0)
    }

    /// The number of 64-byte cache lines the bits take.
    pub(crate) fn lines(&self) -> usize {
        // The sizing refuses more bits than this machine addresses (`max_bits`).
        (self.bits / 512) as usize
    }
}

/// The size of a blocked filter of this `layout` for `capacity` items at a target
/// false-positive rate `fpr`: the fewest blocks, over every `k` up to a fixed bound, whose
/// expected rate after `capacity` items is at most `0.97 · fpr`, rounded up to whole cache lines.
///
/// The answer is monotone: a smaller `fpr` or a larger `capacity` never gets fewer bits.
/// Targets above about 1/2 all get the filter of 1/2.
///
/// # Errors
///
/// [`Error::ZeroCapacity`], [`Error::InvalidFpr`] for `fpr` outside (0, 1) or NaN;
/// [`Error::FprBelowLayoutLimit`] for `fpr` below the layout's limit (6.4e-6 for words, 4.7e-15
/// for lines: below it the layout needs more than 4 times the bits of a classic Bloom filter;
/// the error names the layout that can);
/// [`Error::TooLarge`] when the bits exceed this machine's address space.
///
/// # Examples
///
/// ```
/// use seen::{Error, Layout, sizing::blocked};
///
/// let word = blocked(1_000_000, 0.01, Layout::Word)?;
/// let line = blocked(1_000_000, 0.01, Layout::Line)?;
/// assert_eq!((word.hashes, line.hashes), (5, 6));
/// assert!(line.bits_per_item() < word.bits_per_item());
/// assert!(word.expected_fpr <= 0.97 * 0.01);
/// // The word layout stops where it would need 4 times a classic filter's memory.
/// assert!(matches!(
///     blocked(1_000_000, 1e-6, Layout::Word),
///     Err(Error::FprBelowLayoutLimit { use_layout: Some(Layout::Line), .. })
/// ));
/// # Ok::<(), seen::Error>(())
/// ```
pub fn blocked(capacity: u64, fpr: f64, layout: Layout) -> Result<BlockedSizing, Error> {
    check_capacity(capacity)?;
    check_fpr(fpr)?;
    let limit = min_fpr(layout);
    if fpr < limit {
        let use_layout = [Layout::Line]
            .into_iter()
            .find(|&other| other != layout && fpr >= min_fpr(other));
        return Err(Error::FprBelowLayoutLimit {
            layout,
            fpr,
            min_fpr: limit,
            use_layout,
        });
    }
    let mut choice = choose(layout, fpr * SIZING_MARGIN);
    // At and above the layout's limit the load is more than half an item per block (test
    // `hash_floor_is_far_below_every_limit`), so the quotient is finite.
    let blocks = (capacity as f64 / choice.load).ceil().max(1.0);
    let per_line = f64::from(512 / layout.block_bits());
    let lines = (blocks / per_line).ceil();
    // Whole lines within what a u64 counts and this machine addresses (`max_bits`). Compared
    // as integers: `max_lines as f64` rounds up (2^55 - 1 becomes 2^55), so a float comparison
    // lets `lines = 2^55` through and `lines * 512` overflows. The cast saturates.
    let max_lines = max_bits() / 512;
    let whole_lines = lines as u64;
    if whole_lines > max_lines {
        return Err(Error::TooLarge {
            what: "bits",
            requested: lines * 512.0,
            limit: max_lines * 512,
        });
    }
    let bits = whole_lines * 512;
    let blocks = bits / u64::from(layout.block_bits());
    let load = capacity as f64 / blocks as f64;
    Ok(BlockedSizing {
        layout,
        capacity,
        fpr,
        bits,
        blocks,
        hashes: choice.hashes(),
        expected_fpr: choice.fpr(load),
    })
}

/// The relative difference that [`BlockedSizing::check_built`] allows between a rate a file
/// holds and the one recomputed on load: far above the model's rounding (about 1e-12) and the
/// few ulps by which one platform's math library differs from another's; far below what a
/// change of `k` moves the model by, or a change of the capacity or the blocks by more than
/// about `1e-6 / k` of them.
pub(crate) const FILE_RATE_SLACK: f64 = 1e-6;

impl BlockedSizing {
    /// `Ok` if these fields could have come from [`blocked`]; else which field disagrees: the
    /// checks a file's Bloom fields pass before a filter is built from them, listed in
    /// [the format notes](crate::docs::format#header) ("How a Bloom filter's fields agree").
    /// The search is not re-run; what every sizing it returns satisfies is checked, each rate
    /// within a relative [`FILE_RATE_SLACK`]. Expects a capacity of at least 1 and rates in
    /// range (the header's own checks), and returns an error, not a panic, for anything else.
    pub(crate) fn check_built(&self) -> Result<(), &'static str> {
        let layout = self.layout;
        if !(1..=max_hashes(layout)).contains(&self.hashes) {
            return Err(
                "k (bit positions per item) outside the layout's range, 1 to 32 for \
                 words and 1 to 64 for lines",
            );
        }
        let per_line = u64::from(512 / layout.block_bits());
        if self.blocks == 0
            || !self.blocks.is_multiple_of(per_line)
            || self.blocks.checked_mul(u64::from(layout.block_bits())) != Some(self.bits)
        {
            return Err("blocks other than whole cache lines of the bits");
        }
        let load = self.capacity as f64 / self.blocks as f64;
        let model = expected_fpr(layout, self.hashes, load);
        // Written so that a NaN fails each check.
        let agrees = (self.expected_fpr - model).abs() <= model * FILE_RATE_SLACK;
        if !agrees {
            return Err(
                "expected false-positive rate other than the sizing model's for k, \
                 the blocks and the capacity",
            );
        }
        let target = self.fpr * SIZING_MARGIN;
        let meets = model <= target * (1.0 + FILE_RATE_SLACK);
        if !meets {
            return Err(
                "target false-positive rate below the one that k, the blocks and the \
                 capacity were sized for",
            );
        }
        let lines = self.blocks / per_line;
        if lines > 1 {
            let fewer = self.capacity as f64 / ((lines - 1) * per_line) as f64;
            let past_bracket = fewer >= load_bracket(self.hashes, layout) * (1.0 - FILE_RATE_SLACK);
            if !past_bracket
                && expected_fpr(layout, self.hashes, fewer) <= target * (1.0 - FILE_RATE_SLACK)
            {
                return Err(
                    "target false-positive rate above the one that k, the blocks and \
                     the capacity were sized for (one cache line fewer meets it)",
                );
            }
        }
        Ok(())
    }
}

/// The expected false-positive rate, by the exact model, of a filter of this `layout` with `k`
/// positions per item at a mean load of `load` items per block: what [`blocked`] computes for
/// the filter it chooses, for any blocks and `k` (a file's). 1 for loads of 600 items per block
/// or more (far past any rate below 1, and past where the model's Poisson sum is computed).
pub(crate) fn expected_fpr(layout: Layout, k: u32, load: f64) -> f64 {
    if load.is_nan() || load >= 600.0 || k == 0 {
        return 1.0;
    }
    Tables::new(layout, &[k]).fpr(0, load) + collision_fpr(load)
}

/// The filters are sized for `SIZING_MARGIN · fpr`, so that the rate measured on a finite sample
/// stays at or below `fpr`: see `docs/sizing.md` for the statistics. It costs 0.07 to 0.13 bits
/// per item in the line layout (p from 0.1 to 1e-6) and 0.08 to 0.21 in the word layout (0.1 to
/// 0.001).
const SIZING_MARGIN: f64 = 0.97;

/// A layout is offered only where its bits per item are at most `MAX_COST` times those of a
/// classic Bloom filter, `-ln(p) / ln(2)^2`; `docs/sizing.md` explains the choice. The limits
/// ([`min_fpr`]) are computed from it offline and checked against it by the tests.
#[cfg_attr(
    any(not(test), seen_loom),
    allow(dead_code, reason = "the limits are constants; tests derive them")
)]
const MAX_COST: f64 = 4.0;

/// The smallest target each layout accepts: where its bits per item reach [`MAX_COST`] times the
/// classic ones (test `min_fpr_is_where_the_cost_reaches_max_cost`).
pub(crate) const fn min_fpr(layout: Layout) -> f64 {
    match layout {
        Layout::Word => 6.4e-6,
        Layout::Line => 4.7e-15,
    }
}

/// The largest `k` the search considers, and so the largest a file of the layout holds. At
/// every accepted target the best `k` is below half of it, and no `k` up to four times it could
/// do better (tests `best_hashes_are_far_below_the_bound` and
/// `no_hashes_past_the_bound_beat_the_choice`).
const fn max_hashes(layout: Layout) -> u32 {
    match layout {
        Layout::Word => 32,
        Layout::Line => 64,
    }
}

/// The search for the load of one `k` bisects `[0, load_bracket(k)]` this many times: down to
/// 2^-52 of the bracket, f64's resolution at its top.
const LOAD_STEPS: u32 = 52;

/// Targets (after the margin) above this get the load of this target: the bracket of every `k`
/// ends where the rate provably exceeds it ([`load_bracket`]).
const TARGET_CAP: f64 = 0.5;

/// A load is tested with the exact model only if [`closed_lower_bound`] does not already exceed
/// the target by this relative slack (far above the bound's rounding, about 1e-14).
const GATE_SLACK: f64 = 1e-9;

/// A `k` is skipped if [`closed_lower_bound`] or [`lower_bound`] at the best load so far exceeds
/// the target by this relative slack. It is far above their rounding (about 1e-11) and above
/// [`GATE_SLACK`], so at every larger load the gate, or the exact rate (which is above
/// `lower_bound`), would exceed the target too: the skipped `k`'s load is below the best.
const PRUNE_SLACK: f64 = 1e-6;

/// The Poisson sum stops when its remaining tail is at most this fraction of the sum so far.
const TAIL_PRECISION: f64 = 1e-16;

/// Occupancy states below this fraction of the most likely one are dropped from the low end.
const TRIM: f64 = 1e-24;

/// The `k` with the fewest blocks for a target, and how it was found.
struct Choice {
    /// The largest mean load (items per block) whose expected rate meets the target.
    load: f64,
    /// The tables the chosen `k` was searched with, and its index there.
    tables: Tables,
    index: usize,
    /// How many `k` were searched with the exact model (the others were skipped by the bound).
    #[cfg_attr(any(not(test), seen_loom), allow(dead_code))]
    evaluated: u32,
}

impl Choice {
    fn hashes(&self) -> u32 {
        self.tables.hashes(self.index)
    }

    /// The exact expected rate of the chosen `k` at `lambda`, with the collision term.
    fn fpr(&mut self, lambda: f64) -> f64 {
        self.tables.fpr(self.index, lambda) + collision_fpr(lambda)
    }
}

/// The `k` in `1..=max_hashes(layout)` that allows the largest mean load per block at `target`
/// (ties to the smaller `k`), with that load.
///
/// Every `k` is accounted for: those not searched are skipped only when a lower bound of their rate
/// proves that their load is below the best one found ([`PRUNE_SLACK`]). The result is therefore
/// the maximum over the whole range, and since each `k`'s load is monotone in the target
/// ([`max_load`]), so is the maximum.
///
/// Two rounds, so that the occupancy chain is shared: first the `k` near the usual optimum
/// (about `ln(1/p)`), alone; then every `k` its load does not rule out, all read off one chain,
/// searched outwards from the first (the bound is checked again with the best load so far).
fn choose(layout: Layout, target: f64) -> Choice {
    let max_k = max_hashes(layout);
    let first = ((-target.ln()).round() as u32).clamp(1, max_k);
    let ruled_out = |k: u32, best: f64| {
        let beyond = |bound: f64| bound * (1.0 - PRUNE_SLACK) > target;
        beyond(closed_lower_bound(best, k, layout)) || beyond(lower_bound(best, k, layout))
    };
    let mut tables = Tables::new(layout, &[first]);
    let load = max_load(&mut tables, 0, target);
    let mut choice = Choice {
        load,
        tables,
        index: 0,
        evaluated: 1,
    };
    let others: Vec<u32> = (1..max_k)
        .flat_map(|d| {
            let up = first.checked_add(d).filter(|&k| k <= max_k);
            let down = first.checked_sub(d).filter(|&k| k >= 1);
            up.into_iter().chain(down)
        })
        .filter(|&k| !ruled_out(k, load))
        .collect();
    if others.is_empty() {
        return choice;
    }
    let mut tables = Tables::new(layout, &others);
    let (mut best, mut winner) = (load, None);
    for (index, &k) in others.iter().enumerate() {
        if ruled_out(k, best) {
            continue;
        }
        choice.evaluated += 1;
        let load = max_load(&mut tables, index, target);
        let best_k = winner.map_or(first, |i: usize| others[i]);
        if load > best || (load == best && k < best_k) {
            (best, winner) = (load, Some(index));
        }
    }
    if let Some(index) = winner {
        choice.load = best;
        choice.tables = tables;
        choice.index = index;
    }
    choice
}

/// The largest mean load per block whose expected rate meets `target`, by [`LOAD_STEPS`]
/// bisections of `[0, load_bracket(k)]`.
///
/// The bracket and the step count do not depend on the target, and the test at each point
/// compares target-independent numbers with the target. So for two targets `a < b` the two
/// bisections take the same turns until the first point that meets `b` and not `a`, where `a`'s
/// turns down: the load for `a` is at most the load for `b`, even where rounding makes the
/// computed rate move the wrong way by an ulp.
fn max_load(tables: &mut Tables, index: usize, target: f64) -> f64 {
    let (k, layout) = (tables.hashes(index), tables.layout);
    let (mut lo, mut hi) = (0.0, load_bracket(k, layout));
    for _ in 0..LOAD_STEPS {
        let mid = 0.5 * (lo + hi);
        // The closed-form bound first: it keeps the table from growing for loads far too high.
        let meets = closed_lower_bound(mid, k, layout) * (1.0 - GATE_SLACK) <= target
            && tables.fpr(index, mid) + collision_fpr(mid) <= target;
        if meets {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

/// A load past which the rate of `k` provably exceeds [`TARGET_CAP`]: where
/// [`closed_lower_bound`] equals it.
fn load_bracket(k: u32, layout: Layout) -> f64 {
    let k = f64::from(k);
    // -ln(1 - TARGET_CAP^{1/k})
    let per_bit = -(-(TARGET_CAP.ln() / k).exp()).ln_1p();
    per_bit / per_item_fill(k, layout)
}

/// `1 - (1 - 1/B)^k`: the chance that one item sets a given bit of its block.
pub(crate) fn per_item_fill(k: f64, layout: Layout) -> f64 {
    let b = f64::from(layout.block_bits());
    -(k * (-1.0 / b).ln_1p()).exp_m1()
}

/// A lower bound of the expected rate in closed form, `(1 - e^{-λ (1 - (1 - 1/B)^k)})^k`: the
/// rate if every block had exactly the expected fraction of its bits set. It is below
/// [`lower_bound`] by Jensen's inequality (`x^k` is convex) applied to the number of items.
fn closed_lower_bound(lambda: f64, k: u32, layout: Layout) -> f64 {
    let filled = -(-lambda * per_item_fill(f64::from(k), layout)).exp_m1();
    filled.powi(k as i32)
}

/// A lower bound of the expected rate: `Σ_j Poisson(j; λ) · (1 - q^j)^k` with
/// `q = (1 - 1/B)^k`, where `(1 - q^j)^k` is the rate of a block holding `j` items if every
/// such block had exactly its expected number of bits set (Jensen's inequality: `x^k` is convex,
/// so the spread of that number only raises the rate). Within a few percent of the exact rate,
/// at a fraction of its cost: it decides which `k` need the exact model.
fn lower_bound(lambda: f64, k: u32, layout: Layout) -> f64 {
    let b = f64::from(layout.block_bits());
    let powk = |x: f64| x.powi(k as i32);
    let q = powk(1.0 - 1.0 / b);
    let mut q_j = 1.0;
    let (sum, _) = poisson_mix(lambda, |_| {
        let rate = powk(1.0 - q_j);
        q_j *= q;
        rate
    });
    sum
}

/// The false positives that no number of bits removes: all `k` positions come from the 64 bits
/// of `h2` (and `remix(h2)`, ...), so a query whose `h2` equals that of one of the items in its
/// block matches them on every position. With a Poisson(`λ`) number of items in the block, each
/// with an independent uniform `h2`, that happens with probability `1 - e^{-λ · 2^-64}`.
///
/// The rest of the model treats positions as independent draws, which is exact while the `k`
/// fields fit in `h2` (k <= 10 for words, 7 for lines) and an approximation past that; adding
/// this term keeps the total an upper bound of the part the model leaves out.
fn collision_fpr(lambda: f64) -> f64 {
    -(-lambda * 2f64.powi(-64)).exp_m1()
}

/// `(Σ_j Poisson(j; λ) · term(j), bound on the omitted tail Σ_{j > J} Poisson(j; λ))`, where
/// `term(j)` is called for `j = 0, 1, ..., J` in order and must lie in [0, 1].
///
/// Stops at the first `J` past the mean where the tail bound is at most [`TAIL_PRECISION`] of
/// the sum (or at a hard limit far past any such `J`). `λ` must be below 700, where `e^{-λ}`
/// does not underflow: every bracket is (the largest, `k = 1` for lines, is `512 ln 2`).
fn poisson_mix(lambda: f64, mut term: impl FnMut(usize) -> f64) -> (f64, f64) {
    debug_assert!((0.0..700.0).contains(&lambda), "{lambda}");
    let limit = (lambda + 40.0 * lambda.sqrt() + 200.0) as usize;
    let mut pmf = (-lambda).exp();
    let mut sum = 0.0;
    for j in 0..=limit {
        sum += pmf * term(j);
        // Poisson(j + 1) / Poisson(j); every later ratio is smaller, so past the mode the tail
        // from j + 1 on is at most next / (1 - ratio).
        let ratio = lambda / (j + 1) as f64;
        let next = pmf * ratio;
        if ratio < 1.0 && next <= TAIL_PRECISION * sum * (1.0 - ratio) || j == limit {
            return (
                sum,
                if ratio < 1.0 {
                    next / (1.0 - ratio)
                } else {
                    1.0
                },
            );
        }
        pmf = next;
    }
    unreachable!("the loop returns at j == limit")
}

/// The exact expected false-positive rate of one layout as a function of `k` and the mean load,
/// with the tables `F_k(j)` it needs for a few `k`, extended on demand.
///
/// `F_k(j)` is the rate in a block of `B` bits that holds `j` items: the items' `j·k` uniform
/// draws (with replacement, as `word_mask` and `line_masks` in `src/bloom/mod.rs` draw) leave
/// `S` distinct bits set, and the query's `k` independent draws all land on set bits with
/// probability `(S/B)^k`, so `F_k(j) = Σ_s P(S = s) (s/B)^k`. The distribution of `S` after `t`
/// draws does not depend on `k` ([`Occupancy`]): one chain serves every `k`, read off at the
/// multiples of each. All terms are positive: no cancellation at any rate.
struct Tables {
    layout: Layout,
    chain: Occupancy,
    /// Per `k`: `k`, `(s/B)^k` for `s = 0..=B`, and `F_k(0), F_k(1), ...` as far as computed.
    per_k: Vec<(u32, Vec<f64>, Vec<f64>)>,
}

impl Tables {
    /// Tables for these `k`, each starting at `F_k(0) = 0`. Every `k` read off the chain must be
    /// there from its first draw.
    fn new(layout: Layout, hashes: &[u32]) -> Self {
        let b = layout.block_bits() as usize;
        let per_k = hashes
            .iter()
            .map(|&k| {
                let weights = (0..=b)
                    .map(|s| (s as f64 / b as f64).powi(k as i32))
                    .collect();
                (k, weights, vec![0.0])
            })
            .collect();
        Self {
            layout,
            chain: Occupancy::new(b, hashes.iter().copied().max().unwrap_or(1)),
            per_k,
        }
    }

    fn hashes(&self, index: usize) -> u32 {
        self.per_k[index].0
    }

    /// The expected rate (without [`collision_fpr`]) of the `index`th `k` at mean load `lambda`:
    /// `Σ_j P(j) F_k(j)` for a Poisson(`λ`) number of items `j` in the query's block, plus the
    /// bound on the omitted tail (as if those blocks answered "yes" to every query), so never
    /// below the exact sum.
    fn fpr(&mut self, index: usize, lambda: f64) -> f64 {
        let (sum, tail) = poisson_mix(lambda, |j| self.load_fpr(index, j));
        (sum + tail).min(1.0)
    }

    /// `F_k(j)` for the `index`th `k`.
    fn load_fpr(&mut self, index: usize, j: usize) -> f64 {
        while self.per_k[index].2.len() <= j {
            self.chain.draw();
            let draws = self.chain.draws;
            for (k, weights, table) in &mut self.per_k {
                if draws.is_multiple_of(*k as usize) {
                    table.push(self.chain.expected(weights).min(1.0));
                }
            }
        }
        self.per_k[index].2[j]
    }
}

/// The number of distinct bits set in one block of `B` bits after `draws` uniform draws with
/// replacement: `P(S = s)`, one draw at a time (a draw lands on a new bit with probability
/// `(B - s)/B`).
struct Occupancy {
    /// The largest `k` read off this chain.
    max_hashes: u32,
    draws: usize,
    /// `P(S = s)`; zero above `hi`, not read below `lo`.
    p: Vec<f64>,
    scratch: Vec<f64>,
    lo: usize,
    hi: usize,
    /// The most likely `s`.
    mode: usize,
    /// `s / B` and `(B - s) / B`: the chances that a draw into `s` set bits stays or moves up.
    stay: Vec<f64>,
    rise: Vec<f64>,
}

impl Occupancy {
    fn new(b: usize, max_hashes: u32) -> Self {
        let fraction = |s: usize| s as f64 / b as f64;
        let mut p = vec![0.0; b + 1];
        p[0] = 1.0;
        Self {
            max_hashes,
            draws: 0,
            p,
            scratch: vec![0.0; b + 1],
            lo: 0,
            hi: 0,
            mode: 0,
            stay: (0..=b).map(fraction).collect(),
            rise: (0..=b).map(|s| fraction(b - s)).collect(),
        }
    }

    /// `E[weights[S]]`.
    fn expected(&self, weights: &[f64]) -> f64 {
        let range = self.lo..=self.hi;
        self.p[range.clone()]
            .iter()
            .zip(&weights[range])
            .map(|(p, w)| p * w)
            .sum()
    }

    /// One more draw: `P'(s) = P(s) s/B + P(s - 1) (B - s + 1)/B`.
    ///
    /// States far from the most likely one are dropped: at the low end those below [`TRIM`]
    /// times its probability, at the top those below `TRIM · P(mode) · (mode/B)^K` with `K` the
    /// largest `k` read off the chain. Neither changes any later `F_k(j)` by more than
    /// `TRIM · B` of its value per draw: the chain is monotone (under a common coupling a block
    /// with fewer bits set stays behind one with more), so dropped low states would have
    /// contributed at most their share of `F_k(j)`; a dropped top state at most its probability
    /// (weights are at most 1), which is below `TRIM` times `P(mode) (mode/B)^k <= F_k(j)` (and
    /// `F_k` only grows with `j`). Dropping also keeps subnormal numbers out of the loop.
    fn draw(&mut self) {
        let b = self.p.len() - 1;
        let (lo, hi) = (self.lo, (self.hi + 1).min(b));
        let (old, new) = (&self.p, &mut self.scratch);
        new[lo] = old[lo] * self.stay[lo];
        for (((n, o), below), (stay, rise)) in new[lo + 1..=hi]
            .iter_mut()
            .zip(&old[lo + 1..=hi])
            .zip(&old[lo..hi])
            .zip(self.stay[lo + 1..=hi].iter().zip(&self.rise[lo..hi]))
        {
            *n = o * stay + below * rise;
        }
        // The next draw reads this buffer up to `hi + 1`: keep that entry zero. (Entries below
        // `lo` may hold older values; no draw reads them.)
        if hi < b {
            new[hi + 1] = 0.0;
        }
        core::mem::swap(&mut self.p, &mut self.scratch);
        self.hi = hi;
        self.draws += 1;
        // The distribution is unimodal (log-concave): climb to its mode from the last one.
        let p = &mut self.p;
        let mut mode = self.mode.clamp(lo, hi);
        while mode < hi && p[mode + 1] > p[mode] {
            mode += 1;
        }
        while mode > lo && p[mode - 1] > p[mode] {
            mode -= 1;
        }
        self.mode = mode;
        let floor = TRIM * p[mode];
        while self.lo < mode && p[self.lo] < floor {
            self.lo += 1;
        }
        let top_floor = floor * self.stay[mode].powi(self.max_hashes as i32);
        while self.hi > mode && p[self.hi] < top_floor {
            p[self.hi] = 0.0;
            self.hi -= 1;
        }
    }
}

#[cfg(all(test, not(seen_loom)))]
mod tests;
