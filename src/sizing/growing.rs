//! Sizing of the [`GrowingBloomFilter`](crate::GrowingBloomFilter): RedisBloom's scaling
//! schedule. Layer `i` holds `c0 · e^i` items at rate `P · (1 - t) · t^i`, so that the rates of
//! every layer there could ever be add up to the target `P`. Derivation, and why the default
//! tightening ratio is 0.8: [the sizing notes](crate::docs::sizing#growing-filters).

use super::blocked::min_fpr;
use super::{BlockedSizing, blocked, check_capacity, check_fpr};
use crate::{Error, Layout};

/// The most layers a growing filter has: past it, growth fails with [`Error::TooLarge`]. With
/// the default expansion of 2, 64 layers hold `c0 · (2^64 - 1)` items, which fits a `u64` only
/// for `c0 = 1`; long before that, memory or the layout's smallest rate ends the schedule.
pub const MAX_LAYERS: u32 = 64;

/// The default expansion factor: each layer holds twice the items of the one before, as in
/// RedisBloom and growable-bloom-filter.
pub const DEFAULT_EXPANSION: u32 = 2;

/// The default tightening ratio: each layer's false-positive rate is 0.8 times the one
/// before ([why 0.8](crate::docs::sizing#growing-filters)).
pub const DEFAULT_TIGHTENING: f64 = 0.8;

/// The new items a layer may receive past its capacity, as a fraction of it, while the next
/// layer is being allocated: inserts that find the newest layer this far past its capacity
/// wait for the next one ([the bound](crate::docs::concurrency#growingbloomfilter)).
pub(crate) const OVERSHOOT_DIVISOR: u64 = 64;

/// The room each layer is sized for beyond its capacity, as a fraction of it: the overshoot
/// bound (1/64, plus 1 item) plus the sampled count's error (3/256 at three standard
/// deviations), rounded up to 1/32 (plus 1 item), so that a layer at the bound still meets
/// its rate.
pub(crate) const ROOM_DIVISOR: u64 = 32;

/// The schedule of a growing filter: what each layer holds, at what rate, and what it
/// allocates. Pure arithmetic; the filter is built from it.
///
/// # Examples
///
/// ```
/// use seen::{Layout, sizing::GrowingSizing};
/// let g = GrowingSizing::new(1_000_000, 0.01, Layout::Word, 2, 0.8)?;
/// assert_eq!(g.layer_capacity(3)?, 8_000_000);
/// assert!((g.layer_fpr(0) - 0.002).abs() < 1e-15); // 0.01 · (1 - 0.8)
/// // 100 times the initial capacity takes 7 layers (1 + 2 + ... + 64 = 127 ≥ 100).
/// assert_eq!(g.layers_for(100_000_000)?, 7);
/// // Their rates add up to less than the target, however many layers come.
/// assert!(g.fpr_bound(7) < 0.01 && g.fpr_bound(64) < 0.01);
/// # Ok::<(), seen::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct GrowingSizing {
    /// The first layer's capacity, `c0`.
    pub initial_capacity: u64,
    /// The target false-positive rate of the whole filter, `P`.
    pub fpr: f64,
    /// Every layer's block layout.
    pub layout: Layout,
    /// Each layer holds this many times the items of the one before, `e`.
    pub expansion: u32,
    /// Each layer's rate is this fraction of the one before, `t`.
    pub tightening: f64,
    /// `false` for a non-scaling filter: one layer at the whole rate `P`, never more
    /// ([`non_scaling`](Self::non_scaling)).
    pub scaling: bool,
}

impl GrowingSizing {
    /// The schedule, checked: the parameters, and the first layer's sizing (so that a rate the
    /// layout cannot reach is refused here, not at the first growth).
    ///
    /// # Errors
    ///
    /// [`Error::ZeroCapacity`], [`Error::InvalidFpr`], [`Error::InvalidParameter`] for an
    /// expansion of 0 or above 65,536 or a tightening ratio outside (0, 1); what
    /// [`layer`](Self::layer) returns for the first layer: its rate is `fpr · (1 -
    /// tightening)`, so the word layout needs `fpr` of at least 3.2e-5 with the default ratio,
    /// below which the error is [`Error::GrowingFprBelowLayoutLimit`] (quoting `fpr` and the
    /// ratio; a non-scaling schedule's one layer gets `fpr` itself, and the error is
    /// [`Error::FprBelowLayoutLimit`]).
    pub fn new(
        initial_capacity: u64,
        fpr: f64,
        layout: Layout,
        expansion: u32,
        tightening: f64,
    ) -> Result<Self, Error> {
        Self::checked(initial_capacity, fpr, layout, expansion, tightening, true)
    }

    /// The schedule of a non-scaling filter (RedisBloom's `NONSCALING`): one layer of
    /// `initial_capacity` at the whole rate `fpr`, and no other (asking for layer 1 is
    /// [`Error::Full`]). The expansion and tightening ratio are the defaults, unused.
    ///
    /// # Errors
    ///
    /// As [`new`](Self::new), for the one layer.
    ///
    /// # Examples
    ///
    /// ```
    /// use seen::{Error, Layout, sizing::GrowingSizing};
    /// let g = GrowingSizing::non_scaling(1000, 0.01, Layout::Word)?;
    /// assert_eq!((g.layer_fpr(0), g.fpr_bound(1)), (0.01, 0.01));
    /// assert_eq!(g.layers_for(1001), Err(Error::Full { capacity: 1000 }));
    /// # Ok::<(), seen::Error>(())
    /// ```
    pub fn non_scaling(initial_capacity: u64, fpr: f64, layout: Layout) -> Result<Self, Error> {
        Self::checked(
            initial_capacity,
            fpr,
            layout,
            DEFAULT_EXPANSION,
            DEFAULT_TIGHTENING,
            false,
        )
    }

    /// [`Error::InvalidParameter`] for an expansion outside 1..=65536 or a tightening ratio
    /// outside (0, 1): the checks a file's growth record passes too.
    pub(crate) fn check_growth(expansion: u32, tightening: f64) -> Result<(), Error> {
        if !(1..=1 << 16).contains(&expansion) {
            return Err(Error::InvalidParameter(
                "expansion must be between 1 and 65536",
            ));
        }
        if !(tightening > 0.0 && tightening < 1.0) {
            return Err(Error::InvalidParameter(
                "tightening ratio must be in (0, 1)",
            ));
        }
        Ok(())
    }

    /// Every parameter checked, and the first layer's sizing.
    pub(crate) fn checked(
        initial_capacity: u64,
        fpr: f64,
        layout: Layout,
        expansion: u32,
        tightening: f64,
        scaling: bool,
    ) -> Result<Self, Error> {
        check_capacity(initial_capacity)?;
        check_fpr(fpr)?;
        Self::check_growth(expansion, tightening)?;
        let sizing = Self {
            initial_capacity,
            fpr,
            layout,
            expansion,
            tightening,
            scaling,
        };
        sizing.layer(0)?;
        Ok(sizing)
    }

    /// The capacity of layer `i`: `c0 · e^i` new items, after which the filter grows.
    ///
    /// # Errors
    ///
    /// [`Error::TooLarge`] when it exceeds `u64::MAX`, or `i` is [`MAX_LAYERS`] or more;
    /// [`Error::Full`] for any layer but the first of a non-scaling schedule.
    pub fn layer_capacity(&self, i: u32) -> Result<u64, Error> {
        if !self.scaling && i > 0 {
            return Err(Error::Full {
                capacity: self.initial_capacity,
            });
        }
        let too_large = || Error::TooLarge {
            what: "layer capacity",
            requested: self.initial_capacity as f64 * f64::from(self.expansion).powi(i as i32),
            limit: u64::MAX,
        };
        if i >= MAX_LAYERS {
            return Err(Error::TooLarge {
                what: "layers",
                requested: f64::from(i) + 1.0,
                limit: u64::from(MAX_LAYERS),
            });
        }
        u64::from(self.expansion)
            .checked_pow(i)
            .and_then(|e| e.checked_mul(self.initial_capacity))
            .ok_or_else(too_large)
    }

    /// The target rate of layer `i`: `P · (1 - t) · t^i` (a non-scaling schedule's one layer:
    /// `P`).
    pub fn layer_fpr(&self, i: u32) -> f64 {
        if self.scaling {
            self.fpr * (1.0 - self.tightening) * self.tightening.powi(i as i32)
        } else {
            self.fpr
        }
    }

    /// What layer `i` allocates: [`blocked`] of its capacity plus 1/32 of it plus 1 item of
    /// room (for the new items that arrive while the next layer is allocated, and the count's
    /// sampling error: [the bound](crate::docs::concurrency#growingbloomfilter)) at its rate.
    /// Its `capacity` field is therefore `c + c / 32 + 1` for the
    /// [`layer_capacity`](Self::layer_capacity) `c`.
    ///
    /// # Errors
    ///
    /// As [`layer_capacity`](Self::layer_capacity) and [`blocked`], except that a rate below
    /// the layout's limit is [`Error::GrowingFprBelowLayoutLimit`], which names the schedule's
    /// target, ratio and layer rather than the layer's derived rate (the word layout, at 1 %
    /// and the default ratio, stops after 26 layers); a non-scaling schedule's one layer
    /// keeps [`Error::FprBelowLayoutLimit`].
    pub fn layer(&self, i: u32) -> Result<BlockedSizing, Error> {
        let room = Self::room(self.layer_capacity(i)?)?;
        let fpr = self.layer_fpr(i);
        // The error quotes the caller's target and ratio, not the layer's rate derived from
        // them (which the message derives, step by step).
        let below = |use_layout| Error::GrowingFprBelowLayoutLimit {
            layout: self.layout,
            fpr: self.fpr,
            tightening: self.tightening,
            layer: i,
            min_fpr: min_fpr(self.layout),
            use_layout,
        };
        if fpr == 0.0 {
            // `P · t^i` underflowed: past every layout's limit, not an invalid target.
            return Err(below(None));
        }
        blocked(room, fpr, self.layout).map_err(|e| match e {
            // A non-scaling filter's one layer gets the caller's own rate: the plain error.
            Error::FprBelowLayoutLimit { use_layout, .. } if self.scaling => below(use_layout),
            other => other,
        })
    }

    /// The items a layer of `capacity` is sized for: `c + c / 32 + 1`.
    pub(crate) fn room(capacity: u64) -> Result<u64, Error> {
        capacity
            .checked_add(capacity / ROOM_DIVISOR + 1)
            .ok_or(Error::TooLarge {
                what: "layer capacity",
                requested: capacity as f64 * (1.0 + 1.0 / ROOM_DIVISOR as f64) + 1.0,
                limit: u64::MAX,
            })
    }

    /// How many layers a filter has after `items` distinct new items: the fewest whose
    /// capacities add up to at least `items` (1 for 0 items).
    ///
    /// # Errors
    ///
    /// [`Error::TooLarge`] when it takes more than [`MAX_LAYERS`] or a capacity overflows.
    pub fn layers_for(&self, items: u64) -> Result<u32, Error> {
        let mut total = 0u64;
        let mut layers = 0;
        while layers == 0 || total < items {
            total = total.saturating_add(self.layer_capacity(layers)?);
            layers += 1;
        }
        Ok(layers)
    }

    /// The bytes of the first `layers` layers.
    ///
    /// # Errors
    ///
    /// As [`layer`](Self::layer).
    pub fn bytes(&self, layers: u32) -> Result<u64, Error> {
        (0..layers).try_fold(
            0u64,
            |sum, i| Ok(sum.saturating_add(self.layer(i)?.bytes())),
        )
    }

    /// The union bound on the false-positive rate of a filter of `layers` full layers: the sum
    /// of their rates, `P · (1 - t^L)`, below `P` for every `L` (a non-scaling schedule: `P`).
    pub fn fpr_bound(&self, layers: u32) -> f64 {
        if !self.scaling {
            return self.fpr;
        }
        // `1 - t^L` as `-expm1(L ln t)`: no cancellation for `t` next to 1.
        -self.fpr * (f64::from(layers) * self.tightening.ln()).exp_m1()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn default(c0: u64, fpr: f64, layout: Layout) -> GrowingSizing {
        GrowingSizing::new(c0, fpr, layout, DEFAULT_EXPANSION, DEFAULT_TIGHTENING).unwrap()
    }

    #[test]
    fn the_rates_add_up_to_less_than_the_target_for_any_number_of_layers() {
        for t in [0.1, 0.5, 0.8, 0.85, 0.99] {
            let g = GrowingSizing::new(1000, 0.01, Layout::Line, 2, t).unwrap();
            let mut previous = 0.0;
            for layers in 1..=MAX_LAYERS {
                let bound = g.fpr_bound(layers);
                // Strictly below in exact arithmetic; the f64 sum may round up to it.
                assert!(
                    bound >= previous && bound <= 0.01,
                    "t {t}, {layers}: {bound}"
                );
                let sum: f64 = (0..layers).map(|i| g.layer_fpr(i)).sum();
                assert!((bound - sum).abs() <= 1e-15, "{bound} {sum}");
                previous = bound;
            }
        }
    }

    #[test]
    fn layers_grow_by_the_expansion_and_are_sized_with_room() {
        let g = default(1000, 0.01, Layout::Word);
        for i in 0..20 {
            let capacity = g.layer_capacity(i).unwrap();
            assert_eq!(capacity, 1000 << i);
            let s = g.layer(i).unwrap();
            assert_eq!(s.capacity, capacity + capacity / 32 + 1);
            assert_eq!(s.fpr, g.layer_fpr(i));
            assert!(s.expected_fpr <= g.layer_fpr(i));
        }
        assert_eq!(g.layers_for(0).unwrap(), 1);
        assert_eq!(g.layers_for(1000).unwrap(), 1);
        assert_eq!(g.layers_for(1001).unwrap(), 2);
        assert_eq!(g.layers_for(127_000).unwrap(), 7);
        assert_eq!(g.layers_for(127_001).unwrap(), 8);
    }

    #[test]
    fn the_ends_of_the_schedule_are_errors() {
        // The word layout stops where the rate passes its limit: 0.002 · 0.8^i < 6.4e-6.
        let g = default(1, 0.01, Layout::Word);
        assert!(g.layer(25).is_ok());
        assert_eq!(
            g.layer(26),
            Err(Error::GrowingFprBelowLayoutLimit {
                layout: Layout::Word,
                fpr: 0.01,
                tightening: 0.8,
                layer: 26,
                min_fpr: 6.4e-6,
                use_layout: Some(Layout::Line),
            })
        );
        // Capacities overflow u64 before the line layout's limit.
        let g = default(1 << 40, 0.01, Layout::Line);
        assert_eq!(g.layer_capacity(23).unwrap(), 1 << 63);
        assert!(matches!(g.layer_capacity(24), Err(Error::TooLarge { .. })));
        assert!(matches!(
            g.layers_for(u64::MAX),
            Err(Error::TooLarge { .. })
        ));
        let one = GrowingSizing::new(1, 0.5, Layout::Line, 1, 0.99).unwrap();
        assert_eq!(one.layers_for(64).unwrap(), 64);
        assert!(matches!(
            one.layers_for(65),
            Err(Error::TooLarge { what: "layers", .. })
        ));
        for (e, t) in [(0, 0.5), (1 << 17, 0.5), (2, 0.0), (2, 1.0), (2, f64::NAN)] {
            assert!(matches!(
                GrowingSizing::new(10, 0.01, Layout::Word, e, t),
                Err(Error::InvalidParameter(_))
            ));
        }
        assert!(matches!(
            GrowingSizing::new(10, 1e-5, Layout::Word, 2, 0.8),
            Err(Error::GrowingFprBelowLayoutLimit {
                fpr: 1e-5,
                layer: 0,
                ..
            })
        ));
        // A non-scaling filter's one layer gets the target itself.
        assert!(matches!(
            GrowingSizing::non_scaling(10, 1e-6, Layout::Word),
            Err(Error::FprBelowLayoutLimit { fpr: 1e-6, .. })
        ));
        assert_eq!(
            GrowingSizing::new(0, 0.01, Layout::Word, 2, 0.8),
            Err(Error::ZeroCapacity)
        );
    }
}
