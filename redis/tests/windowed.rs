//! The shared windowed filter against real servers: the window semantics of the local
//! `WindowedBloomFilter` (aligned rotation), on a manual clock so that no test waits for time
//! to pass; exactly-once inserts across a period boundary; generation keys that expire.

use std::sync::{Arc, Barrier};
use std::time::Duration;

use seen::WindowedBloomFilter;
use seen::clock::ManualClock;
use seen::{Layout, hash::ItemHasher};
use seen_redis::{Error, Server, SharedWindowedBloomFilter};
use seen_test_server::{RedisCluster, RedisServer};

const HOUR: Duration = Duration::from_secs(3600);

/// A time well inside generation `g` of hourly periods, `at` (a fraction) into it.
fn hour(g: u64, at: f64) -> Duration {
    HOUR * g as u32 + HOUR.mul_f64(at)
}

fn integer(conn: &mut redis::Connection, cmd: &str, key: &str) -> i64 {
    redis::cmd(cmd).arg(key).query(conn).unwrap()
}

/// The server's `TIME`, in milliseconds (rounded down, as the server's own expiry clock).
fn server_millis(conn: &mut redis::Connection) -> i64 {
    let (secs, micros): (i64, i64) = redis::cmd("TIME").query(conn).unwrap();
    secs * 1000 + micros / 1000
}

#[test]
fn a_repeat_within_the_window_is_caught_and_one_past_window_and_period_passes() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    let clock = ManualClock::new(hour(470_000, 0.9)); // late in its period
    let f = SharedWindowedBloomFilter::builder("w", 10_000)
        .periods(3)
        .period(HOUR)
        .clock(clock.clone())
        .create(&server)
        .unwrap();
    assert_eq!(
        (f.periods(), f.generations(), f.generation().unwrap()),
        (3, 4, 470_000)
    );
    assert!(f.insert("a").unwrap());
    assert!(!f.insert("a").unwrap());
    // Just under 3 periods later: caught (the window is at least 3 periods).
    clock.set(hour(470_003, 0.89));
    assert!(f.contains("a").unwrap());
    // In the 4th period after its own (3.1 periods later, 4 generations on): forgotten.
    clock.set(hour(470_004, 0.0));
    assert!(!f.contains("a").unwrap());
    // An item inserted early in its period is still caught just under 4 periods later, when
    // it is in the oldest live generation; more than window + period later it passes.
    clock.set(hour(470_010, 0.0));
    assert!(f.insert("b").unwrap());
    clock.set(hour(470_013, 0.999));
    assert!(!f.insert("b").unwrap());
    clock.set(hour(470_014, 0.001));
    assert!(f.insert("b").unwrap());
}

#[test]
fn an_insert_that_returns_false_does_not_renew_the_item() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    let clock = ManualClock::new(hour(1_000, 0.5));
    let f = SharedWindowedBloomFilter::builder("renew", 10_000)
        .periods(2)
        .period(HOUR)
        .clock(clock.clone())
        .create(&server)
        .unwrap();
    let items: Vec<u64> = (0..500).collect();
    let mut new = Vec::new();
    assert_eq!(f.insert_many(items.iter(), &mut new).unwrap(), 500);
    // The repeats two periods later are refused, and write nothing.
    clock.set(hour(1_002, 0.5));
    new.clear();
    assert_eq!(f.insert_many(items.iter(), &mut new).unwrap(), 0);
    let mut conn = redis.client();
    assert_eq!(
        integer(&mut conn, "EXISTS", &f.key(0, 1_002)),
        0,
        "a refused insert wrote"
    );
    // One more period: the first insert's generation is gone, and nothing renewed them.
    clock.set(hour(1_003, 0.0));
    let mut hits = Vec::new();
    assert_eq!(f.contains_many(items.iter(), &mut hits).unwrap(), 0);
    new.clear();
    assert_eq!(f.insert_many(items.iter(), &mut new).unwrap(), 500);
}

/// A small deterministic generator (no dependency): SplitMix64.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[test]
fn answers_agree_with_the_local_windowed_filter_item_for_item() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    for periods in [0, 1, 4] {
        let clock = ManualClock::new(hour(500_000, 0.3));
        // Small generations, so that false positives happen: they must agree too.
        let shared = SharedWindowedBloomFilter::builder(&format!("agree-{periods}"), 400)
            .fpr(0.05)
            .periods(periods)
            .period(HOUR)
            .shards(2)
            .clock(clock.clone())
            .create(&server)
            .unwrap();
        let local = WindowedBloomFilter::builder(400)
            .fpr(0.05)
            .periods(periods)
            .rotate_every_aligned(HOUR)
            .clock(clock.clone())
            .build()
            .unwrap();
        assert_eq!(shared.sizing(), local.sizing().generation);
        let mut rng = Rng(periods as u64);
        let (mut new_items, mut old_items, mut hits_total) = (0, 0, 0);
        for step in 0..40 {
            // Mostly within a period or to the next; now and then several periods at once.
            let by = if step % 9 == 8 {
                3.0
            } else {
                rng.below(700) as f64 / 1000.0
            };
            clock.advance(HOUR.mul_f64(by));
            local.maintain();
            let batch: Vec<u64> = (0..300).map(|_| rng.below(4_000)).collect();
            let mut new = Vec::new();
            shared.insert_many(batch.iter(), &mut new).unwrap();
            let local_new: Vec<bool> = batch.iter().map(|i| local.insert(i)).collect();
            assert_eq!(new, local_new, "periods {periods}, step {step}");
            new_items += new.iter().filter(|&&n| n).count();
            old_items += new.iter().filter(|&&n| !n).count();
            let probe: Vec<u64> = (0..300).map(|_| rng.below(8_000)).collect();
            let mut hits = Vec::new();
            hits_total += shared.contains_many(probe.iter(), &mut hits).unwrap();
            let local_hits: Vec<bool> = probe.iter().map(|i| local.contains(i)).collect();
            assert_eq!(hits, local_hits, "periods {periods}, step {step}");
        }
        // The comparison saw both answers.
        assert!(
            new_items > 1000 && old_items > 500 && hits_total > 100,
            "{new_items} {old_items} {hits_total}"
        );
    }
}

/// Racing clients, each with its own connection and clock; every key must be new to exactly
/// one of them. Half the clients' clocks run half a period ahead of the others', and the
/// clocks cross a period boundary while the inserts run, so that some racers are in
/// different generations. The clocks move only while every client is parked at a barrier, at
/// each tenth of its keys: the first crosses from generation g to g + 1 at 40% of the keys;
/// the second is in g + 1 throughout.
fn race(server_url: &str, name: &str, periods: u32, clients: usize, keys: u64) -> Vec<u32> {
    const CHUNK: usize = 20;
    let start = hour(600_000, 0.8);
    let clocks = [ManualClock::new(start), ManualClock::new(start + HOUR / 2)];
    let setup = Server::open(server_url).unwrap();
    SharedWindowedBloomFilter::builder(name, 1_000_000)
        .periods(periods)
        .period(HOUR)
        .clock(clocks[0].clone())
        .create(&setup)
        .unwrap();
    let generations = || {
        clocks
            .iter()
            .map(|c| {
                let f = SharedWindowedBloomFilter::open(&setup, name).unwrap();
                f.with_clock(c.clone()).generation().unwrap()
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(generations(), [600_000, 600_001]);
    let chunks = (keys as usize).div_ceil(CHUNK);
    // The chunk indices before which the clients park while the clocks move.
    let stops: Vec<usize> = (1..=8).map(|step| chunks * step / 10).collect();
    let barrier = Arc::new(Barrier::new(clients + 1));
    let threads: Vec<_> = (0..clients)
        .map(|c| {
            let (url, name, barrier) = (server_url.to_owned(), name.to_owned(), barrier.clone());
            let (clock, stops) = (clocks[c % 2].clone(), stops.clone());
            std::thread::spawn(move || {
                let server = Server::open(&url).unwrap();
                let f = SharedWindowedBloomFilter::open(&server, &name)
                    .unwrap()
                    .with_clock(clock);
                // Every client goes through the keys in the same order, so that they race on
                // each key.
                let order: Vec<u64> = (0..keys).collect();
                barrier.wait();
                let mut new = Vec::new();
                for (i, chunk) in order.chunks(CHUNK).enumerate() {
                    if stops.contains(&i) {
                        barrier.wait(); // parked: the clocks move
                        barrier.wait(); // moved
                    }
                    f.insert_many(chunk.iter(), &mut new).unwrap();
                }
                order
                    .into_iter()
                    .zip(new)
                    .filter(|(_, n)| *n)
                    .map(|(k, _)| k)
                    .collect::<Vec<u64>>()
            })
        })
        .collect();
    barrier.wait();
    // Move both clocks a twentieth of a period at each stop.
    for _ in &stops {
        barrier.wait();
        for clock in &clocks {
            clock.advance(HOUR / 20);
        }
        barrier.wait();
    }
    let mut winners = vec![0u32; keys as usize];
    for t in threads {
        for k in t.join().unwrap() {
            winners[k as usize] += 1;
        }
    }
    // The first clock crossed the boundary during the race; the second stayed in g + 1.
    assert_eq!(generations(), [600_001, 600_001]);
    winners
}

#[test]
fn exactly_one_of_racing_clients_one_generation_apart_is_told_new() {
    let redis = RedisServer::start();
    for round in 0..3 {
        let winners = race(&redis.url(), &format!("race-{round}"), 2, 4, 3_000);
        let wrong: Vec<(usize, u32)> = winners
            .iter()
            .copied()
            .enumerate()
            .filter(|(_, w)| *w != 1)
            .take(5)
            .collect();
        assert!(
            wrong.is_empty(),
            "round {round}: keys not new exactly once: {wrong:?}"
        );
    }
}

#[test]
fn two_handles_one_generation_apart_see_each_others_inserts() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    let behind = ManualClock::new(hour(700_000, 0.99));
    let ahead = ManualClock::new(hour(700_001, 0.01));
    let a = SharedWindowedBloomFilter::builder("apart", 10_000)
        .periods(1)
        .period(HOUR)
        .clock(behind.clone())
        .create(&server)
        .unwrap();
    let b = SharedWindowedBloomFilter::open(&server, "apart")
        .unwrap()
        .with_clock(ahead.clone());
    assert_eq!(
        (a.generation().unwrap(), b.generation().unwrap()),
        (700_000, 700_001)
    );
    // Each handle's write goes into its own generation; the other finds it there.
    assert!(a.insert("from-behind").unwrap());
    assert!(b.insert("from-ahead").unwrap());
    assert!(!b.insert("from-behind").unwrap());
    assert!(!a.insert("from-ahead").unwrap());
    assert!(a.contains("from-ahead").unwrap() && b.contains("from-behind").unwrap());
    let mut conn = redis.client();
    assert_eq!(integer(&mut conn, "EXISTS", &a.key(0, 700_000)), 1);
    assert_eq!(integer(&mut conn, "EXISTS", &a.key(0, 700_001)), 1);
}

#[test]
fn generation_keys_carry_an_expiry_and_an_expired_generation_is_empty() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    let clock = ManualClock::new(hour(800_000, 0.25));
    let f = SharedWindowedBloomFilter::builder("ttl", 10_000)
        .periods(2)
        .period(HOUR)
        .shards(3)
        .clock(clock.clone())
        .create(&server)
        .unwrap();
    let items: Vec<u64> = (0..300).collect();
    let mut new = Vec::new();
    let mut conn = redis.client();
    let before = server_millis(&mut conn);
    assert_eq!(f.insert_many(items.iter(), &mut new).unwrap(), 300);
    // Live until the end of generation g + 2, plus one period: 3.75 hours from the insert (the
    // expiry is relative), less the time since, which the server's TIME brackets.
    let want = HOUR.mul_f64(3.75).as_millis() as i64;
    let ttls: Vec<i64> = (0..3)
        .map(|s| integer(&mut conn, "PTTL", &f.key(s, 800_000)))
        .collect();
    let since = server_millis(&mut conn) - before;
    for (s, ttl) in ttls.into_iter().enumerate() {
        assert!(
            want - since <= ttl && ttl <= want,
            "shard {s}: PTTL {ttl}, want {want} less at most the {since} ms since the insert"
        );
    }
    // Expire shard 0's generation now (a non-positive expiry deletes the key at once, as the
    // server does to a key whose time has come), with the end of its life in the shard's
    // ledger moved to the past, as the server's clock passing it would: its items are
    // forgotten, not an error. (A key gone before that end is lost: `tests/lost.rs`.)
    let key = f.key(0, 800_000);
    let _: i64 = redis::cmd("HSET")
        .arg("seen:{ttl:0}:gens")
        .arg("800000")
        .arg(1)
        .query(&mut conn)
        .unwrap();
    let _: i64 = redis::cmd("PEXPIRE")
        .arg(&key)
        .arg(0)
        .query(&mut conn)
        .unwrap();
    assert_eq!(
        integer(&mut conn, "EXISTS", &key),
        0,
        "{key} did not expire"
    );
    let mut hits = Vec::new();
    let found = f.contains_many(items.iter(), &mut hits).unwrap();
    assert!(found > 0 && found < 300, "{found}");
    let shard_of = |i: &u64| {
        let bits = seen::BlockBits::new(f.hasher().hash_item(i), &f.sizing());
        bits.block() / f.sizing().blocks.div_ceil(3)
    };
    for (i, hit) in items.iter().zip(&hits) {
        assert_eq!(*hit, shard_of(i) != 0, "item {i}");
    }
}

/// A replay of old records by their own times moves the filter's clock far faster than the
/// server's: every generation's key expires in real time hours from now. The generations the
/// clock has left behind must go as it moves, not then: at most `n + 2` of a shard's
/// generations exist at any step (`g - n - 1 ..= g`), and what the window holds is still found.
#[test]
fn a_replay_on_the_records_clock_keeps_no_more_generations_than_the_window_needs() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    let periods = 2u32;
    // In 2015: records of the past, dead on the server's clock too.
    let start = 400_000u64;
    let clock = ManualClock::new(hour(start, 0.5));
    let f = SharedWindowedBloomFilter::builder("replay", 1_000)
        .periods(periods)
        .period(HOUR)
        .shards(2)
        .clock(clock.clone())
        .create(&server)
        .unwrap();
    let mut conn = redis.client();
    let mut new = Vec::new();
    let steps = 12u64;
    for step in 0..steps {
        let g = start + step;
        let items: Vec<String> = (0..50).map(|i| format!("{g}-{i}")).collect();
        new.clear();
        assert_eq!(
            f.insert_many(items.iter(), &mut new).unwrap(),
            50,
            "step {step}"
        );
        for shard in 0..2 {
            let alive: Vec<u64> = (start..=g)
                .filter(|&x| integer(&mut conn, "EXISTS", &f.key(shard, x)) == 1)
                .collect();
            let oldest = g.saturating_sub(u64::from(periods) + 1).max(start);
            assert_eq!(
                alive,
                (oldest..=g).collect::<Vec<_>>(),
                "step {step}, shard {shard}: the generations alive"
            );
            // Each deleted generation left the ledger with it (else it would read as lost).
            let fields: Vec<String> = redis::cmd("HKEYS")
                .arg(format!("seen:{{replay:{shard}}}:gens"))
                .query(&mut conn)
                .unwrap();
            assert!(
                fields.len() <= alive.len() + 1,
                "step {step}, shard {shard}: ledger {fields:?}"
            );
        }
        // The window's items are found; those of the generation before it are not (a few
        // false positives aside).
        let window: Vec<String> = (g.saturating_sub(u64::from(periods)).max(start)..=g)
            .flat_map(|x| (0..50).map(move |i| format!("{x}-{i}")))
            .collect();
        let mut hits = Vec::new();
        assert_eq!(
            f.contains_many(window.iter(), &mut hits).unwrap(),
            window.len()
        );
        if g > start + u64::from(periods) {
            let gone = g - u64::from(periods) - 1;
            let old: Vec<String> = (0..50).map(|i| format!("{gone}-{i}")).collect();
            hits.clear();
            assert!(
                f.contains_many(old.iter(), &mut hits).unwrap() <= 2,
                "step {step}"
            );
        }
        clock.advance(HOUR);
    }
}

/// A handle whose clock is far ahead of the server's (one record with a wrong time, in a replay
/// writing into a filter that services use on the server's time) must not delete what those
/// services still read: their window stays whole, and their items stay "not new".
#[test]
fn a_handle_far_ahead_deletes_nothing_a_handle_on_the_servers_time_reads() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    let live = SharedWindowedBloomFilter::builder("outlier", 1_000)
        .periods(3)
        .period(HOUR)
        .shards(1)
        .create(&server)
        .unwrap();
    let seen: Vec<String> = (0..300).map(|i| format!("seen-{i}")).collect();
    let mut new = Vec::new();
    assert_eq!(live.insert_many(seen.iter(), &mut new).unwrap(), 300);
    let g = live.generation().unwrap();
    for ahead in [2, 1_000] {
        let far = SharedWindowedBloomFilter::open(&server, "outlier")
            .unwrap()
            .with_clock(ManualClock::new(hour(g + ahead, 0.5)));
        assert!(far.insert(&format!("from-{ahead}-ahead")).unwrap());
        let mut hits = Vec::new();
        assert_eq!(live.contains_many(seen.iter(), &mut hits).unwrap(), 300);
        new.clear();
        assert_eq!(live.insert_many(seen.iter(), &mut new).unwrap(), 0);
        let mut conn = redis.client();
        assert_eq!(integer(&mut conn, "EXISTS", &live.key(0, g)), 1);
    }
}

/// `destroy` deletes every generation the shards' ledgers list, also those a replay left
/// behind its destroying handle's time, so that a filter created again under the name reads
/// none of the old one's items.
#[test]
fn destroy_after_a_replay_leaves_no_generation_behind() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    let mut conn = redis.client();
    let start = 420_000u64;
    let clock = ManualClock::new(hour(start, 0.5));
    let builder = SharedWindowedBloomFilter::builder("again", 1_000)
        .periods(2)
        .period(HOUR)
        .shards(4)
        .clock(clock.clone());
    let f = builder.create(&server).unwrap();
    let old: Vec<String> = (0..400).map(|i| format!("old-{i}")).collect();
    let mut new = Vec::new();
    assert_eq!(f.insert_many(old.iter(), &mut new).unwrap(), 400);
    // One record ten periods on, into one shard: the others keep generation `start`.
    clock.set(hour(start + 10, 0.5));
    f.insert("late").unwrap();
    f.destroy().unwrap();
    let left: Vec<String> = redis::cmd("KEYS").arg("*again*").query(&mut conn).unwrap();
    assert!(left.is_empty(), "left behind: {left:?}");
    clock.set(hour(start, 0.5));
    let f = builder.create(&server).unwrap();
    let mut hits = Vec::new();
    assert_eq!(f.contains_many(old.iter(), &mut hits).unwrap(), 0);
    new.clear();
    assert_eq!(f.insert_many(old.iter(), &mut new).unwrap(), 400);
}

/// A generation key of another creation of the name (left behind by a filter destroyed and
/// created again: here put back by hand) holds another guard: lookups and inserts read it as
/// empty, never as this filter's items.
#[test]
fn a_generation_key_of_another_creation_reads_as_empty() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    let mut conn = redis.client();
    let clock = ManualClock::new(hour(430_000, 0.5));
    let builder = SharedWindowedBloomFilter::builder("foreign", 1_000)
        .periods(2)
        .period(HOUR)
        .shards(1)
        .clock(clock.clone());
    let old = builder.create(&server).unwrap();
    let items: Vec<String> = (0..200).map(|i| format!("old-{i}")).collect();
    let mut new = Vec::new();
    assert_eq!(old.insert_many(items.iter(), &mut new).unwrap(), 200);
    let key = old.key(0, 430_000);
    let _: () = redis::cmd("RENAME")
        .arg(&key)
        .arg("kept")
        .query(&mut conn)
        .unwrap();
    old.destroy().unwrap();
    let f = builder.create(&server).unwrap();
    let _: () = redis::cmd("RENAME")
        .arg("kept")
        .arg(&key)
        .query(&mut conn)
        .unwrap();
    let mut hits = Vec::new();
    assert_eq!(f.contains_many(items.iter(), &mut hits).unwrap(), 0);
    new.clear();
    assert_eq!(f.insert_many(items.iter(), &mut new).unwrap(), 200);
    hits.clear();
    assert_eq!(f.contains_many(items.iter(), &mut hits).unwrap(), 200);
}

#[test]
fn a_flushed_script_cache_is_refilled_without_losing_an_answer() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    let clock = ManualClock::new(hour(900_000, 0.5));
    let f = SharedWindowedBloomFilter::builder("noscript", 10_000)
        .periods(1)
        .period(HOUR)
        .shards(4)
        .clock(clock)
        .create(&server)
        .unwrap();
    let mut conn = redis.client();
    let mut new = Vec::new();
    assert_eq!(
        f.insert_many((0..100u64).collect::<Vec<_>>().iter(), &mut new)
            .unwrap(),
        100
    );
    let _: () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut conn).unwrap();
    new.clear();
    // Every shard's EVALSHA is answered NOSCRIPT and sent again as EVAL: all answers arrive.
    assert_eq!(
        f.insert_many((50..250u64).collect::<Vec<_>>().iter(), &mut new)
            .unwrap(),
        150
    );
    assert_eq!(new.iter().filter(|&&n| !n).count(), 50);
    // The scripts are cached again, the read's check and the insert (a manual clock reads no
    // TIME).
    let memory: String = redis::cmd("INFO").arg("memory").query(&mut conn).unwrap();
    assert!(memory.contains("number_of_cached_scripts:2"), "{memory}");
}

#[test]
fn parameters_are_checked_and_a_destroyed_filter_is_missing() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    let clock = ManualClock::new(hour(100, 0.5));
    let f = SharedWindowedBloomFilter::builder("params", 1000)
        .periods(3)
        .period(HOUR)
        .layout(Layout::Line)
        .create(&server)
        .unwrap();
    assert_eq!(f.sizing().layout, Layout::Line);
    let again = SharedWindowedBloomFilter::builder("params", 1000)
        .periods(3)
        .period(HOUR)
        .layout(Layout::Line)
        .open_or_create(&server)
        .unwrap();
    assert_eq!(again.sizing(), f.sizing());
    match SharedWindowedBloomFilter::builder("params", 1000)
        .periods(4)
        .period(HOUR)
        .layout(Layout::Line)
        .create(&server)
    {
        Err(Error::Mismatch { field, .. }) => assert_eq!(field, "periods"),
        other => panic!("{other:?}"),
    }
    match SharedWindowedBloomFilter::builder("params", 1000)
        .periods(3)
        .period(HOUR * 2)
        .layout(Layout::Line)
        .create(&server)
    {
        Err(Error::Mismatch { field, .. }) => assert_eq!(field, "period_ns"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        SharedWindowedBloomFilter::builder("bad", 1000)
            .periods(63)
            .create(&server),
        Err(Error::Local(_))
    ));
    assert!(matches!(
        SharedWindowedBloomFilter::builder("bad", 1000)
            .period(Duration::from_micros(10))
            .create(&server),
        Err(Error::Local(_))
    ));
    // A Bloom filter's name is not a window.
    seen_redis::SharedBloomFilter::builder("bloom", 1000)
        .create(&server)
        .unwrap();
    assert!(matches!(
        SharedWindowedBloomFilter::open(&server, "bloom"),
        Err(Error::Mismatch { field: "kind", .. })
    ));
    let opened = SharedWindowedBloomFilter::open(&server, "params")
        .unwrap()
        .with_clock(clock.clone());
    assert_eq!(
        (opened.periods(), opened.period(), opened.sizing()),
        (3, HOUR, f.sizing())
    );
    assert!(opened.insert("x").unwrap());
    let other = SharedWindowedBloomFilter::open(&server, "params")
        .unwrap()
        .with_clock(clock);
    assert!(!other.insert("x").unwrap()); // the line layout is exactly-once too
    opened.destroy().unwrap();
    assert!(matches!(other.insert("y"), Err(Error::Missing { .. })));
    assert!(matches!(other.contains("x"), Err(Error::Missing { .. })));
    assert!(matches!(
        SharedWindowedBloomFilter::open(&server, "params"),
        Err(Error::Missing { .. })
    ));
    let mut conn = redis.client();
    let left: Vec<String> = redis::cmd("KEYS")
        .arg("seen:{params*")
        .query(&mut conn)
        .unwrap();
    assert!(left.is_empty(), "{left:?}");
}

/// On the server's time, the generation is the server's `TIME` over the period (a minute here),
/// bracketed by the server's readings before the handle is created and after it answered. The
/// handle places the `TIME` it read at the middle of that request's round trip, which lies
/// within the bracket: it may run ahead of the server by up to half the bracket, never behind.
/// Inserts and lookups run on the server's time too, with periods of an hour, so that no stall
/// of a loaded machine moves them out of the window.
#[test]
fn on_the_servers_time_the_generation_is_the_servers() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    let mut conn = redis.client();
    let before = server_millis(&mut conn) as u64;
    let f = SharedWindowedBloomFilter::builder("server-time", 1000)
        .periods(1)
        .period(Duration::from_secs(60))
        .create(&server)
        .unwrap();
    let g = f.generation().unwrap();
    let after = server_millis(&mut conn) as u64;
    let (first, last) = (before / 60_000, (after + (after - before) / 2) / 60_000);
    assert!(
        (first..=last).contains(&g),
        "generation {g}, the server's minutes {first} to {last}"
    );
    let f = SharedWindowedBloomFilter::builder("server-time-hourly", 1000)
        .periods(1)
        .period(HOUR)
        .create(&server)
        .unwrap();
    assert!(f.insert("a").unwrap());
    assert!(!f.insert("a").unwrap());
    assert!(f.contains("a").unwrap());
    let opened = SharedWindowedBloomFilter::open(&server, "server-time-hourly").unwrap();
    assert!(opened.contains("a").unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_async_api_answers_as_the_blocking_one() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    let clock = ManualClock::new(hour(300, 0.5));
    let f = SharedWindowedBloomFilter::builder("async", 1000)
        .periods(1)
        .period(HOUR)
        .clock(clock.clone())
        .create_async(&server)
        .await
        .unwrap();
    assert!(f.insert_async("a").await.unwrap());
    assert!(!f.insert_async("a").await.unwrap());
    let mut new = Vec::new();
    assert_eq!(
        f.insert_many_async(["a", "b", "b", "c"].iter(), &mut new)
            .await
            .unwrap(),
        2
    );
    assert_eq!(new, [false, true, false, true]);
    let opened = SharedWindowedBloomFilter::open_async(&server, "async")
        .await
        .unwrap()
        .with_clock(clock.clone());
    assert!(opened.contains_async("b").await.unwrap());
    clock.advance(2 * HOUR);
    let mut hits = Vec::new();
    assert_eq!(
        opened
            .contains_many_async(["a", "b", "c"].iter(), &mut hits)
            .await
            .unwrap(),
        0
    );
    // On the server's time too.
    let timed = SharedWindowedBloomFilter::open_async(&server, "async")
        .await
        .unwrap();
    assert!(timed.insert_async("now").await.unwrap());
    assert!(timed.contains_async("now").await.unwrap());
}

#[test]
fn a_cluster_holds_each_shards_generations_in_one_slot() {
    let cluster = RedisCluster::start(3);
    let server = Server::cluster(cluster.urls()).unwrap();
    let clock = ManualClock::new(hour(400_000, 0.9));
    let f = SharedWindowedBloomFilter::builder("spread", 10_000)
        .periods(2)
        .period(HOUR)
        .shards(6)
        .clock(clock.clone())
        .create(&server)
        .unwrap();
    let items: Vec<u64> = (0..2_000).collect();
    let mut new = Vec::new();
    assert_eq!(f.insert_many(items.iter(), &mut new).unwrap(), 2_000);
    clock.advance(HOUR / 5); // the next generation: the scripts read the previous one
    new.clear();
    assert_eq!(
        f.insert_many(items.iter().chain(&[5_000, 5_001]), &mut new)
            .unwrap(),
        2
    );
    let ahead = SharedWindowedBloomFilter::open(&server, "spread")
        .unwrap()
        .with_clock(ManualClock::new(hour(400_002, 0.1)));
    assert!(!ahead.insert(&5_000u64).unwrap());
    assert!(ahead.insert(&5_002u64).unwrap());
    assert!(!f.insert(&5_002u64).unwrap());
    // Every node holds some of the generation keys.
    assert!(
        cluster.keys_per_node().iter().all(|&n| n > 0),
        "{:?}",
        cluster.keys_per_node()
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut hits = Vec::new();
        assert_eq!(
            f.contains_many_async(items.iter(), &mut hits)
                .await
                .unwrap(),
            2_000
        );
        assert!(!f.insert_async(&5_001u64).await.unwrap());
        assert!(f.insert_async(&6_000u64).await.unwrap());
    });
}
