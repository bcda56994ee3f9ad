//! Every public constructor turns an absurd size into `Err(AllocationFailed | TooLarge)`, never
//! an abort. The checks run in a child process under an address-space cap (`ulimit -v`), so
//! that an allocation that is wrongly granted cannot take the machine down, and so that the
//! result does not depend on how much memory this machine has.
#![cfg(all(unix, not(seen_loom)))]

mod common;

use seen::builder::MapSize;
use seen::{
    AtomicBloomFilter, Error, ExactOverwriteMap, Layout, OverwriteMap, SemiConcurrentBloomFilter,
};

/// The cap for the child process: 2 GiB of address space.
const CAP_KIB: u64 = 2 << 20;

fn refused<T>(what: &str, result: Result<T, Error>) {
    match result {
        Err(Error::AllocationFailed { bytes }) => assert!(bytes > 0, "{what}"),
        Err(Error::TooLarge { .. }) => {}
        Err(other) => panic!("{what}: unexpected error {other:?}"),
        Ok(_) => panic!("{what}: an absurd size was allocated"),
    }
}

#[test]
fn absurd_sizes_are_errors_for_every_constructor() {
    if !common::in_capped_child("absurd_sizes_are_errors_for_every_constructor", CAP_KIB) {
        return;
    }
    // 10 GB and more: past the cap (AllocationFailed); u64::MAX items: past the address space
    // (TooLarge).
    for capacity in [10_000_000_000u64, 1_000_000_000_000, u64::MAX] {
        refused(
            "with_capacity",
            AtomicBloomFilter::with_capacity(capacity, 0.01),
        );
        for layout in [Layout::Word, Layout::Line] {
            refused(
                "AtomicBloomFilter builder",
                AtomicBloomFilter::builder(capacity)
                    .fpr(0.01)
                    .layout(layout)
                    .build(),
            );
            refused(
                "SemiConcurrentBloomFilter builder",
                SemiConcurrentBloomFilter::builder(capacity)
                    .fpr(0.01)
                    .layout(layout)
                    .build(),
            );
        }
    }
    for buckets in [2_000_000_000u64, 1 << 40, u64::MAX] {
        refused(
            "OverwriteMap::with_buckets",
            OverwriteMap::with_buckets(buckets),
        );
        refused(
            "OverwriteMap::builder",
            OverwriteMap::builder(buckets)
                .hasher(std::hash::RandomState::new())
                .build(),
        );
        refused(
            "ExactOverwriteMap::with_buckets",
            ExactOverwriteMap::with_buckets(buckets),
        );
        refused(
            "ExactOverwriteMap::builder",
            ExactOverwriteMap::builder(buckets)
                .hasher(std::hash::RandomState::new())
                .build(),
        );
    }
    // Remembering across 10^12 insertions with p = 0.9 takes ~9.5e12 buckets.
    refused(
        "OverwriteMap::for_window",
        OverwriteMap::for_window(1_000_000_000_000, 0.9),
    );
    refused(
        "ExactOverwriteMap::for_window",
        ExactOverwriteMap::for_window(1_000_000_000_000, 0.9),
    );
    refused(
        "ExactOverwriteMap::builder(Window)",
        ExactOverwriteMap::builder(MapSize::Window {
            later_insertions: 1_000_000_000_000,
            remember_probability: 0.9,
        })
        .build(),
    );
    // And a size that fits the cap is still granted: the cap is not what makes these fail.
    assert!(AtomicBloomFilter::with_capacity(1_000_000, 0.01).is_ok());
    assert!(
        SemiConcurrentBloomFilter::builder(1_000_000)
            .build()
            .is_ok()
    );
    assert!(OverwriteMap::with_buckets(1_000_000).is_ok());
}
