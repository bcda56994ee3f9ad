//! [`SharedWindowedFilter`]: the last `n` periods of items in a server, one string key per
//! generation that expires on its own, with the window semantics of the local
//! [`WindowedBloomFilter`](seen::WindowedBloomFilter) built with
//! [`periods(n)`](seen::builder::BloomBuilder::periods) and
//! [`rotate_every_aligned(period)`](seen::builder::BloomBuilder::rotate_every_aligned).
//!
//! The design and the atomicity argument of each step are in [`SharedWindowedFilter`]'s docs
//! (so that they are rendered).

use std::hash::Hash;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use redis::Value;
use seen::clock::Clock;
use seen::hash::{Hash128, ItemHasher, StableHasher};
use seen::sizing::{BlockedSizing, MAX_GENERATIONS, blocked, window};
use seen::{BlockBits, BloomInfo, Layout};

use crate::bloom::{DEFAULT_SHARD_BYTES, MAX_SHARD_BYTES};
use crate::meta::{self, IfExists, Meta};
use crate::script::Lua;
use crate::server::Batch;
use crate::{Error, Server, names};

/// At most this many `GET`s in one `BITFIELD_RO` of a read.
const MAX_FIELDS: usize = 512;

/// At most this many items per script call: each call holds the server for its run, so a
/// large batch is cut into calls of a few hundred microseconds (still one pipeline).
const ITEMS_PER_SCRIPT: usize = 256;

/// How often a handle on the server's time reads `TIME` again, so that its monotonic clock's
/// drift stays far below a round trip.
const RESYNC: Duration = Duration::from_secs(600);

/// The insert script: `KEYS[1]` the generation written, `KEYS[2..]` its live neighbours, the
/// last key the shard's ledger; `ARGV[1]` the expiry in milliseconds, `ARGV[2]` the guard
/// byte's offset, then one generation number per generation key, then per item, per
/// generation key in order, a count and that many bit offsets (the item's bits that the read
/// found unset in that key). Returns one integer per item, 1 if new; or `{-1, k}` if
/// generation key `k` is lost, `{-2}` if the ledger is. Its atomicity argument is in
/// [`SharedWindowedFilter`]'s docs.
static INSERT: LazyLock<Lua> = LazyLock::new(|| {
    Lua::new(
        "window insert",
        r"local nk = #KEYS - 1
local ledger = KEYS[#KEYS]
if redis.call('HGET', ledger, 'guard') ~= '1' then return {-2} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local guard = tonumber(ARGV[2])
local present = {}
for k = 1, nk do
  if redis.call('GETRANGE', KEYS[k], guard, guard) == '\1' then
    present[k] = true
  else
    local d = redis.call('HGET', ledger, ARGV[2 + k])
    if d and tonumber(d) > now then return {-1, k} end
    present[k] = false
  end
end
local deadline = now + tonumber(ARGV[1])
local was = 0
if present[1] then
  was = tonumber(redis.call('HGET', ledger, ARGV[3]) or '0')
else
  redis.call('DEL', KEYS[1])
  redis.call('SETRANGE', KEYS[1], guard, '\1')
  local all = redis.call('HGETALL', ledger)
  for j = 1, #all, 2 do
    if all[j] ~= 'guard' and tonumber(all[j + 1]) <= now then redis.call('HDEL', ledger, all[j]) end
  end
end
if deadline > was then
  redis.call('HSET', ledger, ARGV[3], deadline)
  redis.call('PEXPIREAT', KEYS[1], deadline)
end
local out = {}
local i = 3 + nk
while i <= #ARGV do
  local found = false
  local sets = {}
  for k = 1, nk do
    local c = tonumber(ARGV[i])
    i = i + 1
    if k == 1 then
      for j = 0, c - 1 do
        local n = #sets
        sets[n + 1] = 'SET'; sets[n + 2] = 'u1'; sets[n + 3] = ARGV[i + j]; sets[n + 4] = 1
      end
    elseif present[k] and not found then
      local gets = {}
      for j = 0, c - 1 do
        local n = #gets
        gets[n + 1] = 'GET'; gets[n + 2] = 'u1'; gets[n + 3] = ARGV[i + j]
      end
      found = true
      for _, bit in ipairs(redis.call('BITFIELD_RO', KEYS[k], unpack(gets))) do
        if bit == 0 then found = false; break end
      end
    end
    i = i + c
  end
  local new = 0
  if not found and #sets > 0 then
    for _, bit in ipairs(redis.call('BITFIELD', KEYS[1], unpack(sets))) do
      if bit == 0 then new = 1; break end
    end
  end
  out[#out + 1] = new
end
return out",
    )
});

/// The check after a read of one shard's generations: `KEYS` the generation keys read, the
/// last key the shard's ledger; `ARGV[1]` the guard byte's offset, then one generation number
/// per generation key. Returns 0 if every generation the ledger holds live is there, `k` if
/// generation key `k` is lost, -2 if the ledger is.
static CHECK: LazyLock<Lua> = LazyLock::new(|| {
    Lua::new(
        "window check",
        r"local ledger = KEYS[#KEYS]
if redis.call('HGET', ledger, 'guard') ~= '1' then return -2 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for k = 1, #KEYS - 1 do
  if redis.call('GETRANGE', KEYS[k], ARGV[1], ARGV[1]) ~= '\1' then
    local d = redis.call('HGET', ledger, ARGV[1 + k])
    if d and tonumber(d) > now then return k end
  end
end
return 0",
    )
});

/// A ledger's creation: its guard field, unless it has one (a racing creator's).
static CREATE_LEDGER: LazyLock<Lua> = LazyLock::new(|| {
    Lua::new(
        "ledger create",
        r"if redis.call('HGET', KEYS[1], 'guard') == '1' then return 0 end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'guard', '1')
return 1",
    )
});

/// The server's time, read on the description's key's node.
static TIME: LazyLock<Lua> = LazyLock::new(|| Lua::new("time", "return redis.call('TIME')"));

/// A Bloom filter of the last `n` periods that every process and machine opening it by name
/// shares: the window semantics of a local [`WindowedBloomFilter`](seen::WindowedBloomFilter)
/// with [`periods(n)`](seen::builder::BloomBuilder::periods) and an aligned rotation, kept in
/// a Redis or Valkey server (or cluster) as one string key per generation that expires on its
/// own.
///
/// # Guarantees
///
/// With `P` the period and `n` the periods (`n + 1` live generations):
///
/// - **Window**: an item that `insert` reported new is found by every lookup and insert for
///   at least `n · P` after that insert (until the end of the `n`-th period after the one it
///   came in), and by none more than `(n + 1) · P` after it (but for a false positive). So a
///   repeat within `n · P` is always caught, and one more than `(n + 1) · P` later always
///   passes: the command's `--window W --period P` with `n = W / P`. An insert that returns
///   `false` does not renew the item (first-seen window).
/// - **Exactly once**: among any number of clients inserting the same new item at once,
///   exactly one is told `true`, also across a period boundary where their clocks put them
///   one generation apart (for `n >= 1`; the argument is
///   [below](#the-protocol-and-why-each-step-is-atomic-enough)).
/// - **Errors answer nothing**: a batch that fails returns an [`Error`] and no answer for any
///   of its items; retrying is safe.
/// - **Round trips**: a lookup or a batch of lookups, one; an insert or a batch of inserts,
///   two (the second only for items the first did not find); plus one `TIME` every 10
///   minutes on the server's time.
/// - **False positives**: at most the target rate over the whole window when every
///   generation holds its capacity.
///
/// # Time and generations
///
/// Generation `g` is the period `[g·P, (g+1)·P)` of time since the Unix epoch (`P` the period),
/// as [`Rotation::EveryAligned`](seen::builder::Rotation::EveryAligned) rotates: a client at
/// time `t` is in generation `floor(t / P)`, and the live generations are `g - n ..= g`. The
/// time is the server's: `TIME` (read by a script on the description's key, so every client
/// asks the same server) once at open and again every 10 minutes, carried in between by the
/// local monotonic clock, half a round trip being the error. Clients therefore agree within a
/// round trip or so, and around a boundary two clients may be one generation apart: the
/// protocol below is exactly-once across such a difference (with `n >= 1`). A clock given with
/// [`clock`](SharedWindowBuilder::clock) or [`with_clock`](SharedWindowedFilter::with_clock)
/// replaces the server's time (a [`ManualClock`](seen::clock::ManualClock) in tests, event
/// times in a replay).
///
/// # Where the bits are
///
/// Each generation is a blocked Bloom filter ([`seen::sizing::blocked`]) for one period's
/// items, at the rate that makes the `n + 1` live generations together meet the window's rate:
/// for the word layout exactly [`seen::sizing::window`]'s generation, so an item has the same
/// block and bits here as in the local filter. Its blocks are cut into `shards` runs, and
/// generation `g` of shard `s` is the string key `seen:{NAME:s}:gG`: all generations of a
/// shard share the hash tag `{NAME:s}`, so they are in one Cluster slot and one script reaches
/// them all. The bits within a key are [`SharedBloomFilter`](crate::SharedBloomFilter)'s: the
/// crate's bit `b` of word `w` is the string's bit `64·w + 63 - b`, so `GET i64 64·w` reads the
/// word whole. A key is created by the first insert of its period, at its full length with
/// a **guard byte** of value 1 after its bits (as a Bloom filter's shard), and expires at the
/// end of the last period in which it is live, `(g + n + 1)·P`, plus one period for clients
/// whose clock lags (`PEXPIREAT`, moved later by later writes): the server forgets old
/// generations by itself, and nothing ever rotates or clears.
///
/// Beside the generations, each shard has a **ledger**, the hash `seen:{NAME:s}:gens`: per
/// generation created, the end of its key's life on the server's clock (the same value as
/// its `PEXPIREAT`), and a field `guard` written when the filter is created. It tells the
/// three kinds of missing generation apart: never written (not in the ledger: empty),
/// expired (its end has passed: empty), and **lost** (in the ledger, its end still ahead, but
/// no key with a guard: evicted, deleted, a restart without persistence), which is
/// [`Error::Missing`], never an empty generation. A ledger that is gone is lost too.
///
/// # The protocol, and why each step is atomic enough
///
/// - **Create**: unless the description exists, each shard's ledger with its guard (kept if
///   it has one), then the description (`SET ... NX GET`): the shards before the description.
/// - **Lookup** (one round trip): `EXISTS` of the description (a destroyed filter is an
///   error, never an empty one) and, per shard touched and per generation `g - n ..= g + 1`,
///   one `BITFIELD_RO` with a `GET i64` per word that holds a bit of an item; then, per shard,
///   a check script after its reads on the same connection: a generation key without its
///   guard whose ledger entry is still live is lost (or the ledger is gone): the batch fails.
///   A generation read as empty that the check finds there was created after the read (a
///   lost key is never made again while its entry lives), so the read was right when it
///   ran. (`g + 1` exists only if a client whose clock is ahead wrote into it; its items are
///   in that client's window and will be in ours.) Each command reads a consistent value, and
///   bits are only ever set: an item is reported if one generation has all its bits.
/// - **Insert** (two round trips, the second only for items the read did not find):
///   1. the lookup's read; an item found in a live generation is "not new", and nothing is
///      written: an insert that returns `false` does not renew the item, so the window counts
///      from the insert that let it through (as locally);
///   2. per shard, one script (`EVALSHA`, or `EVAL` after `NOSCRIPT`) over the shard's keys of
///      generations `g`, `g - 1` (if `n >= 1`) and `g + 1` and its ledger, for up to 256
///      items, each with the bits the read found unset in each of those keys. It first checks
///      every key it touches against the ledger (a lost one fails the batch, with nothing
///      written), creates `g`'s key if it is new (with its guard and its ledger entry), and
///      moves its expiry and ledger entry to the later end. For each item in turn, it reads
///      the unset bits in `g - 1` and `g + 1` (`BITFIELD_RO ... GET u1`: one bit per field,
///      so no 64-bit value passes through Lua's doubles); if one of them now has them all,
///      the item is "not new" and nothing is written; otherwise one `BITFIELD ... SET u1`
///      sets the unset bits in `g` and returns their old values, and the item is new if one
///      was 0. A script runs atomically: no other command on the server runs between its
///      checks, its reads and its write.
///
///   Exactly one of any number of racing inserts of one new item is told "new", when the
///   racers' generations differ by at most one and `n >= 1`: every write of the item's bits is
///   such a script on its shard's slot, so the scripts run one after another. The first one
///   that answers "new" leaves all the item's bits set in its generation `h`. A later script
///   from a client in generation `h` finds them set (the bits it sends include every bit
///   still unset, since bits are only set), and one in `h ± 1` reads them in `h`, its `g ∓ 1`:
///   both answer "not new", and so does every later read, which covers `h`. A racer's read
///   that finds nothing means no script had completed the item in a generation the read
///   covers, and the first script then finds it in neither neighbour and sets a bit of it
///   (unless it is a false positive, as locally): at least one "new". Reading only `g ± 1` in
///   the script is enough because a client one generation apart writes only there; the older
///   live generations are not written by anyone, and the read of step 1 covered them. With
///   `n = 0` the previous generation is not in the window, so two clients one generation
///   apart can both be told "new" (each is right in its own window).
/// - A batch sends every shard's commands in one pipeline (a cluster client splits it by
///   node), so a batch of any size is one or two round trips; items repeated in a batch are
///   new once, at their first place (the scripts run in order).
///
/// What a failover can lose: replication is asynchronous, so bits acknowledged by a primary
/// that fails before its replicas copy them are lost (`WAIT` after a batch is the lever); a
/// new primary whose script cache is empty answers `NOSCRIPT`, and the batch sends the script
/// again.
///
/// # Examples
///
/// ```no_run
/// use seen_redis::{Server, SharedWindowedFilter};
/// use std::time::Duration;
/// let server = Server::open("redis://127.0.0.1:6379")?;
/// // The last 7 days (and today), a million new ids a day, 1% false positives over the window.
/// let seen = SharedWindowedFilter::builder("events", 1_000_000)
///     .periods(7)
///     .period(Duration::from_secs(86_400))
///     .create(&server)?;
/// assert!(seen.insert("event-1")?);
/// assert!(!seen.insert("event-1")?); // a repeat within the window, from any process
/// # Ok::<(), seen_redis::Error>(())
/// ```
pub struct SharedWindowedFilter {
    server: Server,
    name: String,
    generation: BlockedSizing,
    fpr: f64,
    periods: u32,
    period_ns: u64,
    shards: u32,
    hasher: StableHasher,
    blocks_per_shard: u64,
    time: Time,
}

/// Where a handle takes the time from.
enum Time {
    /// The server's `TIME`, carried by the monotonic clock since it was read.
    Server(Mutex<Synced>),
    /// A clock the caller gave.
    Clock(Arc<dyn Clock>),
}

/// A reading of the server's time: what it said, and the local instant it said it at.
#[derive(Clone, Copy)]
struct Synced {
    server: Duration,
    at: Instant,
}

impl std::fmt::Debug for SharedWindowedFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedWindowedFilter")
            .field("name", &self.name)
            .field("generation", &self.generation)
            .field("fpr", &self.fpr)
            .field("periods", &self.periods)
            .field("period", &self.period())
            .field("shards", &self.shards)
            .field(
                "time",
                &match self.time {
                    Time::Server(_) => "server",
                    Time::Clock(_) => "clock",
                },
            )
            .finish_non_exhaustive()
    }
}

/// The parameters of a [`SharedWindowedFilter`] to create: [`SharedWindowedFilter::builder`].
#[derive(Clone)]
pub struct SharedWindowBuilder {
    name: String,
    capacity: u64,
    fpr: f64,
    periods: u32,
    period: Duration,
    layout: Layout,
    shards: Option<u32>,
    seed: u64,
    clock: Option<Arc<dyn Clock>>,
}

impl std::fmt::Debug for SharedWindowBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedWindowBuilder")
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
struct Params {
    generation: BlockedSizing,
    fpr: f64,
    periods: u32,
    period_ns: u64,
    shards: u32,
    seed: u64,
}

impl SharedWindowBuilder {
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
    /// day: midnight UTC). At least a millisecond (expiries are in milliseconds).
    ///
    /// Exactly-once inserts need every client within one generation of the others: on the
    /// server's time they agree within about a round trip (and the local clock's drift over
    /// the 10 minutes between readings of `TIME`), so keep the period far above that, a second
    /// or more; with a shorter one, two clients around a boundary can both be told "new".
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
    /// [`with_clock`](SharedWindowedFilter::with_clock)).
    pub fn clock(mut self, clock: impl Clock + 'static) -> Self {
        self.clock = Some(Arc::new(clock));
        self
    }

    fn params(&self) -> Result<Params, Error> {
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
    pub fn create(&self, server: &Server) -> Result<SharedWindowedFilter, Error> {
        self.create_or(server, IfExists::Fail)
    }

    /// Opens the filter if one of this name and these parameters exists, else creates it: the
    /// line every process of a service runs. A filter whose generations or ledgers were lost
    /// is opened, and reports [`Error::Missing`] where it reads them.
    ///
    /// # Errors
    ///
    /// As [`create`](Self::create), except that an existing filter is no error.
    pub fn open_or_create(&self, server: &Server) -> Result<SharedWindowedFilter, Error> {
        self.create_or(server, IfExists::Open)
    }

    /// [`create`](Self::create), on the tokio connection.
    ///
    /// # Errors
    ///
    /// As [`create`](Self::create).
    pub async fn create_async(&self, server: &Server) -> Result<SharedWindowedFilter, Error> {
        self.create_or_async(server, IfExists::Fail).await
    }

    /// [`open_or_create`](Self::open_or_create), on the tokio connection.
    ///
    /// # Errors
    ///
    /// As [`open_or_create`](Self::open_or_create).
    pub async fn open_or_create_async(
        &self,
        server: &Server,
    ) -> Result<SharedWindowedFilter, Error> {
        self.create_or_async(server, IfExists::Open).await
    }

    fn create_or(
        &self,
        server: &Server,
        if_exists: IfExists,
    ) -> Result<SharedWindowedFilter, Error> {
        let params = self.params()?;
        let ledgers = ledgers_batch(&self.name, params.shards);
        meta::create_with(server, &self.name, &describe(&params), &ledgers, if_exists)?;
        let time = match &self.clock {
            Some(clock) => Time::Clock(clock.clone()),
            None => Time::Server(Mutex::new(server_time(server, &self.name)?)),
        };
        Ok(SharedWindowedFilter::new(server, &self.name, params, time))
    }

    async fn create_or_async(
        &self,
        server: &Server,
        if_exists: IfExists,
    ) -> Result<SharedWindowedFilter, Error> {
        let params = self.params()?;
        let ledgers = ledgers_batch(&self.name, params.shards);
        meta::create_with_async(server, &self.name, &describe(&params), &ledgers, if_exists)
            .await?;
        let time = match &self.clock {
            Some(clock) => Time::Clock(clock.clone()),
            None => Time::Server(Mutex::new(server_time_async(server, &self.name).await?)),
        };
        Ok(SharedWindowedFilter::new(server, &self.name, params, time))
    }
}

/// Shard `s`'s ledger: the hash of the generations created in the shard and the end of each
/// one's life on the server's clock, with a `guard` field (value 1) that tells a lost ledger
/// from an empty one.
fn ledger(name: &str, s: usize) -> String {
    names::shard(name, s as u32, "gens")
}

/// The creation of every shard's ledger ([`CREATE_LEDGER`]).
fn ledgers_batch(name: &str, shards: u32) -> Batch {
    let mut batch = Batch::default();
    for s in 0..shards as usize {
        let ledger = ledger(name, s);
        let k = batch.key(&ledger);
        batch.push_script(k, &CREATE_LEDGER, &[&ledger], &[]);
    }
    batch
}

/// One generation's sizing: for the word layout [`window`]'s, the local filter's; for the
/// line layout a line filter at the same per-generation rate.
fn generation_sizing(
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
fn generation_fpr(fpr: f64, generations: u32) -> f64 {
    -((-fpr).ln_1p() / f64::from(generations)).exp_m1()
}

/// The period in nanoseconds, checked: at least a millisecond, at most 2^64 - 1 ns.
fn period_nanos(period: Duration) -> Result<u64, Error> {
    if period < Duration::from_millis(1) {
        return Err(seen::Error::InvalidParameter("the period must be at least 1 ms").into());
    }
    u64::try_from(period.as_nanos()).map_err(|_| {
        seen::Error::InvalidParameter("the period must be at most 2^64 - 1 ns (584 years)").into()
    })
}

/// The description of a filter.
fn describe(params: &Params) -> Meta {
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

/// The request that reads the server's time (on the description's node).
fn time_batch(name: &str) -> Batch {
    let mut batch = Batch::default();
    let key = names::meta(name);
    let k = batch.key(&key);
    batch.push_script(k, &TIME, &[&key], &[]);
    batch
}

/// The reading of `TIME`'s reply, placed at the middle of the round trip.
fn after_time(name: &str, sent: Instant, replies: &[Value]) -> Result<Synced, Error> {
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

fn server_time(server: &Server, name: &str) -> Result<Synced, Error> {
    let sent = Instant::now();
    after_time(name, sent, &server.run(&time_batch(name))?)
}

async fn server_time_async(server: &Server, name: &str) -> Result<Synced, Error> {
    let sent = Instant::now();
    after_time(name, sent, &server.run_async(&time_batch(name)).await?)
}

/// Where one item's bits are.
struct Located {
    shard: usize,
    /// The index of the block's first word in its shard.
    word: u64,
    bits: BlockBits,
}

/// A moment of the filter: the generation and the time it was computed from.
#[derive(Clone, Copy)]
struct Now {
    generation: u64,
    nanos: u128,
}

/// The read of a batch.
struct Read {
    /// The first generation read (the reads cover `first ..= now + 1`).
    first: u64,
    /// Per item, per word of its block with a bit: (shard's command index for generation
    /// `first`, the stride between generations' commands, position in the reply).
    at: Vec<Vec<(usize, usize, usize)>>,
    /// Per shard read, the index of its check ([`CHECK`]), the shard and its first generation.
    checks: Vec<(usize, usize, u64)>,
}

/// What the read found of one item: per generation read, its words.
type Words = Vec<[u64; 8]>;

impl SharedWindowedFilter {
    /// The parameters of a filter called `name` to create or open: `capacity_per_period` new
    /// items per period at the default rate (0.01 over the window), 6 periods, a period of a
    /// day, [`Layout::Word`], the server's time.
    pub fn builder(name: &str, capacity_per_period: u64) -> SharedWindowBuilder {
        SharedWindowBuilder {
            name: name.to_owned(),
            capacity: capacity_per_period,
            fpr: 0.01,
            periods: 6,
            period: Duration::from_secs(86_400),
            layout: Layout::Word,
            shards: None,
            seed: 0,
            clock: None,
        }
    }

    /// Opens the filter called `name`, with the parameters it was created with, on the
    /// server's time.
    ///
    /// # Errors
    ///
    /// [`Error::Missing`] if there is none; [`Error::Mismatch`] if `name` holds another kind
    /// of structure; [`Error::Corrupt`] if its description is not this crate's.
    pub fn open(server: &Server, name: &str) -> Result<Self, Error> {
        let stored = meta::open(server, name, &Self::like())?;
        let params = Self::from_meta(name, &stored)?;
        let time = Time::Server(Mutex::new(server_time(server, name)?));
        Ok(Self::new(server, name, params, time))
    }

    /// [`open`](Self::open), on the tokio connection.
    ///
    /// # Errors
    ///
    /// As [`open`](Self::open).
    pub async fn open_async(server: &Server, name: &str) -> Result<Self, Error> {
        let stored = meta::open_async(server, name, &Self::like()).await?;
        let params = Self::from_meta(name, &stored)?;
        let time = Time::Server(Mutex::new(server_time_async(server, name).await?));
        Ok(Self::new(server, name, params, time))
    }

    /// The fields of a description, for reading one.
    fn like() -> Meta {
        let builder = Self::builder("like", 1);
        describe(&builder.params().expect("valid defaults"))
    }

    fn from_meta(name: &str, stored: &Meta) -> Result<Params, Error> {
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
        let periods = stored.get(name, "periods")?;
        let period_ns: u64 = stored.get(name, "period_ns")?;
        let shards: u32 = stored.get(name, "shards")?;
        let seed = stored.get(name, "seed")?;
        let generation = generation_sizing(capacity, periods, fpr, layout)?;
        if period_ns < 1_000_000
            || shards == 0
            || u64::from(shards) > generation.blocks.min(names::MAX_SHARDS)
        {
            return Err(Error::corrupt(
                &names::meta(name),
                format!("period {period_ns} ns, {shards} shards"),
            ));
        }
        let params = Params {
            generation,
            fpr,
            periods,
            period_ns,
            shards,
            seed,
        };
        // The stored description must be the one this version computes for these parameters:
        // another sizing would put items at other bits.
        let expected = describe(&params);
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
        Ok(params)
    }

    fn new(server: &Server, name: &str, params: Params, time: Time) -> Self {
        Self {
            server: server.clone(),
            name: name.to_owned(),
            blocks_per_shard: params.generation.blocks.div_ceil(u64::from(params.shards)),
            generation: params.generation,
            fpr: params.fpr,
            periods: params.periods,
            period_ns: params.period_ns,
            shards: params.shards,
            hasher: StableHasher::with_seed(params.seed),
            time,
        }
    }

    /// This handle taking the time from `clock` instead of the server's `TIME`: a
    /// [`ManualClock`](seen::clock::ManualClock) in tests and simulations, or a clock of event
    /// times. Every handle of one filter must then agree on the time within a period (the
    /// generations of their inserts at most one apart) for the guarantees to hold.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use seen::clock::ManualClock;
    /// use seen_redis::{Server, SharedWindowedFilter};
    /// use std::time::Duration;
    /// let server = Server::open("redis://127.0.0.1:6379")?;
    /// let hour = Duration::from_secs(3600);
    /// let clock = ManualClock::new(Duration::from_secs(1_700_000_000));
    /// let f = SharedWindowedFilter::builder("w", 1000).periods(2).period(hour).create(&server)?;
    /// let f = f.with_clock(clock.clone());
    /// assert!(f.insert("a")?);
    /// clock.advance(2 * hour);
    /// assert!(f.contains("a")?); // 2 periods later: in the window
    /// clock.advance(hour);
    /// assert!(!f.contains("a")?); // 3 periods later: forgotten (but for a false positive)
    /// # Ok::<(), seen_redis::Error>(())
    /// ```
    pub fn with_clock(mut self, clock: impl Clock + 'static) -> Self {
        self.time = Time::Clock(Arc::new(clock));
        self
    }

    /// The filter's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// One generation's sizing: its capacity (items per period), rate, layout, bits and `k`;
    /// for the word layout, [`seen::sizing::window`]'s `generation`.
    pub fn sizing(&self) -> BlockedSizing {
        self.generation
    }

    /// The target false-positive rate over the whole window.
    pub fn fpr(&self) -> f64 {
        self.fpr
    }

    /// The full periods every item is remembered for, `n`.
    pub fn periods(&self) -> u32 {
        self.periods
    }

    /// The live generations a lookup checks, `n + 1`.
    pub fn generations(&self) -> u32 {
        self.periods + 1
    }

    /// The period.
    pub fn period(&self) -> Duration {
        Duration::from_nanos(self.period_ns)
    }

    /// The number of shards each generation is cut into.
    pub fn shards(&self) -> u32 {
        self.shards
    }

    /// The number of distinct items each generation (each period) is sized for.
    pub fn capacity(&self) -> u64 {
        self.generation.capacity
    }

    /// The request that counts the bits set of generations `from ..= to` in every shard
    /// (`BITCOUNT` of their bits, not their guards), each shard's counts followed by the ledger
    /// check of a read ([`CHECK`]): a generation counted as empty is not a lost one.
    fn count_batch(&self, from: u64, to: u64) -> Batch {
        let mut batch = Batch::default();
        for s in 0..self.shards as usize {
            let guard = self.guard_byte(s);
            let mut keys = Vec::new();
            for g in from..=to {
                let key = self.key(s as u32, g);
                let k = batch.key(&key);
                let mut count = redis::cmd("BITCOUNT");
                count.arg(&key).arg(0).arg(guard - 1);
                batch.push(k, count);
                keys.push(key);
            }
            let mut args = vec![guard.to_string().into_bytes()];
            args.extend((from..=to).map(|g| g.to_string().into_bytes()));
            keys.push(self.ledger(s));
            let k = batch.key(&keys[keys.len() - 1]);
            let names: Vec<&str> = keys.iter().map(String::as_str).collect();
            batch.push_script(k, &CHECK, &names, &args);
        }
        batch
    }

    /// The bits set in each generation `from ..= to`, over every shard.
    fn after_count(&self, from: u64, to: u64, replies: &[Value]) -> Result<Vec<u64>, Error> {
        let per_shard = (to - from + 2) as usize;
        let mut set = vec![0u64; (to - from + 1) as usize];
        for (s, shard) in replies.chunks(per_shard).enumerate() {
            match shard.last() {
                Some(Value::Int(0)) => {}
                Some(Value::Int(-2)) => return Err(self.missing(self.ledger(s))),
                Some(Value::Int(k)) if (1..per_shard as i64).contains(k) => {
                    return Err(self.missing(self.key(s as u32, from + *k as u64 - 1)));
                }
                other => {
                    return Err(Error::corrupt(
                        &self.ledger(s),
                        format!("the count's check answered {other:?}"),
                    ));
                }
            }
            for (i, reply) in shard[..per_shard - 1].iter().enumerate() {
                match reply {
                    Value::Int(n) if *n >= 0 => set[i] += *n as u64,
                    other => {
                        return Err(Error::corrupt(
                            &self.key(s as u32, from + i as u64),
                            format!("BITCOUNT answered {other:?}"),
                        ));
                    }
                }
            }
        }
        Ok(set)
    }

    /// The window's info from the bits set of its live generations.
    fn window_info(&self, sets: &[u64]) -> BloomInfo {
        let generations = self.generations();
        let mut info = BloomInfo::from_bits_set("SharedWindowedFilter", &self.generation, 0);
        info.capacity = self
            .generation
            .capacity
            .saturating_mul(u64::from(generations));
        info.fpr = self.fpr;
        info.bytes = self
            .generation
            .bytes()
            .saturating_mul(u64::from(generations));
        info.layers = generations;
        let lens: Vec<u64> = sets
            .iter()
            .map(|&set| self.generation.estimated_len(set))
            .collect();
        info.estimated_len = lens.iter().fold(0u64, |a, &b| a.saturating_add(b));
        let pass: f64 = lens
            .iter()
            .map(|&len| {
                1.0 - if len == u64::MAX {
                    1.0
                } else {
                    self.generation.fpr_at(len)
                }
            })
            .product();
        info.estimated_fpr = 1.0 - pass;
        info
    }

    /// What the filter is and holds over its live generations: capacity (a generation's
    /// times `n + 1`), rate, bytes, and the distinct items and false-positive rate estimated
    /// from the bits set ([`BloomInfo`], as the local windowed filter's `info()`). One round
    /// trip; the server counts every byte of the live generations: for monitoring, not per
    /// item.
    ///
    /// # Errors
    ///
    /// [`Error::Missing`] if a live generation or a ledger is lost; the server's errors.
    pub fn info(&self) -> Result<BloomInfo, Error> {
        let g = self.now()?.generation;
        let from = g.saturating_sub(u64::from(self.periods));
        let replies = self.server.run(&self.count_batch(from, g))?;
        Ok(self.window_info(&self.after_count(from, g, &replies)?))
    }

    /// [`info`](Self::info), on the tokio connection.
    ///
    /// # Errors
    ///
    /// As [`info`](Self::info).
    pub async fn info_async(&self) -> Result<BloomInfo, Error> {
        let g = self.now_async().await?.generation;
        let from = g.saturating_sub(u64::from(self.periods));
        let replies = self.server.run_async(&self.count_batch(from, g)).await?;
        Ok(self.window_info(&self.after_count(from, g, &replies)?))
    }

    /// The info of one generation (its period's new items: capacity
    /// [`capacity`](Self::capacity)), from its bits set. A generation never written, or
    /// expired, is empty.
    ///
    /// # Errors
    ///
    /// As [`info`](Self::info).
    pub fn generation_info(&self, generation: u64) -> Result<BloomInfo, Error> {
        let replies = self.server.run(&self.count_batch(generation, generation))?;
        let set = self.after_count(generation, generation, &replies)?[0];
        Ok(BloomInfo::from_bits_set(
            "SharedWindowedFilter",
            &self.generation,
            set,
        ))
    }

    /// The hasher: the local filters' default [`StableHasher`], with the filter's seed.
    pub fn hasher(&self) -> &StableHasher {
        &self.hasher
    }

    /// The key of generation `generation` of shard `shard`: `seen:{NAME:SHARD}:gGENERATION`.
    pub fn key(&self, shard: u32, generation: u64) -> String {
        names::shard(&self.name, shard, &format!("g{generation}"))
    }

    /// The current generation by this handle's time: the time since the Unix epoch divided by
    /// the period.
    ///
    /// # Errors
    ///
    /// The server's errors, when it is time to read `TIME` again.
    pub fn generation(&self) -> Result<u64, Error> {
        Ok(self.now()?.generation)
    }

    fn moment(&self, time: Duration) -> Now {
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
    fn cached_now(&self) -> Option<Now> {
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

    fn store_sync(&self, fresh: Synced) -> Now {
        if let Time::Server(synced) = &self.time {
            *synced.lock().unwrap_or_else(|e| e.into_inner()) = fresh;
        }
        self.moment(fresh.server.saturating_add(fresh.at.elapsed()))
    }

    fn now(&self) -> Result<Now, Error> {
        match self.cached_now() {
            Some(now) => Ok(now),
            None => Ok(self.store_sync(server_time(&self.server, &self.name)?)),
        }
    }

    async fn now_async(&self) -> Result<Now, Error> {
        match self.cached_now() {
            Some(now) => Ok(now),
            None => Ok(self.store_sync(server_time_async(&self.server, &self.name).await?)),
        }
    }

    fn words_per_block(&self) -> u64 {
        u64::from(self.generation.layout.block_bits() / 64)
    }

    fn locate(&self, hash: Hash128) -> Located {
        let bits = BlockBits::new(hash, &self.generation);
        let shard = bits.block() / self.blocks_per_shard;
        let word = (bits.block() - shard * self.blocks_per_shard) * self.words_per_block();
        Located {
            shard: shard as usize,
            word,
            bits,
        }
    }

    /// The byte after shard `s`'s bits in each generation: its guard ([`guard`](crate::guard)).
    fn guard_byte(&self, s: usize) -> u64 {
        let first = s as u64 * self.blocks_per_shard;
        (self.generation.blocks - first).min(self.blocks_per_shard) * self.words_per_block() * 8
    }

    fn ledger(&self, s: usize) -> String {
        ledger(&self.name, s)
    }

    fn missing(&self, key: String) -> Error {
        Error::Missing {
            name: self.name.clone(),
            key,
        }
    }

    /// The read of `items` at `now`: `EXISTS` of the description, then per shard touched and
    /// per generation `now - n ..= now + 1`, `BITFIELD_RO ... GET i64` of the items' words.
    fn read_batch(&self, items: &[Located], now: Now) -> (Batch, Read) {
        let first = now.generation.saturating_sub(u64::from(self.periods));
        let generations = (now.generation + 2 - first) as usize;
        // Per shard, the word offsets to read (the same in every generation).
        let mut offsets: Vec<Vec<u64>> = vec![Vec::new(); self.shards as usize];
        let mut places = Vec::with_capacity(items.len());
        for item in items {
            let mine: Vec<usize> = item
                .bits
                .masks()
                .iter()
                .enumerate()
                .filter(|(_, mask)| **mask != 0)
                .map(|(j, _)| {
                    let list = &mut offsets[item.shard];
                    list.push((item.word + j as u64) * 64);
                    list.len() - 1
                })
                .collect();
            places.push(mine);
        }
        let mut batch = Batch::default();
        let meta = names::meta(&self.name);
        let k = batch.key(&meta);
        batch.push(k, {
            let mut c = redis::cmd("EXISTS");
            c.arg(&meta);
            c
        });
        let mut first_cmd = vec![0; self.shards as usize];
        let mut checks = Vec::new();
        for (s, list) in offsets.iter().enumerate() {
            if list.is_empty() {
                continue;
            }
            first_cmd[s] = batch.len();
            let mut keys = Vec::with_capacity(generations + 1);
            for g in first..=now.generation + 1 {
                let key = self.key(s as u32, g);
                let k = batch.key(&key);
                for chunk in list.chunks(MAX_FIELDS) {
                    let mut cmd = redis::cmd("BITFIELD_RO");
                    cmd.arg(&key);
                    for offset in chunk {
                        cmd.arg("GET").arg("i64").arg(offset);
                    }
                    batch.push_fields(k, cmd, chunk.len());
                }
                keys.push(key);
            }
            // After the reads, on the same connection: a generation that read as empty must
            // not be one the ledger holds live (lost, not empty).
            let ledger = self.ledger(s);
            let mut args = vec![self.guard_byte(s).to_string().into_bytes()];
            args.extend((first..=now.generation + 1).map(|g| g.to_string().into_bytes()));
            keys.push(ledger);
            let k = batch.key(&keys[generations]);
            let names: Vec<&str> = keys.iter().map(String::as_str).collect();
            checks.push((batch.len(), s, first));
            batch.push_script(k, &CHECK, &names, &args);
        }
        let at = items
            .iter()
            .zip(places)
            .map(|(item, mine)| {
                let stride = offsets[item.shard].len().div_ceil(MAX_FIELDS);
                mine.into_iter()
                    .map(|i| {
                        (
                            first_cmd[item.shard] + i / MAX_FIELDS,
                            stride,
                            i % MAX_FIELDS,
                        )
                    })
                    .collect()
            })
            .collect();
        debug_assert!(generations >= 2);
        (batch, Read { first, at, checks })
    }

    /// Each item's words in each generation read.
    fn after_read(
        &self,
        items: &[Located],
        read: &Read,
        now: Now,
        replies: &[Value],
    ) -> Result<Vec<Words>, Error> {
        match replies.first() {
            Some(Value::Int(1)) => {}
            Some(Value::Int(0)) => {
                return Err(Error::Missing {
                    name: self.name.clone(),
                    key: names::meta(&self.name),
                });
            }
            other => {
                return Err(Error::corrupt(
                    &names::meta(&self.name),
                    format!("EXISTS answered {other:?}"),
                ));
            }
        }
        for &(i, s, first) in &read.checks {
            match replies.get(i) {
                Some(Value::Int(0)) => {}
                Some(Value::Int(-2)) => return Err(self.missing(self.ledger(s))),
                Some(Value::Int(k)) if (1..=(now.generation + 2 - first) as i64).contains(k) => {
                    return Err(self.missing(self.key(s as u32, first + *k as u64 - 1)));
                }
                other => {
                    return Err(Error::corrupt(
                        &self.ledger(s),
                        format!("the read's check answered {other:?}"),
                    ));
                }
            }
        }
        let generations = (now.generation + 2 - read.first) as usize;
        let mut all = Vec::with_capacity(items.len());
        for (item, places) in items.iter().zip(&read.at) {
            let mut words = vec![[0u64; 8]; generations];
            let mut places = places.iter();
            for (j, mask) in item.bits.masks().iter().enumerate() {
                if *mask == 0 {
                    continue;
                }
                let &(cmd, stride, pos) = places.next().expect("one place per word with a bit");
                for (gi, words) in words.iter_mut().enumerate() {
                    let at = cmd + gi * stride;
                    words[j] = match replies.get(at) {
                        Some(Value::Array(values)) => match values.get(pos) {
                            Some(Value::Int(v)) => *v as u64,
                            other => {
                                let key = self.key(item.shard as u32, read.first + gi as u64);
                                return Err(Error::corrupt(
                                    &key,
                                    format!("BITFIELD_RO answered {other:?}"),
                                ));
                            }
                        },
                        other => {
                            let key = self.key(item.shard as u32, read.first + gi as u64);
                            return Err(Error::corrupt(
                                &key,
                                format!("BITFIELD_RO answered {other:?}"),
                            ));
                        }
                    };
                }
            }
            all.push(words);
        }
        Ok(all)
    }

    /// Whether some generation read holds every bit of the item.
    fn found(item: &Located, words: &Words) -> bool {
        words.iter().any(|words| {
            item.bits
                .masks()
                .iter()
                .zip(words)
                .all(|(m, w)| w & m == *m)
        })
    }

    fn all_found(items: &[Located], words: &[Words]) -> Vec<bool> {
        items
            .iter()
            .zip(words)
            .map(|(i, w)| Self::found(i, w))
            .collect()
    }

    /// The string offsets of the item's bits that `words` lacks.
    fn unset(item: &Located, words: &[u64; 8], out: &mut Vec<Vec<u8>>) {
        let mut offsets = Vec::new();
        for (j, mask) in item.bits.masks().iter().enumerate() {
            let mut missing = mask & !words[j];
            while missing != 0 {
                let bit = missing.trailing_zeros();
                missing &= missing - 1;
                offsets.push((item.word + j as u64) * 64 + u64::from(63 - bit));
            }
        }
        out.push(offsets.len().to_string().into_bytes());
        out.extend(offsets.into_iter().map(|o| o.to_string().into_bytes()));
    }

    /// The write of the items the read did not find: per shard, script calls over the keys of
    /// generations `now`, `now - 1` (if live) and `now + 1`. Returns the batch and, per
    /// command, its items.
    fn write_batch(
        &self,
        items: &[Located],
        words: &[Words],
        read: &Read,
        now: Now,
    ) -> (Batch, Vec<Vec<usize>>) {
        let g = now.generation;
        // The generations the script reads besides `g`, as indices into the read.
        let mut others = Vec::with_capacity(2);
        if self.periods >= 1 && g >= 1 {
            others.push(g - 1);
        }
        others.push(g + 1);
        let index = |generation: u64| (generation - read.first) as usize;
        let mut per_shard: Vec<Vec<usize>> = vec![Vec::new(); self.shards as usize];
        for (i, (item, words)) in items.iter().zip(words).enumerate() {
            if !Self::found(item, words) {
                per_shard[item.shard].push(i);
            }
        }
        // The expiry: the end of the last period in which generation `g` is live, plus one.
        let end = u128::from(g + u64::from(self.periods) + 2) * u128::from(self.period_ns);
        let ttl_ms = (end.saturating_sub(now.nanos)).div_ceil(1_000_000).max(1);
        let mut batch = Batch::default();
        let mut whose = Vec::new();
        for (s, mine) in per_shard.iter().enumerate() {
            if mine.is_empty() {
                continue;
            }
            let write_key = self.key(s as u32, g);
            let other_keys: Vec<String> = others.iter().map(|&o| self.key(s as u32, o)).collect();
            let ledger = self.ledger(s);
            let mut keys: Vec<&str> = vec![&write_key];
            keys.extend(other_keys.iter().map(String::as_str));
            keys.push(&ledger);
            let k = batch.key(&write_key);
            for chunk in mine.chunks(ITEMS_PER_SCRIPT) {
                let mut args = vec![
                    ttl_ms.to_string().into_bytes(),
                    self.guard_byte(s).to_string().into_bytes(),
                    g.to_string().into_bytes(),
                ];
                args.extend(others.iter().map(|o| o.to_string().into_bytes()));
                for &i in chunk {
                    Self::unset(&items[i], &words[i][index(g)], &mut args);
                    for &o in &others {
                        Self::unset(&items[i], &words[i][index(o)], &mut args);
                    }
                }
                batch.push_script(k, &INSERT, &keys, &args);
                whose.push(chunk.to_vec());
            }
        }
        (batch, whose)
    }

    /// The answers: an item is new if its script said so.
    fn after_write(
        &self,
        count: usize,
        whose: &[Vec<usize>],
        now: Now,
        items: &[Located],
        replies: &[Value],
    ) -> Result<Vec<bool>, Error> {
        let mut new = vec![false; count];
        for (mine, reply) in whose.iter().zip(replies) {
            let bad = || {
                let key = self.key(items[mine[0]].shard as u32, now.generation);
                Error::corrupt(&key, format!("the insert script answered {reply:?}"))
            };
            let Value::Array(answers) = reply else {
                return Err(bad());
            };
            let shard = items[mine[0]].shard;
            match answers.first() {
                Some(Value::Int(-2)) => return Err(self.missing(self.ledger(shard))),
                Some(Value::Int(-1)) => {
                    // Key `k` of the script: `g`, then its neighbours in `others`' order.
                    let mut generations = vec![now.generation];
                    if self.periods >= 1 && now.generation >= 1 {
                        generations.push(now.generation - 1);
                    }
                    generations.push(now.generation + 1);
                    let lost = match answers.get(1) {
                        Some(Value::Int(k)) => usize::try_from(*k - 1)
                            .ok()
                            .and_then(|k| generations.get(k)),
                        _ => None,
                    };
                    let Some(&lost) = lost else {
                        return Err(bad());
                    };
                    return Err(self.missing(self.key(shard as u32, lost)));
                }
                _ => {}
            }
            if answers.len() != mine.len() {
                return Err(bad());
            }
            for (&i, answer) in mine.iter().zip(answers) {
                new[i] = match answer {
                    Value::Int(1) => true,
                    Value::Int(0) => false,
                    _ => return Err(bad()),
                };
            }
        }
        Ok(new)
    }

    /// Inserts the items of `hashes`, appending to `new` whether each was new (as
    /// [`insert`](Self::insert) would say, one by one, in order); returns how many were.
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
                let now = self.now()?;
                let items: Vec<Located> = chunk.iter().map(|&h| self.locate(h)).collect();
                let (batch, read) = self.read_batch(&items, now);
                let words = self.after_read(&items, &read, now, &self.server.run(&batch)?)?;
                let (batch, whose) = self.write_batch(&items, &words, &read, now);
                let replies = self.server.run(&batch)?;
                self.after_write(items.len(), &whose, now, &items, &replies)
            })();
            match answers {
                Ok(answers) => count += append(new, answers),
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
                let now = self.now_async().await?;
                let items: Vec<Located> = chunk.iter().map(|&h| self.locate(h)).collect();
                let (batch, read) = self.read_batch(&items, now);
                let replies = self.server.run_async(&batch).await?;
                let words = self.after_read(&items, &read, now, &replies)?;
                let (batch, whose) = self.write_batch(&items, &words, &read, now);
                let replies = self.server.run_async(&batch).await?;
                self.after_write(items.len(), &whose, now, &items, &replies)
            }
            .await;
            match answers {
                Ok(answers) => count += append(new, answers),
                Err(err) => {
                    new.truncate(start);
                    return Err(err);
                }
            }
        }
        Ok(count)
    }

    /// Looks up the items of `hashes`, appending to `hits` whether each is possibly in a live
    /// generation; returns how many are. One round trip.
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
            let found = (|| {
                let now = self.now()?;
                let items: Vec<Located> = chunk.iter().map(|&h| self.locate(h)).collect();
                let (batch, read) = self.read_batch(&items, now);
                let words = self.after_read(&items, &read, now, &self.server.run(&batch)?)?;
                Ok(Self::all_found(&items, &words))
            })();
            match found {
                Ok(found) => count += append(hits, found),
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
            let found = async {
                let now = self.now_async().await?;
                let items: Vec<Located> = chunk.iter().map(|&h| self.locate(h)).collect();
                let (batch, read) = self.read_batch(&items, now);
                let replies = self.server.run_async(&batch).await?;
                let words = self.after_read(&items, &read, now, &replies)?;
                Ok::<_, Error>(Self::all_found(&items, &words))
            }
            .await;
            match found {
                Ok(found) => count += append(hits, found),
                Err(err) => {
                    hits.truncate(start);
                    return Err(err);
                }
            }
        }
        Ok(count)
    }

    crate::forward::item_forms!();

    /// Inserts `item` into the current generation unless a live generation holds it;
    /// `Ok(true)` if none did (certainly new within the window), `Ok(false)` if one did (seen
    /// within the window, or a false positive). A `false` does not renew the item. Exactly one
    /// of any number of clients inserting the same new item at once gets `true`. Two round
    /// trips (one if a live generation holds the item).
    ///
    /// # Errors
    ///
    /// [`Error::Connection`] (the write's outcome is unknown: the item may be in the filter;
    /// retrying is safe), [`Error::Server`] (refused: out of memory, a key of another type),
    /// [`Error::Missing`] (the filter was destroyed). No error ever stands for "new".
    pub fn insert<T: Hash + ?Sized>(&self, item: &T) -> Result<bool, Error> {
        self.insert_hash(self.hasher.hash_item(item))
    }

    /// Whether `item` is possibly in a live generation (`false`: certainly not inserted within
    /// the window). One round trip; never writes.
    ///
    /// # Errors
    ///
    /// [`Error::Connection`], [`Error::Server`], [`Error::Missing`].
    pub fn contains<T: Hash + ?Sized>(&self, item: &T) -> Result<bool, Error> {
        self.contains_hash(self.hasher.hash_item(item))
    }

    /// Deletes the filter: its description first (so that no process opens it any more and
    /// handles get [`Error::Missing`]), then every generation key that can still exist by this
    /// handle's time (`g - n - 2 ..= g + 2`; older ones have expired).
    ///
    /// # Errors
    ///
    /// The server's errors.
    pub fn destroy(self) -> Result<(), Error> {
        let g = self.now()?.generation;
        let mut batch = Batch::default();
        let meta = names::meta(&self.name);
        let k = batch.key(&meta);
        batch.push(k, {
            let mut c = redis::cmd("DEL");
            c.arg(&meta);
            c
        });
        for s in 0..self.shards {
            let ledger = self.ledger(s as usize);
            let k = batch.key(&ledger);
            batch.push(k, {
                let mut c = redis::cmd("DEL");
                c.arg(&ledger);
                c
            });
            for generation in g.saturating_sub(u64::from(self.periods) + 2)..=g + 2 {
                let key = self.key(s, generation);
                let k = batch.key(&key);
                batch.push(k, {
                    let mut c = redis::cmd("DEL");
                    c.arg(&key);
                    c
                });
            }
        }
        self.server.run(&batch).map(drop)
    }
}

/// Appends `answers` to `out`; how many are `true`.
fn append(out: &mut Vec<bool>, answers: Vec<bool>) -> usize {
    let count = answers.iter().filter(|&&b| b).count();
    out.extend(answers);
    count
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_word_generation_is_the_local_window_generation() {
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
