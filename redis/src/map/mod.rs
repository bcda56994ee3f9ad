//! [`SharedOverwriteMap`]: the crate's [`OverwriteMap`] in a server's string keys, slot for
//! slot, with its at-least-once claims ([`SharedClaim`]): the same answers as a local map of
//! the same bucket count given the same sequence of operations, for every process and machine
//! that opens it by name.
//!
//! The layout of the slots on the server and the atomicity argument of each step are in
//! [`SharedOverwriteMap`]'s docs (public, unlike this module).

use std::hash::Hash;
use std::time::Duration;

use seen::OverwriteMap;
use seen::builder::MapSize;
use seen::hash::{Hash128, ItemHasher, StableHasher};

use crate::bloom::{DEFAULT_SHARD_BYTES, MAX_SHARD_BYTES};
use crate::forward::in_requests;
use crate::guard::Id;
use crate::meta::{self, Meta};
use crate::server::Via;
use crate::{Error, Server, names};

mod builder;
mod claim;
mod info;
mod protocol;

pub use builder::SharedMapBuilder;
use builder::describe;
pub use claim::SharedClaim;
pub use info::SharedMapInfo;

/// The most slots in one shard: its bytes and the guard byte after them must stay below the
/// server's 512 MiB (bit offsets below 2^32).
pub(crate) const MAX_SHARD_SLOTS: u64 = MAX_SHARD_BYTES / 8 - 1;

/// The slots a shard is cut to unless the caller asks for more shards.
pub(crate) const DEFAULT_SHARD_SLOTS: u64 = DEFAULT_SHARD_BYTES / 8;

/// An [`OverwriteMap`] that every process and machine that opens it by name shares, with its
/// at-least-once claims: the local map's slots and fingerprints, kept in a Redis or Valkey
/// server (or cluster) in plain string keys, with no module.
///
/// # Guarantees
///
/// The local map's, with the server as the one place that orders operations:
///
/// - **The same answers**: a shared map and a local [`OverwriteMap`] of the same bucket count
///   and hasher seed, given the same sequence of `insert`, `contains` and `forget`, answer
///   alike (an item is in the same slot with the same fingerprint in both: [`MapSlot`](seen::MapSlot)).
/// - **No false positives**, up to a 2^-64 fingerprint collision; **forgets** old items as
///   newer ones overwrite their slots (size it as the local map:
///   [`seen::sizing::overwrite_buckets`]).
/// - **Racing inserts or claims of one item** that the map does not remember, from any number
///   of clients: exactly one is told new (gets the [`SharedClaim`]), unless another item
///   overwrites the slot between them.
/// - **`forget` erases only what is still there**: it clears the slot only if it still holds
///   this item's fingerprint, so a failed handler's forget never erases another message that
///   took the slot meanwhile.
/// - **Errors answer nothing**: no item of a failed request is answered; in particular a claim
///   whose write is unknown is an error, never a [`SharedClaim`]. See
///   [`claim`](Self::claim) for what to do then.
/// - **Round trips**: one per call, one per batch.
///
/// The sections below give the layout, the atomicity argument of each step, and what a
/// failover can lose.
///
/// # Examples
///
/// ```no_run
/// use seen_redis::{Server, SharedOverwriteMap};
/// let server = Server::open("redis://127.0.0.1:6379")?;
/// let map = SharedOverwriteMap::builder("inbox", 1_000_000).open_or_create(&server)?;
/// if let Some(claim) = map.claim("msg-42")? {
///     // process msg-42 ...
///     claim.commit(); // processed: later deliveries are duplicates
/// }
/// // Another process, on another machine:
/// let same = SharedOverwriteMap::open(&server, "inbox")?;
/// assert!(same.claim("msg-42")?.is_none()); // a duplicate
/// # Ok::<(), seen_redis::Error>(())
/// ```
///
/// # Where the slots are
///
/// An item's slot and its 64-bit fingerprint are the local map's ([`MapSlot`](seen::MapSlot): the slot from the
/// low half of the item's hash, the fingerprint from the high half, never 0, since 0 marks an
/// empty slot). The `buckets` slots are cut into `shards` runs of consecutive slots, shard `s` in
/// the string key `seen:{NAME:s}:slots`; slot `i` of a shard is bytes `8·i` to `8·i + 7` of the
/// string, the fingerprint's 8 bytes big-endian, which is what `BITFIELD ... SET i64 64·i`
/// writes and `GET i64 64·i` reads (the server numbers bits from the most significant bit of
/// byte 0; the fingerprint travels as the `i64` with the same 64 bits).
///
/// After the slots, each shard holds an 8-byte **guard**, the map's creation id (8 random bytes
/// drawn by its creator), written when the map is created. Every command below reads it in the
/// same atomic step as the slots it touches, so that a shard that is gone (a restart without persistence, `FLUSHALL`, an eviction, a
/// [`destroy`](SharedOverwriteMap::destroy)) is reported as [`Error::Missing`] and never read as
/// an empty map. A write to a missing shard creates a short string without the guard (a
/// `BITFIELD SET` creates its key); every later command on it still finds no guard, so the
/// error persists until the map is created anew, which replaces every shard: a create does it
/// only when the description is gone too (a restart that lost everything); with the
/// description still there, [`destroy`](SharedOverwriteMap::destroy) the map first. A map
/// created anew has another id: the handles of the old one stay `Missing`.
///
/// Beside each shard is the hash of its claims' leases, `seen:{NAME:s}:leases`, with a field
/// `guard` (the creation id) that tells a lost hash from an empty one ([`SharedClaim`] has the details).
///
/// # The protocol, and why each step is atomic
///
/// - **Insert** (one round trip): `BITFIELD key GET i64 <guard> SET i64 <slot> <fingerprint>`.
///   One `BITFIELD` is one atomic command that returns every old value: the `SET` is an atomic
///   swap, as the local `AtomicU64::swap`. The item is new unless the old value was its own
///   fingerprint. The comparison happens in the client, on the exact 64-bit reply (no number
///   passes through Lua, whose numbers are doubles). The server runs commands one at a time, so
///   among racing inserts of an item that its slot does not hold, the first to run writes it
///   and is told "new", and every later one finds it and is told "not new", unless another
///   item's insert runs between them (the map then forgot the item, exactly as locally).
/// - **Lookup** (one round trip): `BITFIELD_RO key GET i64 <guard> GET i64 <slot>`; one command,
///   one consistent read.
/// - **Forget** (one round trip): a compare-and-clear script, the local `compare_exchange(fp,
///   0)`: it reads the slot's 8 bytes with `GETRANGE`, compares them **as a string** with the
///   fingerprint's 8 bytes sent as an argument, and only if equal writes 8 zero bytes with
///   `SETRANGE`. A script runs with no other command in between, so the slot cannot change
///   between the comparison and the write: a forget never erases an item that overwrote ours.
///   It is sent as `EVALSHA`; if the server answers `NOSCRIPT` (a restart, `SCRIPT FLUSH`,
///   another cluster node), the script did not run, and it is sent again as `EVAL`.
/// - **Claim** (one round trip): a script on the shard and its leases hash: if the slot does
///   not hold the item, or holds it under a lease that has ended (by the server's `TIME` in
///   the script), it writes the fingerprint and the claim's lease (its end and a token of the
///   claim) and answers "claimed"; otherwise (committed, inserted, or under a live lease) it
///   answers "duplicate". Then it sweeps one lease picked at random if it has ended: the slot
///   cleared if it still holds that claim's item, the lease deleted. `commit` deletes the
///   lease if it is still this claim's; `renew` moves its end; the claim's `forget` (explicit
///   or on drop) clears the slot and the lease only if the lease is still this claim's. Each
///   is one script, so no other command runs between its checks and its writes. The
///   at-least-once argument is the local [`Claim`](seen::Claim)'s, with one more way out: a
///   delivery is refused only while its slot holds its fingerprint under a live lease or
///   committed; a claim whose holder vanished ends with its lease, so a crashed consumer
///   delays a message by at most the lease and never loses it. A race, or a holder slower
///   than its lease, can cause a duplicate, never a loss.
/// - **Create**: as the Bloom filter's: the description (`state=creating`, `SET ... NX GET`),
///   then by its creator alone one script per shard (every slot empty, the guard set, the
///   leases hash with its guard), then `state=ready`; openers wait for `ready`. Nothing else
///   makes a shard: a lost shard stays lost.
/// - **Batches** ([`insert_many`](SharedOverwriteMap::insert_many),
///   [`contains_many`](SharedOverwriteMap::contains_many)): one `BITFIELD` per shard touched
///   (cut every 512 fields), each with the guard's `GET`, all in one pipeline: one round trip
///   per batch (on a cluster, the blocking client sends each node its part at once, the tokio
///   one each shard's part after another). The `SET`s of one command run in order, and one connection's commands on a key run in order, so the answers are those of
///   inserting the items one by one, in order (an item repeated in a batch is new at most once).
///
/// What a failover can lose: replication is asynchronous, so writes acknowledged by a primary
/// that fails before its replicas copy them are lost. A lost insert or claim makes the map
/// forget an item (a duplicate may be processed); a lost **forget** brings a fingerprint back,
/// so a redelivery of a failed message may be taken for a duplicate. `WAIT` after a forget (the
/// caller's lever) narrows that window.
pub struct SharedOverwriteMap {
    server: Server,
    name: String,
    /// The creation id of the map this handle opened ([`guard`](crate::guard)).
    id: Id,
    buckets: u64,
    slots_per_shard: u64,
    hasher: StableHasher,
    keys: Vec<String>,
    /// Per shard, the hash of its claims' leases (`map/claim.rs`).
    pub(crate) leases: Vec<String>,
    pub(crate) lease: Duration,
}

impl std::fmt::Debug for SharedOverwriteMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedOverwriteMap")
            .field("name", &self.name)
            .field("buckets", &self.buckets)
            .field("shards", &self.keys.len())
            .finish_non_exhaustive()
    }
}

impl SharedOverwriteMap {
    /// The parameters of a map called `name` to create: a bucket count (a plain `u64`) or a
    /// [`MapSize::Window`], as for the local [`OverwriteMap::builder`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use seen::builder::MapSize;
    /// use seen_redis::{Server, SharedOverwriteMap};
    /// let server = Server::open("redis://127.0.0.1:6379")?;
    /// let size = MapSize::Window { later_insertions: 3_600_000, remember_probability: 0.9 };
    /// let map = SharedOverwriteMap::builder("inbox", size).shards(4).create(&server)?;
    /// assert_eq!(map.buckets(), 34_168_399); // the local map's sizing
    /// # Ok::<(), seen_redis::Error>(())
    /// ```
    pub fn builder(name: &str, size: impl Into<MapSize>) -> SharedMapBuilder {
        SharedMapBuilder {
            name: name.to_owned(),
            size: size.into(),
            shards: None,
            seed: 0,
            lease: crate::DEFAULT_LEASE,
        }
    }

    /// Opens the map called `name`, with the parameters it was created with.
    ///
    /// # Errors
    ///
    /// [`Error::Missing`] if there is none; [`Error::Mismatch`] if `name` holds another kind of
    /// structure; [`Error::Corrupt`] if its description is not this crate's.
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
        let stored = meta::open(server, via, name, &describe(1, 1, 0)).await?;
        Self::from_meta(server, name, &stored)
    }

    fn from_meta(server: &Server, name: &str, stored: &Meta) -> Result<Self, Error> {
        let buckets: u64 = stored.get(name, "buckets")?;
        let shards: u32 = stored.get(name, "shards")?;
        let seed: u64 = stored.get(name, "seed")?;
        let expected = describe(buckets, shards, seed);
        if let Some(((field, want), (_, have))) = expected
            .fields
            .iter()
            .zip(&stored.fields)
            .find(|(a, b)| a != b)
        {
            return Err(Error::Mismatch {
                name: name.to_owned(),
                field,
                stored: have.clone(),
                requested: want.clone(),
            });
        }
        let key = names::meta(name);
        if buckets == 0 || shards == 0 || u64::from(shards) > buckets.min(names::MAX_SHARDS) {
            return Err(Error::corrupt(
                &key,
                format!("{buckets} buckets in {shards} shards"),
            ));
        }
        let per = buckets.div_ceil(u64::from(shards));
        if per > MAX_SHARD_SLOTS || buckets.div_ceil(per) != u64::from(shards) {
            return Err(Error::corrupt(
                &key,
                format!("{buckets} buckets in {shards} shards"),
            ));
        }
        Ok(Self::new(server, name, buckets, shards, seed, stored.id))
    }

    fn new(server: &Server, name: &str, buckets: u64, shards: u32, seed: u64, id: Id) -> Self {
        Self {
            server: server.clone(),
            name: name.to_owned(),
            id,
            buckets,
            slots_per_shard: buckets.div_ceil(u64::from(shards)),
            hasher: StableHasher::with_seed(seed),
            keys: (0..shards)
                .map(|s| names::shard(name, s, "slots"))
                .collect(),
            leases: (0..shards)
                .map(|s| names::shard(name, s, "leases"))
                .collect(),
            lease: crate::DEFAULT_LEASE,
        }
    }

    /// This handle with claims that hold their items for `lease` (see
    /// [`SharedMapBuilder::lease`]); at least a millisecond, at most 2^40 ms (34 years).
    pub fn with_lease(mut self, lease: Duration) -> Self {
        self.lease = lease.max(Duration::from_millis(1));
        self
    }

    /// How long this handle's claims hold their items unless committed or renewed.
    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// The map's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The number of slots: a local [`OverwriteMap`] with this many buckets (and this
    /// [`hasher`](Self::hasher)) puts every item where this map does.
    pub fn buckets(&self) -> u64 {
        self.buckets
    }

    /// The hasher: the local maps' default [`StableHasher`], with the map's seed.
    pub fn hasher(&self) -> &StableHasher {
        &self.hasher
    }

    /// The string keys the slots are in, shard by shard.
    pub fn keys(&self) -> &[String] {
        &self.keys
    }

    /// An empty local [`OverwriteMap`] that puts every item where this map does (the same
    /// bucket count and hasher).
    ///
    /// # Errors
    ///
    /// [`Error::Local`] if this machine cannot allocate it.
    pub fn local_twin(&self) -> Result<OverwriteMap, Error> {
        Ok(OverwriteMap::builder(self.buckets)
            .hasher(self.hasher)
            .build()?)
    }

    /// The driver of inserts: one `BITFIELD` swap per shard touched and 512 items, per
    /// [`REQUEST_ITEMS`](crate::REQUEST_ITEMS) items.
    async fn insert_via(
        &self,
        via: Via,
        hashes: &[Hash128],
        new: &mut Vec<bool>,
    ) -> Result<usize, Error> {
        in_requests(hashes, new, |chunk| async move {
            let items = self.locate_all(chunk);
            let (batch, at) = self.batch(&items, true);
            let old = self.slot_values(&items, &at, &self.server.send(via, &batch).await?)?;
            Ok(items
                .iter()
                .zip(old)
                .map(|(item, old)| old != item.fingerprint)
                .collect())
        })
        .await
    }

    /// The driver of lookups: one `BITFIELD_RO` per shard touched and 512 items, per
    /// [`REQUEST_ITEMS`](crate::REQUEST_ITEMS) items.
    async fn contains_via(
        &self,
        via: Via,
        hashes: &[Hash128],
        hits: &mut Vec<bool>,
    ) -> Result<usize, Error> {
        in_requests(hashes, hits, |chunk| async move {
            let items = self.locate_all(chunk);
            let (batch, at) = self.batch(&items, false);
            let held = self.slot_values(&items, &at, &self.server.send(via, &batch).await?)?;
            Ok(items
                .iter()
                .zip(held)
                .map(|(item, held)| held == item.fingerprint)
                .collect())
        })
        .await
    }

    crate::forward::item_forms!();

    /// Records `item` in its slot (overwriting whatever was there); `Ok(false)` if the slot
    /// already held it (certainly seen), `Ok(true)` otherwise (new, or seen and forgotten).
    /// Among racing inserts of an item the map does not remember, exactly one gets `true`
    /// (unless another item overwrites the slot between them). One round trip.
    ///
    /// # Errors
    ///
    /// [`Error::Connection`] (the write's outcome is unknown: the item may be in the map;
    /// retrying is safe, and answers `false` if the first write landed), [`Error::Server`]
    /// (refused: out of memory, a key of another type), [`Error::Missing`] (the map's keys are
    /// gone). No error ever stands for "new".
    pub fn insert<T: Hash + ?Sized>(&self, item: &T) -> Result<bool, Error> {
        self.insert_hash(self.hasher.hash_item(item))
    }

    /// Whether the slot of `item` holds it: `true` means certainly inserted and not forgotten
    /// since (up to a 2^-64 collision), `false` not remembered. Never writes. One round trip.
    ///
    /// # Errors
    ///
    /// [`Error::Connection`], [`Error::Server`], [`Error::Missing`].
    pub fn contains<T: Hash + ?Sized>(&self, item: &T) -> Result<bool, Error> {
        self.contains_hash(self.hasher.hash_item(item))
    }

    /// Erases `item` if its slot still holds it; `Ok(true)` if it did. If another item has
    /// overwritten the slot meanwhile, that item stays and this returns `Ok(false)`: the
    /// compare and the clear are one script, which no other command interleaves. One round
    /// trip.
    ///
    /// # Errors
    ///
    /// [`Error::Connection`] (unknown whether the slot was cleared: retrying is safe),
    /// [`Error::Server`], [`Error::Missing`].
    pub fn forget<T: Hash + ?Sized>(&self, item: &T) -> Result<bool, Error> {
        self.forget_hash(self.hasher.hash_item(item))
    }

    /// [`forget`](Self::forget) of a hash.
    ///
    /// # Errors
    ///
    /// As [`forget`](Self::forget).
    pub fn forget_hash(&self, hash: Hash128) -> Result<bool, Error> {
        self.server.block_on(self.forget_via(Via::Blocking, hash))
    }

    /// [`forget`](Self::forget), on the tokio connection.
    ///
    /// # Errors
    ///
    /// As [`forget`](Self::forget).
    pub async fn forget_async<T: Hash + ?Sized>(&self, item: &T) -> Result<bool, Error> {
        self.forget_hash_async(self.hasher.hash_item(item)).await
    }

    /// [`forget_hash`](Self::forget_hash), on the tokio connection.
    ///
    /// # Errors
    ///
    /// As [`forget`](Self::forget).
    pub async fn forget_hash_async(&self, hash: Hash128) -> Result<bool, Error> {
        self.forget_via(Via::Async, hash).await
    }

    async fn forget_via(&self, via: Via, hash: Hash128) -> Result<bool, Error> {
        let (batch, key) = self.forget_batch(hash);
        self.after_forget(key, self.server.send(via, &batch).await?)
    }

    /// Deletes the map: its description first (so that no process opens it any more), then its
    /// shards and their leases. Processes that have it open get [`Error::Missing`] (a write of
    /// theirs may leave a short key without the guard behind; creating the map again replaces
    /// it). Only this handle's map is deleted: if the name holds a map created again since
    /// (another creation id), that one is left whole and the destroy is [`Error::Missing`].
    ///
    /// # Errors
    ///
    /// [`Error::Missing`] as above; the server's errors.
    pub fn destroy(self) -> Result<(), Error> {
        let shards = (0..self.keys.len()).map(|s| (self.keys[s].clone(), self.guard_byte(s)));
        let leases = self.leases.iter().map(|key| (key.clone(), 0));
        let mut deletions = crate::server::Batch::default();
        crate::guard::destroy(&mut deletions, self.id, shards.chain(leases));
        self.server.block_on(meta::destroy(
            &self.server,
            Via::Blocking,
            &self.name,
            self.id,
            deletions,
        ))
    }
}
