//! The std side of the facade, exercised with real threads. The same contracts are model-checked
//! on the loom side in `loom-tests/facade.rs`, which explores the exact interleavings; here the
//! threads start together at a barrier and run side by side however busy the machine is.

use super::{Arc, ArcCell, PendingSet};
use std::sync::Barrier;
use std::sync::atomic::{AtomicU64, Ordering};

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

/// Two threads, released together, each compare-and-swap the cell from the same value: exactly
/// one wins, 2,000 times over. They meet at a barrier, then at a spinning rendezvous (both are
/// running once past the barrier, so the spin is short), so that the two compare-and-swaps
/// start within nanoseconds of each other when the machine has a core for each. Checked to
/// fail: a compare-and-swap made of a load, a comparison and a store lets both win (in 10 runs
/// of 10 on a busy machine, 1 to 17 rounds of 2,000 each; the window is nanoseconds wide,
/// which is why loom is the proof).
#[test]
fn arc_cell_racing_compare_and_swaps_have_exactly_one_winner() {
    const ROUNDS: usize = 2_000;
    let mut both = 0;
    for _ in 0..ROUNDS {
        let cell = ArcCell::new(Arc::new(0));
        let start = cell.load();
        let (go, arrived) = (Barrier::new(2), AtomicU64::new(0));
        let wins: usize = std::thread::scope(|s| {
            let handles: Vec<_> = (1..=2)
                .map(|i| {
                    let (cell, start, go, arrived) = (&cell, Arc::clone(&start), &go, &arrived);
                    s.spawn(move || {
                        go.wait();
                        arrived.fetch_add(1, Ordering::AcqRel);
                        let mut spins = 0u32;
                        while arrived.load(Ordering::Acquire) < 2 {
                            spins += 1;
                            if spins.is_multiple_of(1024) {
                                std::thread::yield_now(); // the other was preempted
                            }
                            std::hint::spin_loop();
                        }
                        usize::from(cell.compare_and_swap(&start, Arc::new(i)))
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).sum()
        });
        both += usize::from(wins == 2);
        assert!(wins >= 1, "no compare-and-swap won");
        assert_ne!(*cell.load(), 0);
    }
    assert_eq!(
        both, 0,
        "both compare-and-swaps won, {both} times of {ROUNDS}"
    );
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
/// A reader looks the value up 200,000 times, in blocks of 1,000, while a writer re-inserts it
/// until the reader is done; both start at a barrier, and the reader starts each block only
/// once the writer has re-inserted since the last one, so that the re-inserts run among the
/// lookups however busy the machine is. Checked to fail: with `SkipList::insert` in place of
/// `get_or_insert_with`, lookups miss.
#[test]
fn pending_set_insert_of_a_present_value_never_hides_it() {
    const READS: u64 = 200_000;
    const BLOCK: u64 = 1_000;
    let set = PendingSet::new();
    set.insert(7u64, || 0);
    let (go, reads, inserts) = (Barrier::new(2), AtomicU64::new(0), AtomicU64::new(0));
    let misses = std::thread::scope(|s| {
        s.spawn(|| {
            go.wait();
            while reads.load(Ordering::Acquire) < READS {
                set.insert(7, || 0);
                inserts.fetch_add(1, Ordering::Release);
            }
        });
        let reader = s.spawn(|| {
            go.wait();
            let (mut misses, mut seen) = (0u64, 0);
            for _ in 0..READS / BLOCK {
                // Not a timing: the writer loops until the reader is done.
                while inserts.load(Ordering::Acquire) == seen {
                    std::thread::yield_now();
                }
                seen = inserts.load(Ordering::Acquire);
                for _ in 0..BLOCK {
                    misses += u64::from(!set.contains(&7));
                }
                reads.fetch_add(BLOCK, Ordering::Release);
            }
            misses
        });
        reader.join().unwrap()
    });
    assert_eq!(misses, 0, "a re-insert hid a present value {misses} times");
    assert_eq!(reads.into_inner(), READS);
    assert!(inserts.into_inner() >= READS / BLOCK);
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
