//! The model-checking side of the facade: loom's atomics, and the two wrappers rebuilt on loom's
//! primitives with the same names and contracts as `std_impl.rs`.
//!
//! `ArcCell` and `PendingSet` are `pub` here (and only here) so that `loom-tests/` can check the
//! facade itself through the hidden `seen::__loom` module.

use core::fmt;
use core::ops::Bound::{Excluded, Unbounded};
use std::collections::BTreeSet;

pub(crate) use loom::sync::Arc;
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering, fence};

/// Called in every spin or retry loop: yields to loom's scheduler so that the model can make
/// progress (a spinning thread that never yields is reported by loom as a livelock).
#[inline]
pub(crate) fn spin_hint() {
    loom::thread::yield_now();
}

/// The loom stand-in for `arc_swap::ArcSwap<T>`: a loom `RwLock<Arc<T>>` (arc-swap's own strategy
/// for testing its users). Same methods and contract as the std `ArcCell`.
pub struct ArcCell<T>(loom::sync::RwLock<Arc<T>>);

impl<T> ArcCell<T> {
    /// A cell holding `value`.
    pub fn new(value: Arc<T>) -> Self {
        Self(loom::sync::RwLock::new(value))
    }

    /// The current value, as an owned `Arc` the caller may keep.
    pub fn load(&self) -> Arc<T> {
        Arc::clone(&self.0.read().expect("ArcCell lock poisoned"))
    }

    /// Runs `f` on the current value.
    pub fn read<R>(&self, f: impl FnOnce(&T) -> R) -> R {
        f(&self.0.read().expect("ArcCell lock poisoned"))
    }

    /// Replaces the value unconditionally.
    pub fn store(&self, value: Arc<T>) {
        *self.0.write().expect("ArcCell lock poisoned") = value;
    }

    /// Replaces the value and returns the one it replaced (one atomic step).
    pub fn swap(&self, value: Arc<T>) -> Arc<T> {
        core::mem::replace(&mut *self.0.write().expect("ArcCell lock poisoned"), value)
    }

    /// Replaces the value with `new` if it is still `current` (pointer equality); returns whether
    /// it did.
    pub fn compare_and_swap(&self, current: &Arc<T>, new: Arc<T>) -> bool {
        let mut slot = self.0.write().expect("ArcCell lock poisoned");
        if Arc::ptr_eq(&slot, current) {
            *slot = new;
            true
        } else {
            false
        }
    }
}

impl<T> fmt::Debug for ArcCell<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ArcCell").finish_non_exhaustive()
    }
}

/// The loom stand-in for `crossbeam_skiplist::SkipSet<T>`: a loom `Mutex<BTreeSet<T>>`, one lock
/// per operation. Iteration takes the lock once per element, so a model sees interleavings inside
/// an iteration, as it would with the skip list's weakly consistent iterator.
pub struct PendingSet<T>(loom::sync::Mutex<BTreeSet<T>>);

impl<T: Ord + Clone + Send + 'static> PendingSet<T> {
    /// An empty set.
    pub fn new() -> Self {
        Self(loom::sync::Mutex::new(BTreeSet::new()))
    }

    /// Adds `value`; a value already present stays (once).
    pub fn insert(&self, value: T) {
        self.lock().insert(value);
    }

    /// Whether `value` is in the set.
    pub fn contains(&self, value: &T) -> bool {
        self.lock().contains(value)
    }

    /// Removes `value`; returns `true` for exactly one of several racing removals of it.
    pub fn remove(&self, value: &T) -> bool {
        self.lock().remove(value)
    }

    /// The number of values.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// Up to `limit` of the smallest values, in order, one lock per element.
    pub fn first(&self, limit: usize) -> Vec<T> {
        let mut out: Vec<T> = Vec::new();
        while out.len() < limit {
            let next = {
                let set = self.lock();
                match out.last() {
                    None => set.iter().next().cloned(),
                    Some(last) => set.range((Excluded(last), Unbounded)).next().cloned(),
                }
            };
            match next {
                Some(value) => out.push(value),
                None => break,
            }
        }
        out
    }

    fn lock(&self) -> loom::sync::MutexGuard<'_, BTreeSet<T>> {
        self.0.lock().expect("PendingSet lock poisoned")
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
