//! Faults say what happened: a server killed mid-batch, restarted (with AOF, with RDB), out of
//! memory, a key of the wrong type, a missing or mismatched filter, bad parameters. Each is a
//! typed error naming the key, never a panic, and never a "new" for a key whose write is
//! unknown.

#[path = "common/items.rs"]
mod items;

use std::sync::{Arc, mpsc};
use std::time::Duration;

use items::{count_hits, count_new, keys};
use seen::Layout;
use seen_redis::{Error, Server, SharedBloomFilter};
use seen_test_server::RedisServer;

/// How long a test waits for a batch on a quiet server to return before failing (a watchdog,
/// far above what a batch takes on a loaded machine).
const ACK_LIMIT: Duration = Duration::from_secs(60);

/// The server dies while a batch waits for its write round (held by `CLIENT PAUSE WRITE`
/// after its read round, so the kill is certainly mid-batch): the batch fails with
/// [`Error::Connection`], an unknown outcome, and answers nothing. The server comes back with
/// its AOF (`appendfsync always`): the same filter value reconnects, every acknowledged insert
/// is there, and the interrupted batch, retried, is new in full (its write never ran).
#[test]
fn a_server_killed_mid_batch_fails_the_batch_and_keeps_every_acknowledged_insert() {
    let mut redis = RedisServer::start_with(&[
        "--save",
        "",
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
    ]);
    let server = Server::open(&redis.url()).unwrap();
    let filter = Arc::new(
        SharedBloomFilter::builder("killed", 100_000)
            .shards(3)
            .create(&server)
            .unwrap(),
    );
    let acked = keys("acked", 5000);
    assert_eq!(count_new(&filter, &acked).unwrap(), acked.len());

    redis.pause_writes();
    let interrupted = keys("interrupted", 5000);
    let batch = {
        let (filter, interrupted) = (filter.clone(), interrupted.clone());
        std::thread::spawn(move || {
            let mut new = Vec::new();
            let result = filter.insert_many(interrupted.iter().map(String::as_str), &mut new);
            (result, new)
        })
    };
    // The batch's read ran; its write waits in the pause (an hour: only the kill ends it).
    redis.wait_blocked(1, "the batch's write to be held by the pause");
    redis.kill();
    let (result, new) = batch.join().unwrap();
    match result {
        Err(err) => {
            assert!(err.is_unknown_outcome(), "{err:?}");
            assert!(
                matches!(&err, Error::Connection { key, .. } if key.starts_with("seen:{killed:")),
                "{err:?}"
            );
            assert!(err.to_string().contains("seen:{killed:"), "{err}");
        }
        Ok(n) => panic!("a batch whose server died answered {n} new"),
    }
    assert!(new.is_empty(), "a failed batch appended answers");
    // While the server is down: an unknown outcome again, never an answer.
    assert!(
        filter
            .insert("while down")
            .unwrap_err()
            .is_unknown_outcome()
    );

    redis.restart();
    assert_eq!(
        count_hits(&filter, &acked).unwrap(),
        acked.len(),
        "an acknowledged insert was lost"
    );
    assert_eq!(count_new(&filter, &acked).unwrap(), 0);
    assert_eq!(count_new(&filter, &interrupted).unwrap(), interrupted.len());
}

/// A server SIGKILLed in the middle of a stream of batches (AOF, `appendfsync always`), then
/// restarted: every batch that returned is there, and the loop's last call failed with an
/// unknown outcome. The kill is certainly mid-batch: once five batches have returned, the
/// server holds writes (`CLIENT PAUSE WRITE`) and is killed once the stream's next write is
/// held, after its read ran.
#[test]
fn a_server_killed_during_a_stream_of_batches_keeps_every_acknowledged_one_with_aof() {
    let mut redis = RedisServer::start_with(&[
        "--save",
        "",
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
    ]);
    let server = Server::open(&redis.url()).unwrap();
    let filter = Arc::new(
        SharedBloomFilter::builder("stream", 1_000_000)
            .shards(2)
            .create(&server)
            .unwrap(),
    );
    // The inserter sends each batch's number once it has returned.
    let (acks, acked) = mpsc::channel();
    let inserter = {
        let filter = filter.clone();
        std::thread::spawn(move || {
            for b in 0.. {
                if let Err(err) = count_new(&filter, &keys(&format!("s{b}"), 2000)) {
                    return (b, err);
                }
                acks.send(b).unwrap();
            }
            unreachable!()
        })
    };
    for b in 0..5 {
        let got = acked.recv_timeout(ACK_LIMIT).expect("a batch returns");
        assert_eq!(got, b);
    }
    redis.pause_writes();
    redis.wait_blocked(1, "a batch's write to be held by the pause");
    redis.kill();
    let (failed, err) = inserter.join().unwrap();
    assert!(err.is_unknown_outcome(), "{err:?}");
    // Every batch before the failed one returned, and no other.
    let acked: Vec<usize> = (0..5).chain(acked.try_iter()).collect();
    assert_eq!(acked, (0..failed).collect::<Vec<_>>());
    redis.restart();
    for b in 0..failed {
        let batch = keys(&format!("s{b}"), 2000);
        assert_eq!(
            count_hits(&filter, &batch).unwrap(),
            batch.len(),
            "batch {b} of {failed} lost"
        );
    }
}

/// With RDB only: what a `SAVE` wrote is there after a SIGKILL and restart; the same filter
/// value (whose pooled connections went to the killed server) works again after at most one
/// failed request per connection it held.
#[test]
fn a_restart_from_rdb_keeps_what_was_saved_and_the_filter_reconnects() {
    let mut redis = RedisServer::start_with(&["--save", "", "--appendonly", "no"]);
    let server = Server::open(&redis.url()).unwrap();
    let filter = SharedBloomFilter::builder("rdb", 100_000)
        .layout(Layout::Line)
        .create(&server)
        .unwrap();
    let saved = keys("saved", 5000);
    assert_eq!(count_new(&filter, &saved).unwrap(), saved.len());
    // Several threads at once: the server value pools a connection for each.
    std::thread::scope(|s| {
        for _ in 0..3 {
            s.spawn(|| assert_eq!(count_hits(&filter, &saved).unwrap(), saved.len()));
        }
    });
    let _: () = redis::cmd("SAVE").query(&mut redis.client()).unwrap();
    let unsaved = keys("unsaved", 5000);
    assert_eq!(count_new(&filter, &unsaved).unwrap(), unsaved.len());
    redis.restart();
    // The first request may meet a connection of the killed server (unknown outcome: it
    // cannot tell); after it the pool holds no connection to the killed server.
    match count_hits(&filter, &saved) {
        Ok(n) => assert_eq!(n, saved.len()),
        Err(err) => assert!(err.is_unknown_outcome(), "{err:?}"),
    }
    assert_eq!(
        count_hits(&filter, &saved).unwrap(),
        saved.len(),
        "a saved insert was lost"
    );
    // Proof that the server really restarted from the RDB: what came after SAVE is gone
    // (a few items may be false positives of the 5000 saved ones, at 1%).
    let left = count_hits(&filter, &unsaved).unwrap();
    assert!(left < 200, "{left} of the unsaved items are still there");
    assert_eq!(count_new(&filter, &saved).unwrap(), 0);
}

/// Under `maxmemory` with `noeviction`, a filter that does not fit: its creation overshoots
/// once (the server checks memory before a command, not during), then every write is refused
/// with `OOM`, naming the key; no item is told new, and lookups still work.
#[test]
fn out_of_memory_is_a_server_error_naming_the_key() {
    let redis = RedisServer::start_with(&[
        "--save",
        "",
        "--appendonly",
        "no",
        "--maxmemory",
        "4mb",
        "--maxmemory-policy",
        "noeviction",
    ]);
    let server = Server::open(&redis.url()).unwrap();
    // About 1.2 MiB of bits, created under the limit.
    let big = SharedBloomFilter::builder("big", 1_000_000)
        .create(&server)
        .unwrap();
    // The limit drops below what the server holds: every write is refused from now on.
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg("1mb")
        .query(&mut redis.client())
        .unwrap();
    let items = keys("oom", 1000);
    match count_new(&big, &items) {
        Err(err) => {
            assert!(err.is_out_of_memory(), "{err:?}");
            assert!(!err.is_unknown_outcome());
            assert!(
                matches!(&err, Error::Server { key, code, .. } if key == &big.keys()[0] && code == "OOM"),
                "{err:?}"
            );
            assert!(err.to_string().contains(&big.keys()[0]), "{err}");
        }
        Ok(n) => panic!("an insert past maxmemory answered {n} new"),
    }
    assert_eq!(
        count_hits(&big, &items).unwrap(),
        0,
        "a refused insert left bits"
    );
    // Creating another filter is refused.
    match SharedBloomFilter::builder("more", 1000).create(&server) {
        Err(err) => {
            assert!(err.is_out_of_memory(), "{err:?}");
            assert!(err.to_string().contains("seen:{more"), "{err}");
        }
        Ok(_) => panic!("a filter was created past maxmemory"),
    }
}

/// Keys of another type under a filter's names: the server's `WRONGTYPE`, naming the key, for
/// a shard; for the description, the server's error or the crate's `Corrupt`/`Mismatch`.
#[test]
fn a_key_of_the_wrong_type_is_an_error_naming_it() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    let mut client = redis.client();
    let filter = SharedBloomFilter::builder("typed", 10_000)
        .shards(1)
        .create(&server)
        .unwrap();
    let shard = filter.keys()[0].clone();
    let _: () = redis::cmd("DEL").arg(&shard).query(&mut client).unwrap();
    let _: () = redis::cmd("HSET")
        .arg(&shard)
        .arg("f")
        .arg("v")
        .query(&mut client)
        .unwrap();
    for result in [filter.insert("x"), filter.contains("x")] {
        match result {
            Err(err @ Error::Server { .. }) => {
                let Error::Server { key, code, .. } = &err else {
                    unreachable!()
                };
                assert_eq!((key.as_str(), code.as_str()), (shard.as_str(), "WRONGTYPE"));
                assert!(err.to_string().contains(&shard), "{err}");
            }
            other => panic!("a hash in place of a shard answered {other:?}"),
        }
    }
    // The description: a hash, then a string that is not a description, then another kind.
    let meta = "seen:{typed}:meta";
    let _: () = redis::cmd("DEL").arg(meta).query(&mut client).unwrap();
    let _: () = redis::cmd("HSET")
        .arg(meta)
        .arg("f")
        .arg("v")
        .query(&mut client)
        .unwrap();
    match SharedBloomFilter::open(&server, "typed") {
        Err(err @ Error::Server { .. }) => assert!(err.to_string().contains(meta), "{err}"),
        other => panic!("a hash in place of the description answered {other:?}"),
    }
    match SharedBloomFilter::builder("typed", 10_000)
        .shards(1)
        .create(&server)
    {
        Err(err @ Error::Server { .. }) => assert!(err.to_string().contains(meta), "{err}"),
        other => panic!("create over a hash description answered {other:?}"),
    }
    let _: () = redis::cmd("DEL").arg(meta).query(&mut client).unwrap();
    let _: () = redis::cmd("SET")
        .arg(meta)
        .arg("hello")
        .query(&mut client)
        .unwrap();
    match SharedBloomFilter::open(&server, "typed") {
        Err(err @ Error::Corrupt { .. }) => assert!(err.to_string().contains(meta), "{err}"),
        other => panic!("a foreign description answered {other:?}"),
    }
    let _: () = redis::cmd("SET")
        .arg(meta)
        .arg("seen-redis/1\nkind=bloom\n")
        .query(&mut client)
        .unwrap();
    match SharedBloomFilter::open(&server, "typed") {
        Err(err @ Error::Corrupt { .. }) => assert!(err.to_string().contains("earlier version")),
        other => panic!("a description of format 1 answered {other:?}"),
    }
    let _: () = redis::cmd("SET")
        .arg(meta)
        .arg("seen-redis/3\nkind=map\n")
        .query(&mut client)
        .unwrap();
    match SharedBloomFilter::open(&server, "typed") {
        Err(Error::Mismatch { name, field, .. }) => {
            assert_eq!((name.as_str(), field), ("typed", "kind"))
        }
        other => panic!("another kind answered {other:?}"),
    }
}

/// A filter that is not there: `open` of an unknown name, and shards deleted under an open
/// filter, are `Missing`, for lookups and inserts alike: never "new" into a lost filter.
#[test]
fn a_missing_filter_or_shard_is_missing_never_new() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    match SharedBloomFilter::open(&server, "nothing") {
        Err(err @ Error::Missing { .. }) => {
            assert!(err.to_string().contains("seen:{nothing}:meta"), "{err}")
        }
        other => panic!("open of an unknown name answered {other:?}"),
    }
    let filter = SharedBloomFilter::builder("lost", 10_000)
        .shards(2)
        .create(&server)
        .unwrap();
    assert!(filter.insert("before").unwrap());
    let _: () = redis::cmd("DEL")
        .arg(filter.keys())
        .query(&mut redis.client())
        .unwrap();
    let fresh = keys("after", 100);
    for result in [
        count_new(&filter, &fresh),
        count_hits(&filter, &fresh),
        filter.insert("x").map(usize::from),
    ] {
        match result {
            Err(err @ Error::Missing { .. }) => {
                assert!(err.to_string().contains("seen:{lost:"), "{err}");
            }
            other => panic!("a filter whose shards are gone answered {other:?}"),
        }
    }
    assert!(matches!(filter.download(), Err(Error::Missing { .. })));
    // The refused inserts' writes may have created keys again (a `BITFIELD SET` creates its
    // key), but none with a guard byte: every handle, also a fresh one, still finds the
    // filter lost.
    let fresh = SharedBloomFilter::open(&server, "lost").unwrap();
    assert!(matches!(
        count_hits(&fresh, &keys("before", 1)),
        Err(Error::Missing { .. })
    ));
}

/// The same name with other parameters is refused, naming the parameter; bad names and
/// parameters are typed errors before anything reaches the server.
#[test]
fn mismatched_parameters_and_bad_names_are_refused() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    let builder = SharedBloomFilter::builder("orders", 10_000)
        .fpr(0.01)
        .layout(Layout::Word);
    builder.create(&server).unwrap();
    builder.open_or_create(&server).unwrap(); // the same parameters: opens it
    assert!(matches!(builder.create(&server), Err(Error::Exists { .. })));
    for (other, field) in [
        (SharedBloomFilter::builder("orders", 20_000), "capacity"),
        (
            SharedBloomFilter::builder("orders", 10_000).fpr(0.001),
            "fpr",
        ),
        (
            SharedBloomFilter::builder("orders", 10_000).layout(Layout::Line),
            "layout",
        ),
        (SharedBloomFilter::builder("orders", 10_000).seed(3), "seed"),
        (
            SharedBloomFilter::builder("orders", 10_000).shards(5),
            "shards",
        ),
    ] {
        match other.create(&server) {
            Err(err @ Error::Mismatch { .. }) => {
                let Error::Mismatch { name, field: f, .. } = &err else {
                    unreachable!()
                };
                assert_eq!((name.as_str(), *f), ("orders", field));
                let text = err.to_string();
                assert!(text.contains("orders") && text.contains(field), "{text}");
            }
            other => panic!("a create with another {field} answered {other:?}"),
        }
    }
    for name in ["", "a b", "a{b", "a}b", "tab\there"] {
        assert!(
            matches!(
                SharedBloomFilter::builder(name, 1000).create(&server),
                Err(Error::InvalidName { .. })
            ),
            "{name:?}"
        );
        assert!(
            matches!(
                SharedBloomFilter::open(&server, name),
                Err(Error::InvalidName { .. })
            ),
            "{name:?}"
        );
    }
    assert!(matches!(
        SharedBloomFilter::builder("zero", 0).create(&server),
        Err(Error::Local(seen::Error::ZeroCapacity))
    ));
    for fpr in [0.0, 1.0, -0.5, 1.5, f64::NAN] {
        assert!(
            matches!(
                SharedBloomFilter::builder("rate", 1000)
                    .fpr(fpr)
                    .create(&server),
                Err(Error::Local(_))
            ),
            "fpr {fpr}"
        );
    }
    // None of the refused calls left a key.
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query(&mut redis.client())
        .unwrap();
    assert!(
        keys.iter().all(|k| k.starts_with("seen:{orders")),
        "{keys:?}"
    );
}
