//! The semi-concurrent filter's insert buffer: two fixed open-addressed tables of 128-bit
//! hashes, each slot claimed by compare-and-swap. One table takes inserts while the compactor
//! drains the other; nothing here allocates after construction.
//!
//! # A slot's life
//!
//! A slot is two words, `key` (`h1`) and `val` (`h2`). Between two drains of its table, both
//! hold the same **stamp**: a value below [`FIRST_HASH`] that names this *incarnation* of the
//! table (every reset writes a new one). The filter's `active` word names the table that takes
//! inserts *and its stamp*: an insert claims a slot only by moving `key` from that stamp to
//! `h1`, then **publishes** by moving `val` from the stamp to `h2`, two compare-and-swaps. So a
//! table is written only during its turn: an insert that read `active` before a switch finds
//! the old table drained (its publish fails) or reset to a stamp it does not hold (its claim
//! fails), never open; and a claim made as the turn ends checks `active` again before it
//! publishes (a `SeqCst` pairing with the switch). The compactor drains a table by **closing**
//! every claimed slot that is not published (`val` from the stamp to [`TAKEN`], a
//! compare-and-swap that a publish either beat, and is taken, or meets, and fails), leaving the
//! free ones (a claim of one now sees the switch and gives it up), and taking every published
//! hash, which stays in place, whole, for lookups, until the reset (after the drained hashes
//! are in the current copy of the bits).
//!
//! Hashes whose `h1` or `h2` falls below [`FIRST_HASH`] (one in 2^23 items) cannot be told from
//! a stamp; they skip the tables ([`Buffer::storable`]).
//!
//! A lookup matches a slot whose `key` is `h1` and whose `val` is `h2`. Keys only move from a
//! stamp to a hash within an incarnation, so a probe sequence ends at the first stamp.

use core::fmt;

use crate::hash::Hash128;
use crate::sync::Ordering::{AcqRel, Acquire, Relaxed, Release, SeqCst};
use crate::sync::sc_order;
use crate::sync::{AtomicU64, AtomicUsize};

/// The smallest value a slot holds as a hash; the stamps lie below it.
pub(super) const FIRST_HASH: u64 = 1 << 40;

/// A closed slot's `val`: the drain found it unpublished, and no publish can follow.
const TAKEN: u64 = 0;

/// The most slots an insert or a lookup tries, from the hash's home slot on.
const PROBES: usize = 8;

/// The counters of published hashes per table, each on its own lines, so that two inserting
/// threads rarely write the same one (with 8, two threads moved a counter's line between
/// their caches on most inserts).
pub(super) const REGIONS: usize = 8;

/// Two tables of `slots` slots each, and which one takes inserts.
pub(super) struct Buffer {
    tables: [Box<[Slot]>; 2],
    /// The table inserts go to (0 or 1, the low bit) and its stamp (the rest). Written only by
    /// the compactor.
    active: AtomicU64,
    /// Per table and region of its slots: hashes published minus hashes
    /// drained (wrapping: a drain may count a hash before its publisher does).
    counts: [Box<[Padded]>; 2],
    /// A slot's region is its index shifted right by this.
    region_shift: u32,
}

/// One slot: `h1` and `h2` of a pending hash, or the incarnation's stamp in both.
struct Slot {
    key: AtomicU64,
    val: AtomicU64,
}

/// A counter alone on its cache lines (128 bytes: adjacent-line prefetch pairs them).
#[repr(align(128))]
struct Padded(AtomicUsize);

/// What [`Buffer::add`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Added {
    /// Published in slot `slot` of table `table` (not yet counted: see [`Buffer::count`]).
    Published { table: usize, slot: usize },
    /// Another insert's hash, the same one, is published: nothing was added.
    Found,
    /// Not added: no free slot among the probes, or the table was drained under the insert.
    Refused,
    /// Not added: the table was reset since the caller read `active` (read it again).
    Stale,
}

impl Buffer {
    /// Two tables of `slots` slots (a power of two, at least 2), stamped 1 and 2, with
    /// `regions` counters each (a power of two, at most [`REGIONS`] and `slots`); table 0 takes
    /// the inserts.
    pub(super) fn new(slots: usize, regions: usize) -> Self {
        debug_assert!(slots.is_power_of_two() && slots >= 2);
        let table = |stamp: u64| -> Box<[Slot]> {
            (0..slots)
                .map(|_| Slot {
                    key: AtomicU64::new(stamp),
                    val: AtomicU64::new(stamp),
                })
                .collect()
        };
        debug_assert!(regions.is_power_of_two() && regions <= REGIONS.min(slots));
        let counts =
            || -> Box<[Padded]> { (0..regions).map(|_| Padded(AtomicUsize::new(0))).collect() };
        Self {
            tables: [table(1), table(2)],
            active: AtomicU64::new(1 << 1),
            counts: [counts(), counts()],
            region_shift: (slots / regions).trailing_zeros(),
        }
    }

    /// Whether `hash` can be held here (see the module docs).
    #[inline]
    pub(super) fn storable(hash: Hash128) -> bool {
        hash.h1 >= FIRST_HASH && hash.h2 >= FIRST_HASH
    }

    /// The table inserts go to now, and its stamp (Acquire: the reset that wrote that stamp
    /// into its slots happens before).
    #[inline]
    pub(super) fn active(&self) -> (usize, u64) {
        let active = self.active.load(Acquire);
        ((active & 1) as usize, active >> 1)
    }

    /// The home slot of `hash` in a table (bits of `h2`: `h1`'s low bits index the filter's
    /// summary, its high bits the filter's block).
    #[inline]
    fn home(&self, hash: Hash128) -> usize {
        (hash.h2 >> 32) as usize & (self.tables[0].len() - 1)
    }

    /// Adds a [`storable`](Self::storable) `hash` to table `table`, whose stamp the caller read
    /// in `active`: claims a slot whose `key` holds that stamp, then publishes `h2` in it. On
    /// [`Added::Published`] the hash is in the table until a drain takes it; on
    /// [`Added::Found`] the same hash, published by another insert, was seen (Acquire: that
    /// insert's earlier writes happen before what follows).
    pub(super) fn add(&self, table: usize, stamp: u64, hash: Hash128) -> Added {
        let slots = &self.tables[table];
        let mask = slots.len() - 1;
        let home = self.home(hash);
        for i in 0..PROBES.min(slots.len()) {
            let index = (home + i) & mask;
            let slot = &slots[index];
            let mut key = slot.key.load(Acquire);
            while key < FIRST_HASH {
                if key != stamp {
                    // Reset since the caller read `active`: not this table's turn any more.
                    // (The turn check below would refuse the claim too; this spares it.)
                    return Added::Stale;
                }
                match slot.key.compare_exchange(key, hash.h1, SeqCst, Acquire) {
                    Ok(stamp) => {
                        // Still this table's turn? The claim and this load, and the switch and
                        // the drain's load of the key, are `SeqCst` (with `sc_order` between
                        // them under loom): either this load sees the switch, and the insert
                        // gives the slot up (the drain may have passed it as free), or the
                        // drain sees the claim, and closes the slot or takes its hash.
                        sc_order();
                        if self.active.load(SeqCst) != stamp << 1 | table as u64
                            && !twin!(SkipTurnCheck)
                        {
                            return Added::Refused;
                        }
                        // Release: the caller's summary raise and this claim happen before
                        // the drain that takes the hash, and before a lookup that matches it.
                        let published = slot
                            .val
                            .compare_exchange(stamp, hash.h2, Release, Relaxed)
                            .is_ok();
                        return if published {
                            Added::Published { table, slot: index }
                        } else {
                            // Closed by a drain since the claim: the hash is in no table, and
                            // the caller must put it elsewhere.
                            Added::Refused
                        };
                    }
                    Err(now) => key = now,
                }
            }
            if key == hash.h1 && slot.val.load(Acquire) == hash.h2 {
                return Added::Found;
            }
        }
        Added::Refused
    }

    /// Counts a publish; returns the new count of its region, a hint for when to add up the
    /// counts.
    pub(super) fn count(&self, table: usize, slot: usize) -> usize {
        let region = &self.counts[table][slot >> self.region_shift].0;
        region.fetch_add(1, Relaxed).wrapping_add(1)
    }

    /// Whether `hash` is published in either table (drained or not: a drained hash stays until
    /// the reset).
    ///
    /// A miss is not final: a hash leaves a table (by a reset) only after it is in the current
    /// copy of the bits, and the caller looks there again after this (with an Acquire fence,
    /// so that a reset seen here makes that copy visible).
    pub(super) fn contains(&self, hash: Hash128) -> bool {
        if !Self::storable(hash) {
            return false;
        }
        let home = self.home(hash);
        self.tables.iter().any(|slots| {
            let mask = slots.len() - 1;
            for i in 0..PROBES.min(slots.len()) {
                let slot = &slots[(home + i) & mask];
                let key = slot.key.load(Acquire);
                if key < FIRST_HASH {
                    return false;
                }
                if key == hash.h1 && slot.val.load(Acquire) == hash.h2 {
                    return true;
                }
            }
            false
        })
    }

    /// Makes `table`, stamped `stamp`, the active one (only the compactor; Release: the reset
    /// that wrote `stamp` happens before an insert that reads it here).
    pub(super) fn switch(&self, table: usize, stamp: u64) {
        // `SeqCst`: see the claim in `add`.
        self.active.store(stamp << 1 | table as u64, SeqCst);
    }

    /// The hashes table `table` holds, by its counts (approximate while inserts run).
    fn held(&self, table: usize) -> usize {
        let sum = self.counts[table]
            .iter()
            .fold(0usize, |sum, c| sum.wrapping_add(c.0.load(Relaxed)));
        (sum as isize).max(0) as usize
    }

    /// Hashes published in both tables (approximate while other threads write).
    pub(super) fn len(&self) -> usize {
        self.held(0) + self.held(1)
    }

    /// Drains table `table`, whose stamp is `stamp` (only the compactor, after the switch):
    /// closes every claimed slot that is not published and appends each published hash to
    /// `out`. A slot still free is left alone: a claim of it after this point sees the switch
    /// and gives it up (see `add`). After it, no publish in this incarnation of the table
    /// succeeds, and lookups still match the drained hashes (until the reset).
    pub(super) fn drain(&self, table: usize, stamp: u64, out: &mut Vec<Hash128>) {
        sc_order();
        let mut taken = [0usize; REGIONS];
        for (index, slot) in self.tables[table].iter().enumerate() {
            if slot.key.load(SeqCst) < FIRST_HASH && !twin!(DrainTakesPublished) {
                continue;
            }
            let mut val = slot.val.load(Acquire);
            if twin!(DrainTakesPublished) {
                val = slot.val.swap(TAKEN, AcqRel);
            } else if val == stamp && !twin!(DrainWithoutClosing) {
                // Claimed, not published: closed, unless the publish comes first (then it is
                // taken). Acquire: the publisher's claim and summary raise happen before.
                if let Err(now) = slot.val.compare_exchange(stamp, TAKEN, Acquire, Acquire) {
                    val = now;
                }
            }
            if val >= FIRST_HASH {
                out.push(Hash128 {
                    h1: slot.key.load(Relaxed),
                    h2: val,
                });
                taken[index >> self.region_shift] += 1;
            }
        }
        for (count, &taken) in self.counts[table].iter().zip(&taken) {
            if taken != 0 {
                count.0.fetch_sub(taken, Relaxed);
            }
        }
    }

    /// Resets table `table` to `stamp`, a stamp it has not held since the last reset (only the
    /// compactor, once the hashes it drained are in the current copy of the bits): both words
    /// of every slot, `val` first. Release: a lookup that reads a reset word happens after the
    /// swap of that copy.
    pub(super) fn reset(&self, table: usize, stamp: u64) {
        debug_assert!((1..FIRST_HASH).contains(&stamp));
        for slot in self.tables[table].iter() {
            slot.val.store(stamp, Release);
            slot.key.store(stamp, Release);
        }
    }

    /// Appends every published hash of both tables to `out` (a save's pending hashes: run
    /// while no drain does, so that a published hash is seen as published).
    pub(super) fn published(&self, out: &mut Vec<Hash128>) {
        for slots in &self.tables {
            for slot in slots.iter() {
                let val = slot.val.load(Acquire);
                if val >= FIRST_HASH {
                    out.push(Hash128 {
                        h1: slot.key.load(Relaxed),
                        h2: val,
                    });
                }
            }
        }
    }

    /// The slots of one table.
    pub(super) fn slots(&self) -> usize {
        self.tables[0].len()
    }
}

impl fmt::Debug for Buffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Buffer")
            .field("slots", &self.slots())
            .field("len", &self.len())
            .finish_non_exhaustive()
    }
}
