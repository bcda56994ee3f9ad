//! A second hostile review of the server-time creation ids and the creation fence
//! (`guard::fence!`). Each attack is a test on a real server. A test marked FIXED FINDING
//! failed on the code reviewed (its doc comment says what was promised and what happened) and
//! passes since the fix; one marked GUARD passed from the start.

#[path = "common/items.rs"]
mod items;

use std::time::{Duration, Instant};

use items::{count_hits, count_new, keys};
use seen_redis::{Error, Server, SharedBloomFilter, SharedOverwriteMap, SharedWindowedBloomFilter};
use seen_test_server::RedisServer;

const HOUR: Duration = Duration::from_secs(3600);

fn keys_of(conn: &mut redis::Connection, name: &str) -> Vec<String> {
    let mut all: Vec<String> = Vec::new();
    for pattern in [format!("seen:{{{name}}}*"), format!("seen:{{{name}:*")] {
        let found: Vec<String> = redis::cmd("KEYS").arg(&pattern).query(conn).unwrap();
        all.extend(found);
    }
    all.sort();
    all
}

/// A creation id at `ms` on the server's clock (microseconds << 11), with low bits `low`.
fn id_at(ms: u64, low: u64) -> u64 {
    ((ms * 1000) << 11) | low
}

fn server_ms(conn: &mut redis::Connection) -> u64 {
    let (s, us): (u64, u64) = redis::cmd("TIME").query(conn).unwrap();
    s * 1000 + us / 1000
}

fn meta_id(conn: &mut redis::Connection, name: &str) -> u64 {
    let d: String = redis::cmd("GET")
        .arg(format!("seen:{{{name}}}:meta"))
        .query(conn)
        .unwrap();
    let hex = d
        .lines()
        .find_map(|l| l.strip_prefix("id="))
        .expect("an id line");
    u64::from_str_radix(hex, 16).unwrap()
}

fn last8(conn: &mut redis::Connection, key: &str) -> u64 {
    let len: i64 = redis::cmd("STRLEN").arg(key).query(conn).unwrap();
    let b: Vec<u8> = redis::cmd("GETRANGE")
        .arg(key)
        .arg(len - 8)
        .arg(len - 1)
        .query(conn)
        .unwrap();
    u64::from_be_bytes(b.try_into().unwrap())
}

fn key_type(conn: &mut redis::Connection, key: &str) -> String {
    redis::cmd("TYPE").arg(key).query(conn).unwrap()
}

/// GUARD. The Lua `top` and the Rust `Id::ordered` agree on real server times: every kind's
/// description id is `server microseconds << 11 | 11 bits` for a time between a `TIME` read before and
/// after the creation, and every guard (the last 8 bytes of each string key, the `guard` field
/// of each hash, a windowed filter's generation keys after an insert) is that id.
#[test]
fn creation_ids_are_the_servers_time_and_every_guard_holds_them() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    let mut conn = redis.client();
    for kind in ["bloom", "map", "window"] {
        let name = format!("ids-{kind}");
        let before = server_ms(&mut conn);
        match kind {
            "bloom" => {
                let f = SharedBloomFilter::builder(&name, 1000)
                    .shards(2)
                    .create(&server)
                    .unwrap();
                f.insert("x").unwrap();
            }
            "map" => {
                let m = SharedOverwriteMap::builder(&name, 1000)
                    .shards(2)
                    .create(&server)
                    .unwrap();
                m.insert("x").unwrap();
            }
            _ => {
                let w = SharedWindowedBloomFilter::builder(&name, 1000)
                    .periods(1)
                    .period(HOUR)
                    .shards(2)
                    .create(&server)
                    .unwrap();
                let items = keys("w", 50);
                w.insert_many(items.iter().map(String::as_str), &mut Vec::new())
                    .unwrap();
            }
        }
        let after = server_ms(&mut conn);
        let id = meta_id(&mut conn, &name);
        assert!(
            (before..=after).contains(&((id >> 11) / 1000)),
            "{kind}: id {id:016x} is {} ms, not in {before}..={after}",
            (id >> 11) / 1000
        );
        let mut strings = 0;
        let mut hashes = 0;
        for key in keys_of(&mut conn, &name) {
            if key.ends_with(":meta") {
                continue;
            }
            match &*key_type(&mut conn, &key) {
                "string" => {
                    strings += 1;
                    assert_eq!(last8(&mut conn, &key), id, "{kind}: {key}");
                }
                "hash" => {
                    hashes += 1;
                    let g: Vec<u8> = redis::cmd("HGET")
                        .arg(&key)
                        .arg("guard")
                        .query(&mut conn)
                        .unwrap();
                    assert_eq!(g, id.to_be_bytes(), "{kind}: {key}");
                }
                other => panic!("{kind}: {key} is a {other}"),
            }
        }
        assert!(
            strings >= 1 && strings + hashes >= 2,
            "{kind}: {strings} {hashes}"
        );
    }
}

/// Leaves the remains of a bloom filter `name` (1 shard): its description deleted, its shard
/// with `guard` written in its last 8 bytes. Returns the shard's key.
fn remains_with_guard(redis: &RedisServer, server: &Server, name: &str, guard: u64) -> String {
    let mut conn = redis.client();
    SharedBloomFilter::builder(name, 1000)
        .shards(1)
        .create(server)
        .unwrap();
    let key = format!("seen:{{{name}:0}}:bits");
    let len: i64 = redis::cmd("STRLEN").arg(&key).query(&mut conn).unwrap();
    let _: () = redis::cmd("DEL")
        .arg(format!("seen:{{{name}}}:meta"))
        .query(&mut conn)
        .unwrap();
    let _: i64 = redis::cmd("SETRANGE")
        .arg(&key)
        .arg(len - 8)
        .arg(&guard.to_be_bytes()[..])
        .query(&mut conn)
        .unwrap();
    key
}

/// GUARD. The fence's bounds on a real clock: a guard a few seconds ahead of the server's time
/// (a later creation's, as far as the fence can tell) blocks a create (`Missing`) until the
/// server's time passes it, then the create works; a guard 55 s ahead (with all 20 low bits
/// set) is still a creation's; one 65 s ahead is data and is replaced at once.
#[test]
fn a_guard_ahead_of_the_server_blocks_a_create_only_within_the_minute_of_slack() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    let mut conn = redis.client();

    let now = server_ms(&mut conn);
    remains_with_guard(&redis, &server, "ahead", id_at(now + 3_000, 0x7ff));
    let blocked = SharedBloomFilter::builder("ahead", 1000)
        .shards(1)
        .create(&server);
    assert!(matches!(blocked, Err(Error::Missing { .. })), "{blocked:?}");
    // Nothing left behind: the description was abandoned.
    assert!(matches!(
        SharedBloomFilter::open(&server, "ahead"),
        Err(Error::Missing { .. })
    ));
    let start = Instant::now();
    let made = loop {
        match SharedBloomFilter::builder("ahead", 1000)
            .shards(1)
            .create(&server)
        {
            Ok(f) => break f,
            Err(Error::Missing { .. }) if start.elapsed() < Duration::from_secs(15) => {
                std::thread::sleep(Duration::from_millis(200));
            }
            Err(e) => panic!("{e:?}"),
        }
    };
    assert!(start.elapsed() <= Duration::from_secs(14));
    assert_eq!(count_new(&made, &keys("a", 20)).unwrap(), 20);

    let now = server_ms(&mut conn);
    remains_with_guard(&redis, &server, "ahead55", id_at(now + 55_000, 0x7ff));
    let r = SharedBloomFilter::builder("ahead55", 1000)
        .shards(1)
        .create(&server);
    assert!(matches!(r, Err(Error::Missing { .. })), "55 s ahead: {r:?}");

    let now = server_ms(&mut conn);
    remains_with_guard(&redis, &server, "ahead65", id_at(now + 65_000, 0));
    let f = SharedBloomFilter::builder("ahead65", 1000)
        .shards(1)
        .create(&server)
        .expect("65 s ahead is data");
    assert_eq!(count_new(&f, &keys("a", 20)).unwrap(), 20);
}

/// FIXED FINDING. Promise (3), reported clearly: a create refused because a shard holds a
/// guard ahead of this creation (the remains of a creation on a clock that was ahead, or of
/// one in the same millisecond with larger random bits) answered `Missing { key:
/// "seen:{NAME}:meta" }`, though the description was not what stood in the way. It now names
/// the shard that blocks.
#[test]
fn a_create_blocked_by_a_guard_ahead_names_the_key_in_the_way() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    let mut conn = redis.client();
    let now = server_ms(&mut conn);
    let shard = remains_with_guard(&redis, &server, "named", id_at(now + 50_000, 0));
    match SharedBloomFilter::builder("named", 1000)
        .shards(1)
        .create(&server)
    {
        Err(Error::Missing { key, .. }) => assert_eq!(key, shard, "the key named"),
        other => panic!("{other:?}"),
    }
}

/// GUARD. Promise (2) (a creation is its own; nothing of another creation changes it): a
/// bloom filter's write `BITFIELD ... GET <guard> SET ...` applies its `SET`s whatever guard
/// it reads, but an insert reads first (`BITFIELD_RO` with the guard) and a handle of a
/// destroyed filter stops there with `Missing`: its 200 items do not land in the filter
/// created again under the name with the same parameters. (Only an insert whose read came
/// before the destroy and whose write after the re-creation could still set bits in it.)
#[test]
fn a_destroyed_bloom_handle_does_not_write_into_the_filter_created_again() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    let a = SharedBloomFilter::builder("pollute", 10_000)
        .create(&server)
        .unwrap();
    let stale = SharedBloomFilter::open(&server, "pollute").unwrap();
    a.destroy().unwrap();
    let b = SharedBloomFilter::builder("pollute", 10_000)
        .create(&server)
        .unwrap();
    let items = keys("stale", 200);
    let r = count_new(&stale, &items);
    assert!(matches!(r, Err(Error::Missing { .. })), "{r:?}");
    let hits = count_hits(&b, &items).unwrap();
    assert!(
        hits <= 5,
        "the new filter holds {hits} of 200 items only a destroyed handle inserted"
    );
}

/// GUARD. The same with a larger layout: a handle of a destroyed filter of 100,000 items
/// inserting 50,000 items neither extends the new filter's (1,000 items) shard nor writes over
/// its guard: the read stops it.
#[test]
fn a_stale_bloom_handle_of_a_larger_filter_leaves_the_new_filters_shard_alone() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    let mut conn = redis.client();
    let a = SharedBloomFilter::builder("overwrite", 100_000)
        .shards(1)
        .create(&server)
        .unwrap();
    let stale = SharedBloomFilter::open(&server, "overwrite").unwrap();
    a.destroy().unwrap();
    let b = SharedBloomFilter::builder("overwrite", 1_000)
        .shards(1)
        .create(&server)
        .unwrap();
    let mine = keys("mine", 50);
    count_new(&b, &mine).unwrap();
    let key = "seen:{overwrite:0}:bits";
    let len0: i64 = redis::cmd("STRLEN").arg(key).query(&mut conn).unwrap();
    let r = count_new(&stale, &keys("stale", 50_000));
    assert!(matches!(r, Err(Error::Missing { .. })), "{r:?}");
    let len1: i64 = redis::cmd("STRLEN").arg(key).query(&mut conn).unwrap();
    let after = count_hits(&b, &mine);
    assert!(
        matches!(after, Ok(50)) && len0 == len1,
        "the new filter after a destroyed handle's insert: {after:?} (its shard {len0} -> {len1} bytes)"
    );
}

/// GUARD. A windowed filter destroyed while another handle inserts: the inserter gets
/// `Missing` (never `Ok` after the destroy), no key of the name is left once it stops, and
/// the name is created again.
#[test]
fn a_windowed_filter_destroyed_under_an_inserter_leaves_nothing() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    let mut conn = redis.client();
    let b = || {
        SharedWindowedBloomFilter::builder("wdes", 1000)
            .periods(1)
            .period(HOUR)
            .shards(4)
    };
    let w = b().create(&server).unwrap();
    let other = SharedWindowedBloomFilter::open(&server, "wdes").unwrap();
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
    let destroyed = std::sync::Arc::new(AtomicBool::new(false));
    let answered = std::sync::Arc::new(AtomicUsize::new(0));
    let inserter = {
        let (destroyed, answered) = (destroyed.clone(), answered.clone());
        std::thread::spawn(move || {
            loop {
                let n = answered.load(SeqCst);
                let items = keys(&format!("i{n}"), 20);
                // Whether this call began after the destroy returned: then it must not answer.
                let after = destroyed.load(SeqCst);
                match other.insert_many(items.iter().map(String::as_str), &mut Vec::new()) {
                    Ok(_) if !after => answered.fetch_add(1, SeqCst),
                    Ok(_) => panic!("an insert begun after the destroy answered Ok"),
                    Err(Error::Missing { .. }) => return,
                    Err(e) => panic!("{e:?}"),
                };
            }
        })
    };
    // The destroy once the inserter has been answered (not after a sleep that hopes so).
    let deadline = Instant::now() + Duration::from_secs(60);
    while answered.load(SeqCst) == 0 {
        assert!(Instant::now() < deadline, "the inserter was never answered");
        std::thread::yield_now();
    }
    w.destroy().unwrap();
    destroyed.store(true, SeqCst);
    inserter.join().unwrap();
    assert_eq!(keys_of(&mut conn, "wdes"), Vec::<String>::new());
    let again = b().create(&server).unwrap();
    let items = keys("z", 20);
    assert_eq!(
        again
            .insert_many(items.iter().map(String::as_str), &mut Vec::new())
            .unwrap(),
        20
    );
}

/// GUARD. A map's leases hash deleted alone: a claim (which needs the leases) is `Missing`
/// (never "claimed" from an empty hash; reads and inserts of the whole slots answer), `destroy` works, and the name is created again.
#[test]
fn a_maps_leases_deleted_alone_is_missing_and_recoverable() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    let mut conn = redis.client();
    let b = || SharedOverwriteMap::builder("leases-gone", 1000).shards(1);
    let m = b().create(&server).unwrap();
    m.insert("x").unwrap();
    let _: () = redis::cmd("DEL")
        .arg("seen:{leases-gone:0}:leases")
        .query(&mut conn)
        .unwrap();
    // The slots are whole: a read of them may answer (it answers nothing of the leases).
    let contains = m.contains("x");
    assert!(
        matches!(contains, Ok(true) | Err(Error::Missing { .. })),
        "{contains:?}"
    );
    // An insert writes the slots only (no lease): it may answer too.
    let insert = m.insert("y");
    assert!(
        matches!(insert, Ok(_) | Err(Error::Missing { .. })),
        "insert: {insert:?}"
    );
    let claim = m.claim("z").map(|c| c.is_some());
    assert!(
        matches!(claim, Err(Error::Missing { .. })),
        "claim: {claim:?}"
    );
    m.destroy().unwrap();
    assert_eq!(keys_of(&mut conn, "leases-gone"), Vec::<String>::new());
    let m = b().create(&server).unwrap();
    assert!(m.insert("y").unwrap());
}
