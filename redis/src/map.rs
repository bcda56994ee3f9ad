//! [`SharedOverwriteMap`]: the crate's [`OverwriteMap`] in a server's string keys, slot for
//! slot, with its at-least-once claims ([`SharedClaim`]): the same answers as a local map of
//! the same bucket count given the same sequence of operations, for every process and machine
//! that opens it by name.
//!
//! The layout of the slots on the server and the atomicity argument of each step are in
//! [`SharedOverwriteMap`]'s docs (public, unlike this module).

use std::hash::Hash;
use std::sync::LazyLock;
use std::time::Duration;

use redis::Value;
use seen::builder::MapSize;
use seen::hash::{Hash128, ItemHasher, StableHasher};
use seen::{MapSlot, OverwriteMap};

use crate::bloom::{DEFAULT_SHARD_BYTES, MAX_SHARD_BYTES};
use crate::meta::{self, IfExists, Meta};
use crate::script::Lua;
use crate::server::Batch;
use crate::{Error, Server, names};

mod claim;

pub use claim::SharedClaim;

/// At most this many `SET`s or `GET`s of slots in one `BITFIELD` (as for the Bloom filter: the
/// server parses a command's arguments before running it).
const MAX_FIELDS: usize = 512;

/// The most slots in one shard: its bytes and the guard byte after them must stay below the
/// server's 512 MiB (bit offsets below 2^32).
const MAX_SHARD_SLOTS: u64 = MAX_SHARD_BYTES / 8 - 1;

/// The slots a shard is cut to unless the caller asks for more shards.
const DEFAULT_SHARD_SLOTS: u64 = DEFAULT_SHARD_BYTES / 8;

/// The compare-and-clear. Every value is a string: offsets are below 2^29 (exact in Lua's
/// doubles), and the fingerprint is compared as its 8 bytes, never as a number.
static FORGET: LazyLock<Lua> = LazyLock::new(|| {
    Lua::new(
        "forget",
        r"-- KEYS[1]: a shard. ARGV[1]: the slot's first byte; ARGV[2]: the fingerprint,
-- 8 bytes big-endian; ARGV[3]: the guard byte's offset.
-- Returns 1 if the slot held the fingerprint (now cleared), 0 if not, -1 if the shard is gone.
if redis.call('GETRANGE', KEYS[1], ARGV[3], ARGV[3]) ~= '\1' then return -1 end
local at = tonumber(ARGV[1])
if redis.call('GETRANGE', KEYS[1], at, at + 7) ~= ARGV[2] then return 0 end
redis.call('SETRANGE', KEYS[1], at, '\0\0\0\0\0\0\0\0')
return 1",
    )
});

/// A shard's creation with its leases (`map/claim.rs`): every slot empty and the guard
/// byte set, and the leases hash with its guard field, in one atomic step. A shard that has
/// its guard, and leases that have theirs, are kept (a racing creator made them).
static CREATE: LazyLock<Lua> = LazyLock::new(|| {
    Lua::new(
        "map create",
        r"-- KEYS[1]: a shard, KEYS[2]: its leases. ARGV[1]: the guard byte's offset.
local made = 0
if redis.call('GETRANGE', KEYS[1], ARGV[1], ARGV[1]) ~= '\1' then
  redis.call('DEL', KEYS[1])
  redis.call('SETRANGE', KEYS[1], ARGV[1], '\1')
  made = 1
end
if redis.call('HGET', KEYS[2], 'guard') ~= '1' then
  redis.call('DEL', KEYS[2])
  redis.call('HSET', KEYS[2], 'guard', '1')
  made = 1
end
return made",
    )
});

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
///   alike (an item is in the same slot with the same fingerprint in both: [`MapSlot`]).
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
/// An item's slot and its 64-bit fingerprint are the local map's ([`MapSlot`]: the slot from the
/// low half of the item's hash, the fingerprint from the high half, never 0, since 0 marks an
/// empty slot). The `buckets` slots are cut into `shards` runs of consecutive slots, shard `s` in
/// the string key `seen:{NAME:s}:slots`; slot `i` of a shard is bytes `8·i` to `8·i + 7` of the
/// string, the fingerprint's 8 bytes big-endian, which is what `BITFIELD ... SET i64 64·i`
/// writes and `GET i64 64·i` reads (the server numbers bits from the most significant bit of
/// byte 0; the fingerprint travels as the `i64` with the same 64 bits).
///
/// After the slots, each shard holds one **guard byte** of value 1, written when the map is
/// created. Every command below reads it in the same atomic step as the slots it touches, so
/// that a shard that is gone (a restart without persistence, `FLUSHALL`, an eviction, a
/// [`destroy`](SharedOverwriteMap::destroy)) is reported as [`Error::Missing`] and never read as
/// an empty map. A write to a missing shard creates a short string without the guard (a
/// `BITFIELD SET` creates its key); every later command on it still finds no guard, so the
/// error persists until the map is created anew, which replaces every shard: a create does it
/// only when the description is gone too (a restart that lost everything); with the
/// description still there, [`destroy`](SharedOverwriteMap::destroy) the map first.
///
/// Beside each shard is the hash of its claims' leases, `seen:{NAME:s}:leases`, with a field
/// `guard` that tells a lost hash from an empty one ([`SharedClaim`] has the details).
///
/// # The protocol, and why each step is atomic
///
/// - **Insert** (one round trip): `BITFIELD key GET u8 <guard> SET i64 <slot> <fingerprint>`.
///   One `BITFIELD` is one atomic command that returns every old value: the `SET` is an atomic
///   swap, as the local `AtomicU64::swap`. The item is new unless the old value was its own
///   fingerprint. The comparison happens in the client, on the exact 64-bit reply (no number
///   passes through Lua, whose numbers are doubles). The server runs commands one at a time, so
///   among racing inserts of an item that its slot does not hold, the first to run writes it
///   and is told "new", and every later one finds it and is told "not new", unless another
///   item's insert runs between them (the map then forgot the item, exactly as locally).
/// - **Lookup** (one round trip): `BITFIELD_RO key GET u8 <guard> GET i64 <slot>`; one command,
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
/// - **Create**: unless the description exists, one script per shard makes it (every slot
///   empty, the guard byte set, the leases hash with its guard; kept if they have their
///   guards: a racing creator's), then the description is written with `SET ... NX GET`
///   (among racing creators exactly one writes it): the shards before the description, so no
///   process opens the map before they are there. Under an existing description nothing is
///   created: a lost shard stays lost.
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

/// The parameters of a [`SharedOverwriteMap`] to create: [`SharedOverwriteMap::builder`].
#[derive(Clone, Debug)]
pub struct SharedMapBuilder {
    name: String,
    size: MapSize,
    shards: Option<u32>,
    seed: u64,
    lease: Duration,
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
    fn plan(&self) -> Result<(u64, u32, Meta), Error> {
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
    /// [`DEFAULT_LEASE`](crate::DEFAULT_LEASE)): see [`SharedClaim`]. A setting of this
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
        let (map, meta) = self.map(server)?;
        meta::create_with(
            server,
            &self.name,
            &meta,
            &map.create_batch(),
            IfExists::Fail,
        )?;
        Ok(map)
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
        let (map, meta) = self.map(server)?;
        meta::create_with(
            server,
            &self.name,
            &meta,
            &map.create_batch(),
            IfExists::Open,
        )?;
        Ok(map)
    }

    /// [`create`](Self::create), on the tokio connection.
    ///
    /// # Errors
    ///
    /// As [`create`](Self::create).
    pub async fn create_async(&self, server: &Server) -> Result<SharedOverwriteMap, Error> {
        let (map, meta) = self.map(server)?;
        let batch = map.create_batch();
        meta::create_with_async(server, &self.name, &meta, &batch, IfExists::Fail).await?;
        Ok(map)
    }

    /// [`open_or_create`](Self::open_or_create), on the tokio connection.
    ///
    /// # Errors
    ///
    /// As [`open_or_create`](Self::open_or_create).
    pub async fn open_or_create_async(&self, server: &Server) -> Result<SharedOverwriteMap, Error> {
        let (map, meta) = self.map(server)?;
        let batch = map.create_batch();
        meta::create_with_async(server, &self.name, &meta, &batch, IfExists::Open).await?;
        Ok(map)
    }

    fn map(&self, server: &Server) -> Result<(SharedOverwriteMap, Meta), Error> {
        let (buckets, shards, meta) = self.plan()?;
        let map = SharedOverwriteMap::new(server, &self.name, buckets, shards, self.seed)
            .with_lease(self.lease);
        Ok((map, meta))
    }
}

/// The description of a map.
fn describe(buckets: u64, shards: u32, seed: u64) -> Meta {
    let hasher = StableHasher::new().identity().map(|i| i.name().to_owned());
    Meta::new("map")
        .with("buckets", buckets)
        .with("shards", shards)
        .with("hasher", hasher.unwrap_or_default())
        .with("seed", seed)
}

/// Where one item is on the server.
#[derive(Clone, Copy)]
struct Located {
    shard: usize,
    /// The slot's bit offset in its shard.
    offset: u64,
    fingerprint: u64,
}

/// Per item, where its answer is in the replies: (reply index, position in the reply).
type Places = Vec<(usize, usize)>;

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
        let stored = meta::open(server, name, &describe(1, 1, 0))?;
        Self::from_meta(server, name, &stored)
    }

    /// [`open`](Self::open), on the tokio connection.
    ///
    /// # Errors
    ///
    /// As [`open`](Self::open).
    pub async fn open_async(server: &Server, name: &str) -> Result<Self, Error> {
        let stored = meta::open_async(server, name, &describe(1, 1, 0)).await?;
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
        Ok(Self::new(server, name, buckets, shards, seed))
    }

    fn new(server: &Server, name: &str, buckets: u64, shards: u32, seed: u64) -> Self {
        Self {
            server: server.clone(),
            name: name.to_owned(),
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
    /// [`SharedMapBuilder::lease`]); at least a millisecond.
    pub fn with_lease(mut self, lease: Duration) -> Self {
        self.lease = lease.max(Duration::from_millis(1));
        self
    }

    /// How long this handle's claims hold their items unless committed or renewed.
    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// The creation of every shard with its guard and its leases ([`CREATE`]).
    fn create_batch(&self) -> Batch {
        let mut batch = Batch::default();
        for s in 0..self.keys.len() {
            let k = batch.key(&self.keys[s]);
            let guard = self.guard_byte(s).to_string().into_bytes();
            batch.push_script(k, &CREATE, &[&self.keys[s], &self.leases[s]], &[guard]);
        }
        batch
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

    /// The number of slots in shard `s`.
    fn shard_slots(&self, s: usize) -> u64 {
        let first = s as u64 * self.slots_per_shard;
        (self.buckets - first).min(self.slots_per_shard)
    }

    /// The offset of shard `s`'s guard byte, in bytes.
    fn guard_byte(&self, s: usize) -> u64 {
        self.shard_slots(s) * 8
    }

    fn locate(&self, hash: Hash128) -> Located {
        let at = MapSlot::new(hash, self.buckets);
        let shard = at.slot() / self.slots_per_shard;
        Located {
            shard: shard as usize,
            offset: (at.slot() - shard * self.slots_per_shard) * 64,
            fingerprint: at.fingerprint(),
        }
    }

    /// One `BITFIELD` (`write`) or `BITFIELD_RO` per shard touched and 512 items, each reading
    /// the guard first; per item, where its slot's value is in the replies.
    fn batch(&self, items: &[Located], write: bool) -> (Batch, Places) {
        let mut per_shard: Vec<Vec<Vec<usize>>> = vec![Vec::new(); self.keys.len()];
        let mut at = vec![(0, 0); items.len()];
        for (i, item) in items.iter().enumerate() {
            let cmds = &mut per_shard[item.shard];
            if cmds.last().is_none_or(|cmd| cmd.len() == MAX_FIELDS) {
                cmds.push(Vec::new());
            }
            let last = cmds.len() - 1;
            at[i] = (last, cmds[last].len() + 1); // after the guard's GET
            cmds[last].push(i);
        }
        let mut batch = Batch::default();
        let mut first_cmd = vec![0; self.keys.len()];
        for (s, cmds) in per_shard.iter().enumerate() {
            if cmds.is_empty() {
                continue;
            }
            let key = &self.keys[s];
            let k = batch.key(key);
            first_cmd[s] = batch.len();
            for members in cmds {
                let mut cmd = redis::cmd(if write { "BITFIELD" } else { "BITFIELD_RO" });
                cmd.arg(key)
                    .arg("GET")
                    .arg("u8")
                    .arg(self.guard_byte(s) * 8);
                for &i in members {
                    let item = &items[i];
                    if write {
                        cmd.arg("SET")
                            .arg("i64")
                            .arg(item.offset)
                            .arg(item.fingerprint as i64);
                    } else {
                        cmd.arg("GET").arg("i64").arg(item.offset);
                    }
                }
                // The guard's value, then one per item.
                batch.push_fields(k, cmd, members.len() + 1);
            }
        }
        for (place, item) in at.iter_mut().zip(items) {
            place.0 += first_cmd[item.shard];
        }
        (batch, at)
    }

    /// Each item's slot value (the old one, for a write), checking every command's guard.
    fn slot_values(
        &self,
        items: &[Located],
        at: &Places,
        replies: &[Value],
    ) -> Result<Vec<u64>, Error> {
        let what = |shard: usize, reply: &Value| {
            Error::corrupt(&self.keys[shard], format!("BITFIELD answered {reply:?}"))
        };
        let mut checked = vec![false; replies.len()];
        let mut values = Vec::with_capacity(items.len());
        for (item, &(cmd, pos)) in items.iter().zip(at) {
            let reply = replies
                .get(cmd)
                .ok_or_else(|| what(item.shard, &Value::Nil))?;
            let Value::Array(fields) = reply else {
                return Err(what(item.shard, reply));
            };
            if !checked[cmd] {
                match fields.first() {
                    Some(Value::Int(1)) => checked[cmd] = true,
                    Some(Value::Int(0)) => {
                        return Err(Error::Missing {
                            name: self.name.clone(),
                            key: self.keys[item.shard].clone(),
                        });
                    }
                    _ => return Err(what(item.shard, reply)),
                }
            }
            match fields.get(pos) {
                Some(Value::Int(v)) => values.push(*v as u64),
                _ => return Err(what(item.shard, reply)),
            }
        }
        Ok(values)
    }

    fn locate_all(&self, hashes: &[Hash128]) -> Vec<Located> {
        hashes.iter().map(|&h| self.locate(h)).collect()
    }

    /// Inserts the items of `hashes` (from [`hasher`](Self::hasher)), appending to `new`
    /// whether each was new; returns how many were. One round trip.
    ///
    /// # Errors
    ///
    /// As [`insert`](Self::insert); `new` is then unchanged.
    pub fn insert_many_hashes(
        &self,
        hashes: &[Hash128],
        new: &mut Vec<bool>,
    ) -> Result<usize, Error> {
        let start = new.len();
        let mut count = 0;
        for chunk in hashes.chunks(crate::REQUEST_ITEMS) {
            let answers = (|| {
                let items = self.locate_all(chunk);
                let (batch, at) = self.batch(&items, true);
                let old = self.slot_values(&items, &at, &self.server.run(&batch)?)?;
                Ok::<_, Error>(
                    items
                        .iter()
                        .zip(old)
                        .map(|(item, old)| old != item.fingerprint)
                        .collect::<Vec<_>>(),
                )
            })();
            match answers {
                Ok(answers) => count += append(new, answers.into_iter()),
                Err(err) => {
                    new.truncate(start);
                    return Err(err);
                }
            }
        }
        Ok(count)
    }

    /// [`insert_many_hashes`](Self::insert_many_hashes), on the tokio connection.
    ///
    /// # Errors
    ///
    /// As [`insert`](Self::insert); `new` is then unchanged.
    pub async fn insert_many_hashes_async(
        &self,
        hashes: &[Hash128],
        new: &mut Vec<bool>,
    ) -> Result<usize, Error> {
        let start = new.len();
        let mut count = 0;
        for chunk in hashes.chunks(crate::REQUEST_ITEMS) {
            let answers = async {
                let items = self.locate_all(chunk);
                let (batch, at) = self.batch(&items, true);
                let old = self.slot_values(&items, &at, &self.server.run_async(&batch).await?)?;
                Ok::<_, Error>(
                    items
                        .iter()
                        .zip(old)
                        .map(|(item, old)| old != item.fingerprint)
                        .collect::<Vec<_>>(),
                )
            }
            .await;
            match answers {
                Ok(answers) => count += append(new, answers.into_iter()),
                Err(err) => {
                    new.truncate(start);
                    return Err(err);
                }
            }
        }
        Ok(count)
    }

    /// Looks up the items of `hashes`, appending to `hits` whether each is remembered; returns
    /// how many are. One round trip.
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
            let answers = (|| {
                let items = self.locate_all(chunk);
                let (batch, at) = self.batch(&items, false);
                let held = self.slot_values(&items, &at, &self.server.run(&batch)?)?;
                Ok::<_, Error>(
                    items
                        .iter()
                        .zip(held)
                        .map(|(item, held)| held == item.fingerprint)
                        .collect::<Vec<_>>(),
                )
            })();
            match answers {
                Ok(answers) => count += append(hits, answers.into_iter()),
                Err(err) => {
                    hits.truncate(start);
                    return Err(err);
                }
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
            let answers = async {
                let items = self.locate_all(chunk);
                let (batch, at) = self.batch(&items, false);
                let held = self.slot_values(&items, &at, &self.server.run_async(&batch).await?)?;
                Ok::<_, Error>(
                    items
                        .iter()
                        .zip(held)
                        .map(|(item, held)| held == item.fingerprint)
                        .collect::<Vec<_>>(),
                )
            }
            .await;
            match answers {
                Ok(answers) => count += append(hits, answers.into_iter()),
                Err(err) => {
                    hits.truncate(start);
                    return Err(err);
                }
            }
        }
        Ok(count)
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
        let (batch, key) = self.forget_batch(hash);
        self.after_forget(key, self.server.run(&batch)?)
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
        let (batch, key) = self.forget_batch(hash);
        self.after_forget(key, self.server.run_async(&batch).await?)
    }

    /// The compare-and-clear of `hash`'s slot ([`FORGET`]), and its shard's key.
    fn forget_batch(&self, hash: Hash128) -> (Batch, &str) {
        let item = self.locate(hash);
        let key = &self.keys[item.shard];
        let args = [
            (item.offset / 8).to_string().into_bytes(),
            item.fingerprint.to_be_bytes().to_vec(),
            self.guard_byte(item.shard).to_string().into_bytes(),
        ];
        let mut batch = Batch::default();
        let k = batch.key(key);
        batch.push_script(k, &FORGET, &[key], &args);
        (batch, key)
    }

    fn after_forget(&self, key: &str, replies: Vec<Value>) -> Result<bool, Error> {
        match replies.into_iter().next().unwrap_or(Value::Nil) {
            Value::Int(1) => Ok(true),
            Value::Int(0) => Ok(false),
            Value::Int(-1) => Err(Error::Missing {
                name: self.name.clone(),
                key: key.to_owned(),
            }),
            other => Err(Error::corrupt(
                key,
                format!("the forget script answered {other:?}"),
            )),
        }
    }

    /// Deletes the map: its description first (so that no process opens it any more), then its
    /// shards. Processes that have it open get [`Error::Missing`] (a write of theirs may leave a
    /// short key without the guard byte behind; creating the map again replaces it, deleting
    /// the map again removes it).
    ///
    /// # Errors
    ///
    /// The server's errors.
    pub fn destroy(self) -> Result<(), Error> {
        let mut batch = Batch::default();
        for key in std::iter::once(names::meta(&self.name)).chain(self.keys.iter().cloned()) {
            let k = batch.key(&key);
            let mut cmd = redis::cmd("DEL");
            cmd.arg(&key);
            batch.push(k, cmd);
        }
        self.server.run(&batch).map(drop)
    }
}

/// Appends `answers` to `out`; how many are `true`.
fn append(out: &mut Vec<bool>, answers: impl Iterator<Item = bool>) -> usize {
    let before = out.len();
    out.extend(answers);
    out[before..].iter().filter(|&&b| b).count()
}
