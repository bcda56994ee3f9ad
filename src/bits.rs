//! The atomic bitset under the Bloom filters: `AtomicU64` words in cache-line-aligned groups of 8.

use crate::Error;
use crate::os::HUGE_PAGE_MIN_BYTES;
use crate::sync::{AtomicU64, Ordering};

/// Words per cache line (64 bytes).
pub(crate) const LINE_WORDS: usize = 8;

/// A counter every writer touches gets cache lines of its own, so that it does not share one
/// with read-mostly fields: crossbeam's `CachePadded`, which pads to 128 bytes on x86-64 and
/// aarch64 (their prefetchers fetch lines in adjacent pairs) and to each other platform's line.
pub(crate) use crossbeam_utils::CachePadded;

/// One 64-byte cache line of bits, aligned so that a block never straddles two lines.
#[repr(align(64))]
pub(crate) struct Line(pub(crate) [AtomicU64; LINE_WORDS]);

impl Line {
    fn new() -> Self {
        Self(core::array::from_fn(|_| AtomicU64::new(0)))
    }

    /// The line whose words are these 64 bytes, little-endian.
    fn from_le_bytes(bytes: &[u8; 64]) -> Self {
        Self(core::array::from_fn(|i| {
            let word: [u8; 8] = bytes[i * 8..i * 8 + 8].try_into().expect("8 bytes");
            AtomicU64::new(u64::from_le_bytes(word))
        }))
    }
}

/// What a read from a stream of unknown length allocates at first: 64 KiB. Then the allocation
/// doubles as the values arrive, so it never exceeds twice what the stream delivered.
const FIRST_READ_BYTES: usize = 64 << 10;

/// `len` values made by `make`, or [`Error::AllocationFailed`] instead of an abort when the
/// allocator cannot provide them. A table of [`HUGE_PAGE_MIN_BYTES`] or more is advised onto
/// huge pages before it is first written ([`crate::os`]).
pub(crate) fn try_boxed_slice<T>(len: usize, make: impl FnMut() -> T) -> Result<Box<[T]>, Error> {
    let mut v: Vec<T> = Vec::new();
    v.try_reserve_exact(len)
        .map_err(|_| Error::AllocationFailed {
            bytes: (len as u64).saturating_mul(core::mem::size_of::<T>() as u64),
        })?;
    let bytes = len.saturating_mul(core::mem::size_of::<T>());
    if bytes >= HUGE_PAGE_MIN_BYTES {
        // The address only: the spare capacity is not read or written here.
        crate::os::advise_huge_pages(v.spare_capacity_mut().as_ptr() as usize, bytes);
    }
    v.extend(core::iter::repeat_with(make).take(len));
    Ok(v.into_boxed_slice())
}

/// `len` values, each made by `make` from `N` bytes of what `next` reads (`next` fills the
/// slice it is given, a batch of up to 16 KiB at a time). When `length_checked` (the input is
/// known to hold them all), the whole table is allocated at once (and advised onto huge pages);
/// otherwise the allocation grows as the values arrive, so an input whose header promises more
/// than it holds fails with `next`'s error having cost at most twice what it delivered.
pub(crate) fn read_boxed_slice<T, const N: usize>(
    len: usize,
    length_checked: bool,
    mut next: impl FnMut(&mut [u8]) -> Result<(), Error>,
    make: impl Fn(&[u8; N]) -> T,
) -> Result<Box<[T]>, Error> {
    const BATCH_BYTES: usize = 16 << 10;
    let batch = (BATCH_BYTES / N).max(1);
    let first = (FIRST_READ_BYTES / N).max(1);
    let mut v: Vec<T> = Vec::new();
    let mut bytes = vec![0u8; batch.min(len) * N];
    while v.len() < len {
        if v.len() == v.capacity() {
            let want = if length_checked {
                len
            } else {
                (v.capacity() * 2).max(first).min(len)
            };
            v.try_reserve_exact(want - v.len())
                .map_err(|_| Error::AllocationFailed {
                    bytes: (want as u64).saturating_mul(core::mem::size_of::<T>() as u64),
                })?;
            let spare = (v.capacity() - v.len()) * core::mem::size_of::<T>();
            if spare >= HUGE_PAGE_MIN_BYTES {
                crate::os::advise_huge_pages(v.spare_capacity_mut().as_ptr() as usize, spare);
            }
        }
        let take = batch.min(len - v.len()).min(v.capacity() - v.len());
        let buf = &mut bytes[..take * N];
        next(buf)?;
        v.extend(
            buf.chunks_exact(N)
                .map(|value| make(value.try_into().expect("N bytes"))),
        );
    }
    Ok(v.into_boxed_slice())
}

/// A fixed-size array of atomic bits, allocated in whole cache lines.
pub(crate) struct AtomicBits {
    lines: Box<[Line]>,
}

impl AtomicBits {
    /// All-zero bits, `lines` cache lines of 512 bits.
    ///
    /// Returns [`Error::AllocationFailed`] instead of aborting when the memory is not there.
    pub(crate) fn new(lines: usize) -> Result<Self, Error> {
        Ok(Self {
            lines: try_boxed_slice(lines, Line::new)?,
        })
    }

    /// The number of 64-bit words.
    #[inline]
    pub(crate) fn words(&self) -> usize {
        self.lines.len() * LINE_WORDS
    }

    /// Line `index`. Panics if out of range (callers compute indices below `lines()`).
    #[inline]
    pub(crate) fn line(&self, index: usize) -> &Line {
        &self.lines[index]
    }

    /// Word `index` (of `words()`).
    #[inline]
    pub(crate) fn word(&self, index: usize) -> &AtomicU64 {
        &self.lines[index / LINE_WORDS].0[index % LINE_WORDS]
    }

    /// Every word's value, in order (a Relaxed snapshot, word by word: not atomic as a whole).
    pub(crate) fn iter_words(&self) -> impl Iterator<Item = u64> + '_ {
        self.lines
            .iter()
            .flat_map(|line| line.0.iter().map(|w| w.load(Ordering::Relaxed)))
    }

    /// Hands every word to `out`, little-endian, a few thousand at a time: one Relaxed load per
    /// word, in order (not a snapshot as a whole: see the savers' docs for what that keeps).
    pub(crate) fn write_words(
        &self,
        mut out: impl FnMut(&[u8]) -> Result<(), Error>,
    ) -> Result<(), Error> {
        const BATCH: usize = 8 << 10;
        let mut buf = Vec::with_capacity(BATCH);
        for line in self.lines.iter() {
            for word in &line.0 {
                buf.extend_from_slice(&word.load(Ordering::Relaxed).to_le_bytes());
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

    /// `lines` lines read through `next`, 64 bytes at a time ([`read_boxed_slice`]).
    pub(crate) fn read_lines(
        lines: usize,
        length_checked: bool,
        next: impl FnMut(&mut [u8]) -> Result<(), Error>,
    ) -> Result<Self, Error> {
        Ok(Self {
            lines: read_boxed_slice(lines, length_checked, next, Line::from_le_bytes)?,
        })
    }

    /// A second table with the same bits (Relaxed loads, word by word: the caller keeps
    /// writers away).
    pub(crate) fn try_clone(&self) -> Result<Self, Error> {
        let mut words = self.iter_words();
        let lines = try_boxed_slice(self.lines.len(), || {
            Line(core::array::from_fn(|_| {
                AtomicU64::new(words.next().expect("as many words as lines hold"))
            }))
        })?;
        Ok(Self { lines })
    }

    /// Clears every bit. Takes `&mut self`: no insert can race with it.
    pub(crate) fn clear(&mut self) {
        for line in self.lines.iter_mut() {
            for word in &mut line.0 {
                word.store(0, Ordering::Relaxed);
            }
        }
    }
}

#[cfg(all(test, not(seen_loom), target_os = "linux"))]
mod tests {
    use super::*;
    use crate::os::{huge_kib_at, huge_pages_enabled};

    /// A table past the threshold lands on huge pages where the kernel offers them (the test
    /// reads this process's own mappings); one below it, and any table where the kernel does
    /// not, works the same on small pages.
    #[test]
    fn large_tables_are_advised_onto_huge_pages() {
        let lines = (64 << 20) / 64;
        let mut bits = AtomicBits::new(lines).unwrap();
        let at = bits.lines.as_ptr() as usize;
        let huge = huge_kib_at(at).expect("this process's mappings are readable");
        if huge_pages_enabled() {
            // All but the partial 2 MiB regions at the ends, and then some slack for a kernel
            // short of free huge pages: at least half.
            assert!(huge >= 32 << 10, "{huge} KiB of 64 MiB on huge pages");
        } else {
            assert_eq!(huge, 0);
        }
        bits.word(lines * LINE_WORDS - 1)
            .fetch_or(1, Ordering::Relaxed);
        assert_eq!(bits.iter_words().map(u64::count_ones).sum::<u32>(), 1);
        bits.clear();
        assert_eq!(bits.iter_words().map(u64::count_ones).sum::<u32>(), 0);

        let small = AtomicBits::new((1 << 20) / 64).unwrap();
        let huge = huge_kib_at(small.lines.as_ptr() as usize).expect("readable");
        assert!(
            huge < 2048,
            "a 1 MiB table cannot hold a 2 MiB page: {huge} KiB"
        );
    }

    #[test]
    fn advice_on_a_range_that_is_not_mapped_is_refused_not_fatal() {
        // The first pages of the address space are never mapped.
        assert!(!crate::os::advise_huge_pages(4096, 4096));
        assert!(!crate::os::advise_huge_pages(4096, 0));
    }
}

#[cfg(all(test, not(seen_loom)))]
mod read_tests {
    use super::*;

    /// `len` values of `N` bytes each, byte `i` of the input being `i as u8`, read back through
    /// `read_boxed_slice` (checked and not): all of them from an input of exactly that length,
    /// `next`'s error from one a byte short.
    fn round_trip<const N: usize>(len: usize) {
        let input: Vec<u8> = (0..len * N).map(|i| i as u8).collect();
        for checked in [false, true] {
            let mut at = 0;
            let values = read_boxed_slice(
                len,
                checked,
                |buf| {
                    assert!(!buf.is_empty() && buf.len() % N == 0 && buf.len() <= 16 << 10);
                    buf.copy_from_slice(&input[at..at + buf.len()]);
                    at += buf.len();
                    Ok(())
                },
                |bytes: &[u8; N]| bytes.to_vec(),
            )
            .unwrap();
            assert_eq!(at, len * N, "N {N}, len {len}");
            assert_eq!(
                values.concat(),
                input,
                "N {N}, len {len}, checked {checked}"
            );
            // One byte short: `next`'s error, never a panic.
            if len > 0 {
                let mut at = 0;
                let short = read_boxed_slice(
                    len,
                    checked,
                    |buf| {
                        if at + buf.len() > len * N - 1 {
                            return Err(Error::Corrupt(crate::error::Corruption::Truncated));
                        }
                        at += buf.len();
                        Ok(())
                    },
                    |bytes: &[u8; N]| bytes[0],
                );
                assert!(short.is_err(), "N {N}, len {len}");
            }
        }
    }

    #[test]
    fn reads_every_value_across_batch_and_growth_boundaries() {
        fn lengths(n: usize) -> Vec<usize> {
            let batch = (16 << 10) / n;
            let first = FIRST_READ_BYTES / n;
            [0, 1, 2, batch - 1, batch, batch + 1, 3 * batch + 1]
                .into_iter()
                .chain([first - 1, first, first + 1, 2 * first + 1])
                .collect()
        }
        for len in lengths(8) {
            round_trip::<8>(len);
        }
        for len in lengths(16) {
            round_trip::<16>(len);
        }
        for len in lengths(64) {
            round_trip::<64>(len);
        }
    }
}
