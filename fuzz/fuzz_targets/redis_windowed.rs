//! `SharedWindowedBloomFilter` on a server that answers anything (`seen_redis::fuzzing::server`),
//! on the server's time (`TIME`, read at the create and the open): a create, then lookups,
//! inserts and an open, on the replies of the input ([`seen_fuzz::Session`]).
//!
//! Properties: no panic; an answer only from well-formed replies (a malformed one is an
//! error); one answer per item.
#![no_main]

use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use seen::Layout;
use seen::hash::{Hash128, ItemHasher};
use seen_fuzz::{Session, answered};
use seen_redis::SharedWindowedBloomFilter;

const NAME: &str = "w";

fuzz_target!(|data: &[u8]| {
    let Some(session) = Session::parse(data) else {
        return;
    };
    let server = seen_redis::fuzzing::server(session.resp, session.fit);
    let p = session.params;
    let layout = if p & 1 == 0 {
        Layout::Word
    } else {
        Layout::Line
    };
    let builder = SharedWindowedBloomFilter::builder(NAME, [1, 100][usize::from(p >> 1 & 1)])
        .layout(layout)
        .periods([1, 2, 6, 0][usize::from(p >> 2 & 3)])
        .period([Duration::from_millis(1), Duration::from_secs(86_400)][usize::from(p >> 4 & 1)])
        .shards(u32::from(p >> 5 & 1) + 1)
        .seed(u64::from(p >> 6));
    let Some(filter) = answered(&server, builder.create(&server)) else {
        return;
    };
    let hashes: Vec<Hash128> = session
        .items
        .iter()
        .map(|&i| filter.hasher().hash_item(&u64::from(i)))
        .collect();
    for op in session.ops {
        match op % 4 {
            0 => {
                let mut hits = Vec::new();
                let result = filter.contains_many_hashes(hashes.iter().copied(), &mut hits);
                if let Some(n) = answered(&server, result) {
                    assert_eq!(hits.len(), hashes.len());
                    assert_eq!(n, hits.iter().filter(|&&h| h).count());
                }
            }
            1 => {
                let mut new = Vec::new();
                let result = filter.insert_many_hashes(hashes.iter().copied(), &mut new);
                if let Some(n) = answered(&server, result) {
                    assert_eq!(new.len(), hashes.len());
                    assert_eq!(n, new.iter().filter(|&&h| h).count());
                }
            }
            2 => {
                if let Some(opened) =
                    answered(&server, SharedWindowedBloomFilter::open(&server, NAME))
                {
                    opened.generation().ok();
                }
            }
            _ => {
                answered(&server, filter.generation());
            }
        }
    }
});
