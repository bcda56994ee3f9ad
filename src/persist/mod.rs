//! Saving and loading: the [file format](format) and the file handling every structure shares
//! (crash-safe saves, length-checked loads). The structures' own `write_to` / `read_from` /
//! `save` / `load` methods are thin wrappers over these.

pub(crate) mod format;
mod save;

pub(crate) use save::save_atomically;

use std::fs::File;
use std::io::{BufReader, Read, Write};
use std::path::Path;

use crate::Error;
use crate::error::Corruption;
use crate::hash::{HasherIdentity, ItemHasher, RETIRED_STABLE_NAME, STABLE_NAME, StableHasher};
use format::{ChunkReader, ChunkWriter, Header, Kind};

/// Writes a file: `header`, then the payload that `payload` writes, in checksummed chunks.
pub(crate) fn write_file<W: Write>(
    mut out: W,
    header: &Header,
    payload: impl FnOnce(&mut ChunkWriter<W>) -> Result<(), Error>,
) -> Result<(), Error> {
    out.write_all(&header.encode()).map_err(Error::io)?;
    let mut chunks = ChunkWriter::new(out, header.chunk_bytes);
    payload(&mut chunks)?;
    let (written, _) = chunks.finish()?;
    debug_assert_eq!(
        written, header.payload_bytes,
        "the header announced another length"
    );
    Ok(())
}

/// Reads a file of `kind`: the header (checked against `file_len`, the input's length when
/// known, before anything else is allocated), then the hasher that `hasher` picks from the
/// file's identity, then `payload` reads the structure (its bool: whether the input's length
/// was checked, so that it may allocate the whole structure at once); then checks that the
/// payload was consumed exactly.
pub(crate) fn read_file<R: Read, H, T>(
    mut input: R,
    file_len: Option<u64>,
    kind: Kind,
    hasher: impl FnOnce(&Option<HasherIdentity>) -> Result<H, Error>,
    payload: impl FnOnce(&Header, bool, &mut ChunkReader<R>, H) -> Result<T, Error>,
) -> Result<T, Error> {
    let header = Header::read(&mut input)?;
    if header.kind != kind {
        return Err(Error::WrongStructure {
            expected: Kind::name(kind as u8),
            found: Kind::name(header.kind as u8),
        });
    }
    // The header passed its checksum, so it is what was written: a file of another length was
    // cut short or had bytes added (or was made to pass the checksum, and is refused all the
    // same).
    if let Some(len) = file_len {
        match header.file_len() {
            Some(expected) if expected == len => {}
            Some(expected) if expected < len => {
                return Err(Error::Corrupt(Corruption::TrailingBytes));
            }
            _ => return Err(Error::Corrupt(Corruption::Truncated)),
        }
    }
    let hasher = hasher(&header.hasher)?;
    let mut chunks = ChunkReader::new(input, &header);
    let value = payload(&header, file_len.is_some(), &mut chunks, hasher)?;
    chunks.finish()?;
    Ok(value)
}

/// `hasher`'s identity as files record it and loads compare it: an empty name names nothing,
/// so it is no identity (the file then records no seed either, as the format requires).
pub(crate) fn identity_of(hasher: &impl ItemHasher) -> Option<HasherIdentity> {
    hasher.identity().filter(|id| !id.name().is_empty())
}

/// The default hasher with the file's seed, if the file names it.
pub(crate) fn stable_hasher(file: &Option<HasherIdentity>) -> Result<StableHasher, Error> {
    match file {
        Some(id) if id.name() == STABLE_NAME => Ok(StableHasher::with_seed(id.seed())),
        Some(id) if id.name() == RETIRED_STABLE_NAME => {
            Err(Error::RetiredHasher { file: id.clone() })
        }
        other => Err(Error::HasherMismatch {
            file: other.clone(),
            given: StableHasher::new().identity(),
        }),
    }
}

/// A `Write` that cuts what is written into pieces of `max` bytes (the last may be shorter) and
/// hands each to `sink`: the export side of the chunked transfer.
pub(crate) struct PieceWriter<F> {
    piece: Vec<u8>,
    max: usize,
    sink: F,
    pieces: u64,
}

impl<F: FnMut(&[u8]) -> std::io::Result<()>> PieceWriter<F> {
    pub(crate) fn new(max: usize, sink: F) -> Result<Self, Error> {
        if max == 0 {
            return Err(Error::InvalidParameter(
                "chunk size must be at least 1 byte",
            ));
        }
        Ok(Self {
            piece: Vec::new(),
            max,
            sink,
            pieces: 0,
        })
    }

    /// Hands over the last, partial piece; returns how many pieces there were.
    pub(crate) fn finish(mut self) -> Result<u64, Error> {
        if !self.piece.is_empty() {
            (self.sink)(&self.piece).map_err(Error::io)?;
            self.pieces += 1;
        }
        Ok(self.pieces)
    }
}

impl<F: FnMut(&[u8]) -> std::io::Result<()>> Write for PieceWriter<F> {
    fn write(&mut self, mut bytes: &[u8]) -> std::io::Result<usize> {
        let written = bytes.len();
        while !bytes.is_empty() {
            if self.piece.is_empty() && bytes.len() >= self.max {
                // A whole piece straight from the input, no copy.
                (self.sink)(&bytes[..self.max])?;
                self.pieces += 1;
                bytes = &bytes[self.max..];
                continue;
            }
            let take = (self.max - self.piece.len()).min(bytes.len());
            self.piece.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            if self.piece.len() == self.max {
                (self.sink)(&self.piece)?;
                self.pieces += 1;
                self.piece.clear();
            }
        }
        Ok(written)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A `Read` over pieces taken in order: the import side of the chunked transfer.
pub(crate) struct PieceReader<I: Iterator> {
    pieces: I,
    current: Option<I::Item>,
    at: usize,
    /// Whether the first piece that is not empty begins as a file begins (with the magic
    /// number, or as much of it as the piece holds); `None` before it is read.
    starts_a_file: Option<bool>,
}

impl<I: Iterator<Item = B>, B: AsRef<[u8]>> PieceReader<I> {
    pub(crate) fn new(pieces: impl IntoIterator<IntoIter = I>) -> Self {
        Self {
            pieces: pieces.into_iter(),
            current: None,
            at: 0,
            starts_a_file: None,
        }
    }

    /// `e`, said of pieces: a file whose magic number is wrong and whose first piece does not
    /// begin with it is [`Corruption::NotTheFirstPiece`] (a piece was put first that belongs
    /// elsewhere, or the first is missing), not merely a file of another kind.
    pub(crate) fn explain(&self, e: Error) -> Error {
        match e {
            Error::Corrupt(Corruption::NotASeenFile) if self.starts_a_file == Some(false) => {
                Error::Corrupt(Corruption::NotTheFirstPiece)
            }
            other => other,
        }
    }

    /// `Ok` if nothing follows what was read (an empty piece counts as nothing).
    pub(crate) fn finish(self) -> Result<(), Error> {
        match at_end(self) {
            Ok(true) => Ok(()),
            _ => Err(Error::Corrupt(Corruption::TrailingBytes)),
        }
    }
}

impl<I: Iterator<Item = B>, B: AsRef<[u8]>> Read for PieceReader<I> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        loop {
            if let Some(piece) = &self.current {
                let bytes = &piece.as_ref()[self.at..];
                if !bytes.is_empty() {
                    let n = bytes.len().min(out.len());
                    out[..n].copy_from_slice(&bytes[..n]);
                    self.at += n;
                    return Ok(n);
                }
            }
            match self.pieces.next() {
                Some(piece) => {
                    let bytes = piece.as_ref();
                    if self.starts_a_file.is_none() && !bytes.is_empty() {
                        let n = bytes.len().min(format::MAGIC.len());
                        self.starts_a_file = Some(bytes[..n] == format::MAGIC[..n]);
                    }
                    self.current = Some(piece);
                    self.at = 0;
                }
                None => return Ok(0),
            }
        }
    }
}

/// Collects a byte string, or a sequence of bytes, for the `serde` impls.
#[cfg(feature = "serde")]
pub(crate) struct BytesVisitor;

#[cfg(feature = "serde")]
impl<'de> serde::de::Visitor<'de> for BytesVisitor {
    type Value = Vec<u8>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the bytes of a file of the seen crate")
    }

    fn visit_bytes<E: serde::de::Error>(self, bytes: &[u8]) -> Result<Vec<u8>, E> {
        Ok(bytes.to_vec())
    }

    fn visit_byte_buf<E: serde::de::Error>(self, bytes: Vec<u8>) -> Result<Vec<u8>, E> {
        Ok(bytes)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<u8>, A::Error> {
        // The size hint is the input's claim: reserve no more than a small amount up front.
        let mut bytes = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 16));
        while let Some(byte) = seq.next_element()? {
            bytes.push(byte);
        }
        Ok(bytes)
    }
}

/// A header field that is impossible or disagrees with another ([`Corruption::Header`]).
pub(crate) fn bad_header(what: &'static str) -> Error {
    Error::Corrupt(Corruption::Header(what))
}

/// Whether `input` has no byte left: reads one more, retrying a read that a signal
/// interrupted (as a pipe's may be).
fn at_end(mut input: impl Read) -> std::io::Result<bool> {
    let mut probe = [0u8; 1];
    loop {
        match input.read(&mut probe) {
            Ok(n) => return Ok(n == 0),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// Whether a load checks the file's hasher against the given one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HasherCheck {
    /// Both must name themselves, with the same identity.
    Verify,
    /// The caller vouches for the hasher.
    Trust,
}

impl HasherCheck {
    /// `given`, if it may read items placed by the file's hasher `file`.
    pub(crate) fn pick<H: ItemHasher>(
        self,
        file: &Option<HasherIdentity>,
        given: H,
    ) -> Result<H, Error> {
        if self == Self::Trust {
            return Ok(given);
        }
        match (file, identity_of(&given)) {
            (Some(a), Some(b)) if *a == b => Ok(given),
            // The default hasher given for a file of its retired version: say how to convert.
            (Some(a), Some(b)) if a.name() == RETIRED_STABLE_NAME && b.name() == STABLE_NAME => {
                Err(Error::RetiredHasher { file: a.clone() })
            }
            (_, identity) => Err(Error::HasherMismatch {
                file: file.clone(),
                given: identity,
            }),
        }
    }
}

/// Opens `path` and hands `read` a buffered reader and the file's length (`None` for what is
/// not a regular file, a named pipe say, whose metadata has no length: it is read as a
/// stream); then checks that `read` consumed the whole file.
pub(crate) fn load_file<T>(
    path: &Path,
    read: impl FnOnce(&mut BufReader<File>, Option<u64>) -> Result<T, Error>,
) -> Result<T, Error> {
    let file = File::open(path).map_err(|e| Error::io_at(path, "open", e))?;
    let metadata = file
        .metadata()
        .map_err(|e| Error::io_at(path, "read the length of", e))?;
    let len = metadata.is_file().then_some(metadata.len());
    let mut input = BufReader::with_capacity(1 << 16, file);
    let value = read(&mut input, len)
        .map_err(|e| e.io_prefixed(format_args!("read {}", path.display())))?;
    match at_end(&mut input) {
        Ok(true) => Ok(value),
        Ok(false) => Err(Error::Corrupt(Corruption::TrailingBytes)),
        Err(e) => Err(Error::io_at(path, "read", e)),
    }
}

/// The `save` / `load` / `read_from` family of a structure, on its `write_to` (with its own
/// concurrency notes) and its `read_payload(header, length_checked, payload, hasher)`: one set
/// of methods and docs for every structure. `$example` shows `read_from`; `$bound`, a bound the
/// hasher needs beyond `ItemHasher` (the semi-concurrent filter's `Clone`). A structure with a
/// clock is named `Type<C: Clock>`: it saves (and serializes) whatever its clock, and loads
/// with its default clock.
macro_rules! file_methods {
    (
        $type:ident $(<$clock:ident: $clock_bound:path>)?,
        $kind:expr,
        $example:literal
        $(, $bound:path)?
    ) => {
        impl<H: $crate::hash::ItemHasher $(+ $bound)?> $type<H> {
            /// Reads what [`write_to`](Self::write_to) or [`save`](Self::save) wrote with a
            /// hasher of this type: `hasher` must name itself
            /// ([`ItemHasher::identity`](crate::hash::ItemHasher::identity)) as the file's
            /// hasher did.
            ///
            /// Streaming: the payload is read into the structure directly, and the allocation
            /// grows with the bytes that arrive, so a header that promises more than the input
            /// holds costs about twice the input at most (an exact map's table, 8 bytes per
            /// bucket, is allocated once its bitmap, one bit per bucket, has arrived: 64 times
            /// that part of the input). Reads exactly one file: bytes after it are left in
            /// `input`.
            ///
            /// # Errors
            ///
            /// [`Error::HasherMismatch`](crate::Error::HasherMismatch) when the hashers differ
            /// or cannot be compared; [`Error::Corrupt`](crate::Error::Corrupt) for anything
            /// that is not a whole, well-formed file (every byte is under a checksum);
            /// [`Error::UnsupportedVersion`](crate::Error::UnsupportedVersion),
            /// [`Error::WrongStructure`](crate::Error::WrongStructure);
            /// [`Error::Io`](crate::Error::Io) when reading fails;
            /// [`Error::TooLarge`](crate::Error::TooLarge) for a header whose sizes are well
            /// formed but more than this machine can hold (or a `u64` count, for the bits);
            /// [`Error::AllocationFailed`](crate::Error::AllocationFailed).
            pub fn read_from_with_hasher<R: std::io::Read>(
                input: R,
                hasher: H,
            ) -> Result<Self, $crate::Error> {
                Self::read_with(input, None, |file| {
                    $crate::persist::HasherCheck::Verify.pick(file, hasher)
                })
            }

            /// [`read_from_with_hasher`](Self::read_from_with_hasher) without the hasher
            /// check, for a hasher that cannot name itself (any `std::hash::BuildHasher`, say
            /// one with a fixed key). You vouch that `hasher` computes what the writer's did:
            /// with another, every item saved is looked for in the wrong place, and reported
            /// never seen.
            ///
            /// # Errors
            ///
            /// As [`read_from_with_hasher`](Self::read_from_with_hasher), but never
            /// [`Error::HasherMismatch`](crate::Error::HasherMismatch).
            pub fn read_from_trusting_hasher<R: std::io::Read>(
                input: R,
                hasher: H,
            ) -> Result<Self, $crate::Error> {
                Self::read_with(input, None, |file| {
                    $crate::persist::HasherCheck::Trust.pick(file, hasher)
                })
            }

            /// [`read_from_with_hasher`](Self::read_from_with_hasher) of the file at `path`.
            /// The header's sizes are checked against the file's length before anything is
            /// allocated, and bytes after the end of the file's structure are an error. A path
            /// that is not a regular file (a named pipe) is read as a stream, as by
            /// `read_from`, then checked for bytes after the end.
            ///
            /// # Errors
            ///
            /// As [`read_from_with_hasher`](Self::read_from_with_hasher);
            /// [`Error::Io`](crate::Error::Io) names the path.
            pub fn load_with_hasher(
                path: impl AsRef<std::path::Path>,
                hasher: H,
            ) -> Result<Self, $crate::Error> {
                $crate::persist::load_file(path.as_ref(), |input, len| {
                    Self::read_with(input, len, |file| {
                        $crate::persist::HasherCheck::Verify.pick(file, hasher)
                    })
                })
            }

            /// [`import_chunks`](Self::import_chunks) with a hasher of this type, checked as
            /// [`read_from_with_hasher`](Self::read_from_with_hasher) checks it.
            ///
            /// # Errors
            ///
            /// As [`import_chunks`](Self::import_chunks).
            pub fn import_chunks_with_hasher<B: AsRef<[u8]>>(
                pieces: impl IntoIterator<Item = B>,
                hasher: H,
            ) -> Result<Self, $crate::Error> {
                let mut input = $crate::persist::PieceReader::new(pieces);
                let value = Self::read_from_with_hasher(&mut input, hasher)
                    .map_err(|e| input.explain(e))?;
                input.finish()?;
                Ok(value)
            }
        }

        impl<H: $crate::hash::ItemHasher $(+ $bound)? $(, $clock: $clock_bound)?>
            $type<H $(, $clock)?>
        {
            /// Saves this to `path`, crash-safely: the file at `path` is, at every moment,
            /// either the old one or the whole new one (a temporary file `.NAME.PID-N.tmp` in
            /// the same directory, flushed to disk, renamed over `path`, then the directory
            /// flushed). Concurrent writers: as [`write_to`](Self::write_to).
            ///
            /// - A symbolic link at `path` stays: the file written is the one at the end of
            ///   its chain of links (a relative link read from the link's own directory),
            ///   created if the last link dangles.
            /// - The new file keeps the old one's permissions: on Unix its mode bits, and its
            ///   owner and group where the saver may set them (root may); elsewhere the
            ///   read-only flag. A new file gets the mode any new file gets (the umask's).
            ///   Other hard links to the old file keep the old contents.
            /// - Before writing, the save removes what earlier saves of the same file left
            ///   behind (a crash, a `kill -9`): their temporary files, unless a live process
            ///   may be writing them. How it tells, and where it cannot:
            ///   [saving a file](crate::docs::design#saving-a-file).
            ///
            /// # Errors
            ///
            /// [`Error::Io`](crate::Error::Io) naming the path (through a link, also the file
            /// it leads to; more than 40 links in a chain is an error too); `path` is then
            /// untouched and the temporary file removed, except when only the last step,
            /// flushing the directory, failed: the new file is then in place, but a power loss
            /// may undo the rename.
            pub fn save(&self, path: impl AsRef<std::path::Path>) -> Result<(), $crate::Error> {
                $crate::persist::save_atomically(path.as_ref(), |out| self.write_to(out))
            }

            /// Writes the same bytes as [`write_to`](Self::write_to), cut into pieces of
            /// `max_bytes` (the last may be shorter), each handed to `sink` as it is ready:
            /// for a store with a limit on the size of a value (Redis strings, object-store
            /// parts, queue messages). Nothing is buffered beyond one piece. Returns the number
            /// of pieces; [`import_chunks`](Self::import_chunks) takes them back, in order.
            /// Concurrent writers: as [`write_to`](Self::write_to).
            ///
            /// # Errors
            ///
            /// [`Error::InvalidParameter`](crate::Error::InvalidParameter) for `max_bytes`
            /// 0; [`Error::Io`](crate::Error::Io) with `sink`'s error, after which the pieces
            /// handed over are not a whole file.
            pub fn export_chunks(
                &self,
                max_bytes: usize,
                sink: impl FnMut(&[u8]) -> std::io::Result<()>,
            ) -> Result<u64, $crate::Error> {
                let mut pieces = $crate::persist::PieceWriter::new(max_bytes, sink)?;
                self.write_to(&mut pieces)?;
                pieces.finish()
            }
        }

        impl $type {
            /// Loads what [`export_chunks`](Self::export_chunks) cut into pieces, from the
            /// pieces in order (written with the default hasher). The pieces may be cut
            /// anywhere: only their concatenation counts, checked as a file is.
            ///
            /// # Errors
            ///
            /// As [`read_from`](Self::read_from): a piece missing, repeated or out of order
            /// is [`Error::Corrupt`](crate::Error::Corrupt) (a checksum or the length fails);
            /// a first piece that does not begin with the file's magic number is
            /// [`Corruption::NotTheFirstPiece`](crate::Corruption::NotTheFirstPiece) (out of
            /// order, or the first missing); bytes after the end are
            /// [`Corruption::TrailingBytes`](crate::Corruption::TrailingBytes).
            pub fn import_chunks<B: AsRef<[u8]>>(
                pieces: impl IntoIterator<Item = B>,
            ) -> Result<Self, $crate::Error> {
                let mut input = $crate::persist::PieceReader::new(pieces);
                let value = Self::read_from(&mut input).map_err(|e| input.explain(e))?;
                input.finish()?;
                Ok(value)
            }

            /// Reads what was written with the default hasher,
            /// [`StableHasher`](crate::hash::StableHasher) (any seed: the loaded structure
            /// uses the file's). See [`read_from_with_hasher`](Self::read_from_with_hasher)
            /// for other hashers and for how the input is read.
            ///
            /// # Errors
            ///
            /// [`Error::HasherMismatch`](crate::Error::HasherMismatch) when the file was
            /// written with another hasher; otherwise as
            /// [`read_from_with_hasher`](Self::read_from_with_hasher).
            ///
            /// # Examples
            ///
            /// ```
            #[doc = $example]
            /// # Ok::<(), seen::Error>(())
            /// ```
            pub fn read_from<R: std::io::Read>(input: R) -> Result<Self, $crate::Error> {
                Self::read_with(input, None, $crate::persist::stable_hasher)
            }

            /// [`read_from`](Self::read_from) of the file at `path`, with the checks of
            /// [`load_with_hasher`](Self::load_with_hasher).
            ///
            /// # Errors
            ///
            /// As [`read_from`](Self::read_from); [`Error::Io`](crate::Error::Io) names the
            /// path.
            pub fn load(path: impl AsRef<std::path::Path>) -> Result<Self, $crate::Error> {
                $crate::persist::load_file(path.as_ref(), |input, len| {
                    Self::read_with(input, len, $crate::persist::stable_hasher)
                })
            }
        }

        /// With the `serde` feature: the bytes of [`write_to`](Self::write_to), as one byte
        /// string (meant for small structures: the whole file is built in memory).
        #[cfg(feature = "serde")]
        impl$(<$clock: $clock_bound>)? serde::Serialize
            for $type<$crate::hash::StableHasher $(, $clock)?>
        {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                let mut bytes = Vec::new();
                self.write_to(&mut bytes)
                    .map_err(<S::Error as serde::ser::Error>::custom)?;
                serializer.serialize_bytes(&bytes)
            }
        }

        /// With the `serde` feature: [`read_from`](Self::read_from) of a byte string (or a
        /// sequence of bytes, as JSON writes one), with every check of a file.
        #[cfg(feature = "serde")]
        impl<'de> serde::Deserialize<'de> for $type {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let bytes = deserializer.deserialize_bytes($crate::persist::BytesVisitor)?;
                let mut input = &bytes[..];
                let value =
                    Self::read_from(&mut input).map_err(<D::Error as serde::de::Error>::custom)?;
                if !input.is_empty() {
                    return Err(<D::Error as serde::de::Error>::custom(
                        $crate::Error::Corrupt($crate::Corruption::TrailingBytes),
                    ));
                }
                Ok(value)
            }
        }

        impl<H: $crate::hash::ItemHasher $(+ $bound)?> $type<H> {
            fn read_with<R: std::io::Read>(
                input: R,
                file_len: Option<u64>,
                hasher: impl FnOnce(
                    &Option<$crate::hash::HasherIdentity>,
                ) -> Result<H, $crate::Error>,
            ) -> Result<Self, $crate::Error> {
                $crate::persist::read_file(input, file_len, $kind, hasher, Self::read_payload)
            }
        }
    };
}
pub(crate) use file_methods;
