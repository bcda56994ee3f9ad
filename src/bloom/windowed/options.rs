//! The window's options: its rotation schedule, its periods, its clock and time base, and the
//! builder methods that set them.

use core::time::Duration;

use super::WindowedBloomFilter;
use crate::Error;
use crate::Layout;
use crate::bloom::BloomBuilder;
use crate::clock::{Clock, SystemClock, TimeBase};
use crate::hash::ItemHasher;
use crate::sizing::window;

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
    /// generations and the spare share one cache line; 7 and 8 take two, in blocks of exactly
    /// `periods + 2` words ([`lines_per_lookup`](crate::sizing::WindowSizing::lines_per_lookup)).
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
    /// // 9 generations and the spare in 10 words: 10/9 the memory of 9 separate filters.
    /// assert_eq!(f.memory_bytes(), 10 * f.sizing().generation.bytes());
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
