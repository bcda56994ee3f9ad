//! `FrozenBloomFilter`: an immutable, segmented Bloom filter. The compacted part of a
//! [`SemiConcurrentBloomFilter`](super::SemiConcurrentBloomFilter), and what its `snapshot()`
//! returns.

use core::fmt;
use core::hash::Hash;

use super::Probe;
use super::info::{self, BloomInfo};
use crate::bits::{LINE_WORDS, probe_allocation, try_boxed_slice};
use crate::hash::{Hash128, ItemHasher, StableHasher};
use crate::sizing::BlockedSizing;
use crate::sync::SharedWords;
use crate::{Error, Layout};

/// An immutable Bloom filter, safe to share and query from any thread with plain loads.
///
/// Its bits are split into segments (4 KiB by default), each reference-counted, so that adding a batch of
/// items produces a new filter that copies only the segments the batch touches and shares the
/// rest with the old one (copy-on-write). Same layouts, sizing and probe positions as
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
    /// An empty filter; `segment_words` is a power of two of cache lines
    /// ([`SemiOptions::segment_words`](crate::builder::SemiOptions)).
    ///
    /// Allocates every segment now, fallibly: [`Error::AllocationFailed`] instead of an abort.
    pub(crate) fn empty(
        sizing: BlockedSizing,
        segment_words: usize,
        hasher: H,
    ) -> Result<Self, Error> {
        debug_assert!(segment_words.is_power_of_two() && segment_words >= LINE_WORDS);
        let words = sizing.lines() * LINE_WORDS;
        // The segments are many small allocations, each of which an overcommitting allocator
        // grants until memory really runs out; asking once for the whole size first turns an
        // absurd size into an error instead of an out-of-memory kill halfway through.
        probe_allocation(words.saturating_mul(8))?;
        let count = words.div_ceil(segment_words);
        let mut segments = Vec::new();
        segments
            .try_reserve_exact(count)
            .map_err(|_| Error::AllocationFailed {
                bytes: (count as u64).saturating_mul(8),
            })?;
        for s in 0..count {
            let len = segment_words.min(words - s * segment_words);
            segments.push(SharedWords::new(try_boxed_slice(len, || 0u64)?));
        }
        Ok(Self::from_segments(sizing, segment_words, segments, hasher))
    }

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

    /// A new filter holding this one's items and `hashes`: copies only the segments the hashes
    /// touch, and shares the others with `self`.
    pub(crate) fn with_hashes(&self, hashes: &[Hash128]) -> Self {
        let mut targets: Vec<(usize, usize, Probe)> = hashes
            .iter()
            .map(|&h| {
                let probe = Probe::new(h, &self.sizing);
                let (segment, at) = self.locate(probe.first_word());
                (segment, at, probe)
            })
            .collect();
        targets.sort_unstable_by_key(|t| t.0);
        let mut segments = self.segments.to_vec();
        for group in targets.chunk_by(|a, b| a.0 == b.0) {
            let index = group[0].0;
            let mut words = self.segments[index].to_vec();
            for (_, at, probe) in group {
                probe.set_in(&mut words[*at..]);
            }
            segments[index] = SharedWords::new(words.into_boxed_slice());
        }
        Self {
            sizing: self.sizing,
            segment_shift: self.segment_shift,
            segments: segments.into_boxed_slice(),
            hasher: self.hasher.clone(),
        }
    }

    /// Adds `hashes` to this filter in place: a segment that no other filter shares is written
    /// directly, a shared one is copied first (and the copy replaces it here only).
    ///
    /// Takes `&mut self`: the caller owns this filter alone (`Arc::get_mut` succeeded), so no
    /// snapshot anyone can see changes. Hashes in order (a pending batch is: the block grows
    /// with `h1`) touch each segment in one run, checked for sharing once.
    pub(crate) fn add_in_place(&mut self, hashes: &[Hash128]) {
        let (sizing, shift) = (self.sizing, self.segment_shift);
        let mut open = usize::MAX;
        let mut words: &mut [u64] = &mut [];
        for &hash in hashes {
            let probe = Probe::new(hash, &sizing);
            let (index, at) = locate(probe.first_word(), shift);
            if index != open {
                let slot = &mut self.segments[index];
                if slot.get_mut().is_none() {
                    *slot = SharedWords::new(slot.to_vec().into_boxed_slice());
                }
                words = slot
                    .get_mut()
                    .expect("unshared: checked or copied just above");
                open = index;
            }
            probe.set_in(&mut words[at..]);
        }
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
