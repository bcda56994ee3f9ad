//! Saving and loading Bloom filters in the crate's [file format](crate::docs::format).

use std::io::{Read, Write};

use super::{AtomicBloomFilter, FrozenBloomFilter, SemiConcurrentBloomFilter};
use crate::bits::AtomicBits;
use crate::bits::read_boxed_slice;
use crate::hash::{Hash128, HasherIdentity, ItemHasher};
use crate::persist::format::{CHUNK_BYTES, ChunkReader, Header, Kind};
use crate::persist::{bad_header, identity_of, write_file};
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

/// The bits of `lines` cache lines, or [`Error::TooLarge`] past the constructors' limit (the bits
/// fit a `u64` and their bytes an allocation): what a header may promise.
pub(crate) fn line_bits(lines: u64) -> Result<u64, Error> {
    let limit = crate::sizing::max_bits();
    lines
        .checked_mul(512)
        .filter(|&bits| bits < limit)
        .ok_or(Error::TooLarge {
            what: "bits",
            requested: lines as f64 * 512.0,
            limit,
        })
}

/// The sizing a Bloom filter header describes, after checking that every field is possible and
/// that they agree with each other as the crate's sizing makes them agree
/// ([`BlockedSizing::check_built`]); the payload holds the bits and then `records` records of
/// `record_bytes` each (none for an atomic filter, the pending hashes of a semi-concurrent
/// one).
fn bloom_sizing(header: &Header, record_bytes: u64) -> Result<BlockedSizing, Error> {
    let layout = bloom_parameters(header)?;
    let lines = match layout {
        Layout::Word if header.blocks.is_multiple_of(8) => header.blocks / 8,
        Layout::Word => return Err(bad_header("word blocks that are not whole cache lines")),
        Layout::Line => header.blocks,
    };
    if lines == 0 {
        return Err(bad_header("no blocks"));
    }
    let payload = header
        .records
        .checked_mul(record_bytes)
        .and_then(|records| lines.checked_mul(64)?.checked_add(records));
    if payload != Some(header.payload_bytes) || (record_bytes == 0 && header.records != 0) {
        return Err(bad_header(
            "payload length disagrees with the blocks and records",
        ));
    }
    let bits = line_bits(lines)?;
    let sizing = BlockedSizing {
        layout,
        capacity: header.capacity,
        fpr: header.fpr,
        bits,
        blocks: header.blocks,
        hashes: header.hashes,
        expected_fpr: header.expected_fpr,
    };
    sizing.check_built().map_err(bad_header)?;
    Ok(sizing)
}

/// The layout of a header that carries a Bloom filter's parameters, after checking each of
/// them (`k`, the capacity and both rates) against its range; the blocks and the payload are
/// the caller's (each kind lays them out its own way).
pub(super) fn bloom_parameters(header: &Header) -> Result<Layout, Error> {
    let layout = header
        .layout
        .ok_or(bad_header("a Bloom filter without a layout"))?;
    if header.capacity == 0 {
        return Err(bad_header("capacity 0"));
    }
    if !(header.fpr > 0.0 && header.fpr < 1.0) {
        return Err(bad_header("target false-positive rate outside (0, 1)"));
    }
    if !(0.0..=1.0).contains(&header.expected_fpr) {
        return Err(bad_header("expected false-positive rate outside [0, 1]"));
    }
    if !(1..=MAX_HASHES).contains(&header.hashes) {
        return Err(bad_header("k (bit positions per item) outside 1 to 64"));
    }
    Ok(layout)
}

impl<H> AtomicBloomFilter<H> {
    /// The filter a Bloom filter file's payload holds ([`read_file`](crate::persist::read_file)).
    fn read_payload<R: Read>(
        header: &Header,
        checked: bool,
        payload: &mut ChunkReader<R>,
        hasher: H,
    ) -> Result<Self, Error> {
        let sizing = bloom_sizing(header, 0)?;
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

impl<H: ItemHasher> FrozenBloomFilter<H> {
    /// Writes the snapshot in the crate's [file format](crate::docs::format), as a Bloom filter
    /// file: [`AtomicBloomFilter::load`] (or `read_from`) turns it into a live filter with the
    /// same bits. The snapshot never changes, so the file is exact.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when writing fails.
    ///
    /// # Examples
    ///
    /// ```
    /// let semi = seen::SemiConcurrentBloomFilter::with_capacity(1000, 0.01)?;
    /// semi.insert("a");
    /// semi.compact();
    /// let mut file = Vec::new();
    /// semi.snapshot().write_to(&mut file)?;
    /// assert!(seen::AtomicBloomFilter::read_from(&file[..])?.contains("a"));
    /// # Ok::<(), seen::Error>(())
    /// ```
    pub fn write_to<W: Write>(&self, out: W) -> Result<(), Error> {
        let header = bloom_header(&self.sizing, identity_of(&self.hasher));
        write_file(out, &header, |chunks| {
            self.write_words(&mut |bytes| chunks.write(bytes))
        })
    }
}

impl<H> FrozenBloomFilter<H> {
    /// Hands the words to `out`, little-endian, a few thousand at a time (not a segment at a
    /// time: the builder takes any segment size, one larger than the filter included).
    fn write_words(&self, out: &mut dyn FnMut(&[u8]) -> Result<(), Error>) -> Result<(), Error> {
        const BATCH: usize = 8 << 10;
        let mut buf = Vec::with_capacity(BATCH);
        for word in self.segments.iter().flat_map(|segment| segment.iter()) {
            buf.extend_from_slice(&word.to_le_bytes());
            if buf.len() == BATCH {
                out(&buf)?;
                buf.clear();
            }
        }
        if !buf.is_empty() {
            out(&buf)?;
        }
        Ok(())
    }
}

impl<H: ItemHasher + Clone> SemiConcurrentBloomFilter<H> {
    /// Writes the filter in the crate's [file format](crate::docs::format): its current
    /// snapshot's bits, then its pending hashes (16 bytes each), so the file answers exactly
    /// as the filter did.
    ///
    /// Runs on `&self`, concurrently with inserts, lookups and compactions on other threads.
    /// It takes the snapshot and the pending hashes while no compaction runs (it waits for a
    /// running one to finish; inserts never wait, they only skip compacting meanwhile), so
    /// **every insert that happened before `write_to` began is in the output**, and the
    /// output is one consistent state: the snapshot plus exactly the hashes that were pending
    /// beside it (with some inserts that raced the save). The writing itself reads only that
    /// immutable state.
    ///
    /// A loaded filter holds the pending hashes in its snapshot (none pending) and has the
    /// default options ([`insertions_before_compact`](crate::builder::SemiOptions) 1,024,
    /// 4 KiB segments): the file keeps the filter's contents, not its tuning.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when writing fails.
    pub fn write_to<W: Write>(&self, out: W) -> Result<(), Error> {
        let (snapshot, pending) = self.saved_state();
        let mut header = bloom_header(&snapshot.sizing, identity_of(&snapshot.hasher));
        header.kind = Kind::SemiBloom;
        header.records = pending.len() as u64;
        header.payload_bytes += 16 * pending.len() as u64;
        write_file(out, &header, |chunks| {
            snapshot.write_words(&mut |bytes| chunks.write(bytes))?;
            let mut buf = Vec::with_capacity(16 << 10);
            for part in pending.chunks(1 << 10) {
                buf.clear();
                for hash in part {
                    buf.extend_from_slice(&hash.h1.to_le_bytes());
                    buf.extend_from_slice(&hash.h2.to_le_bytes());
                }
                chunks.write(&buf)?;
            }
            Ok(())
        })
    }

    /// The filter a semi-concurrent filter file's payload holds.
    fn read_payload<R: Read>(
        header: &Header,
        checked: bool,
        payload: &mut ChunkReader<R>,
        hasher: H,
    ) -> Result<Self, Error> {
        let sizing = bloom_sizing(header, 16)?;
        let bits =
            AtomicBits::read_lines(sizing.lines(), checked, |bytes| payload.read_exact(bytes))?;
        let records = usize::try_from(header.records)
            .map_err(|_| bad_header("more pending hashes than this machine can hold"))?;
        let pending = read_boxed_slice(
            records,
            checked,
            |bytes| payload.read_exact(bytes),
            |bytes: &[u8; 16]| Hash128 {
                h1: u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes")),
                h2: u64::from_le_bytes(bytes[8..].try_into().expect("8 bytes")),
            },
        )?;
        for &hash in pending.iter() {
            super::atomic::set_at(&bits, &super::Probe::new(hash, &sizing));
        }
        Self::assemble(sizing, bits, crate::builder::SemiOptions::default(), hasher)
    }
}

crate::persist::file_methods!(
    SemiConcurrentBloomFilter,
    Kind::SemiBloom,
    "use seen::SemiConcurrentBloomFilter;
let filter = SemiConcurrentBloomFilter::with_capacity(1000, 0.01)?;
filter.insert(\"compacted\");
filter.compact();
filter.insert(\"pending\");
let mut file = Vec::new();
filter.write_to(&mut file)?;
let loaded = SemiConcurrentBloomFilter::read_from(&file[..])?;
assert!(loaded.contains(\"compacted\") && loaded.contains(\"pending\"));
assert_eq!(loaded.pending_len(), 0); // the pending hashes are in the loaded snapshot",
    Clone
);

#[cfg(all(test, not(seen_loom)))]
mod tests {
    use super::*;
    use crate::hash::{ItemHasher, StableHasher};
    use crate::sizing::{GrowingSizing, MAX_LAYERS, blocked};
    use proptest::prelude::*;

    /// `p` log-uniform in [1e-30, 0.99] half of the time, in [6.4e-6, 0.99] the other half:
    /// below 6.4e-6 (words) or 4.7e-15 (lines) the sizing refuses the rate, and the crate
    /// writes no such filter.
    fn fpr() -> impl Strategy<Value = f64> {
        prop_oneof![-30.0f64..-0.0044, -5.19f64..-0.0044].prop_map(|e| 10f64.powf(e))
    }

    /// Capacities log-uniform in [1, 1e12]: headers only, nothing of that size is allocated.
    fn capacity() -> impl Strategy<Value = u64> {
        (0.0f64..12.0).prop_map(|e| 10f64.powf(e) as u64)
    }

    fn layout() -> impl Strategy<Value = Layout> {
        prop_oneof![Just(Layout::Word), Just(Layout::Line)]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        /// Every sizing the crate builds passes the checks of its file's header, as a Bloom
        /// filter (kind 1) and as a semi-concurrent one with pending hashes (kind 2), and
        /// comes back unchanged.
        #[test]
        fn every_header_the_crate_writes_passes_its_checks(
            capacity in capacity(), fpr in fpr(), layout in layout(), pending in 0u64..3,
        ) {
            let Ok(sizing) = blocked(capacity, fpr, layout) else {
                return Ok(());
            };
            let mut header = bloom_header(&sizing, StableHasher::new().identity());
            prop_assert_eq!(bloom_sizing(&header, 0), Ok(sizing));
            header.kind = Kind::SemiBloom;
            header.records = pending;
            header.payload_bytes += 16 * pending;
            prop_assert_eq!(bloom_sizing(&header, 16), Ok(sizing));
        }

        /// Every layer of every schedule the crate builds (up to the layer the sizing refuses)
        /// passes the checks a growing filter's file makes of its layers.
        #[test]
        fn every_layer_the_crate_grows_passes_its_checks(
            capacity in capacity(), fpr in fpr(), layout in layout(),
            expansion in prop_oneof![Just(1u32), Just(2), 1u32..=16, Just(1 << 16)],
            tightening in prop_oneof![Just(0.8), 0.01f64..0.99],
            scaling: bool,
        ) {
            let Ok(growth) =
                GrowingSizing::checked(capacity, fpr, layout, expansion, tightening, scaling)
            else {
                return Ok(());
            };
            let layers = if scaling { MAX_LAYERS } else { 1 };
            for i in 0..layers {
                let Ok(layer) = growth.layer(i) else { break };
                prop_assert_eq!(layer.check_built(), Ok(()), "layer {}", i);
            }
        }
    }

    /// The edges of the domain: the smallest capacity, the layouts' lowest rates, rates just
    /// under 1, and capacities whose bits approach what a `u64` counts.
    #[test]
    fn headers_at_the_edges_of_the_domain_pass_their_checks() {
        let rates = [
            6.4e-6,
            6.5e-6,
            4.7e-15,
            1e-14,
            0.5,
            0.5 / 0.97,
            0.6,
            0.99,
            1.0 - 1e-16,
        ];
        for layout in [Layout::Word, Layout::Line] {
            for capacity in [1, 2, 7, 8, 9, 63, 64, 65, 1 << 40, 1 << 55, u64::MAX / 64] {
                for fpr in rates {
                    if let Ok(sizing) = blocked(capacity, fpr, layout) {
                        let header = bloom_header(&sizing, None);
                        assert_eq!(
                            bloom_sizing(&header, 0),
                            Ok(sizing),
                            "{capacity} {fpr:e} {layout:?}"
                        );
                    }
                }
            }
        }
    }
}
