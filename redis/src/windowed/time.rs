//! The filter's time: the server's `TIME`, carried by the monotonic clock between readings, or
//! a clock the caller gave; the generation it falls in.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis::Value;
use seen::clock::Clock;

use super::SharedWindowedBloomFilter;
use super::scripts::TIME;
use crate::server::{Batch, Via};
use crate::{Error, Server, names};

/// How often a handle on the server's time reads `TIME` again, so that its monotonic clock's
/// drift stays far below a round trip.
pub(super) const RESYNC: Duration = Duration::from_secs(600);

/// Where a handle takes the time from.
pub(super) enum Time {
    /// The server's `TIME`, carried by the monotonic clock since it was read.
    Server(Mutex<Synced>),
    /// A clock the caller gave.
    Clock(Arc<dyn Clock>),
}

/// A reading of the server's time: what it said, and the local instant it said it at.
#[derive(Clone, Copy)]
pub(crate) struct Synced {
    pub(crate) server: Duration,
    pub(super) at: Instant,
}

/// The request that reads the server's time (on the description's node).
pub(super) fn time_batch(name: &str) -> Batch {
    let mut batch = Batch::default();
    let key = names::meta(name);
    let k = batch.key(&key);
    batch.push_script(k, &TIME, &[&key], &[]);
    batch
}

/// The reading of `TIME`'s reply, placed at the middle of the round trip.
pub(super) fn after_time(name: &str, sent: Instant, replies: &[Value]) -> Result<Synced, Error> {
    let got = Instant::now();
    let number = |v: &Value| match v {
        Value::BulkString(b) => std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.parse::<u64>().ok()),
        Value::Int(i) => u64::try_from(*i).ok(),
        _ => None,
    };
    let parsed = match replies.first() {
        Some(Value::Array(parts)) if parts.len() == 2 => number(&parts[0]).zip(number(&parts[1])),
        _ => None,
    };
    // The microseconds of a second: more is no time (and could pass the end of a `Duration`).
    let Some((secs, micros)) = parsed.filter(|&(_, micros)| micros < 1_000_000) else {
        return Err(Error::corrupt(
            &names::meta(name),
            format!("TIME answered {replies:?}"),
        ));
    };
    Ok(Synced {
        server: Duration::new(secs, (micros * 1000) as u32),
        at: sent + (got - sent) / 2,
    })
}

/// The server's time, read now.
pub(crate) async fn server_time(server: &Server, via: Via, name: &str) -> Result<Synced, Error> {
    let sent = Instant::now();
    after_time(name, sent, &server.send(via, &time_batch(name)).await?)
}

/// A moment of the filter: the generation and the time it was computed from.
#[derive(Clone, Copy)]
pub(super) struct Now {
    pub(super) generation: u64,
    pub(super) nanos: u128,
}

impl SharedWindowedBloomFilter {
    /// The current generation by this handle's time: the time since the Unix epoch divided by
    /// the period.
    ///
    /// # Errors
    ///
    /// The server's errors, when it is time to read `TIME` again.
    pub fn generation(&self) -> Result<u64, Error> {
        Ok(self.server.block_on(self.now(Via::Blocking))?.generation)
    }

    pub(super) fn moment(&self, time: Duration) -> Now {
        let nanos = time.as_nanos();
        Now {
            // At most 2^63 (292 million years of 1 ms periods), so that the generations
            // around it (`g + 2`, `g + n + 2`) never overflow, whatever time a clock gives.
            generation: u64::try_from(nanos / u128::from(self.period_ns))
                .unwrap_or(u64::MAX)
                .min(1 << 63),
            nanos,
        }
    }

    /// The time now, or `None` if the server's time must be read again first.
    pub(super) fn cached_now(&self) -> Option<Now> {
        match &self.time {
            Time::Clock(clock) => Some(self.moment(clock.now())),
            Time::Server(synced) => {
                let synced = *synced.lock().unwrap_or_else(|e| e.into_inner());
                let elapsed = synced.at.elapsed();
                // Saturating: a server's time may be the last a `Duration` holds.
                (elapsed < RESYNC).then(|| self.moment(synced.server.saturating_add(elapsed)))
            }
        }
    }

    pub(super) fn store_sync(&self, fresh: Synced) -> Now {
        if let Time::Server(synced) = &self.time {
            *synced.lock().unwrap_or_else(|e| e.into_inner()) = fresh;
        }
        self.moment(fresh.server.saturating_add(fresh.at.elapsed()))
    }

    /// The time now, reading the server's `TIME` again when it is due.
    pub(super) async fn now(&self, via: Via) -> Result<Now, Error> {
        match self.cached_now() {
            Some(now) => Ok(now),
            None => Ok(self.store_sync(server_time(&self.server, via, &self.name).await?)),
        }
    }
}
