//! The probe: where one item's bits are, computed once from its hash and the filter's sizing.
//! Every Bloom filter of the crate (atomic, frozen, semi-concurrent) reads and writes through it,
//! so a hash inserted in one is found at the same bits in another, and a file format that saves
//! the bits has one definition of their positions to pin.
//!
//! `h1` picks the block by multiply-shift ([`reduce`]: no `%`, uniform for any number of
//! blocks); `h2` is cut into 6-bit (word) or 9-bit (line) fields, lowest first, that pick the
//! `k` bit positions in the block (with replacement: a fixed, branch-free number of draws, whose
//! repeats the sizing model counts); when the fields run out, the next come from `remix(h2)`,
//! `remix(remix(h2))`, ...

use crate::Layout;
use crate::bits::LINE_WORDS;
use crate::hash::{Hash128, reduce, remix};
use crate::sizing::BlockedSizing;

/// One item's bits in a filter: its block and the masks to test or set there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Probe {
    /// [`Layout::Word`]: all bits in the word at this index.
    Word {
        /// The index of the word among the filter's words.
        word: usize,
        /// The bits, `k` draws (some may repeat).
        mask: u64,
    },
    /// [`Layout::Line`]: all bits in the cache line at this index, at the positions
    /// [`line_bits`] draws from `h2`.
    Line {
        /// The index of the line among the filter's lines.
        line: usize,
        /// The hash bits the positions are drawn from.
        h2: u64,
        /// How many positions.
        k: u32,
    },
}

impl Probe {
    /// The probe of `hash` in a filter of this sizing. Always inlined: the callers' loops then
    /// test the layout once, outside the loop, and keep the probe in registers.
    #[inline(always)]
    pub(crate) fn new(hash: Hash128, sizing: &BlockedSizing) -> Self {
        match sizing.layout {
            Layout::Word => {
                let (word, mask) = word_probe(hash, sizing);
                Self::Word { word, mask }
            }
            Layout::Line => Self::Line {
                line: block(hash, sizing),
                h2: hash.h2,
                k: sizing.hashes,
            },
        }
    }

    /// The index of the block's first word among the filter's words.
    #[inline]
    pub(crate) fn first_word(&self) -> usize {
        match *self {
            Self::Word { word, .. } => word,
            Self::Line { line, .. } => line * LINE_WORDS,
        }
    }

    /// Whether `words`, the block's words from [`first_word`](Self::first_word) on, hold every
    /// bit of the probe.
    #[inline]
    pub(crate) fn is_set_in(&self, words: &[u64]) -> bool {
        match *self {
            Self::Word { mask, .. } => words[0] & mask == mask,
            Self::Line { h2, k, .. } => {
                let line = &words[..LINE_WORDS];
                let mut all = 1;
                line_bits(h2, k, |word, bit| all &= line[word] >> bit);
                all & 1 == 1
            }
        }
    }

    /// Sets the probe's bits in `words`, the block's words from
    /// [`first_word`](Self::first_word) on.
    #[inline]
    #[cfg(all(test, not(seen_loom)))]
    pub(crate) fn set_in(&self, words: &mut [u64]) {
        match *self {
            Self::Word { mask, .. } => words[0] |= mask,
            Self::Line { h2, k, .. } => {
                let line = &mut words[..LINE_WORDS];
                line_bits(h2, k, |word, bit| line[word] |= 1 << bit);
            }
        }
    }
}

/// The block of `hash`: `reduce(h1, blocks)`. It fits a `usize`: the sizing refuses filters this
/// machine cannot address.
#[inline(always)]
pub(crate) fn block(hash: Hash128, sizing: &BlockedSizing) -> usize {
    reduce(hash.h1, sizing.blocks) as usize
}

/// [`Probe::Word`]'s fields, for a caller that already knows the layout is [`Layout::Word`].
#[inline(always)]
pub(crate) fn word_probe(hash: Hash128, sizing: &BlockedSizing) -> (usize, u64) {
    (block(hash, sizing), word_mask(hash.h2, sizing.hashes))
}

/// The word layout's mask: `k` bit positions drawn from `h2` as 6-bit fields, lowest first
/// (then from `remix(h2)`, `remix(remix(h2))`, ... after 10 fields). Positions may repeat: a
/// fixed number of draws keeps the loop branch-free, and the sizing model counts the repeats.
///
/// Dispatches to a copy unrolled for each `k` the sizing can choose (1 to 16): three
/// instructions per bit and no loop, where the loop over a runtime `k` cost twice that
/// ([measured](crate::docs::benchmarks#where-the-time-goes)).
#[inline(always)]
fn word_mask(h2: u64, k: u32) -> u64 {
    match k {
        1 => word_mask_of::<1>(h2),
        2 => word_mask_of::<2>(h2),
        3 => word_mask_of::<3>(h2),
        4 => word_mask_of::<4>(h2),
        5 => word_mask_of::<5>(h2),
        6 => word_mask_of::<6>(h2),
        7 => word_mask_of::<7>(h2),
        8 => word_mask_of::<8>(h2),
        9 => word_mask_of::<9>(h2),
        10 => word_mask_of::<10>(h2),
        11 => word_mask_of::<11>(h2),
        12 => word_mask_of::<12>(h2),
        13 => word_mask_of::<13>(h2),
        14 => word_mask_of::<14>(h2),
        15 => word_mask_of::<15>(h2),
        16 => word_mask_of::<16>(h2),
        _ => word_mask_loop(h2, k),
    }
}

/// [`word_mask`] for a `K` known at compile time: the loop unrolls.
#[inline(always)]
fn word_mask_of<const K: u32>(h2: u64) -> u64 {
    let (mut state, mut x, mut mask) = (h2, h2, 0u64);
    for i in 0..K {
        if i > 0 && i % 10 == 0 {
            state = remix(state);
            x = state;
        }
        mask |= 1u64 << (x & 63);
        x >>= 6;
    }
    mask
}

/// [`word_mask`] for any `k`: the reference the unrolled copies are tested against.
#[inline]
fn word_mask_loop(h2: u64, k: u32) -> u64 {
    let (mut state, mut left, mut mask) = (h2, k, 0u64);
    loop {
        let mut x = state;
        for _ in 0..left.min(10) {
            mask |= 1u64 << (x & 63);
            x >>= 6;
        }
        left = left.saturating_sub(10);
        if left == 0 {
            return mask;
        }
        state = remix(state);
    }
}

/// The line layout's bit positions: `k` positions in the 512-bit line drawn from `h2` as 9-bit
/// fields, lowest first (7 per 64 bits, then from `remix(h2)`, ...), each passed to `f` as its
/// word (the field's high 3 bits) and bit (its low 6). Positions may repeat, as in
/// [`word_mask`].
///
/// A callback rather than masks: a caller tests or sets each bit in place, where building 8
/// masks first went through memory ([measured](crate::docs::benchmarks#where-the-time-goes)).
#[inline(always)]
pub(crate) fn line_bits(h2: u64, k: u32, f: impl FnMut(usize, u32)) {
    // Unrolled for each `k` the sizing chooses at rates down to about 1e-7, as in `word_mask`.
    match k {
        1 => line_bits_of::<1>(h2, f),
        2 => line_bits_of::<2>(h2, f),
        3 => line_bits_of::<3>(h2, f),
        4 => line_bits_of::<4>(h2, f),
        5 => line_bits_of::<5>(h2, f),
        6 => line_bits_of::<6>(h2, f),
        7 => line_bits_of::<7>(h2, f),
        8 => line_bits_of::<8>(h2, f),
        9 => line_bits_of::<9>(h2, f),
        10 => line_bits_of::<10>(h2, f),
        11 => line_bits_of::<11>(h2, f),
        12 => line_bits_of::<12>(h2, f),
        _ => line_bits_loop(h2, k, f),
    }
}

/// [`line_bits`] for a `K` known at compile time: the loop unrolls.
#[inline(always)]
fn line_bits_of<const K: u32>(h2: u64, mut f: impl FnMut(usize, u32)) {
    let (mut state, mut x) = (h2, h2);
    for i in 0..K {
        if i > 0 && i % 7 == 0 {
            state = remix(state);
            x = state;
        }
        f((x >> 6 & 7) as usize, (x & 63) as u32);
        x >>= 9;
    }
}

/// [`line_bits`] for any `k`: the reference the unrolled copies are tested against.
#[inline]
fn line_bits_loop(h2: u64, k: u32, mut f: impl FnMut(usize, u32)) {
    let (mut state, mut left) = (h2, k);
    loop {
        let mut x = state;
        for _ in 0..left.min(7) {
            f((x >> 6 & 7) as usize, (x & 63) as u32);
            x >>= 9;
        }
        left = left.saturating_sub(7);
        if left == 0 {
            return;
        }
        state = remix(state);
    }
}

/// Where one item's bits are in a Bloom filter of a given sizing: its block, and per word of the
/// block the bits to test or set. The positions every Bloom filter of the crate uses (the atomic
/// filter's words, the payloads of its files), for code that keeps a filter's words somewhere
/// else, such as a server's strings: an item whose masks are all set in the words from
/// [`first_word`](Self::first_word) on is one that [`AtomicBloomFilter::contains_hash`] finds
/// in a filter holding those words.
///
/// Word `w` of a filter is its bits `64·w` to `64·w + 63`, least significant first, as in
/// [`AtomicBloomFilter::read_words`].
///
/// [`AtomicBloomFilter::contains_hash`]: crate::AtomicBloomFilter::contains_hash
/// [`AtomicBloomFilter::read_words`]: crate::AtomicBloomFilter::read_words
///
/// # Examples
///
/// ```
/// use seen::hash::ItemHasher;
/// use seen::{AtomicBloomFilter, BlockBits, Layout};
/// let filter = AtomicBloomFilter::builder(1000).fpr(0.01).layout(Layout::Line).build()?;
/// let hash = filter.hasher().hash_item("a");
/// let bits = BlockBits::new(hash, &filter.sizing());
/// assert_eq!(bits.masks().len(), 8); // a line: 8 words
/// filter.insert_hash(hash);
/// let mut words = [0u64; 8];
/// filter.read_words(bits.first_word(), &mut words)?;
/// assert!(bits.masks().iter().zip(&words).all(|(m, w)| w & m == *m));
/// # Ok::<(), seen::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockBits {
    block: u64,
    layout: Layout,
    masks: [u64; LINE_WORDS],
}

impl BlockBits {
    /// The bits of `hash` in a filter of `sizing`.
    pub fn new(hash: Hash128, sizing: &BlockedSizing) -> Self {
        let mut masks = [0u64; LINE_WORDS];
        let block = match Probe::new(hash, sizing) {
            Probe::Word { word, mask } => {
                masks[0] = mask;
                word
            }
            Probe::Line { line, h2, k } => {
                line_bits(h2, k, |word, bit| masks[word] |= 1 << bit);
                line
            }
        };
        Self {
            block: block as u64,
            layout: sizing.layout,
            masks,
        }
    }

    /// The block's index among the filter's blocks.
    pub fn block(&self) -> u64 {
        self.block
    }

    /// The index of the block's first word among the filter's 64-bit words.
    pub fn first_word(&self) -> u64 {
        self.block * u64::from(self.layout.block_bits() / 64)
    }

    /// The bits in each word of the block, from [`first_word`](Self::first_word) on: one mask
    /// ([`Layout::Word`]) or eight ([`Layout::Line`]), some of them zero.
    pub fn masks(&self) -> &[u64] {
        &self.masks[..self.layout.block_bits() as usize / 64]
    }
}

/// The line layout's 8 masks, one per word: the bits of [`line_bits`].
#[cfg(all(test, not(seen_loom)))]
fn line_masks(h2: u64, k: u32) -> [u64; LINE_WORDS] {
    let mut masks = [0u64; LINE_WORDS];
    line_bits(h2, k, |word, bit| masks[word] |= 1 << bit);
    masks
}

#[cfg(all(test, not(seen_loom)))]
mod tests {
    use super::*;
    use crate::sizing::blocked;

    #[test]
    fn masks_have_at_most_k_bits_and_usually_k() {
        let mut total = [0u64; 2];
        for h in (0..2000u64).map(remix) {
            for k in 1..=20 {
                let word = word_mask(h, k).count_ones();
                let line: u32 = line_masks(h, k).iter().map(|m| m.count_ones()).sum();
                assert!((1..=k).contains(&word) && (1..=k).contains(&line));
                total[0] += u64::from(word);
                total[1] += u64::from(line);
            }
        }
        // Expected distinct positions: B (1 - (1 - 1/B)^k), summed over k = 1..=20, 2000 times.
        for (got, b) in total.iter().zip([64.0f64, 512.0]) {
            let want: f64 = (1..=20)
                .map(|k| b * (1.0 - (1.0 - 1.0 / b).powi(k)))
                .sum::<f64>()
                * 2000.0;
            assert!((*got as f64 / want - 1.0).abs() < 0.01, "{got} vs {want}");
        }
    }

    #[test]
    fn the_unrolled_word_masks_equal_the_loop() {
        for h in (0..5000u64).map(remix) {
            for k in 1..=40 {
                assert_eq!(word_mask(h, k), word_mask_loop(h, k), "k = {k}");
            }
        }
    }

    #[test]
    fn the_unrolled_line_bits_equal_the_loop() {
        for h in (0..5000u64).map(remix) {
            for k in 1..=40 {
                let (mut unrolled, mut looped) = (Vec::new(), Vec::new());
                line_bits(h, k, |w, b| unrolled.push((w, b)));
                line_bits_loop(h, k, |w, b| looped.push((w, b)));
                assert_eq!(unrolled, looped, "k = {k}");
            }
        }
    }

    /// The positions before the unrolling of 2026-11-21, copied verbatim from commit 9839c78: a filter
    /// saved by that version must find its bits in this one. Every `k` the sizing can choose
    /// (up to `max_hashes`: 32 for the word layout, 64 for the line layout) and beyond.
    #[test]
    fn positions_equal_those_of_the_pre_unrolling_code() {
        fn word_mask_9839c78(h2: u64, k: u32) -> u64 {
            let (mut state, mut left, mut mask) = (h2, k, 0u64);
            loop {
                let mut x = state;
                for _ in 0..left.min(10) {
                    mask |= 1u64 << (x & 63);
                    x >>= 6;
                }
                left = left.saturating_sub(10);
                if left == 0 {
                    return mask;
                }
                state = remix(state);
            }
        }
        fn line_masks_9839c78(h2: u64, k: u32) -> [u64; LINE_WORDS] {
            let (mut state, mut left) = (h2, k);
            let mut masks = [0u64; LINE_WORDS];
            loop {
                let mut x = state;
                for _ in 0..left.min(7) {
                    let pos = (x & 511) as usize;
                    masks[pos >> 6] |= 1u64 << (pos & 63);
                    x >>= 9;
                }
                left = left.saturating_sub(7);
                if left == 0 {
                    return masks;
                }
                state = remix(state);
            }
        }
        for h in (0..3000u64).map(remix).chain([0, u64::MAX]) {
            for k in 1..=70 {
                assert_eq!(word_mask(h, k), word_mask_9839c78(h, k), "word, k = {k}");
                assert_eq!(line_masks(h, k), line_masks_9839c78(h, k), "line, k = {k}");
                // Through the probe as the filters use it.
                let probe = Probe::Line { line: 0, h2: h, k };
                let mut words = [0u64; LINE_WORDS];
                probe.set_in(&mut words);
                assert_eq!(words, line_masks_9839c78(h, k), "line probe, k = {k}");
                assert!(probe.is_set_in(&line_masks_9839c78(h, k)));
            }
        }
    }

    /// The largest `k` each layout's sizing reaches, at its smallest accepted rate: the word
    /// layout stays within its unrolled copies (16); the line layout goes past its unrolled
    /// copies (12) and past one remix (7 draws), so the filters run the loop, which the tests
    /// above cover up to 70.
    #[test]
    fn the_largest_k_the_sizing_chooses_is_covered() {
        let word = blocked(1_000_000, 6.4e-6, Layout::Word).unwrap().hashes;
        let line = blocked(1_000_000, 4.7e-15, Layout::Line).unwrap().hashes;
        assert!((1..=16).contains(&word), "word k = {word}");
        assert!((13..=64).contains(&line), "line k = {line}");
    }

    #[test]
    fn masks_of_the_first_fields_are_the_documented_positions() {
        // h2 = fields 5, 1, 63 (6-bit, lowest first): bits 5, 1, 63. Pinned: bits saved by one version must mean the same in the next.
        let h2 = 5 | 1 << 6 | 63 << 12;
        assert_eq!(word_mask(h2, 3), 1 << 5 | 1 << 1 | 1 << 63);
        // 9-bit fields 70 (word 1, bit 6) and 511 (word 7, bit 63).
        let masks = line_masks(70 | 511 << 9, 2);
        assert_eq!(masks, [0, 1 << 6, 0, 0, 0, 0, 0, 1 << 63]);
    }

    #[test]
    fn the_probe_is_the_block_by_multiply_shift_and_the_layouts_masks() {
        let word = blocked(1000, 0.01, Layout::Word).unwrap();
        let line = blocked(1000, 0.01, Layout::Line).unwrap();
        for h in (0..1000u64).map(remix) {
            let hash = Hash128 { h1: h, h2: !h };
            // `reduce` itself is pinned to known values below.
            let block = |s: &BlockedSizing| reduce(h, s.blocks) as usize;
            assert_eq!(
                Probe::new(hash, &word),
                Probe::Word {
                    word: block(&word),
                    mask: word_mask(!h, word.hashes)
                }
            );
            let probe = Probe::new(hash, &line);
            assert_eq!(
                probe,
                Probe::Line {
                    line: block(&line),
                    h2: !h,
                    k: line.hashes
                }
            );
            assert_eq!(probe.first_word(), block(&line) * LINE_WORDS);
        }
    }

    #[test]
    fn a_probe_finds_exactly_the_bits_it_set() {
        for layout in [Layout::Word, Layout::Line] {
            let sizing = blocked(1000, 0.01, layout).unwrap();
            for h in (0..500u64).map(remix) {
                let probe = Probe::new(
                    Hash128 {
                        h1: h,
                        h2: remix(h),
                    },
                    &sizing,
                );
                let mut words = [0u64; LINE_WORDS];
                assert!(!probe.is_set_in(&words));
                probe.set_in(&mut words);
                assert!(probe.is_set_in(&words));
                // Clearing any one set bit makes it a miss.
                for i in 0..LINE_WORDS {
                    for bit in 0..64 {
                        if words[i] >> bit & 1 == 1 {
                            let mut fewer = words;
                            fewer[i] &= !(1 << bit);
                            assert!(!probe.is_set_in(&fewer));
                        }
                    }
                }
            }
        }
    }

    /// `BlockBits` is what code outside the crate (the server's strings) uses in place of the
    /// filter's own probe: its masks, tested in the words `read_words` returns, must answer as
    /// `contains_hash` for every hash, hits and misses alike. The filters are filled to twice
    /// their capacity so that false positives (hits of hashes never inserted) are common too.
    #[test]
    fn block_bits_in_read_words_answer_as_contains_hash() {
        use crate::AtomicBloomFilter;
        for layout in [Layout::Word, Layout::Line] {
            let filter = AtomicBloomFilter::builder(2000)
                .fpr(0.01)
                .layout(layout)
                .build()
                .unwrap();
            let hash = |i: u64| Hash128 {
                h1: remix(i),
                h2: remix(!i),
            };
            for i in 0..4000 {
                filter.insert_hash(hash(i));
            }
            let sizing = filter.sizing();
            let (mut hits, mut misses) = (0, 0);
            for i in 0..40_000 {
                let bits = BlockBits::new(hash(i), &sizing);
                let mut words = [0u64; LINE_WORDS];
                let words = &mut words[..bits.masks().len()];
                filter.read_words(bits.first_word(), words).unwrap();
                let set = bits.masks().iter().zip(&*words).all(|(m, w)| w & m == *m);
                assert_eq!(set, filter.contains_hash(hash(i)), "{layout:?}, item {i}");
                assert!(bits.masks().iter().any(|&m| m != 0));
                assert!(bits.block() < sizing.blocks);
                if set { hits += 1 } else { misses += 1 }
            }
            // Every inserted hash hits; at twice the capacity a few percent of the others do.
            assert!(
                hits > 4000 && misses > 20_000,
                "{layout:?}: {hits} hits, {misses} misses"
            );
        }
    }

    #[test]
    fn block_selection_covers_the_range_without_modulo_bias() {
        assert_eq!(reduce(0, 3 << 40), 0);
        assert_eq!(reduce(u64::MAX, 3 << 40), (3 << 40) - 1); // past 2^32 blocks
        assert_eq!(reduce(1 << 63, 3 << 40), 3 << 39);
        let mut counts = [0u32; 10];
        for h in (0..100_000u64).map(remix) {
            counts[reduce(h, 10) as usize] += 1;
        }
        assert!(
            counts.iter().all(|&c| (9_500..10_500).contains(&c)),
            "{counts:?}"
        );
    }
}
