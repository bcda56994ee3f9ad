//! Sizing math: how many bits and hash functions a Bloom filter needs, and how many buckets an
//! overwrite map needs. Pure functions, no concurrency; derivations in [the sizing notes](crate::docs::sizing).
//!
//! - [`blocked`]: what the crate's Bloom filters allocate, per [`Layout`](crate::Layout). The
//!   filters are built from its answer, so its [`bytes()`](BlockedSizing::bytes) is their
//!   `memory_bytes()`.
//! - [`BloomSizing`]: the classic (unblocked) textbook formula, kept as the reference the
//!   blocked sizing is compared with: blocking costs bits at equal false-positive rate.
//! - [`GrowingSizing`]: the [`GrowingBloomFilter`](crate::GrowingBloomFilter)'s layers, each
//!   `expansion` times larger than the one before at a tighter rate.
//! - [`window`]: the [`WindowedBloomFilter`](crate::WindowedBloomFilter), `G` generations of
//!   word-layout filters whose words share a cache line.
//! - [`overwrite_buckets`] and its inverses: the overwrite maps.
//!
//! Sizing knows nothing of the structures: they depend on it, never the other way.
//!
//! ```
//! use seen::Layout;
//! use seen::sizing::{BloomSizing, blocked, overwrite_buckets, overwrite_remember_probability};
//!
//! // What `AtomicBloomFilter::with_capacity(10_000_000, 0.01)` allocates, and the textbook size.
//! let filter = blocked(10_000_000, 0.01, Layout::Word)?;
//! let textbook = BloomSizing::optimal(10_000_000, 0.01)?;
//! assert_eq!((textbook.bits, textbook.hashes), (95_850_584, 7));
//! assert_eq!(format!("{:.2} MiB", textbook.mib()), "11.43 MiB");
//! assert!(filter.bytes() > textbook.bytes() && filter.expected_fpr <= 0.01);
//!
//! // Remember an item across an hour of 1,000 insertions/s with probability 0.9.
//! let n = overwrite_buckets(3_600_000, 0.9)?;
//! assert_eq!(n, 34_168_399);
//! assert!(overwrite_remember_probability(n, 3_600_000)? >= 0.9);
//! # Ok::<(), seen::Error>(())
//! ```

use core::f64::consts::LN_2;

use crate::Error;

mod blocked;
mod growing;
mod window;

pub(crate) use blocked::FILE_RATE_SLACK;
pub use blocked::{BlockedSizing, blocked};
pub(crate) use growing::OVERSHOOT_DIVISOR;
pub use growing::{DEFAULT_EXPANSION, DEFAULT_TIGHTENING, GrowingSizing, MAX_LAYERS};
pub use window::{MAX_GENERATIONS, WindowSizing, window};
pub(crate) use window::{generation_fpr, stride_words, window_fpr};

/// The size of a classic (unblocked) Bloom filter: `bits` and `hashes` for a capacity and a
/// target false-positive rate. The textbook reference: the crate's filters are blocked and are
/// sized by [`blocked`], which needs more bits for the same rate ([compared](crate::docs::sizing#blocked-filters)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BloomSizing {
    /// The number of items the filter is sized for, `n`.
    pub capacity: u64,
    /// The number of bits, `m`.
    pub bits: u64,
    /// The number of hash functions (bits set per item), `k`.
    pub hashes: u32,
}

impl BloomSizing {
    /// The classic sizing: `m = ceil(-n ln p / (ln 2)^2)` bits and `k = ceil(log2(1/p))` hashes.
    ///
    /// `k` is the textbook `ceil(ln 2 · m / n)` evaluated with `m` before rounding, which makes
    /// it a function of `p` alone (so monotone in both arguments); the two agree except when the
    /// rounding of `m` pushes `ln 2 · m / n` across an integer, which moves it by under `ln 2 / n`.
    ///
    /// Because `k` is rounded up from its real optimum `log2(1/p)`, the expected rate at capacity
    /// ([`fpr_at`](Self::fpr_at)) is slightly *above* `p` (1.0039% for p = 1%, 10.26% for 10%).
    /// Use [`guaranteed`](Self::guaranteed) for a sizing whose expected rate is at most `p`.
    ///
    /// # Errors
    ///
    /// [`Error::ZeroCapacity`] for `capacity == 0`, [`Error::InvalidFpr`] for `fpr` outside
    /// (0, 1) or NaN, [`Error::TooLarge`] when the bits do not fit a `u64` or this machine's
    /// address space.
    ///
    /// # Examples
    ///
    /// ```
    /// use seen::sizing::BloomSizing;
    /// let s = BloomSizing::optimal(10_000_000, 0.001)?;
    /// assert_eq!(s.bits, 143_775_876);
    /// assert_eq!(s.hashes, 10);
    /// assert!(BloomSizing::optimal(0, 0.01).is_err());
    /// assert!(BloomSizing::optimal(10, 1.0).is_err());
    /// # Ok::<(), seen::Error>(())
    /// ```
    pub fn optimal(capacity: u64, fpr: f64) -> Result<Self, Error> {
        check_capacity(capacity)?;
        check_fpr(fpr)?;
        let bits_per_item = -fpr.ln() / (LN_2 * LN_2);
        let bits = checked_bits(bits_per_item * capacity as f64)?;
        Ok(Self {
            capacity,
            bits,
            hashes: hashes_for(fpr),
        })
    }

    /// The least number of bits for the same `k` as [`optimal`](Self::optimal) such that
    /// [`fpr_at(capacity)`](Self::fpr_at) is at most `fpr`. About 0.08% more bits than `optimal`
    /// at p = 1%, 1% more at p = 10%.
    ///
    /// Solving `(1 - e^{-kn/m})^k = p` for `m` gives `m = -k n / ln(1 - p^{1/k})`; a bounded
    /// search from there (as in [`overwrite_buckets`], at most 130 evaluations) returns the `m`
    /// at which `fpr_at` itself turns to at most `p`, never below the classic `m`.
    ///
    /// # Errors
    ///
    /// As [`optimal`](Self::optimal).
    ///
    /// # Examples
    ///
    /// ```
    /// use seen::sizing::BloomSizing;
    /// let s = BloomSizing::guaranteed(10_000_000, 0.01)?;
    /// assert!(s.fpr_at(10_000_000) <= 0.01);
    /// assert!(s.bits > BloomSizing::optimal(10_000_000, 0.01)?.bits);
    /// # Ok::<(), seen::Error>(())
    /// ```
    pub fn guaranteed(capacity: u64, fpr: f64) -> Result<Self, Error> {
        guaranteed_counted(capacity, fpr).0
    }

    /// The size in bytes, `ceil(bits / 8)`.
    pub const fn bytes(&self) -> u64 {
        self.bits.div_ceil(8)
    }

    /// The size in mebibytes (2^20 bytes).
    pub fn mib(&self) -> f64 {
        self.bytes() as f64 / (1u64 << 20) as f64
    }

    /// The expected false-positive rate after `items` distinct insertions,
    /// `(1 - e^{-k·items/m})^k`, also past capacity (the "overfull" case).
    ///
    /// Defined for every value of the public fields, so that a hand-built `BloomSizing` cannot
    /// produce a NaN: an empty filter (`items == 0`) has rate 0 unless `hashes == 0`; a filter with
    /// no hashes (every query tests no bit) or no bits has rate 1.
    ///
    /// # Examples
    ///
    /// ```
    /// use seen::sizing::BloomSizing;
    /// let s = BloomSizing::optimal(10_000_000, 0.01)?;
    /// assert!((s.fpr_at(10_000_000) - 0.01).abs() < 0.0001);
    /// // Twice as many items as planned: about 16%, not 2%.
    /// assert!(s.fpr_at(20_000_000) > 0.15);
    /// assert_eq!(s.fpr_at(0), 0.0);
    /// assert_eq!(BloomSizing { bits: 0, ..s }.fpr_at(1), 1.0);
    /// # Ok::<(), seen::Error>(())
    /// ```
    pub fn fpr_at(&self, items: u64) -> f64 {
        if self.hashes == 0 {
            return 1.0;
        }
        if items == 0 {
            return 0.0;
        }
        if self.bits == 0 {
            return 1.0;
        }
        let k = f64::from(self.hashes);
        let x = k * items as f64 / self.bits as f64;
        // Fraction of bits set: 1 - e^{-x}, computed as -expm1(-x) to keep digits when x is small.
        let filled = -(-x).exp_m1();
        // `hashes` is at most u32::MAX; powi takes an i32, and past 2^31 factors of a number
        // below 1 the result is 0 either way.
        filled.powi(i32::try_from(self.hashes).unwrap_or(i32::MAX))
    }
}

/// [`BloomSizing::guaranteed`], and how many times the search evaluated the rate.
pub(crate) fn guaranteed_counted(capacity: u64, fpr: f64) -> (Result<BloomSizing, Error>, u32) {
    let classic = match BloomSizing::optimal(capacity, fpr) {
        Ok(classic) => classic,
        Err(e) => return (Err(e), 0),
    };
    let k = f64::from(classic.hashes);
    // The fraction of bits left unset at capacity, e^{-kn/m} = 1 - p^{1/k}, computed without
    // cancellation as -expm1(ln(p) / k).
    let unset = -(fpr.ln() / k).exp_m1();
    let estimate = -k * capacity as f64 / unset.ln();
    // The closed form is only a starting point: the answer is where `fpr_at` itself meets `p`,
    // found by a bounded search (the rounding of the closed form can be off by many bits when
    // the count is past 2^53, where neighbouring counts are the same f64).
    let meets = |bits: u64| BloomSizing { bits, ..classic }.fpr_at(capacity) <= fpr;
    let (found, steps) = turning_point(classic.bits, max_bits(), estimate.ceil() as u64, meets);
    let result = found
        .map(|bits| BloomSizing { bits, ..classic })
        .ok_or(Error::TooLarge {
            what: "bits",
            requested: estimate,
            limit: max_bits(),
        });
    (result, steps)
}

/// The common rule of thumb for an overfull filter: with `t` times the planned items, the
/// false-positive rate is about `(1 - 0.5^t)^k`.
///
/// It assumes the fill ratio at capacity is exactly one half, which holds only for the real-valued
/// optimal `k`. With the rounded-up `k` it underestimates: at p = 1% (k = 7) and t = 2 it gives
/// 13.3%, where [`BloomSizing::fpr_at`] gives 15.7%.
///
/// # Errors
///
/// [`Error::InvalidParameter`] for `hashes == 0` and for a `load` that is negative, infinite or
/// NaN.
///
/// # Examples
///
/// ```
/// let p = seen::sizing::overfull_fpr_estimate(7, 2.0)?;
/// assert_eq!(format!("{:.0}%", p * 100.0), "13%");
/// assert!(seen::sizing::overfull_fpr_estimate(7, -1.0).is_err());
/// # Ok::<(), seen::Error>(())
/// ```
pub fn overfull_fpr_estimate(hashes: u32, load: f64) -> Result<f64, Error> {
    if hashes == 0 {
        return Err(Error::InvalidParameter("hashes must be at least 1"));
    }
    if !(load.is_finite() && load >= 0.0) {
        return Err(Error::InvalidParameter(
            "load (items over capacity) must be finite and at least 0",
        ));
    }
    let filled = -(-load * core::f64::consts::LN_2).exp_m1(); // 1 - 0.5^t, exact near t = 0
    Ok(filled.powi(i32::try_from(hashes).unwrap_or(i32::MAX)))
}

/// The number of buckets an overwrite map needs to still remember an item, with probability at
/// least `remember_probability`, after `later_insertions` other items were inserted after it.
///
/// Each later insertion overwrites the item's bucket with probability `1/N`, so the item survives
/// `x` of them with probability `(1 - 1/N)^x`. This returns the least `N` with
/// `(1 - 1/N)^x >= r` as [`overwrite_remember_probability`] computes it: the closed form
/// `N = ceil(1 / (1 - r^{1/x}))` (with `ln`/`exp_m1`) is the starting point of a bounded search
/// (at most 130 evaluations, microseconds for every input), which returns an `N` with
/// `remember(N, x) >= r` and, unless `N = 1`, `remember(N - 1, x) < r`. That `N` is the least
/// one wherever `remember` is monotone in `N`, as it is mathematically; see [the sizing notes](crate::docs::sizing#from-the-closed-forms-to-exact-answers-in-bounded-time) for
/// what happens where floating point cannot tell neighbouring counts apart.
///
/// Mind the direction: to *remember* an hour-old item (x = 3,600,000) with probability 0.9 takes
/// 34,168,399 buckets; the 1,563,461 that solving `0.9 = 1 - (1 - 1/N)^x` gives (the chance of
/// having *forgotten* it) remember it only 10% of the time.
///
/// # Errors
///
/// [`Error::InvalidProbability`] for `remember_probability` outside (0, 1) or NaN;
/// [`Error::TooLarge`] when the count does not fit a `u64`.
///
/// # Examples
///
/// ```
/// use seen::sizing::overwrite_buckets;
/// assert_eq!(overwrite_buckets(3_600_000, 0.9)?, 34_168_399);
/// assert_eq!(overwrite_buckets(3_600_000, 0.1)?, 1_563_461);
/// assert_eq!(overwrite_buckets(0, 0.5)?, 1); // nothing inserted after it: one bucket suffices
/// assert!(overwrite_buckets(10, 1.0).is_err());
/// // Probabilities next to 1 answer at once too (about 10^12 buckets here).
/// assert!(overwrite_buckets(1, 1.0 - 1e-12)? > 999_000_000_000);
/// # Ok::<(), seen::Error>(())
/// ```
pub fn overwrite_buckets(later_insertions: u64, remember_probability: f64) -> Result<u64, Error> {
    overwrite_buckets_counted(later_insertions, remember_probability).0
}

/// [`overwrite_buckets`], and how many times the search evaluated `remember`.
fn overwrite_buckets_counted(
    later_insertions: u64,
    remember_probability: f64,
) -> (Result<u64, Error>, u32) {
    if let Err(e) = check_probability(remember_probability) {
        return (Err(e), 0);
    }
    let x = later_insertions as f64;
    // 1/N = 1 - r^{1/x} = -expm1(ln(r) / x); x = 0 gives ln(r)/0 = -inf and N = 1. Where the
    // quotient underflows the estimate is +inf, and the cast below saturates to u64::MAX.
    let estimate = 1.0 / -(remember_probability.ln() / x).exp_m1();
    let remembers = |n: u64| remember(n, later_insertions) >= remember_probability;
    let (found, steps) = turning_point(1, u64::MAX, estimate.ceil() as u64, remembers);
    let result = found.ok_or(Error::TooLarge {
        what: "buckets",
        requested: estimate,
        limit: u64::MAX,
    });
    (result, steps)
}

/// The probability that an overwrite map with `buckets` buckets still remembers an item after
/// `later_insertions` other items were inserted: `(1 - 1/N)^x`, computed as `exp(x · ln_1p(-1/N))`.
///
/// # Errors
///
/// [`Error::ZeroBuckets`] for `buckets == 0`.
///
/// # Examples
///
/// ```
/// use seen::sizing::overwrite_remember_probability;
/// // 100 buckets: after 459 more insertions an item is forgotten with probability >= 0.99.
/// assert!(1.0 - overwrite_remember_probability(100, 459)? >= 0.99);
/// assert!(1.0 - overwrite_remember_probability(100, 458)? < 0.99);
/// # Ok::<(), seen::Error>(())
/// ```
pub fn overwrite_remember_probability(buckets: u64, later_insertions: u64) -> Result<f64, Error> {
    if buckets == 0 {
        return Err(Error::ZeroBuckets);
    }
    Ok(remember(buckets, later_insertions))
}

/// The longest window an overwrite map remembers: the largest number of later insertions `x`
/// after which an item is still remembered with probability at least `remember_probability`.
///
/// As for [`overwrite_buckets`], a closed form `x = ln(r) / ln_1p(-1/N)` starts a bounded search
/// (at most 130 evaluations) that returns an `x` with `remember(N, x) >= r > remember(N, x + 1)`.
///
/// # Errors
///
/// [`Error::ZeroBuckets`], [`Error::InvalidProbability`], and [`Error::TooLarge`] when the window
/// does not fit a `u64` (when even `u64::MAX` later insertions leave the item remembered with
/// probability at least `r`).
///
/// # Examples
///
/// ```
/// use seen::sizing::{overwrite_window, overwrite_buckets};
/// // 100 buckets remember an item with probability >= 1% for 458 later insertions, not 459.
/// assert_eq!(overwrite_window(100, 0.01)?, 458);
/// assert!(overwrite_window(overwrite_buckets(3_600_000, 0.9)?, 0.9)? >= 3_600_000);
/// # Ok::<(), seen::Error>(())
/// ```
pub fn overwrite_window(buckets: u64, remember_probability: f64) -> Result<u64, Error> {
    overwrite_window_counted(buckets, remember_probability).0
}

/// [`overwrite_window`], and how many times the search evaluated `remember`.
fn overwrite_window_counted(buckets: u64, remember_probability: f64) -> (Result<u64, Error>, u32) {
    if buckets == 0 {
        return (Err(Error::ZeroBuckets), 0);
    }
    if let Err(e) = check_probability(remember_probability) {
        return (Err(e), 0);
    }
    // x = ln(r) / ln(1 - 1/N); one bucket gives ln(0) = -inf and x = 0.
    let estimate = remember_probability.ln() / (-1.0 / buckets as f64).ln_1p();
    // Search for the first x that is *not* remembered; the window ends just before it. x = 0 is
    // always remembered (remember(N, 0) = 1 > r), so that first x is at least 1.
    let forgets = |x: u64| remember(buckets, x) < remember_probability;
    let guess = (estimate.floor() as u64).saturating_add(1);
    let (found, steps) = turning_point(0, u64::MAX, guess, forgets);
    let result = match found {
        Some(first_forgotten) if first_forgotten > 0 => Ok(first_forgotten - 1),
        _ => Err(Error::TooLarge {
            what: "insertions",
            requested: estimate,
            limit: u64::MAX - 1,
        }),
    };
    (result, steps)
}

/// `(1 - 1/n)^x` for `n >= 1`.
fn remember(buckets: u64, later_insertions: u64) -> f64 {
    if later_insertions == 0 {
        return 1.0; // and not 0 · ln(0) = NaN for one bucket
    }
    (later_insertions as f64 * (-1.0 / buckets as f64).ln_1p()).exp()
}

/// The most evaluations [`turning_point`] makes: one at the guess, at most 65 while galloping
/// (the step doubles from 1 until it spans the 2^64 integers) and 64 while bisecting.
pub(crate) const MAX_SEARCH_STEPS: u32 = 130;

/// Where `holds` turns true in `lo..=hi`, searched from a `guess` in a bounded number of steps.
///
/// Gallops from `guess` (steps 1, 2, 4, ... away from it) until a point where `holds` is false
/// and one where it is true bracket the change, then bisects. Returns, with the number of
/// evaluations of `holds` (at most [`MAX_SEARCH_STEPS`]):
///
/// - `Some(n)` with `holds(n)` and either `n == lo` or `!holds(n - 1)`;
/// - `None` if `holds(hi)` is false (the search reached `hi`).
///
/// If `holds` is monotone (false up to some point, true from there on), `n` is the least point
/// where it holds, whatever the guess. If it is not (a computed probability can move by an ulp
/// the wrong way across a run of equal inputs), `n` is still a point where it turns from false
/// to true: the one this deterministic search reaches.
fn turning_point(
    lo: u64,
    hi: u64,
    guess: u64,
    mut holds: impl FnMut(u64) -> bool,
) -> (Option<u64>, u32) {
    debug_assert!(lo <= hi);
    let mut steps = 0u32;
    let mut eval = |n: u64| {
        steps += 1;
        holds(n)
    };
    let start = guess.clamp(lo, hi);
    // `no < yes`, `holds(yes)`, `!holds(no)`: the bracket that bisection narrows to width 1.
    let (mut no, mut yes);
    if eval(start) {
        yes = start;
        let mut step = 1u64;
        loop {
            if yes == lo {
                return (Some(lo), steps);
            }
            let probe = yes.saturating_sub(step).max(lo);
            if eval(probe) {
                yes = probe;
                step = step.saturating_mul(2);
            } else {
                no = probe;
                break;
            }
        }
    } else {
        no = start;
        let mut step = 1u64;
        loop {
            if no == hi {
                return (None, steps);
            }
            let probe = no.saturating_add(step).min(hi);
            if eval(probe) {
                yes = probe;
                break;
            }
            no = probe;
            step = step.saturating_mul(2);
        }
    }
    while yes - no > 1 {
        let mid = no + (yes - no) / 2;
        if eval(mid) {
            yes = mid;
        } else {
            no = mid;
        }
    }
    debug_assert!(steps <= MAX_SEARCH_STEPS, "{steps} steps");
    (Some(yes), steps)
}

/// `k = ceil(log2(1/p))`, at least 1.
fn hashes_for(fpr: f64) -> u32 {
    // For p in (0, 1) this lies in [1, 1075]: the cast cannot truncate.
    ((-fpr.ln() / LN_2).ceil() as u32).max(1)
}

fn check_capacity(capacity: u64) -> Result<(), Error> {
    if capacity == 0 {
        Err(Error::ZeroCapacity)
    } else {
        Ok(())
    }
}

fn check_fpr(fpr: f64) -> Result<(), Error> {
    if fpr > 0.0 && fpr < 1.0 {
        Ok(())
    } else {
        Err(Error::InvalidFpr(fpr))
    }
}

fn check_probability(p: f64) -> Result<(), Error> {
    if p > 0.0 && p < 1.0 {
        Ok(())
    } else {
        Err(Error::InvalidProbability(p))
    }
}

/// The most bits a filter may have: what a `u64` counts and what this machine can allocate
/// (`isize::MAX` bytes).
pub(crate) fn max_bits() -> u64 {
    (isize::MAX as u64).saturating_mul(8)
}

/// `ceil(bits)` as a `u64`, or [`Error::TooLarge`].
fn checked_bits(bits: f64) -> Result<u64, Error> {
    let limit = max_bits();
    let rounded = bits.ceil();
    // `limit as f64` rounds up to 2^64 on 64-bit targets, so compare strictly below it.
    if rounded.is_nan() || rounded >= limit as f64 {
        return Err(Error::TooLarge {
            what: "bits",
            requested: bits,
            limit,
        });
    }
    Ok((rounded as u64).max(1))
}

#[cfg(all(test, not(seen_loom)))]
mod tests;
