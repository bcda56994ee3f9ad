//! `WindowedBloomFilter`: the last `n` periods (days, hours, or `N` new items each) in one
//! lock-free filter, every generation of an item in one cache line, rotated in O(1).

use core::fmt;
use core::hash::Hash;
use core::time::Duration;

use super::BloomBuilder;
use super::info::{self, BloomInfo};
use super::probe::word_probe;
use crate::batch::{GROUP, GROUP_MIN_BYTES, append_results, for_each_group};
use crate::bits::{AtomicBits, LINE_WORDS, Padded};
use crate::clock::{Clock, SystemClock, TimeBase, as_nanos};
use crate::hash::{Hash128, ItemHasher, StableHasher};
use crate::sizing::{WindowSizing, window};
use crate::sync::Ordering::{AcqRel, Acquire, Relaxed, Release, SeqCst};
use crate::sync::{AtomicU64, TryMutex, sc_order};
use crate::{DedupFilter, Error, Layout};

mod file;

/// When a [`WindowedBloomFilter`] starts a new generation (and forgets its oldest).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Rotation {
    /// After this many new items (inserts that returned `true`) in the current generation:
    /// every generation then holds about that many, so the rate holds whatever the traffic.
    /// The default, with the capacity per period as the count. Counted exactly below 32,768
    /// items per generation; from there one new item in `2^s` (chosen by hash, with `2^s` at
    /// most the count over 16,384) adds `2^s`, so that two threads do not share a counter line
    /// on every insert: a generation then holds the count within about 2.3 % (three standard
    /// deviations).
    AfterInserts(u64),
    /// Every `period` of the [`Clock`], counted from when the filter was built.
    Every(Duration),
    /// Every `period` of the [`Clock`], at its multiples since the UNIX epoch: a period of a
    /// day rotates at midnight UTC, of an hour on the hour.
    EveryAligned(Duration),
    /// Only when [`rotate`](WindowedBloomFilter::rotate) is called.
    Manual,
}

/// The [`WindowedBloomFilter`]'s options: how many periods, when to rotate, and the clock.
#[derive(Clone, Debug)]
pub struct WindowOptions<C = SystemClock> {
    periods: u32,
    rotation: Option<Rotation>,
    clock: C,
    time_base: Option<TimeBase>,
}

impl Default for WindowOptions {
    /// 6 periods (7 live generations: with the spare, one cache line), rotation after
    /// `capacity` new items, the system clock.
    fn default() -> Self {
        Self {
            periods: 6,
            rotation: None,
            clock: SystemClock,
            time_base: None,
        }
    }
}

impl<C> WindowOptions<C> {
    /// The full periods every item is remembered for.
    pub fn periods(&self) -> u32 {
        self.periods
    }

    /// The rotation, if set (`None`: after `capacity` new items).
    pub fn rotation(&self) -> Option<Rotation> {
        self.rotation
    }

    /// The time base, if set (`None`: the clock's, by [`Clock::is_wall_clock`]).
    pub fn time_base(&self) -> Option<TimeBase> {
        self.time_base
    }
}

/// The most periods a window may have: [`MAX_GENERATIONS`](crate::sizing::MAX_GENERATIONS)
/// live generations, the current one and 62 full ones.
const MAX_PERIODS: u32 = crate::sizing::MAX_GENERATIONS - 1;

impl<C, H> BloomBuilder<WindowOptions<C>, H> {
    /// The window: remember every item for at least `periods` full periods after the insert
    /// that reported it new (0 to 62; default 6). The filter keeps `periods + 1` live
    /// generations, the current (partial) one and `periods` full ones, so an item is
    /// remembered for `periods` to `periods + 1` periods ([the type's
    /// guarantees](WindowedBloomFilter#guarantees) say exactly). Up to 6 periods the
    /// generations and the spare share one cache line; 7 to 14 take two.
    ///
    /// # Examples
    ///
    /// ```
    /// use seen::WindowedBloomFilter;
    /// use std::time::Duration;
    /// // A repeat up to 8 days after the first copy is caught, whenever in its day it came.
    /// let f = WindowedBloomFilter::builder(1_000_000)
    ///     .periods(8)
    ///     .rotate_every_aligned(Duration::from_secs(86_400))
    ///     .build()?;
    /// assert_eq!((f.periods(), f.generations()), (8, 9));
    /// assert_eq!(f.sizing().lines_per_lookup(), 2);
    /// # Ok::<(), seen::Error>(())
    /// ```
    pub fn periods(mut self, periods: u32) -> Self {
        self.options_mut().periods = periods;
        self
    }

    /// Rotate every `period` of the clock, counted from `build()`.
    pub fn rotate_every(mut self, period: Duration) -> Self {
        self.options_mut().rotation = Some(Rotation::Every(period));
        self
    }

    /// Rotate at the multiples of `period` since the UNIX epoch (midnight UTC for a day).
    pub fn rotate_every_aligned(mut self, period: Duration) -> Self {
        self.options_mut().rotation = Some(Rotation::EveryAligned(period));
        self
    }

    /// Rotate after `items` new items in the current generation (default: the capacity).
    pub fn rotate_after(mut self, items: u64) -> Self {
        self.options_mut().rotation = Some(Rotation::AfterInserts(items));
        self
    }

    /// Rotate only when [`rotate`](WindowedBloomFilter::rotate) is called.
    pub fn rotate_manually(mut self) -> Self {
        self.options_mut().rotation = Some(Rotation::Manual);
        self
    }

    /// The clock the time-based rotations read (default [`SystemClock`]); a
    /// [`ManualClock`](crate::clock::ManualClock) in tests.
    pub fn clock<C2: Clock>(self, clock: C2) -> BloomBuilder<WindowOptions<C2>, H> {
        self.map_options(|o| WindowOptions {
            periods: o.periods,
            rotation: o.rotation,
            clock,
            time_base: o.time_base,
        })
    }

    /// The [`TimeBase`] the filter records, in place of its clock's
    /// ([`Clock::is_wall_clock`]): [`TimeBase::Wall`] for a
    /// [`ManualClock`](crate::clock::ManualClock) that the program sets from the wall clock
    /// itself (once per batch, say). The filter rotates by its clock either way.
    pub fn time_base(mut self, base: TimeBase) -> Self {
        self.options_mut().time_base = Some(base);
        self
    }
}

impl<C: Clock, H: ItemHasher> BloomBuilder<WindowOptions<C>, H> {
    /// Allocates the filter: [`sizing::window`](crate::sizing::window) of the capacity (per
    /// period), `periods + 1` generations and the rate (for the whole window).
    ///
    /// # Errors
    ///
    /// As [`sizing::window`](crate::sizing::window); [`Error::InvalidParameter`] for more
    /// than 62 periods, the [`Layout::Line`] (the window is built of words), a period of zero
    /// or a count of zero; [`Error::AllocationFailed`].
    pub fn build(self) -> Result<WindowedBloomFilter<H, C>, Error> {
        if self.config().layout() != Layout::Word {
            return Err(Error::InvalidParameter(
                "the windowed filter has the word layout only",
            ));
        }
        let (capacity, fpr) = (self.config().capacity(), self.config().fpr());
        let (hasher, options) = self.into_hasher_and_options();
        if options.periods > MAX_PERIODS {
            return Err(Error::InvalidParameter("periods must be at most 62"));
        }
        let sizing = window(capacity, options.periods + 1, fpr)?;
        let rotation = options.rotation.unwrap_or(Rotation::AfterInserts(capacity));
        let time_base = options
            .time_base
            .unwrap_or_else(|| TimeBase::of(&options.clock));
        WindowedBloomFilter::new(sizing, hasher, options.clock, time_base, rotation)
    }
}

/// Blocks cleared per claim of the spare: small enough that an insert which clears them
/// stays in the microseconds, large enough that the claims are few. (More for a filter of more
/// than 2^36 blocks, so that the chunks fit the claim word's 31 bits: see `chunk_blocks`.)
const CLEAR_CHUNK_BLOCKS: u64 = 32;

/// The deliberately broken variants the loom models run (`Correct` outside them): each names
/// one step of the protocol done wrong.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[cfg_attr(not(all(test, seen_loom)), allow(dead_code))]
pub(crate) enum Twin {
    Correct,
    /// An insert takes its first write's answer: no second look after a rotation.
    IgnoreRotation,
    /// After a rotation, an insert writes into the new generation without looking at the
    /// generations that became current while it ran.
    SkipBecameCurrent,
    /// A rotation publishes the spare once every chunk is *claimed*, not finished.
    PublishWhenClaimed,
}

/// A Bloom filter of the last `n` periods: `insert` records an item in the current
/// generation, `contains` asks every live one, and a rotation starts a new generation and
/// forgets the oldest, without stopping any thread.
///
/// The window is set in periods ([`periods`](BloomBuilder::periods), default 6): the filter
/// keeps `G = n + 1` live generations, the current (partial) one and `n` full ones. Each
/// generation is a word-layout filter sized for one period's items; the generations' words
/// for one block sit side by side, so a lookup of the whole window reads **one cache line**
/// (up to 6 periods; 7 to 14 read two adjacent lines), not one per generation.
///
/// # Guarantees
///
/// With `P` the period (or `N` new items) and `n` the periods:
///
/// - **Retention**: an item that `insert` reported new is found by every `contains` and
///   `insert` that happens after that insert, for the next `n` rotations: with
///   [`Rotation::Every`], at least `n · P` from the insert's start (rotations are at least a
///   period apart: each is due a period after the previous one ran), unless periods are
///   missed (a `maintain` that catches up several at once); with [`Rotation::EveryAligned`],
///   `n · P` minus how late the rotation that closed the item's generation ran (call
///   `maintain` often to keep that small); in count mode, about `n · N` new items (within the
///   count's precision). So `periods(8)` with a daily rotation catches a repeat 8 days after
///   the first copy, whenever in its day that copy came. An insert that returns `false` does
///   not renew the item: the window counts from the insert that let it through, as a
///   notification sender, a crawler or an ingest job wants ("at most once per window").
/// - **Just past the window**: the item is forgotten at the `(n + 1)`-th rotation after its
///   generation began (no later than `n + 1` periods after the insert, plus however late that
///   rotation runs), so a repeat more than `n + 1` periods later is let through (but for a
///   false positive), and one between `n` and `n + 1` periods later is caught only if it
///   comes before that rotation.
/// - **No false negatives** within that retention, under any interleaving with inserts,
///   lookups and rotations (loom-checked).
/// - **Racing inserts of one new item**: exactly one returns `true`, also when a rotation
///   happens meanwhile (loom-checked), unless one of them is suspended inside `insert` for
///   `n + 1` or more rotations (then at least one does, or, if the suspended one wrote into the
///   slot being recycled, possibly none: an item older than the window, documented in
///   [the concurrency notes](crate::docs::concurrency#windowedbloomfilter)).
/// - **False positives**: at most the target rate over the whole window when every generation
///   holds its capacity.
/// - `contains` is wait-free (one load of the generation counter and the block's words);
///   `insert` is lock-free (it retries only when a rotation happens during it). Rotation never
///   blocks an insert: it is a try-lock that a busy rotator's peers skip, and its O(1) part is
///   one store, because the spare generation was cleared ahead of it.
///
/// # Rotation and clearing
///
/// The spare (the generation that becomes current at the next rotation) must be all zero
/// before it is published. It is cleared in chunks: by inserting threads (one insert in 64,
/// chosen by hash, clears 32 blocks while the spare is dirty), by [`maintain`](Self::maintain)
/// (all of it), or, when a rotation is due and the spare is still dirty, by the rotating call
/// ([`rotate`](Self::rotate) and `maintain` clear what is left; an insert that finds the count
/// reached clears a chunk and leaves the rotation to a later insert).
/// With [`Rotation::Every`] or [`Rotation::EveryAligned`], call [`maintain`](Self::maintain)
/// from a timer (a tenth of the period is plenty): it rotates on time and clears the spare off
/// the insert path. One insert in 1024 also reads the clock and rotates when due.
///
/// Generation numbers stop at 2^63 - 1, the largest a file holds (a filter rotating every
/// nanosecond reaches it in 292 years; a loaded file may be there sooner): a filter there
/// rotates no more ([`rotate`](Self::rotate) returns `None`, `maintain` and inserts do not
/// rotate), so that every state it reaches saves to a file that loads.
///
/// # Examples
///
/// ```
/// use seen::WindowedBloomFilter;
/// use seen::clock::ManualClock;
/// use std::time::Duration;
///
/// let (day, hour) = (Duration::from_secs(86_400), Duration::from_secs(3600));
/// let clock = ManualClock::new(20_000 * day + 23 * hour); // late on a day
/// // The last 7 days, a million new records a day, 1% false positives over the window.
/// let seen = WindowedBloomFilter::builder(1_000_000)
///     .fpr(0.01)
///     .periods(7)
///     .rotate_every_aligned(day)
///     .clock(clock.clone())
///     .build()?;
/// assert!(seen.insert("record-1"));
/// assert!(!seen.insert("record-1")); // a duplicate within the window
/// clock.advance(7 * day);
/// seen.maintain();
/// assert!(seen.contains("record-1")); // 7 days later: remembered
/// clock.advance(day);
/// seen.maintain();
/// assert!(!seen.contains("record-1")); // 8 days later: forgotten (a false positive w.p. 1%)
/// # Ok::<(), seen::Error>(())
/// ```
pub struct WindowedBloomFilter<H = StableHasher, C = SystemClock> {
    bits: AtomicBits,
    sizing: WindowSizing,
    hasher: H,
    clock: C,
    /// What time the filter has rotated by, as recorded (not necessarily what `clock` is).
    time_base: TimeBase,
    rotation: Rotation,
    /// Slots per block (`G + 1`) and words per block (a power of two).
    slots: u64,
    stride: usize,
    /// Count mode: a new item adds `1 << sample_shift` when the low `sample_shift` bits of its
    /// [`sample_bits`](crate::hash::sample_bits) are zero.
    sample_shift: u32,
    /// The number of blocks in a chunk, and of chunks the spare is cleared in.
    chunk_blocks: u64,
    chunks: u64,
    /// The current generation's number: generation `e` lives in slot `e % slots`. Every
    /// number ever current is unique, so "the generation changed" is exact.
    epoch: Padded<AtomicU64>,
    /// Count mode: new items counted in the current generation (sampled).
    counted: Padded<AtomicU64>,
    /// The clearing of the spare: `slot << 32 | next chunk to claim`, and
    /// `slot << 32 | chunks finished`. Reset by each rotation, after it publishes the epoch.
    clear_claim: AtomicU64,
    clear_done: AtomicU64,
    /// Time mode: when the next rotation is due, in nanoseconds since the UNIX epoch.
    next_due: AtomicU64,
    /// Taken (only ever tried) by the thread that rotates, and by a save.
    rotating: TryMutex<()>,
}

/// Where a filter is in its rotation: what a file keeps besides the bits (and what a new
/// filter starts from: generation 0, nothing counted).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct RotationState {
    /// The current generation's number.
    pub(super) epoch: u64,
    /// Count mode: the new items counted in the current generation.
    pub(super) counted: u64,
    /// Time mode: when the next rotation is due, in ns since the UNIX epoch (`u64::MAX`
    /// otherwise).
    pub(super) next_due: u64,
}

/// Why a rotation did not happen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum NotRotated {
    /// Another thread holds the rotation lock (it is rotating or saving).
    Busy,
    /// The spare is not clear yet and this caller may not clear it all.
    SpareDirty,
    /// The current generation is the last a file holds, [`LAST_GENERATION`].
    LastGeneration,
}

/// The largest generation number a filter reaches: the largest a file holds (a reader
/// refuses 2^63 and more, so that a loaded filter's `epoch + 1` never overflows).
pub(super) const LAST_GENERATION: u64 = (1 << 63) - 1;

impl WindowedBloomFilter {
    /// A builder for a window of periods of `items_per_period` distinct items each.
    /// Defaults: `fpr` 0.01 over the whole window, 6 periods (7 live generations, one cache
    /// line), rotation after `items_per_period` new items, [`StableHasher`], [`SystemClock`].
    ///
    /// # Examples
    ///
    /// ```
    /// use seen::WindowedBloomFilter;
    /// use seen::builder::Rotation;
    /// let f = WindowedBloomFilter::builder(100_000).build()?;
    /// assert_eq!((f.periods(), f.rotation()), (6, Rotation::AfterInserts(100_000)));
    /// assert_eq!(f.sizing().lines_per_lookup(), 1);
    /// # Ok::<(), seen::Error>(())
    /// ```
    pub fn builder(items_per_period: u64) -> BloomBuilder<WindowOptions> {
        BloomBuilder::new(items_per_period, WindowOptions::default())
    }
}

impl<H: ItemHasher, C: Clock> WindowedBloomFilter<H, C> {
    fn new(
        sizing: WindowSizing,
        hasher: H,
        clock: C,
        time_base: TimeBase,
        rotation: Rotation,
    ) -> Result<Self, Error> {
        match rotation {
            Rotation::AfterInserts(0) => {
                return Err(Error::InvalidParameter(
                    "the count to rotate after must be at least 1",
                ));
            }
            Rotation::Every(p) | Rotation::EveryAligned(p) if as_nanos(p) == 0 => {
                return Err(Error::InvalidParameter(
                    "the rotation period must be at least 1 ns",
                ));
            }
            Rotation::Every(p) | Rotation::EveryAligned(p)
                if p.as_nanos() > u128::from(u64::MAX) =>
            {
                return Err(Error::InvalidParameter(
                    "the rotation period must be at most 2^64 - 1 ns (584 years)",
                ));
            }
            _ => {}
        }
        let bits = AtomicBits::new(sizing.lines())?;
        let start = RotationState {
            epoch: 0,
            counted: 0,
            next_due: 0,
        };
        let filter = Self::from_parts(sizing, bits, hasher, (clock, time_base), rotation, start);
        let now = as_nanos(filter.clock.now());
        filter.next_due.store(filter.first_due(now), Relaxed);
        Ok(filter)
    }

    /// The filter of these bits (the spare of generation `state.epoch`, slot `epoch + 1`, all
    /// clear), in that rotation state, on that clock and time base, with the spare's clearing
    /// finished: what `new` builds and what a load restores. The caller has checked the
    /// rotation (a count or period of 0) and the generation (at most [`LAST_GENERATION`]).
    pub(super) fn from_parts(
        sizing: WindowSizing,
        bits: AtomicBits,
        hasher: H,
        (clock, time_base): (C, TimeBase),
        rotation: Rotation,
        state: RotationState,
    ) -> Self {
        let slots = u64::from(sizing.slots());
        // At most 2^31 chunks, so that the claim counter never carries into the slot bits
        // (it can pass `chunks` by the number of threads at most).
        let chunk_blocks = CLEAR_CHUNK_BLOCKS.max(sizing.blocks().div_ceil(1 << 31));
        let chunks = sizing.blocks().div_ceil(chunk_blocks);
        let sample_shift = match rotation {
            // At least 16,384 samples per generation (2^s <= count / 2^14): the count is then
            // within 3 / 128 = 2.3 % of the truth at three standard deviations.
            Rotation::AfterInserts(n) => (n >> 14).max(1).ilog2(),
            _ => 0,
        };
        // The spare is clear: its clearing is done, every chunk claimed and finished.
        let ready = ((state.epoch + 1) % slots) << 32 | chunks;
        Self {
            bits,
            stride: sizing.stride_words as usize,
            sizing,
            hasher,
            rotation,
            slots,
            sample_shift,
            chunk_blocks,
            chunks,
            epoch: Padded(AtomicU64::new(state.epoch)),
            counted: Padded(AtomicU64::new(state.counted)),
            clear_claim: AtomicU64::new(ready),
            clear_done: AtomicU64::new(ready),
            next_due: AtomicU64::new(state.next_due),
            rotating: TryMutex::new(()),
            clock,
            time_base,
        }
    }

    /// When the first rotation after `now` is due (time mode; `u64::MAX` otherwise).
    fn first_due(&self, now: u64) -> u64 {
        match self.rotation {
            Rotation::Every(p) => now.saturating_add(as_nanos(p)),
            Rotation::EveryAligned(p) => {
                let p = as_nanos(p);
                (now / p).saturating_add(1).saturating_mul(p)
            }
            _ => u64::MAX,
        }
    }

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
        let epoch = self.epoch.0.load(Acquire);
        self.held(block * self.stride, mask, self.live(epoch), Relaxed)
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
        let epoch = self.epoch.0.load(Acquire);
        let first = since.max((epoch + 1).saturating_sub(u64::from(self.sizing.generations)));
        if first > epoch {
            return false;
        }
        let slots = (first..=epoch).fold(0, |slots, e| slots | 1 << self.slot(e));
        self.held(block * self.stride, mask, slots, Relaxed)
    }

    /// Appends to `hits`, for each item in order, what [`contains`](Self::contains) returns;
    /// returns how many were `true`. Faster than a loop of `contains` on a window larger than
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
    pub fn contains_many<'a, T, I>(&self, items: I, hits: &mut Vec<bool>) -> usize
    where
        T: Hash + ?Sized + 'a,
        I: IntoIterator<Item = &'a T>,
    {
        self.contains_many_hashes(
            items.into_iter().map(|item| self.hasher.hash_item(item)),
            hits,
        )
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
                let live = self.live(self.epoch.0.load(Acquire));
                for &(base, mask) in at {
                    out.push(self.held(base, mask, live, Relaxed));
                }
            });
        })
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
        self.insert_hash_with(hash, Twin::Correct)
    }

    /// The insert protocol; `twin` selects a broken variant for the loom models.
    #[inline(always)]
    pub(crate) fn insert_hash_with(&self, hash: Hash128, twin: Twin) -> bool {
        let (block, mask) = word_probe(hash, &self.sizing.generation);
        let base = block * self.stride;
        let mut epoch = self.epoch.0.load(SeqCst);
        sc_order();
        let new = if self.held(base, mask, self.live(epoch), SeqCst) {
            false
        } else {
            loop {
                let word = self.bits.word(base + self.slot(epoch));
                if word.fetch_or(mask, SeqCst) & mask == mask {
                    break false;
                }
                sc_order();
                let now = self.epoch.0.load(SeqCst);
                if now == epoch || twin == Twin::IgnoreRotation {
                    break true;
                }
                sc_order();
                if twin != Twin::SkipBecameCurrent
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
    fn slot(&self, epoch: u64) -> usize {
        // 8 slots (7 generations, the default) and every power of two: a mask, not a division.
        if self.slots.is_power_of_two() {
            (epoch & (self.slots - 1)) as usize
        } else {
            (epoch % self.slots) as usize
        }
    }

    /// The slots live at `epoch`: all but the spare, `slot(epoch + 1)`.
    #[inline(always)]
    fn live(&self, epoch: u64) -> u64 {
        let all = u64::MAX >> (64 - self.slots);
        all & !(1 << self.slot(epoch + 1))
    }

    /// The slots of the generations after `from` up to but not including `to` that are still
    /// live at `to` (at most `G - 1` of them).
    fn became_current(&self, from: u64, to: u64) -> u64 {
        let first = (from + 1).max((to + 1).saturating_sub(u64::from(self.sizing.generations)));
        (first..to).fold(0, |slots, e| slots | 1 << self.slot(e))
    }

    /// Whether one of the `slots` (a mask) of the block at word `base` holds every bit of `mask`.
    #[inline(always)]
    fn held(&self, base: usize, mask: u64, slots: u64, order: crate::sync::Ordering) -> bool {
        if self.stride <= LINE_WORDS {
            // One line (the stride is a power of two, so the block does not straddle two):
            // one bounds check, then every word of the block, branch once.
            let line = &self.bits.line(base / LINE_WORDS).0;
            let mut hit = 0u64;
            if self.stride == LINE_WORDS {
                for (slot, word) in line.iter().enumerate() {
                    hit |= u64::from(word.load(order) & mask == mask) << slot;
                }
            } else {
                let words = &line[base % LINE_WORDS..][..self.stride];
                for (slot, word) in words.iter().enumerate() {
                    hit |= u64::from(word.load(order) & mask == mask) << slot;
                }
            }
            hit & slots != 0
        } else {
            let mut rest = slots;
            while rest != 0 {
                let slot = rest.trailing_zeros() as usize;
                if self.bits.word(base + slot).load(order) & mask == mask {
                    return true;
                }
                rest &= rest - 1;
            }
            false
        }
    }

    /// The side work of an insert, for the few whose hash picks them: count the new item,
    /// clear a chunk of the spare, read the clock. Most inserts test three bits of the hash
    /// and return.
    #[inline(always)]
    fn after_insert(&self, hash: Hash128, new: bool) {
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

    #[cold]
    #[inline(never)]
    fn side_work(&self, count_tick: bool, clear_tick: bool, clock_tick: bool) {
        let rotated = match self.rotation {
            Rotation::AfterInserts(n) if count_tick => {
                let step = 1u64 << self.sample_shift;
                let counted = self.counted.0.fetch_add(step, Relaxed).saturating_add(step);
                // Spread the spare's clearing over the generation's count ticks, so that it
                // is clear when the count is reached however small the count is against the
                // filter (one chunk per tick would leave a large spare dirty).
                let ticks = (n >> self.sample_shift).max(1);
                for _ in 0..self.chunks.div_ceil(ticks) {
                    if !self.clear_chunk() {
                        break;
                    }
                }
                if counted >= n {
                    self.try_rotate(false).map(|_| 1)
                } else {
                    Ok(0)
                }
            }
            Rotation::Every(_) | Rotation::EveryAligned(_) if clock_tick => {
                self.rotate_if_due(as_nanos(self.clock.now()), false)
            }
            _ => Ok(0),
        };
        if rotated == Err(NotRotated::SpareDirty) || clear_tick {
            self.clear_chunk();
        }
    }

    /// Claims and clears one chunk of the spare; `false` when every chunk is claimed.
    fn clear_chunk(&self) -> bool {
        if self.clear_claim.load(Relaxed) & 0xffff_ffff >= self.chunks {
            return false;
        }
        // Acquire: the claim word was reset by the rotation that retired this slot, after it
        // published the new epoch: the slot is no longer live.
        let claim = self.clear_claim.fetch_add(1, AcqRel);
        let (slot, chunk) = ((claim >> 32) as usize, claim & 0xffff_ffff);
        if chunk >= self.chunks {
            return false;
        }
        let blocks = self.sizing.blocks();
        let end = ((chunk + 1) * self.chunk_blocks).min(blocks);
        for block in chunk * self.chunk_blocks..end {
            self.bits
                .word(block as usize * self.stride + slot)
                .store(0, Relaxed);
        }
        // Release: a rotation that sees every chunk finished (Acquire) sees these stores, and
        // so does every insert that reads the epoch it then publishes.
        self.clear_done.fetch_add(1, AcqRel);
        true
    }

    /// Whether the spare of generation `epoch` (slot `epoch + 1`) is all clear.
    fn spare_ready(&self, epoch: u64) -> bool {
        self.clear_done.load(Acquire) == (self.slot(epoch + 1) as u64) << 32 | self.chunks
    }

    /// Clears what is left of the spare of generation `epoch`, without the rotation lock:
    /// claims chunks until none is left, then waits for chunks other threads claimed (a few
    /// stores each) to be finished. Returns early if the generation moves on meanwhile.
    fn clear_spare(&self, epoch: u64) {
        while !self.spare_ready(epoch) {
            if !self.clear_chunk() {
                if self.epoch.0.load(Acquire) != epoch {
                    return;
                }
                crate::sync::spin_hint();
            }
        }
    }

    /// Starts generation `epoch + 1` if `epoch` is still current and its spare is clear; the
    /// caller holds the rotation lock. The lock is held for O(1): the clearing happens before it
    /// is taken, so a rotator descheduled while clearing keeps no one from rotating.
    fn publish_if_ready(&self, epoch: u64, twin: Twin) -> Result<u64, NotRotated> {
        if self.epoch.0.load(Relaxed) != epoch {
            // Another thread rotated since the caller looked: that rotation stands for this one.
            return Err(NotRotated::Busy);
        }
        if epoch >= LAST_GENERATION {
            return Err(NotRotated::LastGeneration);
        }
        // The twin publishes once every chunk is claimed, finished or not.
        let claimed = twin == Twin::PublishWhenClaimed
            && self.clear_claim.load(Acquire) & 0xffff_ffff >= self.chunks;
        if !(self.spare_ready(epoch) || claimed) {
            return Err(NotRotated::SpareDirty);
        }
        Ok(self.publish(epoch + 1))
    }

    /// A rotation now: clears the spare first if `force` (without the lock), else only onto a
    /// clear spare; then only tries the rotation lock (a holder makes it `Busy`). Returns the
    /// new generation's number.
    fn try_rotate(&self, force: bool) -> Result<u64, NotRotated> {
        let epoch = self.epoch.0.load(Acquire);
        if force {
            self.clear_spare(epoch);
        }
        let Some(_guard) = self.rotating.try_lock() else {
            return Err(NotRotated::Busy);
        };
        self.publish_if_ready(epoch, Twin::Correct)
    }

    /// Time mode: rotates if `now` has passed the rotation time; returns how many rotations it
    /// did. `force` catches up every period missed (up to `G`: after that the window holds
    /// nothing older anyway), clearing spares as needed; otherwise one rotation at most, and
    /// only onto a clear spare. Either way the next rotation is then due a period after `now`
    /// (or at the first boundary after it, aligned): rotations never come closer than a period
    /// apart unless periods were missed, and a late one does not shorten the next generation.
    fn rotate_if_due(&self, now: u64, force: bool) -> Result<u64, NotRotated> {
        let period = match self.rotation {
            Rotation::Every(p) | Rotation::EveryAligned(p) => as_nanos(p),
            _ => return Ok(0),
        };
        let due = self.next_due.load(Relaxed);
        // `u64::MAX`: the next rotation would be past the year 2554: never.
        if due == u64::MAX || now < due {
            return Ok(0);
        }
        if force {
            self.clear_spare(self.epoch.0.load(Acquire));
        }
        let Some(_guard) = self.rotating.try_lock() else {
            return Err(NotRotated::Busy);
        };
        let due = self.next_due.load(Relaxed);
        if due == u64::MAX || now < due {
            return Ok(0);
        }
        let missed = (now - due) / period + 1;
        let todo = if force {
            missed.min(u64::from(self.sizing.generations))
        } else {
            1
        };
        let mut rotations = 0;
        while rotations < todo {
            let epoch = self.epoch.0.load(Relaxed);
            if force {
                // Under the lock, so that two catching-up calls do not both rotate: only when
                // more than one period was missed (the first spare was cleared above).
                self.clear_spare(epoch);
            }
            match self.publish_if_ready(epoch, Twin::Correct) {
                Ok(_) => rotations += 1,
                Err(e) if rotations == 0 => return Err(e),
                Err(_) => break,
            }
        }
        self.next_due.store(self.first_due(now), Relaxed);
        Ok(rotations)
    }

    /// Makes generation `next` current (its slot is clear) and opens the clearing of the new
    /// spare, the slot of the generation `next` retires. The epoch is stored first: a thread
    /// can claim a chunk of the new spare only after it is out of every lookup.
    fn publish(&self, next: u64) -> u64 {
        self.epoch.0.store(next, SeqCst);
        self.counted.0.store(0, Relaxed);
        let spare = (self.slot(next + 1) as u64) << 32;
        self.clear_done.store(spare, Release);
        self.clear_claim.store(spare, Release);
        next
    }

    /// Starts a new generation now, whatever the rotation mode: the oldest generation is
    /// forgotten. Returns the new generation's number, or `None` if another thread rotated
    /// after this call began (its rotation then stands for this one) or the filter is at
    /// generation 2^63 - 1, the last (see [Rotation and clearing](Self#rotation-and-clearing)).
    ///
    /// O(1) when the spare is already clear (after [`maintain`](Self::maintain), or once
    /// inserts have cleared it); otherwise this call clears what is left of it first, a
    /// `1/G`-th of the filter at most. It may wait: for a chunk another thread is clearing
    /// (32 stores once that thread runs), and for a save in progress to finish. Never blocks
    /// inserts or lookups.
    ///
    /// # Examples
    ///
    /// ```
    /// let f = seen::WindowedBloomFilter::builder(1000).periods(1).rotate_manually().build()?;
    /// f.insert("a");
    /// assert_eq!(f.rotate(), Some(1));
    /// assert!(f.contains("a")); // one period back: still in the window
    /// f.rotate();
    /// assert!(!f.contains("a")); // two: forgotten
    /// # Ok::<(), seen::Error>(())
    /// ```
    pub fn rotate(&self) -> Option<u64> {
        self.rotate_waiting(Twin::Correct)
    }

    /// [`rotate`](Self::rotate): clears the spare, then waits for the rotation lock (a save
    /// holds it for the save's length), so that a rotation asked for is not lost.
    fn rotate_waiting(&self, twin: Twin) -> Option<u64> {
        let epoch = self.epoch.0.load(Acquire);
        loop {
            if twin == Twin::PublishWhenClaimed {
                while self.clear_chunk() {}
            } else {
                self.clear_spare(epoch);
            }
            let _guard = self.rotating.lock();
            match self.publish_if_ready(epoch, twin) {
                Ok(next) => return Some(next),
                // Another thread rotated since this call began (that rotation stands for
                // it), or this is the last generation.
                Err(NotRotated::Busy | NotRotated::LastGeneration) => return None,
                Err(NotRotated::SpareDirty) => {}
            }
        }
    }

    /// The periodic upkeep a service calls from its own timer (the filter starts no thread):
    /// rotates if the clock has passed a rotation time (once per period missed, up to
    /// `periods + 1`, so a filter idle for longer than the window forgets it all), or if the
    /// count is reached,
    /// then clears the spare, so that the next rotation is O(1) on whichever thread does it.
    /// Returns the number of rotations done.
    ///
    /// Cost: O(size / G) when it clears a spare, O(1) otherwise. Never blocks inserts or
    /// lookups; a rotation by another thread meanwhile stands for its own.
    pub fn maintain(&self) -> u64 {
        let rotations = match self.rotation {
            Rotation::Every(_) | Rotation::EveryAligned(_) => {
                self.rotate_if_due(as_nanos(self.clock.now()), true)
            }
            Rotation::AfterInserts(n) if self.counted.0.load(Relaxed) >= n => {
                self.try_rotate(true).map(|_| 1)
            }
            _ => Ok(0),
        };
        while self.clear_chunk() {}
        rotations.unwrap_or(0)
    }

    /// The current generation's number: 0 when built, one more at each rotation.
    pub fn generation(&self) -> u64 {
        self.epoch.0.load(Acquire)
    }

    /// When the next rotation is due, as a time of the clock (since the UNIX epoch): `None`
    /// for the count and manual modes, and once the next rotation would be past the year 2554.
    /// A loaded filter's comes from its file.
    ///
    /// ```
    /// use std::time::Duration;
    /// let day = Duration::from_secs(86_400);
    /// let clock = seen::clock::ManualClock::new(day * 20_000 + Duration::from_secs(5));
    /// let f = seen::WindowedBloomFilter::builder(1000)
    ///     .rotate_every_aligned(day)
    ///     .clock(clock)
    ///     .build()?;
    /// assert_eq!(f.next_rotation(), Some(day * 20_001)); // the next midnight
    /// # Ok::<(), seen::Error>(())
    /// ```
    pub fn next_rotation(&self) -> Option<Duration> {
        match self.rotation {
            Rotation::Every(_) | Rotation::EveryAligned(_) => {
                let due = self.next_due.load(Relaxed);
                (due != u64::MAX).then(|| Duration::from_nanos(due))
            }
            _ => None,
        }
    }

    /// The full periods every item is remembered for, `n`
    /// ([`periods`](BloomBuilder::periods)): [`generations`](Self::generations) - 1. A file
    /// records the generations: one of `G` generations loads with `G - 1` periods.
    pub fn periods(&self) -> u32 {
        self.sizing.generations - 1
    }

    /// The number of live generations a lookup checks, `G = periods + 1`: the current one
    /// and `periods` full ones. What the memory and the cache lines per lookup depend on
    /// ([`sizing`](Self::sizing)).
    pub fn generations(&self) -> u32 {
        self.sizing.generations
    }

    /// What time the filter has rotated by, as recorded when it was built (from its clock or
    /// the builder's [`time_base`](BloomBuilder::time_base)) or in the file it was loaded
    /// from ([`TimeBase::Unknown`] for a file written before the filter recorded it). Kept
    /// by [`with_clock`](Self::with_clock); replaced by [`with_time_base`](Self::with_time_base).
    pub fn time_base(&self) -> TimeBase {
        self.time_base
    }

    /// The rotation mode.
    pub fn rotation(&self) -> Rotation {
        self.rotation
    }

    /// The number of distinct items each generation is sized for.
    pub fn capacity(&self) -> u64 {
        self.sizing.items_per_period()
    }

    /// The target false-positive rate over the whole window.
    pub fn fpr(&self) -> f64 {
        self.sizing.fpr
    }

    /// The size: [`sizing::window`](crate::sizing::window) of the parameters.
    pub fn sizing(&self) -> WindowSizing {
        self.sizing
    }

    /// The bytes of bits allocated (every generation, the spare and the padding).
    pub fn memory_bytes(&self) -> u64 {
        self.sizing.bytes()
    }

    /// What the filter is and holds: `layers` is the number of live generations, `capacity`
    /// `G` times a generation's, `estimated_len` the sum of the live generations' estimates,
    /// `estimated_fpr` the probability that a new item is found in some live generation now
    /// (`1 - Π (1 - (s_g / 64)^k)`, averaged over blocks). Reads every word: O(m).
    ///
    /// # Examples
    ///
    /// ```
    /// let f = seen::WindowedBloomFilter::builder(1000).periods(2).rotate_manually().build()?;
    /// for i in 0..3000u64 {
    ///     f.insert(&i);
    ///     if i % 1000 == 999 {
    ///         f.rotate();
    ///     }
    /// }
    /// let info = f.info();
    /// assert_eq!((info.layers, info.capacity), (3, 3000));
    /// assert!((1900..2100).contains(&info.estimated_len), "{info}"); // 2 full generations live
    /// # Ok::<(), seen::Error>(())
    /// ```
    pub fn info(&self) -> BloomInfo {
        let generation = &self.sizing.generation;
        let live = self.live(self.epoch.0.load(Acquire));
        let blocks = generation.blocks as usize;
        let word = |block: usize, slot: u64| {
            self.bits
                .word(block * self.stride + slot as usize)
                .load(Relaxed)
        };
        let slots = (0..self.slots).filter(|s| live & (1 << s) != 0);
        let estimated_len = slots
            .clone()
            .map(|s| info::estimated_len((0..blocks).map(|b| word(b, s)), generation))
            .fold(0u64, u64::saturating_add);
        let k = generation.hashes as i32;
        let table: Vec<f64> = (0..=64).map(|s| (f64::from(s) / 64.0).powi(k)).collect();
        let mut sum = 0.0;
        for b in 0..blocks {
            let miss: f64 = slots
                .clone()
                .map(|s| 1.0 - table[word(b, s).count_ones() as usize])
                .product();
            sum += 1.0 - miss;
        }
        BloomInfo {
            structure: "WindowedBloomFilter",
            layout: Layout::Word,
            capacity: generation
                .capacity
                .saturating_mul(u64::from(self.sizing.generations)),
            fpr: self.sizing.fpr,
            bytes: self.memory_bytes(),
            layers: self.sizing.generations,
            sampled_new_items: None,
            estimated_len,
            estimated_fpr: sum / blocks as f64,
            expansion: None,
        }
    }

    /// The hasher.
    pub fn hasher(&self) -> &H {
        &self.hasher
    }

    /// The clock.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// This filter reading `clock` instead of its own; the bits, the generation, the
    /// schedule (the next rotation time is kept, not recomputed from `clock`) and the
    /// [`time_base`](Self::time_base) stay: it records what time the filter has rotated by, so
    /// a loaded filter keeps its file's. A loaded filter comes with the [`SystemClock`]: this
    /// puts a [`ManualClock`](crate::clock::ManualClock) (or any other) in its place.
    ///
    /// A time-mode filter whose next rotation time has passed (one loaded from a file older
    /// than a period) catches up at the next [`maintain`](Self::maintain): one rotation per
    /// period missed, up to `periods + 1`, so a file older than the whole window comes back
    /// with no live item. (Until then, the first insert that reads the clock rotates once and
    /// sets the next rotation a period after now, leaving older generations for `maintain` to
    /// retire: call it right after loading.)
    ///
    /// # Examples
    ///
    /// ```
    /// use seen::WindowedBloomFilter;
    /// use seen::clock::ManualClock;
    /// use std::time::Duration;
    ///
    /// let hour = Duration::from_secs(3600);
    /// let clock = ManualClock::new(Duration::from_secs(1_700_000_000));
    /// let f = WindowedBloomFilter::builder(1000)
    ///     .periods(2)
    ///     .rotate_every(hour)
    ///     .clock(clock.clone())
    ///     .build()?;
    /// f.insert("a");
    /// let mut file = Vec::new();
    /// f.write_to(&mut file)?;
    /// let loaded = WindowedBloomFilter::read_from(&file[..])?.with_clock(clock.clone());
    /// clock.advance(hour);
    /// assert_eq!(loaded.maintain(), 1);
    /// assert!(loaded.contains("a")); // one period later: in the window
    /// clock.advance(10 * hour);
    /// assert_eq!(loaded.maintain(), 3); // 10 periods missed: 3 rotations forget them all
    /// assert!(!loaded.contains("a"));
    /// # Ok::<(), seen::Error>(())
    /// ```
    pub fn with_clock<C2: Clock>(self, clock: C2) -> WindowedBloomFilter<H, C2> {
        WindowedBloomFilter {
            bits: self.bits,
            sizing: self.sizing,
            hasher: self.hasher,
            clock,
            time_base: self.time_base,
            rotation: self.rotation,
            slots: self.slots,
            stride: self.stride,
            sample_shift: self.sample_shift,
            chunk_blocks: self.chunk_blocks,
            chunks: self.chunks,
            epoch: self.epoch,
            counted: self.counted,
            clear_claim: self.clear_claim,
            clear_done: self.clear_done,
            next_due: self.next_due,
            rotating: self.rotating,
        }
    }

    /// This filter recording `base` as the time it rotates by, in place of its
    /// [`time_base`](Self::time_base); nothing else changes. For a program that checked a
    /// loaded state's time base against its own and goes on with its own: one loaded from a
    /// file that did not record it ([`TimeBase::Unknown`]) then saves the base it now rotates
    /// by.
    ///
    /// # Examples
    ///
    /// ```
    /// use seen::WindowedBloomFilter;
    /// use seen::clock::{ManualClock, TimeBase};
    /// use std::time::Duration;
    ///
    /// let clock = ManualClock::new(Duration::from_secs(1_700_000_000));
    /// let f = WindowedBloomFilter::builder(1000).clock(clock.clone()).build()?;
    /// let mut file = Vec::new();
    /// f.write_to(&mut file)?;
    /// let loaded = WindowedBloomFilter::read_from(&file[..])?.with_clock(clock);
    /// assert_eq!(loaded.time_base(), TimeBase::Other); // the file's, not the clock's
    /// assert_eq!(loaded.with_time_base(TimeBase::Wall).time_base(), TimeBase::Wall);
    /// # Ok::<(), seen::Error>(())
    /// ```
    pub fn with_time_base(mut self, base: TimeBase) -> Self {
        self.time_base = base;
        self
    }
}

impl<H, C> fmt::Debug for WindowedBloomFilter<H, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WindowedBloomFilter")
            .field("items_per_period", &self.sizing.items_per_period())
            .field("periods", &(self.sizing.generations - 1))
            .field("fpr", &self.sizing.fpr)
            .field("rotation", &self.rotation)
            .field("time_base", &self.time_base)
            .field("generation", &self.epoch.0.load(Relaxed))
            .field("bytes", &self.sizing.bytes())
            .finish_non_exhaustive()
    }
}

impl<T: Hash + ?Sized, H: ItemHasher, C: Clock> DedupFilter<T> for WindowedBloomFilter<H, C> {
    fn insert(&self, item: &T) -> bool {
        WindowedBloomFilter::insert(self, item)
    }

    fn contains(&self, item: &T) -> bool {
        WindowedBloomFilter::contains(self, item)
    }
}

/// Entry points for the loom models' broken twins.
#[cfg(all(test, seen_loom))]
impl<H: ItemHasher, C: Clock> WindowedBloomFilter<H, C> {
    /// [`insert`](Self::insert) done as `twin` does it.
    pub(crate) fn insert_as<T: Hash + ?Sized>(&self, item: &T, twin: Twin) -> bool {
        self.insert_hash_with(self.hasher.hash_item(item), twin)
    }

    /// [`rotate`](Self::rotate) done as `twin` does it.
    pub(crate) fn rotate_as(&self, twin: Twin) -> Option<u64> {
        self.rotate_waiting(twin)
    }

    /// Claims and clears one chunk of the spare, as an insert picked by its hash does.
    pub(crate) fn clear_one_chunk(&self) -> bool {
        self.clear_chunk()
    }
}
