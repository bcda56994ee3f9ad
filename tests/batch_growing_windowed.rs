//! The batch methods of the growing and windowed filters (`insert_many`, `contains_many` and
//! their `_hashes` forms): the results of a loop of single calls, in order, also when the
//! filter grows or rotates in the middle of a batch; errors; an iterator that synchronizes
//! inside the batch; and real threads racing the batches against growths and rotations.
#![cfg(not(seen_loom))]

mod common;

use common::{LyingSizeHint, keys};
use seen::hash::ItemHasher;
use seen::{Error, GrowingBloomFilter, Layout, WindowedBloomFilter};
use std::sync::{Barrier, Mutex};

/// The batched paths (read-ahead) run on tables of 8 MiB and more; below, the batch methods
/// are loops. Tests that must reach the batched path check that the filter got there.
const BATCHED_BYTES: u64 = 8 << 20;

/// Batch lengths around the group size (16), and long ones.
const LENGTHS: [usize; 12] = [0, 1, 2, 15, 16, 17, 31, 32, 33, 100, 1000, 4096];

/// `items` cut into batches of the lengths of [`LENGTHS`], cycling, each batch also holding
/// a repeat of its first item at its end and one item of the previous batch.
fn batches(items: &[u64]) -> Vec<Vec<u64>> {
    let mut out: Vec<Vec<u64>> = Vec::new();
    let mut at = 0;
    for len in LENGTHS.iter().cycle() {
        if at >= items.len() {
            break;
        }
        let mut batch = items[at..(at + len).min(items.len())].to_vec();
        at += len;
        if let Some(&first) = batch.first() {
            batch.push(first);
        }
        if let Some(&previous) = out.last().and_then(|b| b.first()) {
            batch.insert(batch.len() / 2, previous);
        }
        out.push(batch);
    }
    out
}

fn growing(c0: u64, fpr: f64, layout: Layout) -> GrowingBloomFilter {
    GrowingBloomFilter::builder(c0)
        .fpr(fpr)
        .layout(layout)
        .build()
        .unwrap()
}

#[test]
fn growing_insert_many_gives_a_loop_of_inserts_results_through_every_growth() {
    // Small (the batch methods are loops) and large (the read-ahead runs once the layers
    // reach 8 MiB: from the third layer on for the word layout, the fourth for the line
    // layout, and through a growth after that), both layouts.
    for (c0, fpr, n, layout) in [
        (1_000u64, 0.01, 100_000usize, Layout::Word),
        (1_000, 0.01, 100_000, Layout::Line),
        (500_000, 0.001, 4_000_000, Layout::Word),
        (300_000, 0.001, 5_000_000, Layout::Line),
    ] {
        let (looped, batched) = (growing(c0, fpr, layout), growing(c0, fpr, layout));
        let items = keys(c0 + n as u64, n);
        let mut expected = Vec::new();
        let mut new = vec![true]; // appended to, not replaced
        for batch in batches(&items) {
            let before = new.len();
            expected.extend(batch.iter().map(|k| looped.insert(k).unwrap()));
            let count = batched.insert_many(&batch, &mut new).unwrap();
            assert_eq!(count, new[before..].iter().filter(|&&n| n).count());
        }
        assert_eq!(&new[1..], &expected[..], "c0 {c0}, {layout:?}");
        assert_eq!(batched.layers(), looped.layers());
        assert!(batched.layers() >= 4, "{}", batched.layers());
        assert_eq!(batched.layer_info(), looped.layer_info());
        if c0 > 1_000 {
            assert!(batched.memory_bytes() >= BATCHED_BYTES);
        }
        // The lookups, hits and fresh keys interleaved.
        let fresh = keys(7 + n as u64, n / 4);
        let probe: Vec<u64> = items
            .iter()
            .step_by(4)
            .zip(&fresh)
            .flat_map(|(&a, &b)| [a, b])
            .collect();
        let mut hits = vec![false];
        for batch in batches(&probe) {
            let before = hits.len();
            let count = batched.contains_many(&batch, &mut hits);
            assert_eq!(count, hits[before..].iter().filter(|&&h| h).count());
        }
        let expected: Vec<bool> = batches(&probe)
            .iter()
            .flatten()
            .map(|k| looped.contains(k))
            .collect();
        assert_eq!(&hits[1..], &expected[..], "c0 {c0}, {layout:?}");
        assert!(probe.iter().step_by(2).all(|k| batched.contains(k)));
    }
}

/// A word-layout filter of many layers (here 13) takes several rounds of its batched lookup
/// (the two newest layers, then the older ones 8 at a time): for keys of every layer but the
/// newest (whose keys the test below covers) and for fresh keys, in batches of every length,
/// the results are a loop of `contains`.
#[test]
fn growing_contains_many_over_many_layers_gives_a_loop_of_contains() {
    let f = growing(1_000, 0.01, Layout::Word);
    let items = keys(11, 6_000_000);
    let mut new = Vec::new();
    f.insert_many(&items, &mut new).unwrap();
    assert!(f.layers() >= 12, "{} layers", f.layers());
    assert!(
        f.memory_bytes() >= BATCHED_BYTES,
        "{} bytes",
        f.memory_bytes()
    );
    // The first 100,000 keys (layers 0 to 6), every 37th key up to 3.7M (layers to 11 of 0
    // to 12), and as many never inserted.
    let fresh = keys(1 << 40, 200_000);
    let probe: Vec<u64> = items
        .iter()
        .take(100_000)
        .chain(items.iter().step_by(37).take(100_000))
        .zip(&fresh)
        .flat_map(|(&a, &b)| [a, b])
        .collect();
    let mut hits = Vec::new();
    for batch in batches(&probe) {
        f.contains_many(&batch, &mut hits);
    }
    let expected: Vec<bool> = batches(&probe)
        .iter()
        .flatten()
        .map(|k| f.contains(k))
        .collect();
    assert_eq!(hits.len(), expected.len());
    let wrong = hits.iter().zip(&expected).filter(|(a, b)| a != b).count();
    assert_eq!(
        wrong,
        0,
        "{wrong} of {} answers differ from contains",
        hits.len()
    );
    let held = probe.iter().step_by(2).filter(|k| f.contains(*k)).count();
    assert_eq!(held, probe.len() / 2, "no false negatives");
}

#[test]
fn growing_hashes_forms_and_a_lying_size_hint() {
    let f = growing(1_000, 0.01, Layout::Word);
    let h = *f.hasher();
    let items = keys(3, 5_000);
    let mut new = Vec::new();
    let count = f
        .insert_many_hashes(
            LyingSizeHint(items.iter().map(|k| h.hash_item(k)), usize::MAX),
            &mut new,
        )
        .unwrap();
    assert_eq!(new.len(), items.len());
    assert_eq!(count, new.iter().filter(|&&n| n).count());
    let mut hits = Vec::new();
    let found = f.contains_many_hashes(
        LyingSizeHint(items.iter().map(|k| h.hash_item(k)), usize::MAX),
        &mut hits,
    );
    assert_eq!((found, hits.len()), (items.len(), items.len()));
}

#[test]
fn growing_insert_many_stops_at_the_first_item_it_cannot_take() {
    // Non-scaling, capacity 100: the batch takes new items up to the capacity, answers seen
    // items after it, and stops at the first new item refused; the rest are not inserted.
    let f = GrowingBloomFilter::builder(100)
        .scaling(false)
        .build()
        .unwrap();
    let items = keys(5, 300);
    let mut new = vec![false];
    let mut batch: Vec<u64> = items[..100].to_vec();
    batch.extend_from_slice(&items[..10]); // seen: answered `false`, not refused
    batch.extend_from_slice(&items[100..]);
    let err = f.insert_many(&batch, &mut new).unwrap_err();
    assert_eq!(err, Error::Full { capacity: 100 });
    // A loop of `insert` with `?` stops at the same item.
    let twin = GrowingBloomFilter::builder(100)
        .scaling(false)
        .build()
        .unwrap();
    let mut expected = Vec::new();
    for k in &batch {
        match twin.insert(k) {
            Ok(n) => expected.push(n),
            Err(e) => {
                assert_eq!(e, err);
                break;
            }
        }
    }
    assert_eq!(&new[1..], &expected[..]);
    let failed = new.len() - 1;
    assert!((100..batch.len()).contains(&failed), "{failed}");
    assert!(batch[..failed].iter().all(|k| f.contains(k)));
    // The refused item and those after it were not inserted: the count did not move, and a
    // retry of the refused item is refused again.
    assert_eq!(f.info().sampled_new_items, twin.info().sampled_new_items);
    assert_eq!(f.insert(&batch[failed]), Err(err));
}

#[test]
fn growing_contains_many_sees_what_its_iterator_synchronized_with() {
    // The iterator itself inserts (and grows the filter) in the middle of the batch: the
    // lookups after that point happen after the insert, so they must find it, also in a layer
    // published during the call. Both sizes: the loop and the batched path.
    for c0 in [1_000u64, 4_000_000] {
        let f = growing(c0, 0.01, Layout::Word);
        let mut sink = Vec::new();
        f.insert_many(&keys(11, c0 as usize * 9 / 10), &mut sink)
            .unwrap();
        let layers = f.layers();
        let (fresh, late) = (keys(12, c0 as usize), keys(13, 64));
        let h = *f.hasher();
        let mut hits = Vec::new();
        let lookups = (0..64usize).map(|i| {
            if i == 20 {
                // New items until the filter grows, then the late ones: they land in the
                // layer published inside the call.
                for k in &fresh {
                    f.insert(k).unwrap();
                    if f.layers() > layers {
                        break;
                    }
                }
                for k in &late {
                    assert_eq!(f.insert(k), Ok(true));
                }
            }
            h.hash_item(&late[i])
        });
        f.contains_many_hashes(lookups, &mut hits);
        assert!(f.layers() > layers, "the iterator grew the filter");
        if c0 > 1_000 {
            assert!(f.memory_bytes() >= BATCHED_BYTES);
        }
        // Items 20.. were taken after their insert; the group of items 16..31 started after it.
        assert!(hits[32..].iter().all(|&h| h), "{hits:?}");
        assert!(hits[20..].iter().all(|&h| h), "{hits:?}");
        // And an insert_many whose iterator inserts the item first answers "seen".
        let more = keys(14, 40);
        let mut new = Vec::new();
        let items = (0..40usize).map(|i| {
            if i == 30 {
                assert_eq!(f.insert(&more[35]), Ok(true));
            }
            h.hash_item(&more[i])
        });
        f.insert_many_hashes(items, &mut new).unwrap();
        assert!(!new[35], "{new:?}");
    }
}

fn window(per: u64, g: u32) -> WindowedBloomFilter {
    WindowedBloomFilter::builder(per)
        .fpr(0.01)
        .periods(g - 1)
        .rotate_after(per)
        .build()
        .unwrap()
}

#[test]
fn windowed_insert_many_gives_a_loop_of_inserts_results_through_rotations() {
    // Count mode: the batch's own inserts rotate the window in the middle of batches. Small
    // (a loop) and large (the read-ahead), one line per block (G = 7) and two (G = 9).
    for (per, g, n) in [
        (2_000u64, 7u32, 60_000usize),
        (1_000_000, 7, 4_000_000),
        (500_000, 9, 3_000_000),
    ] {
        let (looped, batched) = (window(per, g), window(per, g));
        if per > 2_000 {
            assert!(batched.memory_bytes() >= BATCHED_BYTES);
        }
        let items = keys(per + u64::from(g), n);
        let mut expected = Vec::new();
        let mut new = vec![false];
        for batch in batches(&items) {
            let before = new.len();
            expected.extend(batch.iter().map(|k| looped.insert(k)));
            let count = batched.insert_many(&batch, &mut new);
            assert_eq!(count, new[before..].iter().filter(|&&n| n).count());
            assert_eq!(batched.generation(), looped.generation());
        }
        assert_eq!(&new[1..], &expected[..], "per {per}, G {g}");
        assert!(batched.generation() >= 3, "{}", batched.generation());
        let probe: Vec<u64> = items.iter().step_by(3).copied().collect();
        let mut hits = Vec::new();
        batched.contains_many(&probe, &mut hits);
        let expected: Vec<bool> = probe.iter().map(|k| looped.contains(k)).collect();
        assert_eq!(hits, expected);
        // The hashes form, with a lying size hint.
        let h = *batched.hasher();
        let mut again = Vec::new();
        let seen = batched.insert_many_hashes(
            LyingSizeHint(probe.iter().map(|k| h.hash_item(k)), usize::MAX),
            &mut again,
        );
        assert_eq!(again.len(), probe.len());
        assert_eq!(seen, again.iter().filter(|&&n| n).count());
    }
}

/// Two threads insert the same keys, in the same order, in batches, each batch's keys also
/// looked up by `contains_many` right after on the same thread, while the filter grows 100
/// times over (or, large, from 8 MiB on): no false negative, no key new to both threads.
#[test]
fn batches_racing_growths_lose_nothing_and_are_exactly_once() {
    // Small: 7 layers, the batch methods loops. Large: the read-ahead from the third layer
    // (1.5M items) on, through the growth at 3.5M.
    for (c0, fpr, n, rounds) in [
        (1_000u64, 0.01, 100_000usize, 4u64),
        (500_000, 0.001, 3_600_000, 1),
    ] {
        for round in 0..rounds {
            let f = growing(c0, fpr, Layout::Word);
            let items = keys(100 + round, n);
            let step = Barrier::new(2);
            let handed = Mutex::new(Vec::<u64>::new());
            let run = |len: usize| {
                let (mut all, mut new, mut hits) = (Vec::new(), Vec::new(), Vec::new());
                let mut false_negatives = 0;
                for (i, batch) in items.chunks(len).enumerate() {
                    if i % 4 == 0 {
                        step.wait();
                    }
                    new.clear();
                    f.insert_many(batch, &mut new).unwrap();
                    hits.clear();
                    f.contains_many(batch, &mut hits);
                    false_negatives += hits.iter().filter(|&&h| !h).count();
                    all.extend_from_slice(&new);
                    let mine: Vec<u64> = batch
                        .iter()
                        .zip(&new)
                        .filter(|(_, n)| **n)
                        .map(|(k, _)| *k)
                        .collect();
                    let theirs = std::mem::replace(&mut *handed.lock().unwrap(), mine);
                    hits.clear();
                    f.contains_many(&theirs, &mut hits);
                    false_negatives += hits.iter().filter(|&&h| !h).count();
                }
                (all, false_negatives)
            };
            let ((a, fa), (b, fb)) = std::thread::scope(|s| {
                let a = s.spawn(|| run(64));
                let b = s.spawn(|| run(64));
                (a.join().unwrap(), b.join().unwrap())
            });
            let both = a.iter().zip(&b).filter(|(x, y)| **x && **y).count();
            let neither = a.iter().zip(&b).filter(|(x, y)| !**x && !**y).count();
            assert_eq!(fa + fb, 0, "c0 {c0}, round {round}: false negatives");
            assert_eq!(both, 0, "c0 {c0}, round {round}: keys new to both threads");
            assert!(
                neither < n / 50,
                "c0 {c0}, round {round}: {neither} new to neither"
            );
            assert!(items.iter().all(|k| f.contains(k)));
            assert!(f.layers() >= 4, "{}", f.layers());
            if c0 > 1_000 {
                assert!(f.memory_bytes() >= BATCHED_BYTES, "{}", f.memory_bytes());
            }
        }
    }
}

/// Two threads insert the same keys in batches while a third rotates, once each time the
/// three meet (every 4 batches: the rotation races the next batches), and the inserts rotate
/// every `per / 10` new items. Each thread records the generation before and after each batch;
/// after each batch it looks up the keys it was told were new (`contains_many`), and those the
/// other thread handed it: each must be found while the generation is less than the one before
/// its insert plus `G`. Two "new" for one key count only if the two batches were less than `G`
/// generations apart.
///
/// The meetings keep the threads within 4 batches of each other and the rotator to one
/// rotation a meeting, so a thread's own keys are always checked within the window (fewer than
/// `G` rotations can fall between a batch and its check): those checks are counted, and must
/// all have been made.
#[test]
fn batches_racing_rotations_keep_the_retention_and_are_exactly_once() {
    const G: u32 = 5;
    const BATCH: usize = 48;
    const MEET: usize = 4; // batches
    for (per, n) in [(2_000u64, 150_000usize), (1_000_000, 1_500_000)] {
        let f = WindowedBloomFilter::builder(per)
            .periods(G - 1)
            .rotate_after(per / 10)
            .build()
            .unwrap();
        if per > 2_000 {
            assert!(f.memory_bytes() >= BATCHED_BYTES);
        }
        let shared = keys(40 + per, n);
        let meetings = shared.len().div_ceil(BATCH).div_ceil(MEET);
        let handed = Mutex::new(Vec::<(u64, u64)>::new());
        let step = Barrier::new(3);
        let run = || {
            let mut results = Vec::with_capacity(n);
            let (mut new, mut hits) = (Vec::new(), Vec::new());
            let (mut false_negatives, mut own_checked, mut own_new) = (0usize, 0usize, 0usize);
            for (i, batch) in shared.chunks(BATCH).enumerate() {
                if i % MEET == 0 {
                    step.wait();
                }
                let before = f.generation();
                new.clear();
                f.insert_many(batch, &mut new);
                let after = f.generation();
                results.extend(new.iter().map(|&n| (n, before, after)));
                let mine: Vec<(u64, u64)> = batch
                    .iter()
                    .zip(&new)
                    .filter(|(_, n)| **n)
                    .map(|(&k, _)| (k, before))
                    .collect();
                own_new += mine.len();
                let theirs = std::mem::replace(&mut *handed.lock().unwrap(), mine.clone());
                let check: Vec<(u64, u64)> = mine.iter().copied().chain(theirs).collect();
                hits.clear();
                f.contains_many(check.iter().map(|(k, _)| k), &mut hits);
                let now = f.generation();
                for (at, ((_, before), hit)) in check.iter().zip(&hits).enumerate() {
                    if now < before + u64::from(G) {
                        false_negatives += usize::from(!*hit);
                        own_checked += usize::from(at < mine.len());
                    }
                }
            }
            (results, false_negatives, own_checked, own_new)
        };
        let (successes, (ra, fa, ca, na), (rb, fb, cb, nb)) = std::thread::scope(|s| {
            let rotator = s.spawn(|| {
                let mut successes = 0u64;
                for _ in 0..meetings {
                    step.wait();
                    successes += u64::from(f.rotate().is_some());
                }
                successes
            });
            let a = s.spawn(run);
            let b = s.spawn(run);
            (
                rotator.join().unwrap(),
                a.join().unwrap(),
                b.join().unwrap(),
            )
        });
        let both = ra
            .iter()
            .zip(&rb)
            .filter(|((na, ba, aa), (nb, bb, ab))| {
                *na && *nb && aa.max(ab) - ba.min(bb) < u64::from(G)
            })
            .count();
        eprintln!(
            "per {per}: {successes} of {meetings} rotations by the rotator, generation {}; \
             false negatives {fa} + {fb}; both new within the window {both}",
            f.generation()
        );
        // Each `rotate()` rotated, or another rotation came while it ran (one per call: the
        // calls are one after the other).
        assert!(f.generation() >= meetings as u64, "{}", f.generation());
        assert_eq!(
            fa + fb,
            0,
            "per {per}: false negatives within the retention"
        );
        assert_eq!(both, 0, "per {per}: keys told new twice within the window");
        assert_eq!(
            (ca, cb),
            (na, nb),
            "per {per}: a thread's own new keys checked within the window"
        );
    }
}

/// Which generation holds each item, not only what each insert answered: twin filters (one
/// fed by `insert`, one by `insert_many`) through count-mode rotations that the batches' own
/// inserts set off in the middle of their groups, then rotated by hand one generation at a
/// time until everything has expired, comparing every item after each rotation. Single
/// threaded and deterministic, so both filters must hold the very same bits: an item that the
/// batch wrote into the generation current when its group started, not the one current at
/// its own insert, expires one rotation too early and shows up here. (The racing test above
/// cannot see that: an item that a batch wrote into the generation current when the batch
/// started keeps the retention that test checks.)
#[test]
fn windowed_insert_many_puts_each_item_in_the_generation_a_loop_would() {
    for (per, g, n) in [
        (1_000_000u64, 7u32, 3_500_000usize),
        (500_000, 9, 2_000_000),
    ] {
        let (looped, batched) = (window(per, g), window(per, g));
        assert!(batched.memory_bytes() >= BATCHED_BYTES);
        let items = keys(7 * per + u64::from(g), n);
        let mut new = Vec::new();
        // Batches of 1..=100 items, so the rotations land at every place in a group.
        let mut at = 0;
        let mut len = 1;
        while at < items.len() {
            let batch = &items[at..(at + len).min(items.len())];
            for k in batch {
                looped.insert(k);
            }
            batched.insert_many(batch, &mut new);
            at += len;
            len = len % 100 + 7;
        }
        assert_eq!(batched.generation(), looped.generation());
        assert!(batched.generation() >= 2, "{}", batched.generation());
        let mut hits = Vec::new();
        for rotation in 0..=g {
            hits.clear();
            batched.contains_many(&items, &mut hits);
            let differ: Vec<usize> = (0..items.len())
                .filter(|&i| hits[i] != looped.contains(&items[i]))
                .collect();
            assert!(
                differ.is_empty(),
                "per {per}, G {g}, after {rotation} rotations by hand: {} items differ \
                 (first at {:?})",
                differ.len(),
                &differ[..differ.len().min(5)]
            );
            looped.rotate().unwrap();
            batched.rotate().unwrap();
        }
    }
}

/// A scaling filter whose growth fails (capacity 1 at a tight rate: the layout's lowest rate is
/// reached after a few layers) stops the batch where a loop of `insert` with `?` stops, with
/// the same error; a retry of the rest stops at the same item again, as a retried `insert`.
#[test]
fn growing_insert_many_stops_where_a_loop_does_when_growth_fails() {
    let build = || {
        GrowingBloomFilter::builder(1)
            .fpr(0.0001)
            .layout(Layout::Word)
            .build()
            .unwrap()
    };
    let (looped, batched) = (build(), build());
    let items = keys(77, 1_000);
    let mut expected = Vec::new();
    let mut error = None;
    for k in &items {
        match looped.insert(k) {
            Ok(n) => expected.push(n),
            Err(e) => {
                error = Some(e);
                break;
            }
        }
    }
    let error = error.expect("the growth fails before 1,000 items");
    let mut new = Vec::new();
    assert_eq!(batched.insert_many(&items, &mut new), Err(error.clone()));
    assert_eq!(new, expected);
    assert_eq!(batched.layers(), looped.layers());
    let failed = new.len();
    // Retried, the rest stops at once on the same item, as a retried `insert` does.
    let mut again = Vec::new();
    assert_eq!(
        batched.insert_many(&items[failed..], &mut again),
        looped.insert(&items[failed]).map(|_| 0)
    );
    assert!(again.is_empty(), "{again:?}");
    let mut hits = Vec::new();
    batched.contains_many(&items, &mut hits);
    let loop_hits: Vec<bool> = items.iter().map(|k| looped.contains(k)).collect();
    assert_eq!(hits, loop_hits);
}

/// The word layout's batched lookup (rounds of the 2 newest layers, then 8 older ones at a
/// time) in schedules of every shape, all at 8 MiB or more so that it runs: 1 layer (scaling
/// or not), 2, 3, 9, 10, 11 and 17 layers (rounds that end on, before and after a round's
/// edge), expansions 1, 3 and 4, tightening ratios 0.5 and 0.99, and a filter at the layer
/// limit (64, its next growth refused); each also saved and loaded. Keys of every layer (the
/// first, last and some between) and fresh keys, in batches of every length with repeats:
/// `contains_many` and `contains_many_hashes` append the results of a loop of `contains`,
/// and their counts are the hits appended.
#[test]
fn growing_contains_many_in_every_schedule_shape_gives_a_loop_of_contains() {
    use seen::sizing::{GrowingSizing, MAX_LAYERS};
    // (expansion, tightening, fpr, scaling, layers)
    let cases: [(u32, f64, f64, bool, u32); 12] = [
        (2, 0.8, 0.01, false, 1),
        (2, 0.8, 0.01, true, 1),
        (2, 0.8, 0.01, true, 2),
        (2, 0.8, 0.01, true, 3),
        (2, 0.8, 0.01, true, 9),
        (2, 0.8, 0.01, true, 10),
        (2, 0.8, 0.01, true, 11),
        (2, 0.8, 0.01, true, 17),
        (3, 0.5, 0.1, true, 9),
        (4, 0.8, 0.01, true, 10),
        (1, 0.99, 0.05, true, 18),
        (1, 0.99, 0.05, true, MAX_LAYERS),
    ];
    for (case, &(e, t, fpr, scaling, want)) in cases.iter().enumerate() {
        // The smallest power-of-two c0 whose `want` layers take 8 MiB.
        let mut c0 = 16u64;
        let sizing = |c0| match scaling {
            true => GrowingSizing::new(c0, fpr, Layout::Word, e, t),
            false => GrowingSizing::non_scaling(c0, fpr, Layout::Word),
        };
        while sizing(c0).unwrap().bytes(want).unwrap() < BATCHED_BYTES {
            c0 *= 2;
        }
        let f = GrowingBloomFilter::builder(c0)
            .fpr(fpr)
            .expansion(e)
            .tightening(t)
            .scaling(scaling)
            .layout(Layout::Word)
            .build()
            .unwrap();
        let what = format!("case {case}: e {e}, t {t}, scaling {scaling}, c0 {c0}, {want} layers");
        // Fill in small chunks to `want` layers (at the limit: until the growth is refused),
        // noting where each layer's keys start.
        let items = keys(1_000 + case as u64, 6_000_000);
        let (mut at, mut starts, mut new) = (0, vec![0usize], Vec::new());
        while f.layers() < want as usize || (want == MAX_LAYERS && at < items.len()) {
            let chunk = (f.sizing().layer_capacity(f.layers() as u32 - 1).unwrap() / 32).max(1);
            let end = (at + chunk as usize).min(items.len());
            let before = f.layers();
            match f.insert_many(&items[at..end], &mut new) {
                Ok(_) => at = end,
                Err(Error::TooLarge { what: "layers", .. }) if want == MAX_LAYERS => break,
                Err(e) => panic!("{what}: {e:?}"),
            }
            if f.layers() > before {
                starts.push(at);
            }
            assert!(at < items.len(), "{what}: ran out of keys");
        }
        // A few more keys into the newest layer (none at the limit: it is full).
        if want < MAX_LAYERS {
            let end = at + 1_000;
            f.insert_many(&items[at..end], &mut new).unwrap();
            at = end;
        }
        starts.push(at);
        assert_eq!(f.layers(), want as usize, "{what}");
        assert!(
            f.memory_bytes() >= BATCHED_BYTES,
            "{what}: {}",
            f.memory_bytes()
        );
        // Each layer's first and last keys and some between (a chunk may straddle a growth:
        // those keys are in one of two neighbours, which is all the test needs), and as many
        // fresh keys, interleaved.
        let mut held = Vec::new();
        for w in starts.windows(2) {
            let range = &items[w[0]..w[1]];
            held.extend(range.iter().step_by((range.len() / 200).max(1)));
            held.extend(range.last());
        }
        let fresh = keys(1 << 50 | case as u64, held.len());
        let probe: Vec<u64> = held
            .iter()
            .zip(&fresh)
            .flat_map(|(&a, &b)| [a, b])
            .collect();
        let loaded = {
            let mut file = Vec::new();
            f.write_to(&mut file).unwrap();
            GrowingBloomFilter::read_from(&file[..]).unwrap()
        };
        assert_eq!(loaded.layers(), want as usize, "{what}");
        let h = *f.hasher();
        for g in [&f, &loaded] {
            let (mut hits, mut hash_hits) = (vec![true], vec![false]);
            for batch in batches(&probe) {
                let before = hits.len();
                let count = g.contains_many(&batch, &mut hits);
                assert_eq!(
                    count,
                    hits[before..].iter().filter(|&&h| h).count(),
                    "{what}"
                );
                let count =
                    g.contains_many_hashes(batch.iter().map(|k| h.hash_item(k)), &mut hash_hits);
                assert_eq!(
                    count,
                    hash_hits[before..].iter().filter(|&&h| h).count(),
                    "{what}"
                );
            }
            let expected: Vec<bool> = batches(&probe)
                .iter()
                .flatten()
                .map(|k| f.contains(k))
                .collect();
            assert_eq!((hits[0], hash_hits[0]), (true, false), "{what}: appended");
            assert!(
                hits[1..] == expected[..],
                "{what}: contains_many differs from contains"
            );
            assert!(
                hash_hits[1..] == expected[..],
                "{what}: contains_many_hashes differs"
            );
            assert!(held.iter().all(|k| g.contains(k)), "{what}: false negative");
        }
    }
}
