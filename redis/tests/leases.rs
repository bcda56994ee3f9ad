//! A claim is a lease: a consumer that crashes while holding claims (`kill -9`,
//! `process::exit`) delays their redeliveries by at most the lease, and loses none. Before
//! leases, such a consumer's claims were held forever: every redelivery was refused as a
//! duplicate, and the messages were lost.
//!
//! The tests wait for a lease's end on the server's own clock (`TIME`, polled with a deadline):
//! what a test asserts after the wait is decided by the server's time, never by how fast a
//! thread ran.

use std::io::{BufRead, BufReader, Write};
use std::time::Duration;

use seen_redis::{Server, SharedOverwriteMap};
use seen_test_server::{self as server, RedisServer, WORKER, Workers, server_millis, wait_past};

/// How long the parent waits for a worker's line, or for the server's clock to pass a lease.
const LIMIT: Duration = Duration::from_secs(60);

/// Items `item-i` whose slots in `map` all differ, the `from`-th to the `to`-th (two items in
/// one slot overwrite each other, and the map forgets the first: its redelivery is claimed, as
/// locally).
fn items(map: &SharedOverwriteMap, from: usize, to: usize) -> Vec<String> {
    let mut slots = std::collections::HashSet::new();
    (0..)
        .map(|i| format!("item-{i}"))
        .filter(|item| {
            let hash = seen::hash::ItemHasher::hash_item(map.hasher(), item);
            slots.insert(seen::MapSlot::new(hash, map.buckets()).slot())
        })
        .take(to)
        .skip(from)
        .collect()
}

/// A worker process: `claim|url|map|from|to|lease ms|end`: claims `items(from, to)` with the
/// lease, prints `CLAIMED k` (how many it got), then ends without committing or dropping its
/// claims: `exit` by `process::exit`, `kill` by waiting to be killed (`kill -9`).
#[test]
fn worker() {
    let Ok(spec) = std::env::var(WORKER) else {
        return;
    };
    let args: Vec<&str> = spec.split('|').collect();
    let server = Server::open(args[1]).unwrap();
    let map = SharedOverwriteMap::open(&server, args[2])
        .unwrap()
        .with_lease(Duration::from_millis(args[5].parse().unwrap()));
    let mut claims = Vec::new();
    for item in items(&map, args[3].parse().unwrap(), args[4].parse().unwrap()) {
        claims.extend(map.claim(&item).unwrap());
    }
    let mut out = std::io::stdout().lock();
    writeln!(out).unwrap();
    writeln!(out, "CLAIMED {}", claims.len()).unwrap();
    out.flush().unwrap();
    if args[6] == "exit" {
        std::process::exit(0); // no destructor runs: the claims are neither committed nor forgotten
    }
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
    unreachable!("the worker is killed before its input ends");
}

/// Runs a worker claiming `items(from, from + n)` with `lease_ms`, ending as `end`; returns
/// once it has ended (killed with SIGKILL for `kill`).
fn crashed_consumer(redis: &RedisServer, from: usize, n: usize, lease_ms: u64, end: &str) {
    let spec = format!(
        "claim|{}|inbox|{from}|{}|{lease_ms}|{end}",
        redis.url(),
        from + n
    );
    let mut cmd = server::worker("worker", &spec);
    cmd.stdin(std::process::Stdio::piped());
    let mut workers = Workers::spawn([cmd]);
    let stdout = workers.child(0).stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    loop {
        let line = rx.recv_timeout(LIMIT).expect("the worker's CLAIMED line");
        if let Some(count) = line.strip_prefix("CLAIMED ") {
            assert_eq!(count, n.to_string(), "the worker claimed every item");
            break;
        }
    }
    if end == "kill" {
        assert!(!workers.kill(0).success());
    } else {
        let status = workers.outputs().remove(0).status;
        assert!(status.success(), "{status}");
    }
}

/// Claims every item with `map`; how many it got, each committed.
fn claim_all(map: &SharedOverwriteMap, items: &[String]) -> usize {
    let mut got = 0;
    for item in items {
        if let Some(claim) = map.claim(item).unwrap() {
            assert!(claim.commit().unwrap(), "{item}: committed under its lease");
            got += 1;
        }
    }
    got
}

/// The break: a consumer holding 1,000 claims ends (by `process::exit`, and by
/// `kill -9`); while its leases last, every redelivery is refused (held by the crashed
/// consumer: no second processing while it might still be at work); once they end, every
/// redelivery is claimed by another consumer, so no message is lost.
#[test]
fn a_crashed_consumers_claims_are_claimed_again_after_their_lease() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    let map = SharedOverwriteMap::builder("inbox", 1_000_000u64)
        .shards(3)
        .create(&server)
        .unwrap();
    let mut conn = redis.client();
    // An hour's lease: held for the whole test.
    let held = items(&map, 0, 1_000);
    crashed_consumer(&redis, 0, 1_000, 3_600_000, "exit");
    assert_eq!(claim_all(&map, &held), 0, "claims held by a live lease");
    for (from, end) in [(1_000, "exit"), (2_000, "kill")] {
        let mine = items(&map, from, from + 1_000);
        crashed_consumer(&redis, from, 1_000, 300, end);
        // Every lease was taken before this moment, so it ends 300 ms after it at the latest.
        let after = server_millis(&mut conn);
        wait_past(&mut conn, after + 300);
        assert_eq!(
            claim_all(&map, &mine),
            1_000,
            "{end}: a redelivery after the lease is claimed"
        );
        // Committed now: duplicates for good, long after the old leases.
        assert_eq!(claim_all(&map, &mine), 0);
    }
    assert_eq!(claim_all(&map, &held), 0, "the hour's leases still hold");
}

/// The lease from the claim's side: renewed, it holds past its first end; committed after its
/// end but before another claim took it, the commit still counts; taken over after its end,
/// the late commit says so and the late forget touches nothing; a committed item outlives any
/// lease.
#[test]
fn a_lease_is_renewed_taken_over_or_committed_by_the_servers_clock() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    let lease = Duration::from_millis(200);
    let map = SharedOverwriteMap::builder("lease", 100_000u64)
        .lease(lease)
        .create(&server)
        .unwrap();
    let other = SharedOverwriteMap::open(&server, "lease").unwrap();
    assert_eq!(
        (map.lease(), other.lease()),
        (lease, seen_redis::DEFAULT_LEASE)
    );
    let mut conn = redis.client();

    // Renewed: still held after the first lease's end.
    let claim = map.claim("renewed").unwrap().expect("new");
    let t = server_millis(&mut conn);
    wait_past(&mut conn, t + 200);
    assert!(claim.renew().unwrap(), "nobody took it: renewed");
    assert!(other.claim("renewed").unwrap().is_none(), "held again");
    assert!(claim.commit().unwrap());

    // Committed after the lease ended, before anyone took it: the commit counts.
    let claim = map.claim("late").unwrap().expect("new");
    let t = server_millis(&mut conn);
    wait_past(&mut conn, t + 200);
    assert!(claim.commit().unwrap());
    let t = server_millis(&mut conn);
    wait_past(&mut conn, t + 200);
    assert!(
        other.claim("late").unwrap().is_none(),
        "committed: a duplicate"
    );

    // Taken over after the end: the late holder's commit says so, its forget erases nothing.
    let mut slow = map.claim("slow").unwrap().expect("new");
    let t = server_millis(&mut conn);
    wait_past(&mut conn, t + 200);
    let taken = other
        .claim("slow")
        .unwrap()
        .expect("taken over after the lease");
    assert!(!slow.renew().unwrap(), "no longer this claim's");
    assert!(
        !slow.forget().unwrap(),
        "the forget left the new holder's claim"
    );
    assert!(other.contains("slow").unwrap());
    assert!(taken.commit().unwrap());
    let slow_again = map.claim("slow").unwrap();
    assert!(slow_again.is_none(), "committed by the new holder");
}

/// A claim whose holder vanished is swept by later claims on its shard: its slot is cleared
/// (the item forgotten, as a dropped claim's is), so that `contains` stops reporting it. Each
/// claim sweeps one lease field picked at random (`HRANDFIELD`); with only the guard field and
/// the vanished claim's in the hash, each claim finds it with probability 1/2, so 200 claims
/// miss it with probability 2^-200.
#[test]
fn an_ended_lease_is_swept_by_later_claims() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    let map = SharedOverwriteMap::builder("swept", 100_000u64)
        .shards(1)
        .lease(Duration::from_millis(100))
        .create(&server)
        .unwrap();
    let mut conn = redis.client();
    let vanished = map.claim("vanished").unwrap().expect("new");
    std::mem::forget(vanished); // neither committed nor forgotten: its holder is gone
    let t = server_millis(&mut conn);
    wait_past(&mut conn, t + 100);
    assert!(
        map.contains("vanished").unwrap(),
        "not swept before a claim runs"
    );
    let mut claims = 0;
    while map.contains("vanished").unwrap() {
        assert!(claims < 200, "never swept");
        let claim = map.claim(&format!("other-{claims}")).unwrap().expect("new");
        assert!(claim.commit().unwrap());
        claims += 1;
    }
    assert!(
        map.claim("vanished").unwrap().is_some(),
        "its redelivery gets through"
    );
}
