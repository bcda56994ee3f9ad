//! The one trait every structure of the crate implements.

/// A concurrent "have I seen this before?" structure: the interface that lets generic code (the
/// crate's own tests, or yours) treat every structure of the crate alike.
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
/// - An `OverwriteMap` never calls a new item "seen" (up to a 2^-64 fingerprint collision per
///   lookup, never in [`ExactOverwriteMap`](crate::ExactOverwriteMap)), but forgets old items: use
///   it where a new item must never be dropped (an at-least-once queue consumer).
///
/// # Which items are "the same"
///
/// A string and a byte string with the same bytes are one item in every structure, whatever
/// type holds them (`"msg"`, `String`, `b"msg"`, `Vec<u8>`, `&[u8]`, and a `Box`, `Rc`, `Arc`
/// or `Cow` of these), and the same item as the bytes hashed with
/// [`ItemHasher::hash_bytes`](crate::hash::ItemHasher::hash_bytes) and given to `insert_hash`
/// (as the `seen` command does with each record). Other items hash through their
/// [`Hash`](core::hash::Hash) impl, so there the type is part of the item: `1u32` and `1u64`
/// are two ([the rules](crate::hash#which-items-are-one-key)).
/// [`ExactOverwriteMap`](crate::ExactOverwriteMap) takes keys as bytes (`AsRef<[u8]>`) and
/// hashes them alike.
///
/// ```
/// use seen::{AtomicBloomFilter, ExactOverwriteMap, OverwriteMap};
/// let bloom = AtomicBloomFilter::with_capacity(1000, 0.01)?;
/// bloom.insert("msg");
/// assert!(bloom.contains(&String::from("msg")) && bloom.contains(b"msg"));
/// assert!(bloom.contains(&b"msg".to_vec()) && bloom.contains(&b"msg"[..]));
/// let map = OverwriteMap::with_buckets(1000)?;
/// map.insert(&b"msg".to_vec());
/// assert!(map.contains("msg"));
/// let exact = ExactOverwriteMap::with_buckets(1000)?;
/// exact.insert("msg");
/// assert!(exact.contains(b"msg"));
/// # Ok::<(), seen::Error>(())
/// ```
///
/// The concurrency contract each implementation states and checks with loom:
///
/// - Bloom filters have no false negatives under any interleaving: once `insert(x)` has returned,
///   every `contains(x)` that *happens after* it returns `true`: later on the same thread, or on
///   another thread after a synchronization with the inserting one (a join, a channel, a mutex, a
///   Release store read by an Acquire load). A `contains` on another thread that merely runs
///   later by the clock, with no such edge, may still miss an item just inserted, because the
///   filters use `Relaxed` atomics and do not synchronize memory themselves.
/// - When several threads `insert` the same new item at once, at least one of them gets `true`;
///   where an implementation makes insert a single atomic read-modify-write, exactly one does:
///   [`AtomicBloomFilter`](crate::AtomicBloomFilter) with [`Layout::Word`](crate::Layout::Word),
///   and both overwrite maps.
///
/// The orderings behind each of these, and the loom models that check them, are in
/// [the concurrency notes](crate::docs::concurrency).
pub trait DedupFilter<T: ?Sized> {
    /// Records `item`; returns `true` when it is new as far as this structure can tell (see the
    /// table above for what `true` and `false` promise).
    fn insert(&self, item: &T) -> bool;

    /// Whether `item` was seen, without recording it (see the table above). Never mutates.
    fn contains(&self, item: &T) -> bool;
}
