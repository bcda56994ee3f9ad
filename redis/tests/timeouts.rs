//! Every call ends within its timeout: a server that stops answering (its process stopped,
//! `kill -STOP`, as a hung or frozen host is: the kernel still takes what the client sends and
//! accepts new connections, nothing comes back) makes each call of every structure, blocking or
//! async, and `open` itself, fail with an unknown outcome about one timeout after it stopped,
//! never once per command of a pipeline; once the server answers again, the same handles work,
//! on new connections, each reply read as its own request's.

#[path = "common/items.rs"]
mod items;

use std::fmt::Debug;
use std::time::{Duration, Instant};

use seen::clock::ManualClock;

use items::{count_hits, count_new, keys};
use seen_redis::{Error, Server, SharedBloomFilter, SharedOverwriteMap, SharedWindowedBloomFilter};
use seen_test_server::RedisServer;

/// The timeout of the handles that meet a stopped server.
const SHORT: Duration = Duration::from_secs(1);

/// How long a call on a stopped server may take: [`SHORT`], and generous slack for a loaded
/// machine. A pipeline read that waits the timeout once per reply took 33 s (100 ids on 16
/// shards) to 49 s (1,000 ids); an `open` whose connect had no timeout of its own, 62 s.
const BOUND: Duration = Duration::from_secs(10);

/// A server handle with the [`SHORT`] timeout, `open` included.
fn short(url: &str) -> Result<Server, Error> {
    Server::builder(url).timeout(SHORT).open()
}

/// What `call` returned, and how long it took.
fn timed<T>(call: impl FnOnce() -> T) -> (T, Duration) {
    let start = Instant::now();
    let result = call();
    (result, start.elapsed())
}

/// Checks that a call failed with an unknown outcome ([`Error::Connection`]) within [`BOUND`].
fn assert_timed_out<T: Debug>(what: &str, (result, took): (Result<T, Error>, Duration)) {
    assert!(
        matches!(result, Err(Error::Connection { .. })),
        "{what}: {result:?} after {took:?}"
    );
    assert!(
        took < BOUND,
        "{what}: failed after {took:?}, not within {BOUND:?}"
    );
}

/// A filter of 16 shards, its connection open when the server stops: a lookup of 100 ids (a
/// pipeline of a few commands a shard) and an insert of 1,000, each the first request of its
/// handle after the stop, fail within the timeout; so do the next calls, on a new connection.
/// After the server resumes, the same handles answer: an insert of the 1,000 ids (whatever the
/// timed-out one did) leaves every one of them found.
#[test]
fn a_sharded_filter_on_a_stopped_server_fails_within_the_timeout_then_answers_again() {
    let mut redis = RedisServer::start();
    let server = short(&redis.url()).unwrap();
    let filter = SharedBloomFilter::builder("stalled", 100_000)
        .shards(16)
        .create(&server)
        .unwrap();
    let ids = keys("id", 1000);
    assert_eq!(count_new(&filter, &ids[..10]).unwrap(), 10);
    let inserts = SharedBloomFilter::open(&short(&redis.url()).unwrap(), "stalled").unwrap();
    redis.stop();
    assert_timed_out(
        "contains_many of 100 ids",
        timed(|| count_hits(&filter, &ids[..100])),
    );
    assert_timed_out(
        "insert_many of 1,000 ids",
        timed(|| count_new(&inserts, &ids)),
    );
    assert_timed_out(
        "insert_many of 1,000 ids, again",
        timed(|| count_new(&filter, &ids)),
    );
    redis.resume();
    count_new(&inserts, &ids).unwrap();
    assert_eq!(count_hits(&filter, &ids).unwrap(), 1000);
}

/// A windowed filter's insert (on the server's time: `TIME`, then a read and a write; on a
/// clock of the caller's, 1,000 ids on 16 shards) and a map's claim and insert of 1,000 ids on
/// 16 shards, each on a handle of its own, fail within the timeout; so do inserts from several
/// threads at once sharing two of the handles. Then they answer again.
#[test]
fn a_windowed_insert_and_a_claim_on_a_stopped_server_fail_within_the_timeout() {
    let mut redis = RedisServer::start();
    let server = short(&redis.url()).unwrap();
    SharedWindowedBloomFilter::builder("stalled-window", 10_000)
        .periods(3)
        .shards(16)
        .create(&server)
        .unwrap();
    let clock = ManualClock::new(Duration::from_secs(1_700_000_000));
    SharedWindowedBloomFilter::builder("stalled-records", 10_000)
        .periods(3)
        .shards(16)
        .clock(clock.clone())
        .create(&server)
        .unwrap();
    SharedOverwriteMap::builder("stalled-map", 100_000u64)
        .shards(16)
        .create(&server)
        .unwrap();
    let handle = || short(&redis.url()).unwrap();
    let window = SharedWindowedBloomFilter::open(&handle(), "stalled-window").unwrap();
    let records = SharedWindowedBloomFilter::open(&handle(), "stalled-records")
        .unwrap()
        .with_clock(clock);
    let map = SharedOverwriteMap::open(&handle(), "stalled-map").unwrap();
    let claims = SharedOverwriteMap::open(&handle(), "stalled-map").unwrap();
    let ids = keys("id", 1000);
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    redis.stop();
    assert_timed_out("windowed insert", timed(|| window.insert("during")));
    assert_timed_out(
        "windowed insert_many of 1,000 ids",
        timed(|| records.insert_many(ids.iter().copied(), &mut Vec::new())),
    );
    assert_timed_out(
        "claim",
        timed(|| claims.claim("during").map(|claim| claim.is_some())),
    );
    assert_timed_out(
        "map insert_many of 1,000 ids",
        timed(|| map.insert_many(ids.iter().copied(), &mut Vec::new())),
    );
    let (window, map) = (&window, &map);
    std::thread::scope(|s| {
        let threads: Vec<_> = (0..4)
            .map(|i| {
                s.spawn(move || {
                    let item = format!("thread-{i}");
                    if i % 2 == 0 {
                        timed(|| window.insert(&item))
                    } else {
                        timed(|| map.insert(&item))
                    }
                })
            })
            .collect();
        for (i, thread) in threads.into_iter().enumerate() {
            assert_timed_out(&format!("thread {i}'s insert"), thread.join().unwrap());
        }
    });
    redis.resume();
    window.insert("during").unwrap();
    assert!(!window.insert("during").unwrap());
    records
        .insert_many(ids.iter().copied(), &mut Vec::new())
        .unwrap();
    let hits = records
        .contains_many(ids.iter().copied(), &mut Vec::new())
        .unwrap();
    assert_eq!(hits, 1000);
    if let Some(claim) = claims.claim("after").unwrap() {
        assert!(claim.commit().unwrap());
    }
    assert!(map.contains("after").unwrap());
}

/// The async API: the same calls fail within the timeout, from tasks of a runtime of the
/// caller's, and answer again after the server resumes.
#[test]
fn async_calls_on_a_stopped_server_fail_within_the_timeout() {
    let mut redis = RedisServer::start();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let server = short(&redis.url()).unwrap();
    let filter = runtime
        .block_on(
            SharedBloomFilter::builder("stalled-async", 100_000)
                .shards(16)
                .create_async(&server),
        )
        .unwrap();
    let map = SharedOverwriteMap::builder("stalled-async-map", 10_000u64)
        .create(&server)
        .unwrap();
    let ids = keys("id", 1000);
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    runtime
        .block_on(filter.insert_many_async(ids[..10].iter().copied(), &mut Vec::new()))
        .unwrap();
    redis.stop();
    assert_timed_out(
        "contains_many_async of 100 ids",
        timed(|| {
            runtime
                .block_on(filter.contains_many_async(ids[..100].iter().copied(), &mut Vec::new()))
        }),
    );
    assert_timed_out(
        "insert_many_async of 1,000 ids",
        timed(|| runtime.block_on(filter.insert_many_async(ids.iter().copied(), &mut Vec::new()))),
    );
    assert_timed_out(
        "claim_async",
        timed(|| runtime.block_on(async { map.claim_async("during").await.map(|c| c.is_some()) })),
    );
    redis.resume();
    runtime
        .block_on(filter.insert_many_async(ids.iter().copied(), &mut Vec::new()))
        .unwrap();
    let hits = runtime
        .block_on(filter.contains_many_async(ids.iter().copied(), &mut Vec::new()))
        .unwrap();
    assert_eq!(hits, 1000);
}

/// `open` against a stopped server fails within the timeout it was given (its connect and its
/// check both count), and opens once the server resumes.
#[test]
fn open_on_a_stopped_server_fails_within_its_timeout() {
    let mut redis = RedisServer::start();
    redis.stop();
    assert_timed_out("open", timed(|| short(&redis.url())));
    redis.resume();
    let server = short(&redis.url()).unwrap();
    let filter = SharedBloomFilter::builder("opened", 1000)
        .create(&server)
        .unwrap();
    assert!(filter.insert("a").unwrap());
}

/// The blocking API runs the same async requests on the calling thread, with sockets and
/// timers driven by the server's own runtime: it works inside a task of a tokio runtime of the
/// caller's, a current-thread one too (whose only thread it blocks), for more requests than a
/// task's cooperative budget allows between two yields; the async API works in the same task;
/// and the last handle of a server, dropped there, takes its runtime down without panicking.
#[test]
fn the_blocking_api_works_inside_a_tokio_runtime() {
    let redis = RedisServer::start();
    let runtimes = [
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap(),
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap(),
    ];
    for (i, runtime) in runtimes.iter().enumerate() {
        runtime.block_on(async {
            let server = Server::open(&redis.url()).unwrap();
            let filter = SharedBloomFilter::builder(&format!("inside-{i}"), 10_000)
                .create(&server)
                .unwrap();
            for item in 0..300u64 {
                assert!(filter.insert(&item).unwrap());
            }
            let items: Vec<u64> = (0..300).collect();
            let hits = filter
                .contains_many_async(items.iter(), &mut Vec::new())
                .await
                .unwrap();
            assert_eq!(hits, 300);
            assert!(!filter.insert_async(&7u64).await.unwrap());
            drop(filter);
            drop(server);
        });
    }
}
