//! `GrowingBloomFilter`: atomic Bloom filter layers, each `expansion` times larger than the one
//! before at a tighter rate, added without a lock when the newest is full (RedisBloom's scaling
//! filter, concurrent).

use core::fmt;
use core::hash::Hash;

mod file;

use super::atomic::{contains_at, or_at};
use super::info::{BloomInfo, LayerInfo, estimated_fpr, estimated_len};
use super::probe::{block, word_probe};
use super::{BloomBuilder, Probe};
use crate::batch::{
    GROUP, GROUP_MIN_BYTES, append_results, for_each_group, try_append_results, try_for_each_group,
};
use crate::bits::{AtomicBits, CachePadded, LINE_WORDS};
use crate::hash::{Hash128, ItemHasher, StableHasher, sample_bits};
use crate::sizing::{
    BlockedSizing, DEFAULT_EXPANSION, DEFAULT_TIGHTENING, GrowingSizing, OVERSHOOT_DIVISOR,
};
use crate::sync::Ordering::{self, Relaxed, SeqCst};
use crate::sync::{Arc, ArcCell, AtomicU64, backoff, sc_order};
use crate::{Error, Layout};

/// The state word's low 32 bits: the number of layers published.
const LAYERS: u64 = u32::MAX as u64;
/// A thread has claimed the growth and is allocating the next layer.
const CLAIMED: u64 = 1 << 32;
/// The newest layer is full and no growth is under way: a non-scaling filter that is full, or
/// a growth that failed (the next insert of a new item tries again, and reports the error).
const STUCK: u64 = 1 << 33;

/// A Bloom filter that grows: when its newest layer holds its capacity of new items, it adds a
/// layer `expansion` times larger at a tighter false-positive rate, so the rate of the whole
/// filter stays under its target however many items arrive. RedisBloom's scaling filter
/// (`BF.RESERVE key error capacity EXPANSION n`), concurrent: any number of threads insert and
/// query through `&self`, and growth takes no lock.
///
/// - **Layers**: layer `i` holds `c0 · e^i` new items at rate `P · (1 - t) · t^i`, for the
///   initial capacity `c0`, the expansion `e` (default 2), the target `P` and the tightening
///   ratio `t` (default 0.8). The rates add up to less than `P` for any number of layers
///   ([derivation, and why 0.8](crate::docs::sizing#growing-filters)).
/// - **Lookups** check the layers newest-first; an insert checks them all, then sets the
///   item's bits in the newest. With `L` layers a new item costs `L` cache lines (after `100 ·
///   c0` items, `L = 7`).
/// - **Growth**: the insert whose count of new items reaches the newest layer's capacity
///   claims the growth (one compare-and-swap: exactly one thread), allocates and zeroes the
///   next layer and publishes it. Meanwhile the other threads go on inserting into the full
///   layer, up to 1/64 of its capacity more (each layer is sized with that room); an insert
///   that would pass it waits for the new layer. Lookups never wait.
/// - **Errors instead of an overfull filter**: [`insert`](Self::insert) returns a `Result`.
///   [`Error::Full`] from a [`scaling(false)`](BloomBuilder::scaling) filter that holds its
///   capacity; [`Error::AllocationFailed`] when the next layer cannot be allocated;
///   [`Error::GrowingFprBelowLayoutLimit`] or [`Error::TooLarge`] at the end of the
///   schedule. The item is then not inserted (an `Err` means nothing happened), and items
///   already in the filter are still answered `Ok(false)`.
///
/// # Guarantees
///
/// - **No false negatives**, across growths: once `insert(x)` returned `Ok`, every
///   `contains(x)` that happens after it returns `true` (the item's bits are in a layer that
///   every later list of layers holds).
/// - **Racing inserts of one new item**: at least one returns `Ok(true)`; with
///   [`Layout::Word`](crate::Layout::Word) (the default) exactly one does, also when a growth lands in the middle
///   (the insert re-checks the number of layers after its write, and follows a growth into
///   the new layer: [the protocol](crate::docs::concurrency#growingbloomfilter)).
/// - **False positives** at a rate under the target `fpr` however many items arrive (the
///   layers' rates add up to less), as long as the schedule of layers does not end.
/// - **Progress**: `contains` is lock-free: it reads the list of layers through arc-swap,
///   whose load is lock-free (and wait-free nearly always), then each layer's block with plain
///   loads. `insert` is lock-free except in one corner: an insert that finds the newest layer
///   1/64 past its capacity while another thread allocates the next waits for that thread. A
///   growth allocates.
/// - **Never forgets**; an `Err` from `insert` means the item was not inserted.
///
/// This type does not implement [`DedupFilter`](crate::DedupFilter): its `insert` can fail,
/// and the trait's `bool` could only hide that (by dropping the item, or by overfilling).
///
/// # Examples
///
/// ```
/// use seen::GrowingBloomFilter;
///
/// let seen = GrowingBloomFilter::with_capacity(1000, 0.01)?; // grows past 1000
/// let mut new = 0;
/// for i in 0..100_000u64 {
///     new += usize::from(seen.insert(&i)?); // `?`: a growth can fail; here it never does
/// }
/// assert!(new > 99_000); // the others were false positives
/// assert!(seen.contains(&42u64));
/// assert_eq!(seen.layers(), 7); // 1000 + 2000 + ... + 64,000 ≥ 100,000
/// let info = seen.info();
/// assert!(info.estimated_fpr < 0.01);
/// println!("{info}"); // one line for the logs
/// # Ok::<(), seen::Error>(())
/// ```
///
/// A non-scaling filter refuses what it cannot hold:
///
/// ```
/// use seen::{Error, GrowingBloomFilter};
/// let fixed = GrowingBloomFilter::builder(100).scaling(false).build()?;
/// let refused = (0..1000u64).filter(|i| fixed.insert(i) == Err(Error::Full { capacity: 100 }));
/// assert!(refused.count() > 800);
/// assert!(fixed.info().estimated_fpr < 0.01);
/// # Ok::<(), seen::Error>(())
/// ```
pub struct GrowingBloomFilter<H = StableHasher> {
    /// The layers, oldest first. A layer is in the list before [`state`](Self::state) counts
    /// it; the list only ever grows.
    layers: ArcCell<Layers>,
    /// The number of layers published (low 32 bits), [`CLAIMED`], [`STUCK`]. Read by every
    /// insert twice; written once per growth.
    state: CachePadded<AtomicU64>,
    growth: GrowingSizing,
    hasher: H,
}

/// The list of layers: one immutable value per growth, swapped in whole.
struct Layers(Vec<Arc<Layer>>);

/// One layer: an atomic Bloom filter's bits, and its count of new items.
struct Layer {
    bits: AtomicBits,
    /// What the bits were sized for: the capacity plus 1/32 of room.
    sizing: BlockedSizing,
    /// New items after which the filter grows.
    capacity: u64,
    /// An insert waits rather than pass this many new items while the next layer is being
    /// allocated: the capacity plus 1/64 of it plus 1.
    limit: u64,
    /// A new item whose [`sample_bits`] have this many low zero bits adds `1 << sample_shift`
    /// to `counted`: exact below 2^17 items (and always in a non-scaling filter), within 3/256
    /// at three standard deviations above.
    sample_shift: u32,
    counted: CachePadded<AtomicU64>,
}

/// What one attempt of an insert came to.
enum Step {
    /// Inserted (or found): the result.
    Done(bool),
    /// Inserted as new into layer `n - 1`, whose count reached its capacity: start a growth.
    Crossed(usize),
    /// The newest layer is full and no growth is under way.
    Stuck,
    /// The newest layer is at its limit and another thread is allocating the next.
    Wait,
}

impl Layer {
    fn new(growth: &GrowingSizing, i: u32) -> Result<Self, Error> {
        let sizing = growth.layer(i)?;
        let capacity = growth.layer_capacity(i)?;
        #[cfg(all(test, seen_loom))]
        if twin!(FailGrowth) || twin!(FailKeepingClaim) {
            return Err(Error::AllocationFailed {
                bytes: sizing.bytes(),
            });
        }
        let bits = AtomicBits::new(sizing.lines())?;
        #[cfg(all(test, seen_loom))]
        if twin!(PublishBeforeInit) {
            // Memory that held another layer: every bit set until it is zeroed.
            for i in 0..bits.words() {
                bits.word(i).store(u64::MAX, Relaxed);
            }
        }
        Ok(Self::from_bits(bits, sizing, capacity, 0, growth.scaling))
    }

    /// A layer of these bits, sized by `sizing` for `capacity` new items, `counted` so far.
    /// A non-scaling filter's layer counts exactly (it refuses items at exactly its
    /// capacity); a scaling one's samples above 2^17 items.
    fn from_bits(
        bits: AtomicBits,
        sizing: BlockedSizing,
        capacity: u64,
        counted: u64,
        sampled: bool,
    ) -> Self {
        Self {
            bits,
            sizing,
            capacity,
            limit: capacity.saturating_add(capacity / OVERSHOOT_DIVISOR + 1),
            sample_shift: if sampled {
                (capacity >> 16).max(1).ilog2()
            } else {
                0
            },
            counted: CachePadded::new(AtomicU64::new(counted)),
        }
    }

    #[inline(always)]
    fn contains(&self, hash: Hash128, order: Ordering) -> bool {
        contains_at(&self.bits, &Probe::new(hash, &self.sizing), order)
    }

    /// Counts a new item (if its hash samples it); whether the count reached the capacity.
    #[inline(always)]
    fn count(&self, hash: Hash128) -> bool {
        if self.sample_shift > 0 && sample_bits(hash) & ((1 << self.sample_shift) - 1) != 0 {
            return false;
        }
        let step = 1 << self.sample_shift;
        self.counted.fetch_add(step, Relaxed).saturating_add(step) >= self.capacity
    }

    fn info(&self) -> LayerInfo {
        LayerInfo {
            capacity: self.capacity,
            fpr: self.sizing.fpr,
            bytes: self.sizing.bytes(),
            hashes: self.sizing.hashes,
            sampled_new_items: self.counted.load(Relaxed),
            sample_step: 1 << self.sample_shift,
            estimated_len: estimated_len(self.bits.iter_words(), &self.sizing),
            estimated_fpr: estimated_fpr(self.bits.iter_words(), &self.sizing),
        }
    }
}

/// The bytes of bits of `layers`.
fn bytes_of(layers: &[Arc<Layer>]) -> u64 {
    layers.iter().map(|layer| layer.sizing.bytes()).sum()
}

/// Loads the first word of each hash's block in every one of `layers`, newest first, back to
/// back, and drops the values: the batched insert's and lookup's read-ahead. Reads only; the
/// inserts and lookups that follow decide everything.
#[inline]
fn touch_blocks(layers: &[Arc<Layer>], group: &[Hash128]) {
    let mut any = 0;
    for layer in layers.iter().rev() {
        for &hash in group {
            any ^= layer
                .bits
                .word(first_word(hash, &layer.sizing))
                .load(Relaxed);
        }
    }
    core::hint::black_box(any);
}

/// The index of the first word of `hash`'s block in a layer of this sizing.
#[inline(always)]
fn first_word(hash: Hash128, sizing: &BlockedSizing) -> usize {
    match sizing.layout {
        Layout::Word => block(hash, sizing),
        Layout::Line => block(hash, sizing) * LINE_WORDS,
    }
}

/// Layers in the first round of [`words_in_rounds`]: the two newest, which hold most of the
/// items at the default expansion (2): after 100M items in 7 layers, 69% of them (37% in the
/// newest, 32% in the one before; three quarters once the newest is full), so a lookup of a
/// present key drawn uniformly is answered there about 7 times in 10, where the newest layer
/// alone answers fewer than 4 in 10 (1.1-1.15x faster with two than with one, in paired runs;
/// keys of the oldest layer and absent keys read every layer either way, in two rounds).
const FIRST_ROUND_LAYERS: usize = 2;
/// Layers per round of [`words_in_rounds`] after the first.
const ROUND_LAYERS: usize = 8;
// A round's words are kept in `ROUND_LAYERS` rows: a larger first round would leave layers out.
const _: () = assert!(FIRST_ROUND_LAYERS <= ROUND_LAYERS);
// A group's open items are the bits of a `u32`: at 32, `1 << len` would wrap and report every
// item present.
const _: () = assert!(GROUP < 32);

/// The batched lookup of a group in word-layout `layers`: rounds of layers, newest first (the
/// [`FIRST_ROUND_LAYERS`] newest, which hold most items, then up to [`ROUND_LAYERS`] older
/// ones at a time).
/// A round loads, back to back, the word of every item not found yet in each of its layers
/// (their misses overlap), then tests those very values: each word is loaded once and its
/// block computed once (a second pass that loaded them again, from the cache, and recomputed
/// the blocks cost 1.15-1.4x this at 100M items, 7 layers). `Relaxed` loads, as
/// [`held`]: each answer is the one a lookup at the moment of its loads would give.
#[inline]
fn words_in_rounds(layers: &[Arc<Layer>], group: &[Hash128], out: &mut impl FnMut(bool)) {
    debug_assert!(group.len() <= GROUP);
    let mut open = (1u32 << group.len()) - 1;
    let mut words = [[0u64; GROUP]; ROUND_LAYERS];
    let (mut rest, mut size) = (layers, FIRST_ROUND_LAYERS);
    while open != 0 && !rest.is_empty() {
        let (older, round) = rest.split_at(rest.len() - size.min(rest.len()));
        for (row, layer) in words.iter_mut().zip(round.iter().rev()) {
            for (i, (word, &hash)) in row.iter_mut().zip(group).enumerate() {
                if open & 1 << i != 0 {
                    *word = layer.bits.word(block(hash, &layer.sizing)).load(Relaxed);
                }
            }
        }
        for (i, &hash) in group.iter().enumerate() {
            if open & 1 << i != 0
                && words.iter().zip(round.iter().rev()).any(|(row, layer)| {
                    let mask = word_probe(hash, &layer.sizing).1;
                    row[i] & mask == mask
                })
            {
                open &= !(1 << i);
            }
        }
        (rest, size) = (older, ROUND_LAYERS);
    }
    let found = !open;
    for i in 0..group.len() {
        out(found & 1 << i != 0);
    }
}

/// Whether one of `layers` holds every bit of `hash`, newest first.
#[inline(always)]
fn held(layers: &[Arc<Layer>], hash: Hash128, order: Ordering) -> bool {
    layers.iter().rev().any(|layer| layer.contains(hash, order))
}

impl GrowingBloomFilter {
    /// A scaling filter whose first layer holds `initial_capacity` distinct items, with a
    /// false-positive rate under `fpr` however much it grows; the defaults otherwise
    /// (expansion 2, tightening ratio 0.8, [`Layout::Word`](crate::Layout::Word), [`StableHasher`]).
    ///
    /// # Errors
    ///
    /// As [`GrowingSizing::new`] (the first layer's rate is `fpr / 5`: the word layout needs
    /// `fpr` ≥ 3.2e-5, and below it the error says so), and [`Error::AllocationFailed`].
    ///
    /// # Examples
    ///
    /// ```
    /// use seen::{Error, GrowingBloomFilter};
    /// let e = GrowingBloomFilter::with_capacity(1000, 1e-7).unwrap_err();
    /// assert!(matches!(e, Error::GrowingFprBelowLayoutLimit { fpr: 1e-7, layer: 0, .. }));
    /// assert_eq!(
    ///     e.to_string(),
    ///     "false-positive rate 1e-7 is too low for a growing filter of the Word layout with \
    ///      tightening ratio 0.8: its first layer gets 1e-7 · (1 - 0.8) = 2e-8, below the \
    ///      layout's limit of 6.4e-6, so the lowest rate it takes is 3.2e-5; the Line layout \
    ///      reaches 1e-7"
    /// );
    /// # Ok::<(), seen::Error>(())
    /// ```
    pub fn with_capacity(initial_capacity: u64, fpr: f64) -> Result<Self, Error> {
        Self::builder(initial_capacity).fpr(fpr).build()
    }

    /// A builder for a filter whose first layer holds `initial_capacity` items, to choose the
    /// rate, layout, hasher, [`expansion`](BloomBuilder::expansion),
    /// [`tightening`](BloomBuilder::tightening) ratio, or
    /// [`scaling(false)`](BloomBuilder::scaling) mode.
    ///
    /// # Examples
    ///
    /// ```
    /// use seen::{GrowingBloomFilter, Layout};
    /// let f = GrowingBloomFilter::builder(1_000_000)
    ///     .fpr(0.001)
    ///     .layout(Layout::Line)
    ///     .expansion(4)
    ///     .tightening(0.9)
    ///     .build()?;
    /// assert_eq!(f.sizing().layer_capacity(1)?, 4_000_000);
    /// # Ok::<(), seen::Error>(())
    /// ```
    pub fn builder(initial_capacity: u64) -> BloomBuilder<GrowingOptions> {
        BloomBuilder::new(initial_capacity, GrowingOptions::default())
    }
}

impl<H: ItemHasher> GrowingBloomFilter<H> {
    /// Inserts `item`: `Ok(true)` if it was certainly new (no layer held it), `Ok(false)` if it
    /// possibly was (seen, or a false positive).
    ///
    /// # Errors
    ///
    /// Only for a new item that the filter cannot take; it is then **not** inserted:
    /// [`Error::Full`] (a [`scaling(false)`](BloomBuilder::scaling) filter at capacity),
    /// [`Error::AllocationFailed`] (the next layer did not fit in memory; the next insert of a
    /// new item tries again), [`Error::GrowingFprBelowLayoutLimit`] or [`Error::TooLarge`] (the
    /// end of the schedule: [`GrowingSizing::layer`]).
    ///
    /// # Examples
    ///
    /// ```
    /// let f = seen::GrowingBloomFilter::with_capacity(10, 0.01)?;
    /// assert_eq!(f.insert("a"), Ok(true));
    /// assert_eq!(f.insert("a"), Ok(false));
    /// # Ok::<(), seen::Error>(())
    /// ```
    #[inline]
    pub fn insert<T: Hash + ?Sized>(&self, item: &T) -> Result<bool, Error> {
        self.insert_hash(self.hasher.hash_item(item))
    }

    /// Whether `item` is possibly in the filter: `false` means certainly never inserted.
    /// Checks the layers newest-first; never writes, never waits.
    #[inline]
    pub fn contains<T: Hash + ?Sized>(&self, item: &T) -> bool {
        self.contains_hash(self.hasher.hash_item(item))
    }

    /// [`contains`](Self::contains) of an already computed hash (from
    /// [`hasher`](Self::hasher)).
    #[inline]
    pub fn contains_hash(&self, hash: Hash128) -> bool {
        self.layers.read(|layers| held(&layers.0, hash, Relaxed))
    }

    /// [`insert`](Self::insert) of an already computed hash (from [`hasher`](Self::hasher)).
    ///
    /// # Errors
    ///
    /// As [`insert`](Self::insert).
    pub fn insert_hash(&self, hash: Hash128) -> Result<bool, Error> {
        // Every access to the state word and the bits is `SeqCst` (on x86-64 the same
        // instructions as `Relaxed`): exactly-once across a growth is a store-buffering pattern,
        // and its proof uses the single total order (docs/concurrency.md, GrowingBloomFilter).
        // `twin!(Name)` here and below: a broken variant for the loom models; the literal
        // `false` in every other build.
        let mut round = 0;
        loop {
            let state = self.state.load(SeqCst);
            sc_order();
            match self.layers.read(|layers| self.attempt(layers, state, hash)) {
                Step::Done(new) => return Ok(new),
                Step::Crossed(layers) => {
                    self.start_growth(layers);
                    return Ok(true);
                }
                Step::Stuck => self.grow_stuck(state)?,
                Step::Wait => {
                    backoff(round);
                    round = round.saturating_add(1);
                }
            }
        }
    }

    /// One attempt of an insert against the layers of `state`.
    #[inline(always)]
    fn attempt(&self, layers: &Layers, state: u64, hash: Hash128) -> Step {
        let n = (state & LAYERS) as usize;
        let list = &layers.0[..n];
        if held(list, hash, SeqCst) {
            return Step::Done(false);
        }
        if state & (STUCK | CLAIMED) != 0 {
            if state & STUCK != 0 {
                return Step::Stuck;
            }
            if list[n - 1].counted.load(Relaxed) >= list[n - 1].limit {
                return Step::Wait;
            }
        }
        self.insert_from(layers, n, hash)
    }

    /// Sets the item's bits in the newest of the first `n` layers, then re-checks the number
    /// of layers: if layers were published meanwhile, an insert of the same item that read
    /// them may have missed these bits, so the item is looked up in the layers published
    /// meanwhile and written again into the newest (the result is `true` only if every write
    /// was new and no such layer held it).
    fn insert_from(&self, layers: &Layers, n: usize, hash: Hash128) -> Step {
        let layer = &layers.0[n - 1];
        failpoint!("growing.insert.writing");
        // The caller's lookup just found a bit of the item unset (in this layer, or in none
        // it read): no second test before the writes.
        let probe = Probe::new(hash, &layer.sizing);
        #[cfg(all(test, seen_loom))]
        let written = if twin!(RacyOr) {
            super::atomic::racy_or_at(&layer.bits, &probe, SeqCst)
        } else {
            or_at(&layer.bits, &probe, SeqCst)
        };
        #[cfg(not(all(test, seen_loom)))]
        let written = or_at(&layer.bits, &probe, SeqCst);
        if !written {
            return Step::Done(false);
        }
        failpoint!("growing.insert.written");
        sc_order();
        let now = (self.state.load(SeqCst) & LAYERS) as usize;
        if now == n || twin!(IgnoreGrowth) {
            return if layer.count(hash) {
                Step::Crossed(n)
            } else {
                Step::Done(true)
            };
        }
        sc_order();
        self.layers.read(|newer| {
            debug_assert!(newer.0.len() >= now);
            if held(&newer.0[n..now - 1], hash, SeqCst) {
                Step::Done(false)
            } else {
                self.insert_from(newer, now, hash)
            }
        })
    }

    /// After the count of layer `n - 1` reached its capacity: claims the growth (a scaling
    /// filter) or marks the filter full (a non-scaling one), if no other thread did.
    #[cold]
    #[inline(never)]
    fn start_growth(&self, n: usize) {
        let scaling = self.growth.scaling;
        let to = n as u64 | if scaling { CLAIMED } else { STUCK };
        if self
            .state
            .compare_exchange(n as u64, to, SeqCst, Relaxed)
            .is_ok()
            && scaling
        {
            // A failure leaves the filter stuck: the next insert of a new item retries and
            // returns the error (this insert's item is in).
            let _ = self.grow(n);
        }
    }

    /// An insert of a new item found the newest layer full and no growth under way.
    #[cold]
    #[inline(never)]
    fn grow_stuck(&self, state: u64) -> Result<(), Error> {
        if !self.growth.scaling {
            return Err(Error::Full {
                capacity: self.growth.initial_capacity,
            });
        }
        let n = (state & LAYERS) as usize;
        let claimed = (state & LAYERS) | CLAIMED;
        match self.state.compare_exchange(state, claimed, SeqCst, Relaxed) {
            Ok(_) => self.grow(n),
            // Another thread claimed it, or published: try the insert again.
            Err(_) => Ok(()),
        }
    }

    /// The claimer's growth from `n` layers: allocate and zero layer `n`, publish the list
    /// with it, then count it in the state word (which clears [`CLAIMED`]). On failure, the
    /// state becomes [`STUCK`].
    fn grow(&self, n: usize) -> Result<(), Error> {
        let layer = match Layer::new(&self.growth, n as u32) {
            Ok(layer) => Arc::new(layer),
            Err(e) => {
                if !twin!(FailKeepingClaim) {
                    self.state.store(n as u64 | STUCK, SeqCst);
                }
                return Err(e);
            }
        };
        let mut list = self.layers.read(|layers| layers.0[..n].to_vec());
        list.push(Arc::clone(&layer));
        self.layers.store(Arc::new(Layers(list)));
        sc_order();
        self.state.store(n as u64 + 1, SeqCst);
        #[cfg(all(test, seen_loom))]
        if twin!(PublishBeforeInit) {
            for i in 0..layer.bits.words() {
                layer.bits.word(i).store(0, Relaxed);
            }
        }
        Ok(())
    }

    /// Inserts every item, in order, and appends to `new`, for each, what
    /// [`insert`](Self::insert) would have returned; returns how many were new. RedisBloom's
    /// `BF.MADD` on a scaling filter.
    ///
    /// Item by item this is `insert`, with its guarantees: an item repeated within the batch
    /// is new only the first time, and a growth (set off by the batch's own items or by
    /// another thread's) lands between two items, as in a loop of `insert`. Faster than that
    /// loop on a filter larger than the caches: it hashes a group of items and reads their
    /// block in every layer before inserting them one by one, so that the group's cache misses
    /// (one per layer per item, 7 layers after 100 times the initial capacity) overlap
    /// ([measured](crate::docs::benchmarks)).
    ///
    /// # Errors
    ///
    /// As [`insert`](Self::insert), at the first item that fails: that item and every item
    /// after it are not inserted, and `new` holds the results of the items before it (the
    /// failed item is the one at index `new.len()` minus the length `new` had before the
    /// call). The iterator may have been advanced past the failed item, by up to 15 items (a
    /// group's items are hashed together). Retrying the rest is safe: an item inserted twice
    /// is new once.
    ///
    /// # Examples
    ///
    /// ```
    /// use seen::{Error, GrowingBloomFilter};
    /// let f = GrowingBloomFilter::with_capacity(1000, 0.01)?;
    /// let mut new = Vec::new();
    /// assert_eq!(f.insert_many(["a", "b", "a"], &mut new)?, 2);
    /// assert_eq!(new, [true, true, false]);
    ///
    /// // A non-scaling filter stops at the first new item it cannot take.
    /// let fixed = GrowingBloomFilter::builder(2).scaling(false).build()?;
    /// new.clear();
    /// let refused = fixed.insert_many(&[1u64, 2, 1, 3, 4], &mut new);
    /// assert_eq!(refused, Err(Error::Full { capacity: 2 }));
    /// assert_eq!(new, [true, true, false]); // 3 was refused, 4 not tried
    /// # Ok::<(), seen::Error>(())
    /// ```
    pub fn insert_many<'a, T, I>(&self, items: I, new: &mut Vec<bool>) -> Result<usize, Error>
    where
        T: Hash + ?Sized + 'a,
        I: IntoIterator<Item = &'a T>,
    {
        self.insert_many_hashes(
            items.into_iter().map(|item| self.hasher.hash_item(item)),
            new,
        )
    }

    /// [`insert_many`](Self::insert_many) of already computed hashes (from
    /// [`hasher`](Self::hasher)). The iterator is consumed in groups, so a lazy
    /// `map(|key| hasher.hash_bytes(key))` keeps the hashing inside the batch.
    ///
    /// # Errors
    ///
    /// As [`insert_many`](Self::insert_many).
    pub fn insert_many_hashes<I>(&self, hashes: I, new: &mut Vec<bool>) -> Result<usize, Error>
    where
        I: IntoIterator<Item = Hash128>,
    {
        try_append_results(new, hashes.into_iter(), |hashes, new| {
            self.insert_each(hashes, |result| new.push(result))
        })
    }

    crate::forward::batch_of_items! {
    contains_many
    /// RedisBloom's `BF.MEXISTS`. Never writes, never waits.
    ///
    /// Faster than a loop of `contains` on a filter larger than the caches: for a group of
    /// items it reads the list of layers once, then, newest layer first, reads the blocks of
    /// the items not found yet back to back (their cache misses overlap) and tests them. Each
    /// answer is what `contains` would give at some moment during the call: a group's lookups
    /// use the layers published when the group started, after its items were taken from the
    /// iterator.
    ///
    /// # Examples
    ///
    /// ```
    /// let f = seen::GrowingBloomFilter::with_capacity(10, 0.01)?;
    /// let mut new = Vec::new();
    /// f.insert_many(&(0..100u64).collect::<Vec<_>>(), &mut new)?; // grows to 4 layers
    /// let mut hits = Vec::new();
    /// assert_eq!(f.contains_many(&[5u64, 500, 99], &mut hits), 2);
    /// assert_eq!(hits, [true, false, true]); // 500: false w.p. 99%
    /// # Ok::<(), seen::Error>(())
    /// ```
    }

    /// [`contains_many`](Self::contains_many) of already computed hashes (from
    /// [`hasher`](Self::hasher)).
    pub fn contains_many_hashes<I>(&self, hashes: I, hits: &mut Vec<bool>) -> usize
    where
        I: IntoIterator<Item = Hash128>,
    {
        append_results(hits, hashes.into_iter(), |hashes, out| {
            self.contains_each(hashes, |hit| out.push(hit));
        })
    }

    /// The batched insert: for each group of [`GROUP`] hashes, read the list of layers and
    /// load each item's block in every layer, newest first (loads whose values are dropped:
    /// they only bring the lines in, so that the group's misses are in flight at once), then
    /// [`insert_hash`](Self::insert_hash) each item, in order. The inserts are the single
    /// insert, unchanged: the protocol, its orderings and its results are those of a loop of
    /// `insert_hash`, and a growth during the group only means that the new layer was not
    /// read ahead. Layers totalling less than [`GROUP_MIN_BYTES`] are mostly in cache: there
    /// the group is not read ahead.
    #[inline]
    fn insert_each(
        &self,
        hashes: impl Iterator<Item = Hash128>,
        mut out: impl FnMut(bool),
    ) -> Result<(), Error> {
        try_for_each_group(hashes, |group| {
            self.layers.read(|layers| {
                if bytes_of(&layers.0) >= GROUP_MIN_BYTES {
                    touch_blocks(&layers.0, group);
                }
            });
            for &hash in group {
                out(self.insert_hash(hash)?);
            }
            Ok(())
        })
    }

    /// The batched lookup: for each group, one read of the list of layers (as
    /// [`contains_hash`](Self::contains_hash) does per item; the group's items were all taken
    /// from the iterator before it, so whatever the caller's iterator synchronized with is in
    /// it), then rounds of read-ahead and lookups in that list (`Relaxed` loads, as
    /// `contains_hash`): every item's block in the newest layers, read ahead then tested; then,
    /// for the items those do not hold, their blocks in the older layers, read ahead back to
    /// back (not layer after layer, where each layer's addresses would wait for the previous
    /// layer's answers: 0.8x a loop of `contains` for misses at 10M items, 7 layers), then
    /// tested newest first, to the first layer that holds the item. The word layout keeps the
    /// words it read ahead and tests them ([`words_in_rounds`]: the two newest layers, then up
    /// to [`ROUND_LAYERS`] older ones a round); the line layout reads the newest layer alone
    /// first, then every older one, and loads its lines again to test them.
    #[inline]
    fn contains_each(&self, hashes: impl Iterator<Item = Hash128>, mut out: impl FnMut(bool)) {
        for_each_group(hashes, |group| {
            self.layers.read(|layers| {
                let list = &layers.0;
                if bytes_of(list) < GROUP_MIN_BYTES {
                    return group
                        .iter()
                        .for_each(|&hash| out(held(list, hash, Relaxed)));
                }
                if list.iter().all(|layer| layer.sizing.layout == Layout::Word) {
                    return words_in_rounds(list, group, &mut out);
                }
                let Some((newest, older)) = list.split_last() else {
                    unreachable!("a filter has a layer from the start")
                };
                // The line layout. The newest layer (the largest: it holds the most items) for
                // every item, then every older layer for the items it does not hold: two rounds
                // of overlapped misses, and no more lines for a hit in the newest layer.
                touch_blocks(core::slice::from_ref(newest), group);
                let mut in_newest = 0u32;
                for (i, &hash) in group.iter().enumerate() {
                    in_newest |= u32::from(newest.contains(hash, Relaxed)) << i;
                }
                let mut any = 0;
                for layer in older.iter().rev() {
                    for (i, &hash) in group.iter().enumerate() {
                        if in_newest & 1 << i == 0 {
                            any ^= layer
                                .bits
                                .word(first_word(hash, &layer.sizing))
                                .load(Relaxed);
                        }
                    }
                }
                core::hint::black_box(any);
                for (i, &hash) in group.iter().enumerate() {
                    out(in_newest & 1 << i != 0 || held(older, hash, Relaxed));
                }
            });
        });
    }

    /// The number of layers: 1 when built, one more at each growth.
    pub fn layers(&self) -> usize {
        (self.state.load(Relaxed) & LAYERS) as usize
    }

    /// The first layer's capacity, `c0`.
    pub fn capacity(&self) -> u64 {
        self.growth.initial_capacity
    }

    /// The target false-positive rate of the whole filter.
    pub fn fpr(&self) -> f64 {
        self.growth.fpr
    }

    /// The schedule of layers: each one's capacity, rate and size
    /// ([`GrowingSizing::layer`]).
    pub fn sizing(&self) -> GrowingSizing {
        self.growth
    }

    /// `false` for a filter built with [`scaling(false)`](BloomBuilder::scaling).
    pub fn is_scaling(&self) -> bool {
        self.growth.scaling
    }

    /// The bytes of bits of every layer.
    pub fn memory_bytes(&self) -> u64 {
        self.layers
            .read(|layers| layers.0.iter().map(|layer| layer.sizing.bytes()).sum())
    }

    /// The hasher, to precompute hashes for [`insert_hash`](Self::insert_hash).
    pub fn hasher(&self) -> &H {
        &self.hasher
    }

    /// Each layer's capacity, size, count and estimated fill, oldest first. Reads every
    /// word: O(m).
    ///
    /// # Examples
    ///
    /// ```
    /// let f = seen::GrowingBloomFilter::with_capacity(1000, 0.01)?;
    /// for i in 0..2500u64 {
    ///     f.insert(&i)?;
    /// }
    /// let layers = f.layer_info();
    /// assert_eq!(layers.len(), 2);
    /// assert_eq!((layers[0].capacity, layers[1].capacity), (1000, 2000));
    /// assert_eq!(layers[0].sample_step, 1); // layers under 2^17 items count exactly
    /// assert!(layers[0].sampled_new_items >= 1000 && layers[1].fpr < layers[0].fpr);
    /// # Ok::<(), seen::Error>(())
    /// ```
    pub fn layer_info(&self) -> Vec<LayerInfo> {
        self.layers
            .read(|layers| layers.0.iter().map(|layer| layer.info()).collect())
    }

    /// What the filter is and holds: layers, capacity, bytes, new items (a sampled count), estimated
    /// distinct items and false-positive rate (`1 - Π (1 - f_i)` over the layers' rates),
    /// expansion. RedisBloom's `BF.INFO` and `BF.CARD`. Reads every word: O(m).
    pub fn info(&self) -> BloomInfo {
        let layers = self.layer_info();
        let sum = |f: fn(&LayerInfo) -> u64| layers.iter().map(f).fold(0u64, u64::saturating_add);
        BloomInfo {
            structure: "GrowingBloomFilter",
            layout: self.growth.layout,
            capacity: sum(|l| l.capacity),
            fpr: self.growth.fpr,
            bytes: sum(|l| l.bytes),
            layers: layers.len() as u32,
            sampled_new_items: Some(sum(|l| l.sampled_new_items)),
            estimated_len: sum(|l| l.estimated_len),
            // 1 - Π (1 - f_i) as -expm1(Σ ln(1 - f_i)): the subtraction from 1 would round
            // the rate of a lightly filled filter (1e-20, say) to 0.
            estimated_fpr: -layers
                .iter()
                .map(|l| (-l.estimated_fpr).ln_1p())
                .sum::<f64>()
                .exp_m1(),
            expansion: self.growth.scaling.then_some(self.growth.expansion),
        }
    }
}

impl<H> fmt::Debug for GrowingBloomFilter<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GrowingBloomFilter")
            .field("sizing", &self.growth)
            .field("layers", &(self.state.load(Relaxed) & LAYERS))
            .finish_non_exhaustive()
    }
}

/// The [`GrowingBloomFilter`]'s options: expansion, tightening ratio, scaling.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GrowingOptions {
    expansion: u32,
    tightening: f64,
    scaling: bool,
}

impl GrowingOptions {
    /// Each layer holds this many times the items of the one before.
    pub fn expansion(&self) -> u32 {
        self.expansion
    }

    /// Each layer's rate is this fraction of the one before.
    pub fn tightening(&self) -> f64 {
        self.tightening
    }

    /// `false` once [`scaling(false)`](BloomBuilder::scaling) was set.
    pub fn is_scaling(&self) -> bool {
        self.scaling
    }
}

impl Default for GrowingOptions {
    /// Expansion 2, tightening ratio 0.8, scaling.
    fn default() -> Self {
        Self {
            expansion: DEFAULT_EXPANSION,
            tightening: DEFAULT_TIGHTENING,
            scaling: true,
        }
    }
}

impl<H: ItemHasher> BloomBuilder<GrowingOptions, H> {
    /// Each new layer holds `expansion` times the items of the one before (default 2;
    /// RedisBloom's `EXPANSION`). 1 adds layers of one size: memory grows in small steps,
    /// lookups get slower faster.
    pub fn expansion(mut self, expansion: u32) -> Self {
        self.options_mut().expansion = expansion;
        self
    }

    /// Each new layer's false-positive rate is `tightening` times the one before, in (0, 1)
    /// (default 0.8: RedisBloom uses 0.5, growable-bloom-filter 0.85;
    /// [the trade-off](crate::docs::sizing#growing-filters)).
    pub fn tightening(mut self, tightening: f64) -> Self {
        self.options_mut().tightening = tightening;
        self
    }

    /// `false`: never grow. The filter is its first layer, and an insert of a new item once it
    /// holds its capacity returns [`Error::Full`] (RedisBloom's `NONSCALING`). The first layer
    /// then gets the whole target rate, not `fpr · (1 - tightening)`. `true` is the default.
    pub fn scaling(mut self, scaling: bool) -> Self {
        self.options_mut().scaling = scaling;
        self
    }

    /// Sizes and allocates the first layer.
    ///
    /// # Errors
    ///
    /// As [`GrowingBloomFilter::with_capacity`].
    pub fn build(self) -> Result<GrowingBloomFilter<H>, Error> {
        let (capacity, fpr, layout) = {
            let config = self.config();
            (config.capacity(), config.fpr(), config.layout())
        };
        let (hasher, options) = self.into_hasher_and_options();
        let growth = GrowingSizing::checked(
            capacity,
            fpr,
            layout,
            options.expansion,
            options.tightening,
            options.scaling,
        )?;
        let first = Layer::new(&growth, 0)?;
        Ok(GrowingBloomFilter {
            layers: ArcCell::new(Arc::new(Layers(vec![Arc::new(first)]))),
            state: CachePadded::new(AtomicU64::new(1)),
            growth,
            hasher,
        })
    }
}
