//! A second hostile review of the semi-concurrent filter's two-table buffer (the design with
//! the turn check and the per-region compaction trigger). Real threads that meet at barriers
//! or at the crate's pause points; no sleeps.
#![cfg(not(seen_loom))]

mod common;

use seen::SemiConcurrentBloomFilter;
use seen::hash::{Hash128, ItemHasher};
use std::sync::Barrier;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;

use common::{Rng, semi_filter};

const FIRST_HASH: u64 = 1 << 40;

impl Rng {
    /// A storable word: at least 2^40 (bit 63 set; not bit 40, which `home` reads).
    fn big(&mut self) -> u64 {
        self.next() | 1 << 63
    }
}

/// The buffer's slots per table, as `assemble` computes them.
fn table_slots(ibc: usize) -> usize {
    ibc.saturating_mul(4).clamp(16, 1 << 16).next_power_of_two()
}

/// Hashes in the overflow (skip list), from `memory_bytes`: 64 bytes a node above the
/// empty filter's figure.
fn overflow_nodes(f: &SemiConcurrentBloomFilter, empty_bytes: u64) -> u64 {
    (f.memory_bytes() - empty_bytes)
        / SemiConcurrentBloomFilter::<seen::hash::StableHasher>::PENDING_NODE_BYTES
}

/// Inserts `n` distinct storable hashes (from `seed`) on one thread into a filter of
/// `capacity` with `insertions_before_compact` = `ibc`; the compactions that ran and the
/// average batch they took.
fn average_batch(capacity: u64, ibc: usize, seed: u64, n: usize) -> (usize, f64) {
    let f = semi_filter(capacity, ibc);
    let mut rng = Rng(seed);
    for _ in 0..n {
        f.insert_hash(Hash128 {
            h1: rng.big(),
            h2: rng.big(),
        });
    }
    let attempted = f.compaction_stats().attempted as usize;
    (attempted, n as f64 / attempted.max(1) as f64)
}

/// A small `insertions_before_compact` compacts in batches of about it, not of one (a first
/// version of the per-region trigger gave every table 8 regions, so below 16 a single published
/// hash made a compaction due). Single-threaded, distinct hashes.
#[test]
fn a_small_insertions_before_compact_is_not_a_batch_of_one() {
    for ibc in [8usize, 12, 15] {
        let n = 40 * ibc;
        let (attempted, batch) = average_batch(100_000, ibc, ibc as u64, n);
        assert!(
            batch >= ibc as f64 / 2.0,
            "ibc={ibc}: {attempted} compactions for {n} inserts, a batch of {batch:.1} \
             (expected about {ibc})"
        );
    }
}

/// The trigger for the usual values: the average batch is at least half of
/// `insertions_before_compact` (hashes spread evenly over the regions).
#[test]
fn the_average_batch_is_near_insertions_before_compact() {
    for ibc in [64usize, 256, 1024, 4096] {
        let (_, batch) = average_batch(1_000_000, ibc, 1000 + ibc as u64, 30 * ibc);
        eprintln!("ibc={ibc}: average batch {batch:.0}");
        assert!(
            batch >= ibc as f64 / 2.0,
            "ibc={ibc}: average batch {batch:.1}"
        );
    }
}

/// Above 16,384 the tables stop growing (65,536 slots), so a large `insertions_before_compact`
/// fills the active table past the point where 8 probes find a slot, and the rest goes to the
/// overflow (64 bytes a hash, counted by `memory_bytes`) until `pending_len()` reaches the
/// threshold: the pending count stays bounded, single-threaded.
#[test]
fn a_large_insertions_before_compact_stays_bounded() {
    let ibc = 50_000usize;
    let f = semi_filter(10_000_000, ibc);
    let empty = f.memory_bytes();
    let slots = table_slots(ibc);
    let mut rng = Rng(5);
    let (mut max_pending, mut max_overflow) = (0usize, 0u64);
    for i in 0..4 * ibc {
        f.insert_hash(Hash128 {
            h1: rng.big(),
            h2: rng.big(),
        });
        if i % 97 == 0 {
            max_pending = max_pending.max(f.pending_len());
            max_overflow = max_overflow.max(overflow_nodes(&f, empty));
        }
    }
    eprintln!(
        "ibc={ibc}, {slots} slots: at most {max_pending} pending, {max_overflow} in the overflow"
    );
    assert!(max_pending <= ibc + ibc / 2, "pending {max_pending}");
    assert!(f.compaction_stats().won >= 3);
    f.compact();
    f.compact();
    assert_eq!(f.pending_len(), 0);
    assert_eq!(f.memory_bytes(), empty, "the overflow's nodes are freed");
}

/// Adversarial hashes, single-threaded: all in one region, all on one home slot, all not
/// storable (overflow only), all sharing `h1`. Compaction must still trigger and bound the
/// pending count near `insertions_before_compact`; afterwards every hash is contained.
#[test]
fn adversarial_hashes_never_leave_pending_unbounded() {
    for ibc in [1usize, 7, 100, 1024] {
        let slots = table_slots(ibc) as u64;
        let region = slots / 8;
        type Gen = Box<dyn Fn(&mut Rng) -> Hash128>;
        let gens: Vec<(&str, Gen)> = vec![
            (
                "one region",
                Box::new(move |r: &mut Rng| Hash128 {
                    h1: r.big(),
                    h2: ((r.next() % region.max(1)) << 32) | (r.next() & 0xffff_ffff) | (1 << 63),
                }),
            ),
            (
                "one home",
                Box::new(|r: &mut Rng| Hash128 {
                    h1: r.big(),
                    h2: (7u64 << 32) | (1 << 63) | (r.next() & 0xffff_ffff),
                }),
            ),
            (
                "unstorable",
                Box::new(|r: &mut Rng| Hash128 {
                    h1: r.next() & (FIRST_HASH - 1),
                    h2: r.big(),
                }),
            ),
            (
                "shared h1",
                Box::new(|r: &mut Rng| Hash128 {
                    h1: 0xabcd_ef01_2345_6789,
                    h2: r.big(),
                }),
            ),
        ];
        for (name, gen_hash) in gens {
            let f = semi_filter(1_000_000, ibc);
            let mut rng = Rng(31 * ibc as u64);
            let hashes: Vec<Hash128> = (0..20 * ibc.max(50)).map(|_| gen_hash(&mut rng)).collect();
            let mut max_pending = 0;
            for &h in &hashes {
                f.insert_hash(h);
                max_pending = max_pending.max(f.pending_len());
                assert!(f.contains_hash(h), "{name}, ibc={ibc}: false negative");
            }
            assert!(
                max_pending <= (ibc + ibc / 2).max(2),
                "{name}, ibc={ibc}: {max_pending} pending"
            );
            f.compact();
            f.compact();
            assert_eq!(f.pending_len(), 0, "{name}, ibc={ibc}");
            assert!(
                hashes.iter().all(|&h| f.contains_hash(h)),
                "{name}, ibc={ibc}"
            );
        }
    }
}

/// Many threads, a compaction after nearly every insert (ibc 1: every publish is due), so
/// that claims meet switches all the time (the turn check gives slots up, drains close
/// claims). Each thread inserts its own hashes and a shared set, looks each up right after
/// its insert, and a compacting thread checks that a won compaction holds every hash whose
/// insert returned before the call. At the end nothing is pending (no region count leaked) and
/// every hash is contained, in the filter and after a save.
#[test]
fn claims_meeting_switches_lose_nothing_and_leak_no_count() {
    for ibc in [1usize, 2, 16] {
        let threads = 3;
        let per = 20_000usize;
        let f = semi_filter(100_000, ibc);
        let mut rng = Rng(900 + ibc as u64);
        let shared: Vec<Hash128> = (0..per)
            .map(|_| Hash128 {
                h1: rng.big(),
                h2: rng.big(),
            })
            .collect();
        let own: Vec<Vec<Hash128>> = (0..threads)
            .map(|_| {
                (0..per)
                    .map(|_| Hash128 {
                        h1: rng.big(),
                        h2: rng.big(),
                    })
                    .collect()
            })
            .collect();
        let progress: Vec<AtomicUsize> = (0..threads).map(|_| AtomicUsize::new(0)).collect();
        let done = AtomicUsize::new(0);
        let fns = AtomicUsize::new(0);
        let lost = AtomicUsize::new(0);
        let start = Barrier::new(threads + 1);
        thread::scope(|s| {
            for t in 0..threads {
                let (f, shared, own, progress, done, fns, start) =
                    (&f, &shared, &own[t], &progress, &done, &fns, &start);
                s.spawn(move || {
                    start.wait();
                    for i in 0..per {
                        for h in [own[i], shared[i]] {
                            f.insert_hash(h);
                            if !f.contains_hash(h) {
                                fns.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        progress[t].store(i + 1, Ordering::Release);
                    }
                    done.fetch_add(1, Ordering::Release);
                });
            }
            let (f, own, progress, done, lost, start) = (&f, &own, &progress, &done, &lost, &start);
            s.spawn(move || {
                start.wait();
                while done.load(Ordering::Acquire) < threads {
                    let before: Vec<usize> =
                        progress.iter().map(|p| p.load(Ordering::Acquire)).collect();
                    if f.compact() {
                        let snap = f.snapshot();
                        let missing: usize = (0..threads)
                            .map(|t| {
                                own[t][before[t].saturating_sub(64)..before[t]]
                                    .iter()
                                    .filter(|&&h| !snap.contains_hash(h))
                                    .count()
                            })
                            .sum();
                        lost.fetch_add(missing, Ordering::Relaxed);
                    }
                }
            });
        });
        assert_eq!(
            fns.into_inner(),
            0,
            "ibc={ibc}: false negatives after own insert"
        );
        assert_eq!(
            lost.into_inner(),
            0,
            "ibc={ibc}: a won compaction left out earlier inserts"
        );
        f.compact();
        f.compact();
        assert_eq!(
            f.pending_len(),
            0,
            "ibc={ibc}: pending after two compactions"
        );
        let all = || shared.iter().chain(own.iter().flatten());
        assert!(all().all(|&h| f.contains_hash(h)), "ibc={ibc}");
        let mut bytes = Vec::new();
        f.write_to(&mut bytes).unwrap();
        let loaded = SemiConcurrentBloomFilter::read_from(&bytes[..]).unwrap();
        assert!(
            all().all(|&h| loaded.contains_hash(h)),
            "ibc={ibc}: lost in a save"
        );
    }
}

/// A compaction paused at each of its pause points (after the switch and drain; after the swap;
/// after the reset): meanwhile another thread inserts new hashes (into the other table), inserts
/// the drained hashes again (each told "possibly present"), looks everything up, saves, and
/// calls `compact()` (false: one runs). Released, a `compact()` that begins after those inserts
/// returned is `true` and its copy holds them all; a save then holds everything.
#[cfg(feature = "failpoints")]
#[test]
fn a_paused_compaction_at_each_point_loses_nothing() {
    use std::sync::mpsc;
    for point in [
        "semi.compact.taken",
        "semi.compact.swapped",
        "semi.compact.removed",
    ] {
        let f = semi_filter(100_000, 1 << 20);
        let mut rng = Rng(point.len() as u64);
        let first: Vec<Hash128> = (0..500)
            .map(|_| Hash128 {
                h1: rng.big(),
                h2: rng.big(),
            })
            .collect();
        let second: Vec<Hash128> = (0..500)
            .map(|_| Hash128 {
                h1: rng.big(),
                h2: rng.big(),
            })
            .collect();
        for &h in &first {
            assert!(f.insert_hash(h));
        }
        let (paused_tx, paused_rx) = mpsc::channel::<()>();
        let (go_tx, go_rx) = mpsc::channel::<()>();
        thread::scope(|s| {
            let f = &f;
            let compactor = s.spawn(move || {
                let _armed = seen::failpoints::arm(move |p| {
                    if p == point {
                        paused_tx.send(()).unwrap();
                        go_rx.recv().unwrap();
                    }
                });
                f.compact()
            });
            paused_rx.recv().unwrap();
            // The compaction is paused at `point`.
            for &h in &second {
                f.insert_hash(h);
                assert!(f.contains_hash(h), "{point}: false negative after insert");
            }
            for &h in &first {
                assert!(!f.insert_hash(h), "{point}: a drained hash was told new");
                assert!(f.contains_hash(h), "{point}: a drained hash was lost");
            }
            assert!(
                !f.compact(),
                "{point}: a second compaction ran beside the first"
            );
            go_tx.send(()).unwrap();
            assert!(
                compactor.join().unwrap(),
                "{point}: the paused compaction lost"
            );
        });
        let snap = f.snapshot();
        assert!(first.iter().all(|&h| snap.contains_hash(h)), "{point}");
        assert!(f.compact(), "{point}: the second batch was pending");
        let snap = f.snapshot();
        assert!(
            second.iter().all(|&h| snap.contains_hash(h)),
            "{point}: a won compaction lacks inserts that returned before it"
        );
        assert_eq!(f.pending_len(), 0, "{point}");
    }
}

/// Inserts of one item from two threads meeting at a barrier each round, with a third thread
/// compacting in a loop: at least one says new, both find it right after, and at the end the
/// count of pending hashes returns to zero.
#[test]
fn the_same_item_from_two_threads_racing_compactions() {
    let f = semi_filter(1_000_000, 4);
    let rounds = 10_000usize;
    let meet = Barrier::new(2);
    let done = AtomicUsize::new(0);
    let news: Vec<AtomicUsize> = (0..rounds).map(|_| AtomicUsize::new(0)).collect();
    let fns = AtomicUsize::new(0);
    thread::scope(|s| {
        for t in 0..2 {
            let (f, meet, done, news, fns) = (&f, &meet, &done, &news, &fns);
            s.spawn(move || {
                for (r, new) in news.iter().enumerate() {
                    let h = f.hasher().hash_item(&(r as u64, 0xfeedu64));
                    meet.wait();
                    if f.insert_hash(h) {
                        new.fetch_add(1, Ordering::Relaxed);
                    }
                    if !f.contains_hash(h) {
                        fns.fetch_add(1, Ordering::Relaxed);
                    }
                }
                let _ = t;
                done.fetch_add(1, Ordering::Release);
            });
        }
        let (f, done) = (&f, &done);
        s.spawn(move || {
            while done.load(Ordering::Acquire) < 2 {
                f.compact();
            }
        });
    });
    assert_eq!(fns.into_inner(), 0, "false negatives after own insert");
    // A false positive of the bits may make both say "possibly present": allow a few.
    let none_new = news
        .iter()
        .filter(|n| n.load(Ordering::Relaxed) == 0)
        .count();
    assert!(
        none_new <= rounds / 500,
        "{none_new} rounds in which no insert said new"
    );
    f.compact();
    f.compact();
    assert_eq!(f.pending_len(), 0);
}
