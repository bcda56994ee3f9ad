//! The facade's own wrappers under loom: `ArcCell` (the stand-in for `arc_swap::ArcSwap`) and
//! `PendingSet` (the stand-in for `crossbeam_skiplist::SkipSet`). The structures' models build on
//! these, so the wrappers must themselves keep the contracts they promise.

use loom::sync::Arc;
use loom::thread;
use seen::__loom::{ArcCell, PendingSet};

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
#[should_panic(expected = "winners")]
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

/// Two removers of the same value: exactly one is told it removed it.
fn racing_removals(remove: fn(&PendingSet<u64>, &u64) -> bool) {
    loom::model(move || {
        let set = Arc::new(PendingSet::new());
        set.insert(7u64);
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let set = Arc::clone(&set);
                thread::spawn(move || usize::from(remove(&set, &7)))
            })
            .collect();
        let removed: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(removed, 1, "removed reported {removed} times");
        assert!(set.is_empty());
    });
}

#[test]
fn pending_set_remove_reports_exactly_one_removal() {
    racing_removals(|set, v| set.remove(v));
}

/// The broken twin: "contains, then remove" lets both removers believe they removed the value.
#[test]
#[should_panic(expected = "removed reported")]
fn pending_set_contains_then_remove_reports_two_removals() {
    racing_removals(|set, v| {
        let had = set.contains(v);
        set.remove(v);
        had
    });
}

/// Inserts from two threads are all kept; a concurrent iteration sees, in order, a subset that
/// includes every value present before it started.
#[test]
fn pending_set_iteration_during_inserts_is_weakly_consistent() {
    loom::model(|| {
        let set = Arc::new(PendingSet::new());
        set.insert(2u64);
        let writers: Vec<_> = [1u64, 3]
            .into_iter()
            .map(|v| {
                let set = Arc::clone(&set);
                thread::spawn(move || set.insert(v))
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
