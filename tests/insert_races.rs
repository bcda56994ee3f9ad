//! Real-thread races of the inserts that write without a second test: the line layout's
//! `insert_line` (a `fetch_or` of every word its bits touch) and the growing filter's insert
//! after its lookup of the layers. The same keys from every thread, a lookup on the same thread
//! right after its insert, inserts racing growths, and a lone insert of a fresh item among
//! other items' writes to the same lines. Threads meet at a `Barrier` every few keys; no sleeps.
//! (From a hostile review; each test failed against a broken variant: a load and a store
//! instead of the `fetch_or`, or the first missing bit alone deciding "new".)
#![cfg(not(seen_loom))]

mod common;

use seen::{AtomicBloomFilter, GrowingBloomFilter, Layout};
use std::sync::Barrier;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use common::Rng;

const THREADS: usize = 4;
const STEP: usize = 64;

/// `n` keys of the splitmix64 stream that `seed` starts.
fn keys(seed: u64, n: usize) -> Vec<u64> {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    (0..n).map(|_| rng.next()).collect()
}

/// `THREADS` threads insert the same keys in the same order, meeting at a barrier every `STEP`
/// keys; each checks `contains` right after its own insert. Returns, per key, how many threads
/// were told "new".
fn race<E: std::fmt::Debug>(
    items: &[u64],
    insert: impl Fn(&u64) -> Result<bool, E> + Sync,
    contains: impl Fn(&u64) -> bool + Sync,
) -> Vec<usize> {
    let barrier = Barrier::new(THREADS);
    let own_misses = AtomicUsize::new(0);
    let results: Vec<Vec<bool>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..THREADS)
            .map(|_| {
                s.spawn(|| {
                    let mut out = Vec::with_capacity(items.len());
                    for chunk in items.chunks(STEP) {
                        barrier.wait();
                        for k in chunk {
                            out.push(insert(k).unwrap());
                            if !contains(k) {
                                own_misses.fetch_add(1, Relaxed);
                            }
                        }
                    }
                    out
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let own_misses = own_misses.into_inner();
    assert_eq!(
        own_misses, 0,
        "{own_misses} false negatives right after the thread's own insert"
    );
    (0..items.len())
        .map(|i| results.iter().filter(|r| r[i]).count())
        .collect()
}

fn summary(news: &[usize]) -> (usize, usize, usize) {
    let none = news.iter().filter(|&&n| n == 0).count();
    let many = news.iter().filter(|&&n| n > 1).count();
    let max = news.iter().copied().max().unwrap_or(0);
    (none, many, max)
}

/// AtomicBloomFilter, both layouts: word exactly once, line at least once (the filter is 10x
/// over-sized, so a false positive among the keys is very unlikely: none tolerated beyond 2).
#[test]
fn atomic_same_keys_from_many_threads() {
    for layout in [Layout::Word, Layout::Line] {
        for round in 0..4u64 {
            let items = keys(1000 + round, 50_000);
            let f = AtomicBloomFilter::builder(500_000)
                .fpr(0.001)
                .layout(layout)
                .build()
                .unwrap();
            let news = race(&items, |k| Ok::<_, ()>(f.insert(k)), |k| f.contains(k));
            let (none, many, max) = summary(&news);
            eprintln!("atomic {layout:?} round {round}: none={none} many={many} max={max}");
            assert!(
                items.iter().all(|k| f.contains(k)),
                "false negative after join"
            );
            assert!(none <= 2, "{layout:?}: {none} keys new to no thread");
            if layout == Layout::Word {
                assert_eq!(many, 0, "word layout: {many} keys new to several threads");
            }
        }
    }
}

/// A tiny line-layout AtomicBloomFilter (lines shared by every key) so that the racing
/// threads' fetch_ors hit the same words; all keys must still be found.
#[test]
fn atomic_line_tiny_filter_same_keys_lose_nothing() {
    for round in 0..200u64 {
        let items = keys(5000 + round, 256);
        let f = AtomicBloomFilter::builder(64)
            .fpr(0.01)
            .layout(Layout::Line)
            .build()
            .unwrap();
        let _ = race(&items, |k| Ok::<_, ()>(f.insert(k)), |k| f.contains(k));
        assert!(
            items.iter().all(|k| f.contains(k)),
            "false negative after join, round {round}"
        );
    }
}

fn growing(
    cap: u64,
    fpr: f64,
    layout: Layout,
    expansion: u32,
    tightening: f64,
) -> GrowingBloomFilter {
    GrowingBloomFilter::builder(cap)
        .fpr(fpr)
        .layout(layout)
        .expansion(expansion)
        .tightening(tightening)
        .build()
        .unwrap()
}

/// Growing filter, small initial capacity: (a) expansion 2 from capacity 8 (about 13 growths),
/// (b) expansion 1 from capacity 40 (about 40 growths of one-line-ish layers). Word layout:
/// no key new to two threads; line layout: new to none only as a false positive.
#[test]
fn growing_same_keys_racing_growth() {
    for layout in [Layout::Word, Layout::Line] {
        for round in 0..3u64 {
            for (cap, exp, tight, fpr, n) in [
                (8u64, 2u32, 0.8, 0.001, 60_000usize),
                (40, 1, 0.95, 0.05, 1_600),
            ] {
                let f = growing(cap, fpr, layout, exp, tight);
                let items = keys(9000 + round * 7 + u64::from(exp), n);
                let news = race(&items, |k| f.insert(k), |k| f.contains(k));
                let (none, many, max) = summary(&news);
                eprintln!(
                    "growing {layout:?} cap {cap} exp {exp} round {round}: layers={} none={none} many={many} max={max}",
                    f.layers()
                );
                assert!(
                    items.iter().all(|k| f.contains(k)),
                    "false negative after join"
                );
                assert!(f.layers() >= 10, "too few growths: {}", f.layers());
                // Rate bound: fpr over the whole filter, generous factor 3 plus slack.
                let allowed = (n as f64 * fpr * 3.0) as usize + 3;
                assert!(
                    none <= allowed,
                    "{layout:?}: {none} keys new to no thread (allowed {allowed})"
                );
                if layout == Layout::Word {
                    assert_eq!(
                        many, 0,
                        "word layout across growth: {many} keys new to several threads"
                    );
                }
            }
        }
    }
}

/// One thread inserts fresh items (only it inserts them) while the others insert other items
/// into the same few lines. Oracle: if a lone insert of `x` returned false, a sequential filter
/// holding every other thread's items plus the lone thread's earlier items must contain `x`
/// (else no sequential order explains the `false`).
fn lone_insert_rounds<F, I>(rounds: u64, lone_n: usize, other_n: usize, make: F)
where
    F: Fn() -> I,
    I: LoneFilter + Sync,
{
    let mut unexplained = 0;
    let mut falses = 0;
    for round in 0..rounds {
        let f = make();
        let lone = keys(1_000_000 + round, lone_n);
        let others: Vec<Vec<u64>> = (0..THREADS - 1)
            .map(|t| keys(2_000_000 + round * 16 + t as u64, other_n))
            .collect();
        let barrier = Barrier::new(THREADS);
        let own_misses = AtomicUsize::new(0);
        let lone_res: Vec<bool> = std::thread::scope(|s| {
            for o in &others {
                let (f, barrier, own_misses) = (&f, &barrier, &own_misses);
                s.spawn(move || {
                    for chunk in o.chunks(other_n.div_ceil(lone_n.div_ceil(8))) {
                        barrier.wait();
                        for k in chunk {
                            f.ins(k);
                            if !f.has(k) {
                                own_misses.fetch_add(1, Relaxed);
                            }
                        }
                    }
                });
            }
            let h = s.spawn(|| {
                let mut out = Vec::new();
                for chunk in lone.chunks(8) {
                    barrier.wait();
                    for k in chunk {
                        out.push(f.ins(k));
                        if !f.has(k) {
                            own_misses.fetch_add(1, Relaxed);
                        }
                    }
                }
                out
            });
            h.join().unwrap()
        });
        let own_misses = own_misses.into_inner();
        assert_eq!(
            own_misses, 0,
            "round {round}: {own_misses} false negatives right after own insert"
        );
        let reference = make();
        for o in &others {
            for k in o {
                reference.ins(k);
            }
        }
        for (k, &new) in lone.iter().zip(&lone_res) {
            if !new {
                falses += 1;
                if !reference.has(k) {
                    unexplained += 1;
                }
            }
            reference.ins(k);
        }
        for k in lone.iter().chain(others.iter().flatten()) {
            assert!(f.has(k), "false negative after join");
        }
    }
    eprintln!("lone inserts: {falses} told seen, {unexplained} with no sequential explanation");
    assert_eq!(
        unexplained, 0,
        "a lone insert of a fresh item was told seen"
    );
}

trait LoneFilter {
    fn ins(&self, k: &u64) -> bool;
    fn has(&self, k: &u64) -> bool;
}
impl LoneFilter for AtomicBloomFilter {
    fn ins(&self, k: &u64) -> bool {
        self.insert(k)
    }
    fn has(&self, k: &u64) -> bool {
        self.contains(k)
    }
}
impl LoneFilter for GrowingBloomFilter {
    fn ins(&self, k: &u64) -> bool {
        self.insert(k).unwrap()
    }
    fn has(&self, k: &u64) -> bool {
        self.contains(k)
    }
}

#[test]
fn atomic_line_lone_insert_of_a_fresh_item_is_new() {
    // Capacity 16 at 5%: 2 lines; k = 4 or so, so a line fills slowly enough that most lone
    // inserts are truly new.
    lone_insert_rounds(3000, 16, 24, || {
        AtomicBloomFilter::builder(16)
            .fpr(0.05)
            .layout(Layout::Line)
            .build()
            .unwrap()
    });
}

#[test]
fn growing_line_lone_insert_of_a_fresh_item_is_new() {
    // Capacity large enough that the round never grows (so the reference filter, built the
    // same way, has the same single layer), small enough to share lines.
    lone_insert_rounds(3000, 16, 24, || {
        let f = GrowingBloomFilter::builder(200)
            .fpr(0.2)
            .layout(Layout::Line)
            .build()
            .unwrap();
        assert!(f.memory_bytes() <= 1024, "{}", f.memory_bytes());
        f
    });
}
