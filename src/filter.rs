//! The one trait every structure of the crate implements.

/// A concurrent "have I seen this before?" structure: the interface the CLI, the examples and the
/// benchmarks use to treat every structure of the crate alike.
///
/// Both methods take `&self` and may be called from any number of threads at once. They are
/// approximate, and the two families err in **opposite directions**, which decides which one a
/// job needs:
///
/// | | `insert` returns `true` | `insert` returns `false` | `contains` returns `true` | `contains` returns `false` |
/// |---|---|---|---|---|
/// | Bloom filters | new, **certainly** | seen, **probably** (false positive) | seen, **probably** | never inserted, **certainly** |
/// | `OverwriteMap` | not remembered (new, or forgotten) | seen, **certainly** | seen, **certainly** | not remembered |
///
/// - A Bloom filter never forgets, but may call a new item "seen": use it where dropping a rare
///   new item is acceptable and letting a duplicate through is not (crawlers, notification
///   senders with a tolerance for a missed notification...).
/// - An `OverwriteMap` never calls a new item "seen" (up to a documented 128-bit hash collision
///   probability in fingerprint mode, never in exact mode), but forgets old items: use it where
///   a new item must never be dropped (an at-least-once queue consumer).
///
/// The concurrency contract each implementation states and checks with loom:
///
/// - Bloom filters have no false negatives under any interleaving: once `insert(x)` has returned,
///   every `contains(x)` that starts afterwards, on any thread, returns `true`.
/// - When several threads `insert` the same new item at once, at least one of them gets `true`;
///   where an implementation makes insert a single atomic read-modify-write, exactly one does.
pub trait DedupFilter<T: ?Sized> {
    /// Records `item`; returns `true` when it is new as far as this structure can tell (see the
    /// table above for what `true` and `false` promise).
    fn insert(&self, item: &T) -> bool;

    /// Whether `item` was seen, without recording it (see the table above). Never mutates.
    fn contains(&self, item: &T) -> bool;
}
