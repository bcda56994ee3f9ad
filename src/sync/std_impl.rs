//! The production side of the facade: std atomics, `arc_swap`, `crossbeam_skiplist`.

use core::fmt;

pub(crate) use std::sync::Arc;
pub(crate) use std::sync::atomic::{
    AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence,
};

/// Called in every spin or retry loop: a CPU pause hint here, a yield to loom's scheduler there.
#[inline]
pub(crate) fn spin_hint() {
    std::hint::spin_loop();
}

/// Called in a loop that waits for another thread's progress: a CPU pause hint for the first
/// 64 rounds, then a yield to the operating system (the thread waited for may need this core).
#[inline]
pub(crate) fn backoff(round: u32) {
    if round < 64 {
        std::hint::spin_loop();
    } else {
        std::thread::yield_now();
    }
}

/// Marks a point where the protocol relies on the single total order of `SeqCst` accesses
/// (C++20 [atomics.order] p4: `SeqCst` operations that are coherence-ordered are ordered the
/// same way in that order). Here it is nothing: the accesses on either side are `SeqCst`
/// themselves, which on x86-64 costs nothing beyond the locked read-modify-write the protocol
/// already does. Under loom it is a `SeqCst` fence, because loom runs `SeqCst` accesses as
/// `AcqRel` (it would report store-buffering outcomes that `SeqCst` forbids) but models fences.
#[inline(always)]
pub(crate) fn sc_order() {}

/// A block of words shared between immutable snapshots and written only while unshared:
/// `Arc<[u64]>`, whose words sit right after the reference counts (one pointer to follow, not
/// two as with an `Arc` of a boxed slice).
#[derive(Clone)]
pub(crate) struct SharedWords(Arc<[u64]>);

impl SharedWords {
    /// Shares `words` (moved into one allocation with the counts).
    pub(crate) fn new(words: Box<[u64]>) -> Self {
        Self(Arc::from(words))
    }
}

impl core::ops::Deref for SharedWords {
    type Target = [u64];

    #[inline]
    fn deref(&self) -> &[u64] {
        &self.0
    }
}

/// A mutex that is only ever *tried*: [`try_lock`](Self::try_lock) never blocks, so code that
/// uses nothing else stays lock-free (a caller that fails to take it goes on with its work).
///
/// A newtype over [`std::sync::Mutex`]: `try_lock` is one compare-and-swap that Acquires on
/// success, and unlocking Releases (`library/std/src/sys/sync/mutex/futex.rs`). A poisoned mutex
/// (a holder panicked) is taken as it is: the data it guards must stay valid at every step.
/// [`is_held`](Self::is_held) is a hint read with a plain load, so that callers can skip a
/// `try_lock` that would fail: a failed compare-and-swap still takes the cache line from the
/// holder.
pub(crate) struct TryMutex<T> {
    mutex: std::sync::Mutex<T>,
    held: AtomicBool,
}

/// The guard of a [`TryMutex`]: clears the hint when dropped, before the mutex is released.
pub(crate) struct TryGuard<'a, T> {
    // Declared first: dropped after `drop` below has cleared the hint.
    guard: std::sync::MutexGuard<'a, T>,
    held: &'a AtomicBool,
}

impl<T> TryMutex<T> {
    /// A mutex holding `value`.
    pub(crate) fn new(value: T) -> Self {
        Self {
            mutex: std::sync::Mutex::new(value),
            held: AtomicBool::new(false),
        }
    }

    /// The data, if no other thread holds the mutex; `None` at once if one does.
    pub(crate) fn try_lock(&self) -> Option<TryGuard<'_, T>> {
        let guard = match self.mutex.try_lock() {
            Ok(guard) => guard,
            Err(std::sync::TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return None,
        };
        self.held.store(true, Ordering::Relaxed);
        Some(TryGuard {
            guard,
            held: &self.held,
        })
    }

    /// The data, waiting for the thread that holds it, if one does (for callers that must
    /// exclude the holder's work for a moment, like a save; never on an insert's path).
    pub(crate) fn lock(&self) -> TryGuard<'_, T> {
        // With the pause points, a call that finds the mutex held says so before it waits (a
        // test then knows that releasing the holder is what lets it through).
        #[cfg(feature = "failpoints")]
        match self.try_lock() {
            Some(guard) => return guard,
            None => {
                failpoint!("sync.lock.wait");
            }
        }
        let guard = self
            .mutex
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.held.store(true, Ordering::Relaxed);
        TryGuard {
            guard,
            held: &self.held,
        }
    }

    /// Whether some thread seems to hold the mutex: a `Relaxed` hint, possibly stale either
    /// way. Only ever a shortcut past a `try_lock` that would probably fail.
    #[inline]
    pub(crate) fn is_held(&self) -> bool {
        self.held.load(Ordering::Relaxed)
    }
}

impl<T> core::ops::Deref for TryGuard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.guard
    }
}

impl<T> core::ops::DerefMut for TryGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.guard
    }
}

impl<T> Drop for TryGuard<'_, T> {
    fn drop(&mut self) {
        self.held.store(false, Ordering::Relaxed);
    }
}

impl<T> fmt::Debug for TryMutex<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TryMutex")
            .field("held", &self.is_held())
            .finish_non_exhaustive()
    }
}

/// An atomically replaceable `Arc<T>`: readers never block and always see one whole value.
///
/// A newtype over [`arc_swap::ArcSwap`] that exposes only what the crate uses, so that the loom
/// build can give the same names another implementation. What the crate relies on is what
/// arc-swap documents (1.9.3, `src/docs/mod.rs`, "Atomic orderings", and `src/docs/internal.rs`):
/// each operation is atomic (linearizable), stores publish with Release and loads read with
/// Acquire, so a load sees every store that happens before it, or a later one.
pub(crate) struct ArcCell<T>(arc_swap::ArcSwap<T>);

impl<T> ArcCell<T> {
    /// A cell holding `value`.
    pub(crate) fn new(value: Arc<T>) -> Self {
        Self(arc_swap::ArcSwap::new(value))
    }

    /// The current value, as an owned `Arc` the caller may keep.
    pub(crate) fn load(&self) -> Arc<T> {
        self.0.load_full()
    }

    /// Runs `f` on the current value without cloning the `Arc` (the cheap path for readers).
    #[inline]
    pub(crate) fn read<R>(&self, f: impl FnOnce(&T) -> R) -> R {
        f(&self.0.load())
    }

    /// Replaces the value unconditionally.
    pub(crate) fn store(&self, value: Arc<T>) {
        self.0.store(value);
    }

    /// Replaces the value and returns the one it replaced (one atomic step).
    pub(crate) fn swap(&self, value: Arc<T>) -> Arc<T> {
        self.0.swap(value)
    }

    /// Replaces the value with `new` if it is still `current` (pointer equality); returns whether
    /// it did. Exactly one of several racing calls with the same `current` succeeds.
    pub(crate) fn compare_and_swap(&self, current: &Arc<T>, new: Arc<T>) -> bool {
        let previous = self.0.compare_and_swap(current, new);
        Arc::ptr_eq(&*previous, current)
    }
}

impl<T: fmt::Debug> fmt::Debug for ArcCell<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ArcCell").field(&*self.0.load()).finish()
    }
}

/// A concurrent ordered set whose entries carry a `u64` tag: lock-free insert, remove and
/// lookup; weakly consistent iteration.
///
/// A newtype over [`crossbeam_skiplist::SkipList<T, u64>`] (the skip list under `SkipMap`,
/// used directly so that a batch of removals or an iteration pins the epoch once and takes no
/// reference count per entry) that exposes only what the crate uses, each with the guarantee
/// the skip list really gives (crossbeam-skiplist 0.1.3, `src/base.rs`), not a stronger one:
///
/// - [`insert`](Self::insert) is `SkipList::get_or_insert_with`, **not** `SkipList::insert`:
///   the latter *replaces* an existing entry by marking its node removed and then linking a new
///   one (`SkipList::insert_internal` with `replace = true`), and between the two steps the
///   value is in neither node. A concurrent `contains` sees it absent. `get_or_insert_with`
///   leaves an existing entry in place. Its tag closure runs once the first search found no
///   entry, before the node is allocated: it may run and the node still not be linked, when
///   another thread links one for the same value first (`insert_internal` then returns that
///   one). So the closure running does not mean "this call linked"; the returned tag tells whose
///   node it is.
/// - [`remove`](Self::remove) returns nothing: `SkipList::remove` returns `Some` to every
///   caller that found the node, even one whose `mark_tower` lost to another remover.
/// - `len` is a `Relaxed` counter incremented before a node is linked and decremented after it
///   is marked: approximate while other threads write.
/// - Lookups read the links with `load_consume` (Acquire, or Relaxed plus a dependency on weak
///   hardware); a node is linked with a `SeqCst` compare-and-swap and removal marks it with a
///   `SeqCst` `fetch_or`. A caller that must order other memory after a lookup (hit or miss)
///   issues an Acquire fence.
pub(crate) struct PendingSet<T>(crossbeam_skiplist::SkipList<T, u64>);

impl<T: Ord + Clone + Send + 'static> PendingSet<T> {
    /// An empty set, on the process-wide epoch collector (the one `SkipMap` uses).
    pub(crate) fn new() -> Self {
        Self(crossbeam_skiplist::SkipList::new(
            crossbeam_epoch::default_collector().clone(),
        ))
    }

    /// Adds `value` if it is absent; an entry already present stays in place, so a concurrent
    /// [`contains`](Self::contains) never sees the value disappear because of an insert.
    ///
    /// `tag` runs at most once, only when the first search found no entry, and tags the node
    /// this call then tries to link. Returns the tag of the node this call linked (the one `tag`
    /// made) or found: another thread's if that thread's node was there first (or won the
    /// race to link). A node found may already be marked removed when the call returns, even
    /// before its search ended (`search_position` keeps a node it met on an upper level after
    /// helping unlink it below, and `try_acquire` only needs its count above zero): the
    /// returned tag is then a removed node's, and nothing was linked, as if the call had found
    /// the node just before its removal.
    pub(crate) fn insert(&self, value: T, tag: impl FnOnce() -> u64) -> u64 {
        let guard = &crossbeam_epoch::pin();
        let entry = self.0.get_or_insert_with(value, tag, guard);
        let tag = *entry.value();
        entry.release(guard);
        tag
    }

    /// Whether `value` is in the set.
    pub(crate) fn contains(&self, value: &T) -> bool {
        self.0.contains_key(value, &crossbeam_epoch::pin())
    }

    /// Removes `value` if present.
    pub(crate) fn remove(&self, value: &T) {
        self.remove_all(core::slice::from_ref(value));
    }

    /// Removes each of `values` that is present, one [`remove`](Self::remove) after another
    /// (under one epoch pin).
    pub(crate) fn remove_all(&self, values: &[T]) {
        let guard = &crossbeam_epoch::pin();
        for value in values {
            if let Some(entry) = self.0.remove(value, guard) {
                entry.release(guard);
            }
        }
    }

    /// The number of values; approximate while other threads write (see the type docs).
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the set is empty (as [`len`](Self::len), approximate).
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Up to `limit` of the smallest values, in order. Weakly consistent: every value present for
    /// the whole call is seen (if within `limit`); one inserted or removed during it may or may not be.
    pub(crate) fn first(&self, limit: usize) -> Vec<T> {
        let guard = &crossbeam_epoch::pin();
        let mut out = Vec::with_capacity(self.0.len().min(limit));
        out.extend(
            self.0
                .iter(guard)
                .take(limit)
                .map(|entry| entry.key().clone()),
        );
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
        f.debug_struct("PendingSet")
            .field("len", &self.0.len())
            .finish_non_exhaustive()
    }
}
