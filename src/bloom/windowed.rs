//! `WindowedBloomFilter`: the last `n` periods (days, hours, or `N` new items each) in one
//! lock-free filter, every generation of an item in one cache line, rotated in O(1).
//!
//! This file holds the type, its construction and its accessors; `options.rs` the schedule and
//! the builder, `protocol.rs` the insert and the lookups, `rotation.rs` the clearing of the spare
//! and the rotation, `file.rs` its file payload.

use core::fmt;
use core::hash::Hash;
use core::time::Duration;

use super::BloomBuilder;
use super::info::{self, BloomInfo};
use crate::bits::CachePadded;
use crate::clock::{Clock, SystemClock, TimeBase, as_nanos};
use crate::hash::{ItemHasher, StableHasher};
use crate::sizing::WindowSizing;
use crate::sync::Ordering::{Acquire, Relaxed};
use crate::sync::{AtomicU64, TryMutex};
use crate::{Error, Layout};

mod file;
mod options;
mod protocol;
mod rotation;
mod words;

pub use options::{Rotation, WindowOptions};
use words::Words;

/// Blocks cleared per claim of the spare: small enough that an insert which clears them
/// stays in the microseconds, large enough that the claims are few. (More for a filter of more
/// than 2^36 blocks, so that the chunks fit the claim word's 31 bits: see `chunk_blocks`.)
const CLEAR_CHUNK_BLOCKS: u64 = 32;

/// A Bloom filter of the last `n` periods: `insert` records an item in the current
/// generation, `contains` asks every live one, and a rotation starts a new generation and
/// forgets the oldest, without stopping any thread.
///
/// The window is set in periods ([`periods`](BloomBuilder::periods), default 6): the filter
/// keeps `G = n + 1` live generations, the current (partial) one and `n` full ones. Each
/// generation is a word-layout filter sized for one period's items; the generations' words
/// for one block sit side by side, so a lookup of the whole window reads **one cache line**
/// (up to 6 periods; 7 and 8 read two lines), not one per generation. From 7 periods a block is
/// exactly `G + 1` words, so the memory is `(G + 1) / G` that of `G` separate filters at the
/// same overall rate ([the sizing](crate::sizing::WindowSizing)).
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
    bits: Words,
    sizing: WindowSizing,
    hasher: H,
    clock: C,
    /// What time the filter has rotated by, as recorded (not necessarily what `clock` is).
    time_base: TimeBase,
    rotation: Rotation,
    /// Slots per block (`G + 1`) and words per block (the slots, or a power of two above them:
    /// [`WindowSizing::stride_words`]).
    slots: u64,
    stride: usize,
    /// `slots - 1` when the slots are a power of two (a slot is then a mask of the generation
    /// number), else 0.
    slot_mask: u64,
    /// Count mode: a new item adds `1 << sample_shift` when the low `sample_shift` bits of its
    /// [`sample_bits`](crate::hash::sample_bits) are zero.
    sample_shift: u32,
    /// The number of blocks in a chunk, and of chunks the spare is cleared in.
    chunk_blocks: u64,
    chunks: u64,
    /// The current generation's number: generation `e` lives in slot `e % slots`. Every
    /// number ever current is unique, so "the generation changed" is exact.
    epoch: CachePadded<AtomicU64>,
    /// Count mode: new items counted in the current generation (sampled).
    counted: CachePadded<AtomicU64>,
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
        let bits = Words::new(sizing.words())?;
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
        bits: Words,
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
            slot_mask: if slots.is_power_of_two() {
                slots - 1
            } else {
                0
            },
            sizing,
            hasher,
            rotation,
            slots,
            sample_shift,
            chunk_blocks,
            chunks,
            epoch: CachePadded::new(AtomicU64::new(state.epoch)),
            counted: CachePadded::new(AtomicU64::new(state.counted)),
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

    /// The current generation's number: 0 when built, one more at each rotation.
    pub fn generation(&self) -> u64 {
        self.epoch.load(Acquire)
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

    /// The bytes of bits allocated: every generation, the spare and the padding of each block
    /// to a power of two words (up to 7 generations; above, only in a filter loaded from a file
    /// of padded blocks), [`sizing().bytes()`](WindowSizing::bytes). (The allocation holds up to
    /// 56 bytes more, to start the bits at a cache line.)
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
        let live = self.live(self.epoch.load(Acquire));
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
            slot_mask: self.slot_mask,
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
            .field("generation", &self.epoch.load(Relaxed))
            .field("bytes", &self.sizing.bytes())
            .finish_non_exhaustive()
    }
}

crate::forward::dedup_filter!(
    impl[H: ItemHasher, C: Clock] for WindowedBloomFilter<H, C>, item: Hash
);

/// An entry point for the loom models.
#[cfg(all(test, seen_loom))]
impl<H: ItemHasher, C: Clock> WindowedBloomFilter<H, C> {
    /// Claims and clears one chunk of the spare, as an insert picked by its hash does.
    pub(crate) fn clear_one_chunk(&self) -> bool {
        self.clear_chunk()
    }
}
