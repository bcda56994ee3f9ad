//! [`SharedBloomFilter`]: the crate's Bloom filter (word or line layout) in a server's string
//! keys, block for block the local [`AtomicBloomFilter`]'s, so that a filter moves between the
//! two bit for bit ([`upload`](SharedBloomFilter::upload),
//! [`download`](SharedBloomFilter::download)).
//!
//! Its design and the atomicity argument of each step are in [`SharedBloomFilter`]'s docs (so
//! that they are rendered).

use std::hash::Hash;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use seen::hash::{Hash128, ItemHasher, StableHasher};
use seen::sizing::{BlockedSizing, blocked};
use seen::{BloomInfo, Layout};

use crate::forward::in_requests;
use crate::guard::Id;
use crate::meta::{self, Meta};
use crate::server::Via;
use crate::{Error, Server, names};

mod builder;
mod protocol;
mod transfer;

pub use builder::SharedBloomBuilder;
use builder::{describe, no_empty_shard};
use protocol::Located;

/// The most a shard may hold: the server addresses a string's bits with offsets below 2^32.
/// (Bit offsets below 2^32: 512 MiB, less room for a block's rounding and the 8 guard bytes.)
pub(crate) const MAX_SHARD_BYTES: u64 = (512 << 20) - 128;

/// The size a shard is cut to unless the caller asks for more shards.
pub(crate) const DEFAULT_SHARD_BYTES: u64 = 64 << 20;

/// A Bloom filter every process and machine that opens it by name shares: the same answers
/// as an [`AtomicBloomFilter`](seen::AtomicBloomFilter) of the same parameters holding the same items, kept in a Redis
/// or Valkey server (or cluster) in plain string keys, with no module.
///
/// # Guarantees
///
/// - **No false negatives**: once an insert has returned (`Ok`), every lookup from any client
///   finds the item, as long as the server keeps its keys (persistence and failover: see the
///   crate docs).
/// - **Exactly once**, in both layouts: among any number of clients inserting the same new
///   item at once, exactly one is told `true` (the argument is
///   [below](#the-protocol-and-why-each-step-is-atomic-enough)).
/// - **Errors answer nothing**: a batch that fails returns an [`Error`] and no answer for any
///   of its items, so no item is ever reported new when its write is unknown. Retrying is
///   safe ([`Error`] says what a retry answers).
/// - **Round trips**: a lookup or a batch of lookups, one; an insert or a batch of inserts,
///   two, or one after a batch whose items were mostly new (see "Insert" below); per
///   [`REQUEST_ITEMS`](crate::REQUEST_ITEMS) items.
/// - **Lost is never empty**: a shard that is gone (`FLUSHALL`, `DEL`, an eviction, a restart
///   without persistence) is [`Error::Missing`] for every read and write, from every client,
///   also one that opens the filter afterwards; no write brings it back as an empty shard.
///
/// # Where the bits are
///
/// The filter's blocks are cut into `shards` runs of consecutive blocks, shard `s` in the
/// string key `seen:{NAME:s}:bits`. Word `w` of a shard (its blocks' words in order) is bits
/// `64·w` to `64·w + 63` of the string; the server numbers a string's bits from the most
/// significant bit of byte 0, so the crate's bit `b` of that word (least significant = 0) is
/// the string's bit `64·w + 63 - b`, and `BITFIELD ... GET i64 64·w` reads the word whole: the
/// string holds each word as its 8 big-endian bytes. After the bits, each shard holds an 8-byte
/// **guard**, the filter's creation id (8 random bytes drawn by its creator), written when the
/// shard is created and never again.
///
/// # The protocol, and why each step is atomic enough
///
/// - **Create**: the description first, `state=creating` with a fresh creation id, by
///   `SET ... NX GET` (among racing creators exactly one writes it; the others open it, or
///   refuse other parameters, having written nothing); then that creator alone makes every
///   shard empty at its full length with its guard (one script per shard), once; then
///   `state=ready`. Openers wait for `ready`. Nothing else ever makes a shard: a lost shard
///   stays lost.
/// - **Lookup** (one round trip): per shard touched, `BITFIELD_RO` commands of the guard's
///   `GET i64` and a `GET i64` per word that holds a bit of an item (up to 512 a command). Each
///   command reads a consistent value, the guard with the words: a guard that is not the
///   handle's id (0: the shard is gone, or a write made its key again after a loss; another
///   id: the filter was created again under its name) is [`Error::Missing`] and no answer is
///   read from that command. An item is reported if every bit is set.
/// - **Insert** (two round trips, the second only for items with a bit unset; one after a
///   mostly new batch):
///   1. the lookup's read; skipped when most items of the handle's previous insert batch were
///      new (a new item has most of its bits unset, and the read would only cost a round
///      trip): every bit of every item then counts as unset;
///   2. per item with a bit unset, `SET u1 o1 1 SET u1 o2 1 ...` over the bits the read found
///      unset, all in one `BITFIELD key ...` command, which carries the guard's `GET i64`
///      first and the fields of several items of the shard (up to 512 fields). One
///      `BITFIELD` is one atomic command that runs its fields in order and returns every old
///      value; the item is new if one of its was 0. A shard lost before the command: the
///      `BITFIELD` creates its key (zeroed, without the guard) and its own reply reads the
///      guard as 0, so the batch answers nothing ([`Error::Missing`]); every later command on
///      that key, from any client, reads a guard of 0 too.
///
///   Exactly one of any number of racing inserts of one new item is told "new", in both
///   layouts: bits are only ever set, so the unset bits a client read include every bit still
///   unset when its write runs. The first write of the item's fields to run (they are in one
///   command: nothing runs between them) therefore leaves all its bits set, and is "new" if
///   it set one; every later one (from another client, or the same item again later in the
///   batch) finds all its bits set and answers "not new". (The local line layout can tell two
///   racers "new", since it sets 8 words one after another; on the server one command sets
///   them all.) An item whose bits were all set at the read is "not new" with no write: an
///   insert of it had completed, or it is a false positive, as locally. A write without a read
///   sends all the item's bits, a superset of those unset when it runs: the same argument
///   holds, for racers with and without a read alike.
/// - A batch sends every shard's commands in one pipeline (a cluster client splits it by node),
///   so a batch of any size is one or two round trips. After a read only the bits that are
///   missing are written: writes cost the server per bit, and a repeated item costs only its
///   read.
///
/// What a failover can lose: replication is asynchronous, so bits acknowledged by a primary
/// that fails before its replicas copy them are lost (`WAIT` after a batch is the lever).
///
/// # Examples
///
/// ```no_run
/// use seen_redis::{Server, SharedBloomFilter};
/// let server = Server::open("redis://127.0.0.1:6379")?;
/// let filter = SharedBloomFilter::builder("orders", 1_000_000).fpr(0.01).create(&server)?;
/// assert!(filter.insert("order-1")?);
/// assert!(!filter.insert("order-1")?);
/// // Another process, on another machine:
/// let same = SharedBloomFilter::open(&server, "orders")?;
/// assert!(same.contains("order-1")?);
/// # Ok::<(), seen_redis::Error>(())
/// ```
pub struct SharedBloomFilter {
    server: Server,
    name: String,
    /// The creation id of the filter this handle opened ([`guard`](crate::guard)).
    id: Id,
    sizing: BlockedSizing,
    hasher: StableHasher,
    keys: Vec<String>,
    blocks_per_shard: u64,
    /// Whether most items of the last insert batch were new: the next batch then writes every
    /// bit at once, without the read (see "Insert" above).
    mostly_new: AtomicBool,
}

impl std::fmt::Debug for SharedBloomFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedBloomFilter")
            .field("name", &self.name)
            .field("sizing", &self.sizing)
            .field("shards", &self.keys.len())
            .finish_non_exhaustive()
    }
}

impl SharedBloomFilter {
    /// The parameters of a filter called `name` to create or open: `capacity` items at the
    /// default rate (0.01) and layout ([`Layout::Word`]).
    pub fn builder(name: &str, capacity: u64) -> SharedBloomBuilder {
        SharedBloomBuilder {
            name: name.to_owned(),
            capacity,
            fpr: 0.01,
            layout: Layout::Word,
            shards: None,
            seed: 0,
        }
    }

    /// Opens the filter called `name`, with the parameters it was created with.
    ///
    /// # Errors
    ///
    /// [`Error::Missing`] if there is none; [`Error::Mismatch`] if `name` holds another kind
    /// of structure; [`Error::Corrupt`] if its description is not this crate's.
    pub fn open(server: &Server, name: &str) -> Result<Self, Error> {
        server.block_on(Self::open_via(server, Via::Blocking, name))
    }

    /// [`open`](Self::open), on the tokio connection.
    ///
    /// # Errors
    ///
    /// As [`open`](Self::open).
    pub async fn open_async(server: &Server, name: &str) -> Result<Self, Error> {
        Self::open_via(server, Via::Async, name).await
    }

    async fn open_via(server: &Server, via: Via, name: &str) -> Result<Self, Error> {
        let stored = meta::open(server, via, name, &Self::like()).await?;
        Self::from_meta(server, name, &stored)
    }

    /// The fields of a description, for reading one.
    fn like() -> Meta {
        let sizing = blocked(1, 0.5, Layout::Word).expect("a valid sizing");
        describe(&sizing, 1, 0)
    }

    fn from_meta(server: &Server, name: &str, stored: &Meta) -> Result<Self, Error> {
        let layout = match stored.get::<String>(name, "layout")?.as_str() {
            "word" => Layout::Word,
            "line" => Layout::Line,
            other => {
                return Err(Error::corrupt(
                    &names::meta(name),
                    format!("layout {other}"),
                ));
            }
        };
        let capacity = stored.get(name, "capacity")?;
        let fpr = stored.get(name, "fpr")?;
        let shards = stored.get(name, "shards")?;
        let seed = stored.get(name, "seed")?;
        let sizing = blocked(capacity, fpr, layout)?;
        // The stored description must be the one this version computes for these parameters:
        // another sizing would put items at other bits.
        let expected = describe(&sizing, shards, seed);
        if expected.fields != stored.fields {
            let (field, have, want) = expected
                .fields
                .iter()
                .zip(&stored.fields)
                .find(|(a, b)| a != b)
                .map(|((f, want), (_, have))| (*f, have.clone(), want.clone()))
                .unwrap_or(("fields", String::new(), String::new()));
            return Err(Error::Mismatch {
                name: name.to_owned(),
                field,
                stored: have,
                requested: want,
            });
        }
        if shards == 0
            || u64::from(shards) > sizing.blocks.min(names::MAX_SHARDS)
            || no_empty_shard(sizing.blocks, u64::from(shards)) != u64::from(shards)
        {
            return Err(Error::corrupt(
                &names::meta(name),
                format!("{shards} shards"),
            ));
        }
        Ok(Self::new(server, name, sizing, shards, seed, stored.id))
    }

    fn new(
        server: &Server,
        name: &str,
        sizing: BlockedSizing,
        shards: u32,
        seed: u64,
        id: Id,
    ) -> Self {
        let blocks_per_shard = sizing.blocks.div_ceil(u64::from(shards));
        Self {
            server: server.clone(),
            name: name.to_owned(),
            id,
            sizing,
            hasher: StableHasher::with_seed(seed),
            keys: (0..shards).map(|s| names::shard(name, s, "bits")).collect(),
            blocks_per_shard,
            mostly_new: AtomicBool::new(false),
        }
    }

    /// The filter's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The sizing: capacity, rate, layout, bits, `k`; the same as a local filter's.
    pub fn sizing(&self) -> BlockedSizing {
        self.sizing
    }

    /// The number of distinct items the filter is sized for.
    pub fn capacity(&self) -> u64 {
        self.sizing.capacity
    }

    /// The target false-positive rate at capacity.
    pub fn fpr(&self) -> f64 {
        self.sizing.fpr
    }

    /// What the filter is and holds: capacity, rate, layout, bytes, and the distinct items
    /// and false-positive rate estimated from its bits set ([`BloomInfo`], as the local
    /// filter's `info()`; `Display` for a log line). One round trip; the server counts every
    /// byte of the filter (`BITCOUNT`): for monitoring, not per item.
    ///
    /// # Errors
    ///
    /// [`Error::Missing`] if a shard is lost; the server's errors.
    pub fn info(&self) -> Result<BloomInfo, Error> {
        self.server.block_on(self.info_via(Via::Blocking))
    }

    /// [`info`](Self::info), on the tokio connection.
    ///
    /// # Errors
    ///
    /// As [`info`](Self::info).
    pub async fn info_async(&self) -> Result<BloomInfo, Error> {
        self.info_via(Via::Async).await
    }

    async fn info_via(&self, via: Via) -> Result<BloomInfo, Error> {
        self.after_count(&self.server.send(via, &self.count_batch()).await?)
    }

    /// The hasher: the local filters' default [`StableHasher`], with the filter's seed.
    pub fn hasher(&self) -> &StableHasher {
        &self.hasher
    }

    /// The string keys the bits are in, shard by shard.
    pub fn keys(&self) -> &[String] {
        &self.keys
    }

    fn words_per_block(&self) -> u64 {
        u64::from(self.sizing.layout.block_bits() / 64)
    }

    /// The number of words in shard `s`.
    fn shard_words(&self, s: usize) -> u64 {
        let first = s as u64 * self.blocks_per_shard;
        (self.sizing.blocks - first).min(self.blocks_per_shard) * self.words_per_block()
    }

    /// The driver of inserts: the requests of [`REQUEST_ITEMS`](crate::REQUEST_ITEMS) items
    /// in turn, each a read (unless the previous request's items were mostly new) and a write.
    async fn insert_via(
        &self,
        via: Via,
        hashes: &[Hash128],
        new: &mut Vec<bool>,
    ) -> Result<usize, Error> {
        in_requests(hashes, new, async |chunk| {
            self.insert_request(via, chunk).await
        })
        .await
    }

    async fn insert_request(&self, via: Via, hashes: &[Hash128]) -> Result<Vec<bool>, Error> {
        let items: Vec<Located> = hashes.iter().map(|&h| self.locate(h)).collect();
        let words = if self.mostly_new.load(Relaxed) {
            vec![[0; 8]; items.len()]
        } else {
            let (batch, read) = self.read_batch(&items);
            self.after_read(&items, &read, &self.server.send(via, &batch).await?)?
        };
        let (batch, write) = self.write_batch(&items, &words);
        let answers = match self.server.send(via, &batch).await {
            Ok(replies) => self.after_write(&items, &write, &replies),
            Err(err) => Err(err),
        };
        match &answers {
            Ok(answers) if !answers.is_empty() => {
                let new = answers.iter().filter(|&&b| b).count();
                self.mostly_new.store(new * 2 > answers.len(), Relaxed);
            }
            Ok(_) => {}
            // Read first next time: a read finds a lost shard without writing.
            Err(_) => self.mostly_new.store(false, Relaxed),
        }
        answers
    }

    /// The driver of lookups: one read per [`REQUEST_ITEMS`](crate::REQUEST_ITEMS) items.
    async fn contains_via(
        &self,
        via: Via,
        hashes: &[Hash128],
        hits: &mut Vec<bool>,
    ) -> Result<usize, Error> {
        in_requests(hashes, hits, |chunk| self.contains_request(via, chunk)).await
    }

    async fn contains_request(&self, via: Via, hashes: &[Hash128]) -> Result<Vec<bool>, Error> {
        let items: Vec<Located> = hashes.iter().map(|&h| self.locate(h)).collect();
        let (batch, read) = self.read_batch(&items);
        let words = self.after_read(&items, &read, &self.server.send(via, &batch).await?)?;
        Ok(Self::present(&items, &words))
    }

    crate::forward::item_forms!();

    /// Inserts `item`; `Ok(true)` if it was certainly not in the filter (this call set one of
    /// its bits), `Ok(false)` if it possibly was. Exactly one of any number of clients
    /// inserting the same new item at once gets `true`. Two round trips (one if the item's
    /// bits are all set, or after a mostly new batch).
    ///
    /// # Errors
    ///
    /// [`Error::Connection`] (the write's outcome is unknown: the item may be in the filter;
    /// retrying is safe), [`Error::Server`] (refused: out of memory, a key of another type),
    /// [`Error::Missing`] (the filter's keys are gone). No error ever stands for "new".
    pub fn insert<T: Hash + ?Sized>(&self, item: &T) -> Result<bool, Error> {
        self.insert_hash(self.hasher.hash_item(item))
    }

    /// Whether `item` is possibly in the filter (`false`: certainly never inserted). One round
    /// trip.
    ///
    /// # Errors
    ///
    /// [`Error::Connection`], [`Error::Server`], [`Error::Missing`].
    pub fn contains<T: Hash + ?Sized>(&self, item: &T) -> Result<bool, Error> {
        self.contains_hash(self.hasher.hash_item(item))
    }

    /// Deletes the filter: its description first (so that no process opens it any more), then
    /// its shards. Processes that have it open get [`Error::Missing`]. Only this handle's
    /// filter is deleted: if the name holds a filter created again since (another creation
    /// id), that one is left whole and the destroy is [`Error::Missing`].
    ///
    /// # Errors
    ///
    /// [`Error::Missing`] as above; the server's errors.
    pub fn destroy(self) -> Result<(), Error> {
        let keys = (0..self.keys.len()).map(|s| (self.keys[s].clone(), self.guard_byte(s)));
        let mut deletions = crate::server::Batch::default();
        crate::guard::destroy(&mut deletions, self.id, keys);
        self.server.block_on(meta::destroy(
            &self.server,
            Via::Blocking,
            &self.name,
            self.id,
            deletions,
        ))
    }
}
