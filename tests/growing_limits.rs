//! `GrowingBloomFilter` at the ends of its schedule: a non-scaling filter holds exactly its
//! capacity (alone and under two threads), the 64-layer limit and a subnormal tightening are
//! errors that lose nothing, a stuck filter does not spin, an allocation failure in a growth is
//! reported, and `info` and the sizing describe every such filter.
#![cfg(not(seen_loom))]

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::keys;
use seen::sizing::GrowingSizing;
use seen::{Error, GrowingBloomFilter, Layout};

/// `Error::Full` means "the non-scaling filter holds its capacity": a non-scaling filter of 2^20
/// holds 2^20 new items before it refuses one, whatever the hashes (a count sampled from 2^17
/// items on would refuse up to ~1.2% early). RedisBloom's NONSCALING filter counts exactly too.
#[test]
fn a_non_scaling_filter_holds_its_whole_capacity_before_refusing() {
    for (seed, capacity) in [
        (31u64, 1u64 << 20),
        (32, 1 << 20),
        (33, 300_000),
        (34, 500_000),
    ] {
        let f = GrowingBloomFilter::builder(capacity)
            .fpr(0.01)
            .scaling(false)
            .build()
            .unwrap();
        let mut accepted = 0u64;
        for k in keys(seed, 2 * capacity as usize) {
            match f.insert(&k) {
                Ok(new) => accepted += u64::from(new),
                Err(Error::Full { .. }) => break,
                Err(e) => panic!("{e}"),
            }
        }
        assert!(
            accepted >= capacity - capacity / 1000, // 0.1% for false positives
            "capacity {capacity} (seed {seed}): Full after only {accepted} new items"
        );
        assert!(accepted <= capacity + capacity / 32, "{accepted}");
    }
}

/// Non-scaling: `Error::Full` at exactly the capacity on one thread; at most capacity + 1
/// accepted with two.
#[test]
fn non_scaling_refuses_at_exactly_the_capacity() {
    for cap in [1u64, 2, 100, 1000, 200_000] {
        let f = GrowingBloomFilter::builder(cap)
            .scaling(false)
            .build()
            .unwrap();
        let mut new = 0u64;
        let mut first_full = None;
        for (i, k) in keys(166, 2 * cap as usize + 100).iter().enumerate() {
            match f.insert(k) {
                Ok(true) => new += 1,
                Ok(false) => {}
                Err(Error::Full { capacity }) => {
                    assert_eq!(capacity, cap);
                    first_full.get_or_insert(i);
                }
                Err(e) => panic!("{e:?}"),
            }
        }
        assert_eq!(new, cap, "capacity {cap}");
        assert!(first_full.is_some());
        assert_eq!(f.info().sampled_new_items, Some(cap));
    }
    for round in 0..20 {
        let cap = 5000;
        let f = GrowingBloomFilter::builder(cap)
            .scaling(false)
            .build()
            .unwrap();
        let a = keys(200 + round, 6000);
        let b = keys(300 + round, 6000);
        let run = |ks: &[u64]| ks.iter().filter(|k| f.insert(*k) == Ok(true)).count() as u64;
        let (x, y) = std::thread::scope(|s| {
            let x = s.spawn(|| run(&a));
            let y = s.spawn(|| run(&b));
            (x.join().unwrap(), y.join().unwrap())
        });
        assert!(x + y <= cap + 1, "{} accepted", x + y);
        assert!(x + y >= cap, "{} accepted", x + y);
    }
}

/// A non-scaling filter under two threads accepts its capacity plus at most one
/// item per other thread, refuses the rest with `Full`, and loses nothing it accepted.
#[test]
fn a_non_scaling_filter_under_two_threads_does_not_overfill() {
    for round in 0..20u64 {
        let capacity = 2000u64;
        let f = GrowingBloomFilter::builder(capacity)
            .fpr(0.01)
            .scaling(false)
            .build()
            .unwrap();
        let (a, b) = (keys(60 + 2 * round, 3000), keys(61 + 2 * round, 3000));
        let run = |own: &Vec<u64>| {
            let mut ok = Vec::new();
            for k in own {
                match f.insert(k) {
                    Ok(true) => ok.push(*k),
                    Ok(false) => {}
                    Err(Error::Full { capacity: 2000 }) => {}
                    Err(e) => panic!("{e}"),
                }
            }
            ok
        };
        let (x, y) = std::thread::scope(|s| {
            let x = s.spawn(|| run(&a));
            let y = s.spawn(|| run(&b));
            (x.join().unwrap(), y.join().unwrap())
        });
        let accepted = (x.len() + y.len()) as u64;
        assert!(
            (capacity - 30..=capacity + 1).contains(&accepted),
            "round {round}: {accepted}"
        );
        assert!(x.iter().chain(&y).all(|k| f.contains(k)));
    }
}

/// A tightening ratio small enough that `P · t` underflows to 0 ends the schedule with an error
/// `insert` documents (`GrowingFprBelowLayoutLimit` or `TooLarge`), never with
/// `Error::InvalidFpr(0.0)`, which would blame the caller's fpr.
#[test]
fn a_subnormal_tightening_ends_the_schedule_with_a_documented_error() {
    let f = GrowingBloomFilter::builder(1)
        .fpr(0.01)
        .tightening(5e-324)
        .build()
        .unwrap();
    let mut errors = Vec::new();
    for k in keys(41, 10) {
        if let Err(e) = f.insert(&k) {
            errors.push(e);
        }
    }
    assert!(!errors.is_empty());
    for e in errors {
        assert!(
            matches!(
                e,
                Error::GrowingFprBelowLayoutLimit { .. } | Error::TooLarge { .. }
            ),
            "undocumented error from insert: {e:?}"
        );
    }
}

/// `MAX_LAYERS` with the default expansion of 2: with c0 = 1 the 64 capacities are 1 .. 2^63 and
/// sum to exactly u64::MAX, so layer 63 is in the schedule and `layers_for(u64::MAX)` is 64 (as
/// its doc says); any larger initial capacity stops short of 64 layers.
#[test]
fn expansion_2_reaches_64_layers_only_from_an_initial_capacity_of_1() {
    let g = GrowingSizing::new(1, 0.5, Layout::Line, 2, 0.99).unwrap();
    assert_eq!(g.layer_capacity(63), Ok(1 << 63));
    assert_eq!(g.layers_for(u64::MAX), Ok(64));
    assert!(matches!(
        g.layer_capacity(64),
        Err(Error::TooLarge { what: "layers", .. })
    ));
    let g = GrowingSizing::new(2, 0.5, Layout::Line, 2, 0.99).unwrap();
    assert!(g.layer_capacity(63).is_err());
}

// ------------------------------------------------------------------------------------------
/// The 64-layer limit (expansion 1, layers of one item) is `TooLarge { what:
/// "layers" }`, nothing accepted is lost, and the filter keeps answering.
#[test]
fn the_64_layer_limit_is_an_error_and_nothing_is_lost() {
    let f = GrowingBloomFilter::builder(1)
        .fpr(0.1)
        .layout(Layout::Line)
        .expansion(1)
        .tightening(0.95)
        .build()
        .unwrap();
    let mut accepted = Vec::new();
    let mut refused = 0;
    for k in keys(51, 200) {
        match f.insert(&k) {
            Ok(_) => accepted.push(k),
            Err(Error::TooLarge { what: "layers", .. }) => refused += 1,
            Err(e) => panic!("{e:?}"),
        }
    }
    assert_eq!(f.layers(), 64);
    assert!((64..=66).contains(&accepted.len()), "{}", accepted.len());
    assert_eq!(refused, 200 - accepted.len());
    assert!(
        accepted
            .iter()
            .all(|k| f.contains(k) && f.insert(k) == Ok(false))
    );
    let info = f.info();
    assert_eq!((info.layers, info.capacity), (64, 64));
    assert!(
        info.estimated_fpr < 0.1 && info.estimated_fpr.is_finite(),
        "{info}"
    );
}

/// A filter stuck at the end of its schedule (tightening 0.1: the word layout's
/// limit after 4 layers), hammered by two threads with new items, reports the error, never
/// hangs, accepts at most the last layer's limit, and loses nothing.
///
/// The inserts run on threads of their own so that a hang fails the test: the main thread
/// waits for their results with a deadline that working inserts never come near (40,000
/// inserts take milliseconds), where a scoped thread's join would hang with them.
#[test]
fn a_stuck_filter_under_two_threads_reports_errors_and_does_not_spin() {
    use std::sync::{Arc, mpsc};
    let f = Arc::new(
        GrowingBloomFilter::builder(100)
            .fpr(0.01)
            .tightening(0.1)
            .build()
            .unwrap(),
    );
    let accepted = Arc::new(AtomicUsize::new(0));
    let (results, finished) = mpsc::channel();
    for seed in [81, 82] {
        let (f, accepted, results) = (Arc::clone(&f), Arc::clone(&accepted), results.clone());
        std::thread::spawn(move || {
            let (mut ok, mut refused) = (Vec::new(), 0usize);
            for k in keys(seed, 20_000) {
                match f.insert(&k) {
                    Ok(new) => {
                        accepted.fetch_add(usize::from(new), Ordering::Relaxed);
                        ok.push(k);
                    }
                    Err(Error::GrowingFprBelowLayoutLimit { .. }) => refused += 1,
                    Err(e) => panic!("{e}"),
                }
            }
            let _ = results.send((ok, refused));
        });
    }
    let mut ok = Vec::new();
    let mut refused = 0;
    for _ in 0..2 {
        let (mine, no) = finished
            .recv_timeout(Duration::from_secs(120))
            .expect("inserts into a stuck filter hang (or a thread panicked: see above)");
        ok.extend(mine);
        refused += no;
    }
    assert_eq!(f.layers(), 4);
    // 100 + 200 + 400 + 800, plus the last layer's 1/64 + 1, plus one per other thread.
    let n = accepted.load(Ordering::Relaxed);
    assert!(n <= 1500 + 800 / 64 + 1 + 1 + 3 * 2, "{n}");
    // Every key of the 40,000 was either accepted or refused with the error.
    assert_eq!(ok.len() + refused, 40_000);
    assert!(ok.iter().all(|k| f.contains(k)));
    // And a fresh key is refused on its first call, not after some spinning or growing.
    assert!(matches!(
        f.insert(&u64::MAX),
        Err(Error::GrowingFprBelowLayoutLimit { layer: 4, .. })
    ));
    assert!(f.info().estimated_fpr <= 0.01, "{}", f.info());
}

/// The address-space cap for the allocation-failure test's child process: 2 GiB.
const CAP_KIB: u64 = 2 << 20;

/// A growth whose layer cannot be allocated (expansion 65536: the second layer needs
/// ~6 GB, the child runs under `ulimit -v` 2 GiB) leaves the filter stuck: new items get
/// `AllocationFailed` (not inserted), seen items `Ok(false)`, two threads hammering it neither
/// hang nor overfill, and nothing accepted is lost.
#[test]
#[cfg(unix)]
fn an_allocation_failure_in_growth_is_reported_and_loses_nothing() {
    const NAME: &str = "an_allocation_failure_in_growth_is_reported_and_loses_nothing";
    if !common::in_capped_child(NAME, CAP_KIB) {
        return;
    }
    let c0 = 1u64 << 16;
    let f = GrowingBloomFilter::builder(c0)
        .fpr(0.01)
        .expansion(65536)
        .build()
        .unwrap();
    let first = keys(101, c0 as usize);
    let mut accepted = Vec::new();
    for k in &first {
        match f.insert(k) {
            Ok(_) => accepted.push(*k),
            Err(e) => panic!("before capacity: {e}"),
        }
    }
    let fresh = keys(102, 1000);
    let errors = fresh
        .iter()
        .filter(|k| matches!(f.insert(*k), Err(Error::AllocationFailed { .. })))
        .count();
    assert!(errors > 900, "{errors}");
    assert_eq!(f.layers(), 1);
    let (a, b) = (keys(103, 5000), keys(104, 5000));
    let ok: Vec<u64> = std::thread::scope(|s| {
        [&a, &b]
            .map(|own| {
                let f = &f;
                s.spawn(move || {
                    own.iter()
                        .filter(|k| match f.insert(*k) {
                            Ok(_) => true,
                            Err(Error::AllocationFailed { .. }) => false,
                            Err(e) => panic!("{e}"),
                        })
                        .copied()
                        .collect::<Vec<_>>()
                })
            })
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    accepted.extend(fresh.iter().chain(&ok).filter(|k| f.contains(*k)).copied());
    assert!(accepted.iter().all(|k| f.insert(k) == Ok(false)));
    let info = f.info();
    assert!(
        info.sampled_new_items.unwrap() <= c0 + c0 / 64 + 1 + 2,
        "{info}"
    );
    assert!(info.estimated_fpr <= 0.01, "{info}");
}

/// `BloomInfo::expansion` is `None` for a filter that does not grow, as documented: a
/// non-scaling filter reports no expansion, and its log line does not read
/// "1 layers (expansion 2)".
#[test]
fn info_of_a_non_scaling_filter_says_it_does_not_grow() {
    let f = GrowingBloomFilter::builder(100)
        .scaling(false)
        .build()
        .unwrap();
    let info = f.info();
    let line = info.to_string();
    assert_eq!(info.expansion, None, "{line}");
    assert!(!line.contains("1 layers"), "{line}");
}

/// A non-scaling filter's `sizing()` does not describe layers it will never have: either it has
/// no schedule past its one layer (`layers_for(2 c0)` is an error), or it keeps the tightening
/// ratio the user set (not `f64::MIN_POSITIVE`).
#[test]
fn the_sizing_of_a_non_scaling_filter_does_not_describe_layers_it_never_has() {
    let f = GrowingBloomFilter::builder(100)
        .tightening(0.9)
        .scaling(false)
        .build()
        .unwrap();
    let s = f.sizing();
    assert!(
        s.layers_for(200).is_err() || s.tightening == 0.9,
        "{s:?}: layers_for(200) = {:?}",
        s.layers_for(200)
    );
}

/// info() and its Display on empty, saturated and tiny filters of every kind: no
/// panic, no NaN.
#[test]
fn info_never_panics_or_reports_nan() {
    let check = |info: seen::BloomInfo| {
        let line = info.to_string();
        assert!(
            info.estimated_fpr.is_finite() && (0.0..=1.0).contains(&info.estimated_fpr),
            "{line}"
        );
        assert!(!line.contains("NaN") && !line.contains("inf"), "{line}");
    };
    check(GrowingBloomFilter::with_capacity(1, 0.999).unwrap().info());
    check(
        seen::AtomicBloomFilter::builder(1)
            .fpr(1e-12)
            .layout(Layout::Line)
            .build()
            .unwrap()
            .info(),
    );
    let full = seen::AtomicBloomFilter::with_capacity(1, 0.5).unwrap();
    for k in keys(91, 50_000) {
        full.insert(&k);
    }
    check(full.info());
    let semi = seen::SemiConcurrentBloomFilter::with_capacity(1, 0.5).unwrap();
    for k in keys(92, 50_000) {
        semi.insert(&k);
    }
    check(semi.info());
    let w = seen::WindowedBloomFilter::builder(1)
        .periods(1)
        .rotate_manually()
        .build()
        .unwrap();
    check(w.info());
    for k in keys(93, 10_000) {
        w.insert(&k);
    }
    check(w.info());
}
