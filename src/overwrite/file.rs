//! Saving and loading the overwrite maps in the crate's [file format](crate::docs::format).
//!
//! - [`OverwriteMap`]: the slots, one little-endian `u64` fingerprint each (0: empty).
//! - [`ExactOverwriteMap`]: a bitmap of the occupied slots (one bit per bucket, in 64-bit
//!   little-endian words), then each occupied slot's key in slot order: its length as a
//!   little-endian `u32`, then its bytes. The bitmap makes every file at least one bit per
//!   bucket long, so the table a load allocates (8 bytes per bucket) is at most 64 times the
//!   file's length. The byte-by-byte layout: [the format notes](crate::docs::format).

use std::io::{Read, Write};

use super::{ExactOverwriteMap, OverwriteMap, checked_buckets};
use crate::Error;
use crate::bits::read_boxed_slice;
use crate::hash::{HasherIdentity, ItemHasher};
use crate::persist::format::{CHUNK_BYTES, ChunkReader, Header, Kind};
use crate::persist::{bad_header, identity_of, write_file};
use crate::sync::Ordering::Relaxed;
use crate::sync::{Arc, ArcCell, AtomicU64};

/// A map's header: no layout, no Bloom parameters, `buckets` blocks.
fn map_header(
    kind: Kind,
    buckets: u64,
    payload_bytes: u64,
    records: u64,
    hasher: Option<HasherIdentity>,
) -> Header {
    Header {
        kind,
        layout: None,
        hashes: 0,
        capacity: 0,
        fpr: 0.0,
        expected_fpr: 0.0,
        blocks: buckets,
        payload_bytes,
        chunk_bytes: CHUNK_BYTES,
        records,
        hasher,
    }
}

/// The bucket count of a map header whose Bloom fields are all zero, as a slot count this
/// machine can allocate (`slot_bytes` each).
fn map_buckets(header: &Header, slot_bytes: usize) -> Result<usize, Error> {
    if header.layout.is_some()
        || header.hashes != 0
        || header.capacity != 0
        || header.fpr.to_bits() != 0
        || header.expected_fpr.to_bits() != 0
    {
        return Err(bad_header(
            "layout, k, capacity, target or expected false-positive rate in a map (a Bloom \
             filter's fields)",
        ));
    }
    if header.blocks == 0 {
        return Err(bad_header("no buckets"));
    }
    checked_buckets(header.blocks, slot_bytes)
}

crate::persist::file_methods!(
    OverwriteMap,
    Kind::OverwriteMap,
    "let map = seen::OverwriteMap::with_buckets(1000)?;
map.insert(\"msg-42\");
let mut file = Vec::new();
map.write_to(&mut file)?;
let loaded = seen::OverwriteMap::read_from(&file[..])?;
assert!(!loaded.insert(\"msg-42\")); // remembered
assert_eq!(loaded.buckets(), 1000);"
);

crate::persist::file_methods!(
    ExactOverwriteMap,
    Kind::ExactOverwriteMap,
    "let map = seen::ExactOverwriteMap::with_buckets(1000)?;
map.insert(\"msg-42\");
let mut file = Vec::new();
map.write_to(&mut file)?;
let loaded = seen::ExactOverwriteMap::read_from(&file[..])?;
assert!(!loaded.insert(\"msg-42\")); // remembered
assert_eq!(loaded.buckets(), 1000);"
);

impl<H: ItemHasher> OverwriteMap<H> {
    /// Writes the map to `out` in the crate's [file format](crate::docs::format), streaming
    /// (one Relaxed load per slot, no copy of the table). Not buffered here: wrap a file in a
    /// [`std::io::BufWriter`] (or use [`save`](Self::save)).
    ///
    /// Runs on `&self`, concurrently with inserts and forgets on other threads. Each slot is
    /// read once: the file holds, for every slot, its content at the moment the save read it.
    /// So an item inserted before the save began is in the file unless a later insert of
    /// another item into its slot, or a `forget`, was read instead: exactly what the live map
    /// would remember of it at that moment.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when writing fails; what was written is then not a whole file.
    pub fn write_to<W: Write>(&self, out: W) -> Result<(), Error> {
        let buckets = self.slots.len() as u64;
        let header = map_header(
            Kind::OverwriteMap,
            buckets,
            buckets * 8,
            0,
            identity_of(&self.hasher),
        );
        write_file(out, &header, |chunks| {
            let mut buf = Vec::with_capacity(8 << 10);
            for part in self.slots.chunks(1 << 10) {
                buf.clear();
                for slot in part {
                    buf.extend_from_slice(&slot.load(Relaxed).to_le_bytes());
                }
                chunks.write(&buf)?;
            }
            Ok(())
        })
    }
}

impl<H> OverwriteMap<H> {
    fn read_payload<R: Read>(
        header: &Header,
        checked: bool,
        payload: &mut ChunkReader<R>,
        hasher: H,
    ) -> Result<Self, Error> {
        let buckets = map_buckets(header, 8)?;
        if header.records != 0 || header.payload_bytes != header.blocks.saturating_mul(8) {
            return Err(bad_header(
                "payload length or records disagree with the buckets",
            ));
        }
        let slots = read_boxed_slice(
            buckets,
            checked,
            |bytes| payload.read_exact(bytes),
            |bytes| AtomicU64::new(u64::from_le_bytes(*bytes)),
        )?;
        Ok(Self { slots, hasher })
    }
}

impl<H: ItemHasher> ExactOverwriteMap<H> {
    /// Writes the map to `out` in the crate's [file format](crate::docs::format): the keys
    /// with the slots they are in. Not buffered here: wrap a file in a [`std::io::BufWriter`]
    /// (or use [`save`](Self::save)).
    ///
    /// Runs on `&self`, concurrently with inserts and forgets on other threads. The save first
    /// takes every slot's entry (a reference-count increment each, no key is copied: 8 bytes
    /// per bucket while it runs), then writes them: the file holds, for every slot, its entry
    /// at the moment the save took it. So a key inserted before the save began is in the file
    /// unless a later insert of another key into its slot, or a `forget`, was taken instead:
    /// exactly what the live map would remember of it at that moment.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when writing fails; [`Error::AllocationFailed`] when the 8 bytes per
    /// bucket are not there (nothing is written then); [`Error::InvalidParameter`] for a key
    /// of 4 GiB or more, which the format cannot hold (checked before anything is written).
    /// After an `Io` error what was written is not a whole file.
    pub fn write_to<W: Write>(&self, out: W) -> Result<(), Error> {
        let mut entries: Vec<Arc<super::exact::Entry>> = Vec::new();
        entries
            .try_reserve_exact(self.slots.len())
            .map_err(|_| Error::AllocationFailed {
                bytes: self.slots.len() as u64 * 8,
            })?;
        entries.extend(self.slots.iter().map(ArcCell::load));
        let bitmap_bytes = self.slots.len().div_ceil(64) as u64 * 8;
        let (mut records, mut key_bytes) = (0u64, 0u64);
        for key in entries.iter().filter_map(|e| e.as_deref()) {
            // A key's length is a `u32` in the format: refused before anything is written.
            if u32::try_from(key.len()).is_err() {
                return Err(Error::InvalidParameter(
                    "a key longer than 4 GiB cannot be saved",
                ));
            }
            records += 1;
            key_bytes += 4 + key.len() as u64;
        }
        let header = map_header(
            Kind::ExactOverwriteMap,
            self.slots.len() as u64,
            bitmap_bytes + key_bytes,
            records,
            identity_of(&self.hasher),
        );
        write_file(out, &header, |chunks| {
            for part in entries.chunks(64) {
                let word = part
                    .iter()
                    .enumerate()
                    .filter(|(_, e)| e.is_some())
                    .fold(0u64, |w, (i, _)| w | 1 << i);
                chunks.write(&word.to_le_bytes())?;
            }
            for key in entries.iter().filter_map(|e| e.as_deref()) {
                chunks.write(&(key.len() as u32).to_le_bytes())?;
                chunks.write(key)?;
            }
            Ok(())
        })
    }
}

impl<H> ExactOverwriteMap<H> {
    fn read_payload<R: Read>(
        header: &Header,
        checked: bool,
        payload: &mut ChunkReader<R>,
        hasher: H,
    ) -> Result<Self, Error> {
        let buckets = map_buckets(header, core::mem::size_of::<ArcCell<super::exact::Entry>>())?;
        let bitmap_words = buckets.div_ceil(64);
        let bitmap_bytes = bitmap_words as u64 * 8;
        // Each record is at least its 4-byte length.
        let least = header
            .records
            .checked_mul(4)
            .and_then(|keys| keys.checked_add(bitmap_bytes));
        if least.is_none_or(|least| least > header.payload_bytes) || header.records > header.blocks
        {
            return Err(bad_header(
                "payload length disagrees with the buckets and the keys (records)",
            ));
        }
        let bitmap = read_boxed_slice(
            bitmap_words,
            checked,
            |bytes| payload.read_exact(bytes),
            |bytes| u64::from_le_bytes(*bytes),
        )?;
        let occupied: u64 = bitmap.iter().map(|w| u64::from(w.count_ones())).sum();
        let spare = bitmap_words * 64 - buckets;
        if occupied != header.records
            || (spare > 0 && bitmap[bitmap_words - 1] >> (64 - spare) != 0)
        {
            return Err(bad_header(
                "occupied slots of the bitmap disagree with the buckets and the keys (records)",
            ));
        }
        let empty: Arc<super::exact::Entry> = Arc::new(None);
        // The table: one pointer per bucket, bounded by the bitmap's bytes (read above) times 64.
        let mut slots = Vec::new();
        slots
            .try_reserve_exact(buckets)
            .map_err(|_| Error::AllocationFailed {
                bytes: buckets as u64 * 8,
            })?;
        let mut left = header.payload_bytes - bitmap_bytes;
        for i in 0..buckets {
            if bitmap[i / 64] >> (i % 64) & 1 == 0 {
                slots.push(ArcCell::new(Arc::clone(&empty)));
                continue;
            }
            let mut len = [0u8; 4];
            payload.read_exact(&mut len)?;
            let len = u64::from(u32::from_le_bytes(len));
            left = left
                .checked_sub(4 + len)
                .ok_or(bad_header("a key runs past the end of the payload"))?;
            let key = payload.read_vec(len as usize)?;
            slots.push(ArcCell::new(Arc::new(Some(key.into_boxed_slice()))));
        }
        if left != 0 {
            return Err(bad_header("payload longer than its keys"));
        }
        Ok(Self {
            slots: slots.into_boxed_slice(),
            empty,
            hasher,
        })
    }
}
