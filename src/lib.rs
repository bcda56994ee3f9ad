//! Lock-free concurrent deduplication filters: answer "have I seen this before?" from many
//! threads at once, millions of times a second, in bounded memory.
//!
//! ```
//! use seen::AtomicBloomFilter;
//!
//! let seen = AtomicBloomFilter::with_capacity(10_000_000, 0.01)?; // 1% false positives
//! let news = std::thread::scope(|s| {
//!     let a = s.spawn(|| seen.insert("msg-1"));
//!     let b = s.spawn(|| seen.insert("msg-1"));
//!     [a.join().unwrap(), b.join().unwrap()]
//! });
//! assert_eq!(news.iter().filter(|&&new| new).count(), 1); // exactly one thread was told "new"
//! assert!(seen.contains("msg-1") && !seen.contains("msg-2"));
//! # Ok::<(), seen::Error>(())
//! ```
//!
//! # Which structure to pick
//!
//! - [`AtomicBloomFilter`]: never forgets, may call a new item "seen" with a probability you
//!   choose; lock-free, one cache line per operation. The default pick: crawlers, notification
//!   senders, any "do this once" gate where a rare skipped item beats a duplicate.
//! - [`Layout`]: where a filter keeps an item's bits. [`Layout::Word`] (the default) when racing
//!   inserts of one item must have exactly one winner; [`Layout::Line`] when memory matters more.
//! - [`WindowedBloomFilter`]: remembers only the last `n` periods (days, hours, or `N` new
//!   items each, [`periods(n)`](builder::BloomBuilder::periods)) and forgets older ones,
//!   rotating without stopping writers; a lookup checks every generation in one cache line (up
//!   to 6 periods). For "at most once a day per device", "crawl again after a week", an ingest
//!   that drops duplicates within 8 days.
//! - [`GrowingBloomFilter`]: when you cannot size up front. Adds a layer twice as large at a
//!   tighter rate whenever the newest is full (RedisBloom's scaling filter), so the rate stays
//!   under the target however many items arrive; growth takes no lock. An insert checks every
//!   layer, and returns a `Result`: [`Error::Full`] from a non-scaling filter at capacity,
//!   or the error of a growth that cannot allocate, never a silent overfill.
//! - [`SemiConcurrentBloomFilter`]: when you need consistent, immutable snapshots of the filter
//!   (to query a fixed state) while writers go on; inserts cost much more, and it keeps two
//!   copies of its bits.
//! - [`FrozenBloomFilter`]: the immutable snapshot a semi-concurrent filter hands out.
//! - [`OverwriteMap`]: never calls a new item "seen" (up to a 2^-64 fingerprint collision per
//!   lookup) but forgets old items; for at-least-once queue consumers, where dropping a new
//!   message is the one unacceptable outcome. [`OverwriteMap::claim`] hands out a [`Claim`]
//!   that forgets the id unless committed, so a failed handler lets the redelivery through.
//! - [`ExactOverwriteMap`]: the same, storing the keys' bytes: no collision at all, at the cost
//!   of an allocation per entry; its [`ExactClaim`] forgets exactly the entry it inserted.
//! - [`builder`]: the builders, for what the one-line constructors do not set (layout, hasher,
//!   compaction rate, a map's size from a window); one configuration type for every Bloom filter.
//! - [`sizing`]: plan before you build. [`sizing::blocked`] is what a filter will allocate;
//!   [`sizing::BloomSizing`] is the classic textbook filter, for reference;
//!   [`sizing::overwrite_buckets`] sizes a map for a window.
//! - [`clock`]: the clocks a windowed filter rotates by: the wall clock, or a
//!   [`ManualClock`](clock::ManualClock) for tests and simulations; the
//!   [`TimeBase`](clock::TimeBase) a filter and its file record of it.
//! - [`hash`]: stable 128-bit hashing, the same on every run and platform; plug in your own.
//! - [`DedupFilter`]: the trait every structure implements, with what each answer promises.
//! - [`Error`]: why a constructor or a sizing function refused its input.
//! - [`docs`]: the long-form documentation: [design and architecture](docs::design),
//!   [sizing](docs::sizing), [concurrency](docs::concurrency), [benchmarks](docs::benchmarks).
//!
//! # Guarantees
//!
//! Every structure is `Send + Sync` and takes `&self` for every operation except `clear`.
//!
//! - Bloom filters have no false negatives under any interleaving: once `insert(x)` has
//!   returned, every `contains(x)` that happens after it (same thread, or after any
//!   synchronization) returns `true`.
//! - Among threads racing to insert the same new item, at least one is told it is new; with
//!   [`Layout::Word`] and in both overwrite maps, exactly one is (in a map, unless another
//!   item overwrites the slot between them: the map then forgot the first, as it may any time).
//! - An overwrite map never reports "seen" for an item that was not inserted (up to 2^-64 per
//!   lookup in [`OverwriteMap`], never in [`ExactOverwriteMap`]), and `forget` erases an item
//!   only if its slot still holds it, never the item that overwrote it.
//! - [`AtomicBloomFilter`]'s `insert` and `contains`, and [`OverwriteMap`]'s `insert`,
//!   `contains` and `forget`, are wait-free: a bounded number of atomic operations, no loops, no
//!   locks. [`SemiConcurrentBloomFilter`] and [`ExactOverwriteMap`] take no lock of their own
//!   (they build on lock-free components) but allocate, and the allocator may lock.
//! - [`GrowingBloomFilter`] keeps them across growths (exactly once with [`Layout::Word`], at
//!   least once with [`Layout::Line`]); `contains` is wait-free, `insert` lock-free except
//!   that an insert of a new item waits for the thread allocating the next layer once the full
//!   layer has taken 1/64 more than its capacity (the bound that keeps the rate).
//! - [`WindowedBloomFilter`] keeps these promises across rotations for an item younger than
//!   its retention (`n` to `n + 1` periods): an item is forgotten only when its generation
//!   retires, and racing inserts of one new item get exactly one `true` also when a rotation
//!   happens meanwhile; `contains` is wait-free, `insert` lock-free (it retries only when a
//!   rotation lands inside it).
//! - The structures do not synchronize other memory: seeing an item does not make the inserting
//!   thread's other writes visible.
//!
//! Every protocol is model-checked with loom, each model with a deliberately broken twin that
//! loom must catch, and stress-tested on real threads: the orderings and the models are in
//! [the concurrency notes](docs::concurrency). Invalid parameters return [`Error`]; nothing
//! panics on bad input.
//!
//! # Performance
//!
//! An [`AtomicBloomFilter`] operation touches one cache line however large the filter is: a
//! few nanoseconds while the filter fits in cache, about one cache miss (less, as independent
//! queries overlap) once it is DRAM-sized. In the same runs it is faster than `fastbloom`'s
//! atomic filter on every operation, and [`OverwriteMap`] faster than `dashmap`'s `DashSet`;
//! the figures, the machine and the commands are in
//! [the benchmarks' summary](docs::benchmarks#summary). Building a filter runs the sizing
//! search: well under a millisecond.
//!
//! # Limitations
//!
//! - The blocked layouts spend more memory than a classic Bloom filter for the same
//!   false-positive rate, [`Layout::Word`] more than [`Layout::Line`], and more the smaller the
//!   rate ([the table](docs::sizing#limits-where-a-layout-stops)).
//! - Each layout has a smallest false-positive rate it accepts (see [`Layout`]); below it,
//!   constructors return [`Error::FprBelowLayoutLimit`] (a growing filter,
//!   [`Error::GrowingFprBelowLayoutLimit`]), naming the layout that can.
//! - [`Layout::Line`] and [`SemiConcurrentBloomFilter`] are not exactly-once: two threads
//!   inserting one new item can both be told it is new.
//! - [`WindowedBloomFilter`] has the word layout only, and one cache line per lookup only up to
//!   6 periods (7 to 14 take two lines); an insert that returns `false` does not renew the
//!   item's retention.
//! - A fixed-size filter does not grow: past its capacity the false-positive rate rises
//!   ([`AtomicBloomFilter::info`] tells by how much). [`GrowingBloomFilter`] grows, at the
//!   cost of one cache line per layer on each insert and more memory.
//! - Hash stability covers the byte stream an item's `Hash` impl writes, not the impl itself:
//!   see [`hash`].
//!
//! # Feature flags
//!
//! - `serde` (off by default): `Serialize` and `Deserialize` for every structure that saves with
//!   the default hasher, as the bytes of the crate's [file format](docs::format) (one byte
//!   string, built in memory: for small structures; use `write_to` / `read_from` for large
//!   ones). Deserializing runs every check a load runs.
//!
//! (`--cfg seen_loom` is not a feature: it is the model-checking build, for the crate's own
//! tests.)

mod batch;
mod bits;
mod bloom;
pub mod builder;
pub mod clock;
pub mod docs;
mod error;
mod filter;
pub mod hash;
mod layout;
mod numbers;
mod os;
mod overwrite;
mod persist;
pub mod sizing;
mod sync;

pub use bloom::{
    AtomicBloomFilter, BloomInfo, CompactionStats, FrozenBloomFilter, GrowingBloomFilter,
    LayerInfo, SemiConcurrentBloomFilter, WindowedBloomFilter,
};
pub use error::{Corruption, Error};
pub use filter::DedupFilter;
pub use layout::Layout;
pub use overwrite::{Claim, ExactClaim, ExactOverwriteMap, OverwriteMap};

#[cfg(all(test, seen_loom))]
#[path = "../loom-tests/mod.rs"]
mod loom_tests;

// The README's Rust examples, run as doctests. Private: rustdoc tests the docs of private items
// too, and nothing public exists only for tests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
mod readme_doctests {}
