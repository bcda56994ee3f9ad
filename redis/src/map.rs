//! [`SharedOverwriteMap`]: the crate's [`OverwriteMap`] in a server's string keys, slot for
//! slot, with its at-least-once claims ([`SharedClaim`]): the same answers as a local map of
//! the same bucket count given the same sequence of operations, for every process and machine
//! that opens it by name.
//!
//! The layout of the slots on the server and the atomicity argument of each step are in
//! [`SharedOverwriteMap`]'s docs (public, unlike this module).

use std::hash::Hash;
use std::sync::LazyLock;

use redis::{Script, Value};
use seen::builder::MapSize;
use seen::hash::{Hash128, ItemHasher, StableHasher};
use seen::{MapSlot, OverwriteMap};

use crate::bloom::{DEFAULT_SHARD_BYTES, MAX_SHARD_BYTES};
use crate::meta::{self, Meta};
use crate::server::Batch;
use crate::{Error, Server, names};

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

/// A shard's creation: every slot empty, the guard byte set, in one atomic step.
static CREATE: LazyLock<Lua> = LazyLock::new(|| {
    Lua::new(
        r"-- KEYS[1]: a shard. ARGV[1]: the guard byte's offset.
redis.call('DEL', KEYS[1])
return redis.call('SETRANGE', KEYS[1], ARGV[1], '\1')",
    )
});

/// A script of one key: its source, and its SHA-1 for `EVALSHA` (from [`redis::Script`]).
struct Lua {
    source: &'static str,
    sha: String,
}

impl Lua {
    fn new(source: &'static str) -> Self {
        Self {
            source,
            sha: Script::new(source).get_hash().to_owned(),
        }
    }
}

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
/// let map = SharedOverwriteMap::builder("inbox", 1_000_000).create(&server)?;
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
/// error persists until the map is created anew, which replaces every shard: `create` does it
/// when the description is gone too (a restart that lost everything); with the description
/// still there, [`destroy`](SharedOverwriteMap::destroy) the map first.
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
/// - **Claim**: an insert that answered "new" gives a [`SharedClaim`]; its `commit` writes
///   nothing, its forget (explicit or on drop) is the forget above. The at-least-once argument
///   is the local [`Claim`](seen::Claim)'s: a delivery is refused only while its slot holds its
///   fingerprint, which a live or committed claim put there (a dropped one would have erased
///   it), and a forget only ever erases, so a race can cause a duplicate, never a loss.
/// - **Create**: the description is written with `SET ... NX GET` (among racing creators
///   exactly one writes it, the others read it and open the map or refuse a mismatch); the
///   creator then runs one script per shard that deletes the key and writes the guard byte
///   (`SETRANGE`, which allocates the shard's full length at once). Atomic per shard, so no
///   insert lands in a half-created shard; an insert before it finds no guard and fails with
///   [`Error::Missing`], never with an answer.
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

    /// Creates the map on `server` (every slot empty), or opens it if a map of this name with
    /// the same parameters exists (so every process of a service can run the same line).
    ///
    /// # Errors
    ///
    /// [`Error::Mismatch`] if the name holds a map with other parameters (naming the first) or
    /// another kind of structure; [`Error::Local`] for a size the library refuses (0 buckets, a
    /// probability outside (0, 1)); [`Error::InvalidName`]; the server's errors.
    pub fn create(&self, server: &Server) -> Result<SharedOverwriteMap, Error> {
        let (buckets, shards, meta) = self.plan()?;
        let map = SharedOverwriteMap::new(server, &self.name, buckets, shards, self.seed);
        if meta::create(server, &self.name, &meta)? {
            for s in 0..map.keys.len() {
                let guard = map.guard_byte(s).to_string();
                run_script(server, &CREATE, &map.keys[s], &[guard.into_bytes()])?;
            }
        }
        Ok(map)
    }

    /// [`create`](Self::create), on the tokio connection.
    ///
    /// # Errors
    ///
    /// As [`create`](Self::create).
    pub async fn create_async(&self, server: &Server) -> Result<SharedOverwriteMap, Error> {
        let (buckets, shards, meta) = self.plan()?;
        let map = SharedOverwriteMap::new(server, &self.name, buckets, shards, self.seed);
        if meta::create_async(server, &self.name, &meta).await? {
            for s in 0..map.keys.len() {
                let guard = map.guard_byte(s).to_string();
                run_script_async(server, &CREATE, &map.keys[s], &[guard.into_bytes()]).await?;
            }
        }
        Ok(map)
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
        }
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
        let items = self.locate_all(hashes);
        let (batch, at) = self.batch(&items, true);
        let old = self.slot_values(&items, &at, &self.server.run(&batch)?)?;
        Ok(append(
            new,
            items
                .iter()
                .zip(old)
                .map(|(item, old)| old != item.fingerprint),
        ))
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
        let items = self.locate_all(hashes);
        let (batch, at) = self.batch(&items, true);
        let old = self.slot_values(&items, &at, &self.server.run_async(&batch).await?)?;
        Ok(append(
            new,
            items
                .iter()
                .zip(old)
                .map(|(item, old)| old != item.fingerprint),
        ))
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
        let items = self.locate_all(hashes);
        let (batch, at) = self.batch(&items, false);
        let held = self.slot_values(&items, &at, &self.server.run(&batch)?)?;
        Ok(append(
            hits,
            items
                .iter()
                .zip(held)
                .map(|(item, held)| held == item.fingerprint),
        ))
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
        let items = self.locate_all(hashes);
        let (batch, at) = self.batch(&items, false);
        let held = self.slot_values(&items, &at, &self.server.run_async(&batch).await?)?;
        Ok(append(
            hits,
            items
                .iter()
                .zip(held)
                .map(|(item, held)| held == item.fingerprint),
        ))
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
        let (key, args) = self.forget_args(hash);
        self.after_forget(key, run_script(&self.server, &FORGET, key, &args)?)
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
        let (key, args) = self.forget_args(hash);
        self.after_forget(
            key,
            run_script_async(&self.server, &FORGET, key, &args).await?,
        )
    }

    fn forget_args(&self, hash: Hash128) -> (&str, [Vec<u8>; 3]) {
        let item = self.locate(hash);
        let args = [
            (item.offset / 8).to_string().into_bytes(),
            item.fingerprint.to_be_bytes().to_vec(),
            self.guard_byte(item.shard).to_string().into_bytes(),
        ];
        (&self.keys[item.shard], args)
    }

    fn after_forget(&self, key: &str, reply: Value) -> Result<bool, Error> {
        match reply {
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

    /// Claims `item` for at-least-once processing: `Ok(None)` if the map remembers it (a
    /// duplicate: acknowledge and drop it), otherwise a [`SharedClaim`] that keeps it
    /// remembered, for every process, while you process it. [`commit`](SharedClaim::commit)
    /// it once processing succeeded; dropped without `commit`, it forgets the item (a blocking
    /// round trip), so that the next delivery gets through. `claim` is
    /// [`insert`](Self::insert): among racing claims of an item the map does not remember,
    /// from any number of processes, exactly one gets it.
    ///
    /// # Errors
    ///
    /// As [`insert`](Self::insert): never a claim for a write whose outcome is unknown. After
    /// an [`Error::Connection`] the item **may be in the map with no claim to forget it**; if
    /// so, its redelivery would be taken for a duplicate. Before handing the message back to
    /// the queue, [`forget`](Self::forget) it (retrying until the server answers), or accept
    /// that risk.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use seen_redis::{Server, SharedOverwriteMap};
    /// # let server = Server::open("redis://127.0.0.1:6379")?;
    /// let map = SharedOverwriteMap::builder("inbox", 1_000_000).create(&server)?;
    /// let claim = map.claim("msg-1")?.expect("new");
    /// assert!(map.claim("msg-1")?.is_none()); // claimed: a duplicate, in any process
    /// drop(claim); // processing failed: forgotten
    /// assert!(map.claim("msg-1")?.is_some()); // the redelivery gets through (and is dropped)
    /// # Ok::<(), seen_redis::Error>(())
    /// ```
    #[must_use = "dropping the claim at once forgets the item: bind it and `commit` it"]
    pub fn claim<T: Hash + ?Sized>(&self, item: &T) -> Result<Option<SharedClaim<'_>>, Error> {
        let hash = self.hasher.hash_item(item);
        Ok(self
            .insert_hash(hash)?
            .then(|| SharedClaim::new(self, hash)))
    }

    /// [`claim`](Self::claim), on the tokio connection. The claim is the same
    /// [`SharedClaim`]: forget it with [`forget_async`](SharedClaim::forget_async) when
    /// processing fails, since a drop cannot await (a drop without `commit` still forgets,
    /// blocking: see [`SharedClaim`]).
    ///
    /// # Errors
    ///
    /// As [`claim`](Self::claim).
    #[must_use = "dropping the claim at once forgets the item: bind it and `commit` it"]
    pub async fn claim_async<T: Hash + ?Sized>(
        &self,
        item: &T,
    ) -> Result<Option<SharedClaim<'_>>, Error> {
        let hash = self.hasher.hash_item(item);
        Ok(self
            .insert_hash_async(hash)
            .await?
            .then(|| SharedClaim::new(self, hash)))
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

/// The request that runs `script` on `key`: `EVALSHA`, or `EVAL` with the source.
fn script_batch(script: &Lua, eval: bool, key: &str, args: &[Vec<u8>]) -> Batch {
    let mut batch = Batch::default();
    let k = batch.key(key);
    let mut cmd = redis::cmd(if eval { "EVAL" } else { "EVALSHA" });
    cmd.arg(if eval {
        script.source
    } else {
        script.sha.as_str()
    });
    cmd.arg(1).arg(key);
    for arg in args {
        cmd.arg(arg.as_slice());
    }
    batch.push(k, cmd);
    batch
}

/// Whether `err` says that the server does not have the script (so it did not run).
fn is_noscript(result: &Result<Vec<Value>, Error>) -> bool {
    matches!(result, Err(Error::Server { code, .. }) if code == "NOSCRIPT")
}

/// Runs `script` on `key` with `args` (one round trip, two after a `NOSCRIPT`); its reply.
fn run_script(server: &Server, script: &Lua, key: &str, args: &[Vec<u8>]) -> Result<Value, Error> {
    let mut replies = server.run(&script_batch(script, false, key, args));
    if is_noscript(&replies) {
        replies = server.run(&script_batch(script, true, key, args));
    }
    first(key, replies?)
}

/// [`run_script`], on the tokio connection.
async fn run_script_async(
    server: &Server,
    script: &Lua,
    key: &str,
    args: &[Vec<u8>],
) -> Result<Value, Error> {
    let mut replies = server
        .run_async(&script_batch(script, false, key, args))
        .await;
    if is_noscript(&replies) {
        replies = server
            .run_async(&script_batch(script, true, key, args))
            .await;
    }
    first(key, replies?)
}

fn first(key: &str, replies: Vec<Value>) -> Result<Value, Error> {
    replies
        .into_iter()
        .next()
        .ok_or_else(|| Error::corrupt(key, "no reply to a script"))
}

/// An item claimed in a [`SharedOverwriteMap`] for at-least-once processing (from
/// [`SharedOverwriteMap::claim`] or [`claim_async`](SharedOverwriteMap::claim_async)):
/// commit it once processed, or forget it to let the item through again.
///
/// The local [`Claim`](seen::Claim)'s semantics and limits (a claim is not a lock; a forget
/// can erase a later claim of the same item that re-inserted it after an overwrite), with every
/// process that shares the map: while the claim lives, and after it is committed, every other
/// claim of the item, from any process, gets `None`, until another item overwrites the slot.
///
/// - [`commit`](Self::commit): processing succeeded; the map writes nothing (no round trip).
/// - [`forget`](Self::forget) / [`forget_async`](Self::forget_async): processing failed;
///   forgets the item now (one round trip, the compare-and-clear that never erases another
///   item) and says whether it erased it. On an error the claim stays armed: call it again, or
///   let the drop try once more.
/// - **Dropped** without either (an early return, `?`, a panic unwinding): forgets the item as
///   `forget` does, **blocking** for one round trip on a blocking connection, and **ignores any
///   error** (a drop cannot return one): if the server cannot be reached, the item stays
///   remembered and its redelivery may be taken for a duplicate until other items overwrite
///   the slot. Call `forget` to see the error.
///
/// **In async code**, call [`forget_async`](Self::forget_async)`.await` on failure: a drop
/// cannot await. A claim dropped there uncommitted still forgets, with the blocking round trip
/// above, on the executor's thread. That is the safe choice: leaving the item remembered would
/// drop the failed message's redelivery (a loss), and a forget spawned in the background could
/// run after the message was handed back and its redelivery refused. The cost is one blocked
/// round trip on the failure path.
///
/// Hand a failed message back to the queue only after the forget returned (or the claim was
/// dropped): a delivery that arrives while the claim lives is a duplicate and gets `None`.
///
/// # Examples
///
/// ```no_run
/// # use seen_redis::{Server, SharedOverwriteMap};
/// # let server = Server::open("redis://127.0.0.1:6379")?;
/// let map = SharedOverwriteMap::builder("inbox", 1_000_000).create(&server)?;
/// let mut claim = map.claim("msg-2")?.expect("new");
/// assert!(claim.forget()?); // failed: forgotten now, the error (if any) seen
/// assert!(map.claim("msg-2")?.is_some()); // the retry gets through
/// # Ok::<(), seen_redis::Error>(())
/// ```
#[must_use = "dropping a claim forgets the item: `commit` it once the item is processed"]
pub struct SharedClaim<'a> {
    map: &'a SharedOverwriteMap,
    /// The claimed hash; `None` once committed or forgotten, so that the drop does nothing.
    hash: Option<Hash128>,
}

impl<'a> SharedClaim<'a> {
    fn new(map: &'a SharedOverwriteMap, hash: Hash128) -> Self {
        Self {
            map,
            hash: Some(hash),
        }
    }

    /// Processing succeeded: keeps the item remembered (the map writes nothing), so that later
    /// deliveries of it are dropped.
    pub fn commit(mut self) {
        self.hash = None;
    }

    /// Processing failed: forgets the item now, as dropping the claim would, and returns
    /// whether it erased it (`false` if another item had overwritten it meanwhile, or it had
    /// been forgotten already). After it returns `Ok`, the claim does nothing more.
    ///
    /// # Errors
    ///
    /// As [`SharedOverwriteMap::forget`]; the claim then stays armed (calling `forget` again,
    /// or the drop, tries again).
    pub fn forget(&mut self) -> Result<bool, Error> {
        let Some(hash) = self.hash else {
            return Ok(false);
        };
        let erased = self.map.forget_hash(hash)?;
        self.hash = None;
        Ok(erased)
    }

    /// [`forget`](Self::forget), on the tokio connection: what async code calls when processing
    /// failed.
    ///
    /// # Errors
    ///
    /// As [`forget`](Self::forget).
    pub async fn forget_async(&mut self) -> Result<bool, Error> {
        let Some(hash) = self.hash else {
            return Ok(false);
        };
        let erased = self.map.forget_hash_async(hash).await?;
        self.hash = None;
        Ok(erased)
    }

    /// The claimed item's hash (what [`SharedOverwriteMap::forget_hash`] takes), or `None`
    /// once committed or forgotten.
    pub fn hash(&self) -> Option<Hash128> {
        self.hash
    }
}

impl Drop for SharedClaim<'_> {
    /// Forgets the item unless the claim was committed or forgotten: blocking, errors ignored
    /// (see the type docs).
    fn drop(&mut self) {
        if let Some(hash) = self.hash.take() {
            let _ = self.map.forget_hash(hash);
        }
    }
}

impl std::fmt::Debug for SharedClaim<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedClaim")
            .field("map", &self.map.name)
            .field("hash", &self.hash)
            .finish()
    }
}
