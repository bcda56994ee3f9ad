//! `GrowingBloomFilter` under loom: no false negative across a growth, and exactly one `true`
//! among racing inserts of one new item across one or two growths; the wait past the overshoot
//! limit, a failed growth and its retry, the non-scaling mode, the line layout's inserts across
//! a growth. Twins: a growth that publishes the new layer before zeroing it, an insert that
//! ignores a growth, an insert whose write is a load and a store (both layouts), and a failed
//! growth that keeps its claim.

use super::{Twin, with};
use crate::{GrowingBloomFilter, Layout};
use loom::sync::Arc;
use loom::thread;

/// The smallest growing filter: a first layer of capacity 1 (the first new item starts a
/// growth), each layer one line.
fn tiny(expansion: u32) -> Arc<GrowingBloomFilter> {
    let f = GrowingBloomFilter::builder(1)
        .fpr(0.01)
        .expansion(expansion)
        .build()
        .unwrap();
    assert_eq!(f.memory_bytes(), 64);
    Arc::new(f)
}

/// One thread inserts `a` (new: it fills the first layer and grows the filter, by `twin`'s
/// growth), another inserts `b` and looks it up at once; both must be found after the join.
fn insert_across_a_growth(twin: Twin) {
    loom::model(move || {
        let f = tiny(2);
        let grower = {
            let f = Arc::clone(&f);
            thread::spawn(move || with(twin, || f.insert("a")).unwrap())
        };
        let inserter = {
            let f = Arc::clone(&f);
            thread::spawn(move || {
                f.insert("b").unwrap();
                assert!(f.contains("b"), "false negative right after the insert");
            })
        };
        grower.join().unwrap();
        inserter.join().unwrap();
        assert!(
            f.contains("a") && f.contains("b"),
            "false negative after join"
        );
        assert_eq!(f.layers(), 2);
    });
}

#[test]
fn no_false_negative_across_a_growth() {
    insert_across_a_growth(Twin::Correct);
}

#[test]
#[should_panic(expected = "false negative")]
fn publishing_a_layer_before_it_is_initialised_loses_inserts() {
    insert_across_a_growth(Twin::PublishBeforeInit);
}

/// Two threads insert `x` while the main thread inserts `growers` other new items, each of
/// which fills the newest layer and grows the filter (expansion 1: every layer holds one
/// item). Exactly one racer must be told `x` is new.
fn racing_inserts(growers: &'static [&'static str], twin: Twin) {
    loom::model(move || {
        let f = tiny(1);
        let racers: Vec<_> = (0..2)
            .map(|_| {
                let f = Arc::clone(&f);
                thread::spawn(move || with(twin, || f.insert("x")).unwrap())
            })
            .collect();
        for item in growers {
            f.insert(*item).unwrap();
        }
        let new = racers
            .into_iter()
            .map(|h| usize::from(h.join().unwrap()))
            .sum::<usize>();
        assert_eq!(new, 1, "{new} racing inserts of one new item told new");
        assert!(f.contains("x"));
        assert!(growers.iter().all(|item| f.contains(*item)));
    });
}

#[test]
fn racing_inserts_across_a_growth_have_exactly_one_new() {
    racing_inserts(&["z"], Twin::Correct);
}

#[test]
fn racing_inserts_across_two_growths_have_exactly_one_new() {
    racing_inserts(&["z", "w"], Twin::Correct);
}

#[test]
#[should_panic(expected = "told new")]
fn an_insert_that_ignores_a_growth_is_not_exactly_once() {
    racing_inserts(&["z"], Twin::IgnoreGrowth);
}

#[test]
#[should_panic(expected = "told new")]
fn a_write_without_read_modify_write_is_not_exactly_once() {
    racing_inserts(&["z"], Twin::RacyOr);
}

/// The line layout: one thread inserts `x` while the main thread inserts `z`, each looking its
/// item up right after its insert; the first of them to count its item grows the filter
/// (layers of one item, one line each). Both items share words of the line (checked below)
/// whenever they go to one layer, so a write that is not one read-modify-write per word can
/// lose the other's bits. The insert writes each touched word with `fetch_or` and no test
/// before it (`or_at`): nothing is lost.
fn line_layout_inserts_across_a_growth(twin: Twin) {
    loom::model(move || {
        let f = GrowingBloomFilter::builder(1)
            .fpr(0.1)
            .layout(Layout::Line)
            .expansion(1)
            .build()
            .unwrap();
        assert_eq!(f.memory_bytes(), 64);
        let f = Arc::new(f);
        let other = {
            let f = Arc::clone(&f);
            thread::spawn(move || {
                with(twin, || f.insert("x")).unwrap();
                assert!(f.contains("x"), "false negative right after the insert");
            })
        };
        f.insert("z").unwrap();
        assert!(f.contains("z"), "false negative right after the insert");
        other.join().unwrap();
        assert!(
            f.contains("x") && f.contains("z"),
            "false negative after join"
        );
        // Two layers if both items went to the first, three if the second went to the next.
        assert!((2..=3).contains(&f.layers()), "{} layers", f.layers());
    });
}

#[test]
fn line_layout_inserts_across_a_growth_lose_nothing() {
    line_layout_inserts_across_a_growth(Twin::Correct);
}

#[test]
#[should_panic(expected = "false negative")]
fn a_line_layout_write_without_read_modify_write_loses_bits() {
    line_layout_inserts_across_a_growth(Twin::RacyOr);
}

/// Three threads insert three new items into layers of one item: the first to count its item
/// claims the growth, a second may overshoot into the full layer (its limit is 2), and the
/// third then waits for the new layer (the `Wait` step). Every item is found by its own thread
/// right after its insert and by all after the joins; none is told "seen".
#[test]
fn inserts_past_the_overshoot_limit_wait_for_the_growth_and_lose_nothing() {
    loom::model(|| {
        let f = tiny(1);
        let others: Vec<_> = ["b", "c"]
            .into_iter()
            .map(|item| {
                let f = Arc::clone(&f);
                thread::spawn(move || {
                    assert!(f.insert(item).unwrap(), "a new item told seen");
                    assert!(f.contains(item), "false negative right after the insert");
                })
            })
            .collect();
        assert!(f.insert("a").unwrap(), "a new item told seen");
        for h in others {
            h.join().unwrap();
        }
        assert!(["a", "b", "c"].iter().all(|item| f.contains(*item)));
        let layers = f.layer_info();
        assert!(layers.len() >= 2, "no growth");
        assert!(layers[0].sampled_new_items <= 3, "{:?}", layers[0]);
    });
}

/// The growth started by `a`'s insert fails (an allocation failure, injected): the filter is
/// stuck, and the next insert of a new item claims the growth again and succeeds, while
/// another thread inserts `b`. Nothing inserted is lost, and no insert of a new item fails
/// but the one whose own growth failed.
fn failed_growth(twin: Twin) {
    loom::model(move || {
        let f = tiny(1);
        let failing = {
            let f = Arc::clone(&f);
            thread::spawn(move || with(twin, || f.insert("a")))
        };
        let other = {
            let f = Arc::clone(&f);
            thread::spawn(move || f.insert("b"))
        };
        let a = failing.join().unwrap();
        let b = other.join().unwrap();
        // `b` may find the filter stuck and claim the growth itself: it then succeeds.
        assert_eq!(b, Ok(true), "b: {b:?}");
        // `a` either counted first (its item is in, its growth failed silently) or found
        // the filter stuck by `b`... which only a failed growth makes: `a` is then the one.
        match a {
            Ok(true) => assert!(f.contains("a")),
            Err(seen) => assert!(matches!(seen, crate::Error::AllocationFailed { .. })),
            Ok(false) => panic!("a new item told seen"),
        }
        assert!(f.contains("b"));
        // Whatever happened, the next new item gets a layer.
        assert_eq!(f.insert("c"), Ok(true));
        assert!(f.contains("b") && f.contains("c"));
        assert!(f.layers() >= 2);
    });
}

#[test]
fn a_failed_growth_is_retried_by_the_next_new_item_and_loses_nothing() {
    failed_growth(Twin::FailGrowth);
}

#[test]
#[should_panic(expected = "maximum number of branches")]
fn a_failed_growth_that_keeps_its_claim_makes_new_items_wait_forever() {
    failed_growth(Twin::FailKeepingClaim);
}

/// Two threads insert new items into a non-scaling filter of capacity 1: at most one item per
/// thread is accepted (the capacity, plus the one that passed the check before the count
/// moved), the others are refused with `Full` and not inserted; accepted items are found.
#[test]
fn a_non_scaling_filter_accepts_its_capacity_and_refuses_the_rest() {
    loom::model(|| {
        let f = Arc::new(
            GrowingBloomFilter::builder(1)
                .fpr(0.01)
                .scaling(false)
                .build()
                .unwrap(),
        );
        let other = {
            let f = Arc::clone(&f);
            thread::spawn(move || (f.insert("a"), f.insert("b")))
        };
        let c = f.insert("c");
        let (a, b) = other.join().unwrap();
        let accepted: Vec<_> = [("a", a), ("b", b), ("c", c)]
            .into_iter()
            .filter_map(|(item, r)| match r {
                Ok(true) => Some(item),
                Err(crate::Error::Full { capacity: 1 }) => None,
                other => panic!("{item}: {other:?}"),
            })
            .collect();
        assert!((1..=2).contains(&accepted.len()), "{accepted:?}");
        assert!(accepted.iter().all(|item| f.contains(*item)));
        assert_eq!(f.layers(), 1);
    });
}
