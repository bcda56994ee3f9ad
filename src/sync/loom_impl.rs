//! The model-checking side of the facade: loom's atomics, and the two wrappers rebuilt on loom's
//! primitives with the same names as `std_impl.rs` and contracts no stronger than the real
//! components' (`docs/concurrency.md` has the table: real guarantee, source, what is modelled).
//!
//! The facade's own models (`loom-tests/facade.rs`) check these wrappers directly.

use core::fmt;
use core::ops::Bound::{Excluded, Unbounded};
use std::collections::BTreeMap;

pub(crate) use loom::sync::Arc;
pub(crate) use loom::sync::atomic::{
    AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence,
};

/// Called in every spin or retry loop: yields to loom's scheduler so that the model can make
/// progress (a spinning thread that never yields is reported by loom as a livelock).
#[inline]
pub(crate) fn spin_hint() {
    loom::thread::yield_now();
}

/// A wait for another thread's progress: a yield to loom's scheduler, as [`spin_hint`].
#[inline]
pub(crate) fn backoff(_round: u32) {
    loom::thread::yield_now();
}

/// A `SeqCst` fence: loom runs `SeqCst` accesses as `AcqRel` but models `SeqCst` fences, so
/// the fence stands in for the total order the std build gets from its `SeqCst` accesses
/// (see `std_impl::sc_order`).
#[inline]
pub(crate) fn sc_order() {
    fence(Ordering::SeqCst);
}

/// A `std` mutex used only for the stand-ins' bookkeeping: which values exist (the allocation
/// side of the real components). Loom cannot see it, so it adds no happens-before edge to the
/// model; it is never held across a loom operation (loom switches threads only at those), so it
/// is never contended.
fn book<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The loom stand-in for the std side's `SharedWords` (`Arc<[u64]>`, which loom's `Arc` cannot
/// build): a loom `Arc` of a boxed slice, with the same `get_mut`.
#[derive(Clone)]
pub(crate) struct SharedWords(Arc<Box<[u64]>>);

impl SharedWords {
    /// Shares `words`.
    pub(crate) fn new(words: Box<[u64]>) -> Self {
        Self(Arc::new(words))
    }
}

impl core::ops::Deref for SharedWords {
    type Target = [u64];

    fn deref(&self) -> &[u64] {
        &self.0
    }
}

/// The loom stand-in for the std side's `TryMutex`: `loom::sync::Mutex`, only ever tried (its
/// `try_lock` Acquires on success and its unlock Releases, as the real one's).
pub(crate) struct TryMutex<T>(loom::sync::Mutex<T>);

impl<T> TryMutex<T> {
    /// A mutex holding `value`.
    pub(crate) fn new(value: T) -> Self {
        Self(loom::sync::Mutex::new(value))
    }

    /// The data, if no other thread holds the mutex; `None` at once if one does.
    pub(crate) fn try_lock(&self) -> Option<impl core::ops::DerefMut<Target = T> + '_> {
        self.0.try_lock().ok()
    }

    /// The data, waiting for the thread that holds it.
    pub(crate) fn lock(&self) -> impl core::ops::DerefMut<Target = T> + '_ {
        self.0.lock().unwrap()
    }

    /// The std side's hint, always `false` here: every caller goes on to `try_lock`. A caller
    /// may only use the hint to skip a `try_lock`, and a skipped one changes nothing a failed
    /// one would not, so the models explore the outcomes without the extra interleavings.
    pub(crate) fn is_held(&self) -> bool {
        false
    }
}

impl<T> fmt::Debug for TryMutex<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TryMutex").finish_non_exhaustive()
    }
}

/// The loom stand-in for `arc_swap::ArcSwap<T>`, no stronger than what arc-swap documents.
///
/// Every value ever stored is kept in an append-only list (so an index names one `Arc` for the
/// cell's whole life, and pointer identity is index identity); the current value is a loom
/// `AtomicUsize` index. Loads are `Acquire` loads of it, stores and swaps `SeqCst` swaps,
/// `compare_and_swap` a `SeqCst` compare-exchange: arc-swap's orderings on its pointer
/// (`src/docs/internal.rs`: "AcqRel (well, SeqCst) on the swap and Acquire on the loads").
/// Unlike a lock, a load adds no happens-before edge towards later writers. Values are freed
/// only when the cell is dropped (arc-swap frees them earlier): not observable through the API.
pub(crate) struct ArcCell<T> {
    values: std::sync::Mutex<Vec<std::sync::Arc<Arc<T>>>>,
    current: AtomicUsize,
}

impl<T> ArcCell<T> {
    /// A cell holding `value`.
    pub(crate) fn new(value: Arc<T>) -> Self {
        Self {
            values: std::sync::Mutex::new(vec![std::sync::Arc::new(value)]),
            current: AtomicUsize::new(0),
        }
    }

    /// The value at `index`, kept alive by the list (no loom operation under the mutex).
    fn at(&self, index: usize) -> std::sync::Arc<Arc<T>> {
        std::sync::Arc::clone(&book(&self.values)[index])
    }

    /// The index of `value`, adding it to the list if it is not there yet.
    fn intern(&self, value: Arc<T>) -> usize {
        let (index, duplicate) = {
            let mut values = book(&self.values);
            match values.iter().position(|v| Arc::ptr_eq(v, &value)) {
                Some(index) => (index, Some(value)),
                None => {
                    values.push(std::sync::Arc::new(value));
                    (values.len() - 1, None)
                }
            }
        };
        drop(duplicate); // a loom operation: after the mutex is released
        index
    }

    /// The current value, as an owned `Arc` the caller may keep.
    pub(crate) fn load(&self) -> Arc<T> {
        let held = self.at(self.current.load(Ordering::Acquire));
        Arc::clone(&held)
    }

    /// Runs `f` on the current value.
    pub(crate) fn read<R>(&self, f: impl FnOnce(&T) -> R) -> R {
        let held = self.at(self.current.load(Ordering::Acquire));
        f(&held)
    }

    /// Replaces the value unconditionally.
    pub(crate) fn store(&self, value: Arc<T>) {
        let index = self.intern(value);
        self.current.swap(index, Ordering::SeqCst);
    }

    /// Replaces the value and returns the one it replaced (one atomic step).
    pub(crate) fn swap(&self, value: Arc<T>) -> Arc<T> {
        let index = self.intern(value);
        let previous = self.at(self.current.swap(index, Ordering::SeqCst));
        Arc::clone(&previous)
    }

    /// Replaces the value with `new` if it is still `current` (pointer equality); returns whether
    /// it did.
    pub(crate) fn compare_and_swap(&self, current: &Arc<T>, new: Arc<T>) -> bool {
        let expected = book(&self.values)
            .iter()
            .position(|v| Arc::ptr_eq(v, current));
        let new = self.intern(new);
        // An `Arc` never stored in this cell cannot be its current value.
        expected.is_some_and(|expected| {
            self.current
                .compare_exchange(expected, new, Ordering::SeqCst, Ordering::Acquire)
                .is_ok()
        })
    }
}

impl<T> fmt::Debug for ArcCell<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ArcCell").finish_non_exhaustive()
    }
}

/// A value's entry in the [`PendingSet`] stand-in: the node currently linked for it, if any.
///
/// The state is `generation << 1 | present`. Linking a new node moves an absent state to the
/// next generation, present; marking a node removed clears `present` only if the state is still
/// *that* node (a compare-exchange on the whole state), as the skip list marks one node's tower.
struct Entry {
    state: AtomicUsize,
    /// The tag of each node linked for this value, by its (present) state: bookkeeping, written
    /// in the same loom step as the compare-exchange that links the node (the real node holds
    /// its tag before it is published).
    tags: std::sync::Mutex<BTreeMap<usize, u64>>,
}

impl Entry {
    /// The tag of the node `state` (a present state) names.
    fn tag(&self, state: usize) -> u64 {
        book(&self.tags)[&state]
    }

    /// Records the tag of the node just linked as `state`.
    fn tag_linked(&self, state: usize, tag: u64) {
        book(&self.tags).insert(state, tag);
    }
}

const PRESENT: usize = 1;

/// The next generation's state, present, from an absent state.
const fn linked(absent: usize) -> usize {
    (absent | PRESENT) + 2
}

/// The loom stand-in for `crossbeam_skiplist::SkipSet<T>` (0.1.3), modelling every weakness of
/// it that our code can observe, step by step as `src/base.rs` does it:
///
/// - a lookup is one `Relaxed` load of the value's entry (the skip list's `load_consume` is at
///   least that): no happens-before edge unless the caller adds a fence;
/// - `insert` is `get_or_insert_with`: a lookup (returning the tag of a node found), then the
///   tag closure, `len += 1` (optimistic, before linking), then a `SeqCst` compare-exchange that
///   links a node (on failure, if another node is there: `len -= 1` and that node's tag, the
///   closure having run for nothing);
/// - `insert_replacing` is `SkipSet::insert`: mark the existing node removed (`len -= 1`), *then*
///   link a new one: two steps, with the value absent in between;
/// - `remove` marks the node it found with a `SeqCst` compare-exchange, then `len -= 1`;
/// - `len` is that `Relaxed` counter, read as 0 when it has wrapped below zero, as the real one;
/// - iteration visits one value at a time in order, with a fresh lookup each: weakly consistent.
///
/// Which values exist (the skip list's allocated nodes) is bookkeeping behind a `std` mutex that
/// loom cannot see; only the entries' states and `len` are loom atomics. The entries are created
/// with the set, [`CAPACITY`] of them, and handed out to values on first use: a loom atomic
/// created by one thread and loaded by another without a happens-before edge is a causality
/// violation in loom, while the skip list publishes each node through the link that inserts it.
pub(crate) struct PendingSet<T> {
    entries: std::sync::Mutex<BTreeMap<T, usize>>,
    pool: Vec<Entry>,
    /// Stands for the skip list's links as a whole: every lookup starts with a `Relaxed` load of
    /// it and giving a value its first entry is a `Relaxed` increment of it. It synchronizes
    /// nothing; it gives loom a scheduling point, and a conflict it can see, where the real
    /// traversal reads and writes links, so that a lookup can be scheduled before or after the
    /// allocation of the node it looks for.
    links: AtomicUsize,
    len: AtomicUsize,
}

/// The most distinct values one loom [`PendingSet`] holds over its life (models use a handful).
pub(crate) const CAPACITY: usize = 8;

impl<T: Ord + Clone + Send + 'static> PendingSet<T> {
    /// An empty set.
    pub(crate) fn new() -> Self {
        Self {
            entries: std::sync::Mutex::new(BTreeMap::new()),
            pool: (0..CAPACITY)
                .map(|_| Entry {
                    state: AtomicUsize::new(0),
                    tags: std::sync::Mutex::new(BTreeMap::new()),
                })
                .collect(),
            links: AtomicUsize::new(0),
            len: AtomicUsize::new(0),
        }
    }

    /// `value`'s entry, given an absent one from the pool if it has none.
    fn entry(&self, value: T) -> &Entry {
        // The bookkeeping below runs with no loom operation in between, so loom sees this
        // increment and the new entry as one step.
        self.links.fetch_add(1, Ordering::Relaxed);
        let mut entries = book(&self.entries);
        let next = entries.len();
        let index = *entries.entry(value).or_insert(next);
        assert!(
            index < CAPACITY,
            "the loom PendingSet holds at most {CAPACITY} distinct values"
        );
        &self.pool[index]
    }

    fn lookup(&self, value: &T) -> Option<&Entry> {
        self.links.load(Ordering::Relaxed);
        let index = book(&self.entries).get(value).copied();
        index.map(|index| &self.pool[index])
    }

    /// Adds `value` if it is absent (`SkipList::get_or_insert_with`); an entry already present
    /// stays. `tag` runs only when the first lookup found no entry, before the link is tried;
    /// returns the tag of the entry the set holds after the call.
    pub(crate) fn insert(&self, value: T, tag: impl FnOnce() -> u64) -> u64 {
        let entry = self.entry(value);
        let mut seen = entry.state.load(Ordering::Relaxed);
        if seen & PRESENT != 0 {
            return entry.tag(seen);
        }
        let tag = tag();
        self.len.fetch_add(1, Ordering::Relaxed);
        loop {
            match entry.state.compare_exchange(
                seen,
                linked(seen),
                Ordering::SeqCst,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    entry.tag_linked(linked(seen), tag);
                    return tag;
                }
                Err(now) if now & PRESENT != 0 => {
                    // Another thread linked a node first: return that one.
                    self.len.fetch_sub(1, Ordering::Relaxed);
                    return entry.tag(now);
                }
                Err(now) => seen = now, // linked and removed meanwhile: link after it
            }
        }
    }

    /// `SkipMap::insert`: removes an existing entry (marks its node), *then* links a new one.
    /// Between the two steps the value is absent. The crate does not use it; the loom models run
    /// the semi-concurrent filter's old insert with it, to show that they catch the bug.
    pub(crate) fn insert_replacing(&self, value: T, tag: impl FnOnce() -> u64) -> u64 {
        let tag = tag();
        let entry = self.entry(value);
        let mut seen = entry.state.load(Ordering::Relaxed);
        let mut counted = false;
        loop {
            if seen & PRESENT != 0 {
                // Replace: mark the node removed, then search again.
                self.mark(entry, seen);
                seen = entry.state.load(Ordering::Relaxed);
                continue;
            }
            if !counted {
                self.len.fetch_add(1, Ordering::Relaxed);
                counted = true;
            }
            match entry.state.compare_exchange(
                seen,
                linked(seen),
                Ordering::SeqCst,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    entry.tag_linked(linked(seen), tag);
                    return tag;
                }
                Err(now) => seen = now,
            }
        }
    }

    /// Whether `value` is in the set: one `Relaxed` load.
    pub(crate) fn contains(&self, value: &T) -> bool {
        self.lookup(value)
            .is_some_and(|entry| entry.state.load(Ordering::Relaxed) & PRESENT != 0)
    }

    /// Removes `value` if present: marks the node the lookup found, if it is still linked.
    pub(crate) fn remove(&self, value: &T) {
        let Some(entry) = self.lookup(value) else {
            return;
        };
        let seen = entry.state.load(Ordering::Relaxed);
        if seen & PRESENT != 0 {
            self.mark(entry, seen);
        }
    }

    /// Removes each of `values` that is present, one [`remove`](Self::remove) after another (the
    /// real one pins the epoch once for all of them, which orders nothing).
    pub(crate) fn remove_all(&self, values: &[T]) {
        for value in values {
            self.remove(value);
        }
    }

    /// Marks the node `seen` (a present state) removed if it is still the entry's node, as
    /// `mark_tower` does with one `SeqCst` read-modify-write, then `len -= 1` if this call marked it.
    fn mark(&self, entry: &Entry, seen: usize) {
        if entry
            .state
            .compare_exchange(seen, seen & !PRESENT, Ordering::SeqCst, Ordering::Relaxed)
            .is_ok()
        {
            self.len.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// The approximate number of values (0 if the counter has wrapped below zero).
    pub(crate) fn len(&self) -> usize {
        let len = self.len.load(Ordering::Relaxed);
        if len > isize::MAX as usize { 0 } else { len }
    }

    /// Whether [`len`](Self::len) is 0.
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Up to `limit` of the smallest values, in order, one lookup per value.
    pub(crate) fn first(&self, limit: usize) -> Vec<T> {
        let mut out: Vec<T> = Vec::new();
        let mut last: Option<T> = None;
        while out.len() < limit {
            self.links.load(Ordering::Relaxed);
            let next = {
                let entries = book(&self.entries);
                let mut range = match &last {
                    None => entries.range::<T, _>(..),
                    Some(last) => entries.range((Excluded(last), Unbounded)),
                };
                range.next().map(|(value, &index)| (value.clone(), index))
            };
            let Some((value, index)) = next else {
                break;
            };
            if self.pool[index].state.load(Ordering::Relaxed) & PRESENT != 0 {
                out.push(value.clone());
            }
            last = Some(value);
        }
        out
    }
}

impl<T: Ord + Clone + Send + 'static> Default for PendingSet<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> fmt::Debug for PendingSet<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PendingSet").finish_non_exhaustive()
    }
}
