//! `SharedOverwriteMap` on a server that answers anything (`seen_redis::fuzzing::server`): a
//! create, then lookups, inserts, forgets, claims (committed, or dropped: a release) and an
//! open, on the replies of the input ([`seen_fuzz::Session`]).
//!
//! Properties: no panic; an answer only from well-formed replies (a malformed one is an
//! error); one answer per item.
#![no_main]

use libfuzzer_sys::fuzz_target;
use seen::hash::{Hash128, ItemHasher};
use seen_fuzz::{Session, answered};
use seen_redis::SharedOverwriteMap;

const NAME: &str = "m";

fuzz_target!(|data: &[u8]| {
    let Some(session) = Session::parse(data) else {
        return;
    };
    let server = seen_redis::fuzzing::server(session.resp, session.fit);
    let p = session.params;
    let builder = SharedOverwriteMap::builder(NAME, [1, 64, 1000, 7][usize::from(p & 3)])
        .shards(u32::from(p >> 2 & 3) + 1)
        .seed(u64::from(p >> 4));
    let Some(map) = answered(&server, builder.create(&server)) else {
        return;
    };
    let hashes: Vec<Hash128> = session
        .items
        .iter()
        .map(|&i| map.hasher().hash_item(&u64::from(i)))
        .collect();
    for op in session.ops {
        match op % 6 {
            0 => {
                let mut hits = Vec::new();
                let result = map.contains_many_hashes(hashes.iter().copied(), &mut hits);
                if let Some(n) = answered(&server, result) {
                    assert_eq!(hits.len(), hashes.len());
                    assert_eq!(n, hits.iter().filter(|&&h| h).count());
                }
            }
            1 => {
                let mut new = Vec::new();
                let result = map.insert_many_hashes(hashes.iter().copied(), &mut new);
                if let Some(n) = answered(&server, result) {
                    assert_eq!(new.len(), hashes.len());
                    assert_eq!(n, new.iter().filter(|&&h| h).count());
                }
            }
            2 => {
                answered(&server, map.forget_hash(hashes[0]));
            }
            3 | 4 => {
                let item = u64::from(session.items[0]);
                if let Some(Some(claim)) = answered(&server, map.claim(&item)) {
                    if op % 6 == 3 {
                        answered(&server, claim.commit());
                    } else {
                        // Dropped uncommitted: a forget, whose errors the drop ignores.
                        drop(claim);
                        seen_redis::fuzzing::well_formed(&server).ok();
                    }
                }
            }
            _ => {
                answered(&server, SharedOverwriteMap::open(&server, NAME));
            }
        }
    }
});
