//! Lock-free concurrent deduplication filters: answer "have I seen this before?" from many
//! threads at once, millions of times a second, in bounded memory.
//!
//! ```
//! use seen::AtomicBloomFilter;
//!
//! let seen = AtomicBloomFilter::with_capacity(10_000_000, 0.01)?; // 15 MB, 1% false positives
//! std::thread::scope(|s| {
//!     s.spawn(|| seen.insert("msg-1"));
//!     s.spawn(|| seen.insert("msg-1")); // exactly one of the two inserts returns `true`
//! });
//! assert!(seen.contains("msg-1") && !seen.contains("msg-2"));
//! # Ok::<(), seen::Error>(())
//! ```
//!
//! # Which structure to pick
//!
//! - [`AtomicBloomFilter`]: never forgets; may call a new item "seen" with a probability you
//!   choose. Lock-free, one cache line per operation; with the default [`Layout::Word`], racing
//!   inserts of one item have exactly one winner.
//! - [`SemiConcurrentBloomFilter`]: inserts buffered in a concurrent set and compacted into
//!   immutable [`FrozenBloomFilter`] snapshots; pick it for consistent snapshots taken while
//!   writers go on. About 50x slower inserts than [`AtomicBloomFilter`].
//! - [`OverwriteMap`]: never calls a new item "seen" (up to a 2^-64 fingerprint collision),
//!   forgets old items; `forget` undoes an insert whose processing failed. For at-least-once
//!   queue consumers. [`ExactOverwriteMap`] stores the keys' bytes: no collision at all.
//! - [`sizing`]: the exact sizing math for Bloom filters and overwrite maps.
//! - [`hash`]: stable 128-bit hashing, the same on every run and platform.
//! - [`DedupFilter`]: the trait all structures implement, with the meaning of each answer.
//!
//! # Guarantees
//!
//! Every structure is `Send + Sync` and takes `&self` for every operation except `clear`.
//!
//! - Bloom filters have no false negatives under any interleaving: once `insert(x)` has
//!   returned, every `contains(x)` that happens after it (same thread, or after any
//!   synchronization) returns `true`.
//! - Among threads racing to insert the same new item, at least one is told it is new; with
//!   [`Layout::Word`] exactly one is.
//! - [`AtomicBloomFilter::insert`] and [`AtomicBloomFilter::contains`] are wait-free (a bounded
//!   number of atomic operations, no loops, no locks).
//! - The filters do not synchronize other memory: seeing an item does not make the inserting
//!   thread's other writes visible.
//!
//! These are model-checked with loom (`loom-tests/`, `docs/concurrency.md`) and stress-tested on
//! real threads. Invalid parameters return [`Error`]; nothing panics on bad input.
//!
//! # Performance
//!
//! At 10M items and 1%, one thread: an insert of a new item in about 10 ns, a lookup in about
//! 7 ns, 3.8-6.6x faster than `fastbloom`'s atomic filter in the same run. The default hasher
//! hashes a `u64` in 2.7 ns. `docs/benchmarks.md` has every size, both thread counts and the
//! commands.
//!
//! # Limitations
//!
//! - Blocked layouts spend more memory than a classic Bloom filter for the same false-positive
//!   rate: +28% ([`Layout::Word`]) or +4% ([`Layout::Line`]) at 1% (table in `docs/design.md`).
//! - Each layout has a smallest false-positive rate it reaches within 4x the memory of a
//!   classic Bloom filter: 6.4e-6 for [`Layout::Word`], 4.7e-15 for [`Layout::Line`]; below it,
//!   constructors return [`Error::FprBelowLayoutLimit`], naming the layout that can (see
//!   [`sizing::blocked`]).
//! - A filter does not grow: past its capacity the false-positive rate rises
//!   ([`AtomicBloomFilter::estimated_fpr`] tells by how much).
//! - Hash stability covers the byte stream an item's `Hash` impl writes, not the impl itself:
//!   see [`hash`].
//!
//! # Feature flags
//!
//! None yet. The `seen` command-line tool will come behind a `cli` feature.

mod bits;
mod bloom;
mod error;
mod filter;
pub mod hash;
mod overwrite;
pub mod sizing;
mod sync;

pub use bloom::{
    AtomicBloomFilter, AtomicBloomFilterBuilder, CompactionStats, FrozenBloomFilter, Layout,
    SemiConcurrentBloomFilter, SemiConcurrentBloomFilterBuilder,
};
pub use error::Error;
pub use filter::DedupFilter;
pub use overwrite::{Claim, ExactClaim, ExactOverwriteMap, MapBuilder, MapSize, OverwriteMap};

#[cfg(all(test, loom))]
mod loom_models;

/// Runs the README's Rust examples as doctests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
