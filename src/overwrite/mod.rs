//! `OverwriteMap` and `ExactOverwriteMap`: "the opposite of a Bloom filter".
//!
//! A fixed array of slots; an item's hash picks one, and the slot holds the last item hashed to
//! it. The map says "seen" only when the slot holds exactly this item, so it never calls a new
//! item seen (up to a 2^-64 fingerprint collision, or never in exact mode); it forgets old items
//! as new ones overwrite their slots, at the rate `sizing::overwrite_remember_probability` gives.
//!
//! Files:
//!
//! - `fingerprint.rs`: [`OverwriteMap`], 64-bit fingerprints in `AtomicU64` slots, and
//!   [`MapSlot`], where an item goes (for maps kept elsewhere, such as on a server);
//! - `exact.rs`: [`ExactOverwriteMap`], the keys' bytes behind swappable `Arc`s;
//! - `builder.rs`: [`MapBuilder`] and [`MapSize`], how both are sized and built;
//! - `claim.rs`: [`Claim`] and [`ExactClaim`], the at-least-once guards `claim` returns;
//! - here: what both share, slot selection and the bucket-count check.

use crate::Error;

mod builder;
mod claim;
mod exact;
mod file;
mod fingerprint;

pub use builder::{MapBuilder, MapSize};
pub use claim::{Claim, ExactClaim};
pub use exact::ExactOverwriteMap;
pub use fingerprint::{MapSlot, OverwriteMap};

/// The slot a hash selects among `buckets`, by multiply-shift (no `%`, no power-of-two rounding).
#[inline]
fn slot_of(h1: u64, buckets: usize) -> usize {
    crate::hash::reduce(h1, buckets as u64) as usize
}

/// Checks a bucket count and returns it as a `usize` that can be allocated at `slot_bytes` each.
fn checked_buckets(buckets: u64, slot_bytes: usize) -> Result<usize, Error> {
    if buckets == 0 {
        return Err(Error::ZeroBuckets);
    }
    let limit = (isize::MAX as u64) / slot_bytes as u64;
    if buckets > limit {
        return Err(Error::TooLarge {
            what: "buckets",
            requested: buckets as f64,
            limit,
        });
    }
    Ok(buckets as usize)
}

#[cfg(all(test, not(seen_loom)))]
mod tests {
    use super::*;

    #[test]
    fn slot_selection_spans_all_buckets() {
        assert_eq!(slot_of(0, 34_168_399), 0);
        assert_eq!(slot_of(u64::MAX, 34_168_399), 34_168_398);
        assert_eq!(slot_of(u64::MAX, 1), 0);
    }
}
