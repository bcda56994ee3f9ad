//! [`MapBuilder`] and [`MapSize`]: how both overwrite maps are built.

use core::fmt;
use core::marker::PhantomData;

use crate::hash::{ItemHasher, StableHasher};
use crate::sizing::overwrite_buckets;
use crate::{Error, ExactOverwriteMap, OverwriteMap};

/// How many buckets an overwrite map gets: a count, or a memory window to size for.
///
/// A plain `u64` converts into [`MapSize::Buckets`], so `OverwriteMap::builder(1_000)` is a map
/// of 1,000 buckets.
///
/// # Examples
///
/// ```
/// use seen::OverwriteMap;
/// use seen::builder::MapSize;
/// let by_count = OverwriteMap::builder(34_168_399).build()?;
/// let by_window = OverwriteMap::builder(MapSize::Window {
///     later_insertions: 3_600_000,
///     remember_probability: 0.9,
/// })
/// .build()?;
/// assert_eq!(by_count.buckets(), by_window.buckets());
/// # Ok::<(), seen::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum MapSize {
    /// Exactly this many buckets (no rounding: slots are chosen by multiply-shift).
    Buckets(u64),
    /// The fewest buckets that still remember an item after `later_insertions` insertions of
    /// other items with probability at least `remember_probability`:
    /// [`overwrite_buckets`]`(later_insertions, remember_probability)`.
    ///
    /// `later_insertions` counts every insert of another item, redeliveries included (see "What
    /// counts as a later insertion" on [`OverwriteMap`]).
    Window {
        /// The number of insertions of other items the map must survive.
        later_insertions: u64,
        /// The probability, strictly between 0 and 1, of still remembering the item after them.
        remember_probability: f64,
    },
}

impl MapSize {
    /// The bucket count this size asks for (what [`MapBuilder::build`] allocates, before the
    /// bucket-count checks): for code that sizes a map kept elsewhere the way the local maps
    /// are sized.
    ///
    /// # Errors
    ///
    /// As [`overwrite_buckets`] for a [`MapSize::Window`].
    ///
    /// # Examples
    ///
    /// ```
    /// use seen::builder::MapSize;
    /// assert_eq!(MapSize::Buckets(1_000).buckets()?, 1_000);
    /// let window = MapSize::Window { later_insertions: 3_600_000, remember_probability: 0.9 };
    /// assert_eq!(window.buckets()?, 34_168_399);
    /// # Ok::<(), seen::Error>(())
    /// ```
    pub fn buckets(self) -> Result<u64, Error> {
        match self {
            Self::Buckets(buckets) => Ok(buckets),
            Self::Window {
                later_insertions,
                remember_probability,
            } => overwrite_buckets(later_insertions, remember_probability),
        }
    }
}

impl From<u64> for MapSize {
    /// [`MapSize::Buckets`].
    fn from(buckets: u64) -> Self {
        Self::Buckets(buckets)
    }
}

/// Builds an [`OverwriteMap`] or an [`ExactOverwriteMap`]: see [`OverwriteMap::builder`] and
/// [`ExactOverwriteMap::builder`].
///
/// `M` names the map it builds (`MapBuilder<OverwriteMap, H>` builds an `OverwriteMap<H>`,
/// `MapBuilder<ExactOverwriteMap, H>` an `ExactOverwriteMap<H>`); `H` is the hasher. The size is
/// given up front, so [`build`](MapBuilder::build) fails only on the size's value or on the
/// allocation, never for a missing parameter.
///
/// # Examples
///
/// ```
/// use seen::ExactOverwriteMap;
/// use seen::hash::StableHasher;
/// let map = ExactOverwriteMap::builder(1_000)
///     .hasher(StableHasher::with_seed(7))
///     .build()?;
/// assert_eq!(map.hasher().seed(), 7);
/// assert!(map.insert("a"));
/// # Ok::<(), seen::Error>(())
/// ```
#[must_use = "a builder does nothing until `build` is called"]
pub struct MapBuilder<M, H = StableHasher> {
    size: MapSize,
    hasher: H,
    map: PhantomData<fn() -> M>,
}

impl<M> MapBuilder<M> {
    /// A builder of the given size with the default [`StableHasher`].
    pub(super) fn new(size: MapSize) -> Self {
        Self {
            size,
            hasher: StableHasher::new(),
            map: PhantomData,
        }
    }
}

impl<M, H> MapBuilder<M, H> {
    /// The hasher: a [`StableHasher`] with another seed, or any [`std::hash::BuildHasher`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::hash::RandomState;
    /// let map = seen::OverwriteMap::builder(1_000)
    ///     .hasher(RandomState::new())
    ///     .build()?;
    /// assert!(map.insert(&42u64) && map.contains(&42u64));
    /// # Ok::<(), seen::Error>(())
    /// ```
    pub fn hasher<H2: ItemHasher>(self, hasher: H2) -> MapBuilder<M, H2> {
        MapBuilder {
            size: self.size,
            hasher,
            map: PhantomData,
        }
    }
}

impl<H: ItemHasher> MapBuilder<OverwriteMap, H> {
    /// Sizes and allocates the map.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidProbability`] for a [`MapSize::Window`] probability outside (0, 1),
    /// [`Error::TooLarge`] for a window no `u64` bucket count meets, and the errors of
    /// [`OverwriteMap::with_buckets`].
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(seen::OverwriteMap::builder(1_000).build().is_ok());
    /// assert!(seen::OverwriteMap::builder(0).build().is_err());
    /// ```
    pub fn build(self) -> Result<OverwriteMap<H>, Error> {
        OverwriteMap::allocate(self.size.buckets()?, self.hasher)
    }
}

impl<H: ItemHasher> MapBuilder<ExactOverwriteMap, H> {
    /// Sizes and allocates the map.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidProbability`] for a [`MapSize::Window`] probability outside (0, 1),
    /// [`Error::TooLarge`] for a window no `u64` bucket count meets, and the errors of
    /// [`ExactOverwriteMap::with_buckets`].
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(seen::ExactOverwriteMap::builder(1_000).build().is_ok());
    /// assert!(seen::ExactOverwriteMap::builder(0).build().is_err());
    /// ```
    pub fn build(self) -> Result<ExactOverwriteMap<H>, Error> {
        ExactOverwriteMap::allocate(self.size.buckets()?, self.hasher)
    }
}

impl<M, H: Clone> Clone for MapBuilder<M, H> {
    fn clone(&self) -> Self {
        Self {
            size: self.size,
            hasher: self.hasher.clone(),
            map: PhantomData,
        }
    }
}

impl<M, H> fmt::Debug for MapBuilder<M, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MapBuilder")
            .field("size", &self.size)
            .finish_non_exhaustive()
    }
}
