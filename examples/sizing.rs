//! Size a Bloom filter and an overwrite map for your workload: what the crate's structures will
//! allocate, before you build them.
//!
//! ```sh
//! cargo run --release --example sizing -- 100000000 0.001 3600000 0.9
//! ```
//!
//! Arguments: capacity, false-positive rate, later insertions to remember across, remember
//! probability. Without arguments: 10 million items at 1%, and a map that remembers an item
//! across an hour of 1,000 messages a second with probability 0.9.
//!
//! The Bloom filter sizes are `seen::sizing::blocked`, per layout: exactly what
//! `AtomicBloomFilter` and `SemiConcurrentBloomFilter` allocate. The classic (textbook) size is
//! printed last, as a reference only: no filter of this crate has that size, because keeping an
//! item's bits in one block costs false-positive rate, which the filters pay for in bits.

use seen::sizing::{BloomSizing, blocked, overwrite_buckets, overwrite_remember_probability};
use seen::{Error, Layout};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, default: &str| args.get(i).cloned().unwrap_or_else(|| default.to_owned());
    let capacity: u64 = arg(0, "10000000").parse()?;
    let fpr: f64 = arg(1, "0.01").parse()?;
    let window: u64 = arg(2, "3600000").parse()?;
    let remember: f64 = arg(3, "0.9").parse()?;

    println!(
        "Bloom filter for {} items at a false-positive rate of {fpr}, as the filters allocate it:",
        group(capacity)
    );
    println!("  layout  memory      bits/item  hashes  expected fpr");
    for (layout, what) in [
        (
            Layout::Word,
            "default: racing inserts of one item have exactly one winner",
        ),
        (
            Layout::Line,
            "racing inserts of one item may have several winners",
        ),
    ] {
        match blocked(capacity, fpr, layout) {
            Ok(s) => println!(
                "  {:<6}  {:<10}  {:<9.2}  {:<6}  {:<12.2e}  {what}",
                format!("{layout:?}"),
                size(s.bytes()),
                s.bits_per_item(),
                s.hashes,
                s.expected_fpr,
            ),
            Err(Error::FprBelowLayoutLimit { min_fpr, .. }) => println!(
                "  {:<6}  refused: below this layout's limit of {min_fpr:e}",
                format!("{layout:?}")
            ),
            Err(e) => return Err(e.into()),
        }
    }
    let classic = BloomSizing::optimal(capacity, fpr)?;
    println!(
        "  For reference only, the textbook classic Bloom filter (no filter of this crate has \
         this size): {}, {:.2} bits per item, {} hashes.",
        size(classic.bytes()),
        classic.bits as f64 / capacity as f64,
        classic.hashes,
    );

    let buckets = overwrite_buckets(window, remember)?;
    let p = overwrite_remember_probability(buckets, window)?;
    println!(
        "OverwriteMap remembering an item across {} later insertions with probability >= \
         {remember}:",
        group(window)
    );
    println!(
        "  {} buckets, {} at 8 bytes each; remembers with p = {p:.6}, forgets with p = {:.6}",
        group(buckets),
        size(buckets.saturating_mul(8)),
        1.0 - p
    );
    Ok(())
}

/// A byte count in B, KiB, MiB or GiB.
fn size(bytes: u64) -> String {
    let mut value = bytes as f64;
    for unit in ["B", "KiB", "MiB", "GiB"] {
        if value < 1024.0 || unit == "GiB" {
            return format!("{value:.1} {unit}");
        }
        value /= 1024.0;
    }
    unreachable!()
}

/// A count with thousands separators: 34,168,399.
fn group(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
