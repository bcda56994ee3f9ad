//! [`SharedWindowedBloomBuilder`]: the parameters of a shared windowed filter to create or open, the
//! description they make, and the sizing of a generation.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use seen::Layout;
use seen::clock::Clock;
use seen::hash::{ItemHasher, StableHasher};
use seen::sizing::{BlockedSizing, MAX_GENERATIONS, blocked, window};

use super::SharedWindowedBloomFilter;
use super::scripts::CREATE_LEDGER;
use super::time::{Time, server_time};
use crate::bloom::{DEFAULT_SHARD_BYTES, MAX_SHARD_BYTES};
use crate::guard::Id;
use crate::meta::{self, IfExists, Meta};
use crate::server::{Batch, Via};
use crate::{Error, Server, names};

/// The parameters of a [`SharedWindowedBloomFilter`] to create: [`SharedWindowedBloomFilter::builder`].
#[derive(Clone)]
pub struct SharedWindowedBloomBuilder {
    pub(super) name: String,
    pub(super) capacity: u64,
    pub(super) fpr: f64,
    pub(super) periods: u32,
    pub(super) period: Duration,
    pub(super) layout: Layout,
    pub(super) shards: Option<u32>,
    pub(super) seed: u64,
    pub(super) clock: Option<Arc<dyn Clock>>,
}

impl std::fmt::Debug for SharedWindowedBloomBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedWindowedBloomBuilder")
            .field("name", &self.name)
            .field("capacity", &self.capacity)
            .field("fpr", &self.fpr)
            .field("periods", &self.periods)
            .field("period", &self.period)
            .field("layout", &self.layout)
            .field("shards", &self.shards)
            .field("seed", &self.seed)
            .field("clock", &self.clock.is_some())
            .finish()
    }
}

/// The parameters a filter is made of, checked and sized.
pub(super) struct Params {
    pub(super) generation: BlockedSizing,
    pub(super) fpr: f64,
    pub(super) periods: u32,
    pub(super) period_ns: u64,
    pub(super) shards: u32,
    pub(super) seed: u64,
}

impl SharedWindowedBloomBuilder {
    /// The target false-positive rate of a lookup over the whole window when every
    /// generation holds its capacity (default 0.01).
    pub fn fpr(mut self, fpr: f64) -> Self {
        self.fpr = fpr;
        self
    }

    /// The window: remember every item for at least `periods` full periods after the insert
    /// that reported it new, at most `periods + 1` (0 to 62; default 6): `periods + 1` live
    /// generations.
    pub fn periods(mut self, periods: u32) -> Self {
        self.periods = periods;
        self
    }

    /// The period, at whose multiples since the Unix epoch a new generation starts (default a
    /// day: midnight UTC): the local builder's
    /// [`rotate_every_aligned`](seen::builder::BloomBuilder::rotate_every_aligned). At least a
    /// millisecond (expiries are in milliseconds).
    ///
    /// Exactly-once inserts need every client within one generation of the others: on the
    /// server's time they agree within about a round trip (and the local clock's drift over
    /// the 10 minutes between readings of `TIME`), so keep the period far above that, a second
    /// or more; with a shorter one, two clients around a boundary can both be told "new".
    #[doc(alias = "rotate_every_aligned")]
    pub fn period(mut self, period: Duration) -> Self {
        self.period = period;
        self
    }

    /// The layout of each generation (default [`Layout::Word`], the local windowed filter's:
    /// the same bits as it). [`Layout::Line`] allows lower rates; on the server its inserts
    /// are exactly-once too (one command sets all of an item's bits).
    pub fn layout(mut self, layout: Layout) -> Self {
        self.layout = layout;
        self
    }

    /// The number of shards each generation is cut into (default: one per 64 MiB of a
    /// generation, at least one), each a key of its own; raised if a shard would pass 512 MiB,
    /// lowered to 16,384 (a cluster's slots) and so that no shard is empty.
    pub fn shards(mut self, shards: u32) -> Self {
        self.shards = Some(shards.max(1));
        self
    }

    /// The hasher's seed (default 0, the local filters' default).
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Takes the time from `clock` instead of the server (see
    /// [`with_clock`](SharedWindowedBloomFilter::with_clock)).
    pub fn clock(mut self, clock: impl Clock + 'static) -> Self {
        self.clock = Some(Arc::new(clock));
        self
    }

    pub(super) fn params(&self) -> Result<Params, Error> {
        let generation = generation_sizing(self.capacity, self.periods, self.fpr, self.layout)?;
        let period_ns = period_nanos(self.period)?;
        let block_bytes = u64::from(self.layout.block_bits() / 8);
        let bytes = generation.blocks * block_bytes;
        let asked = match self.shards {
            Some(asked) => u64::from(asked),
            None => bytes.div_ceil(DEFAULT_SHARD_BYTES),
        };
        let least = bytes.div_ceil(MAX_SHARD_BYTES);
        let shards = names::shard_count(
            asked,
            least,
            generation.blocks,
            "bits",
            names::MAX_SHARDS * MAX_SHARD_BYTES * 8,
        )?;
        Ok(Params {
            generation,
            fpr: self.fpr,
            periods: self.periods,
            period_ns,
            shards,
            seed: self.seed,
        })
    }

    /// Creates the filter on `server`: each shard's ledger (the generations created, so that a
    /// lost one is told from one never written), then the description. Reads the server's time
    /// unless a [`clock`](Self::clock) was given. Each generation's key is created by the
    /// first insert of its period.
    ///
    /// # Errors
    ///
    /// [`Error::Exists`] if a filter of this name and these parameters exists (use
    /// [`open_or_create`](Self::open_or_create) for the line every process of a service
    /// runs); [`Error::Mismatch`] if the name holds a structure with other parameters (naming
    /// the first); [`Error::Local`] for parameters the library refuses (capacity 0, a rate
    /// outside (0, 1), more than 62 periods, a period under a millisecond);
    /// [`Error::InvalidName`]; the server's errors.
    pub fn create(&self, server: &Server) -> Result<SharedWindowedBloomFilter, Error> {
        server.block_on(self.create_or(server, Via::Blocking, IfExists::Fail))
    }

    /// Opens the filter if one of this name and these parameters exists, else creates it: the
    /// line every process of a service runs. A filter whose generations or ledgers were lost
    /// is opened, and reports [`Error::Missing`] where it reads them.
    ///
    /// # Errors
    ///
    /// As [`create`](Self::create), except that an existing filter is no error.
    pub fn open_or_create(&self, server: &Server) -> Result<SharedWindowedBloomFilter, Error> {
        server.block_on(self.create_or(server, Via::Blocking, IfExists::Open))
    }

    /// [`create`](Self::create), on the tokio connection.
    ///
    /// # Errors
    ///
    /// As [`create`](Self::create).
    pub async fn create_async(&self, server: &Server) -> Result<SharedWindowedBloomFilter, Error> {
        self.create_or(server, Via::Async, IfExists::Fail).await
    }

    /// [`open_or_create`](Self::open_or_create), on the tokio connection.
    ///
    /// # Errors
    ///
    /// As [`open_or_create`](Self::open_or_create).
    pub async fn open_or_create_async(
        &self,
        server: &Server,
    ) -> Result<SharedWindowedBloomFilter, Error> {
        self.create_or(server, Via::Async, IfExists::Open).await
    }

    async fn create_or(
        &self,
        server: &Server,
        via: Via,
        if_exists: IfExists,
    ) -> Result<SharedWindowedBloomFilter, Error> {
        let params = self.params()?;
        let meta = describe(&params);
        let ledgers = |id| ledgers_batch(&self.name, params.shards, id);
        let id = meta::create_with(server, via, &self.name, &meta, ledgers, if_exists).await?;
        let time = match &self.clock {
            Some(clock) => Time::Clock(clock.clone()),
            None => Time::Server(Mutex::new(server_time(server, via, &self.name).await?)),
        };
        Ok(SharedWindowedBloomFilter::new(
            server, &self.name, params, time, id,
        ))
    }
}

/// Shard `s`'s ledger: the hash of the generations created in the shard and the end of each
/// one's life on the server's clock, with a `guard` field (the creation id) that tells a lost
/// ledger from an empty one, and this filter's from another's of the same name.
pub(super) fn ledger(name: &str, s: usize) -> String {
    names::shard(name, s as u32, "gens")
}

/// The creation of every shard's ledger ([`CREATE_LEDGER`]).
pub(super) fn ledgers_batch(name: &str, shards: u32, id: Id) -> Batch {
    let mut batch = Batch::default();
    for s in 0..shards as usize {
        let ledger = ledger(name, s);
        let k = batch.key(&ledger);
        batch.push_script(k, &CREATE_LEDGER, &[&ledger], &[b"0".to_vec(), id.bytes()]);
    }
    batch
}

/// One generation's sizing: for the word layout [`window`]'s, the local filter's; for the
/// line layout a line filter at the same per-generation rate.
pub(super) fn generation_sizing(
    capacity: u64,
    periods: u32,
    fpr: f64,
    layout: Layout,
) -> Result<BlockedSizing, Error> {
    if periods >= MAX_GENERATIONS {
        return Err(seen::Error::InvalidParameter("periods must be between 0 and 62").into());
    }
    let generations = periods + 1;
    Ok(match layout {
        Layout::Line => blocked(capacity, generation_fpr(fpr, generations), Layout::Line)?,
        _ => window(capacity, generations, fpr)?.generation,
    })
}

/// The rate each of `generations` generations is sized for so that a lookup over all of them
/// meets `fpr`: `1 - (1 - fpr)^(1/G)`, computed as [`window`] does
/// (its `generation_fpr`, checked equal by a test).
pub(super) fn generation_fpr(fpr: f64, generations: u32) -> f64 {
    -((-fpr).ln_1p() / f64::from(generations)).exp_m1()
}

/// The period in nanoseconds, checked: at least a millisecond, at most 2^64 - 1 ns.
pub(super) fn period_nanos(period: Duration) -> Result<u64, Error> {
    if period < Duration::from_millis(1) {
        return Err(seen::Error::InvalidParameter("the period must be at least 1 ms").into());
    }
    u64::try_from(period.as_nanos()).map_err(|_| {
        seen::Error::InvalidParameter("the period must be at most 2^64 - 1 ns (584 years)").into()
    })
}

/// The description of a filter.
pub(super) fn describe(params: &Params) -> Meta {
    let sizing = &params.generation;
    Meta::new("window")
        .with(
            "layout",
            match sizing.layout {
                Layout::Line => "line",
                _ => "word",
            },
        )
        .with("capacity", sizing.capacity)
        .with("fpr", format!("{:?}", params.fpr))
        .with("periods", params.periods)
        .with("period_ns", params.period_ns)
        .with("blocks", sizing.blocks)
        .with("hashes", sizing.hashes)
        .with("shards", params.shards)
        .with(
            "hasher",
            StableHasher::new()
                .identity()
                .map(|i| i.name().to_owned())
                .unwrap_or_default(),
        )
        .with("seed", params.seed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    pub(super) fn a_word_generation_is_the_local_window_generation() {
        for (periods, fpr) in [(0, 0.01), (1, 0.01), (6, 0.001), (13, 0.1), (62, 0.01)] {
            let local = window(12_345, periods + 1, fpr).unwrap();
            assert_eq!(
                generation_sizing(12_345, periods, fpr, Layout::Word).unwrap(),
                local.generation
            );
            assert_eq!(generation_fpr(fpr, periods + 1), local.generation_fpr);
            let line = generation_sizing(12_345, periods, fpr, Layout::Line).unwrap();
            assert_eq!(line.fpr, local.generation_fpr);
        }
        assert!(generation_sizing(10, 63, 0.01, Layout::Word).is_err());
        assert!(period_nanos(Duration::from_micros(999)).is_err());
        assert_eq!(period_nanos(Duration::from_millis(1)).unwrap(), 1_000_000);
    }
}
