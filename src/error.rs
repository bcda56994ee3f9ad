//! The crate's one error type.

use core::fmt;

/// Why a constructor or a sizing function refused its input.
///
/// Every fallible public function of the crate returns this. It is `#[non_exhaustive]`: new
/// reasons (malformed persisted data, say) will be added without a breaking change.
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
    /// A builder was asked to build without a required parameter (its name).
    MissingParameter(&'static str),
    /// A parameter out of its range (what it must be).
    InvalidParameter(&'static str),
    /// The allocator could not provide the memory (the number of bytes asked for).
    AllocationFailed {
        /// The size of the failed allocation.
        bytes: u64,
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
            Self::MissingParameter(name) => write!(f, "the builder needs a {name}"),
            Self::InvalidParameter(what) => write!(f, "invalid parameter: {what}"),
            Self::AllocationFailed { bytes } => {
                write!(f, "could not allocate {bytes} bytes")
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
