//! [`SharedWindowedBloomFilter`]: the last `n` periods of items in a server, one string key per
//! generation that expires on its own, with the window semantics of the local
//! [`WindowedBloomFilter`](seen::WindowedBloomFilter) built with
//! [`periods(n)`](seen::builder::BloomBuilder::periods) and
//! [`rotate_every_aligned(period)`](seen::builder::BloomBuilder::rotate_every_aligned).
//!
//! The design and the atomicity argument of each step are in [`SharedWindowedBloomFilter`]'s docs
//! (so that they are rendered).

use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use seen::Layout;
use seen::clock::Clock;
use seen::hash::{Hash128, ItemHasher, StableHasher};
use seen::sizing::BlockedSizing;

use crate::forward::in_requests;
use crate::guard::Id;
use crate::meta::{self, Meta};
use crate::server::Via;
use crate::{Error, Server, names};

mod builder;
mod info;
mod protocol;
mod scripts;
pub(crate) mod time;

pub use builder::SharedWindowedBloomBuilder;
use builder::{Params, describe, generation_sizing};
use protocol::Located;
use time::{Time, server_time};

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
/// [`clock`](SharedWindowedBloomBuilder::clock) or [`with_clock`](SharedWindowedBloomFilter::with_clock)
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
/// an 8-byte **guard**, the filter's creation id, after its bits (as a Bloom filter's shard),
/// and expires at the
/// end of the last period in which it is live, `(g + n + 1)·P`, plus one period for clients
/// whose clock lags (`PEXPIREAT`, moved later by later writes): the server forgets old
/// generations by itself, and nothing ever rotates or clears. On a clock that runs faster than
/// the server's (a replay of old records by their own times, with
/// [`clock`](SharedWindowedBloomBuilder::clock)) expiries in real time would keep every
/// generation the replay passed; so the script that creates generation `g`'s key also deletes
/// the shard's generations older than `g - n - 1` (the window of a client one generation
/// behind starts there) whose end is also a period or more behind the server's time, each
/// with its ledger entry, in the same atomic step. A replay of past records keeps at most
/// `n + 3` generations of a shard (`g - n - 1 ..= g + 1`); a handle whose clock is ahead of
/// the server's (a record with a wrong time) deletes nothing a handle on the server's time
/// still reads.
///
/// Beside the generations, each shard has a **ledger**, the hash `seen:{NAME:s}:gens`: per
/// generation created, the end of its key's life on the server's clock (the same value as
/// its `PEXPIREAT`), and a field `guard` (the creation id) written when the filter is created.
/// It tells the
/// three kinds of missing generation apart: never written (not in the ledger: empty),
/// expired (its end has passed: empty), and **lost** (in the ledger, its end still ahead, but
/// no key with a guard: evicted, deleted, a restart without persistence), which is
/// [`Error::Missing`], never an empty generation. A ledger that is gone is lost too.
///
/// # The protocol, and why each step is atomic enough
///
/// - **Create**: as the Bloom filter's: the description (`state=creating`, `SET ... NX GET`),
///   then by its creator alone each shard's ledger with its guard, then `state=ready`.
/// - **Lookup** (one round trip): `EXISTS` of the description (a destroyed filter is an
///   error, never an empty one) and, per shard touched and per generation `g - n ..= g + 1`,
///   one `BITFIELD_RO` with a `GET i64` of the key's guard (a key of another creation of the
///   name, left behind by one destroyed, reads as empty) and one per word that holds a bit of
///   an item; then, per shard,
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
///      items, each with every one of its bits (the same offsets in every generation). It
///      first checks every key it touches against the ledger (a lost one fails the batch,
///      with nothing written), creates `g`'s key if it is new (with its guard and its ledger
///      entry, deleting the generations older than `g - n - 1` and dead on the server's clock,
///      with their entries), and moves its expiry and ledger entry to the later end. It then reads the
///      items' bits in `g - 1` and `g + 1`, where live (`BITFIELD_RO ... GET u1`: one bit per
///      field, so no 64-bit value passes through Lua's doubles); an item one of them now
///      holds whole is "not new" and gets no write. The others' bits are set in `g` in item
///      order (`BITFIELD ... SET u1`, 500 fields per command), whose old values say which
///      were new: an item is new if one of its bits was 0. Reading the neighbours for every
///      item first gives what reading them item by item would: the script writes only `g`.
///      (All the item's bits, not only those the read found unset: if `g`'s key expired
///      between the read and the script, for a handle whose clock lags, the script makes it
///      again, and an item written with part of its bits would be answered "new" and not
///      found after.) A script runs atomically: no other command on the server runs between
///      its checks, its reads and its writes.
///
///   Exactly one of any number of racing inserts of one new item is told "new", when the
///   racers' generations differ by at most one and `n >= 1`: every write of the item's bits is
///   such a script on its shard's slot, so the scripts run one after another. The first one
///   that answers "new" leaves all the item's bits set in its generation `h`. A later script
///   from a client in generation `h` finds them set (it sends all the item's bits), and one in
///   `h ± 1` reads them all in `h`, its `g ∓ 1`:
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
/// use seen_redis::{Server, SharedWindowedBloomFilter};
/// use std::time::Duration;
/// let server = Server::open("redis://127.0.0.1:6379")?;
/// // The last 7 days (and today), a million new ids a day, 1% false positives over the window.
/// let seen = SharedWindowedBloomFilter::builder("events", 1_000_000)
///     .periods(7)
///     .period(Duration::from_secs(86_400))
///     .create(&server)?;
/// assert!(seen.insert("event-1")?);
/// assert!(!seen.insert("event-1")?); // a repeat within the window, from any process
/// # Ok::<(), seen_redis::Error>(())
/// ```
pub struct SharedWindowedBloomFilter {
    server: Server,
    name: String,
    /// The creation id of the filter this handle opened ([`guard`](crate::guard)).
    id: Id,
    generation: BlockedSizing,
    fpr: f64,
    periods: u32,
    period_ns: u64,
    shards: u32,
    hasher: StableHasher,
    blocks_per_shard: u64,
    time: Time,
}

impl std::fmt::Debug for SharedWindowedBloomFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedWindowedBloomFilter")
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

impl SharedWindowedBloomFilter {
    /// The parameters of a filter called `name` to create or open: `capacity_per_period` new
    /// items per period at the default rate (0.01 over the window), 6 periods, a period of a
    /// day, [`Layout::Word`], the server's time.
    pub fn builder(name: &str, capacity_per_period: u64) -> SharedWindowedBloomBuilder {
        SharedWindowedBloomBuilder {
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
        let params = Self::from_meta(name, &stored)?;
        let time = Time::Server(Mutex::new(server_time(server, via, name).await?));
        Ok(Self::new(server, name, params, time, stored.id))
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
        Ok(params)
    }

    fn new(server: &Server, name: &str, params: Params, time: Time, id: Id) -> Self {
        Self {
            server: server.clone(),
            name: name.to_owned(),
            id,
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
    /// use seen_redis::{Server, SharedWindowedBloomFilter};
    /// use std::time::Duration;
    /// let server = Server::open("redis://127.0.0.1:6379")?;
    /// let hour = Duration::from_secs(3600);
    /// let clock = ManualClock::new(Duration::from_secs(1_700_000_000));
    /// let f = SharedWindowedBloomFilter::builder("w", 1000).periods(2).period(hour).create(&server)?;
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

    /// The hasher: the local filters' default [`StableHasher`], with the filter's seed.
    pub fn hasher(&self) -> &StableHasher {
        &self.hasher
    }

    /// The key of generation `generation` of shard `shard`: `seen:{NAME:SHARD}:gGENERATION`.
    pub fn key(&self, shard: u32, generation: u64) -> String {
        names::shard(&self.name, shard, &format!("g{generation}"))
    }

    /// The driver of inserts: per [`REQUEST_ITEMS`](crate::REQUEST_ITEMS) items, the read of
    /// every live generation and the insert scripts for the items it did not find.
    async fn insert_via(
        &self,
        via: Via,
        hashes: &[Hash128],
        new: &mut Vec<bool>,
    ) -> Result<usize, Error> {
        in_requests(hashes, new, |chunk| async move {
            let now = self.now(via).await?;
            let items: Vec<Located> = chunk.iter().map(|&h| self.locate(h)).collect();
            let (batch, read) = self.read_batch(&items, now);
            let replies = self.server.send(via, &batch).await?;
            let words = self.after_read(&items, &read, now, &replies)?;
            let (batch, whose) = self.write_batch(&items, &words, now);
            let replies = self.server.send(via, &batch).await?;
            self.after_write(items.len(), &whose, now, &items, &replies)
        })
        .await
    }

    /// The driver of lookups: per [`REQUEST_ITEMS`](crate::REQUEST_ITEMS) items, the read of
    /// every live generation.
    async fn contains_via(
        &self,
        via: Via,
        hashes: &[Hash128],
        hits: &mut Vec<bool>,
    ) -> Result<usize, Error> {
        in_requests(hashes, hits, |chunk| async move {
            let now = self.now(via).await?;
            let items: Vec<Located> = chunk.iter().map(|&h| self.locate(h)).collect();
            let (batch, read) = self.read_batch(&items, now);
            let replies = self.server.send(via, &batch).await?;
            let words = self.after_read(&items, &read, now, &replies)?;
            Ok(Self::all_found(&items, &words))
        })
        .await
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
    /// handles get [`Error::Missing`]), then per shard, in one script, every generation its
    /// ledger lists and the ledger, and the generation keys this handle's time reaches
    /// (`g - n - 2 ..= g + 2`).
    /// Only this handle's filter is deleted: if the name holds a filter created again since
    /// (another creation id), that one is left whole and the destroy is [`Error::Missing`].
    ///
    /// # Errors
    ///
    /// [`Error::Missing`] as above; the server's errors.
    pub fn destroy(self) -> Result<(), Error> {
        let g = self.generation()?;
        let mut deletions = crate::server::Batch::default();
        for s in 0..self.shards {
            // First every generation the shard's ledger lists, and the ledger, in one script:
            // an insert that runs after it finds no ledger and writes nothing.
            let ledger = self.ledger(s as usize);
            let k = deletions.key(&ledger);
            let prefix = self.key(s, 0);
            let prefix = prefix.strip_suffix('0').unwrap_or(&prefix);
            let args = [
                prefix.as_bytes().to_vec(),
                self.guard_byte(s as usize).to_string().into_bytes(),
                self.id.bytes(),
            ];
            deletions.push_script(k, &scripts::DESTROY_SHARD, &[&ledger], &args);
            // And those this handle's time reaches, should a ledger be gone.
            let keys = (g.saturating_sub(u64::from(self.periods) + 2)..=g + 2)
                .map(|generation| (self.key(s, generation), self.guard_byte(s as usize)));
            crate::guard::destroy(&mut deletions, self.id, keys);
        }
        self.server.block_on(meta::destroy(
            &self.server,
            Via::Blocking,
            &self.name,
            self.id,
            deletions,
        ))
    }
}
