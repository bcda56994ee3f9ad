//! `GrowingBloomFilter` under loom: no false negative across a growth, and exactly one `true`
//! among racing inserts of one new item across one or two growths. Twins: a growth that
//! publishes the new layer before zeroing it, and an insert that ignores a growth.

use crate::GrowingBloomFilter;
use crate::bloom::GrowTwin as Twin;
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
            thread::spawn(move || f.insert_as("a", twin).unwrap())
        };
        let inserter = {
            let f = Arc::clone(&f);
            thread::spawn(move || {
                f.insert_as("b", Twin::Correct).unwrap();
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
                thread::spawn(move || f.insert_as("x", twin).unwrap())
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
