//! Clocks for the time-based rotation of a [`WindowedBloomFilter`](crate::WindowedBloomFilter):
//! the wall clock by default, or any [`Clock`] you inject (a [`ManualClock`] in tests and
//! simulations, which moves only when told to).

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
}

/// A clock that moves only when told to: for tests and simulations. Clones share one time, so a
/// test keeps a clone and advances the filter's clock from outside.
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
}

/// Nanoseconds, saturating at `u64::MAX` (the year 2554).
pub(crate) fn as_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
