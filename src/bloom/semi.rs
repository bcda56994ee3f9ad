//! `SemiConcurrentBloomFilter`: inserts buffered in a concurrent set, compacted into immutable
//! snapshots that are swapped in atomically.

use core::fmt;
use core::hash::Hash;

mod buffer;

use self::buffer::{Added, Buffer};
use super::atomic::{contains_at, set_at};
use super::frozen::FrozenBloomFilter;
use super::info::{self, BloomInfo};
use super::{BloomBuilder, Probe, SemiOptions};
use crate::Error;
use crate::bits::{AtomicBits, CachePadded, LINE_WORDS};
use crate::hash::{Hash128, ItemHasher, StableHasher};
use crate::sizing::BlockedSizing;
use crate::sync::Ordering::{Acquire, Relaxed, Release};
use crate::sync::{AtomicU32, AtomicU64, AtomicUsize, PendingSet, SharedWords, TryMutex, fence};

/// A Bloom filter whose inserts are buffered and compacted, in batches, into the copy of its
/// bits that lookups do not read, which is then swapped in: lookups cost what the
/// [`AtomicBloomFilter`](crate::AtomicBloomFilter)'s do, inserts pay for the buffer, and a
/// compaction's cost per insert does not grow with the filter or with the threads.
///
/// - `insert(x)`: if the filter does not already contain `x`, raise a counter in a small
///   *summary* (one slot per a few bits of `x`'s hash), then publish `x`'s 128-bit hash in the
///   **buffer**: two fixed tables of hashes, a slot claimed by compare-and-swap, no allocation.
///   One table takes inserts while the other is drained. A hash the table cannot take (no free
///   slot near its home, or its table drained under it) goes to the **overflow**, a lock-free
///   skip list that never refuses one. When about `insertions_before_compact` hashes are
///   pending (never more), the inserting thread compacts (unless a compaction is running).
/// - `compact()`: one at a time (a call that finds another running returns at once). Switch
///   inserts to the other table, drain this one and the overflow, write the batch (and the one
///   before it) into the copy of the bits that lookups do not read, and swap that copy in (an
///   atomic store of which copy is current). Then the drained table is reset and the overflow's
///   hashes removed, and only then are their summary counters lowered.
/// - `contains(x)`: the summary first: a zero counter sends the lookup straight to the current
///   copy. Otherwise the current copy (a hit answers), then the buffer and the overflow, then
///   the current copy again. That order is what makes it correct: [the concurrency
///   notes](crate::docs::concurrency#semiconcurrentbloomfilter-is-the-protocol-correct) have
///   the argument and the loom models that check it.
///
/// Pick it where inserts are a fraction of lookups and a consistent picture of the compacted
/// items is worth having ([`snapshot`](Self::snapshot), [`write_to`](Self::write_to) beside
/// running inserts): a crawler's seen-URL set queried on every link and written at every new
/// page, a cache admission filter saved every minute. Measured at 10M items, 1% (one run of
/// the peer suite, a 2-core machine): lookups 0.97x the atomic filter's for present items and
/// 1.35x for absent ones, an insert of a new item 2.9x, two threads inserting 1.7x as fast as
/// one ([the figures](crate::docs::benchmarks#semiconcurrentbloomfilter)). For an exactly-once
/// gate, or where most operations are inserts, use the
/// [`AtomicBloomFilter`](crate::AtomicBloomFilter).
///
/// ```
/// use seen::SemiConcurrentBloomFilter;
///
/// // A crawler's frontier: every worker asks before fetching, and records what it fetched.
/// let seen_urls = SemiConcurrentBloomFilter::with_capacity(1_000_000, 0.001)?;
/// std::thread::scope(|s| {
///     for worker in 0..4 {
///         let seen_urls = &seen_urls;
///         s.spawn(move || {
///             for page in 0..1000 {
///                 let url = format!("https://example.com/{}", page * 4 + worker);
///                 if !seen_urls.contains(&url) {
///                     seen_urls.insert(&url); // fetch it, then record it
///                 }
///             }
///         });
///     }
/// });
/// // A consistent copy to save while the workers would go on.
/// let mut saved = Vec::new();
/// seen_urls.write_to(&mut saved)?;
/// assert!(SemiConcurrentBloomFilter::read_from(&saved[..])?.contains("https://example.com/0"));
/// # Ok::<(), seen::Error>(())
/// ```
///
/// Memory: the bits twice over (the current copy and the one being written), plus the buffer
/// (two tables of 16 bytes per slot, the next power of two of four times
/// `insertions_before_compact`, 16 to 65,536 slots), the summary (4 bytes per slot, 16 slots
/// per `insertions_before_compact`, from 64 to 65,536) and 64 bytes per hash in the overflow:
/// [`memory_bytes`](Self::memory_bytes) counts them all. At the default of 1,024 that is twice
/// the bits plus 192 KiB.
///
/// # Guarantees
///
/// - **No false negatives**, under any interleaving with inserts and compactions: once
///   `insert(x)` has returned, every `contains(x)` that [happens after](crate#guarantees) it
///   returns `true`.
/// - **False positives** at a rate of at most the target `fpr` after `capacity` distinct items.
///   Pending items are looked up exactly, by their 128-bit hash, and add none.
/// - **Racing inserts of one new item**: at least one returns `true`; several can (each finds
///   the item neither in the bits nor pending before one of them adds it). Not an
///   exactly-once gate: use [`AtomicBloomFilter`](crate::AtomicBloomFilter) with the word
///   layout for that.
/// - **Progress**: `contains` is lock-free and never blocks (plain loads of the summary, the
///   current copy's index and its bits; the tables and the skip list when the summary says a
///   hash may be pending); it pays no locked instruction. `insert` is lock-free and never waits
///   for a compaction; it allocates only for the overflow. A compaction that is behind makes
///   the overflow grow; nothing is refused.
/// - **Snapshots**: a [`snapshot`](Self::snapshot) is a copy of the current bits (O(m): it
///   waits for a running compaction, then copies) and never changes; after
///   [`compact`](Self::compact) returns `true`, the bits it swapped in (and every later copy)
///   hold every item whose insert happened before the call began.
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
/// assert!(f.compact()); // "a" moves into the bits
/// assert_eq!(f.pending_len(), 0);
/// assert!(f.snapshot().contains("a"));
/// # Ok::<(), seen::Error>(())
/// ```
pub struct SemiConcurrentBloomFilter<H = StableHasher> {
    sizing: BlockedSizing,
    /// Two copies of the bits: `copies[current]` is what lookups read; the other is written
    /// by the compactor alone, and is behind the current one by the last batch.
    copies: [AtomicBits; 2],
    /// Which copy is current (0 or 1): stored with Release by the compactor after it wrote the
    /// copy, loaded with Acquire by every lookup.
    current: AtomicUsize,
    buffer: Buffer,
    /// Hashes the buffer did not take: a skip list, unbounded.
    overflow: PendingSet<Hash128>,
    /// The summary of what is pending: per slot (a few bits of `h1`), the number of pending
    /// hashes that may map there. Raised before a hash enters the buffer or the overflow,
    /// lowered after it has left it, so a slot that reads zero sends a lookup straight to the
    /// current copy. Four bytes a slot: the summary is what an absent lookup pays for beyond
    /// the bits, so it stays small enough to stay in cache.
    summary: Box<[AtomicU32]>,
    /// The tags of the overflow's nodes, one drawn by each insert that goes there (never on
    /// the buffer's path, so the line is written only while the buffer refuses).
    tickets: CachePadded<AtomicU64>,
    /// The single compactor's state, taken with `try_lock` (never waited for by an insert).
    compactor: TryMutex<Compactor>,
    insertions_before_compact: usize,
    /// The count of one region of a table at which a compaction is due: its share of
    /// `insertions_before_compact` (hashes spread evenly over the regions, so the first region
    /// to reach it does so near the threshold, and never past it: no region below its share
    /// means fewer than `insertions_before_compact` pending). No sum of the counts on the
    /// insert's path: each is a cache line the other threads write.
    per_region: usize,
    /// The segment size of the snapshots `snapshot()` makes.
    segment_words: usize,
    attempted: AtomicU64,
    won: AtomicU64,
    hasher: H,
}

/// What the compactor keeps between two compactions.
struct Compactor {
    /// The batch that made the current copy from the other one: the next compaction writes it
    /// into the other copy before its own batch.
    last: Vec<Hash128>,
    /// The stamp each table holds now, and the next one to hand out.
    stamps: [u64; 2],
    next_stamp: u64,
}

/// Summary slots per pending hash at the compaction threshold.
const SLOTS_PER_HASH: usize = 16;

/// How many compactions ran and how many swapped a new copy in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompactionStats {
    /// Calls to `compact` (by the caller or by an insert) that took the compactor's lock and
    /// drained the buffer.
    pub attempted: u64,
    /// Those that swapped a new copy in: all but those that found nothing to compact.
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
    /// pending inserts, snapshots in 4 KiB segments.
    pub fn builder(capacity: u64) -> BloomBuilder<SemiOptions> {
        BloomBuilder::new(capacity, SemiOptions::default())
    }
}

impl<H: ItemHasher + Clone> SemiConcurrentBloomFilter<H> {
    /// Inserts `item`; `true` if it was certainly not in the filter (neither pending nor in the
    /// bits), `false` if possibly (inserted before, or a false positive).
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
        // Raised before the hash enters the buffer or the overflow.
        slot.fetch_add(1, Relaxed);
        let added = if Buffer::storable(hash) && !forced_overflow() {
            self.add_to_buffer(hash)
        } else {
            Added::Refused
        };
        let due = match added {
            Added::Published { table, slot: at } => self.buffer.count(table, at) >= self.per_region,
            Added::Found => {
                // The same hash, published by another insert whose raise happened before the
                // read that found it (Acquire): that raise covers it until a compaction takes
                // it, so this one is taken back.
                slot.fetch_sub(1, Relaxed);
                return false;
            }
            Added::Refused | Added::Stale => {
                self.add_to_overflow(slot, hash);
                self.pending_len() >= self.insertions_before_compact
            }
        };
        // A plain load before the try-lock: while a compaction runs, inserts skip it, whose
        // failed compare-and-swap would pull the lock's cache line from the compacting thread.
        if due && !self.compactor.is_held() {
            self.compact();
        }
        true
    }

    /// Adds `hash` to the active table of the buffer; a table reset under the call (a
    /// compaction switched tables since `active` was read) is tried again in the new active
    /// one, twice at most.
    #[inline]
    fn add_to_buffer(&self, hash: Hash128) -> Added {
        let mut added = Added::Stale;
        for _ in 0..3 {
            let (table, stamp) = self.buffer.active();
            added = self.buffer.add(table, stamp, hash);
            if added != Added::Stale {
                break;
            }
        }
        added
    }

    /// Puts `hash`, raised in `slot`, in the overflow (the skip list's `get_or_insert_with`: an
    /// entry is never replaced), tagged with a ticket unique to this call, so that the call
    /// learns whether the node the set holds is its own. A node found there (or lost to another
    /// thread's insert) is counted by its own raise, so this one is taken back.
    fn add_to_overflow(&self, slot: &AtomicU32, hash: Hash128) {
        let ticket = self.tickets.fetch_add(1, Relaxed);
        let linked = self.add_pending(hash, || ticket);
        // The found node's raise and link happen before what follows, as for a lookup's hit
        // (see `contains_hash`).
        fence(Acquire);
        if linked != ticket && !twin!(KeepUnlinkedIncrement) {
            slot.fetch_sub(1, Relaxed);
        }
    }

    /// Adds `hash` to the overflow without ever replacing an entry (the skip list's
    /// `get_or_insert_with`); returns the tag of the entry the set holds.
    #[inline]
    fn add_pending(&self, hash: Hash128, tag: impl FnOnce() -> u64) -> u64 {
        #[cfg(all(test, seen_loom))]
        if twin!(ReplacingInsert) {
            return self.overflow.insert_replacing(hash, tag);
        }
        self.overflow.insert(hash, tag)
    }

    /// The summary slot of `hash`.
    #[inline]
    fn slot(&self, hash: Hash128) -> &AtomicU32 {
        // The length is a power of two; `h1`'s low bits (the block comes from its high bits).
        &self.summary[hash.h1 as usize & (self.summary.len() - 1)]
    }

    /// The copy of the bits that lookups read now. Acquire: the compactor's writes to it happen
    /// before. (A lookup's answer does not rest on it alone: a zero summary slot and a miss in
    /// the buffer each Acquire a store that follows the swap.)
    #[inline]
    fn current(&self) -> &AtomicBits {
        &self.copies[self.current.load(Acquire) & 1]
    }

    /// Whether the current copy holds `hash`.
    #[inline(always)]
    fn in_bits(&self, hash: Hash128) -> bool {
        contains_at(self.current(), &Probe::new(hash, &self.sizing), Relaxed)
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

    /// Whether `item` is possibly in the filter: pending or in the current copy of the bits.
    pub fn contains<T: Hash + ?Sized>(&self, item: &T) -> bool {
        self.contains_hash(self.hasher.hash_item(item))
    }

    /// [`contains`](Self::contains) of a precomputed hash.
    ///
    /// The summary first: a slot that reads zero (Acquire) means every hash of that slot that
    /// was pending has left the buffer after a swap that this load now happens after, so the
    /// copy loaded next holds it. Otherwise the current copy (a hit answers), then the buffer
    /// and the overflow, *before* the copy is loaded again: a hash leaves them only after a
    /// copy holding it was swapped in.
    #[inline]
    pub fn contains_hash(&self, hash: Hash128) -> bool {
        self.contains_hash_with(hash, Acquire)
    }

    #[inline(always)]
    fn contains_hash_with(&self, hash: Hash128, summary: crate::sync::Ordering) -> bool {
        // The summary is loaded before the copy, whichever way it reads (the two loads overlap):
        // a zero sends the lookup to this one look at the copy.
        let maybe_pending = self.slot(hash).load(summary) != 0;
        // A hit answers at once (the copies only grow, and a later current copy holds what
        // this one does): an item that is in the filter never pays for the buffer.
        if self.in_bits(hash) {
            return true;
        }
        maybe_pending && self.contains_pending(hash)
    }

    /// The rest of a lookup whose summary slot was non-zero and whose first look at the bits
    /// missed: the buffer, the overflow, then the current copy again.
    #[inline(never)]
    fn contains_pending(&self, hash: Hash128) -> bool {
        let pending = self.buffer.contains(hash) || self.overflow.contains(&hash);
        // A miss may come from a reset or a removal, which follow the swap; a hit may be
        // another thread's fresh entry, whose summary raise the caller's insert relies on. The
        // skip list's lookups are only consume-ordered, so this fence is what orders them
        // before what follows (free on x86, one `dmb ishld` on AArch64). Then a second look at
        // the bits, through the copy index loaded after the buffer.
        fence(Acquire);
        pending || self.in_bits(hash)
    }

    /// Moves the pending hashes into the bits; returns whether this call swapped a new copy
    /// in (`false`: nothing was pending, or another compaction was running, in which case the
    /// hashes stay pending for it or the next one).
    ///
    /// When it returns `true`, the copy it swapped in holds every item whose `insert` happened
    /// before this call began (on any thread): an item still pending was in the table it
    /// drained or in the overflow (it drains the whole overflow, not a count of it), and one
    /// that an earlier compaction moved is in the copy this one extends. Inserts that run
    /// during the call may or may not be in it.
    ///
    /// One compaction runs at a time; a call that finds another running returns at once, so
    /// inserts never wait for one. Cost: a pass over one table of the buffer (a load of each
    /// slot's key, a compare-and-swap for each claim not yet published, and two stores per
    /// slot for the reset), and the batch's bits, and the previous batch's, written into the
    /// copy lookups do not read: proportional to the batch, whatever the size of the filter.
    pub fn compact(&self) -> bool {
        let Some(mut state) = self.compactor.try_lock() else {
            return false;
        };
        self.compact_locked(&mut state)
    }

    /// The compaction proper, by the thread that holds the compactor's lock.
    fn compact_locked(&self, state: &mut Compactor) -> bool {
        // Always a drain, even when the counts say the table is empty: a count can lag behind
        // its publish (a drain may subtract a hash before its publisher adds it), so counts
        // that add up to zero do not mean an empty table.
        let (sealed, _) = self.buffer.active();
        self.attempted.fetch_add(1, Relaxed);
        let next = sealed ^ 1;
        self.buffer.switch(next, state.stamps[next]);
        let mut batch = Vec::with_capacity(self.buffer.slots());
        self.buffer.drain(sealed, state.stamps[sealed], &mut batch);
        let drained = batch.len();
        // All of the overflow: a batch cut at `len()` values could be filled by hashes
        // inserted meanwhile that sort lower, leaving out an older one (and `compact` then
        // promises too much).
        batch.extend(self.overflow.first(usize::MAX));
        failpoint!("semi.compact.taken");
        // Each overflow hash's summary raise happens before its link, which the iteration
        // read: the fence orders that raise before this compaction's lowering of it (the
        // drain's swaps Acquire the buffer's own).
        fence(Acquire);
        if batch.is_empty() {
            // Nothing published (or only claims whose publish the drain made fail: those
            // inserts go to the overflow). The table is reset for its next turn; the copies
            // are unchanged.
            self.reset(state, sealed);
            return false;
        }
        #[cfg(all(test, seen_loom))]
        if twin!(RemoveBeforeSwap) {
            self.leave_pending(state, sealed, &batch, drained);
        }
        #[cfg(all(test, seen_loom))]
        if twin!(LowerSummaryBeforeSwap) {
            self.lower_summary(&batch);
        }
        let next = self.current.load(Relaxed) ^ 1;
        let spare = &self.copies[next];
        // A group's probes are computed and their first words read before any is written, so
        // that the group's cache misses overlap instead of each write waiting for its own.
        for hashes in [&state.last[..], &batch[..]] {
            for group in hashes.chunks(16) {
                let mut probes = [Probe::Word { word: 0, mask: 0 }; 16];
                let mut touched = 0;
                for (probe, &hash) in probes.iter_mut().zip(group) {
                    *probe = Probe::new(hash, &self.sizing);
                    touched |= spare.word(probe.first_word()).load(Relaxed);
                }
                core::hint::black_box(touched);
                for probe in &probes[..group.len()] {
                    set_at(spare, probe);
                }
            }
        }
        // Release: a lookup that loads this index sees every bit written above.
        self.current.store(next, Release);
        self.won.fetch_add(1, Relaxed);
        failpoint!("semi.compact.swapped");
        if twin!(LowerSummaryBeforeSwap) {
            // The summary was lowered before the swap.
            self.overflow.remove_all(&batch[drained..]);
            self.reset(state, sealed);
        } else if !twin!(RemoveBeforeSwap) {
            self.leave_pending(state, sealed, &batch, drained);
        }
        state.last = batch;
        true
    }

    /// Resets the drained table `sealed` and removes the overflow's hashes (the batch from
    /// `drained` on), then lowers the batch's summary slots (Release: a reader that reads the
    /// lowered count happens after the swap that preceded the removal).
    fn leave_pending(
        &self,
        state: &mut Compactor,
        sealed: usize,
        batch: &[Hash128],
        drained: usize,
    ) {
        self.overflow.remove_all(&batch[drained..]);
        self.reset(state, sealed);
        failpoint!("semi.compact.removed");
        self.lower_summary(batch);
    }

    /// Resets table `table` to a stamp it has not held since the last reset.
    fn reset(&self, state: &mut Compactor, table: usize) {
        if !twin!(ResetToSameStamp) {
            state.stamps[table] = state.next_stamp;
            // Stamps run from 1 to 2^40 - 1, then wrap: a claim that waited through 2^40
            // resets of its table could be taken for a current one.
            state.next_stamp = state.next_stamp % (buffer::FIRST_HASH - 1) + 1;
        }
        self.buffer.reset(table, state.stamps[table]);
    }

    /// Lowers the slot of each hash of `batch` by one: by exactly its own raise, since other
    /// hashes of the slot may still be pending.
    fn lower_summary(&self, batch: &[Hash128]) {
        for &hash in batch {
            if twin!(ClearSummary) {
                self.slot(hash).store(0, Release);
            } else {
                self.slot(hash).fetch_sub(1, Release);
            }
        }
    }

    /// A copy of the current bits: every item compacted so far, immutable, usable from any
    /// thread. O(m): waits for a running compaction to finish (so that the copy is one
    /// compacted state), then copies the bits into a new
    /// [`FrozenBloomFilter`] while inserts go on.
    ///
    /// # Panics
    ///
    /// Aborts, as any allocation, if the memory for the copy is not there.
    pub fn snapshot(&self) -> crate::sync::Arc<FrozenBloomFilter<H>> {
        let _compactor = self.compactor.lock();
        crate::sync::Arc::new(self.frozen_copy())
    }

    /// The current copy as a frozen filter (the caller holds the compactor's lock).
    fn frozen_copy(&self) -> FrozenBloomFilter<H> {
        let bits = self.current();
        let words = bits.words();
        let segments = (0..words)
            .step_by(self.segment_words)
            .map(|first| {
                let len = self.segment_words.min(words - first);
                SharedWords::new(
                    (first..first + len)
                        .map(|i| bits.word(i).load(Relaxed))
                        .collect(),
                )
            })
            .collect();
        FrozenBloomFilter::from_segments(
            self.sizing,
            self.segment_words,
            segments,
            self.hasher.clone(),
        )
    }

    /// What the filter is and holds, as
    /// [`AtomicBloomFilter::info`](crate::AtomicBloomFilter::info), from the current copy of
    /// the bits: its fill gives the estimates, to which the items waiting for a compaction are
    /// added (they add nothing to the false-positive rate). `bytes` is
    /// [`memory_bytes`](Self::memory_bytes): both copies, the buffer and the summary. Reads
    /// every word: O(m).
    pub fn info(&self) -> BloomInfo {
        let bits = self.current();
        let mut info = info::single(
            "SemiConcurrentBloomFilter",
            &self.sizing,
            self.memory_bytes(),
            || bits.iter_words(),
        );
        if info.estimated_len != u64::MAX {
            info.estimated_len = info.estimated_len.saturating_add(self.pending_len() as u64);
        }
        info
    }

    /// The memory the filter holds, in bytes: both copies of the bits, the buffer's two tables
    /// (16 bytes per slot), 4 bytes per summary slot, and
    /// [`PENDING_NODE_BYTES`](Self::PENDING_NODE_BYTES) per hash in the overflow. Not counted:
    /// the compactor's list of the last batch (16 bytes per hash of it) and the buffer's
    /// counters (at most 2 KiB).
    ///
    /// # Examples
    ///
    /// ```
    /// let filter = seen::SemiConcurrentBloomFilter::with_capacity(1_000_000, 0.01)?;
    /// let bits = filter.snapshot().memory_bytes();
    /// assert!(filter.memory_bytes() > 2 * bits);
    /// assert!(filter.memory_bytes() <= 2 * bits + (192 << 10));
    /// # Ok::<(), seen::Error>(())
    /// ```
    pub fn memory_bytes(&self) -> u64 {
        let bits = self.copies[0].words() as u64 * 8;
        2 * bits
            + 2 * 16 * self.buffer.slots() as u64
            + self.summary.len() as u64 * 4
            + self.overflow.len() as u64 * Self::PENDING_NODE_BYTES
    }

    /// The memory of one hash in the overflow, as [`memory_bytes`](Self::memory_bytes) counts
    /// it: a skip-list node (the 16-byte hash, an 8-byte tag, a reference count and height,
    /// and a tower of links, two on average) as the allocator rounds it.
    pub const PENDING_NODE_BYTES: u64 = 64;

    /// The number of hashes waiting for a compaction, in the buffer and the overflow
    /// (approximate while other threads write).
    pub fn pending_len(&self) -> usize {
        self.buffer.len() + self.overflow.len()
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

    /// The filter's size, as [`AtomicBloomFilter::sizing`](crate::AtomicBloomFilter::sizing).
    pub fn sizing(&self) -> BlockedSizing {
        self.sizing
    }

    /// The hasher.
    pub fn hasher(&self) -> &H {
        &self.hasher
    }

    /// For the loom models: the index of `item`'s summary slot.
    #[cfg(all(test, seen_loom))]
    pub(crate) fn summary_slot<T: Hash + ?Sized>(&self, item: &T) -> usize {
        self.hasher.hash_item(item).h1 as usize & (self.summary.len() - 1)
    }

    /// For the loom models: the summary's count for `item`'s slot.
    #[cfg(all(test, seen_loom))]
    pub(crate) fn summary_count<T: Hash + ?Sized>(&self, item: &T) -> u64 {
        u64::from(self.slot(self.hasher.hash_item(item)).load(Relaxed))
    }

    /// Broken variant for the loom models: `contains` reading the summary `Relaxed`.
    #[cfg(all(test, seen_loom))]
    pub(crate) fn contains_with_a_relaxed_summary<T: Hash + ?Sized>(&self, item: &T) -> bool {
        self.contains_hash_with(self.hasher.hash_item(item), Relaxed)
    }

    /// Broken variant for the loom models: `contains` without the Acquire fence between the
    /// buffer and the second look at the bits.
    #[cfg(all(test, seen_loom))]
    pub(crate) fn contains_without_fence<T: Hash + ?Sized>(&self, item: &T) -> bool {
        let hash = self.hasher.hash_item(item);
        (self.slot(hash).load(Acquire) != 0
            && (self.buffer.contains(hash) || self.overflow.contains(&hash)))
            || self.in_bits(hash)
    }

    /// Broken variant for the loom models: the bits first, then the buffer, without a second
    /// look at the bits.
    #[cfg(all(test, seen_loom))]
    pub(crate) fn contains_snapshot_first<T: Hash + ?Sized>(&self, item: &T) -> bool {
        let hash = self.hasher.hash_item(item);
        self.in_bits(hash)
            || (self.slot(hash).load(Acquire) != 0
                && (self.buffer.contains(hash) || self.overflow.contains(&hash)))
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
            .field("sizing", &self.sizing)
            .field("insertions_before_compact", &self.insertions_before_compact)
            .field("pending", &(self.buffer.len() + self.overflow.len()))
            .finish_non_exhaustive()
    }
}

impl<H: ItemHasher + Clone> BloomBuilder<SemiOptions, H> {
    /// Compact when about this many hashes are pending (default 1024, at least 1). It also
    /// sizes the buffer (two tables of the next power of two of four times as many slots, at
    /// most 65,536) and the summary.
    pub fn insertions_before_compact(mut self, n: usize) -> Self {
        self.options_mut().insertions_before_compact = n;
        self
    }

    /// The segment size of the [`FrozenBloomFilter`]s that
    /// [`snapshot`](SemiConcurrentBloomFilter::snapshot) makes, rounded up to a power of two
    /// of 64-byte lines (default 4096).
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
    /// Both copies of the bits are allocated here.
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
        let bits = AtomicBits::new(sizing.lines())?;
        SemiConcurrentBloomFilter::assemble(sizing, bits, options, hasher)
    }
}

impl<H> SemiConcurrentBloomFilter<H> {
    /// A filter whose bits are `bits` and with nothing pending (`build()`, and a load).
    pub(super) fn assemble(
        sizing: BlockedSizing,
        bits: AtomicBits,
        options: SemiOptions,
        hasher: H,
    ) -> Result<Self, Error> {
        debug_assert_eq!(bits.words(), sizing.lines() * LINE_WORDS);
        let insertions_before_compact = options.insertions_before_compact;
        // About 16 slots per pending hash at the compaction threshold: a slot is non-zero for
        // at most 1 - e^(-1/16) = 6% of lookups, 3% on average over a batch (4 slots per hash
        // sent 22% of misses through the skip list: 100 more instructions per miss, measured;
        // the 128 KiB of slots at the default threshold stay in the L2 cache).
        let slots = insertions_before_compact
            .saturating_mul(SLOTS_PER_HASH)
            .clamp(64, 1 << 16)
            .next_power_of_two();
        // The buffer's tables: four times the threshold, so that a table is a quarter full when
        // a compaction is due (linear probing stays short), and has room for three times as
        // many while a compaction runs on another thread (two threads then scaled 1.8x
        // instead of 1.3x with tables of twice the threshold, which filled and sent inserts to
        // the overflow). The loom models hold a few items.
        let table = insertions_before_compact
            .saturating_mul(4)
            .clamp(16, 1 << 16)
            .next_power_of_two();
        #[cfg(seen_loom)]
        let table = table.min(4);
        // One region per 64 hashes of the threshold, 1 to 8: a region's share of the
        // threshold is what an insert compares its count with, and a share of a few hashes
        // would make the first region to fill compact long before the threshold.
        let regions = (insertions_before_compact / 64)
            .clamp(1, buffer::REGIONS)
            .min(table)
            .next_power_of_two()
            .min(buffer::REGIONS);
        let copy = bits.try_clone()?;
        Ok(SemiConcurrentBloomFilter {
            sizing,
            copies: [bits, copy],
            current: AtomicUsize::new(0),
            buffer: Buffer::new(table, regions),
            overflow: PendingSet::new(),
            summary: (0..slots).map(|_| AtomicU32::new(0)).collect(),
            tickets: CachePadded::new(AtomicU64::new(0)),
            compactor: TryMutex::new(Compactor {
                last: Vec::new(),
                stamps: [1, 2],
                next_stamp: 3,
            }),
            insertions_before_compact,
            per_region: (insertions_before_compact / regions).max(1),
            segment_words: options.segment_words(),
            attempted: AtomicU64::new(0),
            won: AtomicU64::new(0),
            hasher,
        })
    }
}

impl<H: ItemHasher + Clone> SemiConcurrentBloomFilter<H> {
    /// What a save writes: a copy of the current bits and every pending hash, taken while no
    /// compaction runs (it waits for a running one). Every insert that returned before this call
    /// is in one or the other: a compaction resets a table and removes hashes from the
    /// overflow only after the copy holding them is current, and none runs while this holds
    /// the compactor's lock.
    pub(crate) fn saved_state(&self) -> (crate::sync::Arc<FrozenBloomFilter<H>>, Vec<Hash128>) {
        let _compactor = self.compactor.lock();
        self.saved_state_unlocked()
    }

    /// [`saved_state`](Self::saved_state) without the lock: for the loom models, a deliberately
    /// broken save, in which a compaction can swap a copy in and reset a table between the two
    /// reads.
    pub(crate) fn saved_state_unlocked(
        &self,
    ) -> (crate::sync::Arc<FrozenBloomFilter<H>>, Vec<Hash128>) {
        let bits = crate::sync::Arc::new(self.frozen_copy());
        let mut pending = Vec::new();
        self.buffer.published(&mut pending);
        pending.extend(self.overflow.first(usize::MAX));
        (bits, pending)
    }
}

/// Whether a loom model sends this insert to the overflow (the twins of the skip list's steps
/// need it there).
#[cfg(all(test, seen_loom))]
fn forced_overflow() -> bool {
    twin!(Overflow) || twin!(ReplacingInsert) || twin!(KeepUnlinkedIncrement)
}

/// Never, outside the loom models.
#[cfg(not(all(test, seen_loom)))]
#[inline(always)]
fn forced_overflow() -> bool {
    false
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
