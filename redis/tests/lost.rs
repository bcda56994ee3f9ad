//! Lost state is [`Error::Missing`], never an answer: a shard or a generation that is gone (a
//! `DEL`, a `FLUSHALL`, an eviction, a restart without persistence) fails every later read and
//! write, from every handle, also one opened afterwards, and no write ever brings it back as
//! an empty structure.

#[path = "common/items.rs"]
mod items;

use std::time::Duration;

use items::{count_hits, count_new, keys};
use seen::clock::ManualClock;
use seen_redis::{Error, Server, SharedBloomFilter, SharedOverwriteMap, SharedWindowedBloomFilter};
use seen_test_server::RedisServer;

const HOUR: Duration = Duration::from_secs(3600);

fn del(redis: &RedisServer, keys: &[String]) -> u64 {
    redis::cmd("DEL")
        .arg(keys)
        .query(&mut redis.client())
        .unwrap()
}

fn assert_missing<T: std::fmt::Debug>(what: &str, result: Result<T, Error>) {
    assert!(
        matches!(result, Err(Error::Missing { .. })),
        "{what}: a lost structure answered {result:?}"
    );
}

/// The break this file was written for: a shard deleted, then a batch of inserts that touches
/// every block, so that its writes (`BITFIELD SET`, which creates a missing key) re-create the
/// shard at its full length. The length checks around the writes then passed, and from then on
/// every handle answered from an empty filter ("new" for every item inserted before). Now each
/// command reads the shard's guard byte in the same atomic step: the re-created key has none.
#[test]
fn a_lost_shard_written_again_at_full_length_stays_missing_for_every_handle() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    // Both layouts: the line layout reads whole blocks by `GETRANGE`, with the guard read
    // after them in a command of its own.
    for layout in [seen::Layout::Word, seen::Layout::Line] {
        let name = format!("lost-full-{layout:?}");
        let builder = SharedBloomFilter::builder(&name, 100)
            .shards(1)
            .layout(layout);
        let filter = builder.open_or_create(&server).unwrap();
        let before = keys("before", 100);
        assert_eq!(count_new(&filter, &before).unwrap(), 100);
        assert_eq!(del(&redis, filter.keys()), 1);
        // Enough items to touch every block of the shard: its last one too, so that a write
        // re-creates the key at full length.
        let after = keys("after", 5_000);
        for round in 0..3 {
            assert_missing(&format!("insert round {round}"), count_new(&filter, &after));
        }
        assert_missing("lookup", count_hits(&filter, &before));
        assert_missing("insert of an old item", filter.insert("before-1"));
        // A handle opened afterwards, by open or by the every-process line, is told the same.
        let fresh = SharedBloomFilter::open(&server, &name).unwrap();
        assert_missing("a fresh handle's lookup", count_hits(&fresh, &before));
        let again = builder.open_or_create(&server).unwrap();
        assert_missing("open_or_create's lookup", count_hits(&again, &before));
        assert!(matches!(builder.create(&server), Err(Error::Exists { .. })));
        // Destroyed and created again, it starts empty: the user's decision, not a write's.
        again.destroy().unwrap();
        let new = builder.create(&server).unwrap();
        assert_eq!(count_hits(&new, &before).unwrap(), 0);
        assert_eq!(count_new(&new, &before).unwrap(), 100);
    }
}

/// The same through `FLUSHALL` with the description gone too: a handle kept from before is
/// told `Missing` (its writes recreate nothing it would answer from), whatever its batches do.
#[test]
fn a_flushed_filter_is_missing_for_the_handles_that_had_it_open() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    for layout in [seen::Layout::Word, seen::Layout::Line] {
        let name = format!("flushed-{layout:?}");
        let filter = SharedBloomFilter::builder(&name, 1_000)
            .layout(layout)
            .shards(3)
            .create(&server)
            .unwrap();
        let before = keys("before", 1_000);
        assert_eq!(count_new(&filter, &before).unwrap(), 1_000);
        let _: () = redis::cmd("FLUSHALL").query(&mut redis.client()).unwrap();
        let after = keys("after", 20_000);
        for round in 0..3 {
            assert_missing(
                &format!("{layout:?} insert {round}"),
                count_new(&filter, &after),
            );
            assert_missing(
                &format!("{layout:?} lookup {round}"),
                count_hits(&filter, &before),
            );
        }
        assert_missing(
            &format!("{layout:?} open"),
            SharedBloomFilter::open(&server, &name),
        );
    }
}

/// A windowed filter's generation that is gone is `Missing`, not an empty generation: the
/// description alone was checked, so an evicted generation answered "new" for all its items.
#[test]
fn a_lost_generation_is_missing_not_empty() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    let clock = ManualClock::new(HOUR * 420_000 + HOUR / 2);
    let filter = SharedWindowedBloomFilter::builder("lost-gen", 1_000)
        .periods(2)
        .period(HOUR)
        .shards(2)
        .clock(clock.clone())
        .create(&server)
        .unwrap();
    let first = keys("first", 500);
    let mut new = Vec::new();
    assert_eq!(filter.insert_many(&first, &mut new).unwrap(), 500);
    let g = filter.generation().unwrap();
    clock.advance(HOUR);
    let second = keys("second", 500);
    assert_eq!(filter.insert_many(&second, &mut new).unwrap(), 500);
    // The older generation of shard 1 goes; both generations are in the window.
    assert_eq!(del(&redis, &[filter.key(1, g)]), 1);
    let mut hits = Vec::new();
    assert_missing("lookup", filter.contains_many(&first, &mut hits));
    assert_missing("insert", filter.insert_many(&first, &mut new));
    assert_missing(
        "insert of new items",
        filter.insert_many(&keys("third", 100), &mut new),
    );
    // A generation that was never written is empty, not missing: a window's first periods.
    let young = SharedWindowedBloomFilter::builder("young", 1_000)
        .periods(5)
        .period(HOUR)
        .clock(clock.clone())
        .create(&server)
        .unwrap();
    assert_eq!(young.contains_many(&first, &mut hits).unwrap(), 0);
    assert_eq!(young.insert_many(&first, &mut new).unwrap(), 500);
}

/// The same under the server's own eviction (`allkeys-lru` with a small `maxmemory`): the
/// generations written first are evicted by other keys' writes, and the filter reports it.
#[test]
fn an_evicted_generation_is_missing_not_empty() {
    let redis =
        RedisServer::start_with(&["--maxmemory", "8mb", "--maxmemory-policy", "allkeys-lru"]);
    let server = Server::open(&redis.url()).unwrap();
    let clock = ManualClock::new(HOUR * 420_000 + HOUR / 2);
    let filter = SharedWindowedBloomFilter::builder("evicted", 100_000)
        .periods(3)
        .period(HOUR)
        .clock(clock.clone())
        .create(&server)
        .unwrap();
    let items = keys("item", 2_000);
    let mut new = Vec::new();
    assert_eq!(filter.insert_many(&items, &mut new).unwrap(), 2_000);
    let key = filter.key(0, filter.generation().unwrap());
    let mut conn = redis.client();
    // Fill the server with other keys until the generation is evicted.
    let filler = vec![b'x'; 64 << 10];
    for i in 0.. {
        let exists: u64 = redis::cmd("EXISTS").arg(&key).query(&mut conn).unwrap();
        if exists == 0 {
            break;
        }
        assert!(i < 10_000, "the generation was never evicted");
        let _: () = redis::cmd("SET")
            .arg(format!("filler-{i}"))
            .arg(&filler)
            .query(&mut conn)
            .unwrap();
    }
    let mut hits = Vec::new();
    assert_missing("lookup", filter.contains_many(&items, &mut hits));
    assert_missing("insert", filter.insert_many(&items, &mut new));
}

/// The map's shards carried a guard byte already; what changed is that a create no longer
/// replaces a lost shard when the description is still there (it answered from an empty map).
#[test]
fn a_lost_map_shard_is_missing_also_after_open_or_create() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    let builder = SharedOverwriteMap::builder("lost-map", 10_000u64).shards(2);
    let map = builder.open_or_create(&server).unwrap();
    let items = keys("msg", 1_000);
    let mut new = Vec::new();
    assert_eq!(map.insert_many(&items, &mut new).unwrap(), 1_000);
    assert_eq!(del(&redis, &[map.keys()[0].clone()]), 1);
    let again = builder.open_or_create(&server).unwrap();
    let mut hits = Vec::new();
    assert_missing("lookup", again.contains_many(&items, &mut hits));
    assert_missing("claim", again.claim("msg-1").map(|c| c.is_some()));
}

/// A generation that expired on the server's clock is empty, not lost: the ledger's end of
/// its life has passed. (The period is a second and the window none, so the generation's key
/// lives about 1.1 s; the test polls the server until the key is gone.)
#[test]
fn an_expired_generation_is_empty_not_missing() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    let second = Duration::from_secs(1);
    let clock = ManualClock::new(second * 1_800_000_000 + second.mul_f64(0.9));
    let filter = SharedWindowedBloomFilter::builder("expiring", 1_000)
        .periods(0)
        .period(second)
        .clock(clock.clone())
        .create(&server)
        .unwrap();
    let items = keys("item", 100);
    let mut new = Vec::new();
    assert_eq!(filter.insert_many(&items, &mut new).unwrap(), 100);
    let key = filter.key(0, filter.generation().unwrap());
    let mut conn = redis.client();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let exists: u64 = redis::cmd("EXISTS").arg(&key).query(&mut conn).unwrap();
        if exists == 0 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{key} never expired");
        std::thread::yield_now();
    }
    // The handle's clock has not moved: the same generation, read empty, written again.
    let mut hits = Vec::new();
    assert_eq!(filter.contains_many(&items, &mut hits).unwrap(), 0);
    assert_eq!(filter.insert_many(&items, &mut new).unwrap(), 100);
}

/// `info()` counts the bits on the server (one request) and estimates as the local filter
/// does; a lost shard or generation is `Missing` there too, never an empty filter's info.
#[test]
fn info_estimates_from_the_servers_bits_and_a_lost_shard_is_missing() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    let filter = SharedBloomFilter::builder("info", 100_000)
        .shards(3)
        .create(&server)
        .unwrap();
    let items = keys("item", 50_000);
    count_new(&filter, &items).unwrap();
    let info = filter.info().unwrap();
    let local = filter.download().unwrap().info();
    assert_eq!(info.estimated_len, local.estimated_len);
    assert_eq!((info.capacity, info.fpr), (filter.capacity(), filter.fpr()));
    assert!((49_000..51_000).contains(&info.estimated_len), "{info}");
    assert!(info.estimated_fpr < info.fpr, "{info}");
    assert_eq!(del(&redis, &[filter.keys()[2].clone()]), 1);
    assert_missing("info", filter.info());

    let clock = ManualClock::new(HOUR * 420_000 + HOUR / 2);
    let window = SharedWindowedBloomFilter::builder("info-window", 10_000)
        .periods(2)
        .period(HOUR)
        .shards(2)
        .clock(clock.clone())
        .create(&server)
        .unwrap();
    let mut new = Vec::new();
    window.insert_many(&keys("first", 5_000), &mut new).unwrap();
    let g = window.generation().unwrap();
    clock.advance(HOUR);
    window
        .insert_many(&keys("second", 3_000), &mut new)
        .unwrap();
    let info = window.info().unwrap();
    assert_eq!((info.layers, info.capacity), (3, 30_000));
    assert!((7_700..8_300).contains(&info.estimated_len), "{info}");
    let current = window.generation_info(g + 1).unwrap();
    assert!((2_850..3_150).contains(&current.estimated_len), "{current}");
    assert_eq!(window.generation_info(g + 2).unwrap().estimated_len, 0);
    assert_eq!(del(&redis, &[window.key(1, g)]), 1);
    assert_missing("window info", window.info());
    assert_missing("generation info", window.generation_info(g));
}
