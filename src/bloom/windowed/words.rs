//! The window's bits: one flat run of `AtomicU64` words whose first word starts a 64-byte
//! cache line. Flat, unlike the other filters' lines, because a block of `G + 1` words (9 or
//! more) straddles lines: a lookup takes the block's words as one array, with one bounds check,
//! wherever it starts.

use crate::Error;
use crate::bits::{LINE_WORDS, read_boxed_slice, try_boxed_slice};
use crate::sync::{AtomicU64, Ordering::Relaxed};

/// `len` words, the first at a cache line's start (the allocation holds up to 7 more before it).
pub(crate) struct Words {
    words: Box<[AtomicU64]>,
    /// The index in `words` of word 0: the first on a 64-byte boundary.
    start: usize,
    len: usize,
}

/// The first index of `words` whose word starts a 64-byte line (0 when none does, which only a
/// model checker's atomics, larger than 8 bytes, can give).
fn aligned_start(words: &[AtomicU64]) -> usize {
    words
        .iter()
        .take(LINE_WORDS)
        .position(|word| core::ptr::from_ref(word).addr() % 64 == 0)
        .unwrap_or(0)
}

impl Words {
    /// `len` zero words, or [`Error::AllocationFailed`].
    pub(super) fn new(len: usize) -> Result<Self, Error> {
        let words = try_boxed_slice(len + LINE_WORDS - 1, || AtomicU64::new(0))?;
        let start = aligned_start(&words);
        Ok(Self { words, start, len })
    }

    /// `len` words read through `next` as [`AtomicBits::read_lines`](crate::bits::AtomicBits)
    /// reads lines (little-endian, the allocation growing with what arrives unless
    /// `length_checked`), then moved up to the first line boundary of the allocation.
    pub(super) fn read(
        len: usize,
        length_checked: bool,
        mut next: impl FnMut(&mut [u8]) -> Result<(), Error>,
    ) -> Result<Self, Error> {
        // The input's `len` words, then the room for the alignment, as zeros.
        let mut left = len * 8;
        let words = read_boxed_slice(
            len + LINE_WORDS - 1,
            length_checked,
            |buf: &mut [u8]| {
                let take = left.min(buf.len());
                next(&mut buf[..take])?;
                buf[take..].fill(0);
                left -= take;
                Ok(())
            },
            |bytes: &[u8; 8]| AtomicU64::new(u64::from_le_bytes(*bytes)),
        )?;
        let start = aligned_start(&words);
        if start != 0 {
            for i in (0..len).rev() {
                words[start + i].store(words[i].load(Relaxed), Relaxed);
            }
            words[..start]
                .iter()
                .for_each(|word| word.store(0, Relaxed));
        }
        Ok(Self { words, start, len })
    }

    /// The number of words.
    #[inline]
    pub(super) fn words(&self) -> usize {
        self.len
    }

    /// Word `index` (of `words()`).
    #[inline]
    pub(super) fn word(&self, index: usize) -> &AtomicU64 {
        &self.words[self.start + index]
    }

    /// The `S` words from `base` on, with one bounds check.
    #[inline(always)]
    pub(super) fn block<const S: usize>(&self, base: usize) -> &[AtomicU64; S] {
        self.words[self.start + base..]
            .first_chunk()
            .expect("a block within the words")
    }

    /// The `len` words from `base` on.
    #[inline(always)]
    pub(super) fn run(&self, base: usize, len: usize) -> &[AtomicU64] {
        let at = self.start + base;
        &self.words[at..at + len]
    }

    /// Every word's value, in order (a Relaxed snapshot, word by word).
    pub(super) fn iter_words(&self) -> impl Iterator<Item = u64> + '_ {
        self.words[self.start..self.start + self.len]
            .iter()
            .map(|word| word.load(Relaxed))
    }
}

#[cfg(all(test, not(seen_loom)))]
mod tests {
    use super::*;

    /// Word 0 starts a cache line, however the allocation falls, and a read puts every word
    /// where it was written, whatever the length and the batches of the input.
    #[test]
    fn the_first_word_starts_a_line_and_reads_keep_every_word() {
        for len in [8, 9, 80, 5000] {
            let w = Words::new(len).unwrap();
            assert_eq!(core::ptr::from_ref(w.word(0)).addr() % 64, 0);
            assert_eq!(w.words(), len);
            let bytes: Vec<u8> = (0..len as u64)
                .flat_map(|i| (i * 0x9e37_79b9 + 1).to_le_bytes())
                .collect();
            for checked in [false, true] {
                let mut at = 0;
                let r = Words::read(len, checked, |buf| {
                    buf.copy_from_slice(&bytes[at..at + buf.len()]);
                    at += buf.len();
                    Ok(())
                })
                .unwrap();
                assert_eq!(at, bytes.len());
                assert_eq!(core::ptr::from_ref(r.word(0)).addr() % 64, 0);
                let read: Vec<u64> = r.iter_words().collect();
                let want: Vec<u64> = (0..len as u64).map(|i| i * 0x9e37_79b9 + 1).collect();
                assert_eq!(read, want);
                assert_eq!(r.block::<8>(len - 8)[7].load(Relaxed), want[len - 1]);
            }
        }
    }
}
