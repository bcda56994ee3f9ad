//! Several OS processes sharing one filter: the test binary runs itself again as workers
//! (`seen_test_server::worker`), each with its own connections, and the parent checks what they
//! printed. Every promise made across processes is tested here with real processes: exactly
//! one "new" per key among racing processes, acknowledged inserts surviving a client killed
//! mid-batch, and a second process opening a filter another one uploaded.

use std::io::{BufRead, BufReader, Write};
use std::process::{Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use seen::{AtomicBloomFilter, Layout};
use seen_redis::{Server, SharedBloomFilter, SharedWindowedBloomFilter};
use seen_test_server::{self as server, RedisServer, WORKER, Workers};

/// How long the parent waits for a worker's line before failing (a loaded CI machine).
const LINE_LIMIT: Duration = Duration::from_secs(60);

/// A worker process: what it does is in [`WORKER`] (`role|url|name|...`); run by the tests
/// below, and returns at once when run by the test harness itself.
#[test]
fn worker() {
    let Ok(spec) = std::env::var(WORKER) else {
        return;
    };
    let args: Vec<&str> = spec.split('|').collect();
    let server = Server::open(args[1]).unwrap();
    let mut out = std::io::stdout().lock();
    // The harness has printed `test worker ... ` with no newline: start the lines after it.
    writeln!(out).unwrap();
    // window-insert|url|name|keys|order seed|batch: as `insert`, into a windowed filter.
    if args[0] == "window-insert" {
        let filter = SharedWindowedBloomFilter::open(&server, args[2]).unwrap();
        race(&args, &mut out, |keys, new| {
            filter.insert_many(keys.iter().copied(), new).unwrap();
        });
        return;
    }
    let filter = SharedBloomFilter::open(&server, args[2]).unwrap();
    match args[0] {
        // insert|url|name|keys|order seed|batch: wait for the start signal, insert every key
        // in the given order and batch size, print each key this process was told is new.
        "insert" => race(&args, &mut out, |keys, new| {
            filter.insert_many(keys.iter().copied(), new).unwrap();
        }),
        // loop|url|name|batch: insert batches of new keys, batch `b` once a line has come on
        // standard input for it (the parent decides when each batch starts), printing (and
        // flushing) `ACK b` once it has returned; until killed, or the end of the input.
        "loop" => {
            let batch: usize = args[3].parse().unwrap();
            let mut new = Vec::new();
            let mut input = std::io::stdin().lines();
            for b in 0.. {
                if input.next().is_none() {
                    break;
                }
                let keys: Vec<String> = (0..batch).map(|i| format!("b{b}-{i}")).collect();
                new.clear();
                filter
                    .insert_many(keys.iter().map(String::as_str), &mut new)
                    .unwrap();
                writeln!(out, "ACK {b}").unwrap();
                out.flush().unwrap();
            }
        }
        // contains|url|name|items: print how many of `item-0..items` the filter holds.
        "contains" => {
            let items: Vec<String> = (0..args[3].parse().unwrap())
                .map(|i: u64| format!("item-{i}"))
                .collect();
            let mut hits = Vec::new();
            let found = filter
                .contains_many(items.iter().map(String::as_str), &mut hits)
                .unwrap();
            writeln!(out, "FOUND {found}").unwrap();
        }
        other => panic!("unknown worker role {other}"),
    }
    out.flush().unwrap();
}

/// The racing insert of a worker (`role|url|name|keys|order seed|batch`): waits for its start
/// token, inserts `race-0..keys` in the given order and batch size with `insert`, prints each
/// key this process was told is new, then `DONE`.
fn race(args: &[&str], out: &mut impl Write, insert: impl Fn(&[&str], &mut Vec<bool>)) {
    let keys: usize = args[3].parse().unwrap();
    let mut order: Vec<usize> = (0..keys).collect();
    server::shuffle(&mut order, args[4].parse().unwrap());
    let batch: usize = args[5].parse().unwrap();
    let mut client = redis::Client::open(args[1])
        .unwrap()
        .get_connection()
        .unwrap();
    server::ready_then_wait_for_go(&mut client, args[2]);
    let mut new = Vec::new();
    for chunk in order.chunks(batch) {
        new.clear();
        let names: Vec<String> = chunk.iter().map(|i| format!("race-{i}")).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        insert(&names, &mut new);
        for (i, &n) in chunk.iter().zip(&new) {
            if n {
                writeln!(out, "NEW {i}").unwrap();
            }
        }
    }
    writeln!(out, "DONE").unwrap();
    out.flush().unwrap();
}

/// The lines a worker printed that start with `prefix`, without it; fails if it failed.
fn lines(out: Output, prefix: &str) -> Vec<String> {
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success(), "a worker failed:\n{text}");
    text.lines()
        .filter_map(|l| l.strip_prefix(prefix))
        .map(str::to_owned)
        .collect()
}

/// Four processes insert the same 3000 keys at once (two in the same order, in batches of 1
/// and 16, so that they race on the same key at the same moment; two shuffled, in batches of
/// 50 and 200). Every key inserted before the race (the multiples of 7) is new for none, every
/// other for exactly one process: in both layouts (on the server the line layout is exactly
/// once too, one `BITFIELD` setting all of an item's bits). The filter is sized for a million
/// at 1e-4 and gets 3000, so the chance that some key is a false positive (its bits all set by
/// others, so that no process is told "new") is below 1e-5 per run (bound in `tests/bloom.rs`).
#[test]
fn processes_inserting_the_same_keys_are_told_new_exactly_once() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    const KEYS: usize = 3000;
    for layout in [Layout::Word, Layout::Line] {
        let name = format!("race-{layout:?}");
        let filter = SharedBloomFilter::builder(&name, 1_000_000)
            .fpr(1e-4)
            .layout(layout)
            .shards(4)
            .create(&server)
            .unwrap();
        let before: Vec<String> = (0..KEYS).step_by(7).map(|i| format!("race-{i}")).collect();
        let mut new = Vec::new();
        assert_eq!(
            filter
                .insert_many(before.iter().map(String::as_str), &mut new)
                .unwrap(),
            before.len()
        );
        let counts = race_processes(&redis, &name, "insert", KEYS);
        for (i, &count) in counts.iter().enumerate() {
            let want = u32::from(i % 7 != 0);
            assert_eq!(
                count, want,
                "{layout:?}: race-{i} was new for {count} processes"
            );
        }
    }
}

/// Starts four workers of `role` racing on `race-0..keys` of the structure `name` (two in the
/// same order, in batches of 1 and 16, so that they race on the same key at the same moment;
/// two shuffled, in batches of 50 and 200), all at once once each has opened it, and counts,
/// per key, the processes that were told it is new.
fn race_processes(redis: &RedisServer, name: &str, role: &str, keys: usize) -> Vec<u32> {
    let workers = Workers::spawn([(0, 1), (0, 16), (11, 50), (12, 200)].iter().map(
        |(seed, batch)| {
            let spec = format!("{role}|{}|{name}|{keys}|{seed}|{batch}", redis.url());
            server::worker("worker", &spec)
        },
    ));
    // Start them together (each blocks on a start token once it has opened the structure).
    server::start_when_ready(redis, name, workers.len());
    let mut counts = vec![0u32; keys];
    for out in workers.outputs() {
        for line in lines(out, "NEW ") {
            counts[line.parse::<usize>().unwrap()] += 1;
        }
    }
    counts
}

/// A client SIGKILLed in the middle of a batch of 20,000: every key of every batch it
/// acknowledged is in the filter, a re-insert of them is "not new", and the server and the
/// filter serve other clients as before. The parent lets the worker run its batches one by one
/// (a line on its standard input each); after 3 acknowledgements it holds writes (`CLIENT
/// PAUSE WRITE`), lets the 4th batch start, and kills the worker once that batch's write is
/// held: exactly 3 batches were acknowledged, and the 4th is certainly torn.
#[test]
fn a_client_killed_mid_batch_leaves_every_acknowledged_key_in_the_filter() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    let filter = SharedBloomFilter::builder("killed", 1_000_000)
        .fpr(0.001)
        .shards(2)
        .create(&server)
        .unwrap();
    const BATCH: usize = 20_000;
    let mut worker = server::worker("worker", &format!("loop|{}|killed|{BATCH}", redis.url()));
    worker.stdin(Stdio::piped());
    let mut workers = Workers::spawn([worker]);
    let child = workers.child(0);
    let mut input = child.stdin.take().unwrap();
    let (tx, rx) = mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(b) = line.strip_prefix("ACK ") {
                let _ = tx.send(b.parse::<usize>().unwrap());
            }
        }
    });
    let mut next_batch = || writeln!(input, "go").and_then(|()| input.flush()).unwrap();
    for b in 0..3 {
        next_batch();
        let acked = rx
            .recv_timeout(LINE_LIMIT)
            .expect("the worker acknowledges a batch");
        assert_eq!(acked, b);
    }
    redis.pause_writes();
    next_batch();
    redis.wait_blocked(1, "the 4th batch's write to be held");
    assert!(!workers.kill(0).success());
    reader.join().unwrap();
    // Every acknowledgement it printed is read now.
    let acked = 3 + rx.try_iter().count();
    // The server drops the dead client, and its held write with it, before the pause ends.
    redis.wait_blocked(0, "the killed client to be dropped");
    redis.unpause();
    let acked_keys: Vec<String> = (0..acked)
        .flat_map(|b| (0..BATCH).map(move |i| format!("b{b}-{i}")))
        .collect();
    let mut hits = Vec::new();
    assert_eq!(
        filter
            .contains_many(acked_keys.iter().map(String::as_str), &mut hits)
            .unwrap(),
        acked_keys.len(),
        "an acknowledged key is missing after the client was killed"
    );
    let mut new = Vec::new();
    assert_eq!(
        filter
            .insert_many(acked_keys.iter().map(String::as_str), &mut new)
            .unwrap(),
        0
    );
    // The kill came with the 4th batch's write held: it was not acknowledged.
    assert_eq!(acked, 3, "a batch whose write was held was acknowledged");
    // The batch it was killed in: its write never ran (the server dropped it with its
    // client), so finishing it from here finds every key new (no false positive among these
    // keys at this fill: the hashes are fixed), and leaves every key present.
    let torn: Vec<String> = (0..BATCH).map(|i| format!("b{acked}-{i}")).collect();
    new.clear();
    assert_eq!(
        filter
            .insert_many(torn.iter().map(String::as_str), &mut new)
            .unwrap(),
        BATCH
    );
    hits.clear();
    assert_eq!(
        filter
            .contains_many(torn.iter().map(String::as_str), &mut hits)
            .unwrap(),
        BATCH
    );
    // Others carry on: a second process opens the filter and a new key is new.
    let other = SharedBloomFilter::open(&Server::open(&redis.url()).unwrap(), "killed").unwrap();
    assert!(other.insert("after the kill").unwrap());
    assert!(filter.contains("after the kill").unwrap());
}

/// A filter uploaded by this process is opened by name in another, which finds every item of
/// the local filter (all its bits arrived before the name became visible).
#[test]
fn a_second_process_opens_an_uploaded_filter_with_every_item() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    for layout in [Layout::Word, Layout::Line] {
        let local = AtomicBloomFilter::builder(5000)
            .fpr(0.01)
            .layout(layout)
            .build()
            .unwrap();
        for i in 0..5000u64 {
            local.insert(&format!("item-{i}"));
        }
        let name = format!("uploaded-{layout:?}");
        SharedBloomFilter::upload(&server, &name, &local).unwrap();
        let worker = Workers::spawn([server::worker(
            "worker",
            &format!("contains|{}|{name}|5000", redis.url()),
        )]);
        let out = worker.outputs().remove(0);
        assert_eq!(lines(out, "FOUND "), ["5000"], "{layout:?}");
    }
}

/// Four processes insert the same 3000 keys into one windowed filter at once (the same shapes
/// as the Bloom filter's race above): every key inserted before the race is new for none, every
/// other for exactly one process. They run on the server's time with a period of an hour, so
/// they are in one generation (or two adjacent ones, if the race straddles an hour: the
/// insert script is exactly-once across that too). False positives: 3000 keys in generations
/// sized for a million at 1e-4 over the window, below 1e-5 per run as above.
#[test]
fn processes_inserting_the_same_keys_into_a_window_are_told_new_exactly_once() {
    let redis = RedisServer::start();
    let server = Server::open(&redis.url()).unwrap();
    const KEYS: usize = 3000;
    let name = "window-race";
    let filter = SharedWindowedBloomFilter::builder(name, 1_000_000)
        .fpr(1e-4)
        .periods(3)
        .period(Duration::from_secs(3600))
        .shards(4)
        .create(&server)
        .unwrap();
    let before: Vec<String> = (0..KEYS).step_by(7).map(|i| format!("race-{i}")).collect();
    let mut new = Vec::new();
    assert_eq!(
        filter
            .insert_many(before.iter().map(String::as_str), &mut new)
            .unwrap(),
        before.len()
    );
    let counts = race_processes(&redis, name, "window-insert", KEYS);
    for (i, &count) in counts.iter().enumerate() {
        let want = u32::from(i % 7 != 0);
        assert_eq!(count, want, "race-{i} was new for {count} processes");
    }
}
