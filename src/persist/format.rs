//! The file format, version 1: a checksummed header, then the payload in checksummed chunks.
//! Byte by byte in [the format notes](crate::docs::format); this module is their one
//! implementation, and the golden files under `tests/data/` pin it.

use std::io::{self, Read, Write};

use xxhash_rust::xxh3::{xxh3_64, xxh3_64_with_seed};

use crate::error::Corruption;
use crate::hash::{HasherIdentity, MAX_NAME};
use crate::{Error, Layout};

/// The first 8 bytes of every file: a non-ASCII byte (a file sent through a text-mode
/// transfer is caught), the name, CR LF (a CR LF conversion is caught) and Ctrl-Z.
pub(crate) const MAGIC: [u8; 8] = *b"\x89seen\r\n\x1a";

/// The version this crate writes, and the newest it reads.
pub(crate) const VERSION: u32 = 1;

/// Payload bytes per chunk in the files this crate writes (readers take any size the header
/// names, from [`MIN_CHUNK`] to [`MAX_CHUNK`]).
pub(crate) const CHUNK_BYTES: u32 = 1 << 20;
const MIN_CHUNK: u32 = 64;
const MAX_CHUNK: u32 = 1 << 30;

/// The fixed fields of the header, before the hasher's name.
const FIXED: usize = 86;

/// What a file holds. Values are part of the format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A Bloom filter's bits: [`AtomicBloomFilter`](crate::AtomicBloomFilter) or
    /// [`FrozenBloomFilter`](crate::FrozenBloomFilter).
    Bloom = 1,
    /// A [`SemiConcurrentBloomFilter`](crate::SemiConcurrentBloomFilter): its snapshot's bits,
    /// then its pending hashes.
    SemiBloom = 2,
    /// An [`OverwriteMap`](crate::OverwriteMap)'s fingerprints.
    OverwriteMap = 3,
    /// An [`ExactOverwriteMap`](crate::ExactOverwriteMap)'s keys.
    ExactOverwriteMap = 4,
    /// A [`WindowedBloomFilter`](crate::WindowedBloomFilter): its window record (generations,
    /// rotation, the current generation's number and the clock position), then its bits.
    WindowedBloom = 5,
    /// A [`GrowingBloomFilter`](crate::GrowingBloomFilter): its growth record (expansion,
    /// tightening ratio, scaling), a record per layer, then each layer's bits.
    GrowingBloom = 6,
}

impl Kind {
    fn from_byte(byte: u8) -> Option<Self> {
        match byte {
            1 => Some(Self::Bloom),
            2 => Some(Self::SemiBloom),
            3 => Some(Self::OverwriteMap),
            4 => Some(Self::ExactOverwriteMap),
            5 => Some(Self::WindowedBloom),
            6 => Some(Self::GrowingBloom),
            _ => None,
        }
    }

    /// The name in error messages.
    pub(crate) fn name(byte: u8) -> &'static str {
        match byte {
            1 => "a Bloom filter",
            2 => "a semi-concurrent Bloom filter",
            3 => "an overwrite map",
            4 => "an exact overwrite map",
            5 => "a windowed Bloom filter",
            6 => "a growing Bloom filter",
            _ => "an unknown structure",
        }
    }
}

/// The layout byte: 0 for structures without one.
pub(crate) fn layout_byte(layout: Option<Layout>) -> u8 {
    match layout {
        None => 0,
        Some(Layout::Word) => 1,
        Some(Layout::Line) => 2,
    }
}

fn layout_of(byte: u8) -> Result<Option<Layout>, Error> {
    match byte {
        0 => Ok(None),
        1 => Ok(Some(Layout::Word)),
        2 => Ok(Some(Layout::Line)),
        _ => Err(corrupt(Corruption::Header("unknown layout"))),
    }
}

/// The header's fields.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Header {
    pub(crate) kind: Kind,
    pub(crate) layout: Option<Layout>,
    /// `k` (Bloom filters), else 0.
    pub(crate) hashes: u32,
    /// Items the structure was sized for (Bloom filters), else 0.
    pub(crate) capacity: u64,
    /// The target false-positive rate (Bloom filters), else 0.
    pub(crate) fpr: f64,
    /// The expected rate at capacity by the sizing model (Bloom filters), else 0.
    pub(crate) expected_fpr: f64,
    /// Blocks (Bloom filters) or buckets (maps).
    pub(crate) blocks: u64,
    /// The payload's length in bytes, checksums excluded.
    pub(crate) payload_bytes: u64,
    /// Payload bytes per chunk (the last chunk may be shorter).
    pub(crate) chunk_bytes: u32,
    /// Structure-specific count of records in the payload, else 0.
    pub(crate) records: u64,
    /// The hasher that placed the items, if it named itself.
    pub(crate) hasher: Option<HasherIdentity>,
}

fn corrupt(why: Corruption) -> Error {
    Error::Corrupt(why)
}

/// Reading failed: the end of the input in the middle of a file is a truncated file, anything
/// else is the reader's own error.
fn read_error(e: io::Error) -> Error {
    if e.kind() == io::ErrorKind::UnexpectedEof {
        corrupt(Corruption::Truncated)
    } else {
        Error::io(e)
    }
}

impl Header {
    /// The header's length in bytes: the fixed fields, the name, zeros to a multiple of 8, and
    /// the 8-byte checksum.
    fn len(&self) -> usize {
        let name = self.hasher.as_ref().map_or(0, |h| h.name().len());
        (FIXED + name).next_multiple_of(8) + 8
    }

    /// The header's bytes.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let (name, seed) = match &self.hasher {
            Some(h) => (h.name().as_bytes(), h.seed()),
            None => (&[][..], 0),
        };
        debug_assert!(name.len() <= MAX_NAME);
        let len = self.len();
        let mut out = Vec::with_capacity(len);
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&(len as u32).to_le_bytes());
        out.push(self.kind as u8);
        out.push(layout_byte(self.layout));
        out.extend_from_slice(&0u16.to_le_bytes()); // flags
        out.extend_from_slice(&self.hashes.to_le_bytes());
        out.extend_from_slice(&self.capacity.to_le_bytes());
        out.extend_from_slice(&self.fpr.to_bits().to_le_bytes());
        out.extend_from_slice(&self.expected_fpr.to_bits().to_le_bytes());
        out.extend_from_slice(&self.blocks.to_le_bytes());
        out.extend_from_slice(&self.payload_bytes.to_le_bytes());
        out.extend_from_slice(&self.records.to_le_bytes());
        out.extend_from_slice(&seed.to_le_bytes());
        out.extend_from_slice(&self.chunk_bytes.to_le_bytes());
        out.extend_from_slice(&(name.len() as u16).to_le_bytes());
        debug_assert_eq!(out.len(), FIXED);
        out.extend_from_slice(name);
        out.resize(len - 8, 0);
        let checksum = xxh3_64(&out);
        out.extend_from_slice(&checksum.to_le_bytes());
        out
    }

    /// Reads and checks a header. Reads exactly the header's bytes, nothing after it.
    ///
    /// Errors: [`Error::Corrupt`] for anything that is not a well-formed v1 header (checked
    /// in an order that names the likeliest cause: magic, then version, then checksum, then
    /// each field), [`Error::UnsupportedVersion`] for a file of a newer format,
    /// [`Error::Io`] when reading fails.
    pub(crate) fn read(r: &mut impl Read) -> Result<Self, Error> {
        let mut start = [0u8; 16];
        r.read_exact(&mut start).map_err(read_error)?;
        if start[..8] != MAGIC {
            return Err(corrupt(Corruption::NotASeenFile));
        }
        let version = u32::from_le_bytes(start[8..12].try_into().expect("4 bytes"));
        if version == 0 {
            return Err(corrupt(Corruption::Header("version 0")));
        }
        if version > VERSION {
            return Err(Error::UnsupportedVersion {
                found: version,
                supported: VERSION,
            });
        }
        let len = u32::from_le_bytes(start[12..16].try_into().expect("4 bytes")) as usize;
        if len < FIXED.next_multiple_of(8) + 8
            || len > (FIXED + MAX_NAME).next_multiple_of(8) + 8
            || !len.is_multiple_of(8)
        {
            return Err(corrupt(Corruption::Header("header length")));
        }
        let mut bytes = vec![0u8; len];
        bytes[..16].copy_from_slice(&start);
        r.read_exact(&mut bytes[16..]).map_err(read_error)?;
        let (body, checksum) = bytes.split_at(len - 8);
        if xxh3_64(body) != u64::from_le_bytes(checksum.try_into().expect("8 bytes")) {
            return Err(corrupt(Corruption::HeaderChecksum));
        }
        Self::parse(body)
    }

    /// The fields of a header whose checksum matched: each must still make sense (a checksum
    /// is no proof against a file made to pass it).
    fn parse(body: &[u8]) -> Result<Self, Error> {
        let u16_at = |at: usize| u16::from_le_bytes(body[at..at + 2].try_into().expect("2"));
        let u32_at = |at: usize| u32::from_le_bytes(body[at..at + 4].try_into().expect("4"));
        let u64_at = |at: usize| u64::from_le_bytes(body[at..at + 8].try_into().expect("8"));
        let kind = Kind::from_byte(body[16]).ok_or(Error::WrongStructure {
            expected: "a structure this version of the crate knows",
            found: Kind::name(body[16]),
        })?;
        let layout = layout_of(body[17])?;
        if u16_at(18) != 0 {
            return Err(corrupt(Corruption::Header("flags")));
        }
        let name_len = u16_at(84) as usize;
        if name_len > MAX_NAME || (FIXED + name_len).next_multiple_of(8) != body.len() {
            return Err(corrupt(Corruption::Header("hasher name length")));
        }
        if body[FIXED + name_len..].iter().any(|&b| b != 0) {
            return Err(corrupt(Corruption::Header("padding")));
        }
        let seed = u64_at(72);
        let hasher = if name_len == 0 {
            if seed != 0 {
                return Err(corrupt(Corruption::Header("seed of an unnamed hasher")));
            }
            None
        } else {
            let name = core::str::from_utf8(&body[FIXED..FIXED + name_len])
                .map_err(|_| corrupt(Corruption::Header("hasher name is not UTF-8")))?;
            Some(HasherIdentity::new(name.to_owned(), seed))
        };
        let chunk_bytes = u32_at(80);
        if !(MIN_CHUNK..=MAX_CHUNK).contains(&chunk_bytes) || chunk_bytes % 8 != 0 {
            return Err(corrupt(Corruption::Header("chunk size")));
        }
        Ok(Self {
            kind,
            layout,
            hashes: u32_at(20),
            capacity: u64_at(24),
            fpr: f64::from_bits(u64_at(32)),
            expected_fpr: f64::from_bits(u64_at(40)),
            blocks: u64_at(48),
            payload_bytes: u64_at(56),
            chunk_bytes,
            records: u64_at(64),
            hasher,
        })
    }

    /// The bytes a file with this header takes: header, payload and one checksum per chunk.
    /// `None` if that overflows (no real file is that long).
    pub(crate) fn file_len(&self) -> Option<u64> {
        let chunks = self.payload_bytes.div_ceil(u64::from(self.chunk_bytes));
        (self.len() as u64)
            .checked_add(self.payload_bytes)?
            .checked_add(chunks.checked_mul(8)?)
    }
}

/// Writes a payload in checksummed chunks: each chunk's bytes, then the xxh3-64 of them seeded
/// with the chunk's index (so a chunk moved, repeated or dropped fails its check).
pub(crate) struct ChunkWriter<W> {
    out: W,
    chunk: Vec<u8>,
    chunk_bytes: usize,
    index: u64,
    written: u64,
}

impl<W: Write> ChunkWriter<W> {
    pub(crate) fn new(out: W, chunk_bytes: u32) -> Self {
        Self {
            out,
            chunk: Vec::with_capacity(chunk_bytes as usize),
            chunk_bytes: chunk_bytes as usize,
            index: 0,
            written: 0,
        }
    }

    /// Appends payload bytes.
    pub(crate) fn write(&mut self, mut bytes: &[u8]) -> Result<(), Error> {
        while !bytes.is_empty() {
            let take = (self.chunk_bytes - self.chunk.len()).min(bytes.len());
            self.chunk.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            if self.chunk.len() == self.chunk_bytes {
                self.flush_chunk()?;
            }
        }
        Ok(())
    }

    fn flush_chunk(&mut self) -> Result<(), Error> {
        let checksum = xxh3_64_with_seed(&self.chunk, self.index);
        self.out
            .write_all(&self.chunk)
            .and_then(|()| self.out.write_all(&checksum.to_le_bytes()))
            .map_err(Error::io)?;
        self.written += self.chunk.len() as u64;
        self.index += 1;
        self.chunk.clear();
        Ok(())
    }

    /// Writes the last, partial chunk and returns the payload's length and the output.
    pub(crate) fn finish(mut self) -> Result<(u64, W), Error> {
        if !self.chunk.is_empty() {
            self.flush_chunk()?;
        }
        self.out.flush().map_err(Error::io)?;
        Ok((self.written, self.out))
    }
}

/// Reads a payload of known length in checksummed chunks, handing out only checked bytes.
pub(crate) struct ChunkReader<R> {
    input: R,
    chunk: Vec<u8>,
    at: usize,
    chunk_bytes: u64,
    index: u64,
    left: u64,
}

impl<R: Read> ChunkReader<R> {
    pub(crate) fn new(input: R, header: &Header) -> Self {
        Self {
            input,
            chunk: Vec::new(),
            at: 0,
            chunk_bytes: u64::from(header.chunk_bytes),
            index: 0,
            left: header.payload_bytes,
        }
    }

    /// Fills `out` with the next payload bytes. [`Corruption::Truncated`] if the input ends
    /// first, [`Corruption::ChunkChecksum`] if a chunk fails its check, or the reader's error.
    pub(crate) fn read_exact(&mut self, mut out: &mut [u8]) -> Result<(), Error> {
        while !out.is_empty() {
            if self.at == self.chunk.len() {
                self.next_chunk()?;
            }
            let take = (self.chunk.len() - self.at).min(out.len());
            out[..take].copy_from_slice(&self.chunk[self.at..self.at + take]);
            self.at += take;
            out = &mut out[take..];
        }
        Ok(())
    }

    /// The next `len` payload bytes, in a vector grown as they arrive (a length read from the
    /// file costs no more memory than the bytes behind it).
    pub(crate) fn read_vec(&mut self, len: usize) -> Result<Vec<u8>, Error> {
        let mut out = Vec::new();
        while out.len() < len {
            let at = out.len();
            let step = (len - at).min(64 << 10);
            out.try_reserve_exact(step)
                .map_err(|_| Error::AllocationFailed { bytes: len as u64 })?;
            out.resize(at + step, 0);
            self.read_exact(&mut out[at..])?;
        }
        Ok(out)
    }

    fn next_chunk(&mut self) -> Result<(), Error> {
        if self.left == 0 {
            return Err(corrupt(Corruption::Header(
                "payload shorter than its structure",
            )));
        }
        // At most one chunk (at most `MAX_CHUNK` bytes) is buffered, and it is grown only as
        // bytes arrive: a header promising more than the input holds costs nothing.
        let len = self.chunk_bytes.min(self.left) as usize;
        self.chunk.clear();
        let got = (&mut self.input)
            .take(len as u64)
            .read_to_end(&mut self.chunk)
            .map_err(read_error)?;
        if got < len {
            return Err(corrupt(Corruption::Truncated));
        }
        let mut checksum = [0u8; 8];
        self.input.read_exact(&mut checksum).map_err(read_error)?;
        if xxh3_64_with_seed(&self.chunk, self.index) != u64::from_le_bytes(checksum) {
            return Err(corrupt(Corruption::ChunkChecksum { chunk: self.index }));
        }
        self.index += 1;
        self.left -= len as u64;
        self.at = 0;
        Ok(())
    }

    /// Checks that the whole payload was consumed.
    pub(crate) fn finish(self) -> Result<R, Error> {
        if self.left != 0 || self.at != self.chunk.len() {
            return Err(corrupt(Corruption::Header(
                "payload longer than its structure",
            )));
        }
        Ok(self.input)
    }
}
