//! Saving and loading Bloom filters in the crate's [file format](crate::docs::format).

use std::io::{Read, Write};

use super::AtomicBloomFilter;
use crate::bits::AtomicBits;
use crate::error::Corruption;
use crate::hash::{HasherIdentity, ItemHasher};
use crate::persist::format::{CHUNK_BYTES, ChunkReader, Header, Kind};
use crate::persist::{identity_of, write_file};
use crate::sizing::BlockedSizing;
use crate::{Error, Layout};

/// The most bit positions per item a file may name: the probe draws any number, the sizing
/// chooses at most 64.
const MAX_HASHES: u32 = 64;

/// The header of a Bloom filter of this sizing, placed by `hasher`.
fn bloom_header(sizing: &BlockedSizing, hasher: Option<HasherIdentity>) -> Header {
    Header {
        kind: Kind::Bloom,
        layout: Some(sizing.layout),
        hashes: sizing.hashes,
        capacity: sizing.capacity,
        fpr: sizing.fpr,
        expected_fpr: sizing.expected_fpr,
        blocks: sizing.blocks,
        payload_bytes: sizing.bytes(),
        chunk_bytes: CHUNK_BYTES,
        records: 0,
        hasher,
    }
}

fn bad(what: &'static str) -> Error {
    Error::Corrupt(Corruption::Header(what))
}

/// The sizing a Bloom filter header describes, after checking that every field is possible and
/// that they agree with each other. The sizing model
/// is not re-run: a file keeps the blocks and `k` it was written with, whatever a later version
/// of the crate would choose.
fn bloom_sizing(header: &Header) -> Result<BlockedSizing, Error> {
    let layout = header
        .layout
        .ok_or(bad("a Bloom filter without a layout"))?;
    if header.capacity == 0 {
        return Err(bad("capacity 0"));
    }
    if !(header.fpr > 0.0 && header.fpr < 1.0) {
        return Err(bad("target false-positive rate outside (0, 1)"));
    }
    if !(0.0..=1.0).contains(&header.expected_fpr) {
        return Err(bad("expected false-positive rate outside [0, 1]"));
    }
    if !(1..=MAX_HASHES).contains(&header.hashes) {
        return Err(bad("bit positions per item outside 1..=64"));
    }
    let lines = match layout {
        Layout::Word if header.blocks % 8 == 0 => header.blocks / 8,
        Layout::Word => return Err(bad("word blocks that are not whole cache lines")),
        Layout::Line => header.blocks,
    };
    if lines == 0 {
        return Err(bad("no blocks"));
    }
    if lines.checked_mul(64) != Some(header.payload_bytes) {
        return Err(bad("payload length disagrees with the blocks"));
    }
    if header.records != 0 {
        return Err(bad("records in a Bloom filter"));
    }
    // The limit of the constructors: the bits fit a `u64` and their bytes an allocation.
    let limit = crate::sizing::max_bits();
    let bits = header
        .payload_bytes
        .checked_mul(8)
        .filter(|&bits| bits < limit)
        .ok_or(Error::TooLarge {
            what: "bits",
            requested: header.payload_bytes as f64 * 8.0,
            limit,
        })?;
    Ok(BlockedSizing {
        layout,
        capacity: header.capacity,
        fpr: header.fpr,
        bits,
        blocks: header.blocks,
        hashes: header.hashes,
        expected_fpr: header.expected_fpr,
    })
}

impl<H> AtomicBloomFilter<H> {
    /// The filter a Bloom filter file's payload holds ([`read_file`](crate::persist::read_file)).
    fn read_payload<R: Read>(
        header: &Header,
        checked: bool,
        payload: &mut ChunkReader<R>,
        hasher: H,
    ) -> Result<Self, Error> {
        let sizing = bloom_sizing(header)?;
        let bits =
            AtomicBits::read_lines(sizing.lines(), checked, |line| payload.read_exact(line))?;
        Ok(Self {
            bits,
            sizing,
            hasher,
        })
    }
}

crate::persist::file_methods!(
    AtomicBloomFilter,
    Kind::Bloom,
    "use seen::AtomicBloomFilter;
let path = std::env::temp_dir().join(format!(\"seen-doc-{}.seen\", std::process::id()));
let filter = AtomicBloomFilter::with_capacity(1000, 0.01)?;
filter.insert(\"a\");
filter.save(&path)?;
let loaded = AtomicBloomFilter::load(&path)?;
assert!(loaded.contains(\"a\") && !loaded.contains(\"b\"));
let mut bytes = Vec::new();
filter.write_to(&mut bytes)?;
assert_eq!(AtomicBloomFilter::read_from(&bytes[..])?.sizing(), filter.sizing());
std::fs::remove_file(&path).unwrap();"
);

impl<H: ItemHasher> AtomicBloomFilter<H> {
    /// Writes the filter to `out` in the crate's [file format](crate::docs::format): its
    /// parameters, its hasher's [identity](ItemHasher::identity) and its bits, in checksummed
    /// chunks, streaming (no copy of the bits is made). `out` is not buffered here: wrap a file
    /// in a [`std::io::BufWriter`] (or use [`save`](Self::save)).
    ///
    /// Runs on `&self`, concurrently with inserts on other threads: **every insert that happened
    /// before `write_to` began is in the output** (it returned before the call, on this thread
    /// or on one that synchronized with it). Inserts racing with the write may be in it, whole
    /// or in part: a part shows as extra set bits, never as a lost item.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when writing fails; what was written is then not a whole file.
    ///
    /// # Examples
    ///
    /// ```
    /// use seen::AtomicBloomFilter;
    /// let filter = AtomicBloomFilter::with_capacity(1000, 0.01)?;
    /// filter.insert("a");
    /// let mut file = Vec::new();
    /// filter.write_to(&mut file)?;
    /// let loaded = AtomicBloomFilter::read_from(&file[..])?;
    /// assert!(loaded.contains("a") && !loaded.contains("b"));
    /// assert_eq!(loaded.sizing(), filter.sizing());
    /// # Ok::<(), seen::Error>(())
    /// ```
    pub fn write_to<W: Write>(&self, out: W) -> Result<(), Error> {
        let header = bloom_header(&self.sizing, identity_of(&self.hasher));
        write_file(out, &header, |chunks| {
            self.bits.write_words(|bytes| chunks.write(bytes))
        })
    }
}
