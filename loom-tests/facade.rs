//! The facade's own wrappers under loom: `ArcCell` (the stand-in for `arc_swap::ArcSwap`) and
//! `PendingSet` (the stand-in for `crossbeam_skiplist::SkipSet`). The structures' models build on
//! these, so the wrappers must themselves keep the contracts they promise.

use crate::sync::{ArcCell, PendingSet};
use loom::sync::Arc;
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::thread;

/// Two threads race to replace the same value: exactly one wins, and the cell ends up holding the
/// winner's value.
fn racing_replacements(cas: fn(&ArcCell<u32>, &Arc<u32>, Arc<u32>) -> bool) {
    loom::model(move || {
        let cell = Arc::new(ArcCell::new(Arc::new(0)));
        let start = cell.load();
        let handles: Vec<_> = [1u32, 2]
            .into_iter()
            .map(|v| {
                let (cell, start) = (Arc::clone(&cell), Arc::clone(&start));
                thread::spawn(move || cas(&cell, &start, Arc::new(v)).then_some(v))
            })
            .collect();
        let winners: Vec<u32> = handles
            .into_iter()
            .filter_map(|h| h.join().unwrap())
            .collect();
        assert_eq!(winners.len(), 1, "winners: {winners:?}");
        assert_eq!(*cell.load(), winners[0]);
    });
}

#[test]
fn arc_cell_compare_and_swap_has_exactly_one_winner() {
    racing_replacements(|cell, current, new| cell.compare_and_swap(current, new));
}

/// The broken twin: "compare and swap" built from a load and a separate store lets both threads
/// win. Loom must find the interleaving.
#[test]
#[should_panic(expected = "winners: [")]
fn arc_cell_load_then_store_lets_two_threads_win() {
    racing_replacements(|cell, current, new| {
        if Arc::ptr_eq(&cell.load(), current) {
            cell.store(new);
            true
        } else {
            false
        }
    });
}

#[test]
fn arc_cell_reader_sees_a_whole_old_or_new_value() {
    loom::model(|| {
        let cell = Arc::new(ArcCell::new(Arc::new((0u32, 0u32))));
        let writer = {
            let cell = Arc::clone(&cell);
            thread::spawn(move || cell.store(Arc::new((1, 1))))
        };
        let seen = cell.read(|&pair| pair);
        assert!(seen == (0, 0) || seen == (1, 1), "torn read {seen:?}");
        writer.join().unwrap();
        assert_eq!(*cell.load(), (1, 1));
    });
}

/// A writer stores a new value in the cell, then raises a flag with `flag_store`; the reader,
/// if it sees the flag with `flag_load`, must read the new value.
fn hand_off(flag_store: Ordering, flag_load: Ordering, message: &'static str) {
    loom::model(move || {
        let cell = Arc::new(ArcCell::new(Arc::new(0u32)));
        let flag = Arc::new(AtomicBool::new(false));
        let writer = {
            let (cell, flag) = (Arc::clone(&cell), Arc::clone(&flag));
            thread::spawn(move || {
                cell.store(Arc::new(1));
                flag.store(true, flag_store);
            })
        };
        if flag.load(flag_load) {
            assert_eq!(cell.read(|v| *v), 1, "{message}");
        }
        writer.join().unwrap();
    });
}

/// A load that does not happen after a store may return the old value: the stand-in's load
/// synchronizes only with the store it reads, as arc-swap's Acquire load does. (A lock-based
/// stand-in would make the reader see the store whenever it ran after it, hiding bugs.)
#[test]
#[should_panic(expected = "stale value through a Relaxed flag")]
fn arc_cell_load_without_happens_before_may_see_the_old_value() {
    hand_off(
        Ordering::Relaxed,
        Ordering::Relaxed,
        "stale value through a Relaxed flag",
    );
}

/// The same hand-off through a Release/Acquire flag: the reader sees the new value.
#[test]
fn arc_cell_load_after_a_store_that_happens_before_sees_it() {
    hand_off(
        Ordering::Release,
        Ordering::Acquire,
        "stale value through a Release/Acquire flag",
    );
}

/// A thread inserts a value that is already present while another looks it up: the lookup must
/// find it at every point of the insert.
fn insert_of_a_present_value(insert: fn(&PendingSet<u64>, u64)) {
    loom::model(move || {
        let set = Arc::new(PendingSet::new());
        set.insert(7u64, || 0);
        let writer = {
            let set = Arc::clone(&set);
            thread::spawn(move || insert(&set, 7))
        };
        assert!(set.contains(&7), "a re-insert hid a present value");
        writer.join().unwrap();
        assert!(set.contains(&7));
        assert_eq!(set.len(), 1);
    });
}

#[test]
fn pending_set_insert_of_a_present_value_never_hides_it() {
    insert_of_a_present_value(|set, v| {
        set.insert(v, || 0);
    });
}

/// The twin: the skip list's own `SkipSet::insert` removes the present entry, then links a new
/// one. The stand-in models the two steps, and loom finds the lookup that falls between them.
#[test]
#[should_panic(expected = "hid a present value")]
fn pending_set_replacing_insert_hides_a_present_value() {
    insert_of_a_present_value(|set, v| {
        set.insert_replacing(v, || 0);
    });
}

/// Two removers of one value and an inserter of another: the set ends with exactly the other
/// value, and `len` is exact once every thread has finished.
#[test]
fn pending_set_racing_removals_leave_an_exact_set() {
    loom::model(|| {
        let set = Arc::new(PendingSet::new());
        set.insert(7u64, || 0);
        let handles: Vec<_> = [None, None, Some(9u64)]
            .into_iter()
            .map(|insert| {
                let set = Arc::clone(&set);
                thread::spawn(move || match insert {
                    Some(v) => {
                        set.insert(v, || 0);
                    }
                    None => set.remove(&7),
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert!(!set.contains(&7) && set.contains(&9));
        assert_eq!(set.len(), 1);
        assert_eq!(set.first(usize::MAX), vec![9]);
    });
}

/// `len` counts an insert before its node is linked, as the skip list's does: while two threads
/// insert the same new value, a third can read 2.
#[test]
#[should_panic(expected = "len counted an insert in flight")]
fn pending_set_len_is_approximate_while_inserts_are_in_flight() {
    loom::model(|| {
        let set = Arc::new(PendingSet::new());
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let set = Arc::clone(&set);
                thread::spawn(move || set.insert(1u64, || 0))
            })
            .collect();
        assert!(set.len() <= 1, "len counted an insert in flight");
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(set.len(), 1);
    });
}

/// A lookup is only a `Relaxed` load (the skip list's `load_consume` is no more on weak
/// hardware): finding a value does not make the inserter's earlier writes visible...
#[test]
#[should_panic(expected = "stale data after a lookup")]
fn pending_set_lookup_alone_does_not_synchronize() {
    lookup_then(false);
}

/// ...unless the reader adds an Acquire fence after the lookup, which the semi-concurrent
/// filter does.
#[test]
fn pending_set_lookup_then_acquire_fence_synchronizes() {
    lookup_then(true);
}

fn lookup_then(fence: bool) {
    loom::model(move || {
        let set = Arc::new(PendingSet::new());
        let data = Arc::new(AtomicBool::new(false));
        let writer = {
            let (set, data) = (Arc::clone(&set), Arc::clone(&data));
            thread::spawn(move || {
                data.store(true, Ordering::Relaxed);
                set.insert(5u64, || 0);
            })
        };
        if set.contains(&5) {
            if fence {
                loom::sync::atomic::fence(Ordering::Acquire);
            }
            assert!(data.load(Ordering::Relaxed), "stale data after a lookup");
        }
        writer.join().unwrap();
    });
}

/// Inserts from two threads are all kept; a concurrent iteration sees, in order, a subset that
/// includes every value present before it started.
#[test]
fn pending_set_iteration_during_inserts_is_weakly_consistent() {
    loom::model(|| {
        let set = Arc::new(PendingSet::new());
        set.insert(2u64, || 0);
        let writers: Vec<_> = [1u64, 3]
            .into_iter()
            .map(|v| {
                let set = Arc::clone(&set);
                thread::spawn(move || set.insert(v, || 0))
            })
            .collect();
        let seen = set.first(usize::MAX);
        assert!(
            seen.contains(&2),
            "lost a value present throughout: {seen:?}"
        );
        assert!(
            seen.windows(2).all(|w| w[0] < w[1]),
            "not ordered: {seen:?}"
        );
        assert!(seen.iter().all(|v| [1, 2, 3].contains(v)));
        for w in writers {
            w.join().unwrap();
        }
        assert_eq!(set.len(), 3);
        assert_eq!(set.first(2), vec![1, 2]);
    });
}

/// Two threads insert the same value, each with its own tag: both are told the same tag, and
/// it is one of theirs (the node that was linked), whichever of them ran its tag closure.
#[test]
fn pending_set_racing_inserts_agree_on_the_linked_tag() {
    loom::model(|| {
        let set = Arc::new(PendingSet::new());
        let handles: Vec<_> = [1u64, 2]
            .into_iter()
            .map(|tag| {
                let set = Arc::clone(&set);
                thread::spawn(move || set.insert(7u64, || tag))
            })
            .collect();
        let tags: Vec<u64> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        assert_eq!(tags[0], tags[1], "two linked nodes for one value: {tags:?}");
        assert!([1, 2].contains(&tags[0]));
        assert_eq!(set.len(), 1);
    });
}
