//! A hostile review of the promises of the lost-state, lease and request-cutting changes, each
//! attack a test on real servers. A test marked FIXED FINDING failed on the code it reviewed
//! (its doc comment says what the library promised and what it did) and passes since the fix;
//! one marked GUARD passed from the start and guards behaviour that is right.
//!
//! Some interleavings are forced with a small Unix-socket proxy ([`Proxy`]) between one
//! `Server` and the real server: it holds (or cuts) the first client request that matches a
//! rule, so that the test can change the server's state between two requests of one library
//! call, deterministically, without `CLIENT PAUSE` (which would hold the test's own writes).

#[path = "common/items.rs"]
mod items;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use items::{count_hits, count_new, keys};
use seen::clock::ManualClock;
use seen::hash::{Hash128, ItemHasher};
use seen_redis::{
    Error, REQUEST_ITEMS, Server, SharedBloomFilter, SharedOverwriteMap, SharedWindowedBloomFilter,
};
use seen_test_server::{Action, Proxy, RedisServer, has, server_millis, shard_script, wait_past};

const HOUR: Duration = Duration::from_secs(3600);
const LIMIT: Duration = Duration::from_secs(60);

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

fn flushall(redis: &RedisServer) {
    let _: () = redis::cmd("FLUSHALL").query(&mut redis.client()).unwrap();
}

fn del(redis: &RedisServer, key: &str) -> u64 {
    redis::cmd("DEL")
        .arg(key)
        .query(&mut redis.client())
        .unwrap()
}

/// Every key of the structure `name` (`seen:{NAME` and `seen:{NAME:...`).
fn keys_of(redis: &RedisServer, name: &str) -> Vec<String> {
    let mut conn = redis.client();
    let mut all: Vec<String> = Vec::new();
    for pattern in [format!("seen:{{{name}}}*"), format!("seen:{{{name}:*")] {
        let found: Vec<String> = redis::cmd("KEYS").arg(&pattern).query(&mut conn).unwrap();
        all.extend(found);
    }
    all.sort();
    all
}

fn is_missing<T>(result: &Result<T, Error>) -> bool {
    matches!(result, Err(Error::Missing { .. }))
}

fn assert_missing<T: std::fmt::Debug>(what: &str, result: Result<T, Error>) {
    assert!(
        is_missing(&result),
        "{what}: a lost structure answered {result:?} (Error::Missing expected)"
    );
}

fn map_new(map: &SharedOverwriteMap, items: &[String]) -> Result<usize, Error> {
    map.insert_many(items.iter().map(String::as_str), &mut Vec::new())
}

fn map_hits(map: &SharedOverwriteMap, items: &[String]) -> Result<usize, Error> {
    map.contains_many(items.iter().map(String::as_str), &mut Vec::new())
}

fn window_new(w: &SharedWindowedBloomFilter, items: &[String]) -> Result<usize, Error> {
    w.insert_many(items.iter().map(String::as_str), &mut Vec::new())
}

fn window_hits(w: &SharedWindowedBloomFilter, items: &[String]) -> Result<usize, Error> {
    w.contains_many(items.iter().map(String::as_str), &mut Vec::new())
}

// ---------------------------------------------------------------------------------------------
// 1. Lost state after FLUSHALL (a restart without persistence): the every-process line
// ---------------------------------------------------------------------------------------------

/// FIXED FINDING (lies). After a `FLUSHALL` (or a restart without persistence) the description is
/// lost with the shards, so the every-process line `open_or_create`, run by any process that
/// starts afterwards, creates the filter anew: `CREATE` replaces the guard-less keys with
/// empty shards that have their guard. From then on every handle opened *before* the loss
/// answers from the empty filter without an error: old items are "new". The crate docs
/// promise that a lost key is `Missing` "for every read and write, from every process".
#[test]
fn bloom_handles_from_before_a_flushall_stay_missing_after_another_process_open_or_creates() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    let builder = SharedBloomFilter::builder("revived", 10_000).shards(2);
    let old = builder.open_or_create(&server).unwrap();
    let items = keys("item", 1_000);
    assert_eq!(count_new(&old, &items).unwrap(), 1_000);
    flushall(&redis);
    // A process that starts now (a deploy, a crash loop) runs the every-process line.
    let restarted = Server::open(&redis.url()).unwrap();
    let _fresh = builder.open_or_create(&restarted).unwrap();
    assert_missing("the old handle's lookup", count_hits(&old, &items));
    assert_missing(
        "the old handle's insert of an old item",
        old.insert("item-7"),
    );
}

/// FIXED FINDING (lies): the map, as the Bloom filter above. A claim of an item processed before
/// the loss is granted again, and `contains` says the old handle never saw it.
#[test]
fn map_handles_from_before_a_flushall_stay_missing_after_another_process_open_or_creates() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    let builder = SharedOverwriteMap::builder("revived-map", 10_000u64).shards(2);
    let old = builder.open_or_create(&server).unwrap();
    let items = keys("msg", 500);
    assert_eq!(map_new(&old, &items).unwrap(), 500);
    flushall(&redis);
    let _fresh = builder
        .open_or_create(&Server::open(&redis.url()).unwrap())
        .unwrap();
    assert_missing("the old handle's lookup", map_hits(&old, &items));
    assert_missing(
        "the old handle's claim of a processed item",
        old.claim("msg-3").map(|c| c.is_some()),
    );
}

/// FIXED FINDING (lies): the windowed filter, as above (its ledgers come back empty with their
/// guard, so a lost generation reads as one never written).
#[test]
fn window_handles_from_before_a_flushall_stay_missing_after_another_process_open_or_creates() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    let builder = SharedWindowedBloomFilter::builder("revived-window", 10_000)
        .periods(2)
        .period(HOUR)
        .shards(2);
    let old = builder.open_or_create(&server).unwrap();
    let items = keys("event", 500);
    assert_eq!(window_new(&old, &items).unwrap(), 500);
    flushall(&redis);
    let _fresh = builder
        .open_or_create(&Server::open(&redis.url()).unwrap())
        .unwrap();
    assert_missing("the old handle's lookup", window_hits(&old, &items));
    assert_missing("the old handle's insert", window_new(&old, &items));
}

/// FIXED FINDING (lies), the same root cause: a handle kept across `destroy` and a `create` of the
/// same name with other parameters (here another seed) silently works on the new structure
/// with its own sizing and hasher: both handles are told "new" for one item. `destroy` says
/// "Processes that have it open get [`Error::Missing`]"; nothing on the server tells the old
/// handle that the structure it addresses is not the one it opened (no creation id in the
/// guard).
#[test]
fn a_handle_kept_across_destroy_and_create_with_another_seed_is_refused() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    let first = SharedBloomFilter::builder("reborn", 10_000)
        .seed(1)
        .create(&server)
        .unwrap();
    let old = SharedBloomFilter::open(&server, "reborn").unwrap();
    assert!(old.insert("before").unwrap());
    first.destroy().unwrap();
    let new = SharedBloomFilter::builder("reborn", 10_000)
        .seed(2)
        .create(&server)
        .unwrap();
    let old_says = old.insert("x");
    let new_says = new.insert("x");
    assert!(
        !matches!((&old_says, &new_says), (Ok(true), Ok(true))),
        "one item told new by two handles of one name: old {old_says:?}, new {new_says:?}"
    );
    assert!(
        old_says.is_err(),
        "a handle of a destroyed filter answered {old_says:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// 2. FLUSHALL while 8 threads write
// ---------------------------------------------------------------------------------------------

enum Any {
    Bloom(SharedBloomFilter),
    Map(SharedOverwriteMap),
    Window(SharedWindowedBloomFilter),
}

impl Any {
    fn insert_many(&self, items: &[String], new: &mut Vec<bool>) -> Result<usize, Error> {
        let it = items.iter().map(String::as_str);
        match self {
            Any::Bloom(f) => f.insert_many(it, new),
            Any::Map(m) => m.insert_many(it, new),
            Any::Window(w) => w.insert_many(it, new),
        }
    }

    fn contains_many(&self, items: &[String]) -> Result<usize, Error> {
        let it = items.iter().map(String::as_str);
        let found = &mut Vec::new();
        match self {
            Any::Bloom(f) => f.contains_many(it, found),
            Any::Map(m) => m.contains_many(it, found),
            Any::Window(w) => w.contains_many(it, found),
        }
    }

    /// A structure of `kind` sized for `capacity` in one shard: `create` or `open_or_create`.
    fn build(
        kind: &str,
        server: &Server,
        name: &str,
        capacity: u64,
        create: bool,
    ) -> Result<Self, Error> {
        match kind {
            "bloom" => {
                let b = SharedBloomFilter::builder(name, capacity).shards(1);
                if create {
                    b.create(server)
                } else {
                    b.open_or_create(server)
                }
                .map(Any::Bloom)
            }
            "map" => {
                let b = SharedOverwriteMap::builder(name, capacity).shards(1);
                if create {
                    b.create(server)
                } else {
                    b.open_or_create(server)
                }
                .map(Any::Map)
            }
            _ => {
                let b = SharedWindowedBloomFilter::builder(name, capacity)
                    .periods(1)
                    .period(HOUR)
                    .shards(1);
                if create {
                    b.create(server)
                } else {
                    b.open_or_create(server)
                }
                .map(Any::Window)
            }
        }
    }

    fn make(kind: &str, server: &Server, name: &str) -> Self {
        match kind {
            "bloom" => Any::Bloom(
                SharedBloomFilter::builder(name, 20_000)
                    .shards(3)
                    .open_or_create(server)
                    .unwrap(),
            ),
            "map" => Any::Map(
                SharedOverwriteMap::builder(name, 200_000u64)
                    .shards(3)
                    .open_or_create(server)
                    .unwrap(),
            ),
            _ => Any::Window(
                SharedWindowedBloomFilter::builder(name, 20_000)
                    .periods(2)
                    .period(HOUR)
                    .shards(3)
                    .open_or_create(server)
                    .unwrap(),
            ),
        }
    }
}

/// One round: 8 threads insert their old items, then batches of old and new ones while the
/// main thread flushes the server (and, with `restart`, then runs the every-process line
/// `open_or_create` as a restarted process would). Returns the answers given by calls that
/// started after the flush (and the restart) and did not fail: none is allowed.
fn flush_round(redis: &RedisServer, kind: &str, round: usize, restart: bool) -> Vec<String> {
    let url = redis.url();
    let name = format!("flush-{kind}-{round}");
    let server = Server::open(&url).unwrap();
    let shared = Arc::new(Any::make(kind, &server, &name));
    let lost = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let ready = Arc::new(Barrier::new(9));
    let mut threads = Vec::new();
    for t in 0..8 {
        let (shared, lost, stop, ready) =
            (shared.clone(), lost.clone(), stop.clone(), ready.clone());
        threads.push(std::thread::spawn(move || {
            let old = keys(&format!("old-{t}"), 300);
            let mut new = Vec::new();
            shared.insert_many(&old, &mut new).unwrap();
            ready.wait();
            let mut lies = Vec::new();
            let mut after = 0;
            for i in 0.. {
                let mut batch: Vec<String> = old[(i * 37) % 250..][..50].to_vec();
                batch.extend(keys(&format!("new-{t}-{i}"), 50));
                let started_lost = lost.load(SeqCst);
                let mut answers = Vec::new();
                let result = shared.insert_many(&batch, &mut answers);
                if started_lost {
                    after += 1;
                    match result {
                        Ok(_) => {
                            let old_new = answers[..50].iter().filter(|&&b| b).count();
                            lies.push(format!(
                                "thread {t} batch {i}: Ok, {old_new} of 50 old items new"
                            ));
                        }
                        Err(Error::Missing { .. } | Error::Corrupt { .. }) => {}
                        Err(other) => lies.push(format!("thread {t} batch {i}: {other}")),
                    }
                }
                if stop.load(SeqCst) && after >= 5 {
                    break;
                }
            }
            lies
        }));
    }
    ready.wait();
    std::thread::sleep(Duration::from_millis((round % 7) as u64));
    flushall(redis);
    if restart {
        let restarted = Server::open(&url).unwrap();
        let _ = Any::make(kind, &restarted, &name);
    }
    lost.store(true, SeqCst);
    stop.store(true, SeqCst);
    threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect()
}

/// GUARD (passes): 8 writers on one handle, a `FLUSHALL` between their batches, 20 rounds per
/// structure: after the flush no call answers anything (each is `Missing`), so no old item is
/// ever told "new". The original break (7 of 20 rounds silently empty) stays fixed.
#[test]
fn eight_writers_and_a_flushall_never_answer_after_the_flush() {
    let redis = RedisServer::start();
    for kind in ["bloom", "map", "window"] {
        for round in 0..20 {
            let lies = flush_round(&redis, kind, round, false);
            assert!(lies.is_empty(), "{kind} round {round}: {lies:#?}");
        }
    }
}

/// FIXED FINDING (lies): the round above with one more actor, a process that restarts after the
/// flush and runs the every-process line. Every writer's next batch is answered from an
/// empty structure: every old item "new".
#[test]
fn eight_writers_a_flushall_and_a_restarted_process_never_answer_after_the_flush() {
    let redis = RedisServer::start();
    let mut report = Vec::new();
    for kind in ["bloom", "map", "window"] {
        let lies = flush_round(&redis, kind, 0, true);
        if !lies.is_empty() {
            report.push(format!(
                "{kind}: {} answers after the flush, e.g. {:?}",
                lies.len(),
                &lies[..lies.len().min(2)]
            ));
        }
    }
    assert!(report.is_empty(), "{report:#?}");
}

// ---------------------------------------------------------------------------------------------
// 3. Racing creators
// ---------------------------------------------------------------------------------------------

/// A creation held after it wrote its description (`state=creating`) and before its shards
/// (the proxy holds its first script, the first shard's creation):
///
/// 1. a creator of other parameters is refused (`Mismatch`) and writes nothing (before, it
///    replaced the winner's shard with one of its own length, and the winner was `Missing`
///    for ever);
/// 2. an opener with a 1 s timeout waits for the creation, then reports `Unfinished`: never a
///    handle on shards that are not there yet;
/// 3. once the creation finishes, an opener that may have been waiting gets the structure,
///    and both handles share it;
/// 4. every key but the description lost afterwards (an eviction, a cluster node restarted
///    without persistence) stays `Missing` for both handles and for a process that runs
///    `open_or_create` later: only the creator's one request makes shards, so nothing makes
///    them again (before, an `open_or_create` that had read no description made a shard
///    lost since again, empty, and every handle answered from it).
fn a_held_creation(kind: &'static str) {
    let redis = RedisServer::start();
    let url = redis.url();
    let name = format!("held-{kind}");
    let proxy = Proxy::start(&redis);
    let slow = Server::open(&proxy.url()).unwrap();
    let held = name.clone();
    proxy.arm(move |c| shard_script(c, &held), 0, Action::Hold);
    let creator = {
        let name = name.clone();
        std::thread::spawn(move || Any::build(kind, &slow, &name, 1_000, true))
    };
    proxy.wait_held();
    let description = format!("seen:{{{name}}}:meta");
    assert_eq!(keys_of(&redis, &name), std::slice::from_ref(&description));
    let direct = Server::open(&url).unwrap();
    let other = Any::build(kind, &direct, &name, 100_000, true).map(drop);
    assert!(
        matches!(other, Err(Error::Mismatch { .. })),
        "{kind}: a creator of other parameters: {other:?}"
    );
    assert_eq!(keys_of(&redis, &name), std::slice::from_ref(&description));
    // An opener with a 1 s timeout: `Unfinished` once the second is up (or, on a machine so
    // busy that one of its polls outlives the timeout, `Connection`): never a handle.
    let impatient = Server::builder(&url)
        .timeout(Duration::from_secs(1))
        .open()
        .unwrap();
    let started = Instant::now();
    let early = Any::build(kind, &impatient, &name, 1_000, false).map(drop);
    match early {
        Err(Error::Unfinished { .. }) => {
            assert!(started.elapsed() >= Duration::from_millis(900))
        }
        Err(Error::Connection { .. }) => {}
        other => panic!("{kind}: an opener during the creation: {other:?}"),
    }
    let patient = {
        let (name, url) = (name.clone(), url.clone());
        std::thread::spawn(move || {
            Any::build(kind, &Server::open(&url).unwrap(), &name, 1_000, false)
        })
    };
    proxy.release();
    let created = creator.join().unwrap().unwrap();
    let opened = patient.join().unwrap().unwrap();
    let items = keys("a", 300);
    assert_eq!(created.insert_many(&items, &mut Vec::new()).unwrap(), 300);
    // (The map of 1,000 buckets forgets some of 300 items to overwrites: the same ones for
    // both handles.)
    let remembered = created.contains_many(&items).unwrap();
    assert!(remembered >= 250, "{kind}: {remembered} of 300");
    assert_eq!(opened.contains_many(&items).unwrap(), remembered, "{kind}");
    for key in keys_of(&redis, &name) {
        if key != description {
            assert_eq!(del(&redis, &key), 1);
        }
    }
    let late = Any::build(kind, &Server::open(&url).unwrap(), &name, 1_000, false).unwrap();
    for (who, handle) in [("creator", &created), ("opener", &opened), ("late", &late)] {
        assert_missing(
            &format!("{kind} {who} lookup"),
            handle.contains_many(&items),
        );
        assert_missing(
            &format!("{kind} {who} insert"),
            handle.insert_many(&items, &mut Vec::new()),
        );
    }
}

#[test]
fn a_held_bloom_creation_is_waited_for_refuses_other_parameters_and_is_made_once() {
    a_held_creation("bloom");
}

#[test]
fn a_held_map_creation_is_waited_for_refuses_other_parameters_and_is_made_once() {
    a_held_creation("map");
}

#[test]
fn a_held_window_creation_is_waited_for_refuses_other_parameters_and_is_made_once() {
    a_held_creation("window");
}

/// GUARD (passes): 8 threads race `create` and `open_or_create` of one name and parameters
/// (4 each) for 10 rounds: exactly one `create` succeeds or every `create` is `Exists`, every
/// `open_or_create` opens, and each handle's insert is seen by every other handle.
#[test]
fn eight_threads_racing_create_and_open_or_create_share_one_structure() {
    let redis = RedisServer::start();
    let url = redis.url();
    for round in 0..10 {
        let name = format!("race-{round}");
        let ready = Arc::new(Barrier::new(8));
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let (ready, name, url) = (ready.clone(), name.clone(), url.clone());
                std::thread::spawn(move || {
                    let server = Server::open(&url).unwrap();
                    let builder = SharedOverwriteMap::builder(&name, 50_000u64).shards(4);
                    ready.wait();
                    let result = if t % 2 == 0 {
                        builder.create(&server)
                    } else {
                        builder.open_or_create(&server)
                    };
                    (t, result)
                })
            })
            .collect();
        let mut created = 0;
        let mut handles = Vec::new();
        for thread in threads {
            let (t, result) = thread.join().unwrap();
            match result {
                Ok(map) => {
                    if t % 2 == 0 {
                        created += 1;
                    }
                    handles.push(map);
                }
                Err(Error::Exists { .. }) if t % 2 == 0 => {}
                Err(other) => panic!("round {round} thread {t}: {other:?}"),
            }
        }
        assert!(created <= 1, "round {round}: {created} creates succeeded");
        for (i, map) in handles.iter().enumerate() {
            assert!(map.insert(&format!("from-{i}")).unwrap());
        }
        for map in &handles {
            for i in 0..handles.len() {
                assert!(map.contains(&format!("from-{i}")).unwrap(), "round {round}");
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// 4. Upload under a loss
// ---------------------------------------------------------------------------------------------

/// FIXED FINDING (lies). An upload writes the bits under temporary keys, then creates the shards,
/// ORs the temporaries in and writes the description. If the server loses its keys between
/// (a restart without persistence, a `FLUSHALL`; an eviction of the temporaries alone does
/// the same), `BITOP OR` with a missing source ORs nothing, and the upload returns `Ok` with
/// an empty filter: every uploaded item is "new". The temporaries have no guard.
#[test]
fn an_upload_whose_temporary_keys_are_lost_is_never_an_empty_filter() {
    let redis = RedisServer::start();
    let proxy = Proxy::start(&redis);
    let slow = Server::open(&proxy.url()).unwrap();
    let local = seen::AtomicBloomFilter::builder(5_000)
        .fpr(0.01)
        .hasher(seen::hash::StableHasher::new())
        .build()
        .unwrap();
    let items = keys("up", 3_000);
    for item in &items {
        local.insert(item.as_str());
    }
    // The shards' creation: after every temporary key is written.
    proxy.arm(|c| shard_script(c, "uploaded"), 0, Action::Hold);
    let upload = std::thread::spawn(move || {
        let result = SharedBloomFilter::upload(&slow, "uploaded", &local);
        result.map(|f| f.keys().to_vec())
    });
    proxy.wait_held();
    flushall(&redis);
    proxy.release();
    let result = upload.join().unwrap();
    if result.is_ok() {
        let server = Server::open(&redis.url()).unwrap();
        let filter = SharedBloomFilter::open(&server, "uploaded").unwrap();
        let hits = count_hits(&filter, &items);
        assert!(
            matches!(hits, Ok(3_000) | Err(Error::Missing { .. })),
            "an upload that returned Ok holds {hits:?} of its 3000 items"
        );
    }
}

/// FIXED FINDING (nit, leak): an upload to a name that holds a map is refused (`Mismatch`, from the
/// description's `SET NX GET`), but only after it wrote the filter's shards, which stay
/// behind under the map's name. (`meta::open(..).is_ok()` is the early check: a description
/// of another kind is an `Err` there, so the upload goes on.)
#[test]
fn an_upload_onto_a_map_is_refused_and_leaves_no_key() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    let map = SharedOverwriteMap::builder("taken", 1_000u64)
        .create(&server)
        .unwrap();
    let before = keys_of(&redis, "taken");
    let local = seen::AtomicBloomFilter::builder(1_000)
        .hasher(seen::hash::StableHasher::new())
        .build()
        .unwrap();
    let result = SharedBloomFilter::upload(&server, "taken", &local);
    assert!(
        matches!(result, Err(Error::Mismatch { .. } | Error::Exists { .. })),
        "{result:?}"
    );
    assert_eq!(
        keys_of(&redis, "taken"),
        before,
        "keys left by a refused upload"
    );
    assert!(map.insert("still-a-map").unwrap());
}

// ---------------------------------------------------------------------------------------------
// 5. Leases
// ---------------------------------------------------------------------------------------------

/// FIXED FINDING (lies). A lease's end is written into the leases hash by Lua's `..`, which formats
/// a number with `%.14g`: an end at or past 10^14 ms (a lease of ~3,100 years or more, e.g.
/// `Duration::MAX` for "never expire", the behaviour before leases) is written as
/// `1.8446744075505e+22`, which `ends()` (`'^(%d+)'`) reads as **1**: the lease ended in 1970.
/// The next claim of the item takes it over while the first holder works on it (two live
/// claims), and any claim on the shard may sweep it.
#[test]
fn a_very_long_lease_holds_its_item() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    let _ = SharedOverwriteMap::builder("eternal", 10_000u64)
        .shards(1)
        .create(&server)
        .unwrap();
    let other = SharedOverwriteMap::open(&server, "eternal").unwrap();
    for (what, lease) in [
        ("4000 years", Duration::from_secs(4_000 * 365 * 86_400)),
        ("Duration::MAX", Duration::MAX),
    ] {
        let map = SharedOverwriteMap::open(&server, "eternal")
            .unwrap()
            .with_lease(lease);
        let item = format!("job-{what}");
        let claim = map.claim(&item).unwrap().expect("new");
        let second = other.claim(&item).unwrap();
        assert!(
            second.is_none(),
            "a lease of {what}: the item was claimed again while its first claim is live"
        );
        assert!(claim.commit().unwrap());
    }
}

/// GUARD (passes): a 1 ms lease, taken over: the first holder's renew, commit and forget all
/// say it is no longer theirs and touch nothing; the new holder's commit counts.
#[test]
fn a_one_millisecond_lease_taken_over_leaves_the_first_holder_nothing() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    let map = SharedOverwriteMap::builder("tiny", 10_000u64)
        .lease(Duration::from_millis(1))
        .create(&server)
        .unwrap();
    let other = SharedOverwriteMap::open(&server, "tiny").unwrap();
    let mut conn = redis.client();
    for end in ["renew", "commit", "forget"] {
        let item = format!("x-{end}");
        let mut first = map.claim(&item).unwrap().expect("new");
        let t = server_millis(&mut conn);
        wait_past(&mut conn, t + 2);
        let taken = other.claim(&item).unwrap().expect("taken over after 1 ms");
        match end {
            "renew" => assert!(!first.renew().unwrap()),
            "commit" => assert!(!first.commit().unwrap()),
            _ => assert!(!first.forget().unwrap()),
        }
        assert!(
            other.contains(&item).unwrap(),
            "{end}: the new holder's item erased"
        );
        assert!(
            map.claim(&item).unwrap().is_none(),
            "{end}: the new holder's live lease was taken"
        );
        assert!(taken.commit().unwrap());
    }
}

/// GUARD (passes): 8 threads claim one item over and over with 2 ms leases, holding each
/// claim 0 to 3 ms before committing: leases end and are taken over all the time, but exactly
/// one commit counts, and after it every claim is a duplicate.
#[test]
fn eight_threads_claiming_one_item_on_tiny_leases_commit_it_exactly_once() {
    let redis = RedisServer::start();
    let url = redis.url();
    let _ = SharedOverwriteMap::builder("contended", 10_000u64)
        .create(&Server::open(&url).unwrap())
        .unwrap();
    for round in 0..5 {
        let item = format!("item-{round}");
        let committed = Arc::new(AtomicUsize::new(0));
        let claims = Arc::new(AtomicUsize::new(0));
        let ready = Arc::new(Barrier::new(8));
        let threads: Vec<_> = (0..8u64)
            .map(|t| {
                let (url, item, committed, claims, ready) = (
                    url.clone(),
                    item.clone(),
                    committed.clone(),
                    claims.clone(),
                    ready.clone(),
                );
                std::thread::spawn(move || {
                    let server = Server::open(&url).unwrap();
                    let map = SharedOverwriteMap::open(&server, "contended")
                        .unwrap()
                        .with_lease(Duration::from_millis(2));
                    ready.wait();
                    let deadline = Instant::now() + Duration::from_secs(20);
                    let mut after = 0;
                    while Instant::now() < deadline {
                        match map.claim(&item).unwrap() {
                            Some(claim) => {
                                claims.fetch_add(1, SeqCst);
                                std::thread::sleep(Duration::from_micros((t * 397) % 3000));
                                if claim.commit().unwrap() {
                                    committed.fetch_add(1, SeqCst);
                                }
                            }
                            None if committed.load(SeqCst) > 0 => {
                                after += 1;
                                if after > 20 {
                                    break;
                                }
                            }
                            None => {}
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(
            committed.load(SeqCst),
            1,
            "round {round}: {} claims, {} commits counted",
            claims.load(SeqCst),
            committed.load(SeqCst)
        );
    }
}

/// "Dropped without either: forgets as `forget` does": a claim from `claim_async` dropped at
/// the end of a `current_thread` runtime's `block_on` (the shape of
/// `#[tokio::main(flavor = "current_thread")]` handling one message and returning), or held
/// by a task that the runtime's shutdown cancels, is forgotten well within its hour-long
/// lease. Failed before: the forget was spawned on the caller's runtime, which was never
/// driven again, and the item stayed held for the whole lease. The forget now runs on the
/// `Server`'s own runtime, after the drop: the test waits for it (up to a minute).
#[test]
fn an_async_claim_dropped_as_its_runtime_ends_is_forgotten() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    let map = Arc::new(
        SharedOverwriteMap::builder("runtime-end", 10_000u64)
            .lease(HOUR)
            .create(&server)
            .unwrap(),
    );
    // Dropped as the last thing a `block_on` does.
    {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let claim = map.claim_async("last").await.unwrap().expect("new");
            drop(claim);
        });
    }
    // Held by a task that the runtime's shutdown cancels.
    {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        // A server of its own: a `Server`'s tokio connection dies with the runtime that made
        // it (a finding of its own, below).
        let map2 = Arc::new(
            SharedOverwriteMap::open(&Server::open(&redis.url()).unwrap(), "runtime-end")
                .unwrap()
                .with_lease(HOUR),
        );
        let (tx, rx) = std::sync::mpsc::channel();
        rt.spawn(async move {
            let claim = map2.claim_async("cancelled").await.unwrap().expect("new");
            tx.send(()).unwrap();
            std::future::pending::<()>().await;
            drop(claim);
        });
        rt.block_on(async {
            let deadline = Instant::now() + LIMIT;
            while rx.try_recv().is_err() {
                assert!(Instant::now() < deadline, "the task never claimed");
                tokio::task::yield_now().await;
            }
        });
        drop(rt);
    }
    for item in ["last", "cancelled"] {
        let deadline = Instant::now() + LIMIT;
        loop {
            if let Some(claim) = map.claim(item).unwrap() {
                assert!(claim.commit().unwrap());
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{item}: a dropped claim not forgotten within a minute (its lease is an hour)"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// A `Server`'s tokio connection is multiplexed and its driver task lives on the runtime that
/// opened it. Used from a second runtime after the first ended (a runtime per job, per test,
/// rebuilt after a panic), the first async call failed at once with `Error::Connection`
/// ("broken pipe"), an "unknown outcome" although nothing was sent (for a claim the docs then
/// say the item "may be claimed with no `SharedClaim`"). Now a connection whose runtime has
/// ended is replaced before the call: every runtime's first call answers.
#[test]
fn a_server_used_from_a_second_runtime_answers_its_first_async_call() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    let map = SharedOverwriteMap::builder("two-runtimes", 10_000u64)
        .create(&server)
        .unwrap();
    let mut failures = Vec::new();
    for i in 0..3 {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let item = format!("job-{i}");
        match rt.block_on(map.claim_async(&item)) {
            Ok(Some(claim)) => assert!(claim.commit().unwrap()),
            other => failures.push(format!("runtime {i}: {other:?}")),
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// GUARD (passes): a lost leases hash is `Missing` for every claim operation, an outstanding
/// claim included (and its drop neither panics nor writes); inserts and lookups, which do not
/// use leases, still answer. A lost shard is `Missing` for all of them.
#[test]
fn lost_leases_or_shard_are_missing_for_every_claim_operation() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    let map = SharedOverwriteMap::builder("lost-leases", 10_000u64)
        .shards(1)
        .create(&server)
        .unwrap();
    let mut held = map.claim("held").unwrap().expect("new");
    let renewed = map.claim("renewed").unwrap().expect("new");
    let committed = map.claim("committed").unwrap().expect("new");
    let leases = "seen:{lost-leases:0}:leases";
    assert_eq!(del(&redis, leases), 1);
    assert_missing("claim", map.claim("other").map(|c| c.is_some()));
    assert_missing("renew", renewed.renew());
    assert_missing("commit", committed.commit());
    assert_missing("forget", held.forget());
    drop(held);
    drop(renewed);
    assert_eq!(
        del(&redis, leases),
        0,
        "a claim's drop re-created the leases"
    );
    assert!(map.insert("plain").unwrap());
    assert!(map.contains("plain").unwrap());

    let map = SharedOverwriteMap::builder("lost-slots", 10_000u64)
        .shards(1)
        .create(&server)
        .unwrap();
    let mut held = map.claim("held").unwrap().expect("new");
    let renewed = map.claim("renewed").unwrap().expect("new");
    let committed = map.claim("committed").unwrap().expect("new");
    assert_eq!(del(&redis, &map.keys()[0]), 1);
    assert_missing("claim", map.claim("other").map(|c| c.is_some()));
    assert_missing("renew", renewed.renew());
    assert_missing("commit", committed.commit());
    assert_missing("forget", held.forget());
    assert_missing("map forget", map.forget("held"));
    assert_missing("insert", map.insert("plain"));
    drop(held);
}

// ---------------------------------------------------------------------------------------------
// 6. Destroy
// ---------------------------------------------------------------------------------------------

/// FIXED FINDING (doc mismatch, leak; fixed by a one-line change to `destroy`): the map's
/// `destroy` deleted the description and the shards but not the leases hashes
/// `seen:{NAME:s}:leases`: they stayed for ever, and a map created again under the name
/// inherited their old leases (`CREATE` keeps a leases hash that has its guard).
#[test]
fn a_destroyed_map_leaves_no_key_behind() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    let map = SharedOverwriteMap::builder("gone", 10_000u64)
        .shards(2)
        .create(&server)
        .unwrap();
    let _ = map.claim("pending").unwrap().expect("new");
    std::mem::forget(map.claim("abandoned").unwrap().expect("new"));
    map.destroy().unwrap();
    let left = keys_of(&redis, "gone");
    assert!(left.is_empty(), "keys left by destroy: {left:?}");
}

/// GUARD (passes): the Bloom and windowed filters' `destroy` leave no key.
#[test]
fn destroyed_filters_leave_no_key_behind() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    let bloom = SharedBloomFilter::builder("gone-bloom", 10_000)
        .shards(3)
        .create(&server)
        .unwrap();
    count_new(&bloom, &keys("x", 100)).unwrap();
    bloom.destroy().unwrap();
    assert_eq!(keys_of(&redis, "gone-bloom"), Vec::<String>::new());
    let window = SharedWindowedBloomFilter::builder("gone-window", 10_000)
        .periods(2)
        .period(HOUR)
        .shards(3)
        .create(&server)
        .unwrap();
    window_new(&window, &keys("x", 100)).unwrap();
    window.destroy().unwrap();
    assert_eq!(keys_of(&redis, "gone-window"), Vec::<String>::new());
}

// ---------------------------------------------------------------------------------------------
// 7. Calls cut into requests
// ---------------------------------------------------------------------------------------------

/// `REQUEST_ITEMS` hashes in shard 0, then one in shard 1, from `hashes(i)`.
fn split(shard_of: impl Fn(Hash128) -> u64, hash: impl Fn(usize) -> Hash128) -> Vec<Hash128> {
    let mut first = Vec::with_capacity(REQUEST_ITEMS);
    let mut last = None;
    for i in 0.. {
        let h = hash(i);
        match shard_of(h) {
            0 if first.len() < REQUEST_ITEMS => first.push(h),
            1 if last.is_none() => last = Some(h),
            _ => {}
        }
        if first.len() == REQUEST_ITEMS && last.is_some() {
            break;
        }
    }
    first.push(last.unwrap());
    first
}

const SENTINEL: [bool; 3] = [true, false, true];

/// GUARD (passes): a call of `REQUEST_ITEMS + 1` items whose second request fails (its only
/// shard deleted before the call) is `Missing`, naming that shard, and leaves the output
/// vector exactly as it was, for every structure and both `insert_many` and `contains_many`;
/// the first request's inserts are in (as documented).
#[test]
fn a_call_whose_second_request_finds_a_lost_shard_answers_nothing() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();

    let bloom = SharedBloomFilter::builder("cut-bloom", 100_000)
        .shards(2)
        .create(&server)
        .unwrap();
    let sizing = bloom.sizing();
    let per = sizing.blocks.div_ceil(2);
    let hashes = split(
        |h| seen::BlockBits::new(h, &sizing).block() / per,
        |i| bloom.hasher().hash_item(&format!("b-{i}")),
    );
    assert_eq!(del(&redis, &bloom.keys()[1]), 1);
    for insert in [true, false] {
        let mut out = SENTINEL.to_vec();
        let result = if insert {
            bloom.insert_many_hashes(hashes.iter().copied(), &mut out)
        } else {
            bloom.contains_many_hashes(hashes.iter().copied(), &mut out)
        };
        match &result {
            Err(Error::Missing { key, .. }) => assert_eq!(key, &bloom.keys()[1]),
            other => panic!("bloom insert={insert}: {other:?}"),
        }
        assert_eq!(out, SENTINEL, "bloom insert={insert}: the output changed");
    }
    let mut hits = Vec::new();
    assert_eq!(
        bloom
            .contains_many_hashes(hashes[..REQUEST_ITEMS].iter().copied(), &mut hits)
            .unwrap(),
        REQUEST_ITEMS,
        "the first request's inserts"
    );

    let map = SharedOverwriteMap::builder("cut-map", 1_000_000u64)
        .shards(2)
        .create(&server)
        .unwrap();
    let (buckets, per) = (map.buckets(), map.buckets().div_ceil(2));
    let hashes = split(
        |h| seen::MapSlot::new(h, buckets).slot() / per,
        |i| map.hasher().hash_item(&format!("m-{i}")),
    );
    assert_eq!(del(&redis, &map.keys()[1]), 1);
    for insert in [true, false] {
        let mut out = SENTINEL.to_vec();
        let result = if insert {
            map.insert_many_hashes(hashes.iter().copied(), &mut out)
        } else {
            map.contains_many_hashes(hashes.iter().copied(), &mut out)
        };
        match &result {
            Err(Error::Missing { key, .. }) => assert_eq!(key, &map.keys()[1]),
            other => panic!("map insert={insert}: {other:?}"),
        }
        assert_eq!(out, SENTINEL, "map insert={insert}: the output changed");
    }

    let clock = ManualClock::new(HOUR * 420_000 + HOUR / 2);
    let window = SharedWindowedBloomFilter::builder("cut-window", 100_000)
        .periods(1)
        .period(HOUR)
        .shards(2)
        .clock(clock.clone())
        .create(&server)
        .unwrap();
    let sizing = window.sizing();
    let per = sizing.blocks.div_ceil(2);
    let hashes = split(
        |h| seen::BlockBits::new(h, &sizing).block() / per,
        |i| window.hasher().hash_item(&format!("w-{i}")),
    );
    // Generation g of shard 1 exists (its ledger says live), then is lost.
    let mut out = Vec::new();
    window
        .insert_many_hashes(hashes[REQUEST_ITEMS..].iter().copied(), &mut out)
        .unwrap();
    let g = window.generation().unwrap();
    assert_eq!(del(&redis, &window.key(1, g)), 1);
    for insert in [true, false] {
        let mut out = SENTINEL.to_vec();
        let result = if insert {
            window.insert_many_hashes(hashes.iter().copied(), &mut out)
        } else {
            window.contains_many_hashes(hashes.iter().copied(), &mut out)
        };
        match &result {
            Err(Error::Missing { key, .. }) => assert_eq!(key, &window.key(1, g)),
            other => panic!("window insert={insert}: {other:?}"),
        }
        assert_eq!(out, SENTINEL, "window insert={insert}: the output changed");
    }
}

/// GUARD (passes): a call of `REQUEST_ITEMS + 1` items whose second request never reaches the
/// server (the proxy closes the connection instead of forwarding it) is `Error::Connection`
/// (an unknown outcome) and leaves the output vector unchanged; the first request's writes
/// are in, and the next call reconnects and answers.
#[test]
fn a_call_whose_second_request_loses_its_connection_answers_nothing() {
    let redis = RedisServer::start();
    let proxy = Proxy::start(&redis);
    let server = Server::open(&proxy.url()).unwrap();
    let items = keys("c", REQUEST_ITEMS + 1);
    let refs = || items.iter().map(String::as_str);

    // Bloom: the first request's items are in already, so the first request only reads; the
    // second reads, then writes: the first `BITFIELD` of the call is the second request's.
    let bloom = SharedBloomFilter::builder("conn-bloom", 100_000)
        .create(&server)
        .unwrap();
    assert_eq!(
        count_new(&bloom, &items[..REQUEST_ITEMS]).unwrap(),
        REQUEST_ITEMS
    );
    let bloom = SharedBloomFilter::open(&server, "conn-bloom").unwrap();
    proxy.arm(|c| has(c, "BITFIELD"), 0, Action::Cut);
    let mut out = SENTINEL.to_vec();
    let result = bloom.insert_many(refs(), &mut out);
    assert!(
        matches!(&result, Err(e) if e.is_unknown_outcome()),
        "bloom: {result:?}"
    );
    assert_eq!(out, SENTINEL);
    assert_eq!(
        count_hits(&bloom, &items[..REQUEST_ITEMS]).unwrap(),
        REQUEST_ITEMS
    );

    // Map: the second request is the one that carries the last item's fingerprint.
    let map = SharedOverwriteMap::builder("conn-map", 1_000_000u64)
        .create(&server)
        .unwrap();
    let hashes: Vec<Hash128> = items.iter().map(|i| map.hasher().hash_item(i)).collect();
    let last = seen::MapSlot::new(hashes[REQUEST_ITEMS], map.buckets()).fingerprint() as i64;
    let marker = last.to_string();
    proxy.arm(move |c| has(c, &marker), 0, Action::Cut);
    let mut out = SENTINEL.to_vec();
    let result = map.insert_many_hashes(hashes.iter().copied(), &mut out);
    assert!(
        matches!(&result, Err(e) if e.is_unknown_outcome()),
        "map: {result:?}"
    );
    assert_eq!(out, SENTINEL);
    let mut hits = Vec::new();
    let n = map
        .contains_many_hashes(hashes[..REQUEST_ITEMS].iter().copied(), &mut hits)
        .unwrap();
    assert!(n > REQUEST_ITEMS - 200, "the first request's inserts: {n}");

    // Window: each request's read starts with the description's `EXISTS`.
    let window = SharedWindowedBloomFilter::builder("conn-window", 100_000)
        .periods(1)
        .period(HOUR)
        .create(&server)
        .unwrap();
    proxy.arm(|c| has(c, "EXISTS"), 1, Action::Cut);
    let mut out = SENTINEL.to_vec();
    let result = window.insert_many(refs(), &mut out);
    assert!(
        matches!(&result, Err(e) if e.is_unknown_outcome()),
        "window: {result:?}"
    );
    assert_eq!(out, SENTINEL);
    let mut hits = Vec::new();
    assert_eq!(
        window.contains_many(refs(), &mut hits).unwrap(),
        REQUEST_ITEMS,
        "the next call answers: the first request's items are in"
    );
}

// ---------------------------------------------------------------------------------------------
// 8. Windowed filters: odd clocks and periods, a generation gone between read and write
// ---------------------------------------------------------------------------------------------

/// GUARD (passes): 0 periods and a 1 ms period on the server's time, a clock at the epoch and
/// one far in the future: inserts and lookups answer (no error, no overflow), a repeat within
/// the same generation is caught.
#[test]
fn windowed_filters_with_odd_periods_and_clocks_answer() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    let fast = SharedWindowedBloomFilter::builder("fast", 10_000)
        .periods(0)
        .period(Duration::from_millis(1))
        .create(&server)
        .unwrap();
    let items = keys("f", REQUEST_ITEMS + 1);
    window_new(&fast, &items).unwrap();
    window_hits(&fast, &items).unwrap();
    fast.info().unwrap();

    for (what, at) in [
        ("the epoch", Duration::ZERO),
        ("year 36,000", Duration::from_secs(1 << 40)),
        ("u64::MAX seconds", Duration::from_secs(u64::MAX)),
    ] {
        let clock = ManualClock::new(at);
        let name = format!("clock-{}", at.as_secs());
        let w = SharedWindowedBloomFilter::builder(&name, 1_000)
            .periods(2)
            .period(HOUR)
            .clock(clock.clone())
            .create(&server)
            .unwrap();
        assert!(w.insert("a").unwrap(), "{what}");
        assert!(!w.insert("a").unwrap(), "{what}");
        assert!(w.contains("a").unwrap(), "{what}");
        w.info().unwrap();
        w.destroy().unwrap();
    }
}

/// GUARD (passes): a lost ledger is `Missing` for every operation, also through a handle from
/// `open_or_create` afterwards (the description is there: nothing is created again).
#[test]
fn a_lost_ledger_is_missing_everywhere_and_open_or_create_keeps_it_lost() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    let builder = SharedWindowedBloomFilter::builder("no-ledger", 10_000)
        .periods(2)
        .period(HOUR)
        .shards(2);
    let w = builder.create(&server).unwrap();
    let items = keys("i", 500);
    window_new(&w, &items).unwrap();
    let g = w.generation().unwrap();
    assert_eq!(del(&redis, "seen:{no-ledger:1}:gens"), 1);
    let again = builder.open_or_create(&server).unwrap();
    for (who, w) in [("old", &w), ("reopened", &again)] {
        assert_missing(&format!("{who} contains"), window_hits(w, &items));
        assert_missing(&format!("{who} insert"), window_new(w, &items));
        assert_missing(&format!("{who} info"), w.info());
        assert_missing(&format!("{who} generation_info"), w.generation_info(g));
    }
}

/// FIXED FINDING (lies, narrow). An insert sends, per generation key, only the bits its read found
/// unset. If generation `g`'s key expires between the read and the script (by the server's
/// clock, while the handle's clock is still in `g`: a `ManualClock` or a replay clock that
/// lags), the script makes `g` again, empty, and sets only those bits: the item is answered
/// "new" and is not found by the very next lookup. Forced here by the proxy: the insert's
/// script is held, and meanwhile `g`'s key expires (deleted, its ledger end moved to the past,
/// exactly what an expiry leaves).
#[test]
fn an_item_answered_new_is_found_after_its_generation_expired_mid_insert() {
    let redis = RedisServer::start();
    let direct = Server::open(&redis.url()).unwrap();
    let proxy = Proxy::start(&redis);
    let clock = ManualClock::new(HOUR * 420_000 + HOUR / 2);
    let w = SharedWindowedBloomFilter::builder("mid-expiry", 200)
        .periods(1)
        .period(HOUR)
        .shards(1)
        .clock(clock.clone())
        .create(&direct)
        .unwrap();
    // A crowded generation: a new item finds some of its bits set by others.
    window_new(&w, &keys("fill", 600)).unwrap();
    let item = keys("probe", 1_000)
        .into_iter()
        .find(|p| !w.contains(p.as_str()).unwrap())
        .unwrap();
    let g = w.generation().unwrap();
    let slow = SharedWindowedBloomFilter::open(&Server::open(&proxy.url()).unwrap(), "mid-expiry")
        .unwrap()
        .with_clock(clock.clone());
    // The write: a script call without the read's BITFIELD_RO.
    proxy.arm(
        |c| has(c, "EVALSHA") && !has(c, "BITFIELD_RO"),
        0,
        Action::Hold,
    );
    let insert = {
        let item = item.clone();
        std::thread::spawn(move || slow.insert(item.as_str()))
    };
    proxy.wait_held();
    let mut conn = redis.client();
    let now = server_millis(&mut conn);
    assert_eq!(del(&redis, &w.key(0, g)), 1);
    let _: () = redis::cmd("HSET")
        .arg("seen:{mid-expiry:0}:gens")
        .arg(g.to_string())
        .arg(now - 1)
        .query(&mut conn)
        .unwrap();
    proxy.release();
    let answered = insert.join().unwrap();
    if let Ok(true) = answered {
        assert!(
            w.contains(item.as_str()).unwrap(),
            "{item} was answered new and is not found right after"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// 9. Keys written by someone else
// ---------------------------------------------------------------------------------------------

/// GUARD (passes; the error types are a nit, see the report): a guard byte overwritten with
/// garbage (`SETRANGE ... "\x02"`) is an error for every operation of the Bloom filter and the
/// map, never an answer: `Corrupt` from `insert`/`contains`, but `Missing` from `info` and
/// `download`, for the same byte.
#[test]
fn a_guard_byte_of_garbage_is_an_error_everywhere() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    let mut conn = redis.client();
    let bloom = SharedBloomFilter::builder("garbage", 1_000)
        .shards(1)
        .create(&server)
        .unwrap();
    count_new(&bloom, &keys("x", 100)).unwrap();
    let len: u64 = redis::cmd("STRLEN")
        .arg(&bloom.keys()[0])
        .query(&mut conn)
        .unwrap();
    // The guard's first byte: its 8 bytes end the shard.
    let _: u64 = redis::cmd("SETRANGE")
        .arg(&bloom.keys()[0])
        .arg(len - 8)
        .arg(&b"\x02"[..])
        .query(&mut conn)
        .unwrap();
    let results = [
        ("insert", bloom.insert("x-1").map(drop)),
        ("contains", bloom.contains("x-1").map(drop)),
        ("info", bloom.info().map(drop)),
        ("download", bloom.download().map(drop)),
    ];
    for (what, result) in &results {
        assert!(
            matches!(result, Err(Error::Corrupt { .. } | Error::Missing { .. })),
            "{what}: {result:?}"
        );
    }

    let map = SharedOverwriteMap::builder("garbage-map", 1_000u64)
        .shards(1)
        .create(&server)
        .unwrap();
    let _: u64 = redis::cmd("SETRANGE")
        .arg(&map.keys()[0])
        .arg(1_000 * 8)
        .arg(&b"\x02"[..])
        .query(&mut conn)
        .unwrap();
    for (what, result) in [
        ("insert", map.insert("a").map(drop)),
        ("contains", map.contains("a").map(drop)),
        ("claim", map.claim("a").map(drop)),
        ("forget", map.forget("a").map(drop)),
    ] {
        assert!(result.is_err(), "map {what}: {result:?}");
    }
}

/// GUARD (passes): keys of the wrong type where the crate expects a string or a hash (a hash
/// for a shard, a string for a ledger or a leases hash) are `Error::Server` `WRONGTYPE` for
/// the operations that touch them, and a ledger entry of garbage for a lost generation is an
/// error (a Lua comparison with `nil`: `Server`, where `Corrupt` would be more precise).
#[test]
fn keys_of_the_wrong_type_are_server_errors() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    let mut conn = redis.client();
    let wrongtype =
        |r: &Result<(), Error>| matches!(r, Err(Error::Server { code, .. }) if code == "WRONGTYPE");

    let bloom = SharedBloomFilter::builder("wt-bloom", 1_000)
        .shards(1)
        .create(&server)
        .unwrap();
    del(&redis, &bloom.keys()[0]);
    let _: u64 = redis::cmd("HSET")
        .arg(&bloom.keys()[0])
        .arg("f")
        .arg("v")
        .query(&mut conn)
        .unwrap();
    for r in [
        bloom.insert("a").map(drop),
        bloom.contains("a").map(drop),
        bloom.info().map(drop),
    ] {
        assert!(wrongtype(&r), "bloom: {r:?}");
    }

    let w = SharedWindowedBloomFilter::builder("wt-window", 1_000)
        .periods(1)
        .period(HOUR)
        .shards(1)
        .create(&server)
        .unwrap();
    let ledger = "seen:{wt-window:0}:gens";
    del(&redis, ledger);
    let _: () = redis::cmd("SET")
        .arg(ledger)
        .arg("x")
        .query(&mut conn)
        .unwrap();
    for r in [w.insert("a").map(drop), w.contains("a").map(drop)] {
        assert!(wrongtype(&r), "window: {r:?}");
    }

    let map = SharedOverwriteMap::builder("wt-map", 1_000u64)
        .shards(1)
        .create(&server)
        .unwrap();
    let leases = "seen:{wt-map:0}:leases";
    del(&redis, leases);
    let _: () = redis::cmd("SET")
        .arg(leases)
        .arg("x")
        .query(&mut conn)
        .unwrap();
    let r = map.claim("a").map(drop);
    assert!(wrongtype(&r), "map claim: {r:?}");

    // A lost generation whose ledger entry is garbage.
    let clock = ManualClock::new(HOUR * 420_000 + HOUR / 2);
    let w = SharedWindowedBloomFilter::builder("garbage-ledger", 1_000)
        .periods(1)
        .period(HOUR)
        .shards(1)
        .clock(clock)
        .create(&server)
        .unwrap();
    assert!(w.insert("a").unwrap());
    let g = w.generation().unwrap();
    del(&redis, &w.key(0, g));
    let _: u64 = redis::cmd("HSET")
        .arg("seen:{garbage-ledger:0}:gens")
        .arg(g.to_string())
        .arg("soon")
        .query(&mut conn)
        .unwrap();
    for r in [w.insert("a").map(drop), w.contains("a").map(drop)] {
        assert!(r.is_err(), "a garbage ledger entry answered {r:?}");
    }
}
