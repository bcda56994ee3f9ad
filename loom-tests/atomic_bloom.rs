//! `AtomicBloomFilter` under loom: no false negatives, the happens-before hand-off, and how many
//! racing inserters of one new item are told it is new (exactly one in the word layout).

use crate::{AtomicBloomFilter, Layout};
use loom::sync::Arc;
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::thread;

const LAYOUTS: [Layout; 2] = [Layout::Word, Layout::Line];

/// The smallest filter: one 512-bit cache line (8 words), k = 3 (fpr 0.1), so that a line-layout
/// operation touches at most 3 words: every Relaxed load of a word another thread wrote is a
/// branch of the model, and 8 of them per operation would not finish. (The items used here
/// spread their 3 bits over at least 2 words, which `line_layout_is_not_exactly_once` proves.)
pub(super) fn tiny(layout: Layout) -> Arc<AtomicBloomFilter> {
    let filter = AtomicBloomFilter::builder(4)
        .fpr(0.1)
        .layout(layout)
        .build()
        .unwrap();
    assert_eq!(filter.bit_len(), 512);
    Arc::new(filter)
}

#[test]
fn items_inserted_on_two_threads_are_both_contained_after_join() {
    for layout in LAYOUTS {
        loom::model(move || {
            let f = tiny(layout);
            let handles: Vec<_> = ["a", "b"]
                .into_iter()
                .map(|item| {
                    let f = Arc::clone(&f);
                    thread::spawn(move || {
                        f.insert(item);
                        // Program order: the inserting thread sees its own insert at once.
                        assert!(f.contains(item));
                    })
                })
                .collect();
            for h in handles {
                h.join().unwrap();
            }
            assert!(
                f.contains("a") && f.contains("b"),
                "{layout:?}: false negative"
            );
        });
    }
}

/// An insert on one thread, published by a flag: a reader that sees the flag must see the item.
fn handoff(publish: Ordering, observe: Ordering) {
    for layout in LAYOUTS {
        loom::model(move || {
            let f = tiny(layout);
            let flag = Arc::new(AtomicBool::new(false));
            let writer = {
                let (f, flag) = (Arc::clone(&f), Arc::clone(&flag));
                thread::spawn(move || {
                    f.insert("msg-42");
                    flag.store(true, publish);
                })
            };
            if flag.load(observe) {
                assert!(
                    f.contains("msg-42"),
                    "{layout:?}: false negative after hand-off"
                );
            }
            writer.join().unwrap();
        });
    }
}

#[test]
fn insert_handed_off_through_release_acquire_is_contained() {
    handoff(Ordering::Release, Ordering::Acquire);
}

/// The twin: with a Relaxed flag there is no happens-before, and the filter's Relaxed bits may
/// still look unset to the reader. This is why the docs say "happens after", and proof that the
/// model explores stale reads of the bits.
#[test]
#[should_panic(expected = "false negative after hand-off")]
fn insert_handed_off_through_a_relaxed_flag_may_be_missed() {
    handoff(Ordering::Relaxed, Ordering::Relaxed);
}

/// `threads` threads insert the same new item at once; returns how many were told "new".
fn racing_new_reports(layout: Layout, threads: usize, racy: bool) -> impl Fn() -> usize {
    move || {
        let f = tiny(layout);
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let f = Arc::clone(&f);
                thread::spawn(move || {
                    let new = if racy {
                        f.racy_insert("token")
                    } else {
                        f.insert("token")
                    };
                    usize::from(new)
                })
            })
            .collect();
        let news = handles.into_iter().map(|h| h.join().unwrap()).sum();
        assert!(f.contains("token"));
        news
    }
}

#[test]
fn word_layout_racing_inserts_of_one_new_item_have_exactly_one_new() {
    for threads in [2, 3] {
        let run = racing_new_reports(Layout::Word, threads, false);
        loom::model(move || {
            let news = run();
            assert_eq!(news, 1, "{threads} threads: {news} told new");
        });
    }
}

#[test]
fn line_layout_racing_inserts_of_one_new_item_have_at_least_one_new() {
    for threads in [2, 3] {
        let run = racing_new_reports(Layout::Line, threads, false);
        loom::model(move || {
            let news = run();
            assert!(news >= 1, "{threads} threads: nobody told new");
        });
    }
}

/// Twin: a load and a separate store instead of one RMW lets two threads both be told "new".
#[test]
#[should_panic(expected = "told new")]
fn load_then_store_insert_is_not_exactly_once() {
    let run = racing_new_reports(Layout::Word, 2, true);
    loom::model(move || {
        let news = run();
        assert_eq!(news, 1, "2 threads: {news} told new");
    });
}

/// Twin: the line layout's several `fetch_or`s are not one atomic step, so the exactly-once
/// model fails on it (the reason the word layout is the default).
#[test]
#[should_panic(expected = "told new")]
fn line_layout_is_not_exactly_once() {
    let run = racing_new_reports(Layout::Line, 2, false);
    loom::model(move || {
        let news = run();
        assert_eq!(news, 1, "2 threads: {news} told new");
    });
}

/// The first of `candidates` (`"{prefix}{i}"`) whose line-layout draws satisfy `fits`.
fn find_item(
    f: &AtomicBloomFilter,
    prefix: &str,
    fits: impl Fn(&[(usize, u32)]) -> bool,
) -> String {
    (0..100_000)
        .map(|i| format!("{prefix}{i}"))
        .find(|item| fits(&f.line_draws(item)))
        .expect("an item of that shape among 100,000")
}

/// Same-item inserts only, with an item whose first draw is drawn again later (two draws on one
/// bit): still at least one "new", on 2 and 3 threads.
#[test]
fn line_layout_at_least_one_new_when_a_bit_is_drawn_twice() {
    for threads in [2, 3] {
        loom::model(move || {
            let f = tiny(Layout::Line);
            let item = find_item(&f, "rep", |d| d[1..].contains(&d[0]) && d[1] != d[2]);
            let handles: Vec<_> = (0..threads)
                .map(|_| {
                    let (f, item) = (Arc::clone(&f), item.clone());
                    thread::spawn(move || usize::from(f.insert(item.as_str())))
                })
                .collect();
            let news: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
            assert!(f.contains(item.as_str()));
            assert!(news >= 1, "{threads} threads: nobody told new");
        });
    }
}

/// A lone insert of a new item is told "new" whatever another item's concurrent insert writes:
/// `x` is inserted on one thread while `y`, whose bits hold `x`'s first draw but not its others,
/// is inserted on another. In every sequential order `x` is new. With a rule that let the
/// first missing bit alone decide (tried in issue 10), `y` setting that bit between `x`'s loads
/// and its write made `insert(x)` return `false`: this model caught it, and is kept so that no
/// later rule brings it back.
#[test]
fn line_layout_lone_insert_of_a_new_item_is_new_whatever_another_item_writes() {
    loom::model(|| {
        let f = tiny(Layout::Line);
        let x = "x".to_string();
        let dx = f.line_draws(x.as_str());
        let y = find_item(&f, "y", |dy| {
            dy.contains(&dx[0]) && dx[1..].iter().any(|b| b != &dx[0] && !dy.contains(b))
        });
        let other = {
            let (f, y) = (Arc::clone(&f), y.clone());
            thread::spawn(move || {
                f.insert(y.as_str());
            })
        };
        let new = f.insert(x.as_str());
        other.join().unwrap();
        assert!(
            new,
            "x was new, yet its only inserter was told seen ({y} wrote one of its bits)"
        );
    });
}
