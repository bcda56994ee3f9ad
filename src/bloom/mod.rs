//! The Bloom filters: one configuration and builder ([`config`]), one probe ([`probe`]), and the
//! structures built from them. Sized by [`crate::sizing::blocked`]; laid out by
//! [`Layout`](crate::Layout).
//!
//! A new Bloom structure goes here, as a file (or a folder, as `windowed/` and `growing/` are):
//! it takes a [`BloomBuilder`] with its own options type, and reads and writes bits through
//! [`Probe`] ([the checklist](crate::docs::design#where-a-new-structure-goes)).

/// Whether a loom model runs the current operation as the broken twin `$name` (a variant of the
/// enum in `loom-tests/mod.rs`). The literal `false` in every build but the loom models', so
/// that no twin selector is compiled into the crate.
#[cfg(all(test, seen_loom))]
macro_rules! twin {
    ($name:ident) => {
        crate::loom_tests::selected(crate::loom_tests::Twin::$name)
    };
}

/// Whether a loom model runs the current operation as a broken twin: never, outside them.
#[cfg(not(all(test, seen_loom)))]
macro_rules! twin {
    ($name:ident) => {
        false
    };
}

mod atomic;
pub(crate) mod config;
mod file;
mod frozen;
mod growing;
mod info;
mod probe;
mod semi;
mod windowed;

pub use atomic::AtomicBloomFilter;
pub use config::{AtomicOptions, BloomBuilder, BloomConfig, SemiOptions};
pub use frozen::FrozenBloomFilter;
pub use growing::{GrowingBloomFilter, GrowingOptions};
pub use info::{BloomInfo, LayerInfo};
pub use probe::BlockBits;
pub(crate) use probe::Probe;
pub use semi::{CompactionStats, SemiConcurrentBloomFilter};
pub use windowed::{Rotation, WindowOptions, WindowedBloomFilter};

#[cfg(all(test, not(seen_loom)))]
mod tests {
    use crate::sizing::{BloomSizing, blocked};
    use crate::{AtomicBloomFilter, Error, Layout, SemiConcurrentBloomFilter};

    #[test]
    fn filters_are_built_from_the_blocked_sizing_and_blocking_costs_bits() {
        for fpr in [0.1, 0.01, 0.001] {
            let classic = BloomSizing::optimal(1_000_000, fpr).unwrap();
            let mut bits = [0; 2];
            for (i, layout) in [Layout::Word, Layout::Line].into_iter().enumerate() {
                let s = blocked(1_000_000, fpr, layout).unwrap();
                let f = AtomicBloomFilter::builder(1_000_000)
                    .fpr(fpr)
                    .layout(layout)
                    .build()
                    .unwrap();
                assert_eq!(f.sizing(), s);
                assert_eq!(
                    (f.bit_len(), f.hashes(), f.layout()),
                    (s.bits, s.hashes, layout)
                );
                assert_eq!(s.blocks * u64::from(layout.block_bits()), s.bits);
                assert_eq!(s.lines() as u64 * 512, s.bits);
                assert!(s.expected_fpr <= 0.97 * fpr, "{layout:?} {fpr}");
                assert!(s.bits > classic.bits, "{layout:?} {fpr}");
                bits[i] = s.bits;
            }
            assert!(bits[0] >= bits[1], "{fpr}: the word layout costs more");
        }
    }

    #[test]
    fn builders_reject_what_the_sizing_rejects() {
        assert_eq!(
            AtomicBloomFilter::with_capacity(0, 0.01).unwrap_err(),
            Error::ZeroCapacity
        );
        assert!(matches!(
            SemiConcurrentBloomFilter::builder(10)
                .fpr(1.5)
                .layout(Layout::Line)
                .build(),
            Err(Error::InvalidFpr(_))
        ));
        assert!(matches!(
            AtomicBloomFilter::with_capacity(10, 1e-6),
            Err(Error::FprBelowLayoutLimit {
                use_layout: Some(Layout::Line),
                ..
            })
        ));
        assert!(matches!(
            AtomicBloomFilter::with_capacity(u64::MAX / 4, 0.01),
            Err(Error::TooLarge { .. })
        ));
    }
}
