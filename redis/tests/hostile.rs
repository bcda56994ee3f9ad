//! A hostile user's tests: odd parameters, odd batches, a server whose keys were edited or
//! lost under an open structure, the APIs mixed among racing threads. Each test is a problem
//! found by attacking the crate (or a promise checked at its edge); none waits for time.

#[path = "common/items.rs"]
mod items;

use std::sync::{Arc, Barrier};
use std::time::Duration;

use items::{count_hits, count_new, keys};
use seen::Layout;
use seen::clock::ManualClock;
use seen_redis::{Error, Server, SharedBloomFilter, SharedOverwriteMap, SharedWindowedBloomFilter};
use seen_test_server::{self as server, RedisCluster, RedisServer};

const HOUR: Duration = Duration::from_secs(3600);

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
/// every command reads the shard's guard byte, past the cut: a short shard is an error naming
/// it, for lookups and inserts alike.
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
    let _: () = redis::cmd("SET")
        .arg(&shard)
        .arg(half)
        .query(&mut client)
        .unwrap();
    for result in [count_hits(&filter, &items), count_new(&filter, &items)] {
        match result {
            Err(Error::Missing { key, .. }) => assert_eq!(key, shard),
            other => panic!("a shard cut in half answered {other:?}"),
        }
    }
    assert!(matches!(
        filter.download(),
        Err(Error::Missing { .. } | Error::Corrupt { .. })
    ));
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

    // An hour's pause: it ends with the UNPAUSE below, never by itself during the waits.
    redis.pause_writes();
    let deleter = {
        let mut conn = redis.client();
        let shard = shard.clone();
        std::thread::spawn(move || {
            let _: i64 = redis::cmd("DEL").arg(&shard).query(&mut conn).unwrap();
        })
    };
    redis.wait_blocked(1, "the DEL to be held");
    let insert = {
        let filter = filter.clone();
        std::thread::spawn(move || filter.insert("during"))
    };
    redis.wait_blocked(2, "the insert's write to be held");
    redis.unpause();
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
    let f = SharedWindowedBloomFilter::builder("lone", 1_000)
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

/// The first `n` items (from 0 up) whose slots in `map` all differ, so that no item overwrites
/// another: exactly-once then has no exception.
fn distinct_slots(map: &SharedOverwriteMap, n: usize) -> Vec<u64> {
    use seen::hash::ItemHasher;
    let mut slots = std::collections::HashSet::new();
    (0u64..)
        .filter(|i| {
            slots.insert(seen::MapSlot::new(map.hasher().hash_item(i), map.buckets()).slot())
        })
        .take(n)
        .collect()
}

/// One of the three structures, behind the blocking and the async batch insert.
enum Any {
    Bloom(SharedBloomFilter),
    Window(SharedWindowedBloomFilter),
    Map(SharedOverwriteMap),
}

impl Any {
    fn insert_many(&self, items: &[u64], new: &mut Vec<bool>) -> Result<usize, Error> {
        match self {
            Any::Bloom(f) => f.insert_many(items.iter(), new),
            Any::Window(f) => f.insert_many(items.iter(), new),
            Any::Map(m) => m.insert_many(items.iter(), new),
        }
    }

    async fn insert_many_async(&self, items: &[u64], new: &mut Vec<bool>) -> Result<usize, Error> {
        match self {
            Any::Bloom(f) => f.insert_many_async(items.iter(), new).await,
            Any::Window(f) => f.insert_many_async(items.iter(), new).await,
            Any::Map(m) => m.insert_many_async(items.iter(), new).await,
        }
    }

    fn insert(&self, item: u64) -> Result<bool, Error> {
        match self {
            Any::Bloom(f) => f.insert(&item),
            Any::Window(f) => f.insert(&item),
            Any::Map(m) => m.insert(&item),
        }
    }
}

/// The three structures, sized so that 4,000 items make no false positive in practice, spread
/// over 5 shards (the map's items are chosen in distinct slots: [`distinct_slots`]).
fn all_three(server: &Server, prefix: &str) -> Vec<(String, Any)> {
    let clock = ManualClock::new(HOUR * 430_000 + HOUR / 2);
    let map = SharedOverwriteMap::builder(&format!("{prefix}-map"), 1u64 << 20)
        .shards(5)
        .create(server)
        .unwrap();
    vec![
        (
            "bloom word".to_owned(),
            Any::Bloom(
                SharedBloomFilter::builder(&format!("{prefix}-word"), 1_000_000)
                    .fpr(1e-5)
                    .shards(5)
                    .create(server)
                    .unwrap(),
            ),
        ),
        (
            "bloom line".to_owned(),
            Any::Bloom(
                SharedBloomFilter::builder(&format!("{prefix}-line"), 1_000_000)
                    .fpr(1e-7)
                    .layout(Layout::Line)
                    .shards(5)
                    .create(server)
                    .unwrap(),
            ),
        ),
        (
            "windowed".to_owned(),
            Any::Window(
                SharedWindowedBloomFilter::builder(&format!("{prefix}-window"), 1_000_000)
                    .fpr(1e-4)
                    .periods(2)
                    .period(HOUR)
                    .shards(5)
                    .clock(clock)
                    .create(server)
                    .unwrap(),
            ),
        ),
        ("map".to_owned(), Any::Map(map)),
    ]
}

/// Six clients on one `Server` race on the same 4,000 items: two blocking threads and two
/// tokio tasks with batches in which every item appears twice (forward then backward, so the
/// repeat is in another command of the batch), and two threads of single inserts; every
/// batch spans every shard. Each item is new exactly once over all of them, in every
/// structure.
#[test]
fn blocking_async_and_single_inserts_racing_with_repeats_are_new_exactly_once() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    for (what, structure) in all_three(&server, "mixed") {
        let items = match &structure {
            Any::Map(map) => distinct_slots(map, 4_000),
            _ => (0..4_000u64).collect(),
        };
        let counts: Vec<std::sync::atomic::AtomicU32> =
            items.iter().map(|_| Default::default()).collect();
        let barrier = Barrier::new(6);
        let count = |at: &[usize], new: &[bool]| {
            assert_eq!(at.len(), new.len());
            for (&i, &n) in at.iter().zip(new) {
                counts[i].fetch_add(u32::from(n), std::sync::atomic::Ordering::Relaxed);
            }
        };
        std::thread::scope(|s| {
            for t in 0..6u64 {
                let (structure, items, barrier, count, runtime, what) =
                    (&structure, &items, &barrier, &count, &runtime, &what);
                s.spawn(move || {
                    let mut order: Vec<usize> = (0..items.len()).collect();
                    server::shuffle(&mut order, t + 1);
                    barrier.wait();
                    for chunk in order.chunks(97 + 50 * t as usize) {
                        let mut at: Vec<usize> = chunk.to_vec();
                        at.extend(chunk.iter().rev());
                        let batch: Vec<u64> = at.iter().map(|&i| items[i]).collect();
                        let mut new = Vec::new();
                        match t {
                            0 | 1 => {
                                structure.insert_many(&batch, &mut new).unwrap();
                            }
                            2 | 3 => {
                                runtime
                                    .block_on(structure.insert_many_async(&batch, &mut new))
                                    .unwrap();
                            }
                            _ => {
                                for &item in &batch {
                                    new.push(structure.insert(item).unwrap());
                                }
                            }
                        }
                        // A repeat within a batch is new at most once, at its first place.
                        let half = chunk.len();
                        assert!(new[half..].iter().all(|n| !n), "{what}: a repeat was new");
                        count(&at, &new);
                    }
                });
            }
        });
        for (i, c) in counts.iter().enumerate() {
            let c = c.load(std::sync::atomic::Ordering::Relaxed);
            assert_eq!(c, 1, "{what}: item {i} was new {c} times");
        }
    }
}

/// Batch edges: an empty batch answers nothing and appends nothing, in all three structures,
/// blocking and async; a batch of 100,000 items (repeats included, over every shard) answers
/// item for item as the local filter and map inserting them one by one.
#[test]
fn empty_and_huge_batches_answer_as_one_by_one_inserts() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for (what, structure) in all_three(&server, "edges") {
        let mut new = vec![true];
        assert_eq!(structure.insert_many(&[], &mut new).unwrap(), 0, "{what}");
        assert_eq!(
            runtime
                .block_on(structure.insert_many_async(&[], &mut new))
                .unwrap(),
            0,
            "{what}"
        );
        assert_eq!(new, [true], "{what}");
    }
    let items: Vec<u64> = (0..100_000u64).map(|i| (i * 7919) % 60_000).collect();
    for layout in [Layout::Word, Layout::Line] {
        let name = format!("huge-{layout:?}");
        let shared = SharedBloomFilter::builder(&name, 50_000)
            .layout(layout)
            .shards(7)
            .create(&server)
            .unwrap();
        let local = seen::AtomicBloomFilter::builder(50_000)
            .layout(layout)
            .build()
            .unwrap();
        let want: Vec<bool> = items.iter().map(|i| local.insert(i)).collect();
        let mut new = Vec::new();
        shared.insert_many(items.iter(), &mut new).unwrap();
        assert!(
            new == want,
            "{name}: the batch differs from one-by-one inserts"
        );
        let (mut down, mut here) = (Vec::new(), Vec::new());
        shared.download().unwrap().write_to(&mut down).unwrap();
        local.write_to(&mut here).unwrap();
        assert!(
            down == here,
            "{name}: the download differs from the local filter"
        );
    }
    let map = SharedOverwriteMap::builder("huge-map", 70_000)
        .shards(7)
        .create(&server)
        .unwrap();
    let local = map.local_twin().unwrap();
    let want: Vec<bool> = items.iter().map(|i| local.insert(i)).collect();
    let mut new = Vec::new();
    map.insert_many(items.iter(), &mut new).unwrap();
    assert!(
        new == want,
        "map: the batch differs from one-by-one inserts"
    );
}

/// The timeout of the handles that meet a paused server: each round of the test below waits
/// it out once. Long enough that no request to a server that answers (the open before the
/// pause, the calls after it) waits that long on a loaded machine.
const SHORT: Duration = Duration::from_secs(3);

/// A server that holds writes for longer than the timeout (`CLIENT PAUSE WRITE` for an hour,
/// as a failover does, ended by `UNPAUSE`): the blocking and the async insert and the claim
/// fail with an unknown outcome instead of hanging or answering, and once the server answers
/// again, the same handles work on fresh connections, where no late reply of a timed-out
/// request is read as another's (the item is then found, or new once). Only the handles that
/// meet the pause have the short timeout; the setup and the checks use the default one.
#[test]
fn a_server_holding_writes_past_the_timeout_is_an_unknown_outcome_then_answers_again() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    let filter = SharedBloomFilter::builder("sleepy", 10_000)
        .create(&server)
        .unwrap();
    let map = SharedOverwriteMap::builder("sleepy-map", 10_000)
        .create(&server)
        .unwrap();
    assert!(filter.insert("warm").unwrap());
    let short = Server::builder(&redis.url()).timeout(SHORT).open().unwrap();
    let held_filter = SharedBloomFilter::open(&short, "sleepy").unwrap();
    let held_map = SharedOverwriteMap::open(&short, "sleepy-map").unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for round in 0..2 {
        redis.pause_writes();
        let item = format!("asleep-{round}");
        // The insert (blocking, then async) and the claim at once: each waits out its timeout
        // once (the pause outlasts them all).
        let results = std::thread::scope(|s| {
            let item = item.as_str();
            let (held_filter, held_map, runtime) = (&held_filter, &held_map, &runtime);
            let insert = if round == 0 {
                ("insert", s.spawn(move || held_filter.insert(item)))
            } else {
                (
                    "async insert",
                    s.spawn(move || runtime.block_on(held_filter.insert_async(item))),
                )
            };
            let claim = (
                "claim",
                s.spawn(move || held_map.claim(item).map(|c| c.is_some())),
            );
            [insert, claim].map(|(what, thread)| (what, thread.join().unwrap()))
        });
        for (what, result) in results {
            match result {
                Err(err) => assert!(err.is_unknown_outcome(), "{what}: {err:?}"),
                Ok(answer) => panic!("{what} on a paused server answered {answer}"),
            }
        }
        redis.unpause();
        // Unpaused: answers again, consistent with whatever the timed-out writes did (those
        // still connected ran before the UNPAUSE's reply: the item may or may not be new).
        filter.insert(item.as_str()).unwrap();
        assert!(!filter.insert(item.as_str()).unwrap());
        assert!(filter.contains("warm").unwrap());
        // The handles that timed out answer again, each reply its own request's.
        assert!(!runtime.block_on(held_filter.insert_async("warm")).unwrap());
        assert!(!held_filter.insert(item.as_str()).unwrap());
        let claimed = held_map.claim(&item).unwrap();
        assert!(map.contains(&item).unwrap());
        if let Some(claim) = claimed {
            claim.commit().unwrap();
        }
    }
}

/// A shard count asked past a cluster's 16,384 slots is lowered to them (a map of a million
/// buckets asked in `u32::MAX` shards names 16,384 keys, not a million), and a filter's too.
#[test]
fn a_huge_shard_count_is_lowered_to_the_slot_count() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    let map = SharedOverwriteMap::builder("many", 1_000_000u64)
        .shards(u32::MAX)
        .create(&server)
        .unwrap();
    // 62 buckets a shard (1e6 / 16,384, up): 16,130 shards cover them, none empty.
    assert_eq!(map.keys().len(), 16_130);
    assert!(map.insert("a").unwrap());
    assert!(!map.insert("a").unwrap());
    let filter = SharedBloomFilter::builder("many-bits", 10_000_000)
        .shards(u32::MAX)
        .create(&server)
        .unwrap();
    assert!(filter.keys().len() <= 16_384, "{}", filter.keys().len());
    let items: Vec<u64> = (0..1000).collect();
    let mut new = Vec::new();
    assert_eq!(filter.insert_many(items.iter(), &mut new).unwrap(), 1000);
}

/// A clock at the end of time (`Duration::MAX`, which a `ManualClock` reads as 2^64 - 1 ns)
/// neither panics nor wraps: inserts and lookups still answer.
#[test]
fn a_windowed_clock_at_the_end_of_time_still_answers() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    let filter = SharedWindowedBloomFilter::builder("end", 1000)
        .periods(2)
        .period(Duration::from_secs(60))
        .clock(ManualClock::new(Duration::MAX))
        .create(&server)
        .unwrap();
    assert_eq!(filter.generation().unwrap(), u64::MAX / 60_000_000_000);
    assert!(filter.insert("x").unwrap());
    assert!(filter.contains("x").unwrap());
    assert!(!filter.insert("x").unwrap());
}
