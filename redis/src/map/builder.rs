//! [`SharedMapBuilder`]: the parameters of a shared map to create or open, the description they
//! make, and the creation of its shards.

use std::sync::LazyLock;
use std::time::Duration;

use seen::builder::MapSize;
use seen::hash::{ItemHasher, StableHasher};

use super::{DEFAULT_SHARD_SLOTS, MAX_SHARD_SLOTS, SharedOverwriteMap};
use crate::guard::{Id, fence};
use crate::meta::{self, IfExists, Meta};
use crate::script::Lua;
use crate::server::{Batch, Via};
use crate::{Error, Server, names};

/// A shard's creation with its leases (`map/claim.rs`): every slot empty and the guard set,
/// and the leases hash with its guard field, in one atomic step, replacing whatever the keys
/// held unless they are a later creation's ([`guard`](crate::guard)).
pub(super) static CREATE: LazyLock<Lua> = LazyLock::new(|| {
    Lua::new(
        "map create",
        concat!(
            fence!(),
            r"-- KEYS[1]: a shard, KEYS[2]: its leases. ARGV[1]: the guard's offset, ARGV[2]: the
-- creation id. Returns 1 if made, -1 if a later creation's keys are there (left alone).
if newer_string(KEYS[1], tonumber(ARGV[1])) then return -1 end
if redis.call('TYPE', KEYS[2])['ok'] == 'hash' and newer(redis.call('HGET', KEYS[2], 'guard')) then
  return -1
end
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('SETRANGE', KEYS[1], tonumber(ARGV[1]), ARGV[2])
redis.call('HSET', KEYS[2], 'guard', ARGV[2])
return 1"
        ),
    )
});

/// The parameters of a [`SharedOverwriteMap`] to create: [`SharedOverwriteMap::builder`].
#[derive(Clone, Debug)]
pub struct SharedMapBuilder {
    pub(super) name: String,
    pub(super) size: MapSize,
    pub(super) shards: Option<u32>,
    pub(super) seed: u64,
    pub(super) lease: Duration,
}

impl SharedMapBuilder {
    /// The number of string keys the slots are cut into (default: one per 64 MiB of slots, at
    /// least one). More shards spread a map over a cluster's nodes. Raised if a shard would pass
    /// 512 MiB, lowered to 16,384 (a cluster's slots) and to the bucket count.
    pub fn shards(mut self, shards: u32) -> Self {
        self.shards = Some(shards.max(1));
        self
    }

    /// The hasher's seed (default 0, the seed of the local maps' default hasher).
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// The bucket count, the shard count and the description this builder asks for.
    pub(super) fn plan(&self) -> Result<(u64, u32, Meta), Error> {
        let buckets = self.size.buckets()?;
        if buckets == 0 {
            return Err(seen::Error::ZeroBuckets.into());
        }
        let least = buckets.div_ceil(MAX_SHARD_SLOTS);
        let asked = match self.shards {
            Some(asked) => u64::from(asked),
            None => buckets.div_ceil(DEFAULT_SHARD_SLOTS),
        };
        // No empty shard: as many shards as runs of `per` slots cover the buckets.
        let shards = names::shard_count(
            asked,
            least,
            buckets,
            "buckets",
            names::MAX_SHARDS * MAX_SHARD_SLOTS,
        )?;
        Ok((buckets, shards, describe(buckets, shards, self.seed)))
    }

    /// How long a claim holds its item unless committed or renewed (default
    /// [`DEFAULT_LEASE`](crate::DEFAULT_LEASE)): see [`SharedClaim`](crate::SharedClaim). A setting of this
    /// handle, not of the map: each consumer picks its own.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// Creates the map on `server`, every slot empty: each shard with its guard byte and its
    /// leases, then the description (so that no process opens it before its shards are there).
    ///
    /// # Errors
    ///
    /// [`Error::Exists`] if a map of this name and these parameters exists (use
    /// [`open_or_create`](Self::open_or_create) for the line every process of a service
    /// runs); [`Error::Mismatch`] if the name holds a map with other parameters (naming the
    /// first) or another kind of structure; [`Error::Local`] for a size the library refuses (0
    /// buckets, a probability outside (0, 1)); [`Error::InvalidName`]; the server's errors.
    pub fn create(&self, server: &Server) -> Result<SharedOverwriteMap, Error> {
        server.block_on(self.create_or(server, Via::Blocking, IfExists::Fail))
    }

    /// Opens the map if one of this name and these parameters exists, else creates it: the
    /// line every process of a service runs. A map whose shards were lost is opened, and
    /// reports [`Error::Missing`] on every operation (destroy it and create it again to start
    /// it empty).
    ///
    /// # Errors
    ///
    /// As [`create`](Self::create), except that an existing map is no error.
    pub fn open_or_create(&self, server: &Server) -> Result<SharedOverwriteMap, Error> {
        server.block_on(self.create_or(server, Via::Blocking, IfExists::Open))
    }

    /// [`create`](Self::create), on the tokio connection.
    ///
    /// # Errors
    ///
    /// As [`create`](Self::create).
    pub async fn create_async(&self, server: &Server) -> Result<SharedOverwriteMap, Error> {
        self.create_or(server, Via::Async, IfExists::Fail).await
    }

    /// [`open_or_create`](Self::open_or_create), on the tokio connection.
    ///
    /// # Errors
    ///
    /// As [`open_or_create`](Self::open_or_create).
    pub async fn open_or_create_async(&self, server: &Server) -> Result<SharedOverwriteMap, Error> {
        self.create_or(server, Via::Async, IfExists::Open).await
    }

    async fn create_or(
        &self,
        server: &Server,
        via: Via,
        if_exists: IfExists,
    ) -> Result<SharedOverwriteMap, Error> {
        let (mut map, meta) = self.map(server)?;
        let shards = |id| map.create_batch(id);
        map.id = meta::create_with(server, via, &self.name, &meta, shards, if_exists).await?;
        Ok(map)
    }

    pub(super) fn map(&self, server: &Server) -> Result<(SharedOverwriteMap, Meta), Error> {
        let (buckets, shards, meta) = self.plan()?;
        let map = SharedOverwriteMap::new(server, &self.name, buckets, shards, self.seed, meta.id)
            .with_lease(self.lease);
        Ok((map, meta))
    }
}

/// The description of a map.
pub(super) fn describe(buckets: u64, shards: u32, seed: u64) -> Meta {
    let hasher = StableHasher::new().identity().map(|i| i.name().to_owned());
    Meta::new("map")
        .with("buckets", buckets)
        .with("shards", shards)
        .with("hasher", hasher.unwrap_or_default())
        .with("seed", seed)
}

impl SharedOverwriteMap {
    /// The creation of every shard with its guard and its leases ([`CREATE`]).
    pub(super) fn create_batch(&self, id: Id) -> Batch {
        let mut batch = Batch::default();
        for s in 0..self.keys.len() {
            let k = batch.key(&self.keys[s]);
            let guard = self.guard_byte(s).to_string().into_bytes();
            let args = [guard, id.bytes()];
            batch.push_script(k, &CREATE, &[&self.keys[s], &self.leases[s]], &args);
        }
        batch
    }
}
