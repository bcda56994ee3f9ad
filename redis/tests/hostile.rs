//! A hostile user's tests: odd parameters, odd batches, a server whose keys were edited or
//! lost under an open structure, the APIs mixed among racing threads. Each test is a problem
//! found by attacking the crate (or a promise checked at its edge); none waits for time.

#[path = "common/server.rs"]
mod server;

use std::sync::{Arc, Barrier};
use std::time::Duration;

use seen::Layout;
use seen::clock::ManualClock;
use seen_redis::{Error, Server, SharedBloomFilter, SharedOverwriteMap, SharedWindowedFilter};
use server::{RedisCluster, RedisServer};

const HOUR: Duration = Duration::from_secs(3600);

fn keys(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

fn count_new(filter: &SharedBloomFilter, items: &[String]) -> Result<usize, Error> {
    filter.insert_many(items.iter().map(String::as_str), &mut Vec::new())
}

fn count_hits(filter: &SharedBloomFilter, items: &[String]) -> Result<usize, Error> {
    filter.contains_many(items.iter().map(String::as_str), &mut Vec::new())
}

/// A shard count that does not divide the blocks evenly left trailing shards with no block
/// (8 blocks in 5 shards: 2 per shard fill 4): `create` computed the last byte of an empty
/// shard as `0 - 1` and panicked (debug) or sent an offset the server refuses (release). Every
/// shard count from 1 to past the blocks now creates a filter whose every shard holds blocks,
/// which answers, and downloads.
#[test]
fn any_shard_count_creates_a_filter_without_empty_shards() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    for layout in [Layout::Word, Layout::Line] {
        for shards in 1..=20u32 {
            let name = format!("odd-{layout:?}-{shards}");
            let filter = SharedBloomFilter::builder(&name, 40)
                .layout(layout)
                .shards(shards)
                .create(&server)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            let items = keys(&name, 40);
            // The local filter's answers, false positives included.
            let twin = seen::AtomicBloomFilter::builder(40)
                .layout(layout)
                .build()
                .unwrap();
            let expected: Vec<bool> = items.iter().map(|i| twin.insert(i.as_str())).collect();
            let mut new = Vec::new();
            filter
                .insert_many(items.iter().map(String::as_str), &mut new)
                .unwrap();
            assert_eq!(new, expected, "{name}");
            assert_eq!(count_hits(&filter, &items).unwrap(), 40, "{name}");
            let local = filter.download().unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(items.iter().all(|i| local.contains(i.as_str())), "{name}");
            // Reopened by name: the same shards.
            let again = SharedBloomFilter::open(&server, &name).unwrap();
            assert_eq!(again.keys(), filter.keys(), "{name}");
            assert_eq!(count_hits(&again, &items).unwrap(), 40, "{name}");
        }
    }
}

/// A shard cut short on the server (here by a `SET` of its first half, as an operator's
/// mistake or a bad restore would): the bits past the cut read as zeros, so every item whose
/// bits were there was told "new" again by an insert and "absent" by a lookup, silently. Now
/// the read checks each shard's length with `STRLEN` (in the `EXISTS`'s place, at the same
/// cost): a short shard is an error naming it, for lookups and inserts alike.
#[test]
fn a_shard_cut_short_is_an_error_never_an_answer() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    let mut client = redis.client();
    let filter = SharedBloomFilter::builder("cut", 100_000)
        .shards(1)
        .create(&server)
        .unwrap();
    let items = keys("cut", 5_000);
    assert_eq!(count_new(&filter, &items).unwrap(), 5_000);
    let shard = filter.keys()[0].clone();
    let len: usize = redis::cmd("STRLEN").arg(&shard).query(&mut client).unwrap();
    let half: Vec<u8> = redis::cmd("GETRANGE")
        .arg(&shard)
        .arg(0)
        .arg(len / 2 - 1)
        .query(&mut client)
        .unwrap();
    let _: () = redis::cmd("SET").arg(&shard).arg(half).query(&mut client).unwrap();
    for result in [count_hits(&filter, &items), count_new(&filter, &items)] {
        match result {
            Err(Error::Corrupt { key, what }) => assert_eq!(key, shard, "{what}"),
            other => panic!("a shard cut in half answered {other:?}"),
        }
    }
    assert!(matches!(filter.download(), Err(Error::Corrupt { .. })));
}

/// The shard is deleted (a `FLUSHALL`, an eviction, a restart that lost it) after an insert's
/// read found it and before its write: the write's `BITFIELD SET` created the key again,
/// short, with only this item's bits, and answered "new"; from then on the lost filter was an
/// empty one, telling every item inserted before "new" again. The order is made certain with
/// `CLIENT PAUSE WRITE`: the `DEL` is held first, then the insert's write; the server runs
/// them in that order when unpaused. Now the write round reads each written shard's length
/// after its `BITFIELD`s: a shard that is not its full length fails the batch (no answer), and
/// every later read reports it.
#[test]
fn a_shard_lost_between_an_inserts_read_and_write_answers_nothing() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    let filter = Arc::new(
        SharedBloomFilter::builder("lost-mid", 10_000)
            .shards(1)
            .create(&server)
            .unwrap(),
    );
    let before = keys("before", 1_000);
    assert_eq!(count_new(&filter, &before).unwrap(), 1_000);
    let shard = filter.keys()[0].clone();

    let mut control = redis.client();
    let blocked = |conn: &mut redis::Connection, n: usize| {
        let info: String = redis::cmd("INFO").arg("clients").query(conn).unwrap();
        info.contains(&format!("blocked_clients:{n}\r"))
    };
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(60_000)
        .arg("WRITE")
        .query(&mut control)
        .unwrap();
    let deleter = {
        let mut conn = redis.client();
        let shard = shard.clone();
        std::thread::spawn(move || {
            let _: i64 = redis::cmd("DEL").arg(&shard).query(&mut conn).unwrap();
        })
    };
    server::wait_for(|| blocked(&mut control, 1), "the DEL to be held");
    let insert = {
        let filter = filter.clone();
        std::thread::spawn(move || filter.insert("during"))
    };
    server::wait_for(|| blocked(&mut control, 2), "the insert's write to be held");
    let _: () = redis::cmd("CLIENT")
        .arg("UNPAUSE")
        .query(&mut control)
        .unwrap();
    deleter.join().unwrap();
    match insert.join().unwrap() {
        Err(Error::Missing { key, .. } | Error::Corrupt { key, .. }) => assert_eq!(key, shard),
        other => panic!("an insert whose shard was lost before its write answered {other:?}"),
    }
    // The lost filter never answers as an empty one.
    for result in [count_hits(&filter, &before), count_new(&filter, &before)] {
        assert!(
            matches!(result, Err(Error::Missing { .. } | Error::Corrupt { .. })),
            "a lost shard answered {result:?}"
        );
    }
}

/// On a cluster, a request of one command ran it as is: a windowed insert of one item is one
/// script call, sent as `EVALSHA`, which a node that never ran the script (a fresh cluster,
/// a `SCRIPT FLUSH`, a failover) answers `NOSCRIPT`, returned as an error: every single insert
/// failed until a batch's `EVAL` happened to load the script on that node. Now a lone script
/// goes to a cluster as `EVAL`, as in a pipeline.
#[test]
fn a_single_windowed_insert_on_a_fresh_cluster_runs_its_script() {
    let cluster = RedisCluster::start(3);
    let server = Server::cluster(cluster.urls()).unwrap();
    let clock = ManualClock::new(HOUR * 420_000 + HOUR / 2);
    let f = SharedWindowedFilter::builder("lone", 1_000)
        .periods(2)
        .period(HOUR)
        .clock(clock)
        .create(&server)
        .unwrap();
    assert!(f.insert("first").unwrap());
    assert!(!f.insert("first").unwrap());
    for url in cluster.urls() {
        let mut conn = redis::Client::open(url).unwrap().get_connection().unwrap();
        let _: () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut conn).unwrap();
    }
    assert!(f.insert("second").unwrap());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        assert!(f.insert_async("third").await.unwrap());
        assert!(!f.insert_async("second").await.unwrap());
    });
}
