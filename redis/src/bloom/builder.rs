//! [`SharedBloomBuilder`]: the parameters of a shared Bloom filter to create or open, and the
//! description they make.

use seen::Layout;
use seen::hash::{ItemHasher, StableHasher};
use seen::sizing::{BlockedSizing, blocked};

use super::{DEFAULT_SHARD_BYTES, MAX_SHARD_BYTES, SharedBloomFilter};
use crate::meta::{self, IfExists, Meta};
use crate::server::Via;
use crate::{Error, Server, names};

/// The parameters of a [`SharedBloomFilter`] to create or open:
/// [`SharedBloomFilter::builder`].
#[derive(Clone, Debug)]
pub struct SharedBloomBuilder {
    pub(super) name: String,
    pub(super) capacity: u64,
    pub(super) fpr: f64,
    pub(super) layout: Layout,
    pub(super) shards: Option<u32>,
    pub(super) seed: u64,
}

impl SharedBloomBuilder {
    /// The target false-positive rate at capacity (default 0.01).
    pub fn fpr(mut self, fpr: f64) -> Self {
        self.fpr = fpr;
        self
    }

    /// The layout (default [`Layout::Word`]).
    pub fn layout(mut self, layout: Layout) -> Self {
        self.layout = layout;
        self
    }

    /// The number of string keys the bits are cut into (default: one per 64 MiB, at least
    /// one). More shards spread a filter over a cluster's nodes; each shard is one key. Raised
    /// if a shard would pass 512 MiB, the most one string can address; lowered to 16,384 (a
    /// cluster's slots) and so that no shard is empty.
    pub fn shards(mut self, shards: u32) -> Self {
        self.shards = Some(shards.max(1));
        self
    }

    /// The hasher's seed (default 0, the seed of the local filters' default hasher).
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// The description this builder asks for.
    pub(super) fn meta(&self) -> Result<(Meta, BlockedSizing, u32), Error> {
        let sizing = blocked(self.capacity, self.fpr, self.layout)?;
        let block_bytes = u64::from(self.layout.block_bits() / 8);
        let bytes = sizing.blocks * block_bytes;
        let asked = match self.shards {
            Some(asked) => u64::from(asked),
            None => bytes.div_ceil(DEFAULT_SHARD_BYTES),
        };
        let least = bytes.div_ceil(MAX_SHARD_BYTES);
        let shards = names::shard_count(
            asked,
            least,
            sizing.blocks,
            "bits",
            names::MAX_SHARDS * MAX_SHARD_BYTES * 8,
        )?;
        Ok((describe(&sizing, shards, self.seed), sizing, shards))
    }

    /// Creates the filter on `server`, empty: its description, then every shard at its full
    /// length with its guard, then the description's `state=ready` (processes that open it
    /// meanwhile wait for that, up to the server's timeout).
    ///
    /// # Errors
    ///
    /// [`Error::Exists`] if a filter of this name and these parameters exists (use
    /// [`open_or_create`](Self::open_or_create) for the line every process of a service
    /// runs); [`Error::Mismatch`] if the name holds a structure with other parameters (naming
    /// the first); [`Error::Local`] for parameters the library refuses (capacity 0, a rate
    /// outside (0, 1)); [`Error::InvalidName`]; the server's errors.
    pub fn create(&self, server: &Server) -> Result<SharedBloomFilter, Error> {
        server.block_on(self.create_or(server, Via::Blocking, IfExists::Fail))
    }

    /// Opens the filter if one of this name and these parameters exists, else creates it: the
    /// line every process of a service runs (the first creates, the others open). A filter
    /// whose shards were lost is opened, and reports [`Error::Missing`] on every operation:
    /// nothing here makes a lost shard again (destroy the filter and create it for that).
    ///
    /// # Errors
    ///
    /// As [`create`](Self::create), except that an existing filter is no error;
    /// [`Error::Unfinished`] if another process began creating it and did not finish within
    /// the server's timeout.
    pub fn open_or_create(&self, server: &Server) -> Result<SharedBloomFilter, Error> {
        server.block_on(self.create_or(server, Via::Blocking, IfExists::Open))
    }

    /// [`create`](Self::create), on the tokio connection.
    ///
    /// # Errors
    ///
    /// As [`create`](Self::create).
    pub async fn create_async(&self, server: &Server) -> Result<SharedBloomFilter, Error> {
        self.create_or(server, Via::Async, IfExists::Fail).await
    }

    /// [`open_or_create`](Self::open_or_create), on the tokio connection.
    ///
    /// # Errors
    ///
    /// As [`open_or_create`](Self::open_or_create).
    pub async fn open_or_create_async(&self, server: &Server) -> Result<SharedBloomFilter, Error> {
        self.create_or(server, Via::Async, IfExists::Open).await
    }

    async fn create_or(
        &self,
        server: &Server,
        via: Via,
        if_exists: IfExists,
    ) -> Result<SharedBloomFilter, Error> {
        let (meta, sizing, shards) = self.meta()?;
        let mut filter =
            SharedBloomFilter::new(server, &self.name, sizing, shards, self.seed, meta.id);
        let shards = |id| filter.create_batch(id);
        filter.id = meta::create_with(server, via, &self.name, &meta, shards, if_exists).await?;
        Ok(filter)
    }
}

/// The shard count `shards` comes to once no shard is left without a block: shards of
/// `blocks.div_ceil(shards)` blocks cover the blocks in this many (8 blocks asked in 5 shards
/// are 4 shards of 2; a fifth would be empty, a key of no bytes).
pub(super) fn no_empty_shard(blocks: u64, shards: u64) -> u64 {
    blocks.div_ceil(blocks.div_ceil(shards.clamp(1, blocks)))
}

/// The description of a filter.
pub(super) fn describe(sizing: &BlockedSizing, shards: u32, seed: u64) -> Meta {
    Meta::new("bloom")
        .with(
            "layout",
            match sizing.layout {
                Layout::Line => "line",
                _ => "word",
            },
        )
        .with("capacity", sizing.capacity)
        .with("fpr", format!("{:?}", sizing.fpr))
        .with("blocks", sizing.blocks)
        .with("hashes", sizing.hashes)
        .with("shards", shards)
        .with(
            "hasher",
            StableHasher::new()
                .identity()
                .map(|i| i.name().to_owned())
                .unwrap_or_default(),
        )
        .with("seed", seed)
}
