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
//! - [`SemiConcurrentBloomFilter`]: lookups at the atomic filter's cost and inserts batched
//!   into a second copy of the bits, for read-mostly sets that also want consistent snapshots
//!   while writers go on; twice the memory.
//! - [`FrozenBloomFilter`]: the immutable snapshot a semi-concurrent filter hands out (a copy).
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
//! - [`DedupFilter`]: the trait that lets generic code take any structure whose `insert`
//!   answers with a `bool` (all but the growing filter and the frozen snapshot).
//! - [`Error`]: why an operation failed, grouped by what the caller can do about it.
//! - [`docs`]: the long-form documentation: [design and architecture](docs::design),
//!   [sizing](docs::sizing), [concurrency](docs::concurrency), [benchmarks](docs::benchmarks).
//!
//! # Guarantees
//!
//! Each type's `# Guarantees` states its promises in full (follow the links); in short:
//!
//! | structure | racing inserts of one new item | errs by | `insert` / `contains` | forgets |
//! | --- | --- | --- | --- | --- |
//! | [`AtomicBloomFilter`](AtomicBloomFilter#guarantees), word layout | exactly one is told "new" | false positives, no false negatives | wait-free / wait-free | never |
//! | [`AtomicBloomFilter`](AtomicBloomFilter#guarantees), line layout | at least one is | false positives, no false negatives | wait-free / wait-free | never |
//! | [`WindowedBloomFilter`](WindowedBloomFilter#guarantees) | exactly one, across rotations | false positives, no false negatives within the window | lock-free / wait-free | after `n` to `n + 1` periods |
//! | [`GrowingBloomFilter`](GrowingBloomFilter#guarantees), word layout | exactly one, across growths | false positives, no false negatives | lock-free but one wait / lock-free | never |
//! | [`GrowingBloomFilter`](GrowingBloomFilter#guarantees), line layout | at least one | false positives, no false negatives | lock-free but one wait / lock-free | never |
//! | [`SemiConcurrentBloomFilter`](SemiConcurrentBloomFilter#guarantees) | at least one | false positives, no false negatives | lock-free, allocates / lock-free | never |
//! | [`FrozenBloomFilter`](FrozenBloomFilter#guarantees) | immutable | false positives, no false negatives | none / wait-free | never |
//! | [`OverwriteMap`](OverwriteMap#guarantees) | exactly one, unless overwritten between | forgets; a false positive only by a 2^-64 collision | wait-free / wait-free | when overwritten |
//! | [`ExactOverwriteMap`](ExactOverwriteMap#guarantees) | exactly one, unless overwritten between | forgets; no false positives | lock-free, allocates / lock-free | when overwritten |
//!
//! The words, once for every type:
//!
//! - **No false negatives**: once `insert(x)` has returned, every `contains(x)` that *happens
//!   after* it returns `true`: later on the same thread, or on another thread after a
//!   synchronization with the inserting one (a join, a channel, a mutex, a Release store read
//!   by an Acquire load). A lookup that merely runs later by the clock may miss an item just
//!   inserted. Nor is a structure a way to pass data: seeing an item is not promised to make
//!   the inserting thread's other writes visible (use a channel or a lock).
//! - **Exactly one is told "new"**: when several threads insert the same item at once and the
//!   structure did not hold it, exactly one of them gets `true`, so `insert` is an
//!   exactly-once gate; "at least one" allows several.
//! - **Wait-free**: a bounded number of steps whatever other threads do (no loop, no lock);
//!   **lock-free**: a step may be retried, but only because another thread made progress.
//!   "Allocates": the allocator may take a lock.
//!
//! Every structure is `Send + Sync` (with the default hasher and clock) and takes `&self` for
//! inserts, lookups, `forget`, `claim`, `union`, `compact`, `rotate`, `maintain` and saves; the
//! methods that take `&mut self` are [`AtomicBloomFilter::clear`] and
//! [`AtomicBloomFilter::intersect`] (they clear bits, which would lose racing inserts), and
//! `Extend::extend` (the trait's signature; a loop of `insert` does the same through `&self`).
//! [`WindowedBloomFilter::with_clock`] and [`WindowedBloomFilter::with_time_base`] consume the
//! filter and return it changed.
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
//! - [`WindowedBloomFilter`] has the word layout only, and one cache line per lookup only up to
//!   6 periods (7 and 8 take two lines, longer windows more: `sizing().lines_per_lookup()`).
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

/// A pause point for the crate's own tests (`src/failpoints.rs`): with the `failpoints`
/// feature, runs the hook the current thread armed; in every other build, nothing at all.
macro_rules! failpoint {
    ($name:literal) => {
        #[cfg(feature = "failpoints")]
        $crate::failpoints::reach($name);
    };
}

mod batch;
mod bits;
mod bloom;
pub mod builder;
pub mod clock;
pub mod docs;
mod error;
#[cfg(feature = "failpoints")]
#[doc(hidden)]
pub mod failpoints;
mod filter;
mod forward;
pub mod hash;
mod layout;
mod numbers;
mod os;
mod overwrite;
mod persist;
pub mod sizing;
mod sync;

pub use bloom::{
    AtomicBloomFilter, BlockBits, BloomInfo, CompactionStats, FrozenBloomFilter,
    GrowingBloomFilter, LayerInfo, SemiConcurrentBloomFilter, WindowedBloomFilter,
};
pub use error::{Corruption, Error, IoSource};
pub use filter::DedupFilter;
pub use layout::Layout;
pub use overwrite::{Claim, ExactClaim, ExactOverwriteMap, MapSlot, OverwriteMap};

#[cfg(all(test, seen_loom))]
#[path = "../loom-tests/mod.rs"]
mod loom_tests;

// The README's Rust examples, run as doctests. Private: rustdoc tests the docs of private items
// too, and nothing public exists only for tests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
mod readme_doctests {}

// "Every structure is `Send + Sync`", checked by the compiler.
const _: fn() = || {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<AtomicBloomFilter>();
    send_sync::<WindowedBloomFilter>();
    send_sync::<WindowedBloomFilter<hash::StableHasher, clock::ManualClock>>();
    send_sync::<GrowingBloomFilter>();
    send_sync::<SemiConcurrentBloomFilter>();
    send_sync::<FrozenBloomFilter>();
    send_sync::<OverwriteMap>();
    send_sync::<ExactOverwriteMap>();
};

#[cfg(all(test, not(seen_loom)))]
mod tests {
    /// The guarantee table's rows in `text` (lines starting with `prefix` and then `|`, from the
    /// table's header on), each link's target dropped: the crate docs link to the types, the
    /// README to docs.rs.
    fn guarantee_table(text: &str, prefix: &str) -> Vec<String> {
        let rows: Vec<String> = text
            .lines()
            .filter_map(|line| line.strip_prefix(prefix))
            .skip_while(|line| !line.starts_with("| structure | racing inserts"))
            .take_while(|line| line.starts_with('|'))
            .map(|row| {
                let mut out = String::new();
                let mut rest = row;
                while let Some(at) = rest.find("](") {
                    out.push_str(&rest[..=at]);
                    let close = rest[at..].find(')').expect("a link's target ends") + at;
                    rest = &rest[close + 1..];
                }
                out.push_str(rest);
                out
            })
            .collect();
        assert!(rows.len() > 2, "no guarantee table found");
        rows
    }

    #[test]
    fn the_readme_guarantee_table_is_the_crate_docs_table() {
        let crate_docs = guarantee_table(include_str!("lib.rs"), "//! ");
        let readme = guarantee_table(include_str!("../README.md"), "");
        assert_eq!(readme, crate_docs);
        // The README's links lead to this package's pages on docs.rs.
        let links = include_str!("../README.md")
            .lines()
            .filter(|line| line.starts_with("| [`"))
            .map(|line| line.split("](").nth(1).expect("a link"))
            .collect::<Vec<_>>();
        assert!(links.len() > 2);
        for link in links {
            assert!(
                link.starts_with("https://docs.rs/seen-dedup/latest/seen/"),
                "{link}"
            );
        }
    }
}
