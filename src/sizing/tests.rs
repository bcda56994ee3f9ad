//! The reference values of `docs/sizing.md`, row by row, then the error cases, then properties.

use super::*;
use proptest::prelude::*;

fn mib_2dp(s: &BloomSizing) -> String {
    format!("{:.2}", s.mib())
}

#[test]
fn row_n_10m_p_0_1_gives_47_925_292_bits_5_71_mib_k_4() {
    let s = BloomSizing::optimal(10_000_000, 0.1).unwrap();
    assert_eq!(s.bits, 47_925_292);
    assert_eq!(mib_2dp(&s), "5.71");
    assert_eq!(s.hashes, 4);
}

#[test]
fn row_n_10m_p_0_01_gives_95_850_584_bits_11_43_mib_k_7() {
    let s = BloomSizing::optimal(10_000_000, 0.01).unwrap();
    assert_eq!(s.bits, 95_850_584);
    assert_eq!(mib_2dp(&s), "11.43");
    assert_eq!(s.hashes, 7);
}

#[test]
fn row_n_10m_p_0_001_gives_143_775_876_bits_17_14_mib_k_10() {
    let s = BloomSizing::optimal(10_000_000, 0.001).unwrap();
    assert_eq!(s.bits, 143_775_876);
    assert_eq!(mib_2dp(&s), "17.14");
    assert_eq!(s.hashes, 10);
}

#[test]
fn row_n_100m_p_0_001_gives_1_437_758_757_bits_about_171_mib() {
    let s = BloomSizing::optimal(100_000_000, 0.001).unwrap();
    assert_eq!(s.bits, 1_437_758_757);
    assert_eq!(s.bytes(), 179_719_845);
    assert_eq!(format!("{:.0}", s.mib()), "171");
}

#[test]
fn row_overwrite_100_buckets_forgets_with_p_0_99_after_459_not_458() {
    let forgotten = |x| 1.0 - overwrite_remember_probability(100, x).unwrap();
    assert!(forgotten(459) >= 0.99, "{}", forgotten(459));
    assert!(forgotten(458) < 0.99, "{}", forgotten(458));
    // The same fact through the window function: remembered with p >= 0.01 up to 458.
    assert_eq!(overwrite_window(100, 0.01).unwrap(), 458);
}

#[test]
fn row_overwrite_x_3_6m_remember_0_1_gives_1_563_461_buckets() {
    assert_eq!(overwrite_buckets(3_600_000, 0.1).unwrap(), 1_563_461);
}

#[test]
fn row_overwrite_x_3_6m_remember_0_9_gives_34_168_399_buckets() {
    assert_eq!(overwrite_buckets(3_600_000, 0.9).unwrap(), 34_168_399);
}

/// The usual trap: solving `0.9 = 1 - (1 - 1/N)^x` gives 1,563,461 buckets, a 90% chance of
/// having *forgotten* an hour-old item, not of remembering it.
#[test]
fn the_forget_probability_answer_remembers_only_10_percent() {
    let p = overwrite_remember_probability(1_563_461, 3_600_000).unwrap();
    assert!((0.1..0.1001).contains(&p), "{p}");
    let p = overwrite_remember_probability(34_168_399, 3_600_000).unwrap();
    assert!((0.9..0.9001).contains(&p), "{p}");
}

#[test]
fn row_overfull_bloom_p_0_01_k_7_t_2_is_about_13_percent() {
    let estimate = overfull_fpr_estimate(7, 2.0).unwrap();
    assert_eq!(format!("{:.0}%", estimate * 100.0), "13%");
    assert!((estimate - 0.75f64.powi(7)).abs() < 1e-15);
    // The rule of thumb underestimates for the rounded-up k; the exact expectation is 15.7%.
    let s = BloomSizing::optimal(10_000_000, 0.01).unwrap();
    let exact = s.fpr_at(20_000_000);
    assert_eq!(format!("{:.1}%", exact * 100.0), "15.7%");
    // At t = 1 both agree with the target to within the rounding of k.
    assert!((overfull_fpr_estimate(7, 1.0).unwrap() - 0.5f64.powi(7)).abs() < 1e-15);
}

#[test]
fn classic_sizing_slightly_exceeds_target_at_capacity_and_guaranteed_does_not() {
    for (p, classic_rate) in [(0.1, 0.10261), (0.01, 0.010040), (0.001, 0.0010001)] {
        let classic = BloomSizing::optimal(10_000_000, p).unwrap();
        let rate = classic.fpr_at(10_000_000);
        assert!(rate > p && rate < classic_rate, "p={p}: {rate}");
        let g = BloomSizing::guaranteed(10_000_000, p).unwrap();
        assert!(g.fpr_at(10_000_000) <= p);
        assert_eq!(g.hashes, classic.hashes);
        // Minimal: one bit less would miss the target.
        let one_less = BloomSizing {
            bits: g.bits - 1,
            ..g
        };
        assert!(
            one_less.fpr_at(10_000_000) > p,
            "p={p}: guaranteed is not minimal"
        );
    }
}

#[test]
fn invalid_fpr_is_an_error() {
    for p in [
        0.0,
        1.0,
        -0.5,
        1.5,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
    ] {
        let err = BloomSizing::optimal(100, p).unwrap_err();
        assert!(matches!(err, Error::InvalidFpr(_)), "{p}: {err:?}");
        assert!(BloomSizing::guaranteed(100, p).is_err());
    }
    assert_eq!(
        BloomSizing::optimal(100, 0.0).unwrap_err().to_string(),
        "false-positive rate must be strictly between 0 and 1, got 0"
    );
}

#[test]
fn zero_capacity_is_an_error() {
    assert_eq!(BloomSizing::optimal(0, 0.01), Err(Error::ZeroCapacity));
    assert_eq!(BloomSizing::guaranteed(0, 0.01), Err(Error::ZeroCapacity));
}

#[test]
fn bits_beyond_u64_or_the_address_space_are_an_error() {
    // 2^63 items at 1% need 9.6 bits each: far past u64.
    let err = BloomSizing::optimal(1 << 63, 0.01).unwrap_err();
    assert!(
        matches!(err, Error::TooLarge { what: "bits", .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("bits needed"));
    // The smallest positive fpr still sizes a small filter (1074 hashes, ~1549 bits per item).
    let tiny = BloomSizing::optimal(10, f64::from_bits(1)).unwrap();
    assert_eq!(tiny.hashes, 1074);
    assert!(BloomSizing::optimal(u64::MAX / 1000, f64::from_bits(1)).is_err());
}

#[test]
fn invalid_overwrite_inputs_are_errors() {
    for r in [0.0, 1.0, -1.0, 2.0, f64::NAN] {
        assert!(matches!(
            overwrite_buckets(10, r),
            Err(Error::InvalidProbability(_))
        ));
        assert!(matches!(
            overwrite_window(10, r),
            Err(Error::InvalidProbability(_))
        ));
    }
    assert_eq!(
        overwrite_remember_probability(0, 5),
        Err(Error::ZeroBuckets)
    );
    assert_eq!(overwrite_window(0, 0.5), Err(Error::ZeroBuckets));
    // Remembering across u64::MAX insertions with probability 0.999999 needs ~1.8e25 buckets.
    assert!(matches!(
        overwrite_buckets(u64::MAX, 0.999_999),
        Err(Error::TooLarge {
            what: "buckets",
            ..
        })
    ));
    assert!(matches!(
        overwrite_window(u64::MAX, 1e-300),
        Err(Error::TooLarge {
            what: "insertions",
            ..
        })
    ));
}

#[test]
fn overwrite_edge_cases() {
    // One bucket: any later insertion overwrites it.
    assert_eq!(overwrite_remember_probability(1, 0).unwrap(), 1.0);
    assert_eq!(overwrite_remember_probability(1, 1).unwrap(), 0.0);
    assert_eq!(overwrite_window(1, 0.5).unwrap(), 0);
    assert_eq!(overwrite_buckets(0, 0.999).unwrap(), 1);
    assert_eq!(overwrite_buckets(1, 0.5).unwrap(), 2);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn bits_are_monotone_in_capacity(n in 1u64..1u64 << 40, extra in 0u64..1 << 20, p in 1e-12f64..0.999) {
        let a = BloomSizing::optimal(n, p).unwrap();
        let b = BloomSizing::optimal(n + extra, p).unwrap();
        prop_assert!(a.bits <= b.bits);
        prop_assert!(a.hashes <= b.hashes);
        let (ga, gb) = (BloomSizing::guaranteed(n, p).unwrap(), BloomSizing::guaranteed(n + extra, p).unwrap());
        prop_assert!(ga.bits <= gb.bits);
    }

    #[test]
    fn bits_and_hashes_are_monotone_in_one_over_fpr(n in 1u64..1u64 << 40, p in 1e-12f64..0.999, shrink in 0.0f64..1.0) {
        let q = p * shrink; // q <= p: a stricter target
        prop_assume!(q > 0.0);
        let loose = BloomSizing::optimal(n, p).unwrap();
        let strict = BloomSizing::optimal(n, q).unwrap();
        prop_assert!(loose.bits <= strict.bits);
        prop_assert!(loose.hashes <= strict.hashes);
    }

    #[test]
    fn guaranteed_rate_at_capacity_is_at_most_the_target(n in 1u64..1u64 << 40, p in 1e-12f64..0.999) {
        let s = BloomSizing::guaranteed(n, p).unwrap();
        prop_assert!(s.fpr_at(n) <= p, "fpr_at({n}) = {} > {p}", s.fpr_at(n));
        let classic = BloomSizing::optimal(n, p).unwrap();
        prop_assert!(s.bits >= classic.bits);
    }

    #[test]
    fn guaranteed_costs_at_most_13_percent_more_bits(n in 1000u64..1u64 << 40, p in 1e-12f64..0.5) {
        // The worst case is 1/p just past a power of two, where k jumps: at p -> 1/2 from below,
        // k = 2 and m' / m = (2 / -ln(1 - 2^-1/2)) / (1 / ln 2) = 1.1288. (Above p = 1/2 the
        // classic m is far below one bit per item and the ratio is unbounded; nobody sizes there.)
        let (s, classic) = (BloomSizing::guaranteed(n, p).unwrap(), BloomSizing::optimal(n, p).unwrap());
        prop_assert!((s.bits as f64) <= classic.bits as f64 * 1.129 + 2.0, "{} vs {}", s.bits, classic.bits);
    }

    #[test]
    fn classic_rate_at_capacity_stays_within_rounding_of_k(n in 1000u64..1u64 << 40, p in 1e-12f64..0.5) {
        let s = BloomSizing::optimal(n, p).unwrap();
        // Never below the optimum p (up to float noise, and the rounding up of m), never more
        // than 12.5% above it: the worst case is k* = log2(1/p) just above 1, rounded to k = 2,
        // giving (1 - 2^-2)^2 = 0.5625 against p = 0.5.
        let rate = s.fpr_at(n);
        prop_assert!(rate >= p * (1.0 - 1e-3) && rate <= p * 1.125 * (1.0 + 1e-9), "{rate} vs {p}");
    }

    #[test]
    fn overwrite_buckets_and_remember_probability_invert_each_other(x in 0u64..1u64 << 36, r in 0.0001f64..0.9999) {
        let n = overwrite_buckets(x, r).unwrap();
        prop_assert!(overwrite_remember_probability(n, x).unwrap() >= r);
        if n > 1 {
            prop_assert!(overwrite_remember_probability(n - 1, x).unwrap() < r);
        }
    }

    #[test]
    fn overwrite_window_and_remember_probability_invert_each_other(n in 1u64..1u64 << 36, r in 0.0001f64..0.9999) {
        let x = overwrite_window(n, r).unwrap();
        prop_assert!(overwrite_remember_probability(n, x).unwrap() >= r);
        prop_assert!(overwrite_remember_probability(n, x + 1).unwrap() < r);
    }

    #[test]
    fn remember_probability_is_monotone(n in 1u64..1u64 << 40, x in 0u64..1u64 << 40, dn in 0u64..1000, dx in 0u64..1000) {
        let p = overwrite_remember_probability(n, x).unwrap();
        prop_assert!((0.0..=1.0).contains(&p));
        prop_assert!(overwrite_remember_probability(n + dn, x).unwrap() >= p);
        prop_assert!(overwrite_remember_probability(n, x + dx).unwrap() <= p);
    }
}

/// The `guaranteed` column of the table in docs/sizing.md.
#[test]
fn guaranteed_bits_match_docs_table() {
    let bits = |p| BloomSizing::guaranteed(10_000_000, p).unwrap().bits;
    assert_eq!(bits(0.1), 48_407_634);
    assert_eq!(bits(0.01), 95_929_548);
    assert_eq!(bits(0.001), 143_776_394);
}

/// Inputs that took from a second to many minutes when the closed form was corrected one step
/// at a time across runs of bucket counts that f64 cannot tell apart.
const FORMER_HANGS: [(u64, f64); 6] = [
    (1, 0.999_999_999_999),
    (1, 1.0 - 1e-13),
    (1_000, 0.999_999_999_99),
    (3_600_000, 0.999_999_999_9),
    (1, 1.0 - 1e-15),
    (1, 1.0 - f64::EPSILON / 2.0), // the largest f64 below 1
];

/// `overwrite_buckets`'s promise: `n` remembers with probability >= r, and `n - 1` does not.
fn assert_buckets_turn(x: u64, r: f64, n: u64) {
    assert!(remember(n, x) >= r, "x={x} r={r}: n={n}");
    assert!(n == 1 || remember(n - 1, x) < r, "x={x} r={r}: n={n}");
}

#[test]
fn former_hangs_answer_within_the_step_bound() {
    for (x, r) in FORMER_HANGS {
        let (n, steps) = overwrite_buckets_counted(x, r);
        let n = n.unwrap();
        assert!(steps <= MAX_SEARCH_STEPS, "x={x} r={r}: {steps} steps");
        assert_buckets_turn(x, r, n);
        // The answer sits near the closed form 1 / (1 - r^{1/x}) = x / -ln(r) (for r near 1).
        let closed = x as f64 / -r.ln();
        assert!(
            (n as f64 / closed - 1.0).abs() < 0.5,
            "x={x} r={r}: {n} vs {closed}"
        );
        // The window of that many buckets is at least x.
        let (window, steps) = overwrite_window_counted(n, r);
        assert!(window.unwrap() >= x && steps <= MAX_SEARCH_STEPS);
    }
    // r = 1 - 2^-53 with one later insertion: about 2^53 buckets, where f64 still counts exactly.
    let n = overwrite_buckets(1, 1.0 - f64::EPSILON / 2.0).unwrap();
    assert!((1u64 << 52..1u64 << 54).contains(&n), "{n}");
    // 1 - EPSILON / 4 rounds to 1.0: not a valid probability.
    assert!(overwrite_buckets(1, 1.0 - f64::EPSILON / 4.0).is_err());
}

#[test]
fn buckets_are_the_least_count_where_a_scan_can_check() {
    for x in [0, 1, 2, 3, 10, 100, 1000] {
        for r in [1e-300, 1e-9, 0.01, 0.1, 0.5, 0.9, 0.99, 0.999] {
            let n = overwrite_buckets(x, r).unwrap();
            let least = (1..).find(|&m| remember(m, x) >= r).unwrap();
            assert_eq!(n, least, "x={x} r={r}");
        }
    }
    for n in [1, 2, 3, 10, 100, 1000] {
        for r in [1e-9, 0.01, 0.1, 0.5, 0.9, 0.99] {
            let x = overwrite_window(n, r).unwrap();
            let first_forgotten = (0..).find(|&y| remember(n, y) < r).unwrap();
            assert_eq!(x + 1, first_forgotten, "n={n} r={r}");
        }
    }
}

#[test]
fn search_returns_a_turning_point_even_of_a_non_monotone_predicate() {
    // True from 1000 on, except at 5000 and on 7000..7010: a stand-in for a probability that
    // moves the wrong way by an ulp across a run of equal inputs.
    let holds = |n: u64| n >= 1000 && n != 5000 && !(7000..7010).contains(&n);
    for guess in [0, 1, 999, 1000, 4999, 5000, 5001, 7005, 1 << 40, u64::MAX] {
        let (found, steps) = turning_point(1, u64::MAX, guess, holds);
        let n = found.unwrap();
        assert!(holds(n) && !holds(n - 1), "guess {guess}: {n}");
        assert!(steps <= MAX_SEARCH_STEPS, "guess {guess}: {steps}");
    }
    // A predicate that never holds ends at `hi`; one that holds at `lo` returns `lo`.
    assert_eq!(turning_point(1, u64::MAX, 77, |_| false).0, None);
    assert_eq!(turning_point(5, 9, 7, |_| true).0, Some(5));
}

/// Integers spread over the whole u64 range: log-uniform, plus the ends.
fn wide_u64() -> impl Strategy<Value = u64> {
    prop_oneof![
        (0.0f64..64.0).prop_map(|e| 2f64.powf(e) as u64),
        Just(0u64),
        Just(1u64),
        Just(u64::MAX),
        any::<u64>(),
    ]
}

/// Probabilities over all of (0, 1): uniform, next to 0 (down to 1e-300), and next to 1 (down to
/// 1 - 2^-53, the largest f64 below 1).
fn wide_probability() -> impl Strategy<Value = f64> {
    prop_oneof![
        (1e-6f64..1.0 - 1e-6),
        (-300.0f64..-1.0).prop_map(|e| 10f64.powf(e)),
        (1.0f64..53.0).prop_map(|e| 1.0 - 2f64.powf(-e)),
        (1.0f64..16.0).prop_map(|e| 1.0 - 10f64.powf(-e)),
        Just(1.0 - f64::EPSILON / 2.0),
        Just(f64::MIN_POSITIVE),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4000, ..ProptestConfig::default() })]

    #[test]
    fn overwrite_buckets_turns_within_the_step_bound_everywhere(x in wide_u64(), r in wide_probability()) {
        let (n, steps) = overwrite_buckets_counted(x, r);
        prop_assert!(steps <= MAX_SEARCH_STEPS, "x={x} r={r}: {steps} steps");
        match n {
            Ok(n) => {
                prop_assert!(remember(n, x) >= r);
                prop_assert!(n == 1 || remember(n - 1, x) < r);
            }
            Err(Error::TooLarge { what: "buckets", .. }) => prop_assert!(remember(u64::MAX, x) < r),
            Err(e) => prop_assert!(false, "{e:?}"),
        }
    }

    #[test]
    fn overwrite_window_turns_within_the_step_bound_everywhere(n in wide_u64(), r in wide_probability()) {
        let n = n.max(1);
        let (x, steps) = overwrite_window_counted(n, r);
        prop_assert!(steps <= MAX_SEARCH_STEPS, "n={n} r={r}: {steps} steps");
        match x {
            Ok(x) => {
                prop_assert!(remember(n, x) >= r);
                prop_assert!(remember(n, x + 1) < r);
            }
            Err(Error::TooLarge { what: "insertions", .. }) => prop_assert!(remember(n, u64::MAX) >= r),
            Err(e) => prop_assert!(false, "{e:?}"),
        }
    }

    #[test]
    fn search_finds_the_threshold_of_a_monotone_predicate_from_any_guess(threshold in wide_u64(), guess in wide_u64()) {
        let (found, steps) = turning_point(0, u64::MAX, guess, |n| n >= threshold);
        prop_assert_eq!(found, Some(threshold));
        prop_assert!(steps <= MAX_SEARCH_STEPS);
    }

    #[test]
    fn overfull_estimate_is_a_probability_for_every_valid_input(hashes in 1u32.., load in 0.0f64..1e300) {
        let p = overfull_fpr_estimate(hashes, load).unwrap();
        prop_assert!((0.0..=1.0).contains(&p));
    }

    #[test]
    fn fpr_at_is_a_probability_for_every_field_value(bits in any::<u64>(), hashes in any::<u32>(), items in any::<u64>()) {
        let s = BloomSizing { capacity: 1, bits, hashes };
        let p = s.fpr_at(items);
        prop_assert!((0.0..=1.0).contains(&p), "{s:?} {items}: {p}");
    }
}

#[test]
fn overfull_estimate_rejects_what_is_not_a_load() {
    for load in [-1.0, -0.0001, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        assert!(
            matches!(
                overfull_fpr_estimate(7, load),
                Err(Error::InvalidParameter(_))
            ),
            "{load}"
        );
    }
    assert_eq!(
        overfull_fpr_estimate(0, 1.0),
        Err(Error::InvalidParameter("hashes must be at least 1"))
    );
    assert_eq!(overfull_fpr_estimate(7, 0.0), Ok(0.0));
    assert_eq!(overfull_fpr_estimate(1, 1.0), Ok(0.5));
}

#[test]
fn fpr_at_is_defined_for_degenerate_sizings() {
    let s = BloomSizing {
        capacity: 10,
        bits: 0,
        hashes: 3,
    };
    assert_eq!(s.fpr_at(0), 0.0);
    assert_eq!(s.fpr_at(5), 1.0);
    let no_hashes = BloomSizing {
        bits: 100,
        hashes: 0,
        ..s
    };
    assert_eq!(no_hashes.fpr_at(0), 1.0);
    assert_eq!(no_hashes.fpr_at(5), 1.0);
}

/// `docs/sizing.md`, "Duplicates against memory": every figure of the table is the sizing's,
/// recomputed here (buckets from `overwrite_buckets`, the rates from
/// `overwrite_remember_probability`), and the table has exactly these rows.
#[test]
fn the_duplicates_table_of_the_sizing_notes_is_the_sizing() {
    const WINDOW: u64 = 3_600_000;
    const BUCKET_BYTES: u64 = 8;
    let doc = include_str!("../../docs/sizing.md");
    let section = &doc[doc.find("### Duplicates against memory").unwrap()..];
    let table: Vec<&str> = section
        .lines()
        .skip_while(|line| !line.starts_with('|'))
        .take_while(|line| line.starts_with('|'))
        .skip(2)
        .collect();
    let processed_again = |buckets: u64, later: u64| {
        percent(1.0 - overwrite_remember_probability(buckets, later).unwrap())
    };
    let rows: Vec<String> = [0.5, 0.9, 0.99, 0.999]
        .into_iter()
        .map(|r| {
            let once = overwrite_buckets(WINDOW, r).unwrap();
            let twice = overwrite_buckets(2 * WINDOW, r).unwrap();
            format!(
                "| {r} | {} | {} | {} | {} | {} | {} | {} |",
                grouped(once),
                human_bytes(once * BUCKET_BYTES),
                processed_again(once, WINDOW),
                grouped(twice),
                human_bytes(twice * BUCKET_BYTES),
                processed_again(twice, 2 * WINDOW),
                processed_again(once, 2 * WINDOW),
            )
        })
        .collect();
    assert_eq!(
        table,
        rows,
        "docs/sizing.md's table should read\n{}",
        rows.join("\n")
    );
}

/// `1,234,567`, as the sizing notes write counts.
fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Bytes in MiB or GiB with 3 significant digits, as `seen size` writes them: `261 MiB`.
fn human_bytes(bytes: u64) -> String {
    let (value, unit) = if bytes >= 1023 << 20 {
        (bytes as f64 / (1u64 << 30) as f64, "GiB")
    } else {
        (bytes as f64 / (1u64 << 20) as f64, "MiB")
    };
    match value {
        v if v >= 99.95 => format!("{v:.0} {unit}"),
        v if v >= 9.995 => format!("{v:.1} {unit}"),
        v => format!("{v:.2} {unit}"),
    }
}

/// A probability as a percentage with 3 significant digits: `19.0%`, `1.99%`, `0.100%`.
fn percent(p: f64) -> String {
    let v = p * 100.0;
    // The exponent after rounding to 3 significant digits (9.9999 is 1.00e1).
    let exponent: i32 = format!("{v:.2e}")
        .split_once('e')
        .unwrap()
        .1
        .parse()
        .unwrap();
    let digits = (2 - exponent).max(0) as usize;
    format!("{v:.digits$}%")
}
