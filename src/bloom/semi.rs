//! `SemiConcurrentBloomFilter`: inserts buffered in a concurrent set, compacted into immutable
//! snapshots that are swapped in atomically.

use core::fmt;
use core::hash::Hash;

use super::frozen::FrozenBloomFilter;
use super::{BloomBuilder, SemiOptions};
use crate::bits::LINE_WORDS;
use crate::hash::{Hash128, ItemHasher, StableHasher};
use crate::sync::Ordering::{Acquire, Relaxed};
use crate::sync::{Arc, ArcCell, AtomicU64, PendingSet, fence};
use crate::{DedupFilter, Error};

/// A Bloom filter whose readers always query an immutable snapshot plus a small buffer of recent
/// inserts, and whose compacted state can be taken as a consistent snapshot at any time without
/// stopping writers.
///
/// - `insert(x)`: if the filter does not already contain `x`, put `x`'s 128-bit hash in a
///   concurrent set of pending hashes (a lock-free skip list); when `insertions_before_compact`
///   hashes are pending, compact.
/// - `compact()`: take the pending hashes, build a new snapshot from the current one plus those
///   hashes (copying only the 4 KiB segments they touch), and compare-and-swap it in; only if the
///   swap won, remove exactly those hashes from the pending set.
/// - `contains(x)`: the pending set first, then the snapshot. That order is what makes it
///   correct: [the concurrency notes](crate::docs::concurrency#semiconcurrentbloomfilter-is-the-protocol-correct)
///   have the argument and the loom models that check it.
///
/// Guarantees: no false negatives (once `insert(x)` returned, every `contains(x)` that happens
/// after it returns `true`); racing inserts of one new item: at least one returns `true`; a
/// compaction fails only because another one won (no livelock). Readers never block; `insert`
/// and `compact` are lock-free.
///
/// # Examples
///
/// ```
/// use seen::SemiConcurrentBloomFilter;
///
/// let f = SemiConcurrentBloomFilter::builder(1_000_000)
///     .fpr(0.001)
///     .insertions_before_compact(1024)
///     .build()?;
/// assert!(f.insert("a"));
/// assert!(f.contains("a") && f.pending_len() == 1);
/// assert!(f.compact()); // "a" moves into the snapshot
/// assert_eq!(f.pending_len(), 0);
/// assert!(f.snapshot().contains("a"));
/// # Ok::<(), seen::Error>(())
/// ```
pub struct SemiConcurrentBloomFilter<H = StableHasher> {
    current: ArcCell<FrozenBloomFilter<H>>,
    pending: PendingSet<Hash128>,
    insertions_before_compact: usize,
    attempted: AtomicU64,
    won: AtomicU64,
    hasher: H,
}

/// How many compactions were tried and how many swapped a new snapshot in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompactionStats {
    /// Calls to `compact` that found pending hashes and built a snapshot.
    pub attempted: u64,
    /// Those whose compare-and-swap won.
    pub won: u64,
}

impl SemiConcurrentBloomFilter {
    /// A filter for `capacity` distinct items at false-positive rate `fpr`, with the defaults
    /// of [`builder`](Self::builder).
    ///
    /// # Errors
    ///
    /// As [`AtomicBloomFilter::with_capacity`](crate::AtomicBloomFilter::with_capacity).
    ///
    /// # Examples
    ///
    /// ```
    /// let filter = seen::SemiConcurrentBloomFilter::with_capacity(1_000_000, 0.01)?;
    /// assert!(filter.insert("a") && filter.contains("a"));
    /// assert_eq!(filter.insertions_before_compact(), 1024);
    /// # Ok::<(), seen::Error>(())
    /// ```
    pub fn with_capacity(capacity: u64, fpr: f64) -> Result<Self, Error> {
        Self::builder(capacity).fpr(fpr).build()
    }

    /// A builder for `capacity` distinct items. Defaults: `fpr` 0.01,
    /// [`Layout::Word`](crate::Layout::Word), [`StableHasher`], a compaction every 1024
    /// pending inserts, 4 KiB segments.
    pub fn builder(capacity: u64) -> BloomBuilder<SemiOptions> {
        BloomBuilder::new(capacity, SemiOptions::default())
    }
}

impl<H: ItemHasher + Clone> SemiConcurrentBloomFilter<H> {
    /// Inserts `item`; `true` if it was certainly not in the filter (neither pending nor in the
    /// snapshot), `false` if possibly (inserted before, or a false positive).
    pub fn insert<T: Hash + ?Sized>(&self, item: &T) -> bool {
        self.insert_hash(self.hasher.hash_item(item))
    }

    /// [`insert`](Self::insert) of a precomputed hash.
    pub fn insert_hash(&self, hash: Hash128) -> bool {
        self.insert_hash_with(hash, PendingSet::insert)
    }

    /// The insert protocol, with the pending set's insert as a parameter so that the loom
    /// models can run it with the skip list's replacing insert too.
    #[inline]
    fn insert_hash_with(&self, hash: Hash128, add: fn(&PendingSet<Hash128>, Hash128)) -> bool {
        if self.contains_hash(hash) {
            return false;
        }
        // Adds the hash only if it is absent: an entry already there (another thread's insert
        // of the same item) stays in place, so that thread never sees it vanish.
        add(&self.pending, hash);
        if self.pending.len() >= self.insertions_before_compact {
            self.compact();
        }
        true
    }

    /// Whether `item` is possibly in the filter: pending or in the current snapshot.
    pub fn contains<T: Hash + ?Sized>(&self, item: &T) -> bool {
        self.contains_hash(self.hasher.hash_item(item))
    }

    /// [`contains`](Self::contains) of a precomputed hash. The pending set is checked *before*
    /// the snapshot: a hash leaves the pending set only after a snapshot holding it was swapped
    /// in, so a reader that misses it in the set finds it in the snapshot it loads next.
    pub fn contains_hash(&self, hash: Hash128) -> bool {
        if self.pending.contains(&hash) {
            return true;
        }
        // The miss may come from a compaction's `remove`, which follows its swap. The skip list's
        // lookups are only consume-ordered, so this fence is what makes that swap happen before
        // the snapshot load below (free on x86, one `dmb ishld` on AArch64).
        fence(Acquire);
        self.current.read(|f| f.contains_hash(hash))
    }

    /// Moves the pending hashes into a new snapshot; returns whether this call swapped one in
    /// (`false`: nothing was pending, or another compaction won the race, in which case the
    /// hashes stay pending for the next one).
    ///
    /// When it returns `true`, the snapshot it swapped in holds every item whose `insert`
    /// happened before this call began (on any thread): an item still pending was in this call's
    /// batch (it takes the whole set, not a count of it), and one that another compaction moved
    /// was moved by a swap that preceded this call's, or this call's compare-and-swap would have
    /// failed. Inserts that run during the call may or may not be in it.
    ///
    /// Cost: the hashes' segments are copied, plus one reference-count update per segment of
    /// the filter (the new snapshot's table of segments): about 37,000 for a 100M-item filter
    /// at 1%. Keep `insertions_before_compact` well above 1 on large filters.
    pub fn compact(&self) -> bool {
        self.compact_with(false)
    }

    fn compact_with(&self, remove_first: bool) -> bool {
        let current = self.current.load();
        // All of it: a batch cut at `len()` values could be filled by hashes inserted meanwhile
        // that sort lower, leaving out an older one (and `compact` then promises too much).
        let batch = self.pending.first(usize::MAX);
        if batch.is_empty() {
            return false;
        }
        self.attempted.fetch_add(1, Relaxed);
        if remove_first {
            for hash in &batch {
                self.pending.remove(hash);
            }
        }
        let next = current.with_hashes(&batch);
        if !self.current.compare_and_swap(&current, Arc::new(next)) {
            return false;
        }
        self.won.fetch_add(1, Relaxed);
        if !remove_first {
            for hash in &batch {
                self.pending.remove(hash);
            }
        }
        true
    }

    /// The current snapshot: every item compacted so far, immutable, usable from any thread.
    pub fn snapshot(&self) -> Arc<FrozenBloomFilter<H>> {
        self.current.load()
    }

    /// The number of hashes waiting for a compaction (may be stale when other threads write).
    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }

    /// Compactions attempted and won so far.
    pub fn compaction_stats(&self) -> CompactionStats {
        CompactionStats {
            attempted: self.attempted.load(Relaxed),
            won: self.won.load(Relaxed),
        }
    }

    /// The `insertions_before_compact` this filter was built with.
    pub fn insertions_before_compact(&self) -> usize {
        self.insertions_before_compact
    }

    /// Broken variant for the loom models: removes the batch from the pending set *before* the
    /// swap, the order that loses items.
    #[cfg(all(test, seen_loom))]
    pub(crate) fn compact_removing_first(&self) -> bool {
        self.compact_with(true)
    }

    /// Broken variant for the loom models: the insert as it was, with the skip list's replacing
    /// `SkipSet::insert` (remove the existing entry, then link a new one).
    #[cfg(all(test, seen_loom))]
    pub(crate) fn insert_replacing<T: Hash + ?Sized>(&self, item: &T) -> bool {
        self.insert_hash_with(self.hasher.hash_item(item), PendingSet::insert_replacing)
    }

    /// Broken variant for the loom models: `contains` without the Acquire fence between the
    /// pending set and the snapshot.
    #[cfg(all(test, seen_loom))]
    pub(crate) fn contains_without_fence<T: Hash + ?Sized>(&self, item: &T) -> bool {
        let hash = self.hasher.hash_item(item);
        self.pending.contains(&hash) || self.current.read(|f| f.contains_hash(hash))
    }

    /// Broken variant for the loom models: the snapshot first, then the pending set, without a
    /// second look at the snapshot.
    #[cfg(all(test, seen_loom))]
    pub(crate) fn contains_snapshot_first<T: Hash + ?Sized>(&self, item: &T) -> bool {
        let hash = self.hasher.hash_item(item);
        self.current.read(|f| f.contains_hash(hash)) || self.pending.contains(&hash)
    }
}

impl<T: Hash + ?Sized, H: ItemHasher + Clone> DedupFilter<T> for SemiConcurrentBloomFilter<H> {
    fn insert(&self, item: &T) -> bool {
        SemiConcurrentBloomFilter::insert(self, item)
    }

    fn contains(&self, item: &T) -> bool {
        SemiConcurrentBloomFilter::contains(self, item)
    }
}

impl<'a, T: Hash + ?Sized + 'a, H: ItemHasher + Clone> Extend<&'a T>
    for SemiConcurrentBloomFilter<H>
{
    /// Inserts every item, one [`insert`](SemiConcurrentBloomFilter::insert) at a time.
    fn extend<I: IntoIterator<Item = &'a T>>(&mut self, items: I) {
        for item in items {
            self.insert(item);
        }
    }
}

impl<H> fmt::Debug for SemiConcurrentBloomFilter<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SemiConcurrentBloomFilter")
            .field("insertions_before_compact", &self.insertions_before_compact)
            .field("pending", &self.pending.len())
            .field("snapshot", &*self.current.load())
            .finish_non_exhaustive()
    }
}

impl<H: ItemHasher + Clone> BloomBuilder<SemiOptions, H> {
    /// Compact when this many hashes are pending (default 1024, at least 1).
    pub fn insertions_before_compact(mut self, n: usize) -> Self {
        self.options_mut().insertions_before_compact = n;
        self
    }

    /// The size of the copy-on-write segments, rounded up to whole 64-byte lines (default
    /// 4096). A segment as large as the filter makes every compaction copy the whole filter.
    pub fn segment_bytes(mut self, bytes: usize) -> Self {
        self.options_mut().segment_bytes = bytes;
        self
    }

    /// Sizes and allocates the filter.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidParameter`] for `insertions_before_compact == 0` or a zero segment size,
    /// and the errors of
    /// [`AtomicBloomFilter::with_capacity`](crate::AtomicBloomFilter::with_capacity): an
    /// absurd capacity is [`Error::TooLarge`] or [`Error::AllocationFailed`], never an abort.
    /// All the bits are allocated here; a compaction later copies only the segments it touches.
    pub fn build(self) -> Result<SemiConcurrentBloomFilter<H>, Error> {
        let options = *self.options();
        if options.insertions_before_compact == 0 {
            return Err(Error::InvalidParameter(
                "insertions_before_compact must be at least 1",
            ));
        }
        if options.segment_bytes == 0 {
            return Err(Error::InvalidParameter("segment_bytes must be at least 1"));
        }
        let (sizing, hasher, _) = self.into_parts()?;
        let segment_words = options.segment_bytes.div_ceil(64) * LINE_WORDS;
        let empty = FrozenBloomFilter::empty(sizing, segment_words, hasher.clone())?;
        Ok(SemiConcurrentBloomFilter {
            current: ArcCell::new(Arc::new(empty)),
            pending: PendingSet::new(),
            insertions_before_compact: options.insertions_before_compact,
            attempted: AtomicU64::new(0),
            won: AtomicU64::new(0),
            hasher,
        })
    }
}
