//! [`DedupFilter`], the trait that lets generic code take any of the crate's structures whose
//! `insert` answers with a `bool`.

/// A concurrent "have I seen this before?" structure: the interface that lets generic code (the
/// crate's own tests, or yours) treat the structures alike.
///
/// Implemented by [`AtomicBloomFilter`](crate::AtomicBloomFilter),
/// [`WindowedBloomFilter`](crate::WindowedBloomFilter),
/// [`SemiConcurrentBloomFilter`](crate::SemiConcurrentBloomFilter),
/// [`OverwriteMap`](crate::OverwriteMap) and [`ExactOverwriteMap`](crate::ExactOverwriteMap)
/// (the example below calls a generic function with each, so the compiler checks this list).
/// Not by [`GrowingBloomFilter`](crate::GrowingBloomFilter), whose `insert` returns a `Result`
/// (a growth can fail, and a `bool` could only hide that by dropping the item or by
/// overfilling), nor by [`FrozenBloomFilter`](crate::FrozenBloomFilter), which has no
/// `insert`.
///
/// Both methods take `&self` and may be called from any number of threads at once. They are
/// approximate, and the two families err in **opposite directions**:
///
/// | | `insert` returns `true` | `insert` returns `false` | `contains` returns `true` | `contains` returns `false` |
/// |---|---|---|---|---|
/// | Bloom filters | new, **certainly** | seen, **probably** (false positive) | seen, **probably** | never inserted, **certainly** |
/// | overwrite maps | not remembered (new, or forgotten) | seen, **certainly** | seen, **certainly** | not remembered |
///
/// What each structure promises beyond this (racing inserts, progress, when it forgets) is in
/// its `# Guarantees`, summed up in [the crate's table](crate#guarantees).
///
/// ```
/// use seen::{AtomicBloomFilter, DedupFilter, ExactOverwriteMap, OverwriteMap};
/// use seen::{SemiConcurrentBloomFilter, WindowedBloomFilter};
///
/// /// Keeps the first occurrence of each line: generic over the structure.
/// fn first_occurrences<'a>(seen: &impl DedupFilter<str>, lines: &[&'a str]) -> Vec<&'a str> {
///     lines.iter().copied().filter(|line| seen.insert(line)).collect()
/// }
///
/// let lines = ["a", "b", "a", "c", "b"];
/// let first = ["a", "b", "c"];
/// let bloom = AtomicBloomFilter::with_capacity(1000, 0.001)?;
/// let windowed = WindowedBloomFilter::builder(1000).fpr(0.001).build()?;
/// let semi = SemiConcurrentBloomFilter::with_capacity(1000, 0.001)?;
/// let map = OverwriteMap::with_buckets(1000)?;
/// let exact = ExactOverwriteMap::with_buckets(1000)?;
/// assert_eq!(first_occurrences(&bloom, &lines), first);
/// assert_eq!(first_occurrences(&windowed, &lines), first);
/// assert_eq!(first_occurrences(&semi, &lines), first);
/// assert_eq!(first_occurrences(&map, &lines), first);
/// assert_eq!(first_occurrences(&exact, &lines), first);
/// # Ok::<(), seen::Error>(())
/// ```
///
/// The growing filter is not one (its `insert` returns a `Result`):
///
/// ```compile_fail
/// fn takes(_: &impl seen::DedupFilter<str>) {}
/// takes(&seen::GrowingBloomFilter::with_capacity(1000, 0.01).unwrap());
/// ```
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
pub trait DedupFilter<T: ?Sized> {
    /// Records `item`; returns `true` when it is new as far as this structure can tell (see the
    /// table above for what `true` and `false` promise).
    fn insert(&self, item: &T) -> bool;

    /// Whether `item` was seen, without recording it (see the table above). Never mutates.
    fn contains(&self, item: &T) -> bool;
}
