//! [`Claim`] and [`ExactClaim`]: at-least-once processing guards over the overwrite maps.
//!
//! A claim is an insert that is undone unless committed: `map.claim(&id)` is `None` for a
//! duplicate, otherwise a guard; `commit` keeps the id remembered, and dropping the guard without
//! it (an early return, `?`, a panic unwinding) forgets the id, so that the redelivery of a
//! message whose processing failed gets through. The protocol is the maps' own (`insert`, then
//! a compare-and-swap forget); what differs between the two guards is what the forget compares:
//! a fingerprint, or the identity of the entry the claim inserted.

use core::fmt;

use super::exact::Entry;
use crate::hash::{Hash128, StableHasher};
use crate::sync::Arc;
use crate::{ExactOverwriteMap, OverwriteMap};

/// An item claimed in an [`OverwriteMap`] for at-least-once processing (from
/// [`OverwriteMap::claim`]): commit it once processed, or drop it to let the item through again.
///
/// While the claim lives, the map remembers the item, so other claims of it get `None`
/// (duplicates: acknowledge and drop them). Then either:
///
/// - [`commit`](Self::commit): processing succeeded. The map writes nothing; the item stays
///   remembered as after any insert (until newer items overwrite its slot), so later deliveries
///   are dropped.
/// - or the claim is dropped without `commit` (an early `return`, a `?`, a panic unwinding):
///   the item is forgotten, with [`OverwriteMap::forget`]'s one compare-exchange that clears the
///   slot only if it still holds the item's fingerprint. The next delivery gets through.
///   [`forget`](Self::forget) does the same now and says whether it erased the item.
///
/// # Semantics
///
/// - `claim` is [`OverwriteMap::insert`]: `Some` exactly when `insert` would return `true`, so
///   among racing claims of an item the map does not remember, exactly one gets `Some` (unless
///   another item overwrites the slot between them: see "A claim is not a lock" below).
/// - While a claim lives, and after it committed, every other claim of the item gets `None`,
///   until another item overwrites the slot (or, the second limit below, an older claim of the
///   same item that had been overwritten is dropped).
/// - A drop never erases another item: if another item overwrote the slot, the compare-exchange
///   fails and the slot keeps that item.
/// - Hand a failed message back to the queue (nack, requeue) only **after** the claim is dropped:
///   a delivery that arrives while the claim lives is a duplicate and gets `None`. Returning the
///   error from the function that holds the claim, as in [`OverwriteMap::claim`]'s example,
///   drops it first. The map's atomics are `Relaxed`: the queue's own synchronization (the
///   requeue happens before the redelivery is received) is what makes the next claim see the
///   forget.
///
/// **Why this is at-least-once.** A delivery is refused only while the slot holds the item (up
/// to the map's 2^-64 fingerprint collisions). The claim whose write the slot holds cannot have
/// been dropped yet (its drop would have found the fingerprint and erased it): it is live, and
/// its message will be committed or, once the claim is dropped, handed back to the queue; or it
/// committed, and the message was processed. (Or a plain `insert` wrote it: mixing the two for
/// one item is the caller's choice.) And a drop only ever erases: whatever happens in a race, it
/// can make the map say "new" where it would have said "seen" (a duplicate processed), never the
/// reverse (a message lost).
///
/// # Limits
///
/// - **A claim is not a lock.** If other items overwrite the slot while the claim lives (the
///   processing took longer than the map's window), the map no longer remembers the item: a
///   delivery meanwhile gets another `Some`, and the message is processed twice. Size the window
///   ([`MapSize::Window`](crate::builder::MapSize::Window)) for the processing time as well.
/// - **A drop can erase a later claim of the same item.** The slot holds a fingerprint, not the
///   identity of a claim. If another item overwrote ours and a second claim of the same item then
///   re-inserted it, our drop finds the item's fingerprint and erases it, whether that second
///   claim is still live or already committed. The item is then not remembered, so its next
///   delivery is processed again: a duplicate, never a loss (see above). It takes the map to have
///   already forgotten our claim while it lived (the previous point), or an explicit
///   [`OverwriteMap::forget`] of the item (then our `forget()` even returns `true`).
///   [`ExactClaim`] forgets only the entry it inserted and has no such limit.
/// - A claim that is never dropped (`mem::forget`, a thread that never ends) acts as a commit.
///
/// # Examples
///
/// ```
/// let map = seen::OverwriteMap::with_buckets(1_000)?;
/// let claim = map.claim("msg-1").expect("new");
/// assert!(map.claim("msg-1").is_none()); // claimed: a duplicate
/// claim.commit();
/// assert!(map.claim("msg-1").is_none()); // committed: still a duplicate
///
/// let claim = map.claim("msg-2").expect("new");
/// assert!(claim.forget()); // failed: forget it now (dropping it does the same)
/// assert!(map.claim("msg-2").is_some()); // the retry gets through
/// # Ok::<(), seen::Error>(())
/// ```
#[must_use = "dropping a claim forgets the item: `commit` it once the item is processed"]
pub struct Claim<'a, H = StableHasher> {
    map: &'a OverwriteMap<H>,
    /// The claimed hash; `None` once committed or forgotten, so that the drop does nothing.
    hash: Option<Hash128>,
}

impl<'a, H> Claim<'a, H> {
    /// A live claim of `hash`, which the caller has just inserted.
    pub(super) fn new(map: &'a OverwriteMap<H>, hash: Hash128) -> Self {
        Self {
            map,
            hash: Some(hash),
        }
    }

    /// Processing succeeded: keeps the item remembered (the map writes nothing), so that later
    /// deliveries of it are dropped.
    #[inline]
    pub fn commit(mut self) {
        self.hash = None;
    }

    /// Processing failed: forgets the item now, as dropping the claim would, and returns whether
    /// it erased it (`false` if another item had overwritten it meanwhile, or if it had been
    /// forgotten already).
    pub fn forget(mut self) -> bool {
        self.release()
    }

    /// A deliberately broken release for the loom models: the drop as a load, a check and a
    /// plain store instead of one compare-exchange.
    #[cfg(all(test, seen_loom))]
    pub(crate) fn check_then_store_forget(mut self) -> bool {
        self.hash
            .take()
            .is_some_and(|hash| self.map.racy_forget_hash(hash))
    }
}

impl<H> Claim<'_, H> {
    /// Forgets the claimed item unless committed or forgotten already.
    fn release(&mut self) -> bool {
        self.hash
            .take()
            .is_some_and(|hash| self.map.forget_hash(hash))
    }
}

impl<H> Drop for Claim<'_, H> {
    /// Forgets the item unless the claim was committed (see the type docs).
    fn drop(&mut self) {
        self.release();
    }
}

impl<H> fmt::Debug for Claim<'_, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut f = f.debug_struct("Claim");
        if let Some(hash) = &self.hash {
            f.field("hash", hash);
        }
        f.finish_non_exhaustive()
    }
}

/// A key claimed in an [`ExactOverwriteMap`] for at-least-once processing (from
/// [`ExactOverwriteMap::claim`]): commit it once processed, or drop it to let the key through
/// again.
///
/// As [`Claim`], with one difference: the drop forgets **exactly the entry this claim
/// inserted**, by the identity of its `Arc` (one compare-and-swap against it), not whatever
/// entry holds the same bytes.
///
/// # Semantics
///
/// - `claim` is [`ExactOverwriteMap::insert`], keeping the entry it put in the slot: `Some`
///   exactly when `insert` would return `true`; among racing claims of a key the map does not
///   remember, exactly one gets `Some` (unless another key overwrites the slot between them).
/// - Neither `insert` nor `claim` ever replaces an entry that holds the same key (they
///   compare-and-swap against the entry they read, and stop when it holds the key). So our entry
///   stays in the slot until another key overwrites it or [`ExactOverwriteMap::forget`] erases
///   it, and once gone it never comes back.
/// - Dropped without `commit`, the claim erases its entry if it is still there; otherwise it
///   does nothing. So **a drop never erases another claim's entry**, live or committed, even of
///   the same key: a committed claim is undone only by an overwrite or an explicit `forget`.
/// - While a claim lives, and after it committed, every other claim of the key gets `None`,
///   until another key overwrites the slot or a `forget` of the key erases the entry.
/// - As with [`Claim`], hand a failed message back to the queue only after the claim is dropped.
///
/// At-least-once for the same reason as [`Claim`]: a delivery is refused only while the slot
/// holds an entry with its exact bytes, and the claim that put that entry there cannot have been
/// dropped yet (its drop would have erased it): it is live or committed. And a drop only ever
/// erases.
///
/// # Limits
///
/// - **A claim is not a lock**, as [`Claim`]: if other keys overwrite the slot while the claim
///   lives, a delivery meanwhile gets another `Some`.
/// - An explicit [`ExactOverwriteMap::forget`] of the key erases a live claim's entry too (it
///   erases whatever entry holds the bytes); the claim's `commit` does not bring it back.
/// - A claim holds its entry (the key's bytes) until it is committed or dropped; one that is
///   never dropped (`mem::forget`) acts as a commit and leaks that entry.
///
/// # Examples
///
/// ```
/// let map = seen::ExactOverwriteMap::with_buckets(1)?; // one slot: every key collides
/// let first = map.claim("a").expect("new");
/// map.insert("b"); // overwrites "a": the map forgot it while it was being processed
/// let second = map.claim("a").expect("forgotten, so claimed again");
/// second.commit();
/// drop(first); // processing failed; the drop erases its own entry only, which is gone
/// assert!(map.contains("a")); // the committed claim is still remembered
/// # Ok::<(), seen::Error>(())
/// ```
#[must_use = "dropping a claim forgets the key: `commit` it once the key is processed"]
pub struct ExactClaim<'a, H = StableHasher> {
    map: &'a ExactOverwriteMap<H>,
    hash: Hash128,
    /// The entry this claim inserted; `None` once committed or forgotten.
    entry: Option<Arc<Entry>>,
}

impl<'a, H> ExactClaim<'a, H> {
    /// A live claim of `entry`, which the caller has just put in the slot `hash` selects.
    pub(super) fn new(map: &'a ExactOverwriteMap<H>, hash: Hash128, entry: Arc<Entry>) -> Self {
        Self {
            map,
            hash,
            entry: Some(entry),
        }
    }

    /// Processing succeeded: keeps the key remembered (the map writes nothing), so that later
    /// deliveries of it are dropped.
    #[inline]
    pub fn commit(mut self) {
        self.entry = None;
    }

    /// Processing failed: forgets the entry this claim inserted now, as dropping the claim
    /// would, and returns whether it erased it (`false` if another key overwrote it meanwhile, or
    /// a `forget` erased it).
    pub fn forget(mut self) -> bool {
        self.release()
    }

    /// A deliberately broken release for the loom models: checks that the slot holds our entry,
    /// then stores the empty entry without comparing.
    #[cfg(all(test, seen_loom))]
    pub(crate) fn check_then_store_forget(mut self) -> bool {
        let hash = self.hash;
        self.entry
            .take()
            .is_some_and(|entry| self.map.racy_forget_entry(hash, &entry))
    }

    /// A deliberately broken release for the loom models: forgets whatever entry holds the same
    /// bytes (`forget_hashed`), as the fingerprint map must, instead of the entry this claim
    /// inserted.
    #[cfg(all(test, seen_loom))]
    pub(crate) fn forget_by_bytes(mut self) -> bool {
        let hash = self.hash;
        self.entry.take().is_some_and(|entry| {
            let key = (*entry).as_deref().unwrap_or_default();
            self.map.forget_hashed(hash, key)
        })
    }
}

impl<H> ExactClaim<'_, H> {
    /// Forgets the claimed entry unless committed or forgotten already.
    fn release(&mut self) -> bool {
        self.entry
            .take()
            .is_some_and(|entry| self.map.forget_entry(self.hash, &entry))
    }
}

impl<H> Drop for ExactClaim<'_, H> {
    /// Forgets the entry this claim inserted unless the claim was committed (see the type docs).
    fn drop(&mut self) {
        self.release();
    }
}

impl<H> fmt::Debug for ExactClaim<'_, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut f = f.debug_struct("ExactClaim");
        f.field("hash", &self.hash);
        if let Some(key) = self.entry.as_deref().and_then(Option::as_deref) {
            f.field("key", &key);
        }
        f.finish_non_exhaustive()
    }
}
