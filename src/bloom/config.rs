//! The one configuration every Bloom filter of the crate is built from, and the one builder
//! that sets it. A structure adds its own options as the builder's `O` parameter and a `build`
//! for `BloomBuilder<ItsOptions, H>`; the shared setters and the sizing come for free.

use crate::hash::{ItemHasher, StableHasher};
use crate::sizing::{BlockedSizing, blocked};
use crate::{Error, Layout};

/// What every Bloom filter of the crate is sized and hashed by: the capacity, the target
/// false-positive rate at capacity, the [`Layout`] and the hasher.
///
/// Made by a [`BloomBuilder`] (`AtomicBloomFilter::builder(capacity)`, ...), which checks
/// nothing until `build()`: [`sizing`](Self::sizing) is where every parameter is checked,
/// once, for every structure.
#[derive(Clone, Debug)]
pub struct BloomConfig<H = StableHasher> {
    capacity: u64,
    fpr: f64,
    layout: Layout,
    hasher: H,
}

impl BloomConfig {
    /// The defaults: `fpr` 0.01, [`Layout::Word`], [`StableHasher::new`].
    fn new(capacity: u64) -> Self {
        Self {
            capacity,
            fpr: 0.01,
            layout: Layout::default(),
            hasher: StableHasher::new(),
        }
    }
}

impl<H> BloomConfig<H> {
    /// The number of distinct items to size for.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// The false-positive rate to meet at capacity.
    pub fn fpr(&self) -> f64 {
        self.fpr
    }

    /// The block layout.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// The hasher.
    pub fn hasher(&self) -> &H {
        &self.hasher
    }

    /// The size of the filter this configuration builds: [`sizing::blocked`](crate::sizing::blocked)
    /// of its capacity, fpr and layout.
    ///
    /// # Errors
    ///
    /// As [`sizing::blocked`](crate::sizing::blocked).
    ///
    /// # Examples
    ///
    /// ```
    /// use seen::AtomicBloomFilter;
    /// let builder = AtomicBloomFilter::builder(1_000_000).fpr(0.001);
    /// let sizing = builder.config().sizing()?;
    /// assert_eq!(builder.build()?.memory_bytes(), sizing.bytes());
    /// # Ok::<(), seen::Error>(())
    /// ```
    pub fn sizing(&self) -> Result<BlockedSizing, Error> {
        blocked(self.capacity, self.fpr, self.layout)
    }
}

/// Builds a Bloom filter: the shared [`BloomConfig`] plus the structure's own options `O`
/// ([`AtomicOptions`] or [`SemiOptions`]). Made by `AtomicBloomFilter::builder(capacity)` or
/// `SemiConcurrentBloomFilter::builder(capacity)`; every parameter but the capacity has a
/// default, so nothing is missing at `build()`.
///
/// # Examples
///
/// ```
/// use seen::{AtomicBloomFilter, Layout, SemiConcurrentBloomFilter};
///
/// let atomic = AtomicBloomFilter::builder(1_000_000)
///     .fpr(0.001)
///     .layout(Layout::Line)
///     .hasher(std::hash::RandomState::new())
///     .build()?;
/// assert_eq!((atomic.layout(), atomic.fpr()), (Layout::Line, 0.001));
///
/// let semi = SemiConcurrentBloomFilter::builder(1_000_000)
///     .fpr(0.001)
///     .insertions_before_compact(4096)
///     .build()?;
/// assert_eq!(semi.insertions_before_compact(), 4096);
/// # Ok::<(), seen::Error>(())
/// ```
#[derive(Clone, Debug)]
#[must_use = "a builder does nothing until `build()`"]
pub struct BloomBuilder<O, H = StableHasher> {
    config: BloomConfig<H>,
    options: O,
}

impl<O> BloomBuilder<O> {
    /// A builder with the default configuration and options.
    pub(crate) fn new(capacity: u64, options: O) -> Self {
        Self {
            config: BloomConfig::new(capacity),
            options,
        }
    }
}

impl<O, H> BloomBuilder<O, H> {
    /// The false-positive rate to meet at capacity (default 0.01), in (0, 1).
    pub fn fpr(mut self, fpr: f64) -> Self {
        self.config.fpr = fpr;
        self
    }

    /// The block layout (default [`Layout::Word`]).
    pub fn layout(mut self, layout: Layout) -> Self {
        self.config.layout = layout;
        self
    }

    /// The hasher: a [`StableHasher`] with another seed, or any [`std::hash::BuildHasher`].
    pub fn hasher<H2: ItemHasher>(self, hasher: H2) -> BloomBuilder<O, H2> {
        let BloomConfig {
            capacity,
            fpr,
            layout,
            ..
        } = self.config;
        BloomBuilder {
            config: BloomConfig {
                capacity,
                fpr,
                layout,
                hasher,
            },
            options: self.options,
        }
    }

    /// The configuration so far.
    pub fn config(&self) -> &BloomConfig<H> {
        &self.config
    }

    /// The structure's own options so far.
    pub fn options(&self) -> &O {
        &self.options
    }

    /// The configuration, its sizing (every parameter checked) and the options.
    pub(crate) fn into_parts(self) -> Result<(BlockedSizing, H, O), Error> {
        let sizing = self.config.sizing()?;
        Ok((sizing, self.config.hasher, self.options))
    }

    /// The hasher and the options, unchecked (for a structure that sizes itself).
    pub(crate) fn into_hasher_and_options(self) -> (H, O) {
        (self.config.hasher, self.options)
    }

    /// The same configuration with options of another type (a setter that changes a type
    /// parameter of the options, such as the windowed filter's clock).
    pub(crate) fn map_options<O2>(self, f: impl FnOnce(O) -> O2) -> BloomBuilder<O2, H> {
        BloomBuilder {
            config: self.config,
            options: f(self.options),
        }
    }

    /// Mutable access to the options, for the structures' own setters.
    pub(crate) fn options_mut(&mut self) -> &mut O {
        &mut self.options
    }
}

/// The [`AtomicBloomFilter`](crate::AtomicBloomFilter)'s options: none beyond the shared
/// [`BloomConfig`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct AtomicOptions {}

/// The [`SemiConcurrentBloomFilter`](crate::SemiConcurrentBloomFilter)'s options: when it
/// compacts and how large its copy-on-write segments are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SemiOptions {
    pub(crate) insertions_before_compact: usize,
    pub(crate) segment_bytes: usize,
}

impl SemiOptions {
    /// Compact when this many hashes are pending.
    pub fn insertions_before_compact(&self) -> usize {
        self.insertions_before_compact
    }

    /// The size of the copy-on-write segments, in bytes (rounded up to 64-byte lines).
    pub fn segment_bytes(&self) -> usize {
        self.segment_bytes
    }

    /// The segment size in 64-bit words: `segment_bytes` rounded up to a power of two of whole
    /// cache lines (a segment is then found with a shift; every caller, a build and a load,
    /// gets the same rounding).
    pub(crate) fn segment_words(&self) -> usize {
        self.segment_bytes.div_ceil(64).next_power_of_two() * crate::bits::LINE_WORDS
    }
}

impl Default for SemiOptions {
    /// 1024 insertions before a compaction, 4 KiB segments.
    fn default() -> Self {
        Self {
            insertions_before_compact: 1024,
            segment_bytes: 4096,
        }
    }
}
