//! A hostile review of the semi-concurrent filter's two-table buffer, kept as tests: the same
//! keys from several threads with compactions, snapshots and saves racing them; hashes at the
//! edge of the buffer's stamps; every hash on one home slot; hashes that share `h1` with a
//! drained one (an earlier design lost them: it matched a drained slot by `h1` alone); extreme
//! parameters; damaged files. Real threads that meet at barriers.
#![cfg(not(seen_loom))]

mod common;

use seen::SemiConcurrentBloomFilter;
use seen::hash::Hash128;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Barrier, Mutex};
use std::thread;

use common::{Rng, semi_filter};

const FIRST_HASH: u64 = 1 << 40;

impl Rng {
    fn big(&mut self) -> u64 {
        self.next() | FIRST_HASH
    }
}

fn save_load(f: &SemiConcurrentBloomFilter) -> SemiConcurrentBloomFilter {
    let mut bytes = Vec::new();
    f.write_to(&mut bytes).unwrap();
    SemiConcurrentBloomFilter::read_from(&bytes[..]).unwrap()
}

/// Inserters run `ops` over the same sequence of hashes (each: insert, then contains right
/// after, counting false negatives; progress published with Release), while one more thread
/// compacts, snapshots and saves. Returns (false negatives after own insert, keys missing from
/// a save whose insert returned before the save began, keys missing from the copy of a won
/// compaction whose insert returned before the call began).
fn race(
    f: &SemiConcurrentBloomFilter,
    hashes: &[Hash128],
    inserters: usize,
    save_every: usize,
) -> (usize, usize, usize) {
    let progress: Vec<AtomicUsize> = (0..inserters).map(|_| AtomicUsize::new(0)).collect();
    let done = AtomicUsize::new(0);
    let fns = AtomicUsize::new(0);
    let lost_in_save = AtomicUsize::new(0);
    let lost_in_compact = AtomicUsize::new(0);
    let start = Barrier::new(inserters + 1);
    let returned = |progress: &[AtomicUsize]| {
        progress
            .iter()
            .map(|p| p.load(Ordering::Acquire))
            .max()
            .unwrap()
    };
    thread::scope(|s| {
        for t in 0..inserters {
            let (progress, done, fns, start) = (&progress, &done, &fns, &start);
            s.spawn(move || {
                start.wait();
                for (i, &h) in hashes.iter().enumerate() {
                    f.insert_hash(h);
                    if !f.contains_hash(h) {
                        fns.fetch_add(1, Ordering::Relaxed);
                    }
                    progress[t].store(i + 1, Ordering::Release);
                }
                done.fetch_add(1, Ordering::Release);
            });
        }
        s.spawn(|| {
            start.wait();
            let mut round = 0usize;
            while done.load(Ordering::Acquire) < inserters {
                round += 1;
                // Every hash below `before` had an insert return before `compact` began.
                let before = returned(&progress);
                if f.compact() {
                    let snap = f.snapshot();
                    let missing = hashes[..before]
                        .iter()
                        .filter(|&&h| !snap.contains_hash(h))
                        .count();
                    lost_in_compact.fetch_add(missing, Ordering::Relaxed);
                } else {
                    let _ = f.snapshot();
                }
                if round.is_multiple_of(save_every) {
                    let before = returned(&progress);
                    let loaded = save_load(f);
                    let missing = hashes[..before]
                        .iter()
                        .filter(|&&h| !loaded.contains_hash(h))
                        .count();
                    lost_in_save.fetch_add(missing, Ordering::Relaxed);
                }
            }
        });
    });
    (
        fns.into_inner(),
        lost_in_save.into_inner(),
        lost_in_compact.into_inner(),
    )
}

fn item_hashes(f: &SemiConcurrentBloomFilter, n: u64, seed: u64) -> Vec<Hash128> {
    use seen::hash::ItemHasher;
    (0..n).map(|k| f.hasher().hash_item(&(k, seed))).collect()
}

fn settle(f: &SemiConcurrentBloomFilter) {
    f.compact();
    f.compact();
    assert_eq!(f.pending_len(), 0, "pending after two compactions");
}

/// The same keys from 2 to 4 threads, at every compaction rate, with a compacting,
/// snapshotting and saving third party.
#[test]
fn same_keys_racing_with_compaction_snapshots_and_saves() {
    for ibc in [1usize, 2, 16, 1024, usize::MAX] {
        for inserters in [2usize, 3, 4] {
            let f = semi_filter(200_000, ibc);
            let n = if ibc <= 2 { 20_000 } else { 60_000 };
            let hashes = item_hashes(&f, n, ibc as u64 ^ inserters as u64);
            let (fns, lost_save, lost_compact) = race(&f, &hashes, inserters, 8);
            assert_eq!(fns, 0, "ibc={ibc} threads={inserters}: false negatives");
            assert_eq!(
                lost_save, 0,
                "ibc={ibc} threads={inserters}: lost by a save"
            );
            assert_eq!(
                lost_compact, 0,
                "ibc={ibc} threads={inserters}: missing from a won compaction's copy"
            );
            settle(&f);
            let loaded = save_load(&f);
            assert!(
                hashes
                    .iter()
                    .all(|&h| f.contains_hash(h) && loaded.contains_hash(h))
            );
            let stats = f.compaction_stats();
            assert!(stats.won <= stats.attempted, "{stats:?}");
        }
    }
}

/// The boundary hashes: h1 or h2 below, at and just above 2^40.
fn boundary_hashes(rng: &mut Rng) -> Vec<Hash128> {
    let edges = [
        0,
        1,
        2,
        3,
        FIRST_HASH - 2,
        FIRST_HASH - 1,
        FIRST_HASH,
        FIRST_HASH + 1,
        u64::MAX,
    ];
    let mut out = Vec::new();
    for &h1 in &edges {
        for &h2 in &edges {
            out.push(Hash128 { h1, h2 });
        }
        out.push(Hash128 { h1, h2: rng.big() });
        out.push(Hash128 {
            h1: rng.big(),
            h2: h1,
        });
    }
    // Small values in the high bits too (home slot from h2 >> 32).
    for i in 0..64u64 {
        out.push(Hash128 {
            h1: i,
            h2: rng.next(),
        });
        out.push(Hash128 {
            h1: rng.next(),
            h2: i << 32,
        });
    }
    out.sort();
    out.dedup();
    out
}

/// Hashes the tables cannot hold (h1 or h2 below 2^40) mixed with normal ones.
#[test]
fn boundary_hashes_under_races_and_compactions() {
    for ibc in [1usize, 2, 16, 1024, usize::MAX] {
        let f = semi_filter(100_000, ibc);
        let mut rng = Rng(ibc as u64);
        let mut hashes = Vec::new();
        for _ in 0..40 {
            hashes.extend(boundary_hashes(&mut rng));
            for _ in 0..200 {
                hashes.push(Hash128 {
                    h1: rng.next(),
                    h2: rng.next(),
                });
            }
        }
        let (fns, lost_save, lost_compact) = race(&f, &hashes, 3, 4);
        assert_eq!((fns, lost_save, lost_compact), (0, 0, 0), "ibc={ibc}");
        settle(&f);
        assert!(hashes.iter().all(|&h| f.contains_hash(h)), "ibc={ibc}");
        let loaded = save_load(&f);
        assert!(hashes.iter().all(|&h| loaded.contains_hash(h)), "ibc={ibc}");
        // Pending boundary hashes survive a save as pending hashes.
        let g = semi_filter(1000, usize::MAX);
        let edge = boundary_hashes(&mut rng);
        for &h in &edge {
            g.insert_hash(h);
        }
        let loaded = save_load(&g);
        assert!(
            edge.iter()
                .all(|&h| loaded.contains_hash(h) && g.contains_hash(h))
        );
    }
}

/// Many hashes with one home slot (the same h2 >> 32): every table's 8-probe window fills.
#[test]
fn one_home_slot_for_everything_under_races() {
    for ibc in [1usize, 16, 1024, usize::MAX] {
        let f = semi_filter(100_000, ibc);
        let mut rng = Rng(77u64.wrapping_add(ibc as u64));
        let hashes: Vec<Hash128> = (0..30_000)
            .map(|_| Hash128 {
                h1: rng.big(),
                h2: (0xdead_beefu64 << 32) | (rng.next() & 0xffff_ffff),
            })
            .collect();
        let (fns, lost_save, lost_compact) = race(&f, &hashes, 3, 16);
        assert_eq!((fns, lost_save, lost_compact), (0, 0, 0), "ibc={ibc}");
        settle(&f);
        assert!(hashes.iter().all(|&h| f.contains_hash(h)));
    }
}

/// A drained slot matches any hash with the drained hash's `h1` until the reset. An insert
/// of such a hash is then told "possibly present" and adds nothing: once the reset comes, the
/// hash is nowhere, a false negative for good. Real threads: one inserts hashes (h1, a), a
/// compactor drains them, and another thread inserts (h1, b) meanwhile.
#[test]
fn an_insert_sharing_h1_with_a_drained_hash_is_not_lost() {
    let f = semi_filter(1_000_000, usize::MAX);
    let mut rng = Rng(5);
    let rounds = 200;
    let per = 2_000;
    let barrier = Barrier::new(2);
    let lost = AtomicUsize::new(0);
    let example = Mutex::new(None);
    let stop = AtomicBool::new(false);
    let compacting = AtomicBool::new(false);
    let pairs: Vec<Vec<(Hash128, Hash128)>> = (0..rounds)
        .map(|_| {
            (0..per)
                .map(|_| {
                    // Same h1, and the same home slot (h2 >> 32), different h2.
                    let h1 = rng.big();
                    let h2 = rng.big();
                    (
                        Hash128 { h1, h2 },
                        Hash128 {
                            h1,
                            h2: h2 ^ (1 + (rng.next() & 0xffff_fffe)),
                        },
                    )
                })
                .collect()
        })
        .collect();
    thread::scope(|s| {
        s.spawn(|| {
            for round in &pairs {
                // First halves pending in the active table.
                for &(a, _) in round {
                    f.insert_hash(a);
                }
                compacting.store(true, Ordering::Release);
                barrier.wait();
                f.compact();
                compacting.store(false, Ordering::Release);
                barrier.wait();
            }
            stop.store(true, Ordering::Release);
        });
        s.spawn(|| {
            for round in &pairs {
                barrier.wait();
                // Once each (a second pass would add back what the first lost); the pass
                // overlaps the compaction's window between its drain and its reset.
                for &(_, b) in round {
                    f.insert_hash(b);
                }
                let _ = compacting.load(Ordering::Acquire);
                barrier.wait();
                f.compact();
                f.compact();
                for &(_, b) in round {
                    if !f.contains_hash(b) {
                        lost.fetch_add(1, Ordering::Relaxed);
                        example.lock().unwrap().get_or_insert(b);
                    }
                }
            }
        });
    });
    let _ = stop.load(Ordering::Acquire);
    assert_eq!(
        lost.into_inner(),
        0,
        "inserted, then missing for good (e.g. {:?})",
        example.into_inner().unwrap()
    );
}

/// Deterministically: a compaction held between its drain and its reset (failpoint), an insert
/// of (h1, b) while (h1, a) is drained.
#[cfg(feature = "failpoints")]
#[test]
fn an_insert_sharing_h1_with_a_drained_hash_held_compaction() {
    use std::rc::Rc;
    let f = Rc::new(semi_filter(1_000, usize::MAX));
    let a = Hash128 {
        h1: 0x1234_5678_9abc_def0,
        h2: 0x0fed_cba9_8765_4321,
    };
    let b = Hash128 {
        h1: a.h1,
        h2: 0x0fed_cba9_1111_2222,
    };
    assert!(f.insert_hash(a));
    assert!(!f.contains_hash(b), "b is not in the filter before");
    let g = f.clone();
    let told = Rc::new(std::cell::Cell::new(None));
    let t = told.clone();
    let _armed = seen::failpoints::arm(move |point| {
        if point == "semi.compact.taken" {
            t.set(Some(g.insert_hash(b)));
        }
    });
    assert!(f.compact());
    let new = told.get().expect("the point was reached");
    assert!(
        f.contains_hash(b),
        "insert_hash(b) returned {new} during the compaction, and now b is missing"
    );
}

/// Accounting after the threads stop.
#[test]
fn pending_stats_memory_and_info_are_consistent_after_races() {
    for ibc in [1usize, 16, 1024, usize::MAX] {
        let f = semi_filter(100_000, ibc);
        let hashes = item_hashes(&f, 20_000, 9);
        let (fns, _, _) = race(&f, &hashes, 3, 1_000_000);
        assert_eq!(fns, 0);
        let before = f.compaction_stats();
        f.compact();
        f.compact();
        assert_eq!(f.pending_len(), 0, "ibc={ibc}");
        assert!(!f.compact(), "ibc={ibc}: nothing pending, nothing to win");
        let after = f.compaction_stats();
        assert!(after.won <= after.attempted && after.attempted >= before.attempted);
        // Every compaction that took the lock counts as attempted (three here); only the two
        // that found something can have won.
        assert_eq!(
            after.attempted - before.attempted,
            3,
            "{before:?} {after:?}"
        );
        assert!(after.won - before.won <= 2, "{before:?} {after:?}");
        let snap = f.snapshot();
        let bits = snap.memory_bytes();
        let slots = ibc.saturating_mul(4).clamp(16, 1 << 16).next_power_of_two() as u64;
        let summary = ibc
            .saturating_mul(16)
            .clamp(64, 1 << 16)
            .next_power_of_two() as u64;
        assert_eq!(
            f.memory_bytes(),
            2 * bits + 32 * slots + 4 * summary,
            "ibc={ibc}"
        );
        let info = f.info();
        assert_eq!(info.bytes, f.memory_bytes());
        assert!(info.estimated_len as f64 >= 0.9 * 20_000.0, "{info:?}");
        assert!(info.estimated_len as f64 <= 1.1 * 20_000.0, "{info:?}");
        assert!(hashes.iter().all(|&h| snap.contains_hash(h)));
    }
}

/// Extreme parameters never panic or abort.
#[test]
fn extreme_parameters_give_errors_not_panics() {
    let f = semi_filter(1, 1);
    assert!(f.insert("x") && f.contains("x") && !f.insert("x"));
    f.compact();
    assert!(f.contains("x"));
    let f = semi_filter(1, usize::MAX);
    for k in 0..10_000u32 {
        f.insert(&k);
    }
    assert!((0..10_000u32).all(|k| f.contains(&k)));
    assert!(f.pending_len() >= 9_000, "nothing compacts at usize::MAX");
    assert!(f.compact());
    assert_eq!(f.pending_len(), 0);

    for cap in [u64::MAX, 1 << 62, 1 << 44] {
        let r = catch_unwind(|| {
            SemiConcurrentBloomFilter::builder(cap)
                .fpr(0.01)
                .build()
                .map(|_| ())
        });
        match r {
            Ok(Err(_)) => {}
            Ok(Ok(())) => panic!("capacity {cap}: built"),
            Err(_) => panic!("capacity {cap}: panicked"),
        }
    }
    assert!(
        SemiConcurrentBloomFilter::builder(10)
            .insertions_before_compact(0)
            .build()
            .is_err()
    );
    assert!(
        SemiConcurrentBloomFilter::builder(10)
            .segment_bytes(0)
            .build()
            .is_err()
    );
    for seg in [
        1usize,
        63,
        64,
        65,
        4096,
        1 << 40,
        usize::MAX / 2,
        usize::MAX,
    ] {
        let r = catch_unwind(|| {
            SemiConcurrentBloomFilter::builder(10_000)
                .segment_bytes(seg)
                .build()
                .map(|f| {
                    f.insert("y");
                    f.compact();
                    let s = f.snapshot();
                    assert!(s.contains("y"));
                })
        });
        assert!(r.is_ok(), "segment_bytes {seg} panicked");
    }
}

/// Round trips and damaged files.
#[test]
fn round_trips_and_damaged_files() {
    // Empty.
    let f = semi_filter(1000, 16);
    let loaded = save_load(&f);
    assert_eq!(loaded.pending_len(), 0);
    assert!(!loaded.contains("a"));
    // Only pending items.
    let f = semi_filter(1000, usize::MAX);
    for k in 0..500u32 {
        f.insert(&k);
    }
    assert!(f.pending_len() > 0);
    let mut bytes = Vec::new();
    f.write_to(&mut bytes).unwrap();
    let loaded = SemiConcurrentBloomFilter::read_from(&bytes[..]).unwrap();
    assert!((0..500u32).all(|k| loaded.contains(&k)));
    assert_eq!(loaded.pending_len(), 0);
    // Truncated anywhere: an error.
    for len in (0..bytes.len()).step_by(7).chain([bytes.len() - 1]) {
        let r = catch_unwind(|| SemiConcurrentBloomFilter::read_from(&bytes[..len]).is_err());
        assert_eq!(r.ok(), Some(true), "truncated to {len} of {}", bytes.len());
    }
    // One byte flipped anywhere: an error.
    let mut flipped = bytes.clone();
    for i in (0..bytes.len()).step_by(3) {
        flipped[i] ^= 0x40;
        let r = catch_unwind(AssertUnwindSafe(|| {
            SemiConcurrentBloomFilter::read_from(&flipped[..]).is_err()
        }));
        assert_eq!(r.ok(), Some(true), "byte {i} flipped");
        flipped[i] ^= 0x40;
    }
}
