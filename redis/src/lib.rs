//! The [`seen`] filters shared by every process and machine that opens them by name, kept in
//! a Redis or Valkey server (or a Redis Cluster) in plain string keys.
//!
//! ```no_run
//! use seen_redis::{Server, SharedBloomFilter};
//! let server = Server::open("redis://127.0.0.1:6379")?;
//! // Every process runs this line: the first creates the filter, the others open it.
//! let orders = SharedBloomFilter::builder("orders", 10_000_000).fpr(0.01).open_or_create(&server)?;
//! let mut new = Vec::new();
//! orders.insert_many(["order-1", "order-2", "order-1"], &mut new)?;
//! assert_eq!(new, [true, true, false]);
//! # Ok::<(), seen_redis::Error>(())
//! ```
//!
//! # Which structure to pick
//!
//! The same choice as between the local structures ([`seen`]'s "Which structure to pick"):
//!
//! - [`SharedBloomFilter`]: never forgets, may call a new item "seen" at the rate you choose.
//!   The [`seen::AtomicBloomFilter`] block for block: [`upload`](SharedBloomFilter::upload)
//!   a local filter (or a saved file) and [`download`](SharedBloomFilter::download) it back,
//!   byte for byte.
//! - [`SharedWindowedBloomFilter`]: only the last `n` periods count, as a
//!   [`seen::WindowedBloomFilter`] with an aligned rotation: one key per generation that
//!   expires on its own.
//! - [`SharedOverwriteMap`]: never calls a new item "seen", forgets old ones; its claims
//!   ([`SharedClaim`]) give at-least-once processing to consumers on many machines.
//!
//! A key is the same item here as in the library and the `seen` command: `"id"`, `b"id"` and
//! [`hash_bytes(b"id")`](seen::hash::ItemHasher::hash_bytes) are one key, and the hasher is the
//! library's [`StableHasher`](seen::hash::StableHasher).
//!
//! # Guarantees
//!
//! Each type's `# Guarantees` states its promises in full, and its "The protocol, and why each
//! step is atomic" section the argument: which command or script makes each step atomic, what
//! a concurrent client can observe, what a failover can lose. In short:
//!
//! | structure | racing inserts of one new item | errs by | round trips: insert / lookup | forgets |
//! | --- | --- | --- | --- | --- |
//! | [`SharedBloomFilter`], both layouts | exactly one is told "new" | false positives, no false negatives | 1 or 2 / 1 per batch | never |
//! | [`SharedWindowedBloomFilter`] | exactly one, across period boundaries | false positives, no false negatives within the window | 2 / 1 per batch | after `n` to `n + 1` periods |
//! | [`SharedOverwriteMap`] | exactly one, unless overwritten between | forgets; a false positive only by a 2^-64 collision | 1 / 1 per batch | when overwritten |
//!
//! - **Errors answer nothing.** A request that fails returns an [`Error`] naming the key and
//!   no answer for any item of its batch: no item is ever called new when its write is
//!   unknown. Retrying an insert is safe; [`Error`] says what a retry answers and what a
//!   caller that must handle every item should do.
//! - **Persistence is the server's.** With `appendonly yes` and `appendfsync always`, every
//!   acknowledged insert survives a crash and a restart (tested); `everysec` can lose the last
//!   second, and RDB snapshots lose what came after the last save. Replication is
//!   asynchronous: a failover can lose acknowledged writes (`WAIT` after a batch is the lever).
//! - **A lost key is an error, never an empty structure**: a shard or a generation gone (a
//!   restart without persistence, `FLUSHALL`, an eviction) is [`Error::Missing`] for every
//!   read and write, from every process, also one that opens the structure afterwards: every
//!   command reads the shard's guard (the structure's creation id; and a windowed filter's
//!   ledger) in the same atomic step, and no write or later create brings a lost shard back
//!   empty; a structure created again under the name has another id, so the handles of the
//!   lost one stay `Missing`. Run the server with
//!   `maxmemory-policy noeviction` (the default): under `allkeys-*` it may evict a filter's
//!   keys, and under `volatile-*` a windowed filter's generations before they expire.
//!
//! Every structure has a blocking API and the same methods ending in `_async` for tokio,
//! sharing one [`Server`], which drives both with the same async requests: one multiplexed
//! connection for the blocking calls of every thread, one for the tokio tasks; a connection
//! that fails is replaced at the next request. Every request ends within the server's timeout
//! ([`Server`]'s "Timeouts"; [`Server::builder`] sets it, `open` included).
//!
//! # Performance
//!
//! A batch costs one round trip per request however many items it holds (a cluster client
//! splits it by node), and only the bits an item is missing are written, so a repeated item
//! costs a read. Against the commands people write by hand, in one run on one server:
//! [the benchmarks](https://docs.rs/seen-dedup/latest/seen/docs/benchmarks/index.html#shared-structures-on-redis-benchesredisrs).
//!
//! # Limitations
//!
//! - Redis 7.0 or later (`SET ... NX GET`, `TIME` inside scripts), or Valkey; stock
//!   commands only (`BITFIELD`, `BITFIELD_RO`, `GETRANGE`, `SETRANGE`, `EXISTS`, `PEXPIREAT`,
//!   `HGET`, `HSET`, `HDEL`, `HRANDFIELD`, `TIME` and Lua scripts by `EVALSHA`), no module:
//!   managed services work. TLS is not built in.
//! - A structure's size is fixed at creation (a shared filter does not grow); one string holds
//!   at most 512 MiB, so larger structures are cut into more shards.
//! - A name is 1 to 200 bytes without braces, spaces or control characters; every key starts
//!   with `seen:{NAME`.

mod bloom;
mod error;
mod forward;
mod guard;
mod map;
mod meta;
mod names;
mod script;
mod server;
mod windowed;

/// For the fuzz targets in `fuzz/` and the unit tests only: see the module's own documentation.
#[cfg(any(test, fuzzing))]
#[doc(hidden)]
pub mod fuzzing;

/// The most items one request carries. A call with more (`insert_many`, `contains_many`, their
/// `_hashes` and `_async` forms) sends them as several requests, one after another, so that
/// the client's memory for a call is that of one request whatever the call's size (a million
/// items in one request took 1.5 to 3.4 GB). A failed call answers none of its items; the
/// requests before the one that failed have run.
pub const REQUEST_ITEMS: usize = 8192;

/// How long a claim of a [`SharedOverwriteMap`] holds its item unless committed or renewed,
/// unless the handle sets another ([`SharedMapBuilder::lease`]): a consumer that crashes while
/// holding claims delays their messages' redeliveries by at most this. Below the common
/// queues' redelivery timeouts (SQS's visibility timeout, 30 s; NSQ's `msg-timeout`, 60 s).
pub const DEFAULT_LEASE: std::time::Duration = std::time::Duration::from_secs(20);

pub use bloom::{SharedBloomBuilder, SharedBloomFilter};
pub use error::Error;
pub use map::{SharedClaim, SharedMapBuilder, SharedMapInfo, SharedOverwriteMap};
pub use server::{DEFAULT_TIMEOUT, Server, ServerBuilder};
pub use windowed::{SharedWindowedBloomBuilder, SharedWindowedBloomFilter};

/// The README's examples, compiled (they need a server, so they do not run).
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
