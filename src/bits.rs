//! The atomic bitset under the Bloom filters: `AtomicU64` words in cache-line-aligned groups of 8.

use crate::Error;
use crate::sync::{AtomicU64, Ordering};

/// Words per cache line (64 bytes).
pub(crate) const LINE_WORDS: usize = 8;

/// One 64-byte cache line of bits, aligned so that a block never straddles two lines.
#[repr(align(64))]
pub(crate) struct Line(pub(crate) [AtomicU64; LINE_WORDS]);

impl Line {
    fn new() -> Self {
        Self(core::array::from_fn(|_| AtomicU64::new(0)))
    }
}

/// `len` values made by `make`, or [`Error::AllocationFailed`] instead of an abort when the
/// allocator cannot provide them.
pub(crate) fn try_boxed_slice<T>(len: usize, make: impl FnMut() -> T) -> Result<Box<[T]>, Error> {
    let mut v: Vec<T> = Vec::new();
    v.try_reserve_exact(len)
        .map_err(|_| Error::AllocationFailed {
            bytes: (len as u64).saturating_mul(core::mem::size_of::<T>() as u64),
        })?;
    v.extend(core::iter::repeat_with(make).take(len));
    Ok(v.into_boxed_slice())
}

/// Whether the allocator would grant `bytes` in one piece: reserves them (without touching
/// them) and frees them at once. [`Error::AllocationFailed`] if not.
pub(crate) fn probe_allocation(bytes: usize) -> Result<(), Error> {
    Vec::<u8>::new()
        .try_reserve_exact(bytes)
        .map_err(|_| Error::AllocationFailed {
            bytes: bytes as u64,
        })
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

    /// The number of set bits (word by word, see [`iter_words`](Self::iter_words)).
    pub(crate) fn count_ones(&self) -> u64 {
        self.iter_words().map(|w| u64::from(w.count_ones())).sum()
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
