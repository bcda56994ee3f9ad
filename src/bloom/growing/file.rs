//! Saving and loading the [`GrowingBloomFilter`] in the crate's [file format](crate::docs::format)
//! (kind 6): the header's Bloom fields for the first layer with the whole filter's target and
//! initial capacity, then a 32-byte growth record (expansion, tightening ratio, scaling), a
//! 32-byte record per layer (its blocks, `k`, count, expected rate), then each layer's bits.

use std::io::{Read, Write};

use super::{GrowingBloomFilter, Layer, Layers, STUCK};
use crate::bits::AtomicBits;
use crate::bloom::file::{bloom_parameters, line_bits};
use crate::hash::{HasherIdentity, ItemHasher};
use crate::persist::format::{CHUNK_BYTES, ChunkReader, Header, Kind};
use crate::persist::{bad_header, identity_of, write_file};
use crate::sizing::{BlockedSizing, GrowingSizing, MAX_LAYERS};
use crate::sync::Ordering::{Relaxed, SeqCst};
use crate::sync::{Arc, ArcCell, AtomicU64};
use crate::{Error, Layout};

/// The growth record's length, and each layer record's: the payload's first bytes.
const RECORD_BYTES: u64 = 32;
const LAYER_RECORD_BYTES: u64 = 32;

/// Counts a file may hold: below 2^63, so that the loaded counts never overflow.
const MAX_COUNT: u64 = 1 << 63;

/// The header: the first layer's layout, `k` and blocks, the whole filter's initial capacity
/// and target, the number of layers as the records.
fn growing_header(
    growth: &GrowingSizing,
    layers: &[Arc<Layer>],
    hasher: Option<HasherIdentity>,
) -> Header {
    let bits: u64 = layers.iter().map(|l| l.sizing.bytes()).sum();
    let count = layers.len() as u64;
    Header {
        kind: Kind::GrowingBloom,
        layout: Some(growth.layout),
        hashes: layers[0].sizing.hashes,
        capacity: growth.initial_capacity,
        fpr: growth.fpr,
        expected_fpr: layers[0].sizing.expected_fpr,
        blocks: layers[0].sizing.blocks,
        payload_bytes: RECORD_BYTES + LAYER_RECORD_BYTES * count + bits,
        chunk_bytes: CHUNK_BYTES,
        records: count,
        hasher,
    }
}

/// The growth record and the layer records, little-endian.
fn encode_records(growth: &GrowingSizing, layers: &[Arc<Layer>]) -> Vec<u8> {
    let mut out = Vec::with_capacity(32 * (1 + layers.len()));
    out.extend_from_slice(&growth.expansion.to_le_bytes());
    out.extend_from_slice(&u32::from(growth.scaling).to_le_bytes());
    out.extend_from_slice(&growth.tightening.to_bits().to_le_bytes());
    out.extend_from_slice(&[0; 16]); // reserved
    for layer in layers {
        out.extend_from_slice(&layer.sizing.blocks.to_le_bytes());
        out.extend_from_slice(&layer.sizing.hashes.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes()); // reserved
        out.extend_from_slice(&layer.counted.load(Relaxed).to_le_bytes());
        out.extend_from_slice(&layer.sizing.expected_fpr.to_bits().to_le_bytes());
    }
    out
}

impl<H: ItemHasher> GrowingBloomFilter<H> {
    /// Writes the filter to `out` in the crate's [file format](crate::docs::format): its
    /// schedule (initial capacity, target, layout, expansion, tightening ratio, scaling), its
    /// hasher's [identity](ItemHasher::identity), and each layer's size, count and bits, in
    /// checksummed chunks, streaming (no copy of the bits is made). `out` is not buffered
    /// here: wrap a file in a [`std::io::BufWriter`] (or use [`save`](Self::save)).
    ///
    /// Runs on `&self`, concurrently with inserts, lookups and growths on other threads, and
    /// takes no lock: it writes the layers that were published when it began. **Every insert
    /// that happened before `write_to` began is in the output** (such an insert wrote into
    /// one of those layers); inserts racing with the write may be in it, whole or in part
    /// (extra set bits, never a lost item), and a layer published meanwhile is not. A loaded
    /// filter whose newest layer is at its capacity grows at its first insert of a new item.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when writing fails; what was written is then not a whole file.
    ///
    /// # Examples
    ///
    /// ```
    /// use seen::GrowingBloomFilter;
    /// let f = GrowingBloomFilter::with_capacity(100, 0.01)?;
    /// for i in 0..1000u64 {
    ///     f.insert(&i)?;
    /// }
    /// let mut file = Vec::new();
    /// f.write_to(&mut file)?;
    /// let loaded = GrowingBloomFilter::read_from(&file[..])?;
    /// assert_eq!((loaded.layers(), loaded.sizing()), (f.layers(), f.sizing()));
    /// assert!((0..1000u64).all(|i| loaded.contains(&i)));
    /// assert_eq!(loaded.info().sampled_new_items, f.info().sampled_new_items);
    /// # Ok::<(), seen::Error>(())
    /// ```
    pub fn write_to<W: Write>(&self, out: W) -> Result<(), Error> {
        let n = (self.state.load(SeqCst) & super::LAYERS) as usize;
        let layers = self.layers.load();
        let layers = &layers.0[..n];
        let header = growing_header(&self.growth, layers, identity_of(&self.hasher));
        write_file(out, &header, |chunks| {
            chunks.write(&encode_records(&self.growth, layers))?;
            for layer in layers {
                layer.bits.write_words(|bytes| chunks.write(bytes))?;
            }
            Ok(())
        })
    }

    /// The filter a growing filter file's payload holds
    /// ([`read_file`](crate::persist::read_file)). Every field is checked against its range
    /// and the others before any layer's bits are allocated.
    fn read_payload<R: Read>(
        header: &Header,
        checked: bool,
        payload: &mut ChunkReader<R>,
        hasher: H,
    ) -> Result<Self, Error> {
        let layout = bloom_parameters(header)?;
        let count = header.records;
        if !(1..=u64::from(MAX_LAYERS)).contains(&count) {
            return Err(bad_header("layers outside 1..=64"));
        }
        let records = RECORD_BYTES + LAYER_RECORD_BYTES * count;
        if header.payload_bytes < records {
            return Err(bad_header("payload shorter than its records"));
        }
        let mut record = [0u8; RECORD_BYTES as usize];
        payload.read_exact(&mut record)?;
        let u32_at = |b: &[u8], at: usize| u32::from_le_bytes(b[at..at + 4].try_into().expect("4"));
        let u64_at = |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().expect("8"));
        let expansion = u32_at(&record, 0);
        let tightening = f64::from_bits(u64_at(&record, 8));
        GrowingSizing::check_growth(expansion, tightening).map_err(|e| match e {
            Error::InvalidParameter(what) => bad_header(what),
            other => other,
        })?;
        let scaling = match u32_at(&record, 4) {
            0 => false,
            1 => true,
            _ => return Err(bad_header("scaling flag other than 0 or 1")),
        };
        if record[16..].iter().any(|&b| b != 0) {
            return Err(bad_header("reserved bytes of the growth record"));
        }
        if !scaling && count != 1 {
            return Err(bad_header("a non-scaling filter of more than one layer"));
        }
        // The schedule as the writer had it; not sized again (a file keeps its blocks and `k`).
        let growth = GrowingSizing {
            initial_capacity: header.capacity,
            fpr: header.fpr,
            layout,
            expansion,
            tightening,
            scaling,
        };
        let mut sizes = Vec::with_capacity(count as usize);
        let mut bits_bytes = 0u64;
        for i in 0..count as u32 {
            let mut layer = [0u8; LAYER_RECORD_BYTES as usize];
            payload.read_exact(&mut layer)?;
            let (blocks, hashes, counted) =
                (u64_at(&layer, 0), u32_at(&layer, 8), u64_at(&layer, 16));
            let expected_fpr = f64::from_bits(u64_at(&layer, 24));
            if u32_at(&layer, 12) != 0 {
                return Err(bad_header("reserved bytes of a layer record"));
            }
            if i == 0
                && (blocks, hashes, expected_fpr.to_bits())
                    != (header.blocks, header.hashes, header.expected_fpr.to_bits())
            {
                return Err(bad_header(
                    "k, blocks or expected false-positive rate of the header other than the \
                     first layer's",
                ));
            }
            if !(1..=64).contains(&hashes) {
                return Err(bad_header("k (bit positions per item) outside 1 to 64"));
            }
            if !(0.0..=1.0).contains(&expected_fpr) {
                return Err(bad_header("expected false-positive rate outside [0, 1]"));
            }
            if counted >= MAX_COUNT {
                return Err(bad_header("new items counted beyond 2^63"));
            }
            let lines = match layout {
                Layout::Word if blocks % 8 != 0 => {
                    return Err(bad_header("word blocks that are not whole cache lines"));
                }
                Layout::Word => blocks / 8,
                Layout::Line => blocks,
            };
            if lines == 0 {
                return Err(bad_header("no blocks"));
            }
            let bits = line_bits(lines)?;
            bits_bytes = bits_bytes.checked_add(bits / 8).ok_or(bad_header(
                "payload length disagrees with the layers' blocks",
            ))?;
            let capacity = growth
                .layer_capacity(i)
                .map_err(|_| bad_header("a layer capacity beyond 2^64"))?;
            let room = GrowingSizing::room(capacity)
                .map_err(|_| bad_header("a layer capacity beyond 2^64"))?;
            let sizing = BlockedSizing {
                layout,
                capacity: room,
                fpr: growth.layer_fpr(i),
                bits,
                blocks,
                hashes,
                expected_fpr,
            };
            // The layer must be the sizing of the capacity and rate the schedule gives it: else
            // the filter would grow by the schedule with layers too small for it, and its rate
            // pass the target with no error (or a field be misreported).
            sizing.check_built().map_err(|_| {
                bad_header(
                    "a layer's blocks, k or expected false-positive rate other than the sizing \
                     of the capacity and rate its schedule gives it (initial capacity, \
                     expansion, target rate, tightening ratio, scaling)",
                )
            })?;
            if i + 1 < count as u32 && counted < capacity {
                // A layer is followed by another only once it counted its capacity.
                return Err(bad_header(
                    "a layer before the newest that counted fewer new items than its capacity",
                ));
            }
            sizes.push((sizing, capacity, counted));
        }
        if records.checked_add(bits_bytes) != Some(header.payload_bytes) {
            return Err(bad_header(
                "payload length disagrees with the layers' blocks",
            ));
        }
        line_bits(bits_bytes / 64)?;
        let mut layers = Vec::with_capacity(sizes.len());
        for (sizing, capacity, counted) in sizes {
            let bits =
                AtomicBits::read_lines(sizing.lines(), checked, |line| payload.read_exact(line))?;
            let layer = Layer::from_bits(bits, sizing, capacity, counted, scaling);
            layers.push(Arc::new(layer));
        }
        let newest = &layers[layers.len() - 1];
        let full = newest.counted.load(Relaxed) >= newest.capacity;
        let state = count | if full { STUCK } else { 0 };
        Ok(Self {
            layers: ArcCell::new(Arc::new(Layers(layers))),
            state: crate::bits::CachePadded::new(AtomicU64::new(state)),
            growth,
            hasher,
        })
    }
}

crate::persist::file_methods!(
    GrowingBloomFilter,
    Kind::GrowingBloom,
    "use seen::GrowingBloomFilter;
let path = std::env::temp_dir().join(format!(\"seen-doc-growing-{}.seen\", std::process::id()));
let filter = GrowingBloomFilter::with_capacity(100, 0.01)?;
for i in 0..500u64 {
    filter.insert(&i)?;
}
filter.save(&path)?;
let loaded = GrowingBloomFilter::load(&path)?;
assert!(loaded.contains(&7u64) && loaded.layers() == 3);
let mut bytes = Vec::new();
filter.write_to(&mut bytes)?;
assert_eq!(GrowingBloomFilter::read_from(&bytes[..])?.sizing(), filter.sizing());
std::fs::remove_file(&path).unwrap();"
);
