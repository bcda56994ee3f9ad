//! [`SharedBloomFilter`]: the crate's Bloom filter (word or line layout) in a server's string
//! keys, block for block the local [`AtomicBloomFilter`]'s, so that a filter moves between the
//! two bit for bit ([`upload`](SharedBloomFilter::upload),
//! [`download`](SharedBloomFilter::download)).
//!
//! Its design and the atomicity argument of each step are in [`SharedBloomFilter`]'s docs (so
//! that they are rendered).

use std::hash::Hash;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use redis::{Cmd, Value};
use seen::hash::{Hash128, ItemHasher, StableHasher};
use seen::sizing::{BlockedSizing, blocked};
use seen::{AtomicBloomFilter, BlockBits, BloomInfo, Layout};

use crate::guard;
use crate::meta::{self, IfExists, Meta};
use crate::server::Batch;
use crate::{Error, Server, names};

/// The most a shard may hold: the server addresses a string's bits with offsets below 2^32.
pub(crate) const MAX_SHARD_BYTES: u64 = 512 << 20;

/// The size a shard is cut to unless the caller asks for more shards.
pub(crate) const DEFAULT_SHARD_BYTES: u64 = 64 << 20;

/// At most this many `GET`s or `SET`s in one `BITFIELD`: the server parses a command's
/// arguments before running it, and a few hundred keep each command short.
const MAX_FIELDS: usize = 512;

/// The bytes moved per `GETRANGE` or `SETRANGE` by an upload or a download.
const TRANSFER_BYTES: u64 = 1 << 20;

/// A Bloom filter every process and machine that opens it by name shares: the same answers
/// as an [`AtomicBloomFilter`] of the same parameters holding the same items, kept in a Redis
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
/// string holds each word as its 8 big-endian bytes. After the bits, each shard holds one
/// **guard byte** of value 1, written when the shard is created and never again.
///
/// # The protocol, and why each step is atomic enough
///
/// - **Create**: unless the description exists, one script per shard makes it empty at its
///   full length with its guard (keeping a shard that has its guard: a racing creator's),
///   then the description is written with `SET ... NX GET` (among racing creators exactly one
///   writes it), last, so that no process opens the filter before its shards are there.
///   Under an existing description nothing is created: a lost shard stays lost.
/// - **Lookup** (one round trip): per shard touched, `BITFIELD_RO` commands of the guard's
///   `GET u8` and a `GET i64` per word that holds a bit of an item (up to 512 a command). Each
///   command reads a consistent value, the guard with the words: a guard of 0 (the shard is
///   gone, or a write made its key again after a loss) is [`Error::Missing`] and no answer
///   is read from that command. An item is reported if every bit is set.
/// - **Insert** (two round trips, the second only for items with a bit unset; one after a
///   mostly new batch):
///   1. the lookup's read; skipped when most items of the handle's previous insert batch were
///      new (a new item has most of its bits unset, and the read would only cost a round
///      trip): every bit of every item then counts as unset;
///   2. per item with a bit unset, `SET u1 o1 1 SET u1 o2 1 ...` over the bits the read found
///      unset, all in one `BITFIELD key ...` command, which carries the guard's `GET u8`
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

/// The parameters of a [`SharedBloomFilter`] to create or open:
/// [`SharedBloomFilter::builder`].
#[derive(Clone, Debug)]
pub struct SharedBloomBuilder {
    name: String,
    capacity: u64,
    fpr: f64,
    layout: Layout,
    shards: Option<u32>,
    seed: u64,
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
    fn meta(&self) -> Result<(Meta, BlockedSizing, u32), Error> {
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

    /// Creates the filter on `server`, empty: every shard at its full length with its guard
    /// byte, then the description (so that no process opens it before its bits are there).
    ///
    /// # Errors
    ///
    /// [`Error::Exists`] if a filter of this name and these parameters exists (use
    /// [`open_or_create`](Self::open_or_create) for the line every process of a service
    /// runs); [`Error::Mismatch`] if the name holds a structure with other parameters (naming
    /// the first); [`Error::Local`] for parameters the library refuses (capacity 0, a rate
    /// outside (0, 1)); [`Error::InvalidName`]; the server's errors.
    pub fn create(&self, server: &Server) -> Result<SharedBloomFilter, Error> {
        self.create_or(server, IfExists::Fail)
    }

    /// Opens the filter if one of this name and these parameters exists, else creates it: the
    /// line every process of a service runs (the first creates, the others open). A filter
    /// whose shards were lost is opened, and reports [`Error::Missing`] on every operation:
    /// nothing here makes a lost shard again (destroy the filter and create it for that).
    ///
    /// # Errors
    ///
    /// As [`create`](Self::create), except that an existing filter is no error.
    pub fn open_or_create(&self, server: &Server) -> Result<SharedBloomFilter, Error> {
        self.create_or(server, IfExists::Open)
    }

    /// [`create`](Self::create), on the tokio connection.
    ///
    /// # Errors
    ///
    /// As [`create`](Self::create).
    pub async fn create_async(&self, server: &Server) -> Result<SharedBloomFilter, Error> {
        self.create_or_async(server, IfExists::Fail).await
    }

    /// [`open_or_create`](Self::open_or_create), on the tokio connection.
    ///
    /// # Errors
    ///
    /// As [`open_or_create`](Self::open_or_create).
    pub async fn open_or_create_async(&self, server: &Server) -> Result<SharedBloomFilter, Error> {
        self.create_or_async(server, IfExists::Open).await
    }

    fn create_or(&self, server: &Server, if_exists: IfExists) -> Result<SharedBloomFilter, Error> {
        let (meta, sizing, shards) = self.meta()?;
        let filter = SharedBloomFilter::new(server, &self.name, sizing, shards, self.seed);
        meta::create_with(server, &self.name, &meta, &filter.create_batch(), if_exists)?;
        Ok(filter)
    }

    async fn create_or_async(
        &self,
        server: &Server,
        if_exists: IfExists,
    ) -> Result<SharedBloomFilter, Error> {
        let (meta, sizing, shards) = self.meta()?;
        let filter = SharedBloomFilter::new(server, &self.name, sizing, shards, self.seed);
        meta::create_with_async(server, &self.name, &meta, &filter.create_batch(), if_exists)
            .await?;
        Ok(filter)
    }
}

/// The shard count `shards` comes to once no shard is left without a block: shards of
/// `blocks.div_ceil(shards)` blocks cover the blocks in this many (8 blocks asked in 5 shards
/// are 4 shards of 2; a fifth would be empty, a key of no bytes).
fn no_empty_shard(blocks: u64, shards: u64) -> u64 {
    blocks.div_ceil(blocks.div_ceil(shards.clamp(1, blocks)))
}

/// The description of a filter.
fn describe(sizing: &BlockedSizing, shards: u32, seed: u64) -> Meta {
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

/// The write of a batch: where each item's old values are, and each command's shard.
struct Write {
    /// Per item written, where its old values are.
    written: Vec<Written>,
    /// Per command, the shard it writes (its first value is the shard's guard).
    shards: Vec<usize>,
}

/// Where one item's bits are on the server.
struct Located {
    shard: usize,
    /// The index of the block's first word in its shard.
    word: u64,
    bits: BlockBits,
}

/// Where the old values of one item's written bits are in a write's replies.
struct Written {
    item: usize,
    /// The reply (command) index.
    reply: usize,
    /// The item's first field in that reply, and how many it has.
    first: usize,
    fields: usize,
}

/// The read of a batch: for each item, where its words' values are in the replies.
struct Read {
    /// Per item, per word of its block with a bit: (reply index, position in the reply).
    at: Vec<Vec<(usize, usize)>>,
    /// Per command, the shard it reads (its first value is the shard's guard).
    shards: Vec<usize>,
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
        let stored = meta::open(server, name, &Self::like())?;
        Self::from_meta(server, name, &stored)
    }

    /// [`open`](Self::open), on the tokio connection.
    ///
    /// # Errors
    ///
    /// As [`open`](Self::open).
    pub async fn open_async(server: &Server, name: &str) -> Result<Self, Error> {
        let stored = meta::open_async(server, name, &Self::like()).await?;
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
        if &expected != stored {
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
        Ok(Self::new(server, name, sizing, shards, seed))
    }

    fn new(server: &Server, name: &str, sizing: BlockedSizing, shards: u32, seed: u64) -> Self {
        let blocks_per_shard = sizing.blocks.div_ceil(u64::from(shards));
        Self {
            server: server.clone(),
            name: name.to_owned(),
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

    /// The request that counts the bits set of every shard (`BITCOUNT` of its bits, not its
    /// guard), each followed by the read of its guard: a guard there after the count means the
    /// shard was there during it (a lost shard is never made again with its guard).
    fn count_batch(&self) -> Batch {
        let mut batch = Batch::default();
        for (s, key) in self.keys.iter().enumerate() {
            let k = batch.key(key);
            let guard = self.guard_byte(s);
            let mut count = redis::cmd("BITCOUNT");
            count.arg(key).arg(0).arg(guard - 1);
            batch.push(k, count);
            let mut get = redis::cmd("GETRANGE");
            get.arg(key).arg(guard).arg(guard);
            batch.push(k, get);
        }
        batch
    }

    /// What the filter is and holds ([`BloomInfo`], as the local filter's `info()`), from the
    /// bits set on the server: one request, a `BITCOUNT` per shard (it reads every byte of the
    /// shard on the server: call it for monitoring, not per item).
    fn after_count(&self, replies: &[Value]) -> Result<BloomInfo, Error> {
        let mut set = 0u64;
        for (s, pair) in replies.chunks(2).enumerate() {
            let key = &self.keys[s];
            match pair.get(1) {
                Some(Value::BulkString(b)) if b[..] == [1] => {}
                _ => {
                    return Err(Error::Missing {
                        name: self.name.clone(),
                        key: key.clone(),
                    });
                }
            }
            match pair.first() {
                Some(Value::Int(n)) if *n >= 0 => set += *n as u64,
                other => {
                    return Err(Error::corrupt(key, format!("BITCOUNT answered {other:?}")));
                }
            }
        }
        Ok(BloomInfo::from_bits_set(
            "SharedBloomFilter",
            &self.sizing,
            set,
        ))
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
        self.after_count(&self.server.run(&self.count_batch())?)
    }

    /// [`info`](Self::info), on the tokio connection.
    ///
    /// # Errors
    ///
    /// As [`info`](Self::info).
    pub async fn info_async(&self) -> Result<BloomInfo, Error> {
        self.after_count(&self.server.run_async(&self.count_batch()).await?)
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

    fn locate(&self, hash: Hash128) -> Located {
        let bits = BlockBits::new(hash, &self.sizing);
        let shard = bits.block() / self.blocks_per_shard;
        let word = (bits.block() - shard * self.blocks_per_shard) * self.words_per_block();
        Located {
            shard: shard as usize,
            word,
            bits,
        }
    }

    /// The byte after shard `s`'s bits: its guard ([`guard`](crate::guard)).
    fn guard_byte(&self, s: usize) -> u64 {
        self.shard_words(s) * 8
    }

    /// The creation of every shard, empty, with its guard ([`guard::CREATE`]): the string
    /// takes its full length at once, so inserts never reallocate it.
    fn create_batch(&self) -> Batch {
        let mut batch = Batch::default();
        guard::create(
            &mut batch,
            (0..self.keys.len()).map(|s| (self.keys[s].clone(), self.guard_byte(s))),
        );
        batch
    }

    /// The read of `items`: per shard touched, `BITFIELD_RO` commands of the shard's guard and
    /// up to [`MAX_FIELDS`] `GET i64` of the items' words.
    fn read_batch(&self, items: &[Located]) -> (Batch, Read) {
        // Per shard: its GETs so far, cut into commands of MAX_FIELDS.
        let mut per_shard: Vec<Vec<Vec<u64>>> = vec![Vec::new(); self.keys.len()];
        let mut at = Vec::with_capacity(items.len());
        for item in items {
            let gets = &mut per_shard[item.shard];
            let mut mine = Vec::new();
            for (j, mask) in item.bits.masks().iter().enumerate() {
                if *mask == 0 {
                    continue;
                }
                if gets.last().is_none_or(|cmd| cmd.len() == MAX_FIELDS) {
                    gets.push(Vec::new());
                }
                let cmd = gets.len() - 1;
                let last = gets.last_mut().expect("pushed above");
                // After the guard's value.
                mine.push((cmd, last.len() + 1));
                last.push((item.word + j as u64) * 64);
            }
            at.push((item.shard, mine));
        }
        let mut batch = Batch::default();
        let mut first_cmd = vec![0; self.keys.len()];
        let mut shards = Vec::new();
        for (s, gets) in per_shard.iter().enumerate() {
            if gets.is_empty() {
                continue;
            }
            let k = batch.key(&self.keys[s]);
            first_cmd[s] = batch.len();
            for offsets in gets {
                let mut cmd = redis::cmd("BITFIELD_RO");
                cmd.arg(&self.keys[s]);
                guard::get(&mut cmd, self.guard_byte(s));
                for offset in offsets {
                    cmd.arg("GET").arg("i64").arg(offset);
                }
                batch.push_fields(k, cmd, offsets.len() + 1);
                shards.push(s);
            }
        }
        let at = at
            .into_iter()
            .map(|(s, mine)| {
                mine.into_iter()
                    .map(|(cmd, pos)| (first_cmd[s] + cmd, pos))
                    .collect()
            })
            .collect();
        (batch, Read { at, shards })
    }

    /// `Ok` if every command's first value, its shard's guard, says the shard is there.
    fn check_guards(&self, shards: &[usize], replies: &[Value]) -> Result<(), Error> {
        for (reply, &s) in replies.iter().zip(shards) {
            let guard = match reply {
                Value::Array(values) => values.first(),
                _ => None,
            };
            guard::check(&self.name, &self.keys[s], guard)?;
        }
        Ok(())
    }

    /// Each item's words (as many as its block has; the words with no bit of it are 0).
    fn after_read(
        &self,
        items: &[Located],
        read: &Read,
        replies: &[Value],
    ) -> Result<Vec<[u64; 8]>, Error> {
        self.check_guards(&read.shards, replies)?;
        let mut words = Vec::with_capacity(items.len());
        for (item, places) in items.iter().zip(&read.at) {
            let mut mine = [0u64; 8];
            let mut places = places.iter();
            for (j, mask) in item.bits.masks().iter().enumerate() {
                if *mask == 0 {
                    continue;
                }
                let &(cmd, pos) = places.next().expect("one place per word with a bit");
                let value = match &replies[cmd] {
                    Value::Array(values) => values.get(pos),
                    _ => None,
                };
                let Some(Value::Int(value)) = value else {
                    return Err(Error::corrupt(
                        &self.keys[item.shard],
                        format!("BITFIELD_RO answered {:?}", replies[cmd]),
                    ));
                };
                mine[j] = *value as u64;
            }
            words.push(mine);
        }
        Ok(words)
    }

    /// The write of the items whose bits `words` do not all hold: per shard, `BITFIELD`
    /// commands of the shard's guard (`GET u8`) and `SET u1 offset 1` fields for the bits that
    /// were unset, up to [`MAX_FIELDS`] per command and every item's fields in one command (so
    /// that its bits are set atomically). Returns the batch and where each item's old values
    /// are.
    ///
    /// Many items per command rather than one each (measured with `benches/redis.rs`): the
    /// client's instructions per new item fell from 16.8k to 10.2k (callgrind, 20k ids), its
    /// CPU from 1.95 to 1.15 us per item (200k ids), with fewer commands to build, copy and
    /// parse; the server's time in `BITFIELD` per item did not grow.
    fn write_batch(&self, items: &[Located], words: &[[u64; 8]]) -> (Batch, Write) {
        let mut batch = Batch::default();
        let mut written = Vec::new();
        // Per shard: its open command (fields so far, the guard's included) and its index
        // among `cmds`.
        let mut open: Vec<Option<(usize, usize)>> = vec![None; self.keys.len()];
        // Per command: its shard, the command, and its fields.
        let mut cmds: Vec<(usize, Cmd, usize)> = Vec::new();
        for (i, (item, words)) in items.iter().zip(words).enumerate() {
            let missing: u32 = item
                .bits
                .masks()
                .iter()
                .zip(words)
                .map(|(m, w)| (m & !w).count_ones())
                .sum();
            if missing == 0 {
                continue;
            }
            let missing = missing as usize;
            debug_assert!(missing < MAX_FIELDS);
            let (cmd, first) = match open[item.shard] {
                Some((cmd, fields)) if fields + missing <= MAX_FIELDS => (cmd, fields),
                _ => {
                    let mut c = redis::cmd("BITFIELD");
                    c.arg(&self.keys[item.shard]);
                    guard::get(&mut c, self.guard_byte(item.shard));
                    cmds.push((item.shard, c, 1));
                    (cmds.len() - 1, 1)
                }
            };
            open[item.shard] = Some((cmd, first + missing));
            cmds[cmd].2 = first + missing;
            let c = &mut cmds[cmd].1;
            for (j, mask) in item.bits.masks().iter().enumerate() {
                let mut bits = mask & !words[j];
                while bits != 0 {
                    let bit = bits.trailing_zeros();
                    bits &= bits - 1;
                    let offset = (item.word + j as u64) * 64 + u64::from(63 - bit);
                    c.arg("SET").arg("u1").arg(offset).arg(1);
                }
            }
            written.push(Written {
                item: i,
                reply: cmd,
                first,
                fields: missing,
            });
        }
        let mut shards = Vec::with_capacity(cmds.len());
        for (shard, cmd, fields) in cmds {
            let k = batch.key(&self.keys[shard]);
            batch.push_fields(k, cmd, fields);
            shards.push(shard);
        }
        (batch, Write { written, shards })
    }

    /// The answers: an item is new if its write found one of its bits unset. A shard whose
    /// guard was gone answers nothing: the write created its key again, without the guard, and
    /// every later command on it says so too.
    fn after_write(
        &self,
        items: &[Located],
        write: &Write,
        replies: &[Value],
    ) -> Result<Vec<bool>, Error> {
        self.check_guards(&write.shards, replies)?;
        let mut new = vec![false; items.len()];
        for w in &write.written {
            let old = match replies.get(w.reply) {
                Some(Value::Array(old)) => old.get(w.first..w.first + w.fields),
                _ => None,
            };
            let Some(old) = old else {
                return Err(Error::corrupt(
                    &self.keys[items[w.item].shard],
                    format!("BITFIELD answered {:?}", replies.get(w.reply)),
                ));
            };
            // Each old value of a `SET u1` is a bit: another value is no answer.
            for v in old {
                match v {
                    Value::Int(0) => new[w.item] = true,
                    Value::Int(1) => {}
                    other => {
                        return Err(Error::corrupt(
                            &self.keys[items[w.item].shard],
                            format!("BITFIELD SET u1 answered {other:?}"),
                        ));
                    }
                }
            }
        }
        Ok(new)
    }

    fn present(items: &[Located], words: &[[u64; 8]]) -> Vec<bool> {
        items
            .iter()
            .zip(words)
            .map(|(item, words)| {
                item.bits
                    .masks()
                    .iter()
                    .zip(words)
                    .all(|(m, w)| w & m == *m)
            })
            .collect()
    }

    /// Inserts the items of `hashes`, appending to `new` whether each was new (as
    /// [`insert`](Self::insert) would say, one by one, in order); returns how many were. One
    /// request (one or two round trips) per [`REQUEST_ITEMS`](crate::REQUEST_ITEMS) items, so
    /// that a batch of any size takes the memory of one request.
    ///
    /// # Errors
    ///
    /// As [`insert`](Self::insert); `new` is then unchanged (the requests before the one that
    /// failed were written: their items are in the filter, unanswered).
    pub fn insert_many_hashes(
        &self,
        hashes: &[Hash128],
        new: &mut Vec<bool>,
    ) -> Result<usize, Error> {
        let start = new.len();
        let mut count = 0;
        for chunk in hashes.chunks(crate::REQUEST_ITEMS) {
            let items: Vec<Located> = chunk.iter().map(|&h| self.locate(h)).collect();
            let words = if self.mostly_new.load(Relaxed) {
                vec![[0; 8]; items.len()]
            } else {
                let (batch, read) = self.read_batch(&items);
                let replies = self.server.run(&batch);
                match replies.and_then(|r| self.after_read(&items, &read, &r)) {
                    Ok(words) => words,
                    Err(err) => return Err(undo(new, start, err)),
                }
            };
            let (batch, write) = self.write_batch(&items, &words);
            let answers = self
                .server
                .run(&batch)
                .and_then(|r| self.after_write(&items, &write, &r));
            match answers {
                Ok(answers) => count += self.remember(new, answers),
                Err(err) => return Err(self.failed(new, start, err)),
            }
        }
        Ok(count)
    }

    /// [`insert_many_hashes`](Self::insert_many_hashes), on the tokio connection.
    ///
    /// # Errors
    ///
    /// As [`insert_many_hashes`](Self::insert_many_hashes).
    pub async fn insert_many_hashes_async(
        &self,
        hashes: &[Hash128],
        new: &mut Vec<bool>,
    ) -> Result<usize, Error> {
        let start = new.len();
        let mut count = 0;
        for chunk in hashes.chunks(crate::REQUEST_ITEMS) {
            let items: Vec<Located> = chunk.iter().map(|&h| self.locate(h)).collect();
            let words = if self.mostly_new.load(Relaxed) {
                vec![[0; 8]; items.len()]
            } else {
                let (batch, read) = self.read_batch(&items);
                let replies = self.server.run_async(&batch).await;
                match replies.and_then(|r| self.after_read(&items, &read, &r)) {
                    Ok(words) => words,
                    Err(err) => return Err(undo(new, start, err)),
                }
            };
            let (batch, write) = self.write_batch(&items, &words);
            let answers = self
                .server
                .run_async(&batch)
                .await
                .and_then(|r| self.after_write(&items, &write, &r));
            match answers {
                Ok(answers) => count += self.remember(new, answers),
                Err(err) => return Err(self.failed(new, start, err)),
            }
        }
        Ok(count)
    }

    /// Looks up the items of `hashes`, appending to `hits` whether each is possibly in the
    /// filter; returns how many are. One round trip per
    /// [`REQUEST_ITEMS`](crate::REQUEST_ITEMS) items.
    ///
    /// # Errors
    ///
    /// As [`contains`](Self::contains); `hits` is then unchanged.
    pub fn contains_many_hashes(
        &self,
        hashes: &[Hash128],
        hits: &mut Vec<bool>,
    ) -> Result<usize, Error> {
        let start = hits.len();
        let mut count = 0;
        for chunk in hashes.chunks(crate::REQUEST_ITEMS) {
            let items: Vec<Located> = chunk.iter().map(|&h| self.locate(h)).collect();
            let (batch, read) = self.read_batch(&items);
            let words = self
                .server
                .run(&batch)
                .and_then(|r| self.after_read(&items, &read, &r));
            match words {
                Ok(words) => count += append(hits, Self::present(&items, &words)),
                Err(err) => return Err(undo(hits, start, err)),
            }
        }
        Ok(count)
    }

    /// [`contains_many_hashes`](Self::contains_many_hashes), on the tokio connection.
    ///
    /// # Errors
    ///
    /// As [`contains`](Self::contains); `hits` is then unchanged.
    pub async fn contains_many_hashes_async(
        &self,
        hashes: &[Hash128],
        hits: &mut Vec<bool>,
    ) -> Result<usize, Error> {
        let start = hits.len();
        let mut count = 0;
        for chunk in hashes.chunks(crate::REQUEST_ITEMS) {
            let items: Vec<Located> = chunk.iter().map(|&h| self.locate(h)).collect();
            let (batch, read) = self.read_batch(&items);
            let words = self
                .server
                .run_async(&batch)
                .await
                .and_then(|r| self.after_read(&items, &read, &r));
            match words {
                Ok(words) => count += append(hits, Self::present(&items, &words)),
                Err(err) => return Err(undo(hits, start, err)),
            }
        }
        Ok(count)
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

    /// Creates a filter called `name` holding exactly `local`'s bits: the same sizing, the same
    /// hasher seed, word for word. The filter appears to other processes (by
    /// [`open`](Self::open)) only with all its bits: they are written under temporary keys of
    /// this upload first, then ORed into the shards (`BITOP OR`, atomic per shard), and only
    /// then is the description created.
    ///
    /// # Errors
    ///
    /// [`Error::Exists`] if the name is taken: an upload never overwrites a filter. (Only a
    /// create of the same name racing the upload can see the uploaded bits: they are then ORed
    /// into its filter, a union, and the upload still answers `Exists`.)
    /// [`Error::Mismatch`] if a structure of other parameters was created under the name
    /// meanwhile; the server's errors.
    pub fn upload(
        server: &Server,
        name: &str,
        local: &AtomicBloomFilter<StableHasher>,
    ) -> Result<Self, Error> {
        names::check(name)?;
        let sizing = local.sizing();
        let builder = Self::builder(name, sizing.capacity)
            .fpr(sizing.fpr)
            .layout(sizing.layout)
            .seed(local.hasher().seed());
        let (meta, sizing, shards) = builder.meta()?;
        let filter = Self::new(server, name, sizing, shards, local.hasher().seed());
        // Refuse early when the name is taken, before moving any bits.
        if meta::open(server, name, &Self::like()).is_ok() {
            return Err(Error::Exists {
                name: name.to_owned(),
            });
        }
        // Temporary keys of this upload only (two uploads racing for one name must not
        // delete each other's), in each shard's slot.
        let tag = format!(
            "upload-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        );
        let temp: Vec<String> = (0..shards).map(|s| names::shard(name, s, &tag)).collect();
        for (s, key) in temp.iter().enumerate() {
            let words = filter.shard_words(s);
            let first = s as u64 * filter.blocks_per_shard * filter.words_per_block();
            let mut batch = Batch::default();
            let k = batch.key(key);
            batch.push(k, {
                let mut c = redis::cmd("DEL");
                c.arg(key);
                c
            });
            let step = TRANSFER_BYTES / 8;
            let mut buf = vec![0u64; step as usize];
            let mut done = 0;
            while done < words {
                let n = step.min(words - done);
                let chunk = &mut buf[..n as usize];
                local.read_words(first + done, chunk)?;
                let bytes: Vec<u8> = chunk.iter().flat_map(|w| w.to_be_bytes()).collect();
                let mut cmd = redis::cmd("SETRANGE");
                cmd.arg(key).arg(done * 8).arg(bytes);
                batch.push(k, cmd);
                done += n;
                if batch.len() >= 16 {
                    server.run(&batch)?;
                    batch = Batch::default();
                    batch.key(key);
                }
            }
            server.run(&batch)?;
        }
        // The shards, empty with their guards (kept if a racing create made them), then the
        // bits into them with `BITOP OR`, not `RENAME`: a create of the same name racing the
        // upload may have grown the shards and inserted into them, and an OR keeps its bits.
        // One command per request: a cluster pipeline refuses commands of two keys (these
        // share a slot). The description comes last, so that no process opens the filter
        // before all its bits are in.
        server.run(&filter.create_batch())?;
        for (key, temp) in filter.keys.iter().zip(&temp) {
            for cmd in [
                {
                    let mut c = redis::cmd("BITOP");
                    c.arg("OR").arg(key).arg(key).arg(temp);
                    c
                },
                {
                    let mut c = redis::cmd("DEL");
                    c.arg(temp);
                    c
                },
            ] {
                let mut batch = Batch::default();
                let k = batch.key(key);
                batch.push(k, cmd);
                server.run(&batch)?;
            }
        }
        if !meta::create(server, name, &meta)? {
            // Created meanwhile with the same parameters (a mismatch is an error above): the
            // upload's bits are in it, as a union.
            return Err(Error::Exists {
                name: name.to_owned(),
            });
        }
        Ok(filter)
    }

    /// [`upload`](Self::upload) of a filter saved to a file by
    /// [`AtomicBloomFilter::save`].
    ///
    /// # Errors
    ///
    /// As [`upload`](Self::upload), and [`Error::Local`] if the file cannot be read or is not
    /// an atomic Bloom filter's.
    pub fn upload_file(server: &Server, name: &str, path: impl AsRef<Path>) -> Result<Self, Error> {
        let local = AtomicBloomFilter::load(path)?;
        Self::upload(server, name, &local)
    }

    /// A local [`AtomicBloomFilter`] with this filter's sizing, hasher and bits, read shard by
    /// shard (`GETRANGE`, 1 MiB at a time). Each read is consistent; a download racing inserts
    /// holds every insert that returned before it started.
    ///
    /// # Errors
    ///
    /// [`Error::Missing`] if a shard is gone; [`Error::Local`] if this machine cannot allocate
    /// the filter; the server's errors.
    pub fn download(&self) -> Result<AtomicBloomFilter<StableHasher>, Error> {
        let local = AtomicBloomFilter::builder(self.sizing.capacity)
            .fpr(self.sizing.fpr)
            .layout(self.sizing.layout)
            .hasher(self.hasher)
            .build()?;
        for (s, key) in self.keys.iter().enumerate() {
            let words = self.shard_words(s);
            let first = s as u64 * self.blocks_per_shard * self.words_per_block();
            let mut batch = Batch::default();
            let k = batch.key(key);
            batch.push(k, {
                let mut c = redis::cmd("EXISTS");
                c.arg(key);
                c
            });
            let mut ranges = Vec::new();
            let mut done = 0;
            while done < words {
                let n = (TRANSFER_BYTES / 8).min(words - done);
                let mut cmd = redis::cmd("GETRANGE");
                cmd.arg(key).arg(done * 8).arg((done + n) * 8 - 1);
                batch.push(k, cmd);
                ranges.push((done, n));
                done += n;
            }
            // The guard last: a shard lost during the reads has none (see `guard`).
            let guard = self.guard_byte(s);
            batch.push(k, {
                let mut c = redis::cmd("GETRANGE");
                c.arg(key).arg(guard).arg(guard);
                c
            });
            let replies = self.server.run(&batch)?;
            let guarded = matches!(replies.last(), Some(Value::BulkString(b)) if b[..] == [1]);
            if !matches!(replies[0], Value::Int(1)) || !guarded {
                return Err(Error::Missing {
                    name: self.name.clone(),
                    key: key.clone(),
                });
            }
            for ((start, n), reply) in ranges.into_iter().zip(&replies[1..]) {
                let Value::BulkString(bytes) = reply else {
                    return Err(Error::corrupt(key, format!("GETRANGE answered {reply:?}")));
                };
                if bytes.len() as u64 != n * 8 {
                    return Err(Error::corrupt(
                        key,
                        format!("{} bytes where {} were written", bytes.len(), n * 8),
                    ));
                }
                let words: Vec<u64> = bytes
                    .chunks_exact(8)
                    .map(|b| u64::from_be_bytes(b.try_into().expect("8 bytes")))
                    .collect();
                local.union_words(first + start, &words)?;
            }
        }
        Ok(local)
    }

    /// [`download`](Self::download) saved to `path` ([`AtomicBloomFilter::save`]): the same
    /// file, byte for byte, as the local filter it was uploaded from would save.
    ///
    /// # Errors
    ///
    /// As [`download`](Self::download), and [`Error::Local`] if the file cannot be written.
    pub fn download_to_file(&self, path: impl AsRef<Path>) -> Result<(), Error> {
        self.download()?.save(path)?;
        Ok(())
    }

    /// Deletes the filter: its description first (so that no process opens it any more), then
    /// its shards. Processes that have it open get [`Error::Missing`].
    ///
    /// # Errors
    ///
    /// The server's errors.
    pub fn destroy(self) -> Result<(), Error> {
        let mut batch = Batch::default();
        let meta = names::meta(&self.name);
        let k = batch.key(&meta);
        batch.push(k, {
            let mut c = redis::cmd("DEL");
            c.arg(&meta);
            c
        });
        for key in &self.keys {
            let k = batch.key(key);
            batch.push(k, {
                let mut c = redis::cmd("DEL");
                c.arg(key);
                c
            });
        }
        self.server.run(&batch).map(drop)
    }
}

impl SharedBloomFilter {
    /// Appends `answers` to `out` and returns how many are new, noting for the next batch
    /// whether most were.
    fn remember(&self, out: &mut Vec<bool>, answers: Vec<bool>) -> usize {
        let len = answers.len();
        let new = append(out, answers);
        if len > 0 {
            self.mostly_new.store(new * 2 > len, Relaxed);
        }
        new
    }

    /// A failed write: `out` cut back, and the next batch reads first (a read finds a lost
    /// shard without writing).
    fn failed(&self, out: &mut Vec<bool>, start: usize, err: Error) -> Error {
        self.mostly_new.store(false, Relaxed);
        undo(out, start, err)
    }
}

/// `err`, with `out` cut back to its `start`: a failed call answers nothing.
fn undo(out: &mut Vec<bool>, start: usize, err: Error) -> Error {
    out.truncate(start);
    err
}

/// Appends `answers` to `out`; how many are `true`.
fn append(out: &mut Vec<bool>, answers: Vec<bool>) -> usize {
    let count = answers.iter().filter(|&&b| b).count();
    out.extend(answers);
    count
}
