//! What every Bloom filter of the crate reports about itself: [`BloomInfo`] (RedisBloom's
//! `BF.INFO` and `BF.CARD`), with a one-line `Display` for logs, and the estimates from the
//! fill of the bits that every filter computes the same way.

use core::fmt;

use crate::Layout;
use crate::numbers::{Bytes, Rate};
use crate::sizing::BlockedSizing;

/// A filter's description and state, from its `info()`: what it was built for, what it
/// allocates, and what its bits say it holds. `Display` writes it on one line, for logs.
///
/// Every estimate reads every word of the filter (O(m)): call it for monitoring, not per item.
///
/// # Examples
///
/// ```
/// let f = seen::AtomicBloomFilter::with_capacity(100_000, 0.01)?;
/// f.insert_counting_new(&(0..50_000u64).collect::<Vec<_>>());
/// let info = f.info();
/// assert_eq!((info.capacity, info.layers, info.sampled_new_items), (100_000, 1, None));
/// assert!((49_000..51_000).contains(&info.estimated_len));
/// assert!(info.estimated_fpr < info.fpr);
/// assert!(info.to_string().starts_with("AtomicBloomFilter: capacity 100000, "));
/// # Ok::<(), seen::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct BloomInfo {
    /// The type: `"AtomicBloomFilter"`, `"GrowingBloomFilter"`, ...
    pub structure: &'static str,
    /// The block layout.
    pub layout: Layout,
    /// The distinct items the filter holds at its target rate: the sum of the layers'
    /// capacities for a growing filter (it grows past it), `G` times a generation's for a
    /// windowed one.
    pub capacity: u64,
    /// The target false-positive rate (the whole filter's, for growing and windowed filters).
    pub fpr: f64,
    /// The bytes of bits allocated.
    pub bytes: u64,
    /// Layers (growing), live generations (windowed), or 1.
    pub layers: u32,
    /// An estimate of the items whose insert returned "new", from a **sampled** counter, where
    /// the filter keeps one: the growing filter, which grows when it reaches a layer's capacity.
    /// Not a count: in a layer of 2^17 items of capacity or more, only new items whose hash
    /// has `s` low zero bits are counted, each as `2^s` (`2^s <= capacity / 2^16`), so the
    /// figure moves in steps of up to `2^s` (16 after 3 items, in a layer of 2 million) and is
    /// within 3/256 of the truth at three standard deviations once a layer holds 65,536
    /// samples. Exact in smaller layers and in a non-scaling filter
    /// ([`LayerInfo::sample_step`] says which). `None` for the other filters, which keep no
    /// counter (a shared counter would cost every insert a contended write):
    /// [`estimated_len`](Self::estimated_len) estimates the distinct items from the bits.
    pub sampled_new_items: Option<u64>,
    /// The estimated number of distinct items, from the fraction of bits set (see
    /// [`AtomicBloomFilter::estimated_len`](crate::AtomicBloomFilter::estimated_len));
    /// `u64::MAX` when a filter is saturated.
    pub estimated_len: u64,
    /// The false-positive rate now, from the bits: the probability that an item never inserted
    /// is reported present.
    pub estimated_fpr: f64,
    /// The growing filter's expansion factor; `None` for a filter that does not grow.
    pub expansion: Option<u32>,
}

/// One layer of a [`GrowingBloomFilter`](crate::GrowingBloomFilter), from its
/// [`layer_info`](crate::GrowingBloomFilter::layer_info).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct LayerInfo {
    /// The new items after which the filter grows past this layer.
    pub capacity: u64,
    /// The layer's target rate.
    pub fpr: f64,
    /// The bytes of its bits.
    pub bytes: u64,
    /// Its `k`.
    pub hashes: u32,
    /// An estimate of the new items inserted into it, from a sampled counter that adds
    /// [`sample_step`](Self::sample_step) for one new item in `sample_step` (exact when it is
    /// 1): see [`BloomInfo::sampled_new_items`].
    pub sampled_new_items: u64,
    /// What one sampled new item adds to [`sampled_new_items`](Self::sampled_new_items): 1 (an
    /// exact count) below 2^17 items of capacity and in a non-scaling filter, `2^s <= capacity
    /// / 2^16` above.
    pub sample_step: u64,
    /// Its estimated distinct items, from its bits.
    pub estimated_len: u64,
    /// Its false-positive rate now, from its bits.
    pub estimated_fpr: f64,
}

impl fmt::Display for BloomInfo {
    /// One line: `GrowingBloomFilter: capacity 7000, 3 layers (expansion 2), 11.9 KiB, word
    /// layout, about 5123 items (5100 new by a sampled count), fpr 0.21% now (target 1%)`.
    ///
    /// The rates are percentages in plain decimals (`0.0018%`); when one of them is below
    /// 1e-6 (`0.0001%`), both are plain numbers instead (`fpr 3.4e-9 now (target 1e-7)`), so
    /// that a line never mixes the two notations.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: capacity {}", self.structure, self.capacity)?;
        if self.layers != 1 || self.expansion.is_some() {
            let what = match (self.expansion.is_some(), self.layers == 1) {
                (true, true) => "layer",
                (true, false) => "layers",
                (false, true) => "generation",
                (false, false) => "generations",
            };
            write!(f, ", {} {what}", self.layers)?;
            if let Some(e) = self.expansion {
                write!(f, " (expansion {e})")?;
            }
        }
        write!(
            f,
            ", {}, {} layout, ",
            Bytes(self.bytes),
            match self.layout {
                Layout::Word => "word",
                Layout::Line => "line",
            }
        )?;
        if self.estimated_len == u64::MAX {
            f.write_str("saturated")?;
        } else {
            write!(f, "about {} items", self.estimated_len)?;
        }
        if let Some(n) = self.sampled_new_items {
            write!(f, " ({n} new by a sampled count)")?;
        }
        let percent = [self.estimated_fpr, self.fpr]
            .iter()
            .all(|&p| p == 0.0 || p >= Rate::PERCENT_FROM);
        write!(
            f,
            ", fpr {} now (target {})",
            Rate::new(self.estimated_fpr, percent),
            Rate::new(self.fpr, percent)
        )
    }
}

/// [`AtomicBloomFilter::estimated_len`](crate::AtomicBloomFilter::estimated_len) of the words
/// of a filter of this sizing: `-blocks · ln(1 - X/m) / (1 - (1 - 1/B)^k)`, `u64::MAX` when
/// every bit is set.
pub(crate) fn estimated_len(words: impl Iterator<Item = u64>, sizing: &BlockedSizing) -> u64 {
    sizing.estimated_len(words.map(|w| u64::from(w.count_ones())).sum())
}

/// [`AtomicBloomFilter::estimated_fpr`](crate::AtomicBloomFilter::estimated_fpr) of the words
/// of a filter of this sizing: the mean over blocks of `(s / B)^k`.
pub(crate) fn estimated_fpr(words: impl Iterator<Item = u64>, sizing: &BlockedSizing) -> f64 {
    let k = sizing.hashes as i32;
    let block = sizing.layout.block_bits();
    let table: Vec<f64> = (0..=block)
        .map(|s| (f64::from(s) / f64::from(block)).powi(k))
        .collect();
    let words_per_block = (block / 64) as usize;
    let mut sum = 0.0;
    let mut set = 0u32;
    for (i, word) in words.enumerate() {
        set += word.count_ones();
        if (i + 1) % words_per_block == 0 {
            sum += table[set as usize];
            set = 0;
        }
    }
    sum / sizing.blocks as f64
}

/// The info of a one-layer filter of this sizing and these words.
pub(crate) fn single<I: Iterator<Item = u64>>(
    structure: &'static str,
    sizing: &BlockedSizing,
    bytes: u64,
    words: impl Fn() -> I,
) -> BloomInfo {
    BloomInfo {
        structure,
        layout: sizing.layout,
        capacity: sizing.capacity,
        fpr: sizing.fpr,
        bytes,
        layers: 1,
        sampled_new_items: None,
        estimated_len: estimated_len(words(), sizing),
        estimated_fpr: estimated_fpr(words(), sizing),
        expansion: None,
    }
}

impl BloomInfo {
    /// The info of a filter of `sizing` kept elsewhere (a server), from the count of its bits
    /// set: [`estimated_len`](BlockedSizing::estimated_len) of the count, and the rate
    /// [`fpr_at`](BlockedSizing::fpr_at) that many items (the model's, where a local filter
    /// averages its blocks' own fills). The fields are public: a structure of several
    /// layers or generations sets its own totals.
    ///
    /// # Examples
    ///
    /// ```
    /// use seen::BloomInfo;
    /// let f = seen::AtomicBloomFilter::with_capacity(100_000, 0.01)?;
    /// f.insert_counting_new(&(0..50_000u64).collect::<Vec<_>>());
    /// let mut words = vec![0u64; (f.sizing().bits / 64) as usize];
    /// f.read_words(0, &mut words)?;
    /// let set: u64 = words.iter().map(|w| u64::from(w.count_ones())).sum();
    /// let info = BloomInfo::from_bits_set("SharedBloomFilter", &f.sizing(), set);
    /// assert_eq!(info.estimated_len, f.estimated_len());
    /// assert!((info.estimated_fpr / f.estimated_fpr() - 1.0).abs() < 0.2);
    /// # Ok::<(), seen::Error>(())
    /// ```
    pub fn from_bits_set(structure: &'static str, sizing: &BlockedSizing, bits_set: u64) -> Self {
        let estimated_len = sizing.estimated_len(bits_set);
        BloomInfo {
            structure,
            layout: sizing.layout,
            capacity: sizing.capacity,
            fpr: sizing.fpr,
            bytes: sizing.bytes(),
            layers: 1,
            sampled_new_items: None,
            estimated_len,
            estimated_fpr: if estimated_len == u64::MAX {
                1.0
            } else {
                sizing.fpr_at(estimated_len)
            },
            expansion: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--stats` printed `fpr 1.8e-3% now`: a percentage in scientific notation. A line now
    /// has one notation: percentages in plain decimals, or plain numbers when a rate is below
    /// 1e-6.
    #[test]
    fn a_line_writes_its_rates_in_one_notation() {
        let info = |estimated_fpr, fpr| BloomInfo {
            structure: "AtomicBloomFilter",
            layout: Layout::Line,
            capacity: 10_000_000,
            fpr,
            bytes: 23 << 20,
            layers: 1,
            sampled_new_items: None,
            estimated_len: 4_000_000,
            estimated_fpr,
            expansion: None,
        };
        let line = info(1.8e-5, 1e-4).to_string();
        assert!(line.ends_with(", fpr 0.0018% now (target 0.01%)"), "{line}");
        let line = info(3.4e-9, 1e-4).to_string();
        assert!(line.ends_with(", fpr 3.4e-9 now (target 0.0001)"), "{line}");
        let line = info(0.0, 1e-7).to_string();
        assert!(line.ends_with(", fpr 0 now (target 1e-7)"), "{line}");
        let line = info(0.0, 0.01).to_string();
        assert!(line.ends_with(", fpr 0% now (target 1%)"), "{line}");
        for line in
            [info(1.8e-5, 1e-4), info(3.4e-9, 1e-4), info(1e-300, 0.5)].map(|i| i.to_string())
        {
            assert!(!line.contains("e-") || !line.contains('%'), "{line}");
        }
    }

    /// `inserted` read `Some(16)` after 3 items beside `estimated_len` 3: the line says that
    /// the figure comes from a sample.
    #[test]
    fn the_sampled_count_is_called_a_sample() {
        let mut info = BloomInfo {
            structure: "GrowingBloomFilter",
            layout: Layout::Word,
            capacity: 2_000_000,
            fpr: 0.01,
            bytes: 3 << 20,
            layers: 1,
            sampled_new_items: Some(16),
            estimated_len: 3,
            estimated_fpr: 0.0,
            expansion: Some(2),
        };
        let line = info.to_string();
        assert!(
            line.contains("about 3 items (16 new by a sampled count)"),
            "{line}"
        );
        info.sampled_new_items = None;
        assert!(!info.to_string().contains("sampled"));
    }
}
