//! A daily ingest job that must not load a record twice, across days and restarts.
//!
//! ```sh
//! cargo run --release --example daily_ingest -- /tmp/ingest.seen    # day 1: a fresh filter
//! cargo run --release --example daily_ingest -- /tmp/ingest.seen    # day 2: yesterday's filter
//! ```
//!
//! The story: a job runs once a day, reads the day's records (here generated: `RECORDS` ids
//! drawn from `DISTINCT`, so a day repeats itself too) and loads only the ones it has never
//! loaded before, on any earlier day, into the warehouse. It keeps what it has seen in an
//! `AtomicBloomFilter` saved at the end of each run, and loads it at the start of the next:
//!
//! - `AtomicBloomFilter::load(path)` if the file exists, else a new filter;
//! - two threads check-and-insert the day's records (`insert` is `true` only for a record no
//!   thread has inserted before, on any day);
//! - `filter.save(path)`: a crash mid-save leaves yesterday's file whole (a temporary file,
//!   flushed, renamed over it), so the next run never starts from a half-written filter.
//!
//! Run it twice on the same file (CI does): the first run loads about `DISTINCT` records (a
//! Bloom filter may take a new record for a seen one with probability `FPR`: those are
//! skipped, never loaded twice), the second loads none, since every record of its day was seen
//! the day before. The example asserts both.

use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;

use seen::AtomicBloomFilter;
use seen::hash::{ItemHasher, StableHasher};

/// Records per day.
const RECORDS: u64 = 1_000_000;
/// Distinct ids among them (each id comes about twice a day).
const DISTINCT: u64 = 500_000;
/// The filter's capacity: a month of days like this one, were each day's ids new.
const CAPACITY: u64 = 30 * DISTINCT;
const FPR: f64 = 0.001;
const THREADS: usize = 2;

/// The day's records: ids that a real job would read from its input.
fn record(i: u64) -> String {
    let id = StableHasher::with_seed(7).hash_item(&(i % DISTINCT)).h1;
    format!("order-{id:016x}")
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args_os().nth(1).map_or_else(
        || std::env::temp_dir().join("seen-daily-ingest.seen"),
        PathBuf::from,
    );
    let (filter, yesterday) = if path.exists() {
        (AtomicBloomFilter::load(&path)?, true)
    } else {
        (AtomicBloomFilter::with_capacity(CAPACITY, FPR)?, false)
    };
    println!(
        "{}: {} ({} MB, about {} records seen so far)",
        path.display(),
        if yesterday {
            "loaded yesterday's filter"
        } else {
            "no filter yet: a new one"
        },
        filter.memory_bytes() / 1_000_000,
        filter.estimated_len()
    );

    let loaded = AtomicU64::new(0);
    std::thread::scope(|s| {
        for t in 0..THREADS as u64 {
            let (filter, loaded) = (&filter, &loaded);
            s.spawn(move || {
                for i in (t..RECORDS).step_by(THREADS) {
                    if filter.insert(&record(i)) {
                        loaded.fetch_add(1, Relaxed); // load it into the warehouse
                    }
                }
            });
        }
    });
    let loaded = loaded.into_inner();
    filter.save(&path)?;
    println!(
        "{RECORDS} records today: {loaded} loaded, {} skipped as seen; saved to {}",
        RECORDS - loaded,
        path.display()
    );

    if yesterday {
        // Every record of today was inserted yesterday, and the filter has no false negatives.
        assert_eq!(loaded, 0, "a record seen yesterday was loaded again");
    } else {
        // Each distinct id loaded at most once; at most a few in a thousand taken for seen.
        assert!(loaded <= DISTINCT, "a record was loaded twice: {loaded}");
        assert!(
            loaded as f64 >= DISTINCT as f64 * (1.0 - 10.0 * FPR),
            "{loaded}"
        );
    }
    Ok(())
}
