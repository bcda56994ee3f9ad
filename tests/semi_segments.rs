//! Review attacks on the semi-concurrent filter: segment sizes at their edges, save/load with
//! power-of-two segments, snapshots held across compactions, same keys from several threads.
#![cfg(not(seen_loom))]

use seen::{Error, SemiConcurrentBloomFilter};

#[test]
fn segment_bytes_edges_build_answer_and_round_trip() {
    assert!(matches!(
        SemiConcurrentBloomFilter::builder(1000)
            .segment_bytes(0)
            .build(),
        Err(Error::InvalidParameter(_))
    ));
    for bytes in [
        1,
        63,
        64,
        65,
        192,
        320,
        4095,
        4097,
        12_288,
        1 << 20,
        1 << 40,
        usize::MAX,
    ] {
        let f = SemiConcurrentBloomFilter::builder(5_000)
            .fpr(0.01)
            .insertions_before_compact(7)
            .segment_bytes(bytes)
            .build()
            .unwrap();
        let lines = f.snapshot().bit_len() / 512;
        let seg_lines = (bytes.div_ceil(64)).next_power_of_two() as u64;
        assert_eq!(
            f.snapshot().segments() as u64,
            lines.div_ceil(seg_lines.min(lines.max(1))),
            "bytes={bytes}"
        );
        for k in 0..3_000u64 {
            f.insert(&k);
            assert!(f.contains(&k), "bytes={bytes} k={k}");
        }
        let held = f.snapshot();
        let held_answers: Vec<bool> = (0..5_000u64).map(|k| held.contains(&k)).collect();
        // All but the few still pending (fewer than 7) are in the snapshot already.
        assert!(held_answers[..3_000].iter().filter(|&&h| h).count() > 2_990);
        for k in 3_000..5_000u64 {
            f.insert(&k);
        }
        f.compact();
        let snapshot = f.snapshot();
        assert!((0..5_000u64).all(|k| f.contains(&k) && snapshot.contains(&k)));
        let mut buf = Vec::new();
        f.write_to(&mut buf).unwrap();
        let g = SemiConcurrentBloomFilter::read_from(&buf[..]).unwrap();
        assert!((0..5_000u64).all(|k| g.contains(&k)), "bytes={bytes}");
        assert_eq!(g.snapshot().bit_len(), f.snapshot().bit_len());
        // The held snapshot still answers what it answered.
        let again: Vec<bool> = (0..5_000u64).map(|k| held.contains(&k)).collect();
        assert_eq!(held_answers, again, "bytes={bytes}");
    }
}

#[test]
fn a_held_snapshot_never_changes_across_many_compactions() {
    let f = SemiConcurrentBloomFilter::builder(100_000)
        .fpr(0.01)
        .insertions_before_compact(1 << 30)
        .segment_bytes(192)
        .build()
        .unwrap();
    for k in 0..1_000u64 {
        f.insert(&k);
    }
    f.compact();
    let held = f.snapshot();
    let before: Vec<bool> = (0..200_000u64).map(|k| held.contains(&k)).collect();
    for round in 1..50u64 {
        for k in round * 1_000..(round + 1) * 1_000 {
            f.insert(&k);
        }
        assert!(f.compact());
    }
    let after: Vec<bool> = (0..200_000u64).map(|k| held.contains(&k)).collect();
    assert_eq!(before, after);
}

#[test]
fn same_keys_from_four_threads_with_a_compactor_and_immediate_lookups() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    for ibc in [1usize, 2, 16, 1024] {
        let f = SemiConcurrentBloomFilter::builder(400_000)
            .fpr(1e-5)
            .insertions_before_compact(ibc)
            .segment_bytes(64)
            .build()
            .unwrap();
        let new = AtomicUsize::new(0);
        let done = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                while !done.load(Ordering::Relaxed) {
                    f.compact();
                    let snap = f.snapshot();
                    std::hint::black_box(snap.contains(&7u64));
                }
            });
            let hs: Vec<_> = (0..4)
                .map(|t| {
                    let (f, new) = (&f, &new);
                    s.spawn(move || {
                        for i in 0..50_000u64 {
                            // Threads walk the keys in different orders, so they collide.
                            let k = if t % 2 == 0 { i } else { 49_999 - i };
                            if f.insert(&k) {
                                new.fetch_add(1, Ordering::Relaxed);
                            }
                            assert!(f.contains(&k), "ibc={ibc} key {k} lost right after insert");
                        }
                    })
                })
                .collect();
            for h in hs {
                h.join().unwrap();
            }
            done.store(true, Ordering::Relaxed);
        });
        assert!(new.load(Ordering::Relaxed) >= 50_000 - 100, "ibc={ibc}");
        f.compact();
        assert_eq!(f.pending_len(), 0, "ibc={ibc}");
        assert!(
            {
                let snapshot = f.snapshot();
                (0..50_000u64).all(|k| snapshot.contains(&k))
            },
            "ibc={ibc}"
        );
    }
}
