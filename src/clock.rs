//! Clocks for the time-based rotation of a [`WindowedBloomFilter`](crate::WindowedBloomFilter):
//! the wall clock by default, or any [`Clock`] you inject (a [`ManualClock`] in tests and
//! simulations, which moves only when told to), and the [`TimeBase`] a filter records of it.

use core::fmt;
use core::time::Duration;

use crate::sync::{Arc, AtomicU64, Ordering};

/// A source of wall-clock time for rotations: the time since the UNIX epoch.
///
/// The filter reads it only in [`maintain`](crate::WindowedBloomFilter::maintain) and in one
/// insert out of 1024 (chosen by the item's hash), never on every operation. It should not go
/// backwards; if it does, the filter waits until it passes the next rotation again.
pub trait Clock: Send + Sync {
    /// The time since 1970-01-01T00:00:00 UTC.
    fn now(&self) -> Duration;

    /// Whether this clock reads the wall clock (the system's time now), rather than times
    /// it is given (event times, a simulation, a test). A filter built on it records the
    /// answer as its [`TimeBase`], and its file keeps it. `false` unless overridden:
    /// [`SystemClock`] says `true`, and so should a clock that reads the system's time in
    /// its own way (one that caches it, say).
    fn is_wall_clock(&self) -> bool {
        false
    }
}

/// What time a [`WindowedBloomFilter`](crate::WindowedBloomFilter) rotates by, as it records
/// it and its file keeps it ([`time_base`](crate::WindowedBloomFilter::time_base)): so that a
/// program that loads a saved state can refuse to go on with times of another kind (a state
/// built from event times, continued by the wall clock, would jump to today at once).
///
/// A filter takes it from its clock when built ([`Clock::is_wall_clock`]), or from
/// [`time_base`](crate::builder::BloomBuilder::time_base) on the builder; a load restores the
/// file's; [`with_clock`](crate::WindowedBloomFilter::with_clock) keeps it, and
/// [`with_time_base`](crate::WindowedBloomFilter::with_time_base) replaces it. The filter
/// itself only records it: it rotates by whatever its clock says.
///
/// # Examples
///
/// ```
/// use seen::WindowedBloomFilter;
/// use seen::clock::{ManualClock, TimeBase};
/// use std::time::Duration;
///
/// let wall = WindowedBloomFilter::builder(1000).build()?; // the system clock
/// assert_eq!(wall.time_base(), TimeBase::Wall);
/// let events = ManualClock::new(Duration::ZERO); // moved to each record's event time
/// let replay = WindowedBloomFilter::builder(1000).clock(events).build()?;
/// assert_eq!(replay.time_base(), TimeBase::Other);
/// // The wall clock, read by the caller once per batch into a manual clock:
/// let batched = WindowedBloomFilter::builder(1000)
///     .clock(ManualClock::new(Duration::ZERO))
///     .time_base(TimeBase::Wall)
///     .build()?;
/// assert_eq!(batched.time_base(), TimeBase::Wall);
/// # Ok::<(), seen::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TimeBase {
    /// Not recorded: a file written before the filter recorded its clock.
    Unknown,
    /// The wall clock: the system's time now.
    Wall,
    /// Another clock: times the program gives it (event times, a simulation, a test).
    Other,
}

impl TimeBase {
    /// What a filter on `clock` records.
    pub(crate) fn of<C: Clock + ?Sized>(clock: &C) -> Self {
        if clock.is_wall_clock() {
            Self::Wall
        } else {
            Self::Other
        }
    }
}

/// The system's wall clock ([`std::time::SystemTime`]). The default clock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Duration {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
    }

    fn is_wall_clock(&self) -> bool {
        true
    }
}

/// A clock that moves only when told to: for tests and simulations, and for a program that
/// drives time itself (from event times, or from the wall clock read once per batch). Clones
/// share one time, so a test keeps a clone and advances the filter's clock from outside. A
/// filter on it records [`TimeBase::Other`], unless the builder's
/// [`time_base`](crate::builder::BloomBuilder::time_base) says otherwise.
///
/// # Examples
///
/// ```
/// use seen::clock::{Clock, ManualClock};
/// use std::time::Duration;
///
/// let clock = ManualClock::new(Duration::from_secs(86_400));
/// let theirs = clock.clone();
/// clock.advance(Duration::from_secs(60));
/// assert_eq!(theirs.now(), Duration::from_secs(86_460));
/// ```
#[derive(Clone)]
pub struct ManualClock {
    nanos: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock that reads `start` until moved.
    pub fn new(start: Duration) -> Self {
        Self {
            nanos: Arc::new(AtomicU64::new(as_nanos(start))),
        }
    }

    /// Moves the clock to `time` (backwards too).
    pub fn set(&self, time: Duration) {
        self.nanos.store(as_nanos(time), Ordering::SeqCst);
    }

    /// Moves the clock forward by `by` (saturating at `u64::MAX` nanoseconds, as
    /// [`set`](Self::set) does).
    pub fn advance(&self, by: Duration) {
        let by = as_nanos(by);
        let _ = self
            .nanos
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |t| {
                Some(t.saturating_add(by))
            });
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Duration {
        Duration::from_nanos(self.nanos.load(Ordering::SeqCst))
    }
}

impl fmt::Debug for ManualClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ManualClock").field(&self.now()).finish()
    }
}

impl<C: Clock + ?Sized> Clock for std::sync::Arc<C> {
    fn now(&self) -> Duration {
        (**self).now()
    }

    fn is_wall_clock(&self) -> bool {
        (**self).is_wall_clock()
    }
}

/// Nanoseconds, saturating at `u64::MAX` (the year 2554).
pub(crate) fn as_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
