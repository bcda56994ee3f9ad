//! The shared Bloom filter on a local 3-node Redis Cluster: its shards spread over the nodes
//! (hash tags put each shard, and whatever one command touches, in one slot), and it answers
//! as the local filter through the blocking and the async API, upload and download included.

use seen::{AtomicBloomFilter, Layout};
use seen_redis::{Server, SharedBloomFilter};
use seen_test_server::RedisCluster;

#[test]
fn a_filter_on_a_cluster_spreads_its_shards_and_answers_as_the_local_one() {
    let cluster = RedisCluster::start(3);
    let server = Server::cluster(cluster.urls()).unwrap();
    assert!(server.is_cluster());
    let items: Vec<String> = (0..20_000).map(|i| format!("c-{i}")).collect();
    let (inserted, _) = items.split_at(10_000);
    for layout in [Layout::Word, Layout::Line] {
        let name = format!("spread-{layout:?}");
        let shared = SharedBloomFilter::builder(&name, 20_000)
            .layout(layout)
            .shards(16)
            .create(&server)
            .unwrap();
        assert_eq!(shared.keys().len(), 16);
        let local = AtomicBloomFilter::builder(20_000)
            .layout(layout)
            .build()
            .unwrap();
        let mut new = Vec::new();
        shared
            .insert_many(inserted.iter().map(String::as_str), &mut new)
            .unwrap();
        let local_new: Vec<bool> = inserted.iter().map(|i| local.insert(i.as_str())).collect();
        assert_eq!(new, local_new, "{layout:?}");
        let mut hits = Vec::new();
        shared
            .contains_many(items.iter().map(String::as_str), &mut hits)
            .unwrap();
        let local_hits: Vec<bool> = items.iter().map(|i| local.contains(i.as_str())).collect();
        assert_eq!(hits, local_hits, "{layout:?}");
        // Download, then upload under another name and compare the bits.
        let back = shared.download().unwrap();
        let words = |f: &AtomicBloomFilter| {
            let mut w = vec![0u64; (f.bit_len() / 64) as usize];
            f.read_words(0, &mut w).unwrap();
            w
        };
        assert!(
            words(&back) == words(&local),
            "{layout:?}: the download differs"
        );
        let copy = SharedBloomFilter::upload(&server, &format!("copy-{layout:?}"), &local).unwrap();
        hits.clear();
        copy.contains_many(items.iter().map(String::as_str), &mut hits)
            .unwrap();
        assert_eq!(hits, local_hits, "{layout:?}, uploaded");
    }
    // 2 filters of 16 shards and 2 uploads of one (the default for this size), with a
    // description each: every node holds some of the keys.
    let per_node = cluster.keys_per_node();
    assert_eq!(per_node.iter().sum::<u64>(), 2 * 17 + 2 * 2, "{per_node:?}");
    assert!(
        per_node.iter().all(|&n| n > 0),
        "a node holds no key: {per_node:?}"
    );

    // The async API, on the cluster's async connection: inserts and lookups agree with the
    // blocking ones.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let shared = SharedBloomFilter::builder("async", 20_000)
            .shards(16)
            .create_async(&server)
            .await
            .unwrap();
        let local = AtomicBloomFilter::builder(20_000).build().unwrap();
        let mut new = Vec::new();
        shared
            .insert_many_async(inserted.iter().map(String::as_str), &mut new)
            .await
            .unwrap();
        let local_new: Vec<bool> = inserted.iter().map(|i| local.insert(i.as_str())).collect();
        assert_eq!(new, local_new);
        let mut hits = Vec::new();
        shared
            .contains_many_async(items.iter().map(String::as_str), &mut hits)
            .await
            .unwrap();
        let local_hits: Vec<bool> = items.iter().map(|i| local.contains(i.as_str())).collect();
        assert_eq!(hits, local_hits);
        assert!(!shared.insert_async("c-1").await.unwrap());
        assert!(shared.insert_async("never before").await.unwrap());
        let opened = SharedBloomFilter::open_async(&server, "async")
            .await
            .unwrap();
        assert!(opened.contains_async("never before").await.unwrap());
        // The blocking API sees what the async one wrote.
        assert!(opened.contains("never before").unwrap());
    });
}
