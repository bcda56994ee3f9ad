//! `seen dedup --redis URL --name NAME` against real servers (`redis-server`, started by the
//! shared crate's harness in a temporary directory, killed on drop): runs that share a filter
//! print each distinct record once between them; what is refused; what a server that is gone
//! or sized otherwise does to a run.
#![cfg(unix)]

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Write};
use std::process::Output;
use std::time::{Duration, Instant};

mod common;

use common::{first_occurrences, lines, seen, start, stderr_of, wait_within};
use seen_test_server::{RedisCluster, RedisServer};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `seen dedup --redis URL --name NAME` with `more` arguments, on `input`.
fn dedup(url: &str, name: &str, more: &[&str], input: &[u8]) -> Output {
    let mut args = vec!["dedup", "--redis", url, "--name", name, "--no-progress"];
    args.extend_from_slice(more);
    seen(&args, input)
}

/// How many times each line occurs in `outputs`, together.
fn counts<'a>(outputs: impl IntoIterator<Item = &'a [u8]>) -> HashMap<&'a [u8], usize> {
    let mut counts = HashMap::new();
    for out in outputs {
        for line in out.split_inclusive(|&b| b == b'\n') {
            *counts.entry(line).or_insert(0) += 1;
        }
    }
    counts
}

/// Whether `small`'s lines are a subsequence of `big`'s.
fn is_subsequence(small: &[u8], big: &[u8]) -> bool {
    let mut big = big.split_inclusive(|&b| b == b'\n');
    small
        .split_inclusive(|&b| b == b'\n')
        .all(|line| big.any(|l| l == line))
}

/// Fails unless run `run`'s output is a subsequence of `big` (the first occurrences of its
/// input), naming the first line out of order, where it is in the output, and whether and
/// where it occurs in `big` and in the run's whole `input`: what a failure needs to be read.
fn assert_in_input_order(run: usize, out: &[u8], big: &[u8], input: &[u8]) {
    if is_subsequence(out, big) {
        return;
    }
    let lines = |b: &[u8]| -> Vec<Vec<u8>> {
        b.split_inclusive(|&c| c == b'\n')
            .map(<[u8]>::to_vec)
            .collect()
    };
    let (out, big, input) = (lines(out), lines(big), lines(input));
    let mut at = 0;
    for (i, line) in out.iter().enumerate() {
        match big[at..].iter().position(|l| l == line) {
            Some(p) => at += p + 1,
            None => {
                let text = String::from_utf8_lossy(line);
                let in_big = big.iter().position(|l| l == line);
                let in_input: Vec<usize> =
                    (0..input.len()).filter(|&j| input[j] == *line).collect();
                panic!(
                    "run {run}: output line {i} ({text:?}) is out of its input's order: first \
                     occurrences hold it at {in_big:?} (the output had reached {at}), the input at \
                     {in_input:?}; output has {} lines",
                    out.len()
                );
            }
        }
    }
}

/// Two runs fed overlapping parts of one stream (records 0 to 60% and
/// 40% to 100%, with repeats inside and across the parts), at once, one on one thread and one
/// on three, print between them each distinct record exactly once, each run in its input's
/// order.
///
/// False positives: the 120,000 records hold about 96,000 distinct keys in a filter for
/// 1,000,000 at --fpr 1e-7. A key is taken for a duplicate with probability at most the
/// filter's rate when it is looked up, at most its rate at capacity (1e-7, the rate only rises
/// as the filter fills): at most 96,000 x 1e-7 = 0.0096 false positives are expected, so
/// `missing <= 1` fails with probability below 0.0096^2 / 2 = 5e-5 for a right implementation.
/// A duplicate printed twice is never allowed: the server's test-and-set tells exactly one run
/// that a key is new.
#[test]
fn two_runs_fed_overlapping_parts_print_each_distinct_record_once() {
    let server = RedisServer::start();
    let url = server.url();
    let input = lines(120_000);
    let records: Vec<&[u8]> = input.split_inclusive(|&b| b == b'\n').collect();
    let (a, b) = (records.len() * 4 / 10, records.len() * 6 / 10);
    let first: Vec<u8> = records[..b].concat();
    let second: Vec<u8> = records[a..].concat();
    let runs: Vec<_> = [(first.clone(), "1"), (second.clone(), "3")]
        .into_iter()
        .map(|(part, threads)| {
            let args = [
                "dedup",
                "--redis",
                &url,
                "--name",
                "overlap",
                "--capacity",
                "1000000",
                "--fpr",
                "1e-7",
                "--threads",
                threads,
                "--no-progress",
            ];
            let mut child = start(&args);
            let mut stdin = child.stdin.take().unwrap();
            let writer = std::thread::spawn(move || {
                let _ = stdin.write_all(&part);
            });
            (child, writer)
        })
        .collect();
    let outs: Vec<Output> = runs
        .into_iter()
        .map(|(child, writer)| {
            let out = child.wait_with_output().unwrap();
            writer.join().unwrap();
            assert!(out.status.success(), "{}", text(&out.stderr));
            out
        })
        .collect();
    let distinct = first_occurrences(&input);
    let want = counts([&distinct[..]]);
    let got = counts(outs.iter().map(|o| &o.stdout[..]));
    let twice: Vec<String> = got
        .iter()
        .filter(|&(_, &n)| n > 1)
        .map(|(line, _)| text(line))
        .collect();
    assert!(
        twice.is_empty(),
        "{} records printed by both runs, such as {:?}",
        twice.len(),
        &twice[..twice.len().min(5)]
    );
    assert!(got.keys().all(|line| want.contains_key(line)));
    let missing = want.len() - got.len();
    assert!(
        missing <= 1,
        "{missing} distinct records printed by neither run"
    );
    // Each run prints its part's first occurrences, in order, less those the other printed.
    assert_in_input_order(0, &outs[0].stdout, &first_occurrences(&first), &first);
    assert_in_input_order(1, &outs[1].stdout, &first_occurrences(&second), &second);
}

/// A run on a name that holds keys drops every record whose key is there, and prints the new
/// ones; another name is another filter.
#[test]
fn a_second_run_on_the_same_name_drops_everything_already_seen() {
    let server = RedisServer::start();
    let url = server.url();
    let input = lines(20_000);
    let records: Vec<&[u8]> = input.split_inclusive(|&b| b == b'\n').collect();
    let old: Vec<u8> = records[..10_000].concat();
    let args = ["--capacity", "100000", "--fpr", "1e-7"];
    let out = dedup(&url, "days", &args, &old);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), text(&first_occurrences(&old)));
    // The whole stream again: only the first occurrences of the keys the first run did not see.
    let out = dedup(&url, "days", &args, &input);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let seen_before = counts([&old[..]]);
    let want: Vec<u8> = first_occurrences(&input)
        .split_inclusive(|&b| b == b'\n')
        .filter(|line| !seen_before.contains_key(line))
        .flatten()
        .copied()
        .collect();
    assert!(!want.is_empty());
    assert_eq!(text(&out.stdout), text(&want));
    // And a third time, nothing.
    let out = dedup(&url, "days", &args, &input);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "");
    // Another name shares nothing with the first.
    let out = dedup(&url, "other", &args, &old);
    assert_eq!(text(&out.stdout), text(&first_occurrences(&old)));
}

/// `--redis` without `--name`, `--name` without `--redis`, and `--redis` with the local or
/// unshareable structures are refused before anything is opened: the messages name the flags,
/// no server is asked (the URL leads nowhere), and no `--state` file or lock is made.
#[test]
fn redis_without_name_or_with_state_is_refused() {
    let dir = common::scratch("redis-refused");
    let nowhere = format!("unix://{}", dir.join("no.sock").display());
    let state = dir.join("st");
    let state = state.to_str().unwrap();
    let refused = |args: &[&str], says: &str| {
        let out = seen(args, b"a\n");
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!err.contains("cannot reach"), "{args:?}: {err}");
        assert!(out.stdout.is_empty());
    };
    refused(&["dedup", "--redis", &nowhere], "--name <NAME>");
    refused(&["dedup", "--name", "n"], "--redis <URL>");
    refused(
        &[
            "dedup", "--redis", &nowhere, "--name", "n", "--state", state,
        ],
        "--redis keeps the state on the server, for every run that names it: --state is the \
         local option",
    );
    assert!(
        std::fs::read_dir(&dir).unwrap().next().is_none(),
        "no file made"
    );
    refused(
        &["dedup", "--redis", &nowhere, "--name", "n", "--exact"],
        "--exact",
    );
    refused(
        &["dedup", "--redis", &nowhere, "--name", "n", "--grow"],
        "cannot grow",
    );
    refused(
        &[
            "dedup",
            "--redis",
            &nowhere,
            "--name",
            "n",
            "--remember",
            "10",
        ],
        "--remember",
    );
    // A window whose --fpr the layout does not reach: the local --window's message.
    refused(
        &[
            "dedup", "--redis", &nowhere, "--name", "n", "--window", "62h", "--period", "1h",
            "--fpr", "1e-6",
        ],
        "cannot build the filter: --fpr 1e-6 is below the lowest rate it reaches",
    );
}

/// A server that does not answer (no socket; a loopback port nobody listens on) is one line
/// naming the URL, status 2, nothing printed.
#[test]
fn an_unreachable_server_is_a_clear_error() {
    let dir = common::scratch("redis-unreachable");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    for url in [
        format!("unix://{}", dir.join("no.sock").display()),
        format!("redis://127.0.0.1:{port}"),
    ] {
        let out = dedup(&url, "n", &[], b"a\nb\n");
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(
            err.starts_with(&format!("seen: --redis {url}: cannot reach the server: ")),
            "{err}"
        );
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(out.stdout.is_empty());
    }
}

/// A server that stops answering (its process stopped, `kill -STOP`: a hung host, whose kernel
/// still accepts connections and takes what is sent) ends a run with one line and status 2,
/// within about the timeout, nothing printed after the records decided: whether it stopped
/// before the run (the open fails) or during it (an insert fails). The timeout is the
/// library's default, 30 s (the command has no flag for it); the bound is one timeout and
/// slack (the open used to take two timeouts, 62 s; a run stopped during an insert, minutes).
/// Both runs at once, each waiting out its timeout.
#[test]
fn a_stalled_server_ends_the_run_with_one_line_within_the_timeout() {
    let bound = seen_redis::DEFAULT_TIMEOUT + Duration::from_secs(20);
    let mut before = RedisServer::start();
    let mut during = RedisServer::start();
    before.stop();
    let started = Instant::now();
    let mut opening = start(&[
        "dedup",
        "--redis",
        &before.url(),
        "--name",
        "stalled",
        "--no-progress",
    ]);
    drop(opening.stdin.take());
    let opening = std::thread::spawn(move || {
        let out = wait_within(opening, bound, "a run on a stopped server");
        (out, started.elapsed())
    });
    let mut running = start(&[
        "dedup",
        "--redis",
        &during.url(),
        "--name",
        "stalled",
        "--capacity",
        "100000",
        "--threads",
        "3",
        "--no-progress",
    ]);
    let mut stdin = running.stdin.take().unwrap();
    let decided: Vec<u8> = (0..1000)
        .flat_map(|i| format!("a-{i}\n").into_bytes())
        .collect();
    stdin.write_all(&decided).unwrap();
    stdin.flush().unwrap();
    let mut out = BufReader::new(running.stdout.take().unwrap());
    let mut got = Vec::new();
    for _ in 0..1000 {
        out.read_until(b'\n', &mut got).unwrap();
    }
    assert_eq!(text(&got), text(&decided));
    during.stop();
    let stopped = Instant::now();
    let after: Vec<u8> = (0..1000)
        .flat_map(|i| format!("b-{i}\n").into_bytes())
        .collect();
    // The rest of the output is read by a thread: the run ends (or is killed) within the
    // bound, and the read then ends too.
    let rest = std::thread::spawn(move || {
        let mut rest = Vec::new();
        let _ = std::io::Read::read_to_end(&mut out, &mut rest);
        rest
    });
    let _ = stdin.write_all(&after);
    drop(stdin);
    let ran = wait_within(running, bound, "a run whose server stopped");
    let took = stopped.elapsed();
    let rest = rest.join().unwrap();
    let err = text(&ran.stderr);
    assert_eq!(ran.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("seen: standard input, line 1001: the shared filter stalled on unix://"),
        "{err}"
    );
    assert!(err.contains("no reply within 30s"), "{err}");
    assert_eq!(text(&rest), "", "nothing after the failure");
    assert!(
        took < bound,
        "the run ended {took:?} after the server stopped"
    );
    let (opened, took) = opening.join().unwrap();
    let err = text(&opened.stderr);
    assert_eq!(opened.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with(&format!(
            "seen: --redis {}: cannot reach the server: ",
            before.url()
        )),
        "{err}"
    );
    assert!(opened.stdout.is_empty());
    assert!(
        took < bound,
        "the run on a stopped server ended after {took:?}"
    );
}

/// A name created with one size, opened with another: the library's `Mismatch`, naming the
/// field and both values, and nothing printed; the filter is left as it was.
#[test]
fn another_capacity_on_an_existing_name_is_the_librarys_mismatch() {
    let server = RedisServer::start();
    let url = server.url();
    let out = dedup(&url, "sized", &["--capacity", "1000"], b"a\n");
    assert_eq!(text(&out.stdout), "a\n");
    let out = dedup(&url, "sized", &["--capacity", "2000"], b"a\nb\n");
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("sized: the server's structure has capacity 1000, not 2000"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
    let out = dedup(
        &url,
        "sized",
        &["--capacity", "1000", "--fpr", "0.01"],
        b"a\n",
    );
    assert!(
        text(&out.stderr).contains("has fpr 0.0001, not 0.01"),
        "{}",
        text(&out.stderr)
    );
    let out = dedup(&url, "sized", &["--capacity", "1000"], b"a\nb\n");
    assert_eq!(text(&out.stdout), "b\n");
}

/// The server killed mid-run: the run writes every record decided before, then stops at the
/// first record the server did not decide, naming the filter's key and that line, saying that
/// the records from there on were not written; status 2. On one thread and on several.
#[test]
fn a_server_gone_mid_run_stops_the_run_after_the_records_decided() {
    for threads in ["1", "3"] {
        let mut server = RedisServer::start();
        let url = server.url();
        let mut child = start(&[
            "dedup",
            "--redis",
            &url,
            "--name",
            "gone",
            "--capacity",
            "100000",
            "--threads",
            threads,
            "--no-progress",
        ]);
        let mut stdin = child.stdin.take().unwrap();
        let before: Vec<u8> = (0..1000)
            .flat_map(|i| format!("a-{i}\n").into_bytes())
            .collect();
        stdin.write_all(&before).unwrap();
        stdin.flush().unwrap();
        // Every record before is decided and written once its output has come.
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut got = Vec::new();
        for _ in 0..1000 {
            out.read_until(b'\n', &mut got).unwrap();
        }
        assert_eq!(text(&got), text(&before));
        server.kill();
        let after: Vec<u8> = (0..1000)
            .flat_map(|i| format!("b-{i}\n").into_bytes())
            .collect();
        let _ = stdin.write_all(&after);
        drop(stdin);
        let mut rest = Vec::new();
        std::io::Read::read_to_end(&mut out, &mut rest).unwrap();
        let err = stderr_of(&mut child);
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(2), "threads {threads}: {err}");
        assert_eq!(
            text(&rest),
            "",
            "threads {threads}: nothing after the failure"
        );
        assert!(
            err.starts_with("seen: standard input, line 1001: the shared filter gone on unix://"),
            "threads {threads}: {err}"
        );
        assert!(
            err.contains("seen:{gone:0}:bits"),
            "threads {threads}: {err}"
        );
        assert!(
            err.contains("it and every line after it were not written"),
            "threads {threads}: {err}"
        );
    }
}

/// A shared filter cannot grow: past its capacity, counting the keys of every run (measured on
/// the server), a run warns once; a later run that adds a key to the overfull filter warns at
/// once, though it added only a few.
#[test]
fn a_shared_filter_past_its_capacity_warns_counting_every_run() {
    let server = RedisServer::start();
    let url = server.url();
    let distinct = |from: usize, n: usize| -> Vec<u8> {
        (from..from + n)
            .flat_map(|i| format!("k-{i}\n").into_bytes())
            .collect()
    };
    let args = ["--capacity", "1000", "--fpr", "1e-3"];
    let out = dedup(&url, "small", &args, &distinct(0, 500));
    assert!(
        !text(&out.stderr).contains("warning"),
        "{}",
        text(&out.stderr)
    );
    let out = dedup(&url, "small", &args, &distinct(500, 1000));
    let err = text(&out.stderr);
    assert_eq!(
        err.matches("seen: warning: more than the 1000 distinct keys the shared filter small")
            .count(),
        1,
        "{err}"
    );
    assert!(err.contains("a shared filter cannot grow"), "{err}");
    // 50 keys more (about 1.5 times capacity, at a rate of a few percent: most are new).
    let out = dedup(&url, "small", &args, &distinct(1500, 50));
    assert!(!out.stdout.is_empty());
    let err = text(&out.stderr);
    assert!(err.contains("seen: warning: more than the 1000"), "{err}");
    // --stats names the filter and its keys, all runs together.
    let out = dedup(&url, "small", &[&args[..], &["--stats"]].concat(), b"x\n");
    let err = text(&out.stderr);
    assert!(
        err.contains("shared Bloom filter small on unix://"),
        "{err}"
    );
    let about: u64 = err
        .split("capacity 1000, fpr 0.001, about ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{err}"));
    // 1,551 keys, estimated from the bits set: within a few percent.
    assert!((1450..1650).contains(&about), "{err}");
}

/// Several `--redis` are the nodes of one Redis Cluster: two runs share one filter there.
#[test]
fn runs_on_a_cluster_share_one_filter() {
    let cluster = RedisCluster::start(3);
    let urls = cluster.urls();
    let mut args = vec![
        "dedup",
        "--no-progress",
        "--name",
        "clustered",
        "--capacity",
        "10000",
    ];
    for url in &urls[..2] {
        args.extend(["--redis", url.as_str()]);
    }
    let input = lines(5000);
    let out = seen(&args, &input);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), text(&first_occurrences(&input)));
    let out = seen(&args, &input);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "");
    // One node alone is not the cluster: the run says so, unless the keys are on that node.
    let out = dedup(&urls[2], "clustered", &["--capacity", "10000"], b"x\n");
    if !out.status.success() {
        assert!(
            text(&out.stderr).contains("pass --redis for two or more of its nodes"),
            "{}",
            text(&out.stderr)
        );
    }
}

/// Runs `seen dedup --redis URL --name NAME` with `more` arguments at once, one a part of
/// `parts` (`(input, threads)`), and returns their outputs (each checked successful).
fn at_once(url: &str, name: &str, more: &[&str], parts: Vec<(Vec<u8>, &str)>) -> Vec<Output> {
    let runs: Vec<_> = parts
        .into_iter()
        .map(|(part, threads)| {
            let mut args = vec![
                "dedup",
                "--redis",
                url,
                "--name",
                name,
                "--threads",
                threads,
                "--no-progress",
            ];
            args.extend_from_slice(more);
            let mut child = start(&args);
            let mut stdin = child.stdin.take().unwrap();
            let writer = std::thread::spawn(move || {
                let _ = stdin.write_all(&part);
            });
            (child, writer)
        })
        .collect();
    runs.into_iter()
        .map(|(child, writer)| {
            let out = child.wait_with_output().unwrap();
            writer.join().unwrap();
            assert!(out.status.success(), "{}", text(&out.stderr));
            out
        })
        .collect()
}

/// The shared window's keys on the server: `seen:{NAME:S}:gG`, every shard and generation.
fn generation_keys(server: &RedisServer, name: &str) -> Vec<String> {
    let mut conn = server.client();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("seen:{{{name}:*}}:g*"))
        .query(&mut conn)
        .unwrap();
    // Not the shards' ledgers (`:gens`).
    keys.into_iter().filter(|k| !k.ends_with(":gens")).collect()
}

/// Deletes generation keys as their expiry would: the end of each one's life in its shard's
/// ledger (`seen:{NAME:S}:gens`, field `G`) is moved to the past too, so that the filter
/// finds them expired, not lost.
fn expire(conn: &mut redis::Connection, keys: &[String]) {
    for key in keys {
        let (shard, generation) = key.rsplit_once(":g").unwrap();
        let _: i64 = redis::cmd("HSET")
            .arg(format!("{shard}:gens"))
            .arg(generation)
            .arg(1)
            .query(conn)
            .unwrap();
    }
    let _: i64 = redis::cmd("DEL").arg(keys).query(conn).unwrap();
}

/// `--window` with `--redis`: two runs fed overlapping parts of one stream at once (one on one
/// thread, one on three) print between them each distinct record exactly once, each in its
/// input's order; a third run over the whole stream prints nothing (the window is on the
/// server, the server's clock its time).
///
/// False positives: the shared generations hold the local window's bits (word layout, the
/// same sizing), so the local filter of the same flags, holding the stream's distinct keys,
/// estimates the rate of a lookup; a lookup reads at most 4 generations, 3 of them empty (or,
/// across an hour's end, 2 hold the keys between them). The test checks that the distinct keys
/// times twice that rate is below 0.01, so `missing <= 1` fails with probability below 5e-5.
#[test]
fn windowed_runs_share_one_window_on_the_server() {
    let server = RedisServer::start();
    let url = server.url();
    let window = ["--window", "2h", "--period", "1h", "--capacity", "1000000"];
    let input = lines(40_000);
    let distinct = first_occurrences(&input);
    let local = seen::WindowedBloomFilter::builder(1_000_000)
        .fpr(1e-4)
        .periods(2)
        .build()
        .unwrap();
    let hasher = seen::hash::StableHasher::default();
    for line in distinct.split_inclusive(|&b| b == b'\n') {
        use seen::hash::ItemHasher;
        local.insert_hash(hasher.hash_bytes(&line[..line.len() - 1]));
    }
    let expected =
        distinct.iter().filter(|&&b| b == b'\n').count() as f64 * 2.0 * local.info().estimated_fpr;
    assert!(expected < 0.01, "{expected}");

    let records: Vec<&[u8]> = input.split_inclusive(|&b| b == b'\n').collect();
    let (a, b) = (records.len() * 4 / 10, records.len() * 6 / 10);
    let first: Vec<u8> = records[..b].concat();
    let second: Vec<u8> = records[a..].concat();
    let outs = at_once(
        &url,
        "window",
        &window,
        vec![(first.clone(), "1"), (second.clone(), "3")],
    );
    let want = counts([&distinct[..]]);
    let got = counts(outs.iter().map(|o| &o.stdout[..]));
    let twice = got.values().filter(|&&n| n > 1).count();
    assert_eq!(twice, 0, "records printed by both runs");
    assert!(got.keys().all(|line| want.contains_key(line)));
    let missing = want.len() - got.len();
    assert!(
        missing <= 1,
        "{missing} distinct records printed by neither run"
    );
    assert_in_input_order(0, &outs[0].stdout, &first_occurrences(&first), &first);
    assert_in_input_order(1, &outs[1].stdout, &first_occurrences(&second), &second);
    // The keys are generations that expire on their own: within the window and a period and
    // a spare one (the library's expiry), never without one.
    let keys = generation_keys(&server, "window");
    assert!(!keys.is_empty());
    let mut conn = server.client();
    for key in &keys {
        let ttl: i64 = redis::cmd("PTTL").arg(key).query(&mut conn).unwrap();
        assert!((1..=4 * 3_600_000).contains(&ttl), "{key}: PTTL {ttl}");
    }
    let out = dedup(&url, "window", &window, &input);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "");
    // A generation deleted before its time (an eviction, a FLUSHALL, a DEL) is lost, not
    // empty: the run says so and prints nothing.
    let _: i64 = redis::cmd("DEL").arg(&keys[0]).query(&mut conn).unwrap();
    let out = dedup(&url, "window", &window, &input);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("lost") && err.contains(&keys[0]), "{err}");
    assert_eq!(text(&out.stdout), "");
    // The window forgets a generation when its key expires (the test deletes the keys and
    // moves their ends to the past, as the clock would): every key is new again.
    expire(&mut conn, &keys);
    let out = dedup(&url, "window", &window, &input);
    assert_eq!(text(&out.stdout), text(&distinct));
}

/// Records with their own times (`--time-field`) over several periods, with repeats within
/// the window, just past it and far past it, and a record older than one before it: the
/// shared run prints exactly what the local `--window` run prints (the same keys, hashes and
/// bits, and a clock that follows the records the same way), which is written out for the
/// hand-made part. A second shared run over the last hour prints nothing: the window's
/// generations are on the server, by the records' periods, and only those (the older ones are
/// deleted as the records' clock passes them). Two runs on overlapping parts share it.
#[test]
fn windowed_runs_on_the_records_times_match_the_local_window() {
    let server = RedisServer::start();
    let url = server.url();
    let flags = [
        "-f",
        "1",
        "--time-field",
        "2",
        "--window",
        "2h",
        "--period",
        "1h",
    ];
    let hour = 3600u64;
    let t0 = 1_700_000_000 / hour * hour;
    let mut input = Vec::new();
    for (key, at) in [
        ("a", t0),
        ("b", t0 + 10),
        ("a", t0 + hour),          // within the window: dropped
        ("b", t0 + 2 * hour + 10), // within 2h of b's (kept to the period's end): dropped
        ("a", t0 + 4 * hour),      // more than WINDOW + PERIOD later: printed
        ("c", t0 + 4 * hour - 5),  // late: counted at the newer time, printed
        ("c", t0 + 4 * hour + 1),  // dropped
    ] {
        writeln!(input, "{key}\t{at}").unwrap();
    }
    let want: Vec<u8> = [0, 1, 4, 5]
        .iter()
        .flat_map(|&i| input.split_inclusive(|&b| b == b'\n').nth(i).unwrap())
        .copied()
        .collect();
    // And a longer stream: 6,000 records over 10 hours, keys repeating at random distances.
    let mut x = 0x2545_f491_4f6c_dd1du64;
    for i in 0..6000u64 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        writeln!(input, "k{}\t{}", x % 1500, t0 + 5 * hour + i * 6).unwrap();
    }
    let local = seen(&[&["dedup", "--no-progress"][..], &flags].concat(), &input);
    assert!(local.status.success(), "{}", text(&local.stderr));
    assert!(local.stdout.starts_with(&want), "{}", text(&local.stdout));
    let shared = dedup(&url, "times", &flags, &input);
    assert!(shared.status.success(), "{}", text(&shared.stderr));
    assert_eq!(text(&shared.stdout), text(&local.stdout));
    assert!(
        text(&shared.stderr).is_empty(),
        "no warning: {}",
        text(&shared.stderr)
    );
    // The window the records' clock holds is on the server: a second run over the stream's
    // last hour prints nothing. The generations the clock has left behind are not: they were
    // deleted as it passed them (records of the past), not kept to their expiry in real time.
    let records: Vec<&[u8]> = input.split_inclusive(|&b| b == b'\n').collect();
    let last_hour: Vec<u8> = records[records.len() - 600..].concat();
    let again = dedup(&url, "times", &flags, &last_hour);
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert_eq!(text(&again.stdout), "");
    let generations: Vec<String> = redis::cmd("KEYS")
        .arg("seen:{times:*}:g[0-9]*")
        .query(&mut server.client())
        .unwrap();
    let shards: HashSet<&str> = generations
        .iter()
        .map(|k| k.split_once('}').unwrap().0)
        .collect();
    // Per shard the window's 3 generations and the one before (for a client one behind), of
    // the 16 hours the records span.
    assert!(
        !shards.is_empty() && generations.len() <= 4 * shards.len(),
        "{generations:?}"
    );
    // Two runs one after the other on overlapping parts of the stream, the overlap (100
    // records, 10 minutes) shorter than a period, so their clocks agree within one: together
    // they print exactly what one local run prints (the second drops what the first printed).
    let cut = records.len() * 6 / 10;
    let first: Vec<u8> = records[..cut].concat();
    let second: Vec<u8> = records[cut - 100..].concat();
    let one = dedup(&url, "parts", &flags, &first);
    let two = dedup(&url, "parts", &flags, &second);
    assert!(two.status.success(), "{}", text(&two.stderr));
    assert_eq!(
        text(&[one.stdout, two.stdout].concat()),
        text(&local.stdout)
    );
}

/// A name created with one window, opened with another --window, another --period, or as a
/// plain shared Bloom filter (and the other way round): the library's `Mismatch` naming the
/// field, a hint in the flags' terms, nothing printed, status 2.
#[test]
fn another_window_or_period_on_an_existing_name_is_the_librarys_mismatch() {
    let server = RedisServer::start();
    let url = server.url();
    let window =
        |w: &'static str, p: &'static str| ["--window", w, "--period", p, "--capacity", "1000"];
    let out = dedup(&url, "w", &window("2h", "1h"), b"a\n");
    assert_eq!(text(&out.stdout), "a\n", "{}", text(&out.stderr));
    let refused = |more: &[&str], says: &[&str]| {
        let out = dedup(&url, "w", more, b"a\nb\n");
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{more:?}: {err}");
        for s in says {
            assert!(err.contains(s), "{more:?}: {err}");
        }
        assert!(out.stdout.is_empty());
    };
    refused(
        &window("3h", "1h"),
        &[
            "w: the server's structure has periods 2, not 3",
            "its --window is 2 times its --period, not 3",
        ],
    );
    refused(
        &window("4h", "2h"),
        &[
            "w: the server's structure has period_ns 3600000000000, not 7200000000000",
            "its --period is 1h, not 2h",
        ],
    );
    refused(
        &["--window", "2h", "--period", "1h", "--capacity", "2000"],
        &["has capacity 1000, not 2000"],
    );
    refused(
        &[],
        &[
            "has kind window, not bloom",
            "the name holds a shared windowed filter",
        ],
    );
    let out = dedup(&url, "b", &["--capacity", "1000"], b"a\n");
    assert!(out.status.success());
    let out = dedup(&url, "b", &window("2h", "1h"), b"a\n");
    let err = text(&out.stderr);
    assert!(err.contains("has kind bloom, not window"), "{err}");
    assert!(err.contains("drop --window and --period"), "{err}");
    // The filter was left as it was.
    let out = dedup(&url, "w", &window("2h", "1h"), b"a\nb\n");
    assert_eq!(text(&out.stdout), "b\n");
}

/// The overfill warning of a shared window: more than --capacity new keys in one period, all
/// runs together (measured on the server), warns; as many in the next period do not (the count
/// is per period). The records' times place them, so no period ends during the test.
#[test]
fn a_shared_window_past_its_capacity_in_one_period_warns_counting_every_run() {
    let server = RedisServer::start();
    let url = server.url();
    let flags = [
        "-f",
        "1",
        "--time-field",
        "2",
        "--window",
        "2h",
        "--period",
        "1h",
        "--capacity",
        "1000",
        "--fpr",
        "1e-3",
    ];
    let t0 = 1_700_000_000u64 / 3600 * 3600;
    let keys = |from: usize, at: u64| -> Vec<u8> {
        (from..from + 600)
            .flat_map(|i| format!("k-{i}\t{at}\n").into_bytes())
            .collect()
    };
    let out = dedup(&url, "full", &flags, &keys(0, t0));
    assert!(text(&out.stderr).is_empty(), "{}", text(&out.stderr));
    let out = dedup(&url, "full", &flags, &keys(600, t0 + 60));
    let err = text(&out.stderr);
    assert_eq!(
        err.matches(
            "seen: warning: more than --capacity 1000 new keys in one --period 1h in the shared \
             filter full (all runs together"
        )
        .count(),
        1,
        "{err}"
    );
    // The next period: 600 new keys, 1,200 in the window, none over.
    let out = dedup(&url, "full", &flags, &keys(1200, t0 + 3600));
    assert!(text(&out.stderr).is_empty(), "{}", text(&out.stderr));
    let out = dedup(
        &url,
        "full",
        &[&flags[..], &["--stats"]].concat(),
        &keys(1200, t0 + 3601),
    );
    let err = text(&out.stderr);
    assert!(
        err.contains("shared windowed filter full on unix://")
            && err.contains("--window 2h --period 1h (3 generations of 1 key each")
            && err.contains("time: the records'"),
        "{err}"
    );
    assert_eq!(text(&out.stdout), "");
}

/// A name that holds another kind of structure (a shared map, here its description) is
/// refused naming both kinds, without the hint about --capacity and --fpr (which cannot help);
/// a URL of another scheme is refused as unreachable, in one line. Nothing is written.
#[test]
fn a_name_of_another_kind_or_an_odd_url_is_refused_plainly() {
    let server = RedisServer::start();
    let url = server.url();
    let _: () = redis::cmd("SET")
        .arg("seen:{inbox}:meta")
        .arg("seen-redis/3\nkind=map\nid=0000000000000001\nstate=ready\nbuckets=1000\nshards=1\nhasher=x\nseed=0\n")
        .query(&mut server.client())
        .unwrap();
    let out = dedup(&url, "inbox", &[], b"a\n");
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("has kind map, not bloom"), "{err}");
    assert!(!err.contains("--capacity"), "{err}");
    assert!(err.contains("another --name"), "{err}");
    assert!(out.stdout.is_empty());
    for odd in ["http://127.0.0.1:1", "redis://", "not a url"] {
        let out = dedup(odd, "n", &[], b"a\n");
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{odd}: {err}");
        assert!(err.starts_with(&format!("seen: --redis {odd}")), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(out.stdout.is_empty());
    }
}
