//! `FrozenBloomFilter`: an immutable, segmented Bloom filter. The compacted part of a
//! [`SemiConcurrentBloomFilter`](super::SemiConcurrentBloomFilter), and what its `snapshot()`
//! returns.

use core::fmt;
use core::hash::Hash;

use super::Probe;
use super::info::{self, BloomInfo};
use crate::Layout;
use crate::bits::LINE_WORDS;
use crate::hash::{Hash128, ItemHasher, StableHasher};
use crate::sizing::BlockedSizing;
use crate::sync::SharedWords;

/// An immutable Bloom filter, safe to share and query from any thread with plain loads.
///
/// Its bits are split into segments (4 KiB by default, `segment_bytes` on the semi-concurrent
/// filter's builder). Same layouts, sizing and probe positions as
/// [`AtomicBloomFilter`](crate::AtomicBloomFilter): a hash inserted in one is found at the
/// same bits in the other.
///
/// # Guarantees
///
/// - **Immutable**: every thread sees the same bits for the snapshot's whole life; a snapshot
///   of a [`SemiConcurrentBloomFilter`](crate::SemiConcurrentBloomFilter) holds every item
///   compacted before it was taken, and never one inserted later.
/// - **No false negatives** for the items it holds; **false positives** at a rate of at most
///   the target `fpr` when it holds `capacity` distinct items.
/// - **Progress**: `contains` is wait-free (plain loads of one block).
///
/// # Examples
///
/// ```
/// let filter = seen::SemiConcurrentBloomFilter::with_capacity(1000, 0.01)?;
/// filter.insert("a");
/// filter.compact();
/// let snapshot = filter.snapshot(); // an Arc<FrozenBloomFilter>, never changes
/// filter.insert("b");
/// filter.compact();
/// assert!(snapshot.contains("a") && !snapshot.contains("b"));
/// # Ok::<(), seen::Error>(())
/// ```
pub struct FrozenBloomFilter<H = StableHasher> {
    pub(super) sizing: BlockedSizing,
    /// A segment holds `1 << segment_shift` words (a power of two: a shift and a mask find a
    /// word's segment, where a runtime divisor cost a `div` on every lookup).
    pub(super) segment_shift: u32,
    /// Plain words, never modified once shared.
    pub(super) segments: Box<[SharedWords]>,
    pub(super) hasher: H,
}

impl<H: ItemHasher + Clone> FrozenBloomFilter<H> {
    /// A filter of these segments, each of `segment_words` words (a power of two, at least a
    /// cache line) but the last, which may be shorter.
    pub(crate) fn from_segments(
        sizing: BlockedSizing,
        segment_words: usize,
        segments: Vec<SharedWords>,
        hasher: H,
    ) -> Self {
        assert!(
            segment_words.is_power_of_two() && segment_words >= LINE_WORDS,
            "a segment is a power of two of words, at least a line"
        );
        Self {
            sizing,
            segment_shift: segment_words.trailing_zeros(),
            segments: segments.into_boxed_slice(),
            hasher,
        }
    }

    /// The segment of word `word` and the word's index in it.
    #[inline(always)]
    fn locate(&self, word: usize) -> (usize, usize) {
        locate(word, self.segment_shift)
    }

    /// Whether `item` is possibly in the filter (`false`: certainly not).
    #[inline]
    pub fn contains<T: Hash + ?Sized>(&self, item: &T) -> bool {
        self.contains_hash(self.hasher.hash_item(item))
    }

    /// [`contains`](Self::contains) of a precomputed hash.
    #[inline]
    pub fn contains_hash(&self, hash: Hash128) -> bool {
        let probe = Probe::new(hash, &self.sizing);
        // A block never straddles segments: both are whole cache lines.
        let (segment, at) = self.locate(probe.first_word());
        probe.is_set_in(&self.segments[segment][at..])
    }

    /// The number of bits (a multiple of 512).
    pub fn bit_len(&self) -> u64 {
        self.sizing.bits
    }

    /// The memory the bits take, in bytes: the sum of the segments (some of which may be
    /// shared with other snapshots).
    pub fn memory_bytes(&self) -> u64 {
        self.segments.iter().map(|s| s.len() as u64 * 8).sum()
    }

    /// `k`, the bits set per item.
    pub fn hashes(&self) -> u32 {
        self.sizing.hashes
    }

    /// The block layout.
    pub fn layout(&self) -> Layout {
        self.sizing.layout
    }

    /// The number of items the filter was sized for.
    pub fn capacity(&self) -> u64 {
        self.sizing.capacity
    }

    /// The target false-positive rate at capacity.
    pub fn fpr(&self) -> f64 {
        self.sizing.fpr
    }

    /// The filter's size, as [`AtomicBloomFilter::sizing`](crate::AtomicBloomFilter::sizing).
    pub fn sizing(&self) -> BlockedSizing {
        self.sizing
    }

    /// The number of segments the bits are split into.
    pub fn segments(&self) -> usize {
        self.segments.len()
    }

    /// The hasher.
    pub fn hasher(&self) -> &H {
        &self.hasher
    }
}

/// The segment of word `word`, in segments of `1 << shift` words, and the word's index in it.
#[inline(always)]
fn locate(word: usize, shift: u32) -> (usize, usize) {
    (word >> shift, word & ((1 << shift) - 1))
}

impl<H> FrozenBloomFilter<H> {
    /// What the snapshot is and holds, as
    /// [`AtomicBloomFilter::info`](crate::AtomicBloomFilter::info). Reads every word: O(m).
    pub fn info(&self) -> BloomInfo {
        let bytes = self.segments.iter().map(|s| s.len() as u64 * 8).sum();
        info::single("FrozenBloomFilter", &self.sizing, bytes, || {
            self.segments.iter().flat_map(|s| s.iter().copied())
        })
    }
}

impl<H> fmt::Debug for FrozenBloomFilter<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FrozenBloomFilter")
            .field("sizing", &self.sizing)
            .field("segments", &self.segments.len())
            .finish_non_exhaustive()
    }
}
