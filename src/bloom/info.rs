//! What every Bloom filter of the crate reports about itself: [`BloomInfo`] (RedisBloom's
//! `BF.INFO` and `BF.CARD`), with a one-line `Display` for logs, and the estimates from the
//! fill of the bits that every filter computes the same way.

use core::fmt;

use crate::Layout;
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
/// f.insert_all(&(0..50_000u64).collect::<Vec<_>>());
/// let info = f.info();
/// assert_eq!((info.capacity, info.layers, info.inserted), (100_000, 1, None));
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
    /// The items whose insert returned "new", where the filter counts them: the growing filter
    /// (sampled, so within 3/256 at three standard deviations, above 2^17 items per layer).
    /// `None` for the others, which keep no counter (a shared counter would cost every insert
    /// a contended write): [`estimated_len`](Self::estimated_len) estimates it from the bits.
    pub inserted: Option<u64>,
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
    /// The new items counted into it (exact below 2^17 items of capacity, sampled above).
    pub inserted: u64,
    /// Its estimated distinct items, from its bits.
    pub estimated_len: u64,
    /// Its false-positive rate now, from its bits.
    pub estimated_fpr: f64,
}

impl fmt::Display for BloomInfo {
    /// One line: `GrowingBloomFilter: capacity 7000, 3 layers (expansion 2), 11.9 KiB, word
    /// layout, about 5123 items (5100 counted new), fpr 0.21% now (target 1%)`.
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
        if let Some(n) = self.inserted {
            write!(f, " ({n} counted new)")?;
        }
        write!(
            f,
            ", fpr {} now (target {})",
            Percent(self.estimated_fpr),
            Percent(self.fpr)
        )
    }
}

/// A size in B, KiB, MiB, GiB or TiB, 3 significant digits.
struct Bytes(u64);

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
        let mut value = self.0 as f64;
        let mut unit = 0;
        // Rounded as printed (1,048,575 B is 1.00 MiB, not 1024 KiB).
        while value >= 1023.995 && unit + 1 < UNITS.len() {
            value /= 1024.0;
            unit += 1;
        }
        match unit {
            0 => write!(f, "{} B", self.0),
            _ if value >= 100.0 => write!(f, "{value:.0} {}", UNITS[unit]),
            _ if value >= 10.0 => write!(f, "{value:.1} {}", UNITS[unit]),
            _ => write!(f, "{value:.2} {}", UNITS[unit]),
        }
    }
}

/// A rate as a percentage with 2 significant digits (`1%`, `0.21%`, `3.4e-5%`).
struct Percent(f64);

impl fmt::Display for Percent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = self.0 * 100.0;
        if p == 0.0 {
            f.write_str("0%")
        } else if p >= 0.009_95 {
            // Two significant digits, without trailing zeros.
            let digits = if p >= 10.0 {
                0
            } else {
                (1 - p.log10().floor() as i32).max(0) as usize
            };
            let text = format!("{p:.digits$}");
            let text = if text.contains('.') {
                text.trim_end_matches('0').trim_end_matches('.')
            } else {
                &text
            };
            write!(f, "{text}%")
        } else {
            write!(f, "{p:.1e}%")
        }
    }
}

/// [`AtomicBloomFilter::estimated_len`](crate::AtomicBloomFilter::estimated_len) of the words
/// of a filter of this sizing: `-blocks · ln(1 - X/m) / (1 - (1 - 1/B)^k)`, `u64::MAX` when
/// every bit is set.
pub(crate) fn estimated_len(words: impl Iterator<Item = u64>, sizing: &BlockedSizing) -> u64 {
    let m = sizing.bits as f64;
    let set = words.map(|w| u64::from(w.count_ones())).sum::<u64>() as f64;
    if set >= m {
        return u64::MAX;
    }
    // The expected fraction of a block's bits one item sets.
    let per_item = crate::sizing::per_item_fill(f64::from(sizing.hashes), sizing.layout);
    (-(sizing.blocks as f64) * (-set / m).ln_1p() / per_item).round() as u64
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
        inserted: None,
        estimated_len: estimated_len(words(), sizing),
        estimated_fpr: estimated_fpr(words(), sizing),
        expansion: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_rates_read_well() {
        let cases = [
            (0, "0 B"),
            (1023, "1023 B"),
            (1024, "1.00 KiB"),
            (12_345, "12.1 KiB"),
            (200 << 20, "200 MiB"),
            (3 << 40, "3.00 TiB"),
        ];
        for (bytes, text) in cases {
            assert_eq!(Bytes(bytes).to_string(), text);
        }
        let cases = [
            (0.0, "0%"),
            (0.01, "1%"),
            (0.0021, "0.21%"),
            (0.1234, "12%"),
            (1.0, "100%"),
            (0.000_34, "0.034%"),
            (3.4e-7, "3.4e-5%"),
        ];
        for (rate, text) in cases {
            assert_eq!(Percent(rate).to_string(), text, "{rate}");
        }
    }
}
