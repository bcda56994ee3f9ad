//! The crate's one error type.

use core::fmt;

use crate::Layout;

/// Why a constructor or a sizing function refused its input.
///
/// Every fallible public function of the crate returns this. It is `#[non_exhaustive]`: new
/// reasons (malformed persisted data, say) can be added without a breaking change.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Error {
    /// A false-positive rate outside the open interval (0, 1), or NaN.
    InvalidFpr(f64),
    /// A probability outside the open interval (0, 1), or NaN.
    InvalidProbability(f64),
    /// A capacity of zero items.
    ZeroCapacity,
    /// A bucket count of zero.
    ZeroBuckets,
    /// A parameter out of its range (what it must be).
    InvalidParameter(&'static str),
    /// The allocator could not provide the memory (the number of bytes asked for).
    AllocationFailed {
        /// The size of the failed allocation.
        bytes: u64,
    },
    /// A false-positive rate below what a Bloom filter layout reaches economically: below
    /// `min_fpr` the layout would need more than 4 times the bits per item of a classic Bloom
    /// filter ([the limits](crate::docs::sizing#limits-where-a-layout-stops)). The limits lie far above the rates that the 128-bit
    /// hash cannot deliver (about `2^-64` per item in the query's block), so this also refuses
    /// those.
    FprBelowLayoutLimit {
        /// The layout asked for.
        layout: Layout,
        /// The rate asked for.
        fpr: f64,
        /// The smallest rate this layout accepts.
        min_fpr: f64,
        /// A layout that accepts `fpr`, if one does.
        use_layout: Option<Layout>,
    },
    /// The requested structure is larger than a `u64` can count or this machine can address.
    TooLarge {
        /// What was being computed (`"bits"`, `"buckets"`, `"insertions"`).
        what: &'static str,
        /// The size asked for, as computed (it may exceed every integer type).
        requested: f64,
        /// The largest value allowed.
        limit: u64,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InvalidFpr(p) => write!(
                f,
                "false-positive rate must be strictly between 0 and 1, got {p}"
            ),
            Self::InvalidProbability(p) => {
                write!(f, "probability must be strictly between 0 and 1, got {p}")
            }
            Self::ZeroCapacity => f.write_str("capacity must be at least 1 item"),
            Self::ZeroBuckets => f.write_str("bucket count must be at least 1"),
            Self::InvalidParameter(what) => write!(f, "invalid parameter: {what}"),
            Self::AllocationFailed { bytes } => {
                write!(f, "could not allocate {bytes} bytes")
            }
            Self::FprBelowLayoutLimit {
                layout,
                fpr,
                min_fpr,
                use_layout,
            } => {
                write!(
                    f,
                    "false-positive rate {fpr:e} is below the {layout:?} layout's limit of \
                     {min_fpr:e} (below it the layout needs more than 4 times the memory of a \
                     classic Bloom filter)"
                )?;
                match use_layout {
                    Some(other) => write!(f, "; the {other:?} layout reaches it"),
                    None => f.write_str("; no layout of this crate reaches it"),
                }
            }
            Self::TooLarge {
                what,
                requested,
                limit,
            } => write!(
                f,
                "{what} needed ({requested:.4e}) exceed the limit of {limit} on this machine"
            ),
        }
    }
}

impl std::error::Error for Error {}
