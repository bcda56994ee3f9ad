//! [`ExactOverwriteMap`]: the keys' bytes behind an atomically swappable `Arc` per slot.

use core::fmt;

use super::{ExactClaim, MapBuilder, MapSize, checked_buckets, slot_of};
use crate::Error;
use crate::batch::{GROUP, reserve_results};
use crate::bits::try_boxed_slice;
use crate::hash::{Hash128, ItemHasher, StableHasher};
use crate::sync::{Arc, ArcCell, spin_hint};

/// What an [`ExactOverwriteMap`] slot holds: the bytes of the last key, or nothing.
pub(super) type Entry = Option<Box<[u8]>>;

/// An overwrite map that stores each key's bytes, so a wrong "seen" is impossible (not merely
/// 2^-64 unlikely, as in [`OverwriteMap`](crate::OverwriteMap)).
///
/// Keys are byte strings (`&[u8]`, `str`, `String`, `Vec<u8>`, arrays: anything `AsRef<[u8]>`),
/// hashed with [`ItemHasher::hash_bytes`]. Each slot is an atomically swappable `Arc` (arc-swap;
/// no `unsafe` in this crate): `insert` allocates the key and compare-and-swaps it in (never
/// replacing an entry that holds the same key), `forget` is a compare-and-swap on the `Arc`'s
/// identity, retried while the slot still holds an equal key. [`claim`](Self::claim) wraps
/// both in a guard for at-least-once processing that forgets exactly the entry it inserted.
///
/// Cost, honestly: 8 bytes per bucket plus, per occupied bucket, two heap allocations: 32 bytes
/// (the `Arc`'s counts and the slice pointer) and the key bytes. An insert of a key the slot
/// does not hold allocates one entry and frees the one it replaces: several times slower than
/// [`OverwriteMap`](crate::OverwriteMap)
/// ([measured](crate::docs::benchmarks#overwritemap-against-exact-dedup-benchesoverwriters)). Use
/// [`OverwriteMap`](crate::OverwriteMap) unless a 2^-64 chance of dropping a new message per
/// lookup is too much.
///
/// # Guarantees
///
/// - **No false positives**: `insert` returns `false` and `contains` `true` only when the
///   key's slot holds exactly these bytes.
/// - **Forgets**, as [`OverwriteMap`](crate::OverwriteMap#guarantees) does: a key survives `x`
///   later insertions of other keys with probability `(1 - 1/buckets)^x`; a forgotten key is
///   new again.
/// - **Racing inserts of one key** into a slot that does not hold it: exactly one returns
///   `true` (an insert never replaces an entry that holds its key), unless another key
///   overwrites the slot between them. Racing claims likewise: exactly one gets the
///   [`ExactClaim`].
/// - **`forget` erases only what is still there**: never another key that overwrote the slot;
///   a dropped claim forgets exactly the entry it inserted, not an equal one inserted later.
/// - **Progress**: `contains` is lock-free (arc-swap's load is: wait-free nearly always);
///   `insert` and `forget` are lock-free too: they retry only when another thread changed the
///   slot between their load and their compare-and-swap. `insert` of a key the slot does not
///   hold allocates.
///
/// # Examples
///
/// ```
/// let map = seen::ExactOverwriteMap::with_buckets(1_000)?;
/// assert!(map.insert("msg-42"));
/// assert!(!map.insert(b"msg-42")); // the same bytes, through another type
/// assert!(map.forget("msg-42"));
/// assert!(!map.contains("msg-42"));
/// # Ok::<(), seen::Error>(())
/// ```
pub struct ExactOverwriteMap<H = StableHasher> {
    pub(super) slots: Box<[ArcCell<Entry>]>,
    pub(super) empty: Arc<Entry>,
    pub(super) hasher: H,
}

impl ExactOverwriteMap {
    /// A builder of a map of the given size: a bucket count (a plain `u64`) or a
    /// [`MapSize::Window`]. Set the hasher with [`MapBuilder::hasher`], then
    /// [`build`](MapBuilder::build).
    ///
    /// # Examples
    ///
    /// ```
    /// use seen::hash::StableHasher;
    /// let map = seen::ExactOverwriteMap::builder(1_000)
    ///     .hasher(StableHasher::with_seed(42))
    ///     .build()?;
    /// assert_eq!(map.buckets(), 1_000);
    /// assert_eq!(map.hasher().seed(), 42);
    /// # Ok::<(), seen::Error>(())
    /// ```
    pub fn builder(size: impl Into<MapSize>) -> MapBuilder<Self> {
        MapBuilder::new(size.into())
    }

    /// A map of exactly `buckets` slots with the default hasher. Short for
    /// `ExactOverwriteMap::builder(buckets).build()`.
    ///
    /// # Errors
    ///
    /// [`Error::ZeroBuckets`], [`Error::TooLarge`] past the address space,
    /// [`Error::AllocationFailed`].
    ///
    /// # Examples
    ///
    /// ```
    /// let map = seen::ExactOverwriteMap::with_buckets(1_000)?;
    /// assert_eq!(map.memory_bytes(), 8_000);
    /// assert!(seen::ExactOverwriteMap::with_buckets(0).is_err());
    /// # Ok::<(), seen::Error>(())
    /// ```
    pub fn with_buckets(buckets: u64) -> Result<Self, Error> {
        Self::builder(MapSize::Buckets(buckets)).build()
    }

    /// A map sized by [`overwrite_buckets`](crate::sizing::overwrite_buckets), as
    /// [`OverwriteMap::for_window`](crate::OverwriteMap::for_window). Short for
    /// `ExactOverwriteMap::builder(MapSize::Window { .. }).build()`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidProbability`], and the errors of [`with_buckets`](Self::with_buckets).
    ///
    /// # Examples
    ///
    /// ```
    /// let map = seen::ExactOverwriteMap::for_window(3_600_000, 0.1)?;
    /// assert_eq!(map.buckets(), 1_563_461);
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

impl<H: ItemHasher> ExactOverwriteMap<H> {
    /// A map of `buckets` empty slots (what [`MapBuilder::build`] calls).
    pub(super) fn allocate(buckets: u64, hasher: H) -> Result<Self, Error> {
        let len = checked_buckets(buckets, core::mem::size_of::<ArcCell<Entry>>())?;
        let empty: Arc<Entry> = Arc::new(None);
        let slots = try_boxed_slice(len, || ArcCell::new(Arc::clone(&empty)))?;
        Ok(Self {
            slots,
            empty,
            hasher,
        })
    }

    /// Records `key`; returns `false` if its slot already held exactly these bytes.
    ///
    /// # Examples
    ///
    /// ```
    /// let map = seen::ExactOverwriteMap::with_buckets(100)?;
    /// assert!(map.insert(&b"\x00\x01"[..]));
    /// assert!(!map.insert(&vec![0u8, 1]));
    /// # Ok::<(), seen::Error>(())
    /// ```
    #[inline]
    pub fn insert<K: AsRef<[u8]> + ?Sized>(&self, key: &K) -> bool {
        let key = key.as_ref();
        self.insert_hashed(self.hasher.hash_bytes(key), key)
    }

    /// Whether `key`'s slot holds exactly these bytes. Never writes.
    ///
    /// # Examples
    ///
    /// ```
    /// let map = seen::ExactOverwriteMap::with_buckets(1)?; // one slot: every key overwrites it
    /// map.insert("a");
    /// assert!(map.contains("a"));
    /// map.insert("b");
    /// assert!(!map.contains("a") && map.contains("b"));
    /// # Ok::<(), seen::Error>(())
    /// ```
    #[inline]
    pub fn contains<K: AsRef<[u8]> + ?Sized>(&self, key: &K) -> bool {
        let key = key.as_ref();
        self.contains_hashed(self.hasher.hash_bytes(key), key)
    }

    /// Erases `key` if its slot still holds it; returns whether it did. Another key that
    /// overwrote the slot is never erased. [`claim`](Self::claim) pairs the insert and the
    /// forget in a guard, so that no failure path (an early return, a panic) can miss it.
    ///
    /// # Examples
    ///
    /// ```
    /// let map = seen::ExactOverwriteMap::with_buckets(1)?;
    /// map.insert("a");
    /// map.insert("b"); // overwrites "a"
    /// assert!(!map.forget("a"));
    /// assert!(map.contains("b"));
    /// # Ok::<(), seen::Error>(())
    /// ```
    #[inline]
    pub fn forget<K: AsRef<[u8]> + ?Sized>(&self, key: &K) -> bool {
        let key = key.as_ref();
        self.forget_hashed(self.hasher.hash_bytes(key), key)
    }

    /// Claims `key` for at-least-once processing: `None` if the map remembers it (a duplicate:
    /// acknowledge and drop it), otherwise an [`ExactClaim`] that keeps it remembered while you
    /// process it. [`commit`](ExactClaim::commit) it once processing succeeded; dropped without
    /// `commit` (an early return, a `?`, a panic unwinding), it forgets the entry it put in the
    /// map, so that the next delivery gets through.
    ///
    /// `claim` is [`insert`](Self::insert) keeping the entry it inserted; the drop forgets that
    /// entry and no other: see [`ExactClaim`] for the exact semantics.
    ///
    /// # Examples
    ///
    /// An early return (here through `?`) forgets the key:
    ///
    /// ```
    /// use seen::ExactOverwriteMap;
    ///
    /// #[derive(Debug)]
    /// struct Failed;
    ///
    /// fn process(body: &str) -> Result<usize, Failed> {
    ///     if body.is_empty() { Err(Failed) } else { Ok(body.len()) }
    /// }
    ///
    /// /// `Ok(Some(_))` processed, `Ok(None)` a duplicate, `Err` failed: the caller requeues it.
    /// fn handle(map: &ExactOverwriteMap, id: &str, body: &str) -> Result<Option<usize>, Failed> {
    ///     let Some(claim) = map.claim(id) else {
    ///         return Ok(None); // seen: acknowledge and drop
    ///     };
    ///     let result = process(body)?; // on `Err`, `claim` is dropped here: `id` is forgotten
    ///     claim.commit(); // processed: keep `id` remembered
    ///     Ok(Some(result))
    /// }
    ///
    /// let map = ExactOverwriteMap::with_buckets(1_000)?;
    /// assert!(handle(&map, "msg-1", "").is_err()); // fails: the queue redelivers it
    /// assert_eq!(handle(&map, "msg-1", "hello").unwrap(), Some(5)); // the retry gets through
    /// assert_eq!(handle(&map, "msg-1", "hello").unwrap(), None); // a duplicate
    /// # Ok::<(), seen::Error>(())
    /// ```
    ///
    /// So does a panic, as the stack unwinds:
    ///
    /// ```
    /// use std::panic::{AssertUnwindSafe, catch_unwind};
    /// let map = seen::ExactOverwriteMap::with_buckets(1_000)?;
    /// let crashed = catch_unwind(AssertUnwindSafe(|| {
    ///     let _claim = map.claim("msg-2").expect("new");
    ///     panic!("processing crashed");
    /// }));
    /// assert!(crashed.is_err());
    /// assert!(map.claim("msg-2").is_some()); // the retry gets through
    /// # Ok::<(), seen::Error>(())
    /// ```
    #[must_use = "dropping the claim at once forgets the key: bind it and `commit` it"]
    pub fn claim<K: AsRef<[u8]> + ?Sized>(&self, key: &K) -> Option<ExactClaim<'_, H>> {
        let key = key.as_ref();
        let hash = self.hasher.hash_bytes(key);
        let entry = self.take(hash, key)?;
        Some(ExactClaim::new(self, hash, entry))
    }

    /// A deliberately broken forget for the loom models: checks, then stores without comparing.
    #[cfg(all(test, seen_loom))]
    pub(crate) fn racy_forget<K: AsRef<[u8]> + ?Sized>(&self, key: &K) -> bool {
        let key = key.as_ref();
        let slot = self.slot(self.hasher.hash_bytes(key));
        if !holds(&slot.load(), key) {
            return false;
        }
        slot.store(Arc::clone(&self.empty));
        true
    }

    /// A deliberately broken [`claim`](Self::claim) for the loom models: takes the slot with one
    /// `swap`, as `insert` once did, replacing an entry that holds the same key with its own.
    #[cfg(all(test, seen_loom))]
    pub(crate) fn swapping_claim<K: AsRef<[u8]> + ?Sized>(
        &self,
        key: &K,
    ) -> Option<ExactClaim<'_, H>> {
        let key = key.as_ref();
        let hash = self.hasher.hash_bytes(key);
        let slot = self.slot(hash);
        if slot.read(|entry| holds(entry, key)) {
            return None;
        }
        let ours = Arc::new(Some(key.into()));
        let previous = slot.swap(Arc::clone(&ours));
        (!holds(&previous, key)).then(|| ExactClaim::new(self, hash, ours))
    }
}

impl<H> ExactOverwriteMap<H> {
    /// The slot a hash selects (from `h1`; the exact map has no use for `h2`).
    #[inline]
    fn slot(&self, hash: Hash128) -> &ArcCell<Entry> {
        &self.slots[slot_of(hash.h1, self.slots.len())]
    }

    /// [`insert`](Self::insert) with the key's hash already computed: `hash` selects the slot
    /// (its `h1`), the key's bytes are what the slot stores and compares.
    ///
    /// `insert(key)` is `insert_hashed(self.hasher().hash_bytes(key), key)`. A `hash` computed
    /// some other way never causes a wrong "seen" (the bytes are compared, whatever the hash),
    /// but it puts the key in another slot, where `insert(key)`, `contains(key)` and
    /// `forget(key)` do not look: a key hashed two ways is two entries, each forgotten on its
    /// own. Pass the same hash for a key every time.
    ///
    /// # Examples
    ///
    /// ```
    /// use seen::hash::ItemHasher;
    /// let map = seen::ExactOverwriteMap::with_buckets(1_000)?;
    /// let h = map.hasher().hash_bytes(b"msg-42");
    /// assert!(map.insert_hashed(h, "msg-42"));
    /// assert!(!map.insert("msg-42")); // the same hash as insert computes: the same entry
    /// assert!(!map.contains_hashed(h, "msg-43")); // another key in that slot: never "seen"
    ///
    /// // A hash that is not `hash_bytes(key)`: still exact, but the key lands in another slot.
    /// let wrong = map.hasher().hash_bytes(b"not the key");
    /// assert!(map.insert_hashed(wrong, "msg-7"));
    /// assert!(map.contains_hashed(wrong, "msg-7"));
    /// assert!(!map.contains("msg-7")); // `contains` looks in the key's own slot
    /// # Ok::<(), seen::Error>(())
    /// ```
    pub fn insert_hashed<K: AsRef<[u8]> + ?Sized>(&self, hash: Hash128, key: &K) -> bool {
        self.take(hash, key.as_ref()).is_some()
    }
}

impl<H: ItemHasher> ExactOverwriteMap<H> {
    /// Inserts every key and appends to `new`, for each in order, what
    /// [`insert`](Self::insert) would have returned; returns how many were new. The same as a
    /// loop of `insert`, with the hashing done a group of 16 keys ahead of the slot accesses
    /// (every slot access goes through arc-swap, which already dominates the cost).
    ///
    /// # Examples
    ///
    /// ```
    /// let map = seen::ExactOverwriteMap::with_buckets(1_000)?;
    /// let mut new = Vec::new();
    /// assert_eq!(map.insert_many(["a", "b", "a"], &mut new), 2);
    /// assert_eq!(new, [true, true, false]);
    /// # Ok::<(), seen::Error>(())
    /// ```
    pub fn insert_many<'a, K, I>(&self, keys: I, new: &mut Vec<bool>) -> usize
    where
        K: AsRef<[u8]> + ?Sized + 'a,
        I: IntoIterator<Item = &'a K>,
    {
        self.each_in_groups(keys, new, |hash, key| self.insert_hashed(hash, key))
    }

    /// Appends to `hits`, for each key in order, what [`contains`](Self::contains) returns;
    /// returns how many were `true`.
    ///
    /// # Examples
    ///
    /// ```
    /// let map = seen::ExactOverwriteMap::with_buckets(1_000)?;
    /// map.insert("a");
    /// let mut hits = Vec::new();
    /// assert_eq!(map.contains_many(["a", "b"], &mut hits), 1);
    /// assert_eq!(hits, [true, false]);
    /// # Ok::<(), seen::Error>(())
    /// ```
    pub fn contains_many<'a, K, I>(&self, keys: I, hits: &mut Vec<bool>) -> usize
    where
        K: AsRef<[u8]> + ?Sized + 'a,
        I: IntoIterator<Item = &'a K>,
    {
        self.each_in_groups(keys, hits, |hash, key| self.contains_hashed(hash, key))
    }

    /// Hashes `keys` a group at a time, runs `op` on each (hash, key), appends the results.
    fn each_in_groups<'a, K, I>(
        &self,
        keys: I,
        out: &mut Vec<bool>,
        mut op: impl FnMut(Hash128, &[u8]) -> bool,
    ) -> usize
    where
        K: AsRef<[u8]> + ?Sized + 'a,
        I: IntoIterator<Item = &'a K>,
    {
        let mut keys = keys.into_iter();
        reserve_results(out, keys.size_hint());
        let mut count = 0;
        let mut group: [&[u8]; GROUP] = [&[]; GROUP];
        loop {
            let mut len = 0;
            for (slot, key) in group.iter_mut().zip(&mut keys) {
                *slot = key.as_ref();
                len += 1;
            }
            let mut hashes = [Hash128 { h1: 0, h2: 0 }; GROUP];
            for (hash, key) in hashes.iter_mut().zip(&group[..len]) {
                *hash = self.hasher.hash_bytes(key);
            }
            for (&hash, key) in hashes.iter().zip(&group[..len]) {
                let result = op(hash, key);
                count += usize::from(result);
                out.push(result);
            }
            if len < GROUP {
                return count;
            }
        }
    }
}

impl<H> ExactOverwriteMap<H> {
    /// Puts a new entry of `key` in the slot `hash` selects unless the slot holds these bytes;
    /// returns the entry it put there, or `None` if the slot already held the key.
    ///
    /// It **never replaces an entry that holds the key**: it compare-and-swaps against the entry
    /// it read (retrying while other keys come and go), and stops as soon as the slot holds the
    /// key. So an entry stays in its slot until another key overwrites it or a `forget` erases
    /// it, and once gone it never comes back (a claim keeps its entry's `Arc` alive, so no later
    /// entry can reuse the address it compares): what lets an [`ExactClaim`] forget exactly the
    /// entry it put there. A `swap` would be one step
    /// instead of a loop, and still exactly-once, but would replace a claim's entry with an
    /// equal one that the claim's drop cannot recognize (the loom twin
    /// `exact_swapping_claim_keeps_a_dropped_claim_remembered` shows the lost message).
    fn take(&self, hash: Hash128, key: &[u8]) -> Option<Arc<Entry>> {
        let slot = self.slot(hash);
        // The common case for a redelivery, and no reference count touched.
        if slot.read(|entry| holds(entry, key)) {
            return None;
        }
        let ours = Arc::new(Some(key.into()));
        loop {
            let current = slot.load();
            if holds(&current, key) {
                return None;
            }
            if slot.compare_and_swap(&current, Arc::clone(&ours)) {
                return Some(ours);
            }
            // Another thread replaced the entry between our load and our CAS; look again.
            spin_hint();
        }
    }

    /// [`contains`](Self::contains) with the key's hash already computed (see
    /// [`insert_hashed`](Self::insert_hashed)): whether the slot `hash` selects holds exactly these
    /// bytes. Never writes.
    ///
    /// # Examples
    ///
    /// ```
    /// use seen::hash::ItemHasher;
    /// let map = seen::ExactOverwriteMap::with_buckets(1_000)?;
    /// map.insert("a");
    /// assert!(map.contains_hashed(map.hasher().hash_bytes(b"a"), "a"));
    /// # Ok::<(), seen::Error>(())
    /// ```
    #[inline]
    pub fn contains_hashed<K: AsRef<[u8]> + ?Sized>(&self, hash: Hash128, key: &K) -> bool {
        let key = key.as_ref();
        self.slot(hash).read(|entry| holds(entry, key))
    }

    /// [`forget`](Self::forget) with the key's hash already computed (see
    /// [`insert_hashed`](Self::insert_hashed)): erases the key from the slot `hash` selects if that
    /// slot still holds it.
    ///
    /// # Examples
    ///
    /// ```
    /// use seen::hash::ItemHasher;
    /// let map = seen::ExactOverwriteMap::with_buckets(1_000)?;
    /// let h = map.hasher().hash_bytes(b"job-7");
    /// map.insert("job-7");
    /// assert!(map.forget_hashed(h, "job-7"));
    /// assert!(!map.contains("job-7"));
    /// # Ok::<(), seen::Error>(())
    /// ```
    pub fn forget_hashed<K: AsRef<[u8]> + ?Sized>(&self, hash: Hash128, key: &K) -> bool {
        let key = key.as_ref();
        let slot = self.slot(hash);
        loop {
            let current = slot.load();
            if !holds(&current, key) {
                return false;
            }
            if slot.compare_and_swap(&current, Arc::clone(&self.empty)) {
                return true;
            }
            // Another thread replaced the entry between our load and our CAS; look again.
            spin_hint();
        }
    }

    /// Erases `entry` (one `Arc`, by identity) from the slot `hash` selects if the slot still
    /// holds it: one compare-and-swap, no retry. What a dropped [`ExactClaim`] does.
    pub(super) fn forget_entry(&self, hash: Hash128, entry: &Arc<Entry>) -> bool {
        self.slot(hash)
            .compare_and_swap(entry, Arc::clone(&self.empty))
    }

    /// The number of slots.
    pub fn buckets(&self) -> u64 {
        self.slots.len() as u64
    }

    /// The memory of the slot array (8 bytes per bucket), not counting the entries: add two
    /// allocations per occupied bucket, 32 bytes and the key.
    pub fn memory_bytes(&self) -> u64 {
        (self.slots.len() * core::mem::size_of::<ArcCell<Entry>>()) as u64
    }

    /// The hasher: [`hash_bytes`](ItemHasher::hash_bytes) of a key is the hash that
    /// [`insert_hashed`](Self::insert_hashed) and the other hash-level methods take.
    pub fn hasher(&self) -> &H {
        &self.hasher
    }

    /// A deliberately broken [`forget_entry`](Self::forget_entry) for the loom models: checks
    /// that the slot holds `entry`, then stores without comparing.
    #[cfg(all(test, seen_loom))]
    pub(crate) fn racy_forget_entry(&self, hash: Hash128, entry: &Arc<Entry>) -> bool {
        let slot = self.slot(hash);
        if !Arc::ptr_eq(&slot.load(), entry) {
            return false;
        }
        slot.store(Arc::clone(&self.empty));
        true
    }
}

#[inline]
fn holds(entry: &Entry, key: &[u8]) -> bool {
    entry.as_deref() == Some(key)
}

crate::forward::dedup_filter!(
    impl[H: ItemHasher] for ExactOverwriteMap<H>, item: AsRef<[u8]>
);

/// Inserts every key, as a loop of [`insert`](ExactOverwriteMap::insert) (which takes `&self`:
/// call it in a loop to fill a shared map).
///
/// There is no `FromIterator`: a map is sized up front, not from the keys it will see.
///
/// ```
/// let mut map = seen::ExactOverwriteMap::with_buckets(1_000)?;
/// map.extend(["a", "b"]);
/// map.extend(&[vec![1u8, 2]]);
/// assert!(map.contains("a") && map.contains(b"b") && map.contains(&[1, 2]));
/// # Ok::<(), seen::Error>(())
/// ```
impl<'a, K: AsRef<[u8]> + ?Sized + 'a, H: ItemHasher> Extend<&'a K> for ExactOverwriteMap<H> {
    fn extend<I: IntoIterator<Item = &'a K>>(&mut self, keys: I) {
        for key in keys {
            self.insert(key);
        }
    }
}

impl<H> fmt::Debug for ExactOverwriteMap<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExactOverwriteMap")
            .field("buckets", &self.slots.len())
            .finish_non_exhaustive()
    }
}
