//! Lock-free concurrent deduplication filters: answer "have I seen this before?" from many
//! threads at once, millions of times a second, in bounded memory.
//!
//! ```
//! use seen::sizing::{BloomSizing, overwrite_buckets};
//!
//! // A Bloom filter for 10 million tokens at a 1% false-positive rate:
//! let s = BloomSizing::optimal(10_000_000, 0.01)?;
//! assert_eq!((s.bits, s.hashes), (95_850_584, 7)); // 11.43 MiB, 7 probes
//! // An overwrite map that remembers an item across 3.6M later insertions with p = 0.9:
//! assert_eq!(overwrite_buckets(3_600_000, 0.9)?, 34_168_399);
//! # Ok::<(), seen::Error>(())
//! ```
//!
//! # Which structure to pick
//!
//! The crate is being built issue by issue; this is what exists today.
//!
//! - [`sizing`]: the exact sizing math for Bloom filters and overwrite maps (available).
//! - [`hash`]: stable 128-bit hashing, the same on every run and platform (available).
//! - [`DedupFilter`]: the trait all structures implement, with the meaning of each answer.
//! - `AtomicBloomFilter` (planned): a lock-free Bloom filter; never forgets, may call a new item
//!   "seen" with a chosen probability.
//! - `SemiConcurrentBloomFilter` (planned): buffered inserts compacted into immutable snapshots.
//! - `OverwriteMap` (planned): never calls a new item "seen", forgets old items; for
//!   at-least-once queue consumers.
//!
//! # Guarantees
//!
//! Every structure is `Send + Sync` and takes `&self` for every operation. The concurrency
//! contract (no false negatives for Bloom filters under any interleaving; at least one `true`
//! among racing inserts of one new item) is stated on [`DedupFilter`] and model-checked with loom
//! in `loom-tests/`. The sizing functions are pure and return [`Error`] for invalid input
//! instead of panicking.
//!
//! # Performance
//!
//! The default hasher, [`hash::StableHasher`] (xxh3-128), hashes a `u64` key in a few
//! nanoseconds; `docs/benchmarks.md` has the measurements and the command to reproduce them.
//!
//! # Limitations
//!
//! The stability of hashes covers the byte stream an item's `Hash` impl writes, not the impl
//! itself: see [`hash`].
//!
//! # Feature flags
//!
//! None yet. The `seen` command-line tool will come behind a `cli` feature.

mod bits;
mod bloom;
mod error;
mod filter;
pub mod hash;
pub mod sizing;
mod sync;

pub use bloom::{AtomicBloomFilter, AtomicBloomFilterBuilder, Layout};
pub use error::Error;
pub use filter::DedupFilter;

/// The loom facade's wrappers, exposed only to `loom-tests/` so that the facade itself is
/// model-checked. Not part of the public API.
#[cfg(loom)]
#[doc(hidden)]
pub mod __loom {
    pub use crate::sync::loom_impl::{ArcCell, PendingSet};
}

/// Runs the README's Rust examples as doctests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
