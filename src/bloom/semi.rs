//! `SemiConcurrentBloomFilter`: inserts buffered in a concurrent set, compacted into immutable
//! snapshots that are swapped in atomically.

use core::fmt;
use core::hash::Hash;

use super::frozen::FrozenBloomFilter;
use super::info::BloomInfo;
use super::{BloomBuilder, SemiOptions};
use crate::Error;
use crate::hash::{Hash128, ItemHasher, StableHasher};
use crate::sync::Ordering::{Acquire, Relaxed, Release};
use crate::sync::{Arc, ArcCell, AtomicU64, PendingSet, TryMutex, fence};

/// A Bloom filter whose readers always query an immutable snapshot plus a small buffer of recent
/// inserts, and whose compacted state can be taken as a consistent snapshot at any time without
/// stopping writers.
///
/// - `insert(x)`: if the filter does not already contain `x`, raise a counter in a small
///   *summary* of the pending set (one slot per a few bits of `x`'s hash), then put `x`'s
///   128-bit hash in a concurrent set of pending hashes (a lock-free skip list); when
///   `insertions_before_compact` hashes are pending, compact (unless a compaction is running).
/// - `compact()`: one at a time (a call that finds another running returns at once). Take the
///   pending hashes and build the next snapshot: in place, in the snapshot the current one
///   replaced, if nobody holds it any more (adding the batch that made the current one and this
///   batch), else as a copy-on-write of the current one (copying only the 4 KiB segments the
///   hashes touch). Swap it in; then remove exactly those hashes from the pending set, and only
///   then lower their summary counters.
/// - `contains(x)`: the summary first: a zero counter sends the lookup straight to the snapshot.
///   Otherwise the snapshot (a hit answers), then the pending set, then the snapshot again. That
///   order is what makes it correct: [the concurrency notes](crate::docs::concurrency#semiconcurrentbloomfilter-is-the-protocol-correct)
///   have the argument and the loom models that check it.
///
/// Memory: the bits twice over once the second compaction has run (the current snapshot and
/// the one it replaced, kept for reuse), plus the pending set, plus 8 bytes per summary slot
/// (16 slots per `insertions_before_compact`, a power of two from 64 to 65,536).
///
/// # Guarantees
///
/// - **No false negatives**, under any interleaving with inserts and compactions: once
///   `insert(x)` has returned, every `contains(x)` that [happens after](crate#guarantees) it
///   returns `true`.
/// - **False positives** at a rate of at most the target `fpr` after `capacity` distinct items
///   (pending items are looked up exactly and add none).
/// - **Racing inserts of one new item**: at least one returns `true`; several can (each finds
///   the item in neither the snapshot nor the pending set before one of them adds it). Not an
///   exactly-once gate: use [`AtomicBloomFilter`](crate::AtomicBloomFilter) with the word
///   layout for that.
/// - **Progress**: `contains` is lock-free and never blocks (a summary load, the snapshot
///   through arc-swap, the skip list); `insert` is lock-free, allocates (a skip-list node, and a
///   compaction's snapshot), and never waits for a compaction (the pending set may then grow
///   past `insertions_before_compact` until the running compaction is done).
/// - **Snapshots**: a [`snapshot`](Self::snapshot) never changes; after
///   [`compact`](Self::compact) returns `true`, the snapshot it swapped in (and every later
///   one) holds every item whose insert happened before the call began.
/// - **Never forgets**.
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
    /// The pending set's summary: per slot (a few bits of `h1`), the number of pending hashes
    /// that may map there (low 32 bits) and a ticket counter (high 32 bits). Raised before a
    /// hash enters the set, lowered after it has left it, so a slot that reads zero sends a
    /// lookup straight to the snapshot.
    summary: Box<[AtomicU64]>,
    /// The single compactor's state, taken with `try_lock` (never waited for).
    compactor: TryMutex<Spare<H>>,
    insertions_before_compact: usize,
    attempted: AtomicU64,
    won: AtomicU64,
    hasher: H,
}

/// What the compactor keeps between two compactions, for reuse instead of a copy.
struct Spare<H> {
    /// The snapshot that `current` replaced; its bits plus `last` are `current`'s bits.
    previous: Option<Arc<FrozenBloomFilter<H>>>,
    /// The batch that made `current` from `previous`.
    last: Vec<Hash128>,
}

/// Summary slots per pending hash at the compaction threshold.
const SLOTS_PER_HASH: usize = 16;

/// A summary slot's count of pending hashes (its low half).
const COUNT: u64 = u32::MAX as u64;
/// One pending hash more, and the next ticket.
const RAISE: u64 = 1 << 32 | 1;

/// How many compactions were tried and how many swapped a new snapshot in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompactionStats {
    /// Calls to `compact` that found pending hashes and built a snapshot.
    pub attempted: u64,
    /// Those that swapped a new snapshot in. One compaction runs at a time and always swaps,
    /// so this equals `attempted`; a call that finds another running counts in neither.
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
    #[inline]
    pub fn insert_hash(&self, hash: Hash128) -> bool {
        // `twin!(Name)` here and below: a broken variant for the loom models; the literal
        // `false` in every other build.
        if self.contains_hash(hash) {
            return false;
        }
        let slot = self.slot(hash);
        // The summary is raised before the node is linked (the closure runs before the skip
        // list allocates it), and only by a call that found no entry. The ticket, unique per
        // slot, tags the node, so the call learns whether the node it finds is its own.
        let mut ticket = None;
        let linked = self.add_pending(hash, || {
            let t = slot.fetch_add(RAISE, Relaxed) >> 32;
            ticket = Some(t);
            t
        });
        // A node found (or lost to) another thread's insert: its raise and its link happen
        // before what follows, as for a lookup's hit (see `contains_hash`).
        fence(Acquire);
        if ticket.is_some_and(|t| t != linked) && !twin!(KeepUnlinkedIncrement) {
            // Raised for a node that another thread's node beat: that node is counted by its
            // own raise, so this one is taken back (else the slot stays non-zero for good).
            slot.fetch_sub(1, Relaxed);
        }
        // A plain load first: while a compaction runs, inserts skip the try-lock, whose failed
        // compare-and-swap would pull the lock's cache line from the compacting thread each time.
        if self.pending.len() >= self.insertions_before_compact && !self.compactor.is_held() {
            self.compact();
        }
        true
    }

    /// Adds `hash` to the pending set without ever replacing an entry (the skip list's
    /// `get_or_insert_with`); returns the tag of the entry the set holds.
    #[inline]
    fn add_pending(&self, hash: Hash128, tag: impl FnOnce() -> u64) -> u64 {
        #[cfg(all(test, seen_loom))]
        if twin!(ReplacingInsert) {
            return self.pending.insert_replacing(hash, tag);
        }
        self.pending.insert(hash, tag)
    }

    /// The summary slot of `hash`.
    #[inline]
    fn slot(&self, hash: Hash128) -> &AtomicU64 {
        // The length is a power of two; `h1`'s low bits (the block comes from its high bits).
        &self.summary[hash.h1 as usize & (self.summary.len() - 1)]
    }

    crate::forward::batch_of_items! {
    insert_many
    /// A loop of `insert` with the hashing done 16 items ahead (an insert's cost is in the
    /// pending set, not in a cache miss a group could overlap).
    ///
    /// # Examples
    ///
    /// ```
    /// let filter = seen::SemiConcurrentBloomFilter::with_capacity(1000, 0.01)?;
    /// let mut new = Vec::new();
    /// assert_eq!(filter.insert_many(["a", "b", "a"], &mut new), 2);
    /// assert_eq!(new, [true, true, false]);
    /// # Ok::<(), seen::Error>(())
    /// ```
    }

    /// [`insert_many`](Self::insert_many) of already computed hashes.
    pub fn insert_many_hashes<I: IntoIterator<Item = Hash128>>(
        &self,
        hashes: I,
        new: &mut Vec<bool>,
    ) -> usize {
        each_in_groups(hashes, new, |hash| self.insert_hash(hash))
    }

    crate::forward::batch_of_items! {
    contains_many
    /// # Examples
    ///
    /// ```
    /// let filter = seen::SemiConcurrentBloomFilter::with_capacity(1000, 0.01)?;
    /// filter.insert("a");
    /// let mut hits = Vec::new();
    /// assert_eq!(filter.contains_many(["a", "b"], &mut hits), 1);
    /// assert_eq!(hits, [true, false]); // `false` for "b" w.p. ~99%
    /// # Ok::<(), seen::Error>(())
    /// ```
    }

    /// [`contains_many`](Self::contains_many) of already computed hashes.
    pub fn contains_many_hashes<I: IntoIterator<Item = Hash128>>(
        &self,
        hashes: I,
        hits: &mut Vec<bool>,
    ) -> usize {
        each_in_groups(hashes, hits, |hash| self.contains_hash(hash))
    }

    /// Whether `item` is possibly in the filter: pending or in the current snapshot.
    pub fn contains<T: Hash + ?Sized>(&self, item: &T) -> bool {
        self.contains_hash(self.hasher.hash_item(item))
    }

    /// [`contains`](Self::contains) of a precomputed hash.
    ///
    /// The summary first: a slot that reads zero (Acquire) means every hash of that slot that
    /// was pending has left the set after a swap that this load now happens after, so the
    /// snapshot loaded next holds it. Otherwise the pending set, *before* the snapshot: a hash
    /// leaves the set only after a snapshot holding it was swapped in.
    pub fn contains_hash(&self, hash: Hash128) -> bool {
        self.contains_hash_with(hash, Acquire)
    }

    #[inline]
    fn contains_hash_with(&self, hash: Hash128, summary: crate::sync::Ordering) -> bool {
        // The summary is loaded before the snapshot, whichever way it reads: a zero sends the
        // lookup to this one snapshot load alone.
        let maybe_pending = self.slot(hash).load(summary) & COUNT != 0;
        // A hit in the snapshot answers at once (snapshots only grow, so a later lookup finds
        // the hash in this one or a later one): an item that is in the filter never pays for
        // the skip list. One call site, so that the snapshot lookup is inlined here.
        if self.current.read(|f| f.contains_hash(hash)) {
            return true;
        }
        maybe_pending && self.contains_pending(hash)
    }

    /// The rest of a lookup whose summary slot was non-zero and whose first snapshot load
    /// missed: the pending set, then the snapshot again.
    #[inline(never)]
    fn contains_pending(&self, hash: Hash128) -> bool {
        let pending = self.pending.contains(&hash);
        // A miss may come from a compaction's `remove`, which follows its swap; a hit may be
        // another thread's fresh node, whose summary raise the caller's insert relies on. The
        // skip list's lookups are only consume-ordered, so this fence is what orders them before
        // what follows (free on x86, one `dmb ishld` on AArch64). Then a second look at the
        // snapshot, loaded after the set.
        fence(Acquire);
        pending || self.current.read(|f| f.contains_hash(hash))
    }

    /// Moves the pending hashes into a new snapshot; returns whether this call swapped one in
    /// (`false`: nothing was pending, or another compaction was running, in which case the
    /// hashes stay pending for it or the next one).
    ///
    /// When it returns `true`, the snapshot it swapped in holds every item whose `insert`
    /// happened before this call began (on any thread): an item still pending was in this call's
    /// batch (it takes the whole set, not a count of it), and one that an earlier compaction
    /// moved is in the snapshot this one extends. Inserts that run during the call may or may
    /// not be in it.
    ///
    /// One compaction runs at a time; a call that finds another running returns at once, so
    /// inserts never wait for one. Cost: the batch's bits are written into the snapshot that the
    /// current one replaced (kept as a spare, with the batch that made the current one), in
    /// place, once nobody else holds it; a spare still held (by a reader in flight or a
    /// [`snapshot`](Self::snapshot) kept somewhere) is not touched, and the new snapshot is a
    /// copy-on-write of the current one instead: the hashes' segments are copied, plus one
    /// reference-count update per segment of the filter.
    pub fn compact(&self) -> bool {
        let Some(mut spare) = self.compactor.try_lock() else {
            return false;
        };
        self.compact_locked(&mut spare)
    }

    /// The compaction proper, by the thread that holds the compactor's lock.
    fn compact_locked(&self, spare: &mut Spare<H>) -> bool {
        // All of it: a batch cut at `len()` values could be filled by hashes inserted meanwhile
        // that sort lower, leaving out an older one (and `compact` then promises too much).
        let batch = self.pending.first(usize::MAX);
        if batch.is_empty() {
            return false;
        }
        failpoint!("semi.compact.taken");
        // Each hash's summary raise happens before its link, which the iteration read: the
        // fence orders that raise before this compaction's lowering of it.
        fence(Acquire);
        self.attempted.fetch_add(1, Relaxed);
        #[cfg(all(test, seen_loom))]
        if twin!(RemoveBeforeSwap) {
            self.leave_pending(&batch);
        }
        #[cfg(all(test, seen_loom))]
        if twin!(LowerSummaryBeforeSwap) {
            self.lower_summary(&batch);
        }
        let current = self.current.load();
        // Reuse the previous snapshot if nobody else holds it: a reader that loaded it holds a
        // reference (arc-swap pays every guard's debt before its swap returns the old value),
        // so `get_mut` succeeding means no one can see the writes.
        let next = spare
            .previous
            .take()
            .and_then(|mut previous| {
                let filter = Arc::get_mut(&mut previous)?;
                filter.add_in_place(&spare.last);
                filter.add_in_place(&batch);
                Some(previous)
            })
            .unwrap_or_else(|| Arc::new(current.with_hashes(&batch)));
        // The only compactor: `current` is still the cell's value.
        let replaced = self.current.swap(next);
        debug_assert!(Arc::ptr_eq(&replaced, &current));
        drop(current);
        self.won.fetch_add(1, Relaxed);
        failpoint!("semi.compact.swapped");
        if twin!(LowerSummaryBeforeSwap) {
            // The summary was lowered before the swap.
            self.pending.remove_all(&batch);
        } else if !twin!(RemoveBeforeSwap) {
            self.leave_pending(&batch);
        }
        spare.previous = Some(replaced);
        spare.last = batch;
        true
    }

    /// Removes `batch` from the pending set, then lowers its summary slots (Release: a reader
    /// that reads the lowered count happens after the swap that preceded the removal).
    fn leave_pending(&self, batch: &[Hash128]) {
        self.pending.remove_all(batch);
        failpoint!("semi.compact.removed");
        self.lower_summary(batch);
    }

    /// Lowers the slot of each hash of `batch` by one: by exactly its own raise, since other
    /// hashes of the slot may still be pending.
    fn lower_summary(&self, batch: &[Hash128]) {
        for &hash in batch {
            if twin!(ClearSummary) {
                self.slot(hash).fetch_and(!COUNT, Release);
            } else {
                self.slot(hash).fetch_sub(1, Release);
            }
        }
    }

    /// The current snapshot: every item compacted so far, immutable, usable from any thread.
    pub fn snapshot(&self) -> Arc<FrozenBloomFilter<H>> {
        self.current.load()
    }

    /// What the filter is and holds, as
    /// [`AtomicBloomFilter::info`](crate::AtomicBloomFilter::info), from the current
    /// snapshot: its bits give the estimates, to which the items waiting for a compaction are
    /// added (they are looked up exactly, so they add nothing to the false-positive rate).
    /// `bytes` is one copy of the bits; the filter keeps up to two while a compaction runs.
    /// Reads every word: O(m).
    pub fn info(&self) -> BloomInfo {
        let mut info = self.current.read(|snapshot| snapshot.info());
        info.structure = "SemiConcurrentBloomFilter";
        if info.estimated_len != u64::MAX {
            info.estimated_len = info.estimated_len.saturating_add(self.pending_len() as u64);
        }
        info
    }

    /// The memory the filter holds, in bytes, estimated: the current snapshot's bits, twice
    /// once a compaction has swapped one in (the snapshot it replaced is kept to write the next
    /// one in place; copy-on-write segments shared by the two are counted twice), 8 bytes per
    /// summary slot, and [`PENDING_NODE_BYTES`](Self::PENDING_NODE_BYTES) per pending hash.
    /// Not counted: the segment table (a pointer and two counts per 4 KiB segment, under 1%).
    ///
    /// # Examples
    ///
    /// ```
    /// let filter = seen::SemiConcurrentBloomFilter::with_capacity(1_000_000, 0.01)?;
    /// let bits = filter.snapshot().memory_bytes();
    /// filter.insert("a");
    /// assert!(filter.compact());
    /// assert!(filter.memory_bytes() > 2 * bits);
    /// # Ok::<(), seen::Error>(())
    /// ```
    pub fn memory_bytes(&self) -> u64 {
        let bits = self.current.read(|snapshot| snapshot.memory_bytes());
        let copies = if self.won.load(Relaxed) > 0 { 2 } else { 1 };
        bits * copies
            + self.summary.len() as u64 * 8
            + self.pending_len() as u64 * Self::PENDING_NODE_BYTES
    }

    /// The memory of one pending hash, as [`memory_bytes`](Self::memory_bytes) counts it: a
    /// skip-list node (the 16-byte hash, an 8-byte tag, a reference count and height, and a
    /// tower of links, two on average) as the allocator rounds it.
    pub const PENDING_NODE_BYTES: u64 = 64;

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

    /// For the loom models: the index of `item`'s summary slot.
    #[cfg(all(test, seen_loom))]
    pub(crate) fn summary_slot<T: Hash + ?Sized>(&self, item: &T) -> usize {
        self.hasher.hash_item(item).h1 as usize & (self.summary.len() - 1)
    }

    /// For the loom models: the summary's count for `item`'s slot.
    #[cfg(all(test, seen_loom))]
    pub(crate) fn summary_count<T: Hash + ?Sized>(&self, item: &T) -> u64 {
        self.slot(self.hasher.hash_item(item)).load(Relaxed) & COUNT
    }

    /// Broken variant for the loom models: `contains` reading the summary `Relaxed`.
    #[cfg(all(test, seen_loom))]
    pub(crate) fn contains_with_a_relaxed_summary<T: Hash + ?Sized>(&self, item: &T) -> bool {
        self.contains_hash_with(self.hasher.hash_item(item), Relaxed)
    }

    /// Broken variant for the loom models: `contains` without the Acquire fence between the
    /// pending set and the snapshot.
    #[cfg(all(test, seen_loom))]
    pub(crate) fn contains_without_fence<T: Hash + ?Sized>(&self, item: &T) -> bool {
        let hash = self.hasher.hash_item(item);
        (self.slot(hash).load(Acquire) & COUNT != 0 && self.pending.contains(&hash))
            || self.current.read(|f| f.contains_hash(hash))
    }

    /// Broken variant for the loom models: the snapshot first, then the pending set, without a
    /// second look at the snapshot.
    #[cfg(all(test, seen_loom))]
    pub(crate) fn contains_snapshot_first<T: Hash + ?Sized>(&self, item: &T) -> bool {
        let hash = self.hasher.hash_item(item);
        self.current.read(|f| f.contains_hash(hash))
            || (self.slot(hash).load(Acquire) & COUNT != 0 && self.pending.contains(&hash))
    }
}

crate::forward::dedup_filter!(
    impl[H: ItemHasher + Clone] for SemiConcurrentBloomFilter<H>, item: Hash
);

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

    /// The size of the copy-on-write segments, rounded up to a power of two of 64-byte lines
    /// (default 4096; a power of two so that a lookup finds its segment with a shift). A
    /// compaction that cannot reuse the previous snapshot in place (someone still holds it)
    /// copies the segments its hashes touch; a segment as large as the filter makes that a
    /// copy of the whole filter.
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
        let segment_words = options.segment_words();
        let empty = FrozenBloomFilter::empty(sizing, segment_words, hasher.clone())?;
        Ok(SemiConcurrentBloomFilter::assemble(
            empty,
            options.insertions_before_compact,
            hasher,
        ))
    }
}

impl<H> SemiConcurrentBloomFilter<H> {
    /// A filter whose snapshot is `snapshot` and whose pending set is empty (`build()`, and a
    /// load).
    pub(super) fn assemble(
        snapshot: FrozenBloomFilter<H>,
        insertions_before_compact: usize,
        hasher: H,
    ) -> Self {
        // About 16 slots per pending hash at the compaction threshold: a slot is non-zero for
        // at most 1 - e^(-1/16) = 6% of lookups, 3% on average over a batch (4 slots per hash
        // sent 22% of misses through the skip list: 100 more instructions per miss, measured;
        // the 128 KiB of slots at the default threshold stay in the L2 cache).
        let slots = insertions_before_compact
            .saturating_mul(SLOTS_PER_HASH)
            .clamp(64, 1 << 16)
            .next_power_of_two();
        SemiConcurrentBloomFilter {
            current: ArcCell::new(Arc::new(snapshot)),
            pending: PendingSet::new(),
            summary: (0..slots).map(|_| AtomicU64::new(0)).collect(),
            compactor: TryMutex::new(Spare {
                previous: None,
                last: Vec::new(),
            }),
            insertions_before_compact,
            attempted: AtomicU64::new(0),
            won: AtomicU64::new(0),
            hasher,
        }
    }

    /// What a save writes: the current snapshot and every pending hash, taken while no
    /// compaction runs (it waits for a running one). Every insert that returned before this call
    /// is in one or the other: a compaction removes hashes from the pending set only after the
    /// snapshot holding them is current, and none runs while this holds the compactor's lock.
    pub(crate) fn saved_state(&self) -> (Arc<FrozenBloomFilter<H>>, Vec<Hash128>) {
        let _compactor = self.compactor.lock();
        (self.current.load(), self.pending.first(usize::MAX))
    }

    /// A deliberately broken [`saved_state`](Self::saved_state) for the loom models: the same
    /// two reads without the compactor's lock, so a compaction can swap a snapshot in and remove
    /// its hashes from the pending set between them.
    #[cfg(all(test, seen_loom))]
    pub(crate) fn saved_state_unlocked(&self) -> (Arc<FrozenBloomFilter<H>>, Vec<Hash128>) {
        (self.current.load(), self.pending.first(usize::MAX))
    }
}

/// Runs `op` on each hash, taken a group of [`crate::batch::GROUP`] at a time (the hashing runs
/// a group ahead), appending the results to `out`; returns how many were `true`.
fn each_in_groups(
    hashes: impl IntoIterator<Item = Hash128>,
    out: &mut Vec<bool>,
    mut op: impl FnMut(Hash128) -> bool,
) -> usize {
    crate::batch::append_results(out, hashes.into_iter(), |hashes, out| {
        crate::batch::for_each_group(hashes, |group| {
            out.extend(group.iter().map(|&hash| op(hash)));
        });
    })
}
