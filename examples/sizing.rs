//! Size a Bloom filter and an overwrite map for your workload.
//!
//! ```sh
//! cargo run --example sizing -- 100000000 0.001 3600000 0.9
//! ```
//! Arguments: capacity, false-positive rate, later insertions to remember across, remember
//! probability. Without arguments it prints the sizes of DESIGN.md's examples.

use seen::sizing::{BloomSizing, overwrite_buckets, overwrite_remember_probability};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, default: &str| args.get(i).cloned().unwrap_or_else(|| default.to_owned());
    let capacity: u64 = arg(0, "10000000").parse()?;
    let fpr: f64 = arg(1, "0.01").parse()?;
    let window: u64 = arg(2, "3600000").parse()?;
    let remember: f64 = arg(3, "0.9").parse()?;

    let bloom = BloomSizing::optimal(capacity, fpr)?;
    println!(
        "Bloom filter, {capacity} items at fpr {fpr}: {} bits ({:.2} MiB), {} hashes",
        bloom.bits,
        bloom.mib(),
        bloom.hashes
    );
    for load in [1, 2, 4] {
        let items = capacity.saturating_mul(load);
        println!(
            "  after {items} items: expected fpr {:.4}%",
            bloom.fpr_at(items) * 100.0
        );
    }

    let buckets = overwrite_buckets(window, remember)?;
    println!(
        "Overwrite map remembering an item across {window} later insertions with p >= {remember}: \
         {buckets} buckets ({:.1} MiB at 8 bytes each)",
        buckets as f64 * 8.0 / f64::from(1 << 20)
    );
    let p = overwrite_remember_probability(buckets, window)?;
    println!(
        "  remembers with p = {p:.6}; forgets with p = {:.6}",
        1.0 - p
    );
    Ok(())
}
