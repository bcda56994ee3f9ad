//! The builders and the configuration they share.
//!
//! Every Bloom filter is built from one [`BloomConfig`] (capacity, false-positive rate,
//! [`Layout`](crate::Layout), hasher) through one [`BloomBuilder`], whose second parameter holds
//! the structure's own options ([`AtomicOptions`], [`SemiOptions`], [`GrowingOptions`],
//! [`WindowOptions`] with its [`Rotation`] schedule). The capacity is the
//! builder's argument and everything else has a default, so `build()` never reports a missing
//! parameter.
//!
//! Both overwrite maps are built through one [`MapBuilder`], sized up front by a [`MapSize`]:
//! a bucket count, or a window to remember items across.
//!
//! ```
//! use seen::{AtomicBloomFilter, Layout};
//! use seen::builder::{AtomicOptions, BloomBuilder};
//!
//! let builder: BloomBuilder<AtomicOptions> = AtomicBloomFilter::builder(10_000).layout(Layout::Line);
//! assert_eq!(builder.config().capacity(), 10_000);
//! let filter = builder.build()?;
//! assert!(filter.insert("a"));
//! # Ok::<(), seen::Error>(())
//! ```

pub use crate::bloom::{
    AtomicOptions, BloomBuilder, BloomConfig, GrowingOptions, Rotation, SemiOptions, WindowOptions,
};
pub use crate::overwrite::{MapBuilder, MapSize};
