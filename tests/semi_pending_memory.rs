//! The semi-concurrent filter's pending set gives its skip-list nodes back: millions of hashes
//! pass through it (each linked by an insert, removed by a compaction) and the process's
//! resident memory stays near the filter's bits. The skip list's nodes are reference counted
//! by hand (`RefEntry::release`); a count not released keeps a node for good. One test alone
//! in this binary, so that the resident size is this test's.
#![cfg(all(target_os = "linux", not(seen_loom)))]

use seen::SemiConcurrentBloomFilter;

/// The process's resident memory, in bytes (`/proc/self/statm`, second field, in pages).
fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

#[test]
fn hashes_that_pass_through_the_pending_set_leave_no_memory_behind() {
    const KEYS: u64 = 3_000_000;
    let f = SemiConcurrentBloomFilter::builder(2 * KEYS)
        .fpr(0.01)
        .insertions_before_compact(1024)
        .build()
        .unwrap();
    // Two snapshots' worth of bits, touched once, before the baseline.
    for k in 0..200_000u64 {
        f.insert(&k);
    }
    f.compact();
    for k in 200_000..400_000u64 {
        f.insert(&k);
    }
    f.compact();
    let bits = f.snapshot().memory_bytes();
    let before = resident_bytes();
    let mut new = 0u64;
    for k in 400_000..400_000 + KEYS {
        // Each new key is linked (and looked up: an entry per insert) then removed.
        new += u64::from(f.insert(&k));
        assert!(!f.insert(&k));
    }
    f.compact();
    assert_eq!(f.pending_len(), 0);
    let grown = resident_bytes().saturating_sub(before);
    eprintln!("resident memory grew by {grown} bytes; bits {bits} bytes");
    // 3M nodes of 48 to 64 bytes would be 150 MB or more; the bits are a few MB, and the
    // epoch's garbage not yet freed a few thousand nodes.
    assert!(new > KEYS * 9 / 10, "{new}");
    assert!(
        grown < 4 * bits + (16 << 20),
        "resident memory grew by {grown} bytes over {new} hashes passed through the pending set \
         (bits: {bits} bytes)"
    );
}
