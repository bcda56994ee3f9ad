//! The crate's one error type, [`Error`], and [`Corruption`], what is wrong with a file that
//! is not a well-formed file of this crate.

use core::fmt;
use std::sync::Arc;

use crate::Layout;
use crate::hash::HasherIdentity;
use crate::numbers::{Given, Rate};

/// Why an operation of the crate failed: every fallible public function returns this.
///
/// The variants, by what the caller can do about them:
///
/// - **Change the parameters** (constructors, builders' `build`, the [`sizing`](crate::sizing)
///   functions): [`InvalidFpr`](Self::InvalidFpr),
///   [`InvalidProbability`](Self::InvalidProbability), [`ZeroCapacity`](Self::ZeroCapacity),
///   [`ZeroBuckets`](Self::ZeroBuckets), [`InvalidParameter`](Self::InvalidParameter),
///   [`FprBelowLayoutLimit`](Self::FprBelowLayoutLimit) and
///   [`GrowingFprBelowLayoutLimit`](Self::GrowingFprBelowLayoutLimit) (both name the layout
///   that reaches the rate, if one does), [`TooLarge`](Self::TooLarge). Nothing was built.
/// - **Ask for less memory, or try again later**: [`AllocationFailed`](Self::AllocationFailed),
///   from a constructor, a load, or a growing filter's insert (the item was not inserted; the
///   next insert of a new item tries the growth again).
/// - **Stop feeding a full filter**: a
///   [`GrowingBloomFilter`](crate::GrowingBloomFilter)'s insert refuses a new item with
///   [`Full`](Self::Full) (built with `scaling(false)`), or, at the end of its growth
///   schedule, with [`GrowingFprBelowLayoutLimit`](Self::GrowingFprBelowLayoutLimit) or
///   [`TooLarge`](Self::TooLarge). The item was not inserted; the items already in the filter
///   are still answered.
/// - **Fix the file or the way it is read** (`save`, `load`, `write_to`, `read_from`,
///   `import_chunks`, `serde`): [`Io`](Self::Io) (the operating system's reason),
///   [`Corrupt`](Self::Corrupt) (damaged, truncated, or not a file of this crate),
///   [`UnsupportedVersion`](Self::UnsupportedVersion) (upgrade the crate),
///   [`WrongStructure`](Self::WrongStructure) (load it as the type that saved it),
///   [`HasherMismatch`](Self::HasherMismatch) (load it with the hasher that wrote it),
///   [`RetiredHasher`](Self::RetiredHasher) (convert or rebuild it, as the variant says).
///   Nothing was built from the input.
/// - **Stay inside the filter**: [`WordsOutOfRange`](Self::WordsOutOfRange), from
///   [`read_words`](crate::AtomicBloomFilter::read_words) and
///   [`union_words`](crate::AtomicBloomFilter::union_words); nothing was read or changed.
/// - **Merge only filters built alike**: [`Incompatible`](Self::Incompatible), from
///   [`union`](crate::AtomicBloomFilter::union) and
///   [`intersect`](crate::AtomicBloomFilter::intersect); the filter is unchanged.
///
/// No public function panics on bad input: it returns one of these. The enum is
/// `#[non_exhaustive]`, so new reasons can be added without a breaking change: match with a
/// `_` arm.
///
/// # Examples
///
/// ```
/// use seen::{AtomicBloomFilter, Error};
/// assert_eq!(AtomicBloomFilter::with_capacity(0, 0.01).unwrap_err(), Error::ZeroCapacity);
/// assert!(matches!(AtomicBloomFilter::load("/nonexistent/seen"), Err(Error::Io { .. })));
/// let refused = AtomicBloomFilter::read_from(&b"not a filter"[..]).unwrap_err();
/// assert!(matches!(refused, Error::Corrupt(_)), "{refused}");
/// ```
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
        /// The smallest rate this layout accepts in this structure: the layout's own limit, or,
        /// for a [`WindowedBloomFilter`](crate::WindowedBloomFilter), the lowest rate of a
        /// window of its generations.
        min_fpr: f64,
        /// A layout that accepts `fpr`, if one does.
        use_layout: Option<Layout>,
    },
    /// A layer of a [`GrowingBloomFilter`](crate::GrowingBloomFilter) would get a
    /// false-positive rate below its layout's limit (the limit of
    /// [`FprBelowLayoutLimit`](Self::FprBelowLayoutLimit)). Layer `i` of a filter with target
    /// `fpr` and tightening ratio `t` is sized for `fpr · (1 - t) · t^i`, so that the layers
    /// together stay under `fpr`.
    ///
    /// For layer 0 (from a constructor) the filter cannot be built: the lowest target it takes
    /// with this layout and ratio is [`lowest_growing_fpr`](Self::lowest_growing_fpr). For a
    /// later layer (from an insert) the schedule ends there: the item was not inserted, and the
    /// items already in the filter are still answered.
    GrowingFprBelowLayoutLimit {
        /// The layout asked for.
        layout: Layout,
        /// The target rate of the whole filter, as asked.
        fpr: f64,
        /// The tightening ratio, as asked.
        tightening: f64,
        /// The layer that cannot be sized: 0 for the first.
        layer: u32,
        /// The smallest rate this layout accepts.
        min_fpr: f64,
        /// A layout that accepts the layer's rate, if one does.
        use_layout: Option<Layout>,
    },
    /// Reading or writing a file or stream failed (the operating system's reason; for
    /// [`save`](crate::AtomicBloomFilter::save) and [`load`](crate::AtomicBloomFilter::load),
    /// the message names the path). The [`std::io::Error`] itself is `source`, also returned
    /// by [`std::error::Error::source`] and [`Error::io_error`].
    Io {
        /// The kind of the underlying [`std::io::Error`] (`source.kind()`).
        kind: std::io::ErrorKind,
        /// What failed, and why: the display of this error (it ends with the `source`'s own
        /// message).
        message: String,
        /// The operating system's error, whole.
        source: IoSource,
    },
    /// The input is not a well-formed file of this crate: what is wrong with it. Nothing was
    /// built from it.
    Corrupt(Corruption),
    /// The file was written by a newer version of the format than this crate reads.
    UnsupportedVersion {
        /// The file's format version.
        found: u32,
        /// The newest version this crate reads.
        supported: u32,
    },
    /// The file holds another kind of structure (a map loaded as a Bloom filter, say).
    WrongStructure {
        /// What the caller asked to load.
        expected: &'static str,
        /// What the file holds.
        found: &'static str,
    },
    /// The hasher given to a load is not the one the file's items were placed with, or one of
    /// them does not name itself ([`ItemHasher::identity`](crate::hash::ItemHasher::identity)),
    /// so the crate cannot check. A wrong hasher would answer "never seen" for every item
    /// inserted before the save. If you know the hasher is the right one, load with
    /// `read_from_trusting_hasher`.
    HasherMismatch {
        /// The hasher named in the file (`None`: the writer's hasher did not name itself).
        file: Option<HasherIdentity>,
        /// The hasher given (`None`: it does not name itself).
        given: Option<HasherIdentity>,
    },
    /// The file was written with the crate's default hasher as it was before version 2 of its
    /// name (`"seen/xxh3-128"`, now `"seen/xxh3-128/2"`), which hashed a string or a byte
    /// string through its `Hash` impl's stream (a `str`'s `0xff` terminator, a slice's
    /// length), so that `"id"` and `b"id"` were two items. Its bits are still where the current
    /// default hasher looks for items inserted as integers or by hash (`hash_bytes` with
    /// `insert_hash`, as every state file of the `seen` command): such a file converts by
    /// loading it with `read_from_trusting_hasher(input, StableHasher::with_seed(seed))` (the
    /// seed is `file`'s) and saving it again. A structure of string or byte-string items must
    /// be rebuilt from its items.
    RetiredHasher {
        /// The hasher named in the file: `"seen/xxh3-128"` and the file's seed.
        file: HasherIdentity,
    },
    /// Two filters that cannot be merged ([`union`](crate::AtomicBloomFilter::union),
    /// [`intersect`](crate::AtomicBloomFilter::intersect)): the parameter in which they differ.
    /// Merging needs the same layout, blocks, `k` and hasher, or the merged bits would place
    /// the same item in two places.
    Incompatible {
        /// What differs: `"layout"`, `"blocks"`, `"hashes"` or `"hasher"`.
        what: &'static str,
    },
    /// [`read_words`](crate::AtomicBloomFilter::read_words) or
    /// [`union_words`](crate::AtomicBloomFilter::union_words) was given a range of words that
    /// passes the filter's last word. Nothing was read or changed.
    WordsOutOfRange {
        /// The first word asked for.
        first: u64,
        /// How many words were asked for.
        len: u64,
        /// How many words the filter has.
        words: u64,
    },
    /// A [`GrowingBloomFilter`](crate::GrowingBloomFilter) built with
    /// [`scaling(false)`](crate::builder::BloomBuilder::scaling) holds its capacity of new items: the
    /// item was not inserted (RedisBloom's `NONSCALING` filter is full). Items already in the
    /// filter are still answered.
    Full {
        /// The capacity the filter was built with.
        capacity: u64,
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

impl Error {
    /// For [`Error::GrowingFprBelowLayoutLimit`], the lowest target a growing filter of that
    /// layout and tightening ratio takes: the layout's limit over `1 - tightening` (its first
    /// layer gets `fpr · (1 - tightening)`). `None` for every other error.
    ///
    /// # Examples
    ///
    /// ```
    /// let e = seen::GrowingBloomFilter::with_capacity(1000, 1e-7).unwrap_err();
    /// assert!((e.lowest_growing_fpr().unwrap() - 3.2e-5).abs() < 1e-12);
    /// assert!(e.to_string().starts_with("false-positive rate 1e-7 is too low for a growing"));
    /// ```
    pub fn lowest_growing_fpr(&self) -> Option<f64> {
        match self {
            Self::GrowingFprBelowLayoutLimit {
                tightening,
                min_fpr,
                ..
            } => Some(min_fpr / (1.0 - tightening)),
            _ => None,
        }
    }

    /// For [`Error::Io`], the [`std::io::Error`] behind it (what the operating system said);
    /// `None` for every other error.
    ///
    /// # Examples
    ///
    /// ```
    /// let e = seen::AtomicBloomFilter::load("/nonexistent/seen").unwrap_err();
    /// assert_eq!(e.io_error().unwrap().kind(), std::io::ErrorKind::NotFound);
    /// assert!(std::error::Error::source(&e).is_some());
    /// ```
    pub fn io_error(&self) -> Option<&std::io::Error> {
        match self {
            Self::Io { source, .. } => Some(source.get()),
            _ => None,
        }
    }

    /// An [`Error::Io`] from a [`std::io::Error`].
    pub(crate) fn io(e: std::io::Error) -> Self {
        Self::from(e)
    }

    /// An [`Error::Io`] naming the path it happened at.
    pub(crate) fn io_at(path: &std::path::Path, what: &str, e: std::io::Error) -> Self {
        Self::Io {
            kind: e.kind(),
            message: format!("{what} {}: {e}", path.display()),
            source: IoSource::from(e),
        }
    }

    /// An [`Error::Io`] that the crate itself raises (no system call failed): `kind` and the
    /// whole message, which is also the source's.
    pub(crate) fn io_refused(kind: std::io::ErrorKind, message: String) -> Self {
        Self::Io {
            kind,
            source: IoSource::from(std::io::Error::new(kind, message.clone())),
            message,
        }
    }

    /// This error with `context` put before an [`Error::Io`]'s message (`{context}: {message}`);
    /// every other error as it is.
    pub(crate) fn io_prefixed(self, context: impl fmt::Display) -> Self {
        match self {
            Self::Io {
                kind,
                message,
                source,
            } => Self::Io {
                kind,
                message: format!("{context}: {message}"),
                source,
            },
            other => other,
        }
    }

    /// This error with `suffix` put after an [`Error::Io`]'s message; every other error as it
    /// is.
    pub(crate) fn io_suffixed(self, suffix: impl fmt::Display) -> Self {
        match self {
            Self::Io {
                kind,
                message,
                source,
            } => Self::Io {
                kind,
                message: format!("{message}{suffix}"),
                source,
            },
            other => other,
        }
    }
}

impl From<std::io::Error> for Error {
    /// An [`Error::Io`] whose message is the `io::Error`'s own.
    fn from(e: std::io::Error) -> Self {
        Self::Io {
            kind: e.kind(),
            message: e.to_string(),
            source: IoSource::from(e),
        }
    }
}

/// The [`std::io::Error`] behind an [`Error::Io`], held in an [`Arc`] so that [`Error`] stays
/// `Clone`. Two compare equal when their kinds and messages are (an `io::Error` has no
/// equality of its own).
///
/// # Examples
///
/// ```
/// use std::io;
/// let source = seen::IoSource::from(io::Error::other("disk on fire"));
/// assert_eq!(source.get().kind(), io::ErrorKind::Other);
/// assert_eq!(source, seen::IoSource::from(io::Error::other("disk on fire")));
/// ```
#[derive(Clone, Debug)]
pub struct IoSource(Arc<std::io::Error>);

impl IoSource {
    /// The `io::Error`.
    pub fn get(&self) -> &std::io::Error {
        &self.0
    }
}

impl From<std::io::Error> for IoSource {
    fn from(e: std::io::Error) -> Self {
        Self(Arc::new(e))
    }
}

impl PartialEq for IoSource {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
            || (self.0.kind() == other.0.kind() && self.0.to_string() == other.0.to_string())
    }
}

/// What is wrong with a file that is not a well-formed file of this crate
/// ([`Error::Corrupt`]). Every check is made before the structure is built, and allocations
/// follow what the input has delivered so far (at most about twice it; an exact map's table, 8
/// bytes per bucket, after its bitmap of one bit per bucket has arrived).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Corruption {
    /// The first bytes are not this crate's magic number: not a file of this crate (or one
    /// damaged by a text-mode transfer).
    NotASeenFile,
    /// The header's checksum does not match its bytes.
    HeaderChecksum,
    /// A header field is impossible or disagrees with another (which one).
    Header(&'static str),
    /// A chunk of the payload does not match its checksum (its index, from 0).
    ChunkChecksum {
        /// The chunk's index.
        chunk: u64,
    },
    /// The input ends before the file does.
    Truncated,
    /// Bytes follow the end of the file (a file loaded from a path must be exactly one file).
    TrailingBytes,
    /// `import_chunks`: the first piece does not begin with this crate's magic number, so it
    /// is not the start of a file: the pieces are out of order or the first one is missing
    /// (or they hold no file of this crate).
    NotTheFirstPiece,
}

impl fmt::Display for Corruption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotASeenFile => f.write_str("not a file of the seen crate (wrong magic number)"),
            Self::HeaderChecksum => f.write_str("the header fails its checksum"),
            Self::Header(what) => write!(f, "impossible header field: {what}"),
            Self::ChunkChecksum { chunk } => {
                write!(f, "payload chunk {chunk} fails its checksum")
            }
            Self::Truncated => f.write_str("the file is truncated"),
            Self::TrailingBytes => f.write_str("bytes follow the end of the file"),
            Self::NotTheFirstPiece => f.write_str(
                "the first piece is not the start of a file: the pieces are out of order or \
                 the first one is missing (or they hold no file of the seen crate)",
            ),
        }
    }
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
                    "false-positive rate {} is below {}, the lowest the {layout:?} layout \
                     reaches in this structure (below it the layout needs more than 4 times \
                     the memory of a classic Bloom filter)",
                    Given(*fpr),
                    Rate::plain(*min_fpr)
                )?;
                match use_layout {
                    Some(other) => write!(f, "; the {other:?} layout reaches it"),
                    None => f.write_str("; no layout of this crate reaches it"),
                }
            }
            Self::GrowingFprBelowLayoutLimit {
                layout,
                fpr,
                tightening,
                layer,
                min_fpr,
                use_layout,
            } => {
                let (p, t) = (Given(*fpr), Given(*tightening));
                let rate = Rate::plain(fpr * (1.0 - tightening) * tightening.powi(*layer as i32));
                let min = Rate::plain(*min_fpr);
                if *layer == 0 {
                    write!(
                        f,
                        "false-positive rate {p} is too low for a growing filter of the \
                         {layout:?} layout with tightening ratio {t}: its first layer gets \
                         {p} · (1 - {t}) = {rate}, below the layout's limit of {min}, so the \
                         lowest rate it takes is {}",
                        Rate::plain(min_fpr / (1.0 - tightening))
                    )?;
                    match use_layout {
                        Some(other) => write!(f, "; the {other:?} layout reaches {p}"),
                        None => f.write_str("; no layout of this crate reaches it"),
                    }
                } else {
                    write!(
                        f,
                        "the growing filter (false-positive rate {p}, tightening ratio {t}, \
                         {layout:?} layout) cannot add layer {layer}: it would get {p} · \
                         (1 - {t}) · {t}^{layer} = {rate}, below the layout's limit of {min}"
                    )?;
                    match use_layout {
                        Some(other) => write!(f, "; the {other:?} layout reaches further"),
                        None => Ok(()),
                    }
                }
            }
            Self::Io { message, .. } => f.write_str(message),
            Self::Corrupt(why) => write!(f, "corrupt file: {why}"),
            Self::UnsupportedVersion { found, supported } => write!(
                f,
                "file format version {found} is newer than this crate reads (up to {supported}): \
                 upgrade the crate"
            ),
            Self::WrongStructure { expected, found } => {
                write!(f, "expected {expected}, the file holds {found}")
            }
            Self::HasherMismatch { file, given } => match (file, given) {
                (Some(file), Some(given)) => write!(
                    f,
                    "the file's items were placed by hasher {file}, not by the given {given}"
                ),
                (None, _) => f.write_str(
                    "the file was written with a hasher that does not name itself: load it \
                     with read_from_trusting_hasher and the same hasher",
                ),
                (Some(file), None) => write!(
                    f,
                    "the file's items were placed by hasher {file}; the given hasher does not \
                     name itself, so it cannot be checked: load with read_from_trusting_hasher \
                     if it is that hasher"
                ),
            },
            Self::RetiredHasher { file } => write!(
                f,
                "the file was written with hasher {file}, the default hasher before strings \
                 and byte strings became one item: its integer items and items inserted by \
                 hash (hash_bytes with insert_hash, as in every state file of the seen \
                 command) still answer, so such a file converts by loading it with \
                 read_from_trusting_hasher(input, StableHasher::with_seed({seed})) and saving \
                 it again; a structure of string or byte-string items must be rebuilt from \
                 its items",
                seed = file.seed()
            ),
            Self::Incompatible { what } => write!(
                f,
                "the filters differ in {what}: only filters of the same layout, blocks, \
                 positions per item and hasher can be merged"
            ),
            Self::WordsOutOfRange { first, len, words } => write!(
                f,
                "words {first}..{first}+{len} pass the end of the filter's {words} words"
            ),
            Self::Full { capacity } => write!(
                f,
                "the non-scaling filter holds its capacity of {capacity} new items: the item \
                 was not inserted"
            ),
            Self::TooLarge {
                what,
                requested,
                limit,
            } => {
                // A count as a count; a size past every integer in 4 digits.
                if requested.fract() == 0.0 && *requested >= 0.0 && *requested < 2f64.powi(53) {
                    write!(f, "{what} needed ({}) exceed", *requested as u64)?;
                } else {
                    write!(f, "{what} needed ({requested:.3e}) exceed")?;
                }
                write!(f, " the limit of {limit} on this machine")
            }
        }
    }
}

impl std::error::Error for Error {
    /// The [`std::io::Error`] of an [`Error::Io`]; `None` for every other error (they have no
    /// cause beyond what their message says).
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.io_error().map(|e| e as _)
    }
}
