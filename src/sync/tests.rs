//! The std side of the facade, exercised with real threads. The same contracts are model-checked
//! on the loom side in `loom-tests/facade.rs`.

use super::{Arc, ArcCell, PendingSet};

#[test]
fn arc_cell_compare_and_swap_succeeds_only_against_the_current_value() {
    let cell = ArcCell::new(Arc::new(1));
    let first = cell.load();
    assert!(cell.compare_and_swap(&first, Arc::new(2)));
    assert_eq!(cell.read(|v| *v), 2);
    // `first` is no longer current, even though a value equal to it could be stored again.
    assert!(!cell.compare_and_swap(&first, Arc::new(3)));
    assert_eq!(*cell.load(), 2);
    cell.store(Arc::new(4));
    assert_eq!(*cell.load(), 4);
}

#[test]
fn arc_cell_racing_compare_and_swaps_have_exactly_one_winner() {
    for _ in 0..200 {
        let cell = ArcCell::new(Arc::new(0));
        let start = cell.load();
        let wins: usize = std::thread::scope(|s| {
            let handles: Vec<_> = (1..=2)
                .map(|i| {
                    let (cell, start) = (&cell, Arc::clone(&start));
                    s.spawn(move || usize::from(cell.compare_and_swap(&start, Arc::new(i))))
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).sum()
        });
        assert_eq!(wins, 1);
        assert_ne!(*cell.load(), 0);
    }
}

#[test]
fn pending_set_insert_remove_first() {
    let set = PendingSet::new();
    assert!(set.is_empty());
    for v in [5u64, 1, 3, 3] {
        set.insert(v, || 0);
    }
    assert_eq!(set.len(), 3);
    assert!(set.contains(&3));
    assert_eq!(set.first(2), vec![1, 3]);
    assert_eq!(set.first(10), vec![1, 3, 5]);
    set.remove(&3);
    set.remove(&3); // absent: nothing happens
    assert!(!set.contains(&3));
    assert_eq!(set.first(10), vec![1, 5]);
}

#[test]
fn pending_set_concurrent_inserts_are_all_kept() {
    let set = PendingSet::new();
    std::thread::scope(|s| {
        for t in 0..2u64 {
            let set = &set;
            s.spawn(move || {
                for i in 0..10_000 {
                    set.insert(i * 2 + t, || 0);
                }
            });
        }
    });
    assert_eq!(set.len(), 20_000);
    assert_eq!(set.first(usize::MAX), (0..20_000).collect::<Vec<u64>>());
}

/// The facade's `insert` of a value already present must leave it in place: with
/// `SkipSet::insert` (remove, then link a new node) a concurrent `contains` sees it vanish.
#[test]
fn pending_set_insert_of_a_present_value_never_hides_it() {
    let set = PendingSet::new();
    set.insert(7u64, || 0);
    let done = std::sync::atomic::AtomicBool::new(false);
    let misses = std::thread::scope(|s| {
        s.spawn(|| {
            for _ in 0..200_000 {
                set.insert(7, || 0);
            }
            done.store(true, std::sync::atomic::Ordering::Release);
        });
        let reader = s.spawn(|| {
            let mut misses = 0u64;
            while !done.load(std::sync::atomic::Ordering::Acquire) {
                misses += u64::from(!set.contains(&7));
            }
            misses
        });
        reader.join().unwrap()
    });
    assert_eq!(misses, 0, "a re-insert hid a present value {misses} times");
    assert_eq!(set.len(), 1);
}

/// `insert` returns the tag of the node the set holds: the caller's own when it linked one.
#[test]
fn pending_set_insert_returns_the_tag_of_the_entry_it_finds() {
    let set = PendingSet::new();
    assert_eq!(set.insert(1u64, || 10), 10);
    let mut ran = false;
    assert_eq!(
        set.insert(1u64, || {
            ran = true;
            20
        }),
        10
    );
    assert!(!ran, "the tag closure runs only when no entry is found");
    set.remove(&1);
    assert_eq!(set.insert(1u64, || 30), 30);
}
