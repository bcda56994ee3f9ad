//! A call takes the memory of one request, whatever its size: a million items in one
//! `insert_many` held 1.5 GB (the word filter) to 3.4 GB (the windowed filter) of client memory,
//! every command of the call built before the first was sent. Now a call is cut into requests
//! of `REQUEST_ITEMS` items. Each case runs in a worker process of its own, which reports the
//! growth of its peak resident memory (`VmHWM`) over the call.

use std::io::Write;
use std::time::Duration;

use seen::clock::ManualClock;
use seen_redis::{Server, SharedBloomFilter, SharedOverwriteMap, SharedWindowedBloomFilter};
use seen_test_server::{self as server, RedisServer, WORKER, Workers};

const ITEMS: u64 = 1_000_000;

/// The most a call of a million items may add to the peak: about 15 times what one request
/// of 8,192 items takes (a tenth of what the smallest case took before).
const LIMIT_BYTES: u64 = 150 << 20;

/// A field of `/proc/self/status`, in bytes.
fn status(field: &str) -> u64 {
    let text = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with(field))
        .unwrap_or_else(|| panic!("no {field} in /proc/self/status"));
    let kb: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap();
    kb * 1024
}

/// The call a case measures, appending its answers.
type Call = Box<dyn FnOnce(&mut Vec<bool>)>;

/// A worker: `case|url`: creates the case's structure, makes its million items, then runs the
/// call and prints `GROWTH bytes`: the peak resident memory after the call less the resident
/// memory before it.
#[test]
fn worker() {
    let Ok(spec) = std::env::var(WORKER) else {
        return;
    };
    let args: Vec<&str> = spec.split('|').collect();
    let server = Server::open(args[1]).unwrap();
    let items: Vec<u64> = (0..ITEMS).collect();
    let mut answers = Vec::with_capacity(ITEMS as usize);
    let call: Call = match args[0] {
        "bloom" => {
            let f = SharedBloomFilter::builder("bloom", ITEMS)
                .create(&server)
                .unwrap();
            Box::new(move |out| {
                // New but for the false positives of a filter filling up to its capacity.
                let new = f.insert_many(&items, out).unwrap() as u64;
                assert!(new > ITEMS * 99 / 100, "{new}");
            })
        }
        "bloom-lookup" => {
            let f = SharedBloomFilter::builder("lookup", ITEMS)
                .create(&server)
                .unwrap();
            Box::new(move |out| assert_eq!(f.contains_many(&items, out).unwrap(), 0))
        }
        "window" => {
            let f = SharedWindowedBloomFilter::builder("window", ITEMS)
                .periods(6)
                .period(Duration::from_secs(3600))
                .clock(ManualClock::new(Duration::from_secs(1_800_000_000)))
                .create(&server)
                .unwrap();
            Box::new(move |out| {
                let new = f.insert_many(&items, out).unwrap() as u64;
                assert!(new > ITEMS * 99 / 100, "{new}");
            })
        }
        "map" => {
            let m = SharedOverwriteMap::builder("map", 4 * ITEMS)
                .create(&server)
                .unwrap();
            Box::new(move |out| {
                let new = m.insert_many(&items, out).unwrap() as u64;
                assert!(new > ITEMS * 99 / 100, "{new}");
            })
        }
        other => panic!("unknown case {other}"),
    };
    let before = status("VmRSS:");
    call(&mut answers);
    let growth = status("VmHWM:").saturating_sub(before);
    assert_eq!(answers.len() as u64, ITEMS);
    let mut out = std::io::stdout().lock();
    writeln!(out).unwrap();
    writeln!(out, "GROWTH {growth}").unwrap();
    out.flush().unwrap();
}

#[test]
fn a_call_of_a_million_items_takes_the_memory_of_a_request() {
    let redis = RedisServer::start();
    let mut report = Vec::new();
    for case in ["bloom", "bloom-lookup", "window", "map"] {
        let spec = format!("{case}|{}", redis.url());
        let output = Workers::spawn([server::worker("worker", &spec)])
            .outputs()
            .remove(0);
        let text = String::from_utf8(output.stdout).unwrap();
        assert!(
            output.status.success(),
            "{case}: the worker failed:\n{text}"
        );
        let growth: u64 = text
            .lines()
            .find_map(|l| l.strip_prefix("GROWTH "))
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{case}: no GROWTH line in\n{text}"));
        report.push(format!("{case}: {} MiB", growth >> 20));
        assert!(
            growth <= LIMIT_BYTES,
            "{case}: a call of {ITEMS} items grew the peak by {} MiB (at most {} MiB): {report:?}",
            growth >> 20,
            LIMIT_BYTES >> 20
        );
    }
    eprintln!("peak growth per call: {report:?}");
}
