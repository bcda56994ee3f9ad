//! The shared Bloom filter against a real server: the same answers as the local filter.

#[path = "common/server.rs"]
mod server;

use seen::{AtomicBloomFilter, Layout};
use seen_redis::{Server, SharedBloomFilter};
use server::RedisServer;

#[test]
fn a_shared_filter_answers_as_the_local_one_in_both_layouts() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    for layout in [Layout::Word, Layout::Line] {
        let name = format!("agree-{layout:?}");
        let shared = SharedBloomFilter::builder(&name, 20_000).fpr(0.01).layout(layout).shards(3).create(&server).unwrap();
        let local = AtomicBloomFilter::builder(20_000).fpr(0.01).layout(layout).build().unwrap();
        let items: Vec<u64> = (0..20_000).collect();
        let mut new = Vec::new();
        shared.insert_many(items[..10_000].iter(), &mut new).unwrap();
        let local_new: Vec<bool> = items[..10_000].iter().map(|i| local.insert(i)).collect();
        assert_eq!(new, local_new);
        let mut hits = Vec::new();
        shared.contains_many(items.iter(), &mut hits).unwrap();
        let local_hits: Vec<bool> = items.iter().map(|i| local.contains(i)).collect();
        assert_eq!(hits, local_hits);
        assert!(shared.contains(&5u64).unwrap());
        assert!(!shared.insert(&5u64).unwrap());
        let back = shared.download().unwrap();
        let (mut a, mut b) = (vec![0u64; (back.bit_len() / 64) as usize], vec![0u64; (local.bit_len() / 64) as usize]);
        back.read_words(0, &mut a);
        local.read_words(0, &mut b);
        assert!(a == b, "downloaded bits differ from the local filter's");
    }
}
