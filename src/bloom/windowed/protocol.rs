//! The insert and lookup protocol: which generations an item's block holds it in, and the
//! insert that writes into the current generation and looks again when a rotation lands inside
//! it.

use core::hash::Hash;

use super::{Rotation, WindowedBloomFilter};
use crate::batch::{GROUP, GROUP_MIN_BYTES, append_results, for_each_group};
use crate::bloom::probe::word_probe;
use crate::clock::Clock;
use crate::hash::{Hash128, ItemHasher};
use crate::sync::Ordering::{Acquire, Relaxed, SeqCst};
use crate::sync::{AtomicU64, sc_order};

impl<H: ItemHasher, C: Clock> WindowedBloomFilter<H, C> {
    /// Inserts `item` into the current generation unless a live generation holds it; returns
    /// `true` if none did (certainly new within the window), `false` if one did (seen within
    /// the window, or a false positive). A `false` does not renew the item.
    ///
    /// # Examples
    ///
    /// ```
    /// let f = seen::WindowedBloomFilter::builder(1000).rotate_manually().build()?;
    /// assert!(f.insert(&42u64));
    /// assert!(!f.insert(&42u64));
    /// # Ok::<(), seen::Error>(())
    /// ```
    #[inline]
    pub fn insert<T: Hash + ?Sized>(&self, item: &T) -> bool {
        self.insert_hash(self.hasher.hash_item(item))
    }

    /// Whether `item` is possibly in a live generation: `false` means certainly not inserted
    /// within the window. Never writes.
    #[inline]
    pub fn contains<T: Hash + ?Sized>(&self, item: &T) -> bool {
        self.contains_hash(self.hasher.hash_item(item))
    }

    /// [`contains`](Self::contains) of an already computed hash (from
    /// [`hasher`](Self::hasher)).
    #[inline]
    pub fn contains_hash(&self, hash: Hash128) -> bool {
        let (block, mask) = word_probe(hash, &self.sizing.generation);
        let epoch = self.epoch.load(Acquire);
        self.held(block * self.stride, mask, self.not_spare(epoch), Relaxed)
    }

    /// [`contains_hash`](Self::contains_hash) in the live generations numbered `since` or
    /// later only: for a caller whose time runs ahead of the filter's (rotations it will do
    /// once earlier inserts are done), and which asks what the window will hold then: with
    /// `r` rotations to come, `since` is `generation() + r + 1 - G`. Never writes; as
    /// concurrent as `contains_hash`.
    ///
    /// # Examples
    ///
    /// ```
    /// let f = seen::WindowedBloomFilter::builder(1000).periods(2).rotate_manually().build()?;
    /// f.insert("a"); // generation 0
    /// f.rotate();
    /// f.insert("b"); // generation 1
    /// let h = |k: &str| seen::hash::ItemHasher::hash_item(f.hasher(), k);
    /// assert!(f.contains_hash_since(h("a"), 0) && f.contains_hash_since(h("b"), 0));
    /// assert!(!f.contains_hash_since(h("a"), 1) && f.contains_hash_since(h("b"), 1));
    /// assert!(!f.contains_hash_since(h("b"), 2));
    /// # Ok::<(), seen::Error>(())
    /// ```
    #[inline]
    pub fn contains_hash_since(&self, hash: Hash128, since: u64) -> bool {
        let (block, mask) = word_probe(hash, &self.sizing.generation);
        let epoch = self.epoch.load(Acquire);
        let first = since.max((epoch + 1).saturating_sub(u64::from(self.sizing.generations)));
        if first > epoch {
            return false;
        }
        let slots = (first..=epoch).fold(0, |slots, e| slots | 1 << self.slot(e));
        self.held(block * self.stride, mask, slots, Relaxed)
    }

    crate::forward::batch_of_items! {
    contains_many
    /// Faster than a loop of `contains` on a window larger than
    /// the caches: it hashes a group of items, reads every item's line, then tests them, so
    /// that the group's cache misses overlap instead of waiting behind each item's test of
    /// every generation ([measured](crate::docs::benchmarks#the-windowed-filter-one-line-against-8-filters)).
    /// Each answer is what `contains` would give at some moment during the call (a rotation
    /// meanwhile may split the batch: items before it answer for the old window, after it for
    /// the new).
    ///
    /// # Examples
    ///
    /// ```
    /// let f = seen::WindowedBloomFilter::builder(1000).rotate_manually().build()?;
    /// f.insert("a");
    /// let mut hits = Vec::new();
    /// assert_eq!(f.contains_many(["a", "b", "a"], &mut hits), 2);
    /// assert_eq!(hits, [true, false, true]); // "b": false w.p. 99%
    /// # Ok::<(), seen::Error>(())
    /// ```
    }

    /// [`contains_many`](Self::contains_many) of already computed hashes (from
    /// [`hasher`](Self::hasher)); a lazy `map(|key| hasher.hash_bytes(key))` keeps the hashing
    /// inside the batch.
    pub fn contains_many_hashes<I>(&self, hashes: I, hits: &mut Vec<bool>) -> usize
    where
        I: IntoIterator<Item = Hash128>,
    {
        append_results(hits, hashes.into_iter(), |hashes, out| {
            if self.memory_bytes() < GROUP_MIN_BYTES {
                // Mostly in cache: the extra passes cost more than the overlap saves.
                return hashes.for_each(|hash| out.push(self.contains_hash(hash)));
            }
            for_each_group(hashes, |group| {
                // Pass 1, arithmetic: the blocks and masks. Pass 2: one load per block's
                // line, back to back, so that the group's misses are in flight at once.
                // Pass 3: the tests, on lines now in cache.
                let mut at = [(0usize, 0u64); GROUP];
                for (at, &hash) in at.iter_mut().zip(group) {
                    let (block, mask) = word_probe(hash, &self.sizing.generation);
                    *at = (block * self.stride, mask);
                }
                let at = &at[..group.len()];
                let mut any = 0;
                for &(base, _) in at {
                    any ^= self.bits.word(base).load(Relaxed);
                }
                core::hint::black_box(any);
                let live = self.live(self.epoch.load(Acquire));
                for &(base, mask) in at {
                    out.push(self.held(base, mask, live, Relaxed));
                }
            });
        })
    }

    crate::forward::batch_of_items! {
    insert_many
    /// Item by item this is `insert`, with its guarantees (exactly once within the window,
    /// also across a rotation; retention; no renewal by a `false`): an item repeated within
    /// the batch is new only the first time, and a rotation (set off by the batch's own
    /// inserts in count mode, by the clock, or by another thread) lands between two items or
    /// inside one, as in a loop of `insert`. Faster than that loop on a window larger than the
    /// caches: it hashes a group of items and reads each one's block before inserting them one
    /// by one, so that the group's cache misses overlap instead of each waiting behind the
    /// previous item's atomic write ([measured](crate::docs::benchmarks#the-windowed-filter-one-line-against-8-filters)).
    ///
    /// # Examples
    ///
    /// ```
    /// let f = seen::WindowedBloomFilter::builder(1000).rotate_manually().build()?;
    /// let mut new = Vec::new();
    /// assert_eq!(f.insert_many(["a", "b", "a"], &mut new), 2);
    /// assert_eq!(new, [true, true, false]);
    /// f.rotate();
    /// assert_eq!(f.insert_many(["a", "c"], &mut new), 1); // appended: "a" is in the window
    /// assert_eq!(new, [true, true, false, false, true]);
    /// # Ok::<(), seen::Error>(())
    /// ```
    }

    /// [`insert_many`](Self::insert_many) of already computed hashes (from
    /// [`hasher`](Self::hasher)); a lazy `map(|key| hasher.hash_bytes(key))` keeps the hashing
    /// inside the batch.
    pub fn insert_many_hashes<I>(&self, hashes: I, new: &mut Vec<bool>) -> usize
    where
        I: IntoIterator<Item = Hash128>,
    {
        append_results(new, hashes.into_iter(), |hashes, out| {
            if self.memory_bytes() < GROUP_MIN_BYTES {
                // Mostly in cache: the read-ahead costs more than the overlap saves.
                return hashes.for_each(|hash| out.push(self.insert_hash(hash)));
            }
            for_each_group(hashes, |group| {
                // Read ahead: each item's block, loads back to back whose values are dropped,
                // so that the group's misses are in flight at once. Then the single insert,
                // unchanged, item by item: its protocol and orderings are untouched, and a
                // rotation meanwhile only means that a line was read ahead for nothing.
                self.touch_blocks(group);
                for &hash in group {
                    out.push(self.insert_hash(hash));
                }
            });
        })
    }

    /// Loads the first and last word of each hash's block, back to back, and drops the
    /// values: [`insert_many_hashes`](Self::insert_many_hashes)'s read-ahead. Must name the
    /// words [`insert_hash`](Self::insert_hash) reads (a wrong guess costs time, never
    /// correctness).
    #[inline]
    fn touch_blocks(&self, group: &[Hash128]) {
        let mut any = 0;
        for &hash in group {
            let (block, _) = word_probe(hash, &self.sizing.generation);
            let base = block * self.stride;
            // A block of more than 8 words (or a packed one, `G + 1` words from 9) can span
            // two lines: its first and last words name them (one line: the same line twice).
            any ^= self.bits.word(base).load(Relaxed);
            any ^= self.bits.word(base + self.stride - 1).load(Relaxed);
        }
        core::hint::black_box(any);
    }

    /// [`insert`](Self::insert) of an already computed hash.
    ///
    /// The protocol (proved in [the concurrency notes](crate::docs::concurrency#windowedbloomfilter),
    /// checked by loom): read the generation `e`; if a live generation holds the item, `false`.
    /// Otherwise `fetch_or` the bits into generation `e`'s word: if they were all set,
    /// `false`; if `e` is still current afterwards, `true`. If a rotation happened meanwhile,
    /// look for the item in the generations that became current since (an insert there may
    /// have claimed it) and write again into the newest, until the generation stays put.
    #[inline]
    pub fn insert_hash(&self, hash: Hash128) -> bool {
        // `twin!(Name)`: a broken variant for the loom models; the literal `false` in every
        // other build.
        let (block, mask) = word_probe(hash, &self.sizing.generation);
        let base = block * self.stride;
        let mut epoch = self.epoch.load(SeqCst);
        sc_order();
        let new = if self.held(base, mask, self.live(epoch), SeqCst) {
            false
        } else {
            loop {
                let word = self.bits.word(base + self.slot(epoch));
                failpoint!("windowed.insert.writing");
                if word.fetch_or(mask, SeqCst) & mask == mask {
                    break false;
                }
                failpoint!("windowed.insert.written");
                sc_order();
                let now = self.epoch.load(SeqCst);
                if now == epoch || twin!(IgnoreRotation) {
                    break true;
                }
                sc_order();
                if !twin!(SkipBecameCurrent)
                    && self.held(base, mask, self.became_current(epoch, now), SeqCst)
                {
                    break false;
                }
                epoch = now;
            }
        };
        self.after_insert(hash, new);
        new
    }

    /// The slot of generation `epoch`.
    #[inline(always)]
    pub(super) fn slot(&self, epoch: u64) -> usize {
        // 8 slots (7 generations, the default) and every power of two: a mask, not a division.
        if self.slot_mask != 0 {
            (epoch & self.slot_mask) as usize
        } else {
            (epoch % self.slots) as usize
        }
    }

    /// The slots live at `epoch`: all but the spare, `slot(epoch + 1)`.
    #[inline(always)]
    pub(super) fn live(&self, epoch: u64) -> u64 {
        let all = u64::MAX >> (64 - self.slots);
        all & self.not_spare(epoch)
    }

    /// Every slot but the spare of `epoch`, `slot(epoch + 1)`, and every bit past the slots:
    /// [`live`](Self::live) for a mask of slots that has none past them.
    #[inline(always)]
    pub(super) fn not_spare(&self, epoch: u64) -> u64 {
        !(1 << self.slot(epoch + 1))
    }

    /// The slots of the generations after `from` up to but not including `to` that are still
    /// live at `to` (at most `G - 1` of them).
    pub(super) fn became_current(&self, from: u64, to: u64) -> u64 {
        let first = (from + 1).max((to + 1).saturating_sub(u64::from(self.sizing.generations)));
        (first..to).fold(0, |slots, e| slots | 1 << self.slot(e))
    }

    /// Whether one of the `slots` (a mask) of the block at word `base` holds every bit of `mask`.
    ///
    /// The block's words are one array (one bounds check), tested in slot order with a copy of
    /// the loop unrolled for each slot count up to 16 (`G` up to 15): a load, a `not`, a `test`
    /// and a branch per word, and the slot's liveness only for a word that holds the bits. A
    /// new item (the common case of an insert) takes no branch; a word of a dead slot (the
    /// spare, which may hold a retired generation's bits until it is cleared) is skipped where
    /// it matches. Measured against testing every word without a branch (each word's match
    /// shifted into a mask, then `& slots`): 131 against 146 instructions per lookup at 7
    /// generations, 149 against 170 at 9 (callgrind, [the benchmarks
    /// notes](crate::docs::benchmarks#the-windowed-filter-one-line-against-8-filters)).
    #[inline(always)]
    pub(super) fn held(
        &self,
        base: usize,
        mask: u64,
        slots: u64,
        order: crate::sync::Ordering,
    ) -> bool {
        macro_rules! by_slots {
            ($($n:literal)*) => {
                match self.slots {
                    $($n => held_in::<$n>(self.bits.block(base), mask, slots, order),)*
                    _ => held_in_run(self.bits.run(base, self.slots as usize), mask, slots, order),
                }
            };
        }
        by_slots!(2 3 4 5 6 7 8 9 10 11 12 13 14 15 16)
    }

    /// The side work of an insert, for the few whose hash picks them: count the new item,
    /// clear a chunk of the spare, read the clock. Most inserts test three bits of the hash
    /// and return.
    #[inline(always)]
    pub(super) fn after_insert(&self, hash: Hash128, new: bool) {
        let tick = crate::hash::sample_bits(hash);
        let count_tick = new
            && matches!(self.rotation, Rotation::AfterInserts(_))
            && tick & ((1 << self.sample_shift) - 1) == 0;
        let clear_tick = (tick >> 16) & 63 == 0;
        let clock_tick = (tick >> 22) & 1023 == 0;
        if count_tick || clear_tick || clock_tick {
            self.side_work(count_tick, clear_tick, clock_tick);
        }
    }
}

/// [`held_in_run`] of `S` words, unrolled.
#[inline(always)]
fn held_in<const S: usize>(
    words: &[AtomicU64; S],
    mask: u64,
    slots: u64,
    order: crate::sync::Ordering,
) -> bool {
    held_in_run(words, mask, slots, order)
}

/// Whether one of `words` whose index is in `slots` holds every bit of `mask` (at most 64
/// words): the first such word ends the search.
#[inline(always)]
fn held_in_run(words: &[AtomicU64], mask: u64, slots: u64, order: crate::sync::Ordering) -> bool {
    for (i, word) in words.iter().enumerate() {
        if word.load(order) & mask == mask && slots >> i & 1 == 1 {
            return true;
        }
    }
    false
}
