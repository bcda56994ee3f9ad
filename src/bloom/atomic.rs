//! `AtomicBloomFilter`: a lock-free Bloom filter over an atomic bitset.

use core::fmt;
use core::hash::Hash;

use super::{AtomicOptions, BloomBuilder, Probe};
use crate::bits::AtomicBits;
use crate::hash::{Hash128, ItemHasher, StableHasher};
use crate::sizing::BlockedSizing;
use crate::sync::Ordering::Relaxed;
use crate::{DedupFilter, Error, Layout};

/// How many items `insert_all` hashes ahead of touching memory.
const BATCH: usize = 16;

/// The filter size from which `insert_all` reads a batch of words before writing them.
const PREFETCH_MIN_BYTES: u64 = 32 << 20;

/// A Bloom filter that any number of threads insert into and query at once, through `&self`.
///
/// - **No false negatives**, under any interleaving: once `insert(x)` has returned, every
///   `contains(x)` that *happens after* it (on the same thread, or on another thread after any
///   synchronization: a join, a channel, a mutex, a Release/Acquire flag) returns `true`.
/// - **False positives** at a rate of at most the target `fpr` after `capacity` distinct items;
///   past capacity the rate grows (see [`estimated_fpr`](Self::estimated_fpr)).
/// - **Racing inserts of one new item**: with [`Layout::Word`] (the default) exactly one of them
///   returns `true`, so `insert` is an exactly-once gate; with [`Layout::Line`] at least one does.
/// - `insert` is lock-free (at most one atomic read-modify-write per touched word, no retry loop:
///   in fact wait-free), `contains` is wait-free (plain loads). All bit accesses are `Relaxed`:
///   the filter does not synchronize other memory between threads ([why that is enough](crate::docs::concurrency#atomicbloomfilter)).
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
    bits: AtomicBits,
    sizing: BlockedSizing,
    hasher: H,
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
        match Probe::new(hash, &self.sizing) {
            Probe::Word { word, mask } => insert_word(self.bits.word(word), mask),
            Probe::Line { line, masks } => {
                let line = &self.bits.line(line).0;
                // Read the whole line first (branch-free), then write only the words that miss
                // bits: one mispredictable loop exit instead of one branch per word.
                let mut missing = 0u32;
                for (i, (word, &mask)) in line.iter().zip(&masks).enumerate() {
                    missing |= u32::from(word.load(Relaxed) & mask != mask) << i;
                }
                let mut new = false;
                while missing != 0 {
                    let i = missing.trailing_zeros() as usize;
                    new |= line[i].fetch_or(masks[i], Relaxed) & masks[i] != masks[i];
                    missing &= missing - 1;
                }
                new
            }
        }
    }

    /// [`contains`](Self::contains) of an already computed hash.
    #[inline]
    pub fn contains_hash(&self, hash: Hash128) -> bool {
        match Probe::new(hash, &self.sizing) {
            Probe::Word { word, mask } => self.bits.word(word).load(Relaxed) & mask == mask,
            Probe::Line { line, masks } => {
                let line = &self.bits.line(line).0;
                let mut all = true;
                for (word, &mask) in line.iter().zip(&masks) {
                    all &= word.load(Relaxed) & mask == mask;
                }
                all
            }
        }
    }

    /// Inserts every item; returns how many were new (as [`insert`](Self::insert) would count
    /// them, one by one, in order).
    ///
    /// On a filter larger than a typical last-level cache (32 MiB) it hashes items in groups of
    /// 16 and reads their words before writing any, so the cache misses overlap instead of
    /// queueing behind each atomic write ([measured](crate::docs::benchmarks#reading-it)). On a
    /// smaller filter that extra pass costs more than it saves, and this is the plain loop.
    ///
    /// # Examples
    ///
    /// ```
    /// let filter = seen::AtomicBloomFilter::with_capacity(1000, 0.01)?;
    /// assert_eq!(filter.insert_all(&[1u64, 2, 3, 2]), 3);
    /// assert_eq!(filter.contains_all(&[1u64, 2, 3, 4]), 3); // 4 is a false positive w.p. ~1%
    /// # Ok::<(), seen::Error>(())
    /// ```
    pub fn insert_all<'a, T, I>(&self, items: I) -> usize
    where
        T: Hash + ?Sized + 'a,
        I: IntoIterator<Item = &'a T>,
    {
        if self.sizing.layout != Layout::Word || self.memory_bytes() < PREFETCH_MIN_BYTES {
            return items.into_iter().filter(|item| self.insert(*item)).count();
        }
        let mut new = 0;
        self.for_each_batch(items, |hashes| {
            new += self.insert_batch(hashes);
        });
        new
    }

    /// How many of `items` are possibly in the filter (as [`contains`](Self::contains)). A loop:
    /// lookups have no atomic write between them, so the processor already overlaps their misses.
    pub fn contains_all<'a, T, I>(&self, items: I) -> usize
    where
        T: Hash + ?Sized + 'a,
        I: IntoIterator<Item = &'a T>,
    {
        items
            .into_iter()
            .filter(|item| self.contains(*item))
            .count()
    }

    /// Hashes `items` in groups of [`BATCH`] and hands each group to `f`.
    #[inline]
    fn for_each_batch<'a, T, I>(&self, items: I, mut f: impl FnMut(&[Hash128]))
    where
        T: Hash + ?Sized + 'a,
        I: IntoIterator<Item = &'a T>,
    {
        let mut hashes = [Hash128 { h1: 0, h2: 0 }; BATCH];
        let mut len = 0;
        for item in items {
            hashes[len] = self.hasher.hash_item(item);
            len += 1;
            if len == BATCH {
                f(&hashes);
                len = 0;
            }
        }
        f(&hashes[..len]);
    }

    /// Inserts a group of hashes: first a plain load of every target word (these overlap, and
    /// double as prefetches), then the writes, skipping words that already held all the bits.
    #[inline]
    fn insert_batch(&self, hashes: &[Hash128]) -> usize {
        let mut targets = [(0usize, 0u64, 0u64); BATCH];
        for (t, &h) in targets.iter_mut().zip(hashes) {
            // Only called for the word layout.
            if let Probe::Word { word, mask } = Probe::new(h, &self.sizing) {
                *t = (word, mask, self.bits.word(word).load(Relaxed));
            }
        }
        let mut new = 0;
        for &(block, mask, seen) in &targets[..hashes.len()] {
            // Bits are never cleared through `&self`, so a stale load that shows all of them set
            // is still right; one that shows a bit missing is settled by the RMW.
            if seen & mask != mask {
                let previous = self.bits.word(block).fetch_or(mask, Relaxed);
                new += usize::from(previous & mask != mask);
            }
        }
        new
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
    /// filter.insert_all(&(0..50_000u64).collect::<Vec<_>>());
    /// let n = filter.estimated_len();
    /// assert!((49_000..51_000).contains(&n), "{n}");
    ///
    /// // A tiny filter filled far past its capacity saturates: the sentinel.
    /// let tiny = seen::AtomicBloomFilter::with_capacity(1, 0.1)?;
    /// tiny.insert_all(&(0..100_000u64).collect::<Vec<_>>());
    /// assert_eq!(tiny.estimated_len(), u64::MAX);
    /// assert_eq!(tiny.estimated_fpr(), 1.0);
    /// # Ok::<(), seen::Error>(())
    /// ```
    pub fn estimated_len(&self) -> u64 {
        let m = self.bit_len() as f64;
        let set = self.bits.count_ones() as f64;
        if set >= m {
            return u64::MAX;
        }
        // The expected fraction of a block's bits one item sets.
        let per_item =
            crate::sizing::per_item_fill(f64::from(self.sizing.hashes), self.sizing.layout);
        (-(self.sizing.blocks as f64) * (-set / m).ln_1p() / per_item).round() as u64
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
    /// filter.insert_all(&(0..100_000u64).collect::<Vec<_>>());
    /// assert!(filter.estimated_fpr() < 0.01);
    /// # Ok::<(), seen::Error>(())
    /// ```
    pub fn estimated_fpr(&self) -> f64 {
        let k = self.sizing.hashes as i32;
        let block = self.sizing.layout.block_bits();
        let table: Vec<f64> = (0..=block)
            .map(|s| (f64::from(s) / f64::from(block)).powi(k))
            .collect();
        let words_per_block = (block / 64) as usize;
        let mut sum = 0.0;
        let mut set = 0u32;
        for (i, word) in self.bits.iter_words().enumerate() {
            set += word.count_ones();
            if (i + 1) % words_per_block == 0 {
                sum += table[set as usize];
                set = 0;
            }
        }
        sum / self.sizing.blocks as f64
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

    /// A deliberately broken insert for the loom models: a load and a separate store where one
    /// read-modify-write is needed. Loom must catch two threads both told "new".
    #[cfg(all(test, seen_loom))]
    pub(crate) fn racy_insert<T: Hash + ?Sized>(&self, item: &T) -> bool {
        let Probe::Word { word, mask } = Probe::new(self.hasher.hash_item(item), &self.sizing)
        else {
            unreachable!("the twin models the word layout");
        };
        let word = self.bits.word(word);
        let seen = word.load(Relaxed);
        word.store(seen | mask, Relaxed);
        seen & mask != mask
    }
}

/// Sets `mask` in `word`; `true` if some bit of it was unset before. Reads first, so an item that
/// is already present costs a load and no write (no cache-line ownership transfer).
#[inline]
fn insert_word(word: &crate::sync::AtomicU64, mask: u64) -> bool {
    if word.load(Relaxed) & mask == mask {
        return false;
    }
    word.fetch_or(mask, Relaxed) & mask != mask
}

impl<T: Hash + ?Sized, H: ItemHasher> DedupFilter<T> for AtomicBloomFilter<H> {
    #[inline]
    fn insert(&self, item: &T) -> bool {
        AtomicBloomFilter::insert(self, item)
    }

    #[inline]
    fn contains(&self, item: &T) -> bool {
        AtomicBloomFilter::contains(self, item)
    }
}

impl<'a, T: Hash + ?Sized + 'a, H: ItemHasher> Extend<&'a T> for AtomicBloomFilter<H> {
    /// Inserts every item, as [`insert_all`](AtomicBloomFilter::insert_all).
    fn extend<I: IntoIterator<Item = &'a T>>(&mut self, items: I) {
        self.insert_all(items);
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
