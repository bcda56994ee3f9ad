//! The shared Bloom filter against a real server: the same answers as the local filter.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Barrier};

use seen::hash::StableHasher;
use seen::{AtomicBloomFilter, Layout};
use seen_redis::{Error, Server, SharedBloomFilter};
use seen_test_server::{self as server, RedisServer};

#[test]
fn a_shared_filter_answers_as_the_local_one_in_both_layouts() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    for layout in [Layout::Word, Layout::Line] {
        let name = format!("agree-{layout:?}");
        let shared = SharedBloomFilter::builder(&name, 20_000)
            .fpr(0.01)
            .layout(layout)
            .shards(3)
            .create(&server)
            .unwrap();
        let local = AtomicBloomFilter::builder(20_000)
            .fpr(0.01)
            .layout(layout)
            .build()
            .unwrap();
        let items: Vec<u64> = (0..20_000).collect();
        let mut new = Vec::new();
        shared
            .insert_many(items[..10_000].iter(), &mut new)
            .unwrap();
        let local_new: Vec<bool> = items[..10_000].iter().map(|i| local.insert(i)).collect();
        assert_eq!(new, local_new);
        let mut hits = Vec::new();
        shared.contains_many(items.iter(), &mut hits).unwrap();
        let local_hits: Vec<bool> = items.iter().map(|i| local.contains(i)).collect();
        assert_eq!(hits, local_hits);
        assert!(shared.contains(&5u64).unwrap());
        assert!(!shared.insert(&5u64).unwrap());
        let back = shared.download().unwrap();
        let (mut a, mut b) = (
            vec![0u64; (back.bit_len() / 64) as usize],
            vec![0u64; (local.bit_len() / 64) as usize],
        );
        back.read_words(0, &mut a).unwrap();
        local.read_words(0, &mut b).unwrap();
        assert!(a == b, "downloaded bits differ from the local filter's");
    }
}

/// Upload and download move a filter bit for bit: a local filter saved to a file, uploaded,
/// downloaded to another file gives the same bytes, and the shared filter answers every item
/// as the local one; in both layouts, with the default seed and another. An upload onto a
/// taken name is refused.
#[test]
fn an_uploaded_file_downloads_byte_identical_and_answers_as_the_local_filter() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    let dir = server::TempDir::new("roundtrip");
    for (layout, seed) in [
        (Layout::Word, 0),
        (Layout::Line, 0),
        (Layout::Word, 7),
        (Layout::Line, 0x5eed),
    ] {
        let local = AtomicBloomFilter::builder(5000)
            .fpr(0.01)
            .layout(layout)
            .hasher(StableHasher::with_seed(seed))
            .build()
            .unwrap();
        for i in 0..4000u64 {
            local.insert(&format!("item-{i}"));
        }
        let name = format!("roundtrip-{layout:?}-{seed}");
        let (up, down) = (
            dir.path().join(format!("{name}.up")),
            dir.path().join(format!("{name}.down")),
        );
        local.save(&up).unwrap();
        let shared = SharedBloomFilter::upload_file(&server, &name, &up).unwrap();
        assert_eq!(shared.sizing(), local.sizing());
        assert_eq!(shared.hasher().seed(), seed);
        shared.download_to_file(&down).unwrap();
        assert!(
            std::fs::read(&up).unwrap() == std::fs::read(&down).unwrap(),
            "{name}: the downloaded file differs from the uploaded one"
        );
        // Every item inserted, and as many others: the answers are the local filter's, false
        // positives included (a filter at 80% of capacity has some).
        let items: Vec<String> = (0..8000u64).map(|i| format!("item-{i}")).collect();
        let mut hits = Vec::new();
        shared
            .contains_many(items.iter().map(String::as_str), &mut hits)
            .unwrap();
        let local_hits: Vec<bool> = items.iter().map(|i| local.contains(i.as_str())).collect();
        assert_eq!(hits, local_hits, "{name}");
        assert!(
            hits[..4000].iter().all(|&h| h),
            "{name}: an uploaded item is missing"
        );
        // Opened afresh by name (what another process does): the same answers.
        let opened = SharedBloomFilter::open(&server, &name).unwrap();
        hits.clear();
        opened
            .contains_many(items.iter().map(String::as_str), &mut hits)
            .unwrap();
        assert_eq!(hits, local_hits, "{name}, opened by name");
        // The name is taken now: by an upload, and by a created filter.
        match SharedBloomFilter::upload(&server, &name, &local) {
            Err(Error::Exists { name: n }) => assert_eq!(n, name),
            other => panic!("{name}: upload onto a taken name answered {other:?}"),
        }
    }
    SharedBloomFilter::builder("created", 1000)
        .create(&server)
        .unwrap();
    let local = AtomicBloomFilter::builder(1000).build().unwrap();
    assert!(matches!(
        SharedBloomFilter::upload(&server, "created", &local),
        Err(Error::Exists { .. })
    ));
    // The refused uploads left no temporary keys behind: the meta and the shards only.
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*upload*")
        .query(&mut redis.client())
        .unwrap();
    assert!(keys.is_empty(), "temporary keys left: {keys:?}");
}

/// The keys every racer inserts: `n` of them, the multiples of 7 inserted beforehand (never
/// new again), the rest new exactly once in total. The filter is sized for a million at 1e-4
/// and gets 3000: a 64-bit block holds on average 0.01 other items, and an item is a false
/// positive (every bit set by others, so that nobody is told "new") only if one of them covers
/// its k >= 8 bits, about (8/64)^8 = 6e-8; for the 3000 keys, below 1e-5 per run.
fn race_keys(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("race-{i}")).collect()
}

/// Checks the counts of "new" per key of [`race_keys`]: 0 for the keys inserted before, 1 for
/// every other.
fn check_exactly_once(what: &str, counts: &[u32]) {
    for (i, &count) in counts.iter().enumerate() {
        let want = u32::from(i % 7 != 0);
        assert_eq!(count, want, "{what}: race-{i} was new {count} times");
    }
}

fn racing_filter(server: &Server, name: &str, layout: Layout) -> SharedBloomFilter {
    let filter = SharedBloomFilter::builder(name, 1_000_000)
        .fpr(1e-4)
        .layout(layout)
        .shards(4)
        .create(server)
        .unwrap();
    assert!(
        filter.sizing().hashes >= 8,
        "the bound of race_keys assumes k >= 8"
    );
    let before: Vec<String> = race_keys(3000).into_iter().step_by(7).collect();
    let mut new = Vec::new();
    assert_eq!(
        filter
            .insert_many(before.iter().map(String::as_str), &mut new)
            .unwrap(),
        before.len()
    );
    filter
}

/// Threads sharing one `SharedBloomFilter` (its pool of blocking connections): each inserts
/// every key, two in the same order (racing on the same keys at the same time), two shuffled,
/// in batches of 1 to 40; every key is new for exactly one thread, in both layouts.
#[test]
fn threads_sharing_one_filter_are_told_new_exactly_once() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    for layout in [Layout::Word, Layout::Line] {
        let filter = racing_filter(&server, &format!("threads-{layout:?}"), layout);
        let keys = race_keys(3000);
        let counts: Vec<AtomicU32> = keys.iter().map(|_| AtomicU32::new(0)).collect();
        let barrier = Barrier::new(4);
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let (filter, keys, counts, barrier) = (&filter, &keys, &counts, &barrier);
                s.spawn(move || {
                    let mut order: Vec<usize> = (0..keys.len()).collect();
                    server::shuffle(&mut order, if t < 2 { 0 } else { t });
                    barrier.wait();
                    let mut new = Vec::new();
                    for chunk in order.chunks(1 + (t as usize * 13) % 40) {
                        new.clear();
                        filter
                            .insert_many(chunk.iter().map(|&i| keys[i].as_str()), &mut new)
                            .unwrap();
                        for (&i, &n) in chunk.iter().zip(&new) {
                            counts[i].fetch_add(u32::from(n), Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        let counts: Vec<u32> = counts.iter().map(|c| c.load(Ordering::Relaxed)).collect();
        check_exactly_once(&format!("threads, {layout:?}"), &counts);
    }
}

/// Tokio tasks sharing one filter on the multiplexed connection (`insert_many_async`): the
/// same promise as for threads.
#[test]
fn tokio_tasks_sharing_one_filter_are_told_new_exactly_once() {
    let redis = RedisServer::start();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let server = Server::open(&redis.url()).unwrap();
        for layout in [Layout::Word, Layout::Line] {
            let filter = Arc::new(racing_filter(&server, &format!("tasks-{layout:?}"), layout));
            let keys = Arc::new(race_keys(3000));
            let barrier = Arc::new(tokio::sync::Barrier::new(4));
            let mut tasks = Vec::new();
            for t in 0..4u64 {
                let (filter, keys, barrier) = (filter.clone(), keys.clone(), barrier.clone());
                tasks.push(tokio::spawn(async move {
                    let mut order: Vec<usize> = (0..keys.len()).collect();
                    server::shuffle(&mut order, if t < 2 { 0 } else { t });
                    barrier.wait().await;
                    let mut counts = vec![0u32; keys.len()];
                    let mut new = Vec::new();
                    for chunk in order.chunks(1 + (t as usize * 13) % 40) {
                        new.clear();
                        filter
                            .insert_many_async(chunk.iter().map(|&i| keys[i].as_str()), &mut new)
                            .await
                            .unwrap();
                        for (&i, &n) in chunk.iter().zip(&new) {
                            counts[i] += u32::from(n);
                        }
                    }
                    counts
                }));
            }
            let mut counts = vec![0u32; keys.len()];
            for task in tasks {
                for (c, n) in counts.iter_mut().zip(task.await.unwrap()) {
                    *c += n;
                }
            }
            check_exactly_once(&format!("tasks, {layout:?}"), &counts);
            // And the async lookups agree.
            let mut hits = Vec::new();
            assert_eq!(
                filter
                    .contains_many_async(keys.iter().map(String::as_str), &mut hits)
                    .await
                    .unwrap(),
                keys.len()
            );
        }
    });
}

/// An item repeated in one batch is new once, at its first place, in both layouts: its fields
/// share a `BITFIELD` command with other items', and the later copy's old values are the bits
/// the first copy set.
#[test]
fn an_item_repeated_in_a_batch_is_new_once_at_its_first_place() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    for layout in [Layout::Word, Layout::Line] {
        let filter = SharedBloomFilter::builder(&format!("repeat-{layout:?}"), 10_000)
            .layout(layout)
            .shards(2)
            .create(&server)
            .unwrap();
        let items: Vec<String> = (0..300).map(|i| format!("id-{}", i % 100)).collect();
        let mut new = Vec::new();
        assert_eq!(filter.insert_many(items.iter(), &mut new).unwrap(), 100);
        assert!(new[..100].iter().all(|&n| n) && new[100..].iter().all(|&n| !n));
        let mut again = Vec::new();
        assert_eq!(filter.insert_many(items.iter(), &mut again).unwrap(), 0);
    }
}
