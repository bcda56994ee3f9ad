//! [`OverwriteMap`]: one `AtomicU64` fingerprint per slot.

use core::fmt;
use core::hash::Hash;

use super::{Claim, MapBuilder, MapSize, checked_buckets};
use crate::Error;
use crate::batch::{GROUP, GROUP_MIN_BYTES, append_results, for_each_group};
use crate::bits::try_boxed_slice;
use crate::hash::{Hash128, ItemHasher, StableHasher};
use crate::sync::AtomicU64;
use crate::sync::Ordering::Relaxed;

/// A lock-free "have I seen this recently?" map that errs the safe way for at-least-once
/// consumers: it never reports an item it was not given as seen, and it forgets old items.
///
/// Each of the `buckets` slots is one `AtomicU64` holding the 64-bit fingerprint of the last
/// item hashed to it (8 bytes per bucket, nothing else): [`insert`](Self::insert) is one atomic
/// `swap`, [`forget`](Self::forget) one `compare_exchange`, and [`claim`](Self::claim) wraps
/// the two in a guard for at-least-once processing: an insert that is forgotten again unless
/// [`commit`](Claim::commit)ted.
///
/// # Guarantees
///
/// - **No false positives**, up to a collision: `insert` returns `false` and `contains` `true`
///   only when the item's slot holds its fingerprint. A wrong "seen" needs another item with
///   the same slot *and* the same 64-bit fingerprint (the high half of the 128-bit hash; the
///   slot comes from the low half): probability at most 2^-64 ≈ 5.4·10^-20 per query.
///   [`ExactOverwriteMap`](crate::ExactOverwriteMap) makes it zero.
/// - **Forgets**: an item survives `x` later insertions of other items with probability
///   `(1 - 1/buckets)^x` (see [`for_window`](Self::for_window), and below for what counts);
///   a forgotten item is new again.
/// - **Racing inserts of one item** into a slot that does not hold it: exactly one returns
///   `true`, unless another item overwrites the slot between them (the map then forgot the
///   item, and a later insert of it is new again). Racing claims likewise: exactly one gets
///   the [`Claim`].
/// - **`forget` erases only what is still there**: it clears the slot only if it still holds
///   this item, never another item that overwrote it.
/// - **Progress**: `insert`, `contains`, `forget` and `claim` are wait-free (one atomic
///   instruction, no loop). All accesses are `Relaxed`: the map does not synchronize other
///   memory between threads.
///
/// # What counts as a later insertion
///
/// Every `insert` of another item after this item's insert, **including redeliveries**: a
/// redelivered message that the map has forgotten is written to its slot again, exactly like a
/// new one. A redelivery the map still remembers writes nothing (its slot already holds it), but
/// in the common replicated case the redeliveries that matter are exactly the forgotten ones: if
/// every message is delivered twice, the copy up to `T` late, then between a message and its copy
/// come the originals of the next `T` *and* the copies of the previous `T`, among them the copies
/// of the messages this one displaced from its slot, which displace it in turn. Count both:
/// with `x` messages per `T` and `c` deliveries of each, size for `c · x` later insertions.
///
/// ```
/// use seen::OverwriteMap;
/// use seen::sizing::overwrite_remember_probability;
/// // 3.6M messages an hour, each delivered twice, the copy up to an hour late:
/// let naive = OverwriteMap::for_window(3_600_000, 0.9)?;
/// let copy_seen = overwrite_remember_probability(naive.buckets(), 2 * 3_600_000)?;
/// assert!((copy_seen - 0.81).abs() < 0.001); // 0.9^2: not what was asked for
/// let map = OverwriteMap::for_window(2 * 3_600_000, 0.9)?; // 2 x 261 MiB
/// assert!(overwrite_remember_probability(map.buckets(), 2 * 3_600_000)? >= 0.9);
/// # Ok::<(), seen::Error>(())
/// ```
///
/// (`tests/overwrite.rs`, `replicated_deliveries_count_twice_against_the_window`, measures it:
/// 0.811 of copies recognized with the naive size, 0.901 with the doubled one.)
///
/// # Examples
///
/// ```
/// use seen::OverwriteMap;
///
/// // Remember a message across 3.6M later messages with probability 0.9.
/// let map = OverwriteMap::for_window(3_600_000, 0.9)?;
/// assert_eq!(map.buckets(), 34_168_399);
/// assert!(map.insert(b"msg-42"));   // new: process it
/// assert!(!map.insert(b"msg-42"));  // redelivered: drop it
/// assert!(map.forget(b"msg-42"));   // processing failed: let the next redelivery through
/// assert!(map.insert(b"msg-42"));
/// # Ok::<(), seen::Error>(())
/// ```
pub struct OverwriteMap<H = StableHasher> {
    pub(super) slots: Box<[AtomicU64]>,
    pub(super) hasher: H,
}

impl OverwriteMap {
    /// A builder of a map of the given size: a bucket count (a plain `u64`) or a
    /// [`MapSize::Window`]. Set the hasher with [`MapBuilder::hasher`], then
    /// [`build`](MapBuilder::build).
    ///
    /// # Examples
    ///
    /// ```
    /// use seen::hash::StableHasher;
    /// use seen::OverwriteMap;
    /// use seen::builder::MapSize;
    /// let map = OverwriteMap::builder(MapSize::Window {
    ///     later_insertions: 3_600_000,
    ///     remember_probability: 0.9,
    /// })
    /// .hasher(StableHasher::with_seed(42))
    /// .build()?;
    /// assert_eq!(map.buckets(), 34_168_399);
    /// assert_eq!(map.hasher().seed(), 42);
    /// # Ok::<(), seen::Error>(())
    /// ```
    pub fn builder(size: impl Into<MapSize>) -> MapBuilder<Self> {
        MapBuilder::new(size.into())
    }

    /// A map of exactly `buckets` slots (no rounding: slots are chosen by multiply-shift, which
    /// needs no power of two), with the default [`StableHasher`]. Short for
    /// `OverwriteMap::builder(buckets).build()`.
    ///
    /// # Errors
    ///
    /// [`Error::ZeroBuckets`], [`Error::TooLarge`] past the address space,
    /// [`Error::AllocationFailed`].
    ///
    /// # Examples
    ///
    /// ```
    /// let map = seen::OverwriteMap::with_buckets(1_000)?;
    /// assert_eq!(map.memory_bytes(), 8_000);
    /// assert!(seen::OverwriteMap::with_buckets(0).is_err());
    /// # Ok::<(), seen::Error>(())
    /// ```
    pub fn with_buckets(buckets: u64) -> Result<Self, Error> {
        Self::builder(MapSize::Buckets(buckets)).build()
    }

    /// A map that still remembers an item after `later_insertions` other items with probability
    /// at least `remember_probability`: [`overwrite_buckets`](crate::sizing::overwrite_buckets)
    /// buckets. Short for `OverwriteMap::builder(MapSize::Window { .. }).build()`.
    ///
    /// `later_insertions` counts every insert of another item, redeliveries included: with each
    /// message delivered `c` times within the window, pass `c` times the number of messages (see
    /// "What counts as a later insertion" on the type). The duplicates to expect against the
    /// memory, for one and two deliveries: [the table](crate::docs::sizing#duplicates-against-memory).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidProbability`], and the errors of [`with_buckets`](Self::with_buckets).
    ///
    /// # Examples
    ///
    /// ```
    /// let map = seen::OverwriteMap::for_window(3_600_000, 0.1)?;
    /// assert_eq!(map.buckets(), 1_563_461);
    /// assert!(seen::OverwriteMap::for_window(3_600_000, 1.0).is_err());
    /// # Ok::<(), seen::Error>(())
    /// ```
    pub fn for_window(later_insertions: u64, remember_probability: f64) -> Result<Self, Error> {
        Self::builder(MapSize::Window {
            later_insertions,
            remember_probability,
        })
        .build()
    }
}

impl<H: ItemHasher> OverwriteMap<H> {
    /// A map of `buckets` empty slots (what [`MapBuilder::build`] calls).
    pub(super) fn allocate(buckets: u64, hasher: H) -> Result<Self, Error> {
        let len = checked_buckets(buckets, core::mem::size_of::<AtomicU64>())?;
        Ok(Self {
            slots: try_boxed_slice(len, || AtomicU64::new(0))?,
            hasher,
        })
    }

    /// Records `item` in its slot (overwriting whatever was there); returns `false` if the slot
    /// already held it (certainly seen), `true` otherwise (new, or seen and forgotten).
    ///
    /// # Examples
    ///
    /// ```
    /// let map = seen::OverwriteMap::with_buckets(1_000)?;
    /// assert!(map.insert("a"));
    /// assert!(!map.insert("a"));
    /// # Ok::<(), seen::Error>(())
    /// ```
    #[inline]
    pub fn insert<T: Hash + ?Sized>(&self, item: &T) -> bool {
        self.insert_hash(self.hasher.hash_item(item))
    }

    /// Whether the slot of `item` holds it: `true` means certainly inserted (and not forgotten
    /// since), `false` means not remembered. Never writes.
    ///
    /// # Examples
    ///
    /// ```
    /// let map = seen::OverwriteMap::with_buckets(1)?; // one slot: every item overwrites it
    /// map.insert("a");
    /// assert!(map.contains("a"));
    /// map.insert("b");
    /// assert!(!map.contains("a") && map.contains("b")); // "a" is forgotten, never mistaken
    /// # Ok::<(), seen::Error>(())
    /// ```
    #[inline]
    pub fn contains<T: Hash + ?Sized>(&self, item: &T) -> bool {
        self.contains_hash(self.hasher.hash_item(item))
    }

    /// Erases `item` if its slot still holds it; returns whether it did. If another item has
    /// overwritten the slot in the meantime, that item stays and this returns `false`.
    ///
    /// Use it when processing an item failed, so that its redelivery is not dropped. It only
    /// helps redeliveries that arrive after it: one that arrived while the item was being
    /// processed was already reported seen. [`claim`](Self::claim) pairs the insert and the
    /// forget in a guard, so that no failure path (an early return, a panic) can miss it.
    ///
    /// # Examples
    ///
    /// ```
    /// let map = seen::OverwriteMap::with_buckets(1_000)?;
    /// map.insert("job-7");
    /// assert!(map.forget("job-7"));
    /// assert!(!map.forget("job-7")); // nothing left to forget
    /// assert!(!map.contains("job-7"));
    /// # Ok::<(), seen::Error>(())
    /// ```
    #[inline]
    pub fn forget<T: Hash + ?Sized>(&self, item: &T) -> bool {
        self.forget_hash(self.hasher.hash_item(item))
    }

    /// Claims `item` for at-least-once processing: `None` if the map remembers it (a duplicate:
    /// acknowledge and drop it), otherwise a [`Claim`] that keeps it remembered while you process
    /// it. [`commit`](Claim::commit) it once processing succeeded; dropped without `commit` (an
    /// early return, a `?`, a panic unwinding), it [`forget`](Self::forget)s the item, so that
    /// the next delivery gets through.
    ///
    /// `claim` is [`insert`](Self::insert) (`Some` exactly when `insert` would return `true`:
    /// among racing claims of an item the map does not remember, exactly one gets it) and the
    /// drop is [`forget`](Self::forget). See [`Claim`] for the exact semantics and the limits.
    ///
    /// # Examples
    ///
    /// An early return (here through `?`) forgets the item:
    ///
    /// ```
    /// use seen::OverwriteMap;
    ///
    /// #[derive(Debug)]
    /// struct Failed;
    ///
    /// fn process(id: u64, healthy: bool) -> Result<u64, Failed> {
    ///     if healthy { Ok(id * 2) } else { Err(Failed) }
    /// }
    ///
    /// /// `Ok(Some(_))` processed, `Ok(None)` a duplicate, `Err` failed: the caller requeues it.
    /// fn handle(map: &OverwriteMap, id: u64, healthy: bool) -> Result<Option<u64>, Failed> {
    ///     let Some(claim) = map.claim(&id) else {
    ///         return Ok(None); // seen: acknowledge and drop
    ///     };
    ///     let result = process(id, healthy)?; // on `Err`, `claim` is dropped: `id` is forgotten
    ///     claim.commit(); // processed: keep `id` remembered
    ///     Ok(Some(result))
    /// }
    ///
    /// let map = OverwriteMap::with_buckets(1_000)?;
    /// assert!(handle(&map, 7, false).is_err()); // fails: the queue redelivers it
    /// assert_eq!(handle(&map, 7, true).unwrap(), Some(14)); // the retry gets through
    /// assert_eq!(handle(&map, 7, true).unwrap(), None); // a duplicate
    /// # Ok::<(), seen::Error>(())
    /// ```
    ///
    /// So does a panic, as the stack unwinds:
    ///
    /// ```
    /// use std::panic::{AssertUnwindSafe, catch_unwind};
    /// let map = seen::OverwriteMap::with_buckets(1_000)?;
    /// let crashed = catch_unwind(AssertUnwindSafe(|| {
    ///     let _claim = map.claim("job-9").expect("new");
    ///     assert!(map.claim("job-9").is_none()); // claimed: a duplicate meanwhile is dropped
    ///     panic!("processing crashed");
    /// }));
    /// assert!(crashed.is_err());
    /// assert!(map.claim("job-9").is_some()); // the retry gets through
    /// # Ok::<(), seen::Error>(())
    /// ```
    #[must_use = "dropping the claim at once forgets the item: bind it and `commit` it"]
    #[inline]
    pub fn claim<T: Hash + ?Sized>(&self, item: &T) -> Option<Claim<'_, H>> {
        let hash = self.hasher.hash_item(item);
        self.insert_hash(hash).then(|| Claim::new(self, hash))
    }

    /// A deliberately broken insert for the loom models: a load and a separate store where one
    /// swap is needed.
    #[cfg(all(test, seen_loom))]
    pub(crate) fn racy_insert<T: Hash + ?Sized>(&self, item: &T) -> bool {
        self.racy_claim(item).map(Claim::commit).is_some()
    }

    /// A deliberately broken claim for the loom models: a load and a separate store where one
    /// swap is needed.
    #[cfg(all(test, seen_loom))]
    pub(crate) fn racy_claim<T: Hash + ?Sized>(&self, item: &T) -> Option<Claim<'_, H>> {
        let hash = self.hasher.hash_item(item);
        let (slot, fingerprint) = self.locate(hash);
        let previous = slot.load(Relaxed);
        slot.store(fingerprint, Relaxed);
        (previous != fingerprint).then(|| Claim::new(self, hash))
    }

    /// A deliberately broken forget for the loom models: checks, then stores without comparing.
    #[cfg(all(test, seen_loom))]
    pub(crate) fn racy_forget<T: Hash + ?Sized>(&self, item: &T) -> bool {
        self.racy_forget_hash(self.hasher.hash_item(item))
    }
}

impl<H> OverwriteMap<H> {
    /// The slot and the non-zero fingerprint (0 marks an empty slot) of a hash, as
    /// [`MapSlot`] derives them.
    #[inline]
    fn locate(&self, hash: Hash128) -> (&AtomicU64, u64) {
        let at = MapSlot::new(hash, self.slots.len() as u64);
        (&self.slots[at.slot() as usize], at.fingerprint())
    }

    /// [`insert`](Self::insert) of an already computed hash: `h1` selects the slot, `h2` is the
    /// fingerprint.
    ///
    /// `insert(item)` is `insert_hash(self.hasher().hash_item(item))`. Any other way of hashing
    /// works (say [`hash_bytes`](ItemHasher::hash_bytes) of a key you serialize yourself, or a
    /// hash computed once and shared with other structures), as long as one item always gets
    /// the same hash: the map compares hashes, so an item inserted through one way is not found
    /// through another. The 2^-64 bound on a wrong "seen" assumes uniform hashes.
    ///
    /// # Examples
    ///
    /// ```
    /// use seen::hash::ItemHasher;
    /// let map = seen::OverwriteMap::with_buckets(1_000)?;
    /// let h = map.hasher().hash_bytes(b"raw key");
    /// assert!(map.insert_hash(h));
    /// assert!(!map.insert_hash(h));
    /// assert!(map.contains_hash(h));
    /// assert!(map.contains("raw key")); // a string hashes as its bytes: the same item
    /// assert!(!map.contains(&7u64)); // an integer hashes as its little-endian bytes
    /// assert!(map.insert_hash(map.hasher().hash_item(&7u64)));
    /// assert!(map.contains(&7u64)); // hash_item: the hash insert computes, the same item
    /// # Ok::<(), seen::Error>(())
    /// ```
    #[inline]
    pub fn insert_hash(&self, hash: Hash128) -> bool {
        let (slot, fingerprint) = self.locate(hash);
        // Skip the write when the item is already there: a load instead of a locked RMW, and no
        // cache-line ownership transfer. Still exact: the slot held it at the load.
        if slot.load(Relaxed) == fingerprint {
            return false;
        }
        slot.swap(fingerprint, Relaxed) != fingerprint
    }
}

impl<H: ItemHasher> OverwriteMap<H> {
    crate::forward::batch_of_items! {
    insert_many
    /// Faster than a loop of `insert` on a map larger than the caches: it hashes a group of 16
    /// items and touches their slots before writing any, so the cache misses overlap. The
    /// outcome is that of `insert`, item by item, in order (an item repeated in the batch, or
    /// overwritten by a later item of the batch and then repeated, gets what one-by-one calls
    /// would give), with the same concurrency guarantees.
    ///
    /// # Examples
    ///
    /// ```
    /// let map = seen::OverwriteMap::with_buckets(1_000)?;
    /// let mut new = Vec::new();
    /// assert_eq!(map.insert_many(["a", "b", "a"], &mut new), 2);
    /// assert_eq!(new, [true, true, false]);
    /// # Ok::<(), seen::Error>(())
    /// ```
    }

    /// [`insert_many`](Self::insert_many) of already computed hashes (see
    /// [`insert_hash`](Self::insert_hash)); the iterator is consumed in groups, so a lazy
    /// `map(|key| hasher.hash_bytes(key))` keeps the hashing inside the batch.
    pub fn insert_many_hashes<I>(&self, hashes: I, new: &mut Vec<bool>) -> usize
    where
        I: IntoIterator<Item = Hash128>,
    {
        append_results(new, hashes.into_iter(), |hashes, out| {
            if self.memory_bytes() < GROUP_MIN_BYTES {
                // A loop, not `extend`: `extend` would reserve by the iterator's hint.
                return hashes.for_each(|hash| out.push(self.insert_hash(hash)));
            }
            for_each_group(hashes, |group| {
                self.touch(group);
                // The writes re-read each slot (now in cache): a slot read before an earlier
                // item of the group overwrote it would be stale, unlike a Bloom filter's bits.
                out.extend(group.iter().map(|&hash| self.insert_hash(hash)));
            });
        })
    }

    crate::forward::batch_of_items! {
    contains_many
    /// Touches a group's slots before answering, as
    /// [`insert_many`](Self::insert_many) does.
    ///
    /// # Examples
    ///
    /// ```
    /// let map = seen::OverwriteMap::with_buckets(1_000)?;
    /// map.insert("a");
    /// let mut hits = Vec::new();
    /// assert_eq!(map.contains_many(["a", "b"], &mut hits), 1);
    /// assert_eq!(hits, [true, false]);
    /// # Ok::<(), seen::Error>(())
    /// ```
    }

    /// [`contains_many`](Self::contains_many) of already computed hashes.
    pub fn contains_many_hashes<I>(&self, hashes: I, hits: &mut Vec<bool>) -> usize
    where
        I: IntoIterator<Item = Hash128>,
    {
        append_results(hits, hashes.into_iter(), |hashes, out| {
            if self.memory_bytes() < GROUP_MIN_BYTES {
                // A loop, not `extend`: `extend` would reserve by the iterator's hint.
                return hashes.for_each(|hash| out.push(self.contains_hash(hash)));
            }
            for_each_group(hashes, |group| {
                let mut held = [0u64; GROUP];
                for (held, &hash) in held.iter_mut().zip(group) {
                    *held = self.locate(hash).0.load(Relaxed);
                }
                let answers = held.iter().zip(group);
                out.extend(answers.map(|(&held, &hash)| held == self.locate(hash).1));
            });
        })
    }

    /// Loads every slot of `group`, back to back, so that their cache misses overlap.
    #[inline]
    fn touch(&self, group: &[Hash128]) {
        let mut any = 0;
        for &hash in group {
            any ^= self.locate(hash).0.load(Relaxed);
        }
        core::hint::black_box(any);
    }
}

impl<H> OverwriteMap<H> {
    /// [`contains`](Self::contains) of an already computed hash (see
    /// [`insert_hash`](Self::insert_hash)). Never writes.
    ///
    /// # Examples
    ///
    /// ```
    /// use seen::hash::ItemHasher;
    /// let map = seen::OverwriteMap::with_buckets(1_000)?;
    /// map.insert(&42u64);
    /// assert!(map.contains_hash(map.hasher().hash_item(&42u64)));
    /// assert!(!map.contains_hash(map.hasher().hash_item(&43u64)));
    /// # Ok::<(), seen::Error>(())
    /// ```
    #[inline]
    pub fn contains_hash(&self, hash: Hash128) -> bool {
        let (slot, fingerprint) = self.locate(hash);
        slot.load(Relaxed) == fingerprint
    }

    /// [`forget`](Self::forget) of an already computed hash (see
    /// [`insert_hash`](Self::insert_hash)): one `compare_exchange`, which clears the slot only
    /// if it still holds this fingerprint.
    ///
    /// # Examples
    ///
    /// ```
    /// use seen::hash::ItemHasher;
    /// let map = seen::OverwriteMap::with_buckets(1_000)?;
    /// let h = map.hasher().hash_item("job-7");
    /// map.insert_hash(h);
    /// assert!(map.forget_hash(h));
    /// assert!(!map.contains("job-7"));
    /// # Ok::<(), seen::Error>(())
    /// ```
    #[inline]
    pub fn forget_hash(&self, hash: Hash128) -> bool {
        let (slot, fingerprint) = self.locate(hash);
        slot.compare_exchange(fingerprint, 0, Relaxed, Relaxed)
            .is_ok()
    }

    /// The number of slots.
    pub fn buckets(&self) -> u64 {
        self.slots.len() as u64
    }

    /// The memory the slots take: 8 bytes per bucket.
    pub fn memory_bytes(&self) -> u64 {
        (self.slots.len() * core::mem::size_of::<AtomicU64>()) as u64
    }

    /// The hasher: [`hash_item`](ItemHasher::hash_item) of an item is the hash that
    /// [`insert_hash`](Self::insert_hash) and the other hash-level methods take.
    pub fn hasher(&self) -> &H {
        &self.hasher
    }

    /// [`racy_forget`](Self::racy_forget) of a hash (what a broken [`Claim`] twin calls).
    #[cfg(all(test, seen_loom))]
    pub(crate) fn racy_forget_hash(&self, hash: Hash128) -> bool {
        let (slot, fingerprint) = self.locate(hash);
        if slot.load(Relaxed) != fingerprint {
            return false;
        }
        slot.store(0, Relaxed);
        true
    }
}

/// Where an item goes in an [`OverwriteMap`] of a given bucket count: its slot and the 64-bit
/// fingerprint the slot holds while the map remembers it. The one place the map derives them,
/// public for code that keeps a map's slots somewhere else, such as a server's strings: a slot
/// array in which slot [`slot`](Self::slot) holds [`fingerprint`](Self::fingerprint) is one in
/// which [`OverwriteMap::contains_hash`] finds the item.
///
/// The slot comes from the low half of the hash (`h1`, by multiply-shift over the buckets), the
/// fingerprint from the high half (`h2`), raised to 1 if it is 0: **0 marks an empty slot**, so a
/// fingerprint is never 0 (the items whose `h2` is 0 or 1 share fingerprint 1, one more way to
/// collide among 2^64).
///
/// # Examples
///
/// ```
/// use seen::MapSlot;
/// use seen::hash::ItemHasher;
/// let map = seen::OverwriteMap::with_buckets(1_000)?;
/// let hash = map.hasher().hash_item("msg-1");
/// let at = MapSlot::new(hash, map.buckets());
/// assert!(at.slot() < 1_000);
/// assert_ne!(at.fingerprint(), 0);
/// assert_eq!(at, MapSlot::new(hash, 1_000)); // a pure function of the hash and the count
/// assert_eq!(MapSlot::new(hash, 1).slot(), 0);
/// # Ok::<(), seen::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MapSlot {
    slot: u64,
    fingerprint: u64,
}

impl MapSlot {
    /// The slot and fingerprint of `hash` in a map of `buckets` buckets (`buckets` at least 1,
    /// as every map has; 0 gives slot 0).
    #[inline]
    pub fn new(hash: Hash128, buckets: u64) -> Self {
        Self {
            slot: crate::hash::reduce(hash.h1, buckets),
            fingerprint: hash.h2.max(1),
        }
    }

    /// The index of the item's slot, below the bucket count.
    #[inline]
    pub fn slot(&self) -> u64 {
        self.slot
    }

    /// The fingerprint the slot holds while the map remembers the item: never 0 (an empty
    /// slot).
    #[inline]
    pub fn fingerprint(&self) -> u64 {
        self.fingerprint
    }
}

crate::forward::dedup_filter!(impl[H: ItemHasher] for OverwriteMap<H>, item: Hash);

/// Inserts every item, as a loop of [`insert`](OverwriteMap::insert) (which takes `&self`:
/// call it in a loop to fill a shared map).
///
/// There is no `FromIterator`: a map is sized up front, not from the items it will see.
///
/// ```
/// let mut map = seen::OverwriteMap::with_buckets(1_000)?;
/// map.extend(["a", "b"]);
/// map.extend(&[1u64, 2]);
/// assert!(map.contains("a") && map.contains("b") && map.contains(&2u64));
/// # Ok::<(), seen::Error>(())
/// ```
impl<'a, T: Hash + ?Sized + 'a, H: ItemHasher> Extend<&'a T> for OverwriteMap<H> {
    fn extend<I: IntoIterator<Item = &'a T>>(&mut self, items: I) {
        for item in items {
            self.insert(item);
        }
    }
}

impl<H> fmt::Debug for OverwriteMap<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OverwriteMap")
            .field("buckets", &self.slots.len())
            .finish_non_exhaustive()
    }
}

#[cfg(all(test, not(seen_loom)))]
mod tests {
    use super::*;

    #[test]
    fn map_slot_is_where_the_map_puts_an_item() {
        let map = OverwriteMap::with_buckets(97).unwrap();
        for i in 0..2_000u64 {
            let hash = map.hasher().hash_item(&i);
            let at = MapSlot::new(hash, 97);
            assert!(at.slot() < 97);
            map.insert_hash(hash);
            assert_eq!(
                map.slots[at.slot() as usize].load(Relaxed),
                at.fingerprint()
            );
        }
        let zero = Hash128 {
            h1: u64::MAX,
            h2: 0,
        };
        assert_eq!(MapSlot::new(zero, 97).fingerprint(), 1);
        assert_eq!(MapSlot::new(zero, 97).slot(), 96);
    }

    #[test]
    fn zero_fingerprints_are_not_confused_with_empty_slots() {
        // An empty slot holds 0; a fingerprint is never 0, so a fresh map says "not seen".
        let map = OverwriteMap::with_buckets(1).unwrap();
        for i in 0..1000u64 {
            assert!(!map.contains(&i));
        }
    }
}
