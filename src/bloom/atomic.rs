//! `AtomicBloomFilter`: a lock-free Bloom filter over an atomic bitset.

use core::fmt;
use core::hash::Hash;

use super::info::{self, BloomInfo};
use super::probe::{block, line_bits, word_probe};
use super::{AtomicOptions, BloomBuilder, Probe};
use crate::batch::{GROUP, GROUP_MIN_BYTES, append_results, for_each_group};
use crate::bits::{AtomicBits, LINE_WORDS};
use crate::hash::{Hash128, ItemHasher, StableHasher};
use crate::sizing::BlockedSizing;
use crate::sync::Ordering::{self, Relaxed};
use crate::{Error, Layout};

/// A Bloom filter that any number of threads insert into and query at once, through `&self`.
///
/// # Guarantees
///
/// - **No false negatives**, under any interleaving: once `insert(x)` has returned, every
///   `contains(x)` that [happens after](crate#guarantees) it returns `true`.
/// - **False positives** at a rate of at most the target `fpr` after `capacity` distinct items;
///   past capacity the rate grows (see [`estimated_fpr`](Self::estimated_fpr)).
/// - **Racing inserts of one new item**: with [`Layout::Word`] (the default) exactly one of them
///   returns `true` (one `fetch_or` sets all of the item's bits), so `insert` is an exactly-once
///   gate; with [`Layout::Line`] at least one does, and how often several do depends on how
///   closely the threads run in step, with no bound.
/// - **Progress**: `insert` and `contains` are wait-free: `insert` is at most one atomic
///   read-modify-write per word that lacks bits (one word in the word layout, up to 8 in the
///   line layout) and never retries; `contains` is plain loads. The batch methods are the same
///   item by item, and [`union`](Self::union) one `fetch_or` per word.
/// - **Never forgets**: only [`clear`](Self::clear) and [`intersect`](Self::intersect) remove
///   bits, and they take `&mut self`.
/// - All bit accesses are `Relaxed`: the filter does not synchronize other memory between
///   threads ([why that is enough](crate::docs::concurrency#atomicbloomfilter)).
///
/// # Examples
///
/// ```
/// use seen::AtomicBloomFilter;
///
/// let filter = AtomicBloomFilter::with_capacity(1_000_000, 0.01)?;
/// std::thread::scope(|s| {
///     s.spawn(|| assert!(filter.insert("token-1")));
///     s.spawn(|| assert!(filter.insert("token-2")));
/// });
/// assert!(filter.contains("token-1") && filter.contains("token-2"));
/// assert!(!filter.insert("token-1")); // seen
/// # Ok::<(), seen::Error>(())
/// ```
pub struct AtomicBloomFilter<H = StableHasher> {
    pub(super) bits: AtomicBits,
    pub(super) sizing: BlockedSizing,
    pub(super) hasher: H,
}

impl AtomicBloomFilter {
    /// A filter for `capacity` distinct items at false-positive rate `fpr`, with the default
    /// layout ([`Layout::Word`]) and hasher ([`StableHasher`]).
    ///
    /// # Errors
    ///
    /// [`Error::ZeroCapacity`], [`Error::InvalidFpr`] for `fpr` outside (0, 1),
    /// [`Error::FprBelowLayoutLimit`] for an `fpr` the layout cannot reach economically (the
    /// default word layout below 6.4e-6: it names [`Layout::Line`], which reaches 4.7e-15),
    /// [`Error::TooLarge`] or [`Error::AllocationFailed`] when the bits do not fit.
    ///
    /// # Examples
    ///
    /// ```
    /// use seen::{AtomicBloomFilter, Error};
    /// let filter = AtomicBloomFilter::with_capacity(10_000_000, 0.01)?;
    /// assert_eq!(filter.capacity(), 10_000_000);
    /// assert!(matches!(AtomicBloomFilter::with_capacity(0, 0.01), Err(Error::ZeroCapacity)));
    /// # Ok::<(), seen::Error>(())
    /// ```
    pub fn with_capacity(capacity: u64, fpr: f64) -> Result<Self, Error> {
        Self::builder(capacity).fpr(fpr).build()
    }

    /// A builder for `capacity` distinct items, to choose the rate, the layout or the hasher.
    /// Defaults: `fpr` 0.01, [`Layout::Word`], [`StableHasher`].
    ///
    /// # Examples
    ///
    /// ```
    /// use seen::{AtomicBloomFilter, Layout};
    /// let filter = AtomicBloomFilter::builder(1_000_000)
    ///     .fpr(0.001)
    ///     .layout(Layout::Line)
    ///     .hasher(std::hash::RandomState::new())
    ///     .build()?;
    /// assert_eq!(filter.layout(), Layout::Line);
    /// # Ok::<(), seen::Error>(())
    /// ```
    pub fn builder(capacity: u64) -> BloomBuilder<AtomicOptions> {
        BloomBuilder::new(capacity, AtomicOptions::default())
    }
}

impl<H: ItemHasher> AtomicBloomFilter<H> {
    /// Inserts `item`; returns `true` if it was certainly not in the filter before (some bit was
    /// unset), `false` if it possibly was (all its bits were set: inserted before, or a false
    /// positive).
    ///
    /// Concurrency: see the type docs. With [`Layout::Word`] this is one atomic
    /// read-modify-write (or a load and no write when the bits are already set).
    ///
    /// # Examples
    ///
    /// ```
    /// let filter = seen::AtomicBloomFilter::with_capacity(1000, 0.01)?;
    /// assert!(filter.insert(&42u64));
    /// assert!(!filter.insert(&42u64));
    /// # Ok::<(), seen::Error>(())
    /// ```
    #[inline]
    pub fn insert<T: Hash + ?Sized>(&self, item: &T) -> bool {
        self.insert_hash(self.hasher.hash_item(item))
    }

    /// Whether `item` is possibly in the filter: `false` means certainly never inserted, `true`
    /// means inserted or a false positive. Never writes.
    ///
    /// # Examples
    ///
    /// ```
    /// let filter = seen::AtomicBloomFilter::with_capacity(1000, 0.01)?;
    /// filter.insert("a");
    /// assert!(filter.contains("a"));
    /// assert!(!filter.contains("b")); // true here with probability about 1%
    /// # Ok::<(), seen::Error>(())
    /// ```
    #[inline]
    pub fn contains<T: Hash + ?Sized>(&self, item: &T) -> bool {
        self.contains_hash(self.hasher.hash_item(item))
    }

    /// [`insert`](Self::insert) of an already computed hash (from [`hasher`](Self::hasher)).
    ///
    /// # Examples
    ///
    /// ```
    /// use seen::hash::ItemHasher;
    /// let filter = seen::AtomicBloomFilter::with_capacity(1000, 0.01)?;
    /// let h = filter.hasher().hash_bytes(b"raw key");
    /// assert!(filter.insert_hash(h));
    /// assert!(filter.contains_hash(h));
    /// # Ok::<(), seen::Error>(())
    /// ```
    #[inline]
    pub fn insert_hash(&self, hash: Hash128) -> bool {
        self.insert_probe(&Probe::new(hash, &self.sizing))
    }

    #[inline(always)]
    fn insert_probe(&self, probe: &Probe) -> bool {
        insert_at(&self.bits, probe, Relaxed)
    }

    #[inline(always)]
    fn insert_line(&self, line: usize, h2: u64, k: u32) -> bool {
        insert_line(&self.bits, line, h2, k, Relaxed)
    }

    /// [`contains`](Self::contains) of an already computed hash.
    #[inline]
    pub fn contains_hash(&self, hash: Hash128) -> bool {
        self.contains_probe(&Probe::new(hash, &self.sizing))
    }

    #[inline(always)]
    fn contains_probe(&self, probe: &Probe) -> bool {
        contains_at(&self.bits, probe, Relaxed)
    }

    /// Inserts every item; returns how many were new (as [`insert`](Self::insert) would count
    /// them, one by one, in order). [`insert_many`](Self::insert_many) without the per-item
    /// results.
    ///
    /// # Examples
    ///
    /// ```
    /// let filter = seen::AtomicBloomFilter::with_capacity(1000, 0.01)?;
    /// assert_eq!(filter.insert_counting_new(&[1u64, 2, 3, 2]), 3);
    /// assert_eq!(filter.count_contained(&[1u64, 2, 3, 4]), 3); // 4 is a false positive w.p. ~1%
    /// # Ok::<(), seen::Error>(())
    /// ```
    pub fn insert_counting_new<'a, T, I>(&self, items: I) -> usize
    where
        T: Hash + ?Sized + 'a,
        I: IntoIterator<Item = &'a T>,
    {
        let mut new = 0;
        self.insert_each(
            items.into_iter().map(|item| self.hasher.hash_item(item)),
            |n| new += usize::from(n),
        );
        new
    }

    /// How many of `items` are possibly in the filter (as [`contains`](Self::contains)).
    /// [`contains_many`](Self::contains_many) without the per-item results.
    pub fn count_contained<'a, T, I>(&self, items: I) -> usize
    where
        T: Hash + ?Sized + 'a,
        I: IntoIterator<Item = &'a T>,
    {
        let mut hits = 0;
        self.contains_each(
            items.into_iter().map(|item| self.hasher.hash_item(item)),
            |hit| hits += usize::from(hit),
        );
        hits
    }

    crate::forward::batch_of_items! {
    insert_many
    /// RedisBloom's `BF.MADD`.
    ///
    /// Faster than a loop of `insert` on a filter larger than the caches: it hashes a group of
    /// items, then reads all their words, then writes, so that the group's cache misses
    /// overlap instead of each waiting behind the previous item's hashing and atomic write
    /// ([measured](crate::docs::benchmarks)). Same guarantees as `insert`, item by item: the
    /// items are inserted in order, and an item repeated within the batch is new only the
    /// first time.
    ///
    /// # Examples
    ///
    /// ```
    /// let filter = seen::AtomicBloomFilter::with_capacity(1000, 0.01)?;
    /// let mut new = Vec::new();
    /// assert_eq!(filter.insert_many(["a", "b", "a"], &mut new), 2);
    /// assert_eq!(new, [true, true, false]);
    ///
    /// // Byte keys through the hasher's byte path, hashed lazily inside the batch:
    /// use seen::hash::ItemHasher;
    /// let tokens: Vec<[u8; 64]> = vec![[1; 64], [2; 64]];
    /// new.clear();
    /// filter.insert_many_hashes(tokens.iter().map(|t| filter.hasher().hash_bytes(t)), &mut new);
    /// assert_eq!(new, [true, true]);
    /// # Ok::<(), seen::Error>(())
    /// ```
    }

    /// [`insert_many`](Self::insert_many) of already computed hashes (from
    /// [`hasher`](Self::hasher)). The iterator is consumed in groups, so a lazy
    /// `map(|key| hasher.hash_bytes(key))` keeps the hashing inside the batch.
    pub fn insert_many_hashes<I>(&self, hashes: I, new: &mut Vec<bool>) -> usize
    where
        I: IntoIterator<Item = Hash128>,
    {
        append_results(new, hashes.into_iter(), |hashes, out| {
            self.insert_each(hashes, |n| out.push(n));
        })
    }

    crate::forward::batch_of_items! {
    contains_many
    /// RedisBloom's `BF.MEXISTS`. Hashes a group of items, then
    /// reads all their words, then answers, so the misses of a group overlap even when hashing
    /// an item takes long.
    ///
    /// # Examples
    ///
    /// ```
    /// let filter = seen::AtomicBloomFilter::with_capacity(1000, 0.01)?;
    /// filter.insert_counting_new(["a", "b"]);
    /// let mut hits = Vec::new();
    /// filter.contains_many(["a", "x", "b"], &mut hits);
    /// assert_eq!(&hits[..], [true, false, true]); // `false` for "x" w.p. ~99%
    /// # Ok::<(), seen::Error>(())
    /// ```
    }

    /// [`contains_many`](Self::contains_many) of already computed hashes.
    pub fn contains_many_hashes<I>(&self, hashes: I, hits: &mut Vec<bool>) -> usize
    where
        I: IntoIterator<Item = Hash128>,
    {
        append_results(hits, hashes.into_iter(), |hashes, out| {
            self.contains_each(hashes, |hit| out.push(hit));
        })
    }

    /// The batched insert: groups of [`GROUP`] hashes, each group's blocks read before any is
    /// written; `out` gets each item's result in order. The layout is tested once per call. A
    /// filter below [`GROUP_MIN_BYTES`] is mostly in cache, where the extra passes cost more
    /// than the overlap saves: there it is a loop of `insert_hash`.
    ///
    /// Pass 1, arithmetic only: the probes. Pass 2: one load per block, back to back, so the
    /// group's cache misses are all in flight at once (a loop of single calls has only as many
    /// in flight as the processor's window holds of its instructions, and a locked
    /// instruction lets none pass). Pass 3: the writes, to lines now in cache.
    #[inline]
    fn insert_each(&self, hashes: impl Iterator<Item = Hash128>, mut out: impl FnMut(bool)) {
        if self.memory_bytes() < GROUP_MIN_BYTES {
            return hashes.for_each(|hash| out(self.insert_hash(hash)));
        }
        let sizing = &self.sizing;
        match sizing.layout {
            Layout::Word => for_each_group(hashes, |group| {
                let mut at = [(0usize, 0u64); GROUP];
                for (at, &hash) in at.iter_mut().zip(group) {
                    *at = word_probe(hash, sizing);
                }
                let at = &at[..group.len()];
                let mut seen = [0u64; GROUP];
                for (seen, &(word, _)) in seen.iter_mut().zip(at) {
                    *seen = self.bits.word(word).load(Relaxed);
                }
                // Bits are never cleared through `&self`, so a stale load that shows all of
                // them set is still right; one that shows a bit missing is settled by the
                // read-modify-write. An item repeated within the group is new only once: its
                // second `fetch_or` finds the bits the first one set.
                for (&(word, mask), &seen) in at.iter().zip(&seen) {
                    out(seen & mask != mask
                        && self.bits.word(word).fetch_or(mask, Relaxed) & mask != mask);
                }
            }),
            Layout::Line => for_each_group(hashes, |group| {
                let mut lines = [0usize; GROUP];
                for (line, &hash) in lines.iter_mut().zip(group) {
                    *line = block(hash, sizing);
                }
                let lines = &lines[..group.len()];
                let mut any = 0;
                for &line in lines {
                    any ^= self.bits.line(line).0[0].load(Relaxed);
                }
                core::hint::black_box(any);
                for (&line, hash) in lines.iter().zip(group) {
                    out(self.insert_line(line, hash.h2, sizing.hashes));
                }
            }),
        }
    }

    /// The batched lookup, as [`insert_each`](Self::insert_each) without the writes.
    #[inline]
    fn contains_each(&self, hashes: impl Iterator<Item = Hash128>, mut out: impl FnMut(bool)) {
        if self.memory_bytes() < GROUP_MIN_BYTES {
            return hashes.for_each(|hash| out(self.contains_hash(hash)));
        }
        let sizing = &self.sizing;
        match sizing.layout {
            Layout::Word => for_each_group(hashes, |group| {
                let mut at = [(0usize, 0u64); GROUP];
                for (at, &hash) in at.iter_mut().zip(group) {
                    *at = word_probe(hash, sizing);
                }
                let at = &at[..group.len()];
                let mut seen = [0u64; GROUP];
                for (seen, &(word, _)) in seen.iter_mut().zip(at) {
                    *seen = self.bits.word(word).load(Relaxed);
                }
                for (&(_, mask), &seen) in at.iter().zip(&seen) {
                    out(seen & mask == mask);
                }
            }),
            Layout::Line => for_each_group(hashes, |group| {
                let mut lines = [0usize; GROUP];
                for (line, &hash) in lines.iter_mut().zip(group) {
                    *line = block(hash, sizing);
                }
                let lines = &lines[..group.len()];
                let mut any = 0;
                for &line in lines {
                    any ^= self.bits.line(line).0[0].load(Relaxed);
                }
                core::hint::black_box(any);
                for (&line, hash) in lines.iter().zip(group) {
                    out(self.contains_probe(&Probe::Line {
                        line,
                        h2: hash.h2,
                        k: sizing.hashes,
                    }));
                }
            }),
        }
    }

    /// An estimate of the number of distinct items inserted, from the fraction of set bits `X/m`.
    ///
    /// This is Swamidass and Baldi's `-(m/k) ln(1 - X/m)` adapted to blocks: with `λ` items per
    /// block on average (Poisson), each drawing `k` of `B` positions with replacement, a bit stays
    /// unset with probability `exp(-λ (1 - (1 - 1/B)^k))`, so
    /// `n = -blocks · ln(1 - X/m) / (1 - (1 - 1/B)^k)`. Reads every word: O(m).
    ///
    /// **Saturation:** when every bit is set the formula has no finite answer, and this returns
    /// `u64::MAX` as a sentinel meaning "saturated: the count is unknown, and every lookup is a
    /// false positive". Long before that the estimate loses precision: past a few times the
    /// capacity, compare [`estimated_fpr`](Self::estimated_fpr) with your target instead.
    ///
    /// # Examples
    ///
    /// ```
    /// let filter = seen::AtomicBloomFilter::with_capacity(100_000, 0.01)?;
    /// filter.insert_counting_new(&(0..50_000u64).collect::<Vec<_>>());
    /// let n = filter.estimated_len();
    /// assert!((49_000..51_000).contains(&n), "{n}");
    ///
    /// // A tiny filter filled far past its capacity saturates: the sentinel.
    /// let tiny = seen::AtomicBloomFilter::with_capacity(1, 0.1)?;
    /// tiny.insert_counting_new(&(0..100_000u64).collect::<Vec<_>>());
    /// assert_eq!(tiny.estimated_len(), u64::MAX);
    /// assert_eq!(tiny.estimated_fpr(), 1.0);
    /// # Ok::<(), seen::Error>(())
    /// ```
    pub fn estimated_len(&self) -> u64 {
        info::estimated_len(self.bits.iter_words(), &self.sizing)
    }

    /// The false-positive rate of the filter as it is now: the probability that an item never
    /// inserted is reported present. Exact for the current bits: a query's `k` uniform positions
    /// in a block with `s` of `B` bits set are all set with probability `(s / B)^k`, averaged over
    /// blocks. Reads every word: O(m).
    ///
    /// # Examples
    ///
    /// ```
    /// let filter = seen::AtomicBloomFilter::with_capacity(100_000, 0.01)?;
    /// assert_eq!(filter.estimated_fpr(), 0.0);
    /// filter.insert_counting_new(&(0..100_000u64).collect::<Vec<_>>());
    /// assert!(filter.estimated_fpr() < 0.01);
    /// # Ok::<(), seen::Error>(())
    /// ```
    pub fn estimated_fpr(&self) -> f64 {
        info::estimated_fpr(self.bits.iter_words(), &self.sizing)
    }

    /// What the filter is and holds: capacity, bytes, layout, estimated distinct items and
    /// false-positive rate ([`BloomInfo`]; `Display` for a log line). RedisBloom's `BF.INFO`
    /// and `BF.CARD`. Reads every word: O(m).
    pub fn info(&self) -> BloomInfo {
        info::single(
            "AtomicBloomFilter",
            &self.sizing,
            self.memory_bytes(),
            || self.bits.iter_words(),
        )
    }

    /// The number of distinct items the filter was sized for.
    pub fn capacity(&self) -> u64 {
        self.sizing.capacity
    }

    /// The target false-positive rate at capacity.
    pub fn fpr(&self) -> f64 {
        self.sizing.fpr
    }

    /// The filter's size: [`sizing::blocked`](crate::sizing::blocked) of its capacity, fpr and
    /// layout, which it was built from (bits, `k`, blocks, the expected rate at capacity).
    ///
    /// # Examples
    ///
    /// ```
    /// use seen::{AtomicBloomFilter, Layout, sizing};
    /// let filter = AtomicBloomFilter::with_capacity(1_000_000, 0.01)?;
    /// assert_eq!(filter.sizing(), sizing::blocked(1_000_000, 0.01, Layout::Word)?);
    /// assert_eq!(filter.sizing().bytes(), filter.memory_bytes());
    /// # Ok::<(), seen::Error>(())
    /// ```
    pub fn sizing(&self) -> BlockedSizing {
        self.sizing
    }

    /// The number of bits, a multiple of 512 (whole cache lines).
    ///
    /// # Examples
    ///
    /// ```
    /// use seen::{AtomicBloomFilter, Layout};
    /// let f = AtomicBloomFilter::with_capacity(10_000_000, 0.01)?;
    /// assert_eq!(f.bit_len() % 512, 0);
    /// assert_eq!(f.memory_bytes() * 8, f.bit_len());
    /// // The word layout needs about 12.3 bits per item at 1% (the sizing notes' Limits table).
    /// assert!((12.0..12.6).contains(&(f.bit_len() as f64 / 1e7)));
    /// assert_eq!((f.hashes(), f.layout(), f.fpr()), (5, Layout::Word, 0.01));
    /// # Ok::<(), seen::Error>(())
    /// ```
    pub fn bit_len(&self) -> u64 {
        self.sizing.bits
    }

    /// The memory the bits take, in bytes: the size of the allocation.
    pub fn memory_bytes(&self) -> u64 {
        self.bits.words() as u64 * 8
    }

    /// `k`, the number of bits set per item.
    pub fn hashes(&self) -> u32 {
        self.sizing.hashes
    }

    /// The block layout.
    pub fn layout(&self) -> Layout {
        self.sizing.layout
    }

    /// The hasher, to precompute hashes for [`insert_hash`](Self::insert_hash).
    pub fn hasher(&self) -> &H {
        &self.hasher
    }

    /// Empties the filter. Takes `&mut self`, so it cannot race with inserts: a `&self` clear
    /// would let an insert that returned `true` before the clear be forgotten while its caller
    /// still relies on it. Share the filter in an `RwLock` (or rebuild it) if you need to clear
    /// it while other threads hold it.
    ///
    /// # Examples
    ///
    /// ```
    /// let mut filter = seen::AtomicBloomFilter::with_capacity(1000, 0.01)?;
    /// filter.insert("a");
    /// filter.clear();
    /// assert!(!filter.contains("a"));
    /// # Ok::<(), seen::Error>(())
    /// ```
    pub fn clear(&mut self) {
        self.bits.clear();
    }

    /// Adds every item of `other` to this filter: an OR of the bits, word by word, with one
    /// `fetch_or` per word that gains bits. Both filters must have the same layout, blocks,
    /// `k` and hasher (the capacity and target rate may differ: they are what the blocks were
    /// sized from); a filter loaded from another process's file qualifies, which is how shards
    /// built by several workers become one filter.
    ///
    /// Lock-free, on `&self` and `&other`, while other threads insert into and query either
    /// filter: every item inserted into `other` before the union began is in `self` when it
    /// returns, and no item of `self` is lost (bits are only added). A lookup racing the union
    /// may see some of `other`'s items and not others. The rate of false positives afterwards
    /// is that of a filter holding both sets ([`estimated_len`](Self::estimated_len) estimates
    /// the union's size, items in both counted once).
    ///
    /// # Errors
    ///
    /// [`Error::Incompatible`] naming the first parameter that differs; the filter is then
    /// unchanged.
    ///
    /// # Examples
    ///
    /// ```
    /// use seen::AtomicBloomFilter;
    /// let monday = AtomicBloomFilter::with_capacity(1000, 0.01)?;
    /// let tuesday = AtomicBloomFilter::with_capacity(1000, 0.01)?;
    /// monday.insert("a");
    /// tuesday.insert("b");
    /// monday.union(&tuesday)?;
    /// assert!(monday.contains("a") && monday.contains("b"));
    /// let other = AtomicBloomFilter::with_capacity(2000, 0.01)?;
    /// assert!(matches!(monday.union(&other), Err(seen::Error::Incompatible { what: "blocks" })));
    /// # Ok::<(), seen::Error>(())
    /// ```
    pub fn union(&self, other: &Self) -> Result<(), Error> {
        self.check_mergeable(other)?;
        for i in 0..self.bits.words() {
            let theirs = other.bits.word(i).load(Relaxed);
            let word = self.bits.word(i);
            // Skip the locked instruction where nothing would change (most words, when the
            // filters hold similar sets).
            if theirs & !word.load(Relaxed) != 0 {
                failpoint!("atomic.union.word");
                word.fetch_or(theirs, Relaxed);
            }
        }
        Ok(())
    }

    /// Keeps only the bits set in both filters: afterwards `contains(x)` is `true` for every
    /// `x` inserted into both, and for fewer other items than either filter alone. Like every
    /// Bloom filter intersection it is approximate: an item inserted into only one of them can
    /// still be reported, with at most the false-positive rate of either filter.
    ///
    /// Takes `&mut self`: clearing bits while other threads insert would lose their items
    /// (an insert that returned `true` must stay found). Same requirements as
    /// [`union`](Self::union).
    ///
    /// # Errors
    ///
    /// [`Error::Incompatible`], the filter unchanged.
    ///
    /// # Examples
    ///
    /// ```
    /// use seen::AtomicBloomFilter;
    /// let mut a = AtomicBloomFilter::with_capacity(1000, 0.01)?;
    /// let b = AtomicBloomFilter::with_capacity(1000, 0.01)?;
    /// a.insert("both");
    /// b.insert("both");
    /// a.insert("only a");
    /// a.intersect(&b)?;
    /// assert!(a.contains("both"));
    /// assert!(!a.contains("only a")); // true here with probability about 1%
    /// # Ok::<(), seen::Error>(())
    /// ```
    pub fn intersect(&mut self, other: &Self) -> Result<(), Error> {
        self.check_mergeable(other)?;
        for i in 0..self.bits.words() {
            let theirs = other.bits.word(i).load(Relaxed);
            self.bits.word(i).fetch_and(theirs, Relaxed);
        }
        Ok(())
    }

    /// Copies the filter's words `first..first + out.len()` into `out`. Word `w` is the bits
    /// `64·w` to `64·w + 63`, least significant first: the positions [`BlockBits`](crate::BlockBits) gives. One
    /// Relaxed load per word, so a copy taken while others insert holds every insert that
    /// returned before it started, and any part of the ones racing it (as a save does).
    ///
    /// With [`union_words`](Self::union_words), this moves a filter's bits to storage of
    /// another kind and back (the `seen-dedup-redis` crate keeps them in a server's strings).
    ///
    /// # Errors
    ///
    /// [`Error::WordsOutOfRange`] if the range passes the last word (there are
    /// [`bit_len`](Self::bit_len)` / 64` words); `out` is then left as it was.
    ///
    /// # Examples
    ///
    /// ```
    /// use seen::{AtomicBloomFilter, Error};
    /// let a = AtomicBloomFilter::with_capacity(1000, 0.01)?;
    /// a.insert("x");
    /// let mut words = vec![0u64; (a.bit_len() / 64) as usize];
    /// a.read_words(0, &mut words)?;
    /// let b = AtomicBloomFilter::with_capacity(1000, 0.01)?;
    /// b.union_words(0, &words)?;
    /// assert!(b.contains("x"));
    /// assert!(matches!(a.read_words(1, &mut words), Err(Error::WordsOutOfRange { .. })));
    /// # Ok::<(), seen::Error>(())
    /// ```
    pub fn read_words(&self, first: u64, out: &mut [u64]) -> Result<(), Error> {
        let first = self.word_range(first, out.len())?;
        for (i, slot) in out.iter_mut().enumerate() {
            *slot = self.bits.word(first + i).load(Relaxed);
        }
        Ok(())
    }

    /// Sets in the filter's words `first..first + words.len()` every bit set in `words` (a
    /// `fetch_or` per word that gains a bit): [`union`](Self::union) with words read from
    /// elsewhere, with the same concurrency (racing inserts and lookups are fine; an item is
    /// found once its words are in). Words as in [`read_words`](Self::read_words).
    ///
    /// # Errors
    ///
    /// [`Error::WordsOutOfRange`] if the range passes the last word, as
    /// [`read_words`](Self::read_words); the filter is then unchanged.
    pub fn union_words(&self, first: u64, words: &[u64]) -> Result<(), Error> {
        let first = self.word_range(first, words.len())?;
        for (i, &theirs) in words.iter().enumerate() {
            let word = self.bits.word(first + i);
            if theirs & !word.load(Relaxed) != 0 {
                word.fetch_or(theirs, Relaxed);
            }
        }
        Ok(())
    }

    /// `first` as an index, after checking that `len` words from it are in the filter.
    fn word_range(&self, first: u64, len: usize) -> Result<usize, Error> {
        let words = self.bits.words();
        match usize::try_from(first) {
            Ok(start) if start.checked_add(len).is_some_and(|end| end <= words) => Ok(start),
            _ => Err(Error::WordsOutOfRange {
                first,
                len: len as u64,
                words: words as u64,
            }),
        }
    }

    /// `Ok` if `other`'s bits sit where this filter's would: same layout, blocks, `k`, hasher.
    fn check_mergeable(&self, other: &Self) -> Result<(), Error> {
        let (a, b) = (&self.sizing, &other.sizing);
        let differs = if a.layout != b.layout {
            Some("layout")
        } else if a.blocks != b.blocks || a.bits != b.bits {
            Some("blocks")
        } else if a.hashes != b.hashes {
            Some("hashes")
        } else if crate::persist::identity_of(&self.hasher).is_none()
            || crate::persist::identity_of(&self.hasher)
                != crate::persist::identity_of(&other.hasher)
        {
            Some("hasher")
        } else {
            None
        };
        match differs {
            Some(what) => Err(Error::Incompatible { what }),
            None => Ok(()),
        }
    }

    /// The line layout's draws of `item`, (word, bit) in draw order, for the loom models that
    /// need items whose bits overlap in a given way.
    #[cfg(all(test, seen_loom))]
    pub(crate) fn line_draws<T: Hash + ?Sized>(&self, item: &T) -> Vec<(usize, u32)> {
        let hash = self.hasher.hash_item(item);
        let mut draws = Vec::new();
        line_bits(hash.h2, self.sizing.hashes, |word, bit| {
            draws.push((word, bit))
        });
        draws
    }

    /// A deliberately broken insert for the loom models: a load and a separate store where one
    /// read-modify-write is needed. Loom must catch two threads both told "new".
    #[cfg(all(test, seen_loom))]
    pub(crate) fn racy_insert<T: Hash + ?Sized>(&self, item: &T) -> bool {
        let probe = Probe::new(self.hasher.hash_item(item), &self.sizing);
        racy_or_at(&self.bits, &probe, Relaxed)
    }
}

/// Sets the probe's bits in `bits`, every access with `order` (`Relaxed` for the atomic filter,
/// `SeqCst` where a protocol needs the single total order: the growing filter's layers); `true`
/// if some bit was unset before. Always inlined (the word layout's whole insert is a few
/// instructions); the line layout's longer path is a function of its own.
#[inline(always)]
pub(super) fn insert_at(bits: &AtomicBits, probe: &Probe, order: Ordering) -> bool {
    match *probe {
        Probe::Word { word, mask } => insert_word(bits.word(word), mask, order),
        Probe::Line { line, h2, k } => insert_line(bits, line, h2, k, order),
    }
}

/// [`insert_at`] without its first test of the bits: for a caller that has just found some
/// bit of the probe unset (the growing filter's insert, after its lookup of the layers), where
/// the test would read the same bits again. The answer is the same: `true` iff some
/// `fetch_or` set a bit that was unset (an item that another thread completed meanwhile
/// costs writes that change nothing).
#[inline(always)]
pub(super) fn or_at(bits: &AtomicBits, probe: &Probe, order: Ordering) -> bool {
    match *probe {
        Probe::Word { word, mask } => bits.word(word).fetch_or(mask, order) & mask != mask,
        Probe::Line { line, h2, k } => or_line(bits, line, h2, k, order),
    }
}

/// [`or_at`] done wrong, for the loom models' twins (`RacyOr`, `racy_insert`): a load and a
/// separate store per word; `true` if some bit was unset at the load.
#[cfg(all(test, seen_loom))]
pub(super) fn racy_or_at(bits: &AtomicBits, probe: &Probe, order: Ordering) -> bool {
    let racy = |word: &crate::sync::AtomicU64, mask: u64| {
        let old = word.load(order);
        word.store(old | mask, order);
        old & mask != mask
    };
    match *probe {
        Probe::Word { word, mask } => racy(bits.word(word), mask),
        Probe::Line { line, h2, k } => {
            let line = &bits.line(line).0;
            let mut masks = [0u64; LINE_WORDS];
            line_bits(h2, k, |word, bit| masks[word] |= 1 << bit);
            let mut new = false;
            for (word, &mask) in line.iter().zip(&masks) {
                if mask != 0 {
                    new |= racy(word, mask);
                }
            }
            new
        }
    }
}

/// Sets the probe's bits in `bits` with plain loads and stores (`Relaxed`, no locked
/// instruction): only for a copy that a single thread writes (the semi-concurrent filter's
/// compactor) while others may read it.
#[inline(always)]
pub(super) fn set_at(bits: &AtomicBits, probe: &Probe) {
    let set = |word: &crate::sync::AtomicU64, mask: u64| {
        let old = word.load(Relaxed);
        if old & mask != mask {
            word.store(old | mask, Relaxed);
        }
    };
    match *probe {
        Probe::Word { word, mask } => set(bits.word(word), mask),
        Probe::Line { line, h2, k } => {
            let line = &bits.line(line).0;
            line_bits(h2, k, |word, bit| set(&line[word], 1 << bit));
        }
    }
}

/// Whether `bits` hold every bit of the probe, every load with `order`.
#[inline(always)]
pub(super) fn contains_at(bits: &AtomicBits, probe: &Probe, order: Ordering) -> bool {
    match *probe {
        Probe::Word { word, mask } => bits.word(word).load(order) & mask == mask,
        Probe::Line { line, h2, k } => {
            let line = &bits.line(line).0;
            let mut all = 1;
            line_bits(h2, k, |word, bit| all &= line[word].load(order) >> bit);
            all & 1 == 1
        }
    }
}

/// Sets `mask` in `word`; `true` if some bit of it was unset before. Reads first, so an item that
/// is already present costs a load and no write (no cache-line ownership transfer).
#[inline]
fn insert_word(word: &crate::sync::AtomicU64, mask: u64, order: Ordering) -> bool {
    if word.load(order) & mask == mask {
        return false;
    }
    word.fetch_or(mask, order) & mask != mask
}

/// The line layout's insert of the `k` positions `h2` draws in `line`.
#[inline]
fn insert_line(bits: &AtomicBits, line_index: usize, h2: u64, k: u32, order: Ordering) -> bool {
    let line = &bits.line(line_index).0;
    // Test every bit in place first (loads only: an item seen before writes nothing, and no
    // masks are built for it). Only an item with a bit missing builds its masks and ORs every
    // word it touches, in word order: "new" iff some `fetch_or` set a bit that was unset, so an
    // item whose bits no one else sets is always new, whatever other items do concurrently (at
    // least once, with no exception). Deciding by the first missing bit alone (tried: fewer
    // keys new to two threads in step) lets another item's concurrent write to that one bit
    // make a lone insert of a new item return `false`, which no sequential order explains;
    // loom found it.
    //
    // No second test per word before its `fetch_or`: the line is written anyway, and a branch
    // on each word's bits (taken about half the time as the filter fills) was mispredicted
    // after the line's miss; the loop runs over the touched words only, a count that the hash
    // alone decides. New items: about 0.85x the time of the loop with the tests (paired runs,
    // 10M items at 1%).
    let mut all = 1;
    line_bits(h2, k, |word, bit| all &= line[word].load(order) >> bit);
    if all & 1 == 1 {
        return false;
    }
    or_line(bits, line_index, h2, k, order)
}

/// The second half of [`insert_line`]: ORs every word the positions touch, in word order;
/// `true` iff some `fetch_or` set a bit that was unset.
#[inline]
fn or_line(bits: &AtomicBits, line: usize, h2: u64, k: u32, order: Ordering) -> bool {
    let line = &bits.line(line).0;
    let mut masks = [0u64; LINE_WORDS];
    let mut words = 0u32;
    line_bits(h2, k, |word, bit| {
        masks[word] |= 1 << bit;
        words |= 1 << word;
    });
    let mut new = 0;
    while words != 0 {
        let word = words.trailing_zeros() as usize;
        words &= words - 1;
        let mask = masks[word];
        new |= mask & !line[word].fetch_or(mask, order);
    }
    new != 0
}

crate::forward::dedup_filter!(impl[H: ItemHasher] for AtomicBloomFilter<H>, item: Hash);

impl<'a, T: Hash + ?Sized + 'a, H: ItemHasher> Extend<&'a T> for AtomicBloomFilter<H> {
    /// Inserts every item, as [`insert_counting_new`](AtomicBloomFilter::insert_counting_new).
    fn extend<I: IntoIterator<Item = &'a T>>(&mut self, items: I) {
        self.insert_counting_new(items);
    }
}

impl<H> fmt::Debug for AtomicBloomFilter<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AtomicBloomFilter")
            .field("sizing", &self.sizing)
            .finish_non_exhaustive()
    }
}

impl<H: ItemHasher> BloomBuilder<AtomicOptions, H> {
    /// Sizes and allocates the filter.
    ///
    /// # Errors
    ///
    /// As [`AtomicBloomFilter::with_capacity`].
    pub fn build(self) -> Result<AtomicBloomFilter<H>, Error> {
        let (sizing, hasher, AtomicOptions {}) = self.into_parts()?;
        let bits = AtomicBits::new(sizing.lines())?;
        debug_assert_eq!(bits.words() as u64 * 64, sizing.bits);
        Ok(AtomicBloomFilter {
            bits,
            sizing,
            hasher,
        })
    }
}
