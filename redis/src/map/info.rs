//! What a shared map holds, counted on the server: [`SharedOverwriteMap::info`].

use std::fmt;

use redis::Value;

use super::SharedOverwriteMap;
use crate::server::{Batch, Via};
use crate::{Error, guard};

/// What a [`SharedOverwriteMap`] holds, counted by the server (one round trip, no download):
/// RedisBloom's `BF.CARD` and `BF.INFO` for the map. `Display` gives a log line.
///
/// ```no_run
/// use seen_redis::{Server, SharedOverwriteMap};
/// let server = Server::open("redis://127.0.0.1:6379")?;
/// let map = SharedOverwriteMap::builder("inbox", 1_000_000).open_or_create(&server)?;
/// let info = map.info()?;
/// if info.fill() > 0.5 {
///     eprintln!("{info}: sized too small, it forgets soon");
/// }
/// # Ok::<(), seen_redis::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct SharedMapInfo {
    /// The map's slots.
    pub buckets: u64,
    /// The slots that hold an item's fingerprint, **estimated** from the bits set: a
    /// fingerprint is a uniform nonzero 64-bit value, 32 bits set on average, so the estimate
    /// is the bits set over 32, within about `12.5% / sqrt(occupied)` of the count (under 0.2%
    /// from 10,000 occupied slots). The server counts bits fast (`BITCOUNT`); it has no
    /// command that counts nonzero 8-byte slots.
    pub occupied: u64,
    /// The claims' leases the server holds: claims not committed or forgotten yet, with those
    /// whose lease has passed that no claim has taken over yet (exact).
    pub leases: u64,
}

impl SharedMapInfo {
    /// The share of slots occupied, `occupied / buckets` (0 to about 1): how soon the map
    /// forgets (each new item overwrites whatever its slot held).
    pub fn fill(&self) -> f64 {
        self.occupied as f64 / self.buckets as f64
    }
}

impl fmt::Display for SharedMapInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "SharedOverwriteMap: {} buckets, about {} occupied ({:.1}%), {} claim leases",
            self.buckets,
            self.occupied,
            self.fill() * 100.0,
            self.leases
        )
    }
}

impl SharedOverwriteMap {
    /// What the map holds ([`SharedMapInfo`]): its buckets, the slots occupied (estimated from
    /// the bits set) and the claims' leases. One round trip; the server counts every byte of
    /// the map (`BITCOUNT`): for monitoring, not per item.
    ///
    /// # Errors
    ///
    /// [`Error::Missing`] if a shard or its leases hash is lost; the server's errors.
    pub fn info(&self) -> Result<SharedMapInfo, Error> {
        self.server.block_on(self.info_via(Via::Blocking))
    }

    /// [`info`](Self::info), on the tokio connection.
    ///
    /// # Errors
    ///
    /// As [`info`](Self::info).
    pub async fn info_async(&self) -> Result<SharedMapInfo, Error> {
        self.info_via(Via::Async).await
    }

    async fn info_via(&self, via: Via) -> Result<SharedMapInfo, Error> {
        self.after_count(&self.server.send(via, &self.count_batch()).await?)
    }

    /// Per shard: `BITCOUNT` of its slots (not its guard), then the read of its guard; `HLEN`
    /// of its leases hash, then the hash's guard field. A guard there after a count means the
    /// key was there during it (a lost key is never made again with its guard).
    fn count_batch(&self) -> Batch {
        let mut batch = Batch::default();
        for s in 0..self.keys.len() {
            let (key, leases) = (&self.keys[s], &self.leases[s]);
            let k = batch.key(key);
            guard::count(&mut batch, k, key, self.guard_byte(s));
            let k = batch.key(leases);
            let mut len = redis::cmd("HLEN");
            len.arg(leases);
            batch.push(k, len);
            let mut get = redis::cmd("HGET");
            get.arg(leases).arg("guard");
            batch.push(k, get);
        }
        batch
    }

    fn after_count(&self, replies: &[Value]) -> Result<SharedMapInfo, Error> {
        let (mut bits, mut leases) = (0u64, 0u64);
        for (s, four) in replies.chunks(4).enumerate() {
            bits += guard::counted(
                &self.name,
                &self.keys[s],
                self.id,
                four.get(..2).unwrap_or(&[]),
            )?;
            let key = &self.leases[s];
            match four.get(3) {
                Some(Value::BulkString(b)) if self.id.is(b) => {}
                _ => {
                    return Err(Error::Missing {
                        name: self.name.clone(),
                        key: key.clone(),
                    });
                }
            }
            // Its fields: one per lease, and the guard.
            leases += match four.get(2) {
                Some(Value::Int(n)) if *n >= 0 => (*n as u64).saturating_sub(1),
                other => return Err(Error::corrupt(key, format!("HLEN answered {other:?}"))),
            };
        }
        Ok(SharedMapInfo {
            buckets: self.buckets,
            occupied: (bits as f64 / 32.0).round() as u64,
            leases,
        })
    }
}
