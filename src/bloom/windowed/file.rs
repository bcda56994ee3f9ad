//! Saving and loading the [`WindowedBloomFilter`] in the crate's [file format](crate::docs::format)
//! (kind 5): the header's Bloom fields for one generation's probe and the window's rates, then a
//! 64-byte window record (the generations, the rotation, the clock's kind, the current
//! generation's number and where the count or the clock stands), then the bits, the spare
//! written as zeros.

use std::io::{Read, Write};

use core::time::Duration;

use super::{LAST_GENERATION, Rotation, RotationState, WindowedBloomFilter, Words};
use crate::bloom::file::{bloom_parameters, line_bits};
use crate::clock::{Clock, SystemClock, TimeBase, as_nanos};
use crate::hash::{HasherIdentity, ItemHasher};
use crate::persist::format::{CHUNK_BYTES, ChunkReader, Header, Kind};
use crate::persist::{bad_header, identity_of, write_file};
use crate::sizing::{
    BlockedSizing, FILE_RATE_SLACK, MAX_GENERATIONS, WindowSizing, generation_fpr,
    stride_words as stride_words_of, window_fpr,
};
use crate::sync::Ordering::Relaxed;
use crate::{Error, Layout};

/// The window record's length: the first bytes of the payload.
const RECORD_BYTES: u64 = 64;

/// The rotation modes' numbers in the record. Values are part of the format.
const AFTER_INSERTS: u32 = 1;
const EVERY: u32 = 2;
const EVERY_ALIGNED: u32 = 3;
const MANUAL: u32 = 4;

/// The generation numbers a file may hold: below 2^63 (a filter rotating every nanosecond
/// reaches it in 292 years), so that the loaded filter's `epoch + 1` never overflows. A filter
/// does not rotate past the last of them.
const MAX_EPOCH: u64 = LAST_GENERATION + 1;

/// The time bases' numbers in the record (the `clock` field). Values are part of the format.
const CLOCK_UNKNOWN: u32 = 0;
const CLOCK_WALL: u32 = 1;
const CLOCK_OTHER: u32 = 2;

/// A windowed filter's header: the Bloom fields of one generation (layout, `k`, the items per
/// period, the blocks), the window's target and expected rates, the record and the bits.
fn window_header(sizing: &WindowSizing, hasher: Option<HasherIdentity>) -> Header {
    Header {
        kind: Kind::WindowedBloom,
        layout: Some(Layout::Word),
        hashes: sizing.generation.hashes,
        capacity: sizing.generation.capacity,
        fpr: sizing.fpr,
        expected_fpr: sizing.expected_fpr,
        blocks: sizing.generation.blocks,
        payload_bytes: RECORD_BYTES + sizing.bytes(),
        chunk_bytes: CHUNK_BYTES,
        records: 0,
        hasher,
    }
}

/// The window record: what the header does not say about the window, little-endian.
fn encode_record(
    sizing: &WindowSizing,
    rotation: Rotation,
    time_base: TimeBase,
    state: RotationState,
) -> [u8; 64] {
    let clock = match time_base {
        TimeBase::Unknown => CLOCK_UNKNOWN,
        TimeBase::Wall => CLOCK_WALL,
        TimeBase::Other => CLOCK_OTHER,
    };
    let (mode, value) = match rotation {
        Rotation::AfterInserts(n) => (AFTER_INSERTS, n),
        Rotation::Every(p) => (EVERY, as_nanos(p)),
        Rotation::EveryAligned(p) => (EVERY_ALIGNED, as_nanos(p)),
        Rotation::Manual => (MANUAL, 0),
    };
    let mut record = [0u8; 64];
    let mut at = 0;
    let mut put = |bytes: &[u8]| {
        record[at..at + bytes.len()].copy_from_slice(bytes);
        at += bytes.len();
    };
    put(&sizing.generations.to_le_bytes());
    put(&sizing.stride_words.to_le_bytes());
    put(&state.epoch.to_le_bytes());
    put(&mode.to_le_bytes());
    put(&clock.to_le_bytes());
    put(&value.to_le_bytes());
    put(&state.next_due.to_le_bytes());
    put(&state.counted.to_le_bytes());
    put(&sizing.generation_fpr.to_bits().to_le_bytes());
    put(&sizing.generation.expected_fpr.to_bits().to_le_bytes());
    record
}

/// What a window record holds, each field checked against its range and the others.
struct Record {
    generations: u32,
    stride_words: u32,
    rotation: Rotation,
    time_base: TimeBase,
    state: RotationState,
    generation_fpr: f64,
    generation_expected_fpr: f64,
}

impl Record {
    /// The record of a payload whose bits are `stride` words per block.
    fn parse(bytes: &[u8; 64], stride: u64) -> Result<Self, Error> {
        let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4"));
        let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8"));
        let generations = u32_at(0);
        if !(1..=MAX_GENERATIONS).contains(&generations) {
            return Err(bad_header("generations outside 1..=63"));
        }
        let stride_words = u32_at(4);
        // What the crate writes (`stride_words`: the slots to a power of two up to 8, exactly
        // the slots from 9), or the slots to a power of two from 9 (what it wrote before
        // blocks were packed).
        let padded = (generations + 1).next_power_of_two();
        if stride_words != stride_words_of(generations) && stride_words != padded {
            return Err(bad_header(
                "words per block other than the generations plus one (from 8 generations) or that \
                 to a power of two",
            ));
        }
        if u64::from(stride_words) != stride {
            return Err(bad_header(
                "payload length disagrees with the blocks and the words per block",
            ));
        }
        let epoch = u64_at(8);
        if epoch >= MAX_EPOCH {
            return Err(bad_header("generation number of 2^63 or more"));
        }
        let (mode, value) = (u32_at(16), u64_at(24));
        let time_base = match u32_at(20) {
            CLOCK_UNKNOWN => TimeBase::Unknown,
            CLOCK_WALL => TimeBase::Wall,
            CLOCK_OTHER => TimeBase::Other,
            _ => return Err(bad_header("unknown clock")),
        };
        let (next_due, counted) = (u64_at(32), u64_at(40));
        let rotation = match mode {
            AFTER_INSERTS if value == 0 => return Err(bad_header("a rotation after 0 items")),
            AFTER_INSERTS => Rotation::AfterInserts(value),
            EVERY | EVERY_ALIGNED if value == 0 => {
                return Err(bad_header("a rotation period of 0"));
            }
            EVERY => Rotation::Every(Duration::from_nanos(value)),
            // The rotation times of an aligned period are its multiples (or saturated).
            EVERY_ALIGNED if next_due % value != 0 && next_due != u64::MAX => {
                return Err(bad_header("an aligned rotation time off its period"));
            }
            EVERY_ALIGNED => Rotation::EveryAligned(Duration::from_nanos(value)),
            MANUAL if value != 0 => {
                return Err(bad_header("a period or count of a manual rotation"));
            }
            MANUAL => Rotation::Manual,
            _ => return Err(bad_header("unknown rotation mode")),
        };
        if !matches!(mode, EVERY | EVERY_ALIGNED) && next_due != u64::MAX {
            return Err(bad_header("a rotation time without a rotation by time"));
        }
        if mode != AFTER_INSERTS && counted != 0 {
            return Err(bad_header("a count without a rotation by count"));
        }
        if counted >= MAX_EPOCH {
            // A generation counts at most its count plus what arrives before the rotation.
            return Err(bad_header("new items counted beyond 2^63"));
        }
        let generation_fpr = f64::from_bits(u64_at(48));
        if !(generation_fpr > 0.0 && generation_fpr < 1.0) {
            return Err(bad_header("generation false-positive rate outside (0, 1)"));
        }
        let generation_expected_fpr = f64::from_bits(u64_at(56));
        if !(0.0..=1.0).contains(&generation_expected_fpr) {
            return Err(bad_header(
                "generation expected false-positive rate outside [0, 1]",
            ));
        }
        Ok(Self {
            generations,
            stride_words,
            rotation,
            time_base,
            state: RotationState {
                epoch,
                counted,
                next_due,
            },
            generation_fpr,
            generation_expected_fpr,
        })
    }
}

/// The words per block that a header's payload length implies (a power of two from 2 to 64,
/// or 9 to 64),
/// after checking the fields the bits depend on; `Error::TooLarge` for bits this machine
/// cannot hold. Checked before anything is read past the header.
fn words_per_block(header: &Header) -> Result<u64, Error> {
    if bloom_parameters(header)? != Layout::Word {
        return Err(bad_header("a windowed filter of another layout than words"));
    }
    if header.blocks == 0 {
        return Err(bad_header("no blocks"));
    }
    if !header.blocks.is_multiple_of(8) {
        return Err(bad_header("word blocks that are not whole cache lines"));
    }
    if header.records != 0 {
        return Err(bad_header("records in a windowed filter"));
    }
    let mismatch = || bad_header("payload length disagrees with the blocks and the generations");
    let bits_bytes = header
        .payload_bytes
        .checked_sub(RECORD_BYTES)
        .ok_or_else(mismatch)?;
    let slot_bytes = header.blocks.checked_mul(8).ok_or_else(mismatch)?;
    let stride = bits_bytes / slot_bytes;
    // A power of two (2 to 64), or a block of 9 or more slots, packed.
    if bits_bytes % slot_bytes != 0
        || !(2..=u64::from(MAX_GENERATIONS + 1)).contains(&stride)
        || !(stride.is_power_of_two() || stride > 8)
    {
        return Err(mismatch());
    }
    line_bits(header.blocks / 8 * stride)?;
    Ok(stride)
}

/// One generation's sizing, from the header's Bloom fields and the record's rates, after
/// checking the window's fields against each other as [`window`](crate::sizing::window) makes
/// them agree: the rate each generation is sized for is `1 - (1 - fpr)^(1/G)` of the header's
/// target and the record's `G`, the header's expected rate `1 - (1 - e)^G` of the record's
/// generation rate `e`, each within a relative [`FILE_RATE_SLACK`] (a platform's math library
/// may differ from the writer's by an ulp), and the generation's fields are a sizing the crate
/// builds ([`BlockedSizing::check_built`]). Checked before the bits are read.
fn generation_sizing(header: &Header, record: &Record) -> Result<BlockedSizing, Error> {
    let near = |a: f64, b: f64| (a - b).abs() <= b * FILE_RATE_SLACK;
    if !near(
        record.generation_fpr,
        generation_fpr(header.fpr, record.generations),
    ) {
        return Err(bad_header(
            "generation false-positive rate other than 1 - (1 - fpr)^(1/G) of the target \
             rate and the generations",
        ));
    }
    if !near(
        header.expected_fpr,
        window_fpr(record.generation_expected_fpr, record.generations),
    ) {
        return Err(bad_header(
            "expected false-positive rate of the window other than that of the generations \
             at the generation's expected rate",
        ));
    }
    let generation = BlockedSizing {
        layout: Layout::Word,
        capacity: header.capacity,
        fpr: record.generation_fpr,
        bits: header.blocks * 64,
        blocks: header.blocks,
        hashes: header.hashes,
        expected_fpr: record.generation_expected_fpr,
    };
    generation.check_built().map_err(bad_header)?;
    Ok(generation)
}

impl<H: ItemHasher, C: Clock> WindowedBloomFilter<H, C> {
    /// Writes the filter to `out` in the crate's [file format](crate::docs::format): its
    /// parameters, its hasher's [identity](ItemHasher::identity), its rotation (mode, the
    /// current generation's number, the new items counted, the next rotation time) and its
    /// bits, in checksummed chunks, streaming (no copy of the bits is made). `out` is not
    /// buffered here: wrap a file in a [`std::io::BufWriter`] (or use [`save`](Self::save)).
    ///
    /// Runs on `&self`, concurrently with inserts and lookups on other threads, and holds the
    /// rotation lock while it writes: **every insert that happened before `write_to` began is
    /// in the output** while its generation is live at the saved generation (an insert that
    /// returned `true` in generation `e` is saved up to generation `e + periods`, as the filter
    /// keeps it). Inserts racing with the write may be in it, whole or in part (extra set
    /// bits, never a lost item). No rotation happens meanwhile: [`rotate`](Self::rotate)
    /// returns `None`, [`maintain`](Self::maintain) and the inserts that would rotate skip it,
    /// and the next of them rotates (`maintain` catches up every period missed); inserts and
    /// lookups never wait. A rotation running when the save begins finishes first. (So `out`
    /// must not save this filter itself: that save would wait for this one.)
    ///
    /// The spare generation is written as zeros (it holds no live item, and other threads
    /// may be clearing it), so a loaded filter's spare is clear and its next rotation is
    /// O(1).
    ///
    /// Loading ([`load`](Self::load), [`read_from`](Self::read_from)) restores the bits, the
    /// generation number, the rotation mode, the count, the next rotation time and the
    /// [`time_base`](Self::time_base); the loaded filter reads the [`SystemClock`]
    /// ([`with_clock`](Self::with_clock) puts another in its place and keeps the time base).
    /// A time-mode filter loaded after its next rotation time catches up at its next
    /// [`maintain`](Self::maintain): one rotation per period missed, up to `periods + 1`, so a
    /// file older than the whole window comes back with no live item.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when writing fails; what was written is then not a whole file.
    ///
    /// # Examples
    ///
    /// ```
    /// use seen::WindowedBloomFilter;
    /// let f = WindowedBloomFilter::builder(1000).periods(2).rotate_manually().build()?;
    /// f.insert("old");
    /// f.rotate();
    /// f.insert("new");
    /// let mut file = Vec::new();
    /// f.write_to(&mut file)?;
    /// let loaded = WindowedBloomFilter::read_from(&file[..])?;
    /// assert_eq!(loaded.generation(), 1);
    /// assert!(loaded.contains("old") && loaded.contains("new"));
    /// loaded.rotate();
    /// loaded.rotate();
    /// assert!(!loaded.contains("old") && loaded.contains("new"));
    /// # Ok::<(), seen::Error>(())
    /// ```
    pub fn write_to<W: Write>(&self, out: W) -> Result<(), Error> {
        // Held to the end: no generation is retired (and so none is cleared) but the spare.
        let _rotation = self.rotating.lock();
        // Relaxed: only a holder of the lock publishes a generation, and the lock's Acquire
        // follows the last one's release.
        let state = RotationState {
            epoch: self.epoch.load(Relaxed),
            counted: self.counted.load(Relaxed),
            next_due: self.next_due.load(Relaxed),
        };
        let header = window_header(&self.sizing, identity_of(&self.hasher));
        write_file(out, &header, |chunks| {
            let record = encode_record(&self.sizing, self.rotation, self.time_base, state);
            chunks.write(&record)?;
            self.write_live_words(state.epoch, &mut |bytes| chunks.write(bytes))
        })
    }

    /// Hands every word to `out`, little-endian, in order, a few thousand at a time: the live
    /// generations' words of generation `epoch` as read (one Relaxed load each), the spare's
    /// and the padding's as zeros.
    fn write_live_words(
        &self,
        epoch: u64,
        out: &mut dyn FnMut(&[u8]) -> Result<(), Error>,
    ) -> Result<(), Error> {
        const BATCH: usize = 8 << 10;
        let live = self.live(epoch);
        let mut buf = Vec::with_capacity(BATCH + 8 * self.stride);
        for base in (0..self.bits.words()).step_by(self.stride) {
            for slot in 0..self.stride {
                let word = if live >> slot & 1 == 1 {
                    self.bits.word(base + slot).load(Relaxed)
                } else {
                    0
                };
                buf.extend_from_slice(&word.to_le_bytes());
            }
            if buf.len() >= BATCH {
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

impl<H: ItemHasher> WindowedBloomFilter<H> {
    /// The filter a windowed filter file's payload holds
    /// ([`read_file`](crate::persist::read_file)), with the [`SystemClock`].
    fn read_payload<R: Read>(
        header: &Header,
        checked: bool,
        payload: &mut ChunkReader<R>,
        hasher: H,
    ) -> Result<Self, Error> {
        let stride = words_per_block(header)?;
        let mut bytes = [0u8; RECORD_BYTES as usize];
        payload.read_exact(&mut bytes)?;
        let record = Record::parse(&bytes, stride)?;
        let generation = generation_sizing(header, &record)?;
        // Checked by `words_per_block`: the bits are fewer than this machine addresses.
        let lines = (header.blocks / 8 * stride) as usize;
        let bits = Words::read(lines * 8, checked, |words| payload.read_exact(words))?;
        let slots = u64::from(record.generations) + 1;
        let spare = (record.state.epoch + 1) % slots;
        let dead = bits.iter_words().enumerate().any(|(i, word)| {
            let slot = i as u64 % stride;
            word != 0 && (slot == spare || slot >= slots)
        });
        if dead {
            return Err(bad_header(
                "set bits in the spare generation or the padding",
            ));
        }
        let sizing = WindowSizing {
            generation,
            generations: record.generations,
            stride_words: record.stride_words,
            fpr: header.fpr,
            generation_fpr: record.generation_fpr,
            expected_fpr: header.expected_fpr,
            bits: lines as u64 * 512,
        };
        Ok(Self::from_parts(
            sizing,
            bits,
            hasher,
            (SystemClock, record.time_base),
            record.rotation,
            record.state,
        ))
    }
}

crate::persist::file_methods!(
    WindowedBloomFilter<C: Clock>,
    Kind::WindowedBloom,
    "use seen::WindowedBloomFilter;
let path = std::env::temp_dir().join(format!(\"seen-doc-window-{}.seen\", std::process::id()));
let filter = WindowedBloomFilter::builder(1000).periods(2).rotate_after(500).build()?;
filter.insert(\"a\");
filter.save(&path)?;
let loaded = WindowedBloomFilter::load(&path)?;
assert!(loaded.contains(\"a\") && !loaded.contains(\"b\"));
assert_eq!((loaded.generation(), loaded.rotation()), (0, seen::builder::Rotation::AfterInserts(500)));
let mut bytes = Vec::new();
filter.write_to(&mut bytes)?;
assert_eq!(WindowedBloomFilter::read_from(&bytes[..])?.sizing(), filter.sizing());
std::fs::remove_file(&path).unwrap();"
);

#[cfg(all(test, not(seen_loom)))]
mod tests {
    use super::*;
    use crate::hash::StableHasher;
    use crate::sizing::window;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        /// Every window the crate sizes (items per period 1 to 1e12, 1 to 63 generations,
        /// rates 1e-30 to 0.99, half of them above 3e-5; those below the word layout's limit
        /// are refused by the sizing) writes a header and a
        /// record that pass the checks of a load, and the generation comes back unchanged.
        /// Headers only: nothing of that size is allocated.
        #[test]
        fn every_window_header_the_crate_writes_passes_its_checks(
            items in (0.0f64..12.0).prop_map(|e| 10f64.powf(e) as u64),
            generations in prop_oneof![Just(1u32), Just(MAX_GENERATIONS), 1..=MAX_GENERATIONS],
            fpr in prop_oneof![-30.0f64..-0.0044, -4.5f64..-0.0044].prop_map(|e| 10f64.powf(e)),
        ) {
            let Ok(sizing) = window(items, generations, fpr) else {
                return Ok(());
            };
            let header = window_header(&sizing, StableHasher::new().identity());
            let stride = words_per_block(&header).unwrap();
            let state = RotationState { epoch: 0, counted: 0, next_due: u64::MAX };
            let record = Record::parse(&encode_record(&sizing, Rotation::Manual, TimeBase::Unknown, state), stride)
                .unwrap();
            prop_assert_eq!(generation_sizing(&header, &record), Ok(sizing.generation));
        }
    }
}
