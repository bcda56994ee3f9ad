//! The blocked model against closed forms and a high-precision reference, its bounds, the
//! limits, and the properties of the search.

use super::*;
use crate::sizing::BloomSizing;
use core::f64::consts::LN_2;
use proptest::prelude::*;

const LAYOUTS: [Layout; 2] = [Layout::Word, Layout::Line];

/// Bits per item of a classic Bloom filter with the real-valued optimal `k`.
fn classic_bits_per_item(fpr: f64) -> f64 {
    -fpr.ln() / (LN_2 * LN_2)
}

/// `(layout, k, load, rate)`: the expected rate (without the collision term) at that load, from
/// `docs/reference/blocked_fpr.py` (the inclusion-exclusion closed form summed over the Poisson
/// load in closed form, exact rational coefficients, 120 digits). Regenerate with
/// `python3 docs/reference/blocked_fpr.py` (needs `pip install mpmath`).
#[rustfmt::skip]
const REFERENCE: [(Layout, u32, f64, f64); 28] = [
    (Layout::Word, 1, 44.3614, 0.499999847220004), // p = 0.5
    (Layout::Word, 3, 12.7146, 0.09999942024997499), // p = 1e-1
    (Layout::Word, 5, 5.27239, 0.010000003980256036), // p = 1e-2
    (Layout::Word, 7, 2.66691, 0.0009999955948828154), // p = 1e-3
    (Layout::Word, 9, 1.40721, 9.999973159093187e-05), // p = 1e-4
    (Layout::Word, 12, 0.377072, 1.000001042966761e-06), // p = 1e-6
    (Layout::Word, 14, 0.0846807, 9.999985869541875e-09), // p = 1e-8
    (Layout::Word, 17, 0.0144138, 9.999973325381692e-11), // p = 1e-10
    (Layout::Word, 19, 0.00176501, 1.0000007652521224e-12), // p = 1e-12
    (Layout::Word, 23, 4.80721e-05, 9.999998534543867e-16), // p = 1e-15
    (Layout::Word, 28, 6.27578e-09, 1.0000005583914729e-20), // p = 1e-20
    (Layout::Word, 32, 8.73575e-14, 1.0000002010803102e-25), // p = 1e-25
    (Layout::Word, 32, 8.73575e-19, 1.0000001018859528e-30), // p = 1e-30
    (Layout::Word, 1, 0.064032, 0.00099999966675005), // p = 1e-3
    (Layout::Line, 1, 354.891, 0.4999996519074062), // p = 0.5
    (Layout::Line, 3, 105.878, 0.10000094970369437), // p = 1e-1
    (Layout::Line, 6, 51.6234, 0.010000021739355037), // p = 1e-2
    (Layout::Line, 9, 32.9356, 0.001000005377218577), // p = 1e-3
    (Layout::Line, 12, 23.2408, 9.999982059355341e-05), // p = 1e-4
    (Layout::Line, 16, 13.1874, 9.999669118672075e-07), // p = 1e-6
    (Layout::Line, 20, 8.0672, 1.0000041160554419e-08), // p = 1e-8
    (Layout::Line, 24, 5.07256, 1.0000067951363933e-10), // p = 1e-10
    (Layout::Line, 27, 3.21184, 1.0000127058931168e-12), // p = 1e-12
    (Layout::Line, 31, 1.5964, 1.0000236862917822e-15), // p = 1e-15
    (Layout::Line, 39, 0.453224, 9.999927344046029e-21), // p = 1e-20
    (Layout::Line, 46, 0.107632, 1.0000146381762412e-25), // p = 1e-25
    (Layout::Line, 53, 0.0204183, 1.000012275575158e-30), // p = 1e-30
    (Layout::Line, 64, 13.2058, 0.0009999831948837672), // p = 1e-3
];

#[test]
fn model_matches_the_high_precision_reference_from_0_5_down_to_1e_30() {
    for (layout, k, load, want) in REFERENCE {
        let got = Tables::new(layout, &[k]).fpr(0, load);
        let error = (got / want - 1.0).abs();
        assert!(
            error < 1e-12,
            "{layout:?} k={k} load={load}: {got:e} vs {want:e} ({error:e})"
        );
    }
}

#[test]
fn model_matches_closed_forms_for_one_hash() {
    // k = 1: a query is a false positive iff its one position is among the j draws, and the
    // Poisson mixture of (1 - 1/B)^j is e^{-λ/B}.
    for layout in LAYOUTS {
        let b = f64::from(layout.block_bits());
        let mut model = Tables::new(layout, &[1]);
        for j in 0..40 {
            let want = 1.0 - (1.0 - 1.0 / b).powi(j);
            let got = model.load_fpr(0, j as usize);
            assert!(
                (got - want).abs() < 1e-14,
                "{layout:?} j={j}: {got} vs {want}"
            );
        }
        for load in [1e-6, 0.5, 3.0, 40.0, 0.6 * b] {
            let want = -(-load / b).exp_m1();
            let got = model.fpr(0, load);
            assert!(
                (got / want - 1.0).abs() < 1e-12,
                "{layout:?} λ={load}: {got} vs {want}"
            );
        }
    }
}

#[test]
fn model_matches_two_draws_into_one_item_by_hand() {
    // k = 2, one item in a word: the query's 2 draws are distinct with probability 63/64, and
    // the item's 2 draws must be those two (2 orders of 64^2); equal with probability 1/64, and
    // the item must cover that one position, 1 - (63/64)^2.
    let f = Tables::new(Layout::Word, &[2]).load_fpr(0, 1);
    let want = 63.0 / 64.0 * 2.0 / 4096.0 + 1.0 / 64.0 * (1.0 - (63.0f64 / 64.0).powi(2));
    assert!((f - want).abs() < 1e-17, "{f} vs {want}");
    assert_eq!(Tables::new(Layout::Line, &[3]).load_fpr(0, 0), 0.0);
}

#[test]
fn bounds_are_below_the_model_and_the_model_rises_with_the_load() {
    for layout in LAYOUTS {
        for k in [1, 2, 5, 9, 17, 32] {
            let mut model = Tables::new(layout, &[k]);
            let mut last = 0.0;
            for i in 1..=60 {
                let load = load_bracket(k, layout) * f64::from(i) / 60.0;
                let exact = model.fpr(0, load);
                let bound = lower_bound(load, k, layout);
                let closed = closed_lower_bound(load, k, layout);
                assert!(closed <= bound * (1.0 + 1e-12), "{layout:?} k={k} λ={load}");
                assert!(bound <= exact * (1.0 + 1e-12), "{layout:?} k={k} λ={load}");
                assert!(
                    exact > last,
                    "{layout:?} k={k} λ={load}: {exact} after {last}"
                );
                last = exact;
            }
            // The bracket's end is past the target cap: no target at or below it is capped.
            assert!(
                last >= TARGET_CAP * (1.0 - 1e-12),
                "{layout:?} k={k}: {last}"
            );
        }
    }
}

/// The limits are where the bits per item first reach `MAX_COST` times the classic ones
/// (scanned from p = 1/2 down), rounded up to two significant digits: at `min_fpr` the cost is
/// at most `MAX_COST`, 2% below it more.
#[test]
fn min_fpr_is_where_the_cost_reaches_max_cost() {
    let ratio = |layout: Layout, fpr: f64| {
        let load = choose(layout, fpr * SIZING_MARGIN).load;
        f64::from(layout.block_bits()) / load / classic_bits_per_item(fpr)
    };
    for layout in LAYOUTS {
        let min = min_fpr(layout);
        let at = ratio(layout, min);
        assert!(at <= MAX_COST && at > 0.99 * MAX_COST, "{layout:?}: {at}");
        assert!(ratio(layout, min * 0.98) > MAX_COST, "{layout:?}");
        // From 1/2 down to the limit, in 60 steps per decade.
        let decades = -min.log10();
        let steps = (decades * 60.0) as i32;
        for i in 0..=steps {
            let p = 0.5 * 10f64.powf(-f64::from(i) / 60.0);
            if p >= min {
                let r = ratio(layout, p);
                assert!(r <= MAX_COST, "{layout:?} p={p:e}: {r}");
            }
        }
    }
}

/// Where the hash stops distinguishing items, at each layout's limit: far below the limit, so
/// the limits refuse every target the hash could not deliver.
#[test]
fn hash_floor_is_far_below_every_limit() {
    for layout in LAYOUTS {
        let min = min_fpr(layout);
        let load = choose(layout, min * SIZING_MARGIN).load;
        let floor = collision_fpr(load);
        assert!(load > 0.5 && load < 2.0, "{layout:?}: {load}");
        assert!(floor < min * 1e-4, "{layout:?}: {floor:e}");
        assert!((floor / (load * 2f64.powi(-64)) - 1.0).abs() < 1e-12);
    }
}

#[test]
fn best_hashes_are_far_below_the_bound() {
    for layout in LAYOUTS {
        for fpr in [0.5, 0.1, 0.01, min_fpr(layout)] {
            let k = choose(layout, fpr * SIZING_MARGIN).hashes();
            assert!(k <= max_hashes(layout) / 2, "{layout:?} {fpr}: k = {k}");
        }
    }
}

/// The search covers `1..=max_hashes`; this checks that no `k` up to four times that bound
/// could do better, by the same lower bound that skips `k` inside the range.
#[test]
fn no_hashes_past_the_bound_beat_the_choice() {
    for layout in LAYOUTS {
        let decades = -min_fpr(layout).log10();
        for i in 0..=(decades * 4.0) as i32 {
            let fpr = (0.5 * 10f64.powf(-f64::from(i) / 4.0)).max(min_fpr(layout));
            let target = fpr * SIZING_MARGIN;
            let best = choose(layout, target).load;
            for k in max_hashes(layout) + 1..=4 * max_hashes(layout) {
                let bound = lower_bound(best, k, layout);
                assert!(
                    bound * (1.0 - PRUNE_SLACK) > target,
                    "{layout:?} p={fpr:e} k={k}"
                );
            }
        }
    }
}

/// The cost of the search, counted instead of timed: the lower bound leaves few `k` to the
/// exact model.
#[test]
fn search_evaluates_few_hashes_exactly() {
    for layout in LAYOUTS {
        for fpr in [0.5, 0.1, 0.01, 1e-3, 1e-4, min_fpr(layout)] {
            let evaluated = choose(layout, fpr * SIZING_MARGIN).evaluated;
            assert!(
                (1..=12).contains(&evaluated),
                "{layout:?} {fpr}: {evaluated}"
            );
        }
    }
}

/// The figures of `docs/sizing.md`, the Limits table (n = 1,000,000).
#[test]
fn sizing_matches_the_docs_table() {
    let row = |fpr: f64, layout: Layout| {
        let s = blocked(1_000_000, fpr, layout).unwrap();
        (s.hashes, format!("{:.2}", s.bits_per_item()))
    };
    assert_eq!(row(0.1, Layout::Word), (3, "5.11".to_string()));
    assert_eq!(row(0.01, Layout::Word), (5, "12.26".to_string()));
    assert_eq!(row(0.001, Layout::Word), (7, "24.21".to_string()));
    assert_eq!(row(0.1, Layout::Line), (3, "4.90".to_string()));
    assert_eq!(row(0.01, Layout::Line), (6, "9.99".to_string()));
    assert_eq!(row(0.001, Layout::Line), (9, "15.63".to_string()));
}

#[test]
fn invalid_targets_are_typed_errors() {
    assert_eq!(blocked(0, 0.01, Layout::Word), Err(Error::ZeroCapacity));
    for fpr in [0.0, 1.0, -0.1, f64::NAN, f64::INFINITY] {
        assert!(matches!(
            blocked(10, fpr, Layout::Line),
            Err(Error::InvalidFpr(_))
        ));
    }
    assert_eq!(
        blocked(10, 1e-6, Layout::Word),
        Err(Error::FprBelowLayoutLimit {
            layout: Layout::Word,
            fpr: 1e-6,
            min_fpr: 6.4e-6,
            use_layout: Some(Layout::Line),
        })
    );
    let err = blocked(10, 1e-16, Layout::Word).unwrap_err();
    assert_eq!(
        err,
        Error::FprBelowLayoutLimit {
            layout: Layout::Word,
            fpr: 1e-16,
            min_fpr: 6.4e-6,
            use_layout: None,
        }
    );
    assert_eq!(
        err.to_string(),
        "false-positive rate 1e-16 is below 6.4e-6, the lowest the Word layout reaches in this \
         structure (below it the layout needs more than 4 times the memory of a classic Bloom \
         filter); no layout of this crate reaches it"
    );
    assert!(matches!(
        blocked(10, 1e-30, Layout::Line),
        Err(Error::FprBelowLayoutLimit {
            layout: Layout::Line,
            use_layout: None,
            ..
        })
    ));
    assert!(matches!(
        blocked(u64::MAX / 4, 0.01, Layout::Word),
        Err(Error::TooLarge { what: "bits", .. })
    ));
}

#[test]
fn the_largest_capacities_are_refused_not_overflowed() {
    // Found by bisection: the first capacity whose line count rounds to 2^55, one past
    // `u64::MAX / 512` lines. It used to pass the float comparison and overflow `lines * 512`
    // (a panic in debug builds, a 0-bit filter in release).
    for (capacity, fpr, layout) in [
        (12_241_044_985_127_500_800, 0.5, Layout::Word),
        (3_609_837_045_854_972_672, 0.1, Layout::Word),
        (12_241_044_985_127_451_648, 0.5, Layout::Line),
    ] {
        assert!(
            matches!(
                blocked(capacity, fpr, layout),
                Err(Error::TooLarge { what: "bits", .. })
            ),
            "{capacity} {fpr} {layout:?}"
        );
        let below = blocked(capacity - 1, fpr, layout).unwrap();
        assert!(below.bits > 0 && below.bits.is_multiple_of(512));
    }
    for layout in LAYOUTS {
        for fpr in [0.5, 0.1, 0.01, 1e-3] {
            for shift in 50..64 {
                for capacity in [1u64 << shift, (1 << shift) | (1 << (shift - 1)), u64::MAX] {
                    if let Ok(s) = blocked(capacity, fpr, layout) {
                        assert!(s.bits > 0 && s.blocks > 0, "{capacity} {fpr} {layout:?}");
                    }
                }
            }
        }
    }
}

#[test]
fn targets_above_one_half_get_the_filter_of_one_half() {
    for layout in LAYOUTS {
        let half = blocked(1000, 0.5 / SIZING_MARGIN, layout).unwrap();
        for fpr in [0.6, 0.9, 1.0 - f64::EPSILON] {
            let s = blocked(1000, fpr, layout).unwrap();
            assert_eq!(
                (s.bits, s.hashes),
                (half.bits, half.hashes),
                "{layout:?} {fpr}"
            );
        }
    }
}

/// `p` log-uniform in [1e-30, 0.5].
fn fpr() -> impl Strategy<Value = f64> {
    (-30.0f64..0.5f64.log10()).prop_map(|e| 10f64.powf(e))
}

/// Capacities log-uniform in [1, 1e12].
fn capacity() -> impl Strategy<Value = u64> {
    (0.0f64..12.0).prop_map(|e| 10f64.powf(e) as u64)
}

fn layout() -> impl Strategy<Value = Layout> {
    prop_oneof![Just(Layout::Word), Just(Layout::Line)]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 192, ..ProptestConfig::default() })]

    /// Over p in [1e-30, 0.5] and capacities up to 1e12: an answer exactly above the limit, and
    /// then one that meets the target within `MAX_COST` times the classic memory (plus one cache
    /// line of rounding), grows as p shrinks or the capacity grows; below the limit exactly the typed
    /// error. (Every loop of the search is bounded by construction; `search_evaluates_...`
    /// counts its cost.)
    #[test]
    fn blocked_sizing_meets_the_target_monotonically_within_the_cost_bound(
        fpr in fpr(), shrink in 0.0f64..1.0, n in capacity(), extra in 0u64..1 << 20, layout in layout(),
    ) {
        let result = blocked(n, fpr, layout);
        if fpr < min_fpr(layout) {
            let use_layout = (layout == Layout::Word && fpr >= min_fpr(Layout::Line)).then_some(Layout::Line);
            prop_assert_eq!(result, Err(Error::FprBelowLayoutLimit { layout, fpr, min_fpr: min_fpr(layout), use_layout }));
            return Ok(());
        }
        let s = result.unwrap();
        prop_assert!(s.expected_fpr <= SIZING_MARGIN * fpr * (1.0 + 1e-12), "{:e} vs {fpr:e}", s.expected_fpr);
        prop_assert!(s.expected_fpr > 0.0);
        let cost_bound = MAX_COST * classic_bits_per_item(fpr) * n as f64 + 512.0;
        prop_assert!((s.bits as f64) <= cost_bound, "{} bits for {n} at {fpr:e}", s.bits);
        prop_assert_eq!(s.bits % 512, 0);
        prop_assert!(s.hashes >= 1 && s.hashes <= max_hashes(layout));
        // Monotone in p: a stricter target (if accepted) never gets fewer bits.
        let strict = fpr * (0.5 + 0.5 * shrink);
        if let Ok(t) = blocked(n, strict, layout) {
            prop_assert!(t.bits >= s.bits, "p {fpr:e} -> {strict:e}: {} -> {} bits", s.bits, t.bits);
        } else {
            prop_assert!(strict < min_fpr(layout));
        }
        // Monotone in the capacity.
        let more = blocked(n + extra, fpr, layout).unwrap();
        prop_assert!(more.bits >= s.bits);
        prop_assert_eq!(more.hashes, s.hashes);
    }

    #[test]
    fn classic_sizings_are_monotone_bounded_and_meet_the_target(
        fpr in fpr(), shrink in 0.0f64..1.0, n in capacity(), extra in 0u64..1 << 20,
    ) {
        let n = n.max(1);
        let classic = BloomSizing::optimal(n, fpr).unwrap();
        let (guaranteed, steps) = crate::sizing::guaranteed_counted(n, fpr);
        let guaranteed = guaranteed.unwrap();
        prop_assert!(steps <= crate::sizing::MAX_SEARCH_STEPS, "{steps}");
        prop_assert!(guaranteed.fpr_at(n) <= fpr);
        prop_assert!(guaranteed.bits >= classic.bits);
        prop_assert!((guaranteed.bits as f64) <= classic.bits as f64 * 1.129 + 2.0);
        prop_assert_eq!(guaranteed.hashes, classic.hashes);
        let strict = fpr * shrink;
        if strict > 0.0 {
            prop_assert!(BloomSizing::optimal(n, strict).unwrap().bits >= classic.bits);
            prop_assert!(BloomSizing::guaranteed(n, strict).unwrap().bits >= guaranteed.bits);
        }
        prop_assert!(BloomSizing::optimal(n + extra, fpr).unwrap().bits >= classic.bits);
        prop_assert!(BloomSizing::guaranteed(n + extra, fpr).unwrap().bits >= guaranteed.bits);
    }
}
