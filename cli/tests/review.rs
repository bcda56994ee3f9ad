//! Findings of a hostile review of `seen dedup` (review14): each test is a reproduction.
#![cfg(unix)]

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

mod common;

use common::{scratch, seen, stderr_of};

/// Starts `seen` with `args` (input from a file or an open pipe), its output lines collected
/// by a thread: the receiver gets each line, then `None` at the end.
fn start(args: &[&str]) -> (Child, mpsc::Receiver<Option<String>>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_seen"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let _ = tx.send(Some(line.unwrap()));
        }
        let _ = tx.send(None);
    });
    (child, rx)
}

fn collect(rx: &mpsc::Receiver<Option<String>>, into: &mut Vec<String>) {
    while let Ok(Some(line)) = rx.recv_timeout(Duration::from_secs(60)) {
        into.push(line);
    }
}

/// Sends `signal` to `pids` with one `kill` command: `kill -INT 7 7` signals twice within
/// microseconds, as GNU `timeout` does when it forwards a signal (to the child, then to its
/// process group).
fn kill(signal: &str, pids: &[u32]) {
    let mut cmd = Command::new("kill");
    cmd.arg(format!("-{signal}"));
    for pid in pids {
        cmd.arg(pid.to_string());
    }
    assert!(cmd.status().unwrap().success());
}

/// Finding 1: with `--threads 1`, SIGINT saves the keys of a chunk that was decided (inserted
/// into the filter) but never written: the next run with the same state never prints those
/// records. Each attempt interrupts a run over distinct lines; the two runs together must print
/// every line exactly once.
#[test]
fn one_thread_interrupt_saves_only_the_records_written() {
    let dir = scratch("one-thread-sigint");
    let input = dir.join("input");
    let lines = 2_000_000;
    let mut text = Vec::new();
    for i in 0..lines {
        writeln!(text, "line-{i}").unwrap();
    }
    std::fs::write(&input, &text).unwrap();
    let state = dir.join("state");
    let args = [
        "dedup",
        "--threads",
        "1",
        "--state",
        state.to_str().unwrap(),
        "--capacity",
        "3000000",
        "--fpr",
        "1e-9",
        input.to_str().unwrap(),
    ];
    for attempt in 0..3 {
        let _ = std::fs::remove_file(&state);
        let (mut child, rx) = start(&args);
        let mut first = Vec::new();
        // Running: its first output has arrived.
        match rx.recv_timeout(Duration::from_secs(60)).unwrap() {
            Some(line) => first.push(line),
            None => panic!("no output"),
        }
        std::thread::sleep(Duration::from_millis(5 * attempt));
        kill("INT", &[child.id()]);
        collect(&rx, &mut first);
        let status = child.wait().unwrap();
        let err = stderr_of(&mut child);
        if status.success() {
            // It finished before the signal: nothing to check.
            continue;
        }
        assert_eq!(status.code(), Some(130), "{err}");
        let out = seen(&args, b"");
        assert!(out.status.success());
        let second = String::from_utf8(out.stdout).unwrap();
        let printed = first.len() + second.lines().count();
        let distinct: HashSet<&str> = first
            .iter()
            .map(String::as_str)
            .chain(second.lines())
            .collect();
        assert_eq!(
            (printed, distinct.len()),
            (lines, lines),
            "attempt {attempt}: the interrupted run printed {} lines ({err:?}), the next {}: \
             every line once",
            first.len(),
            second.lines().count()
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Finding 2: one signal delivered twice within microseconds (GNU `timeout` forwarding SIGINT
/// or SIGTERM sends it to the child and to its process group) counts as the "second signal"
/// and exits at once without saving the state. It should be taken as one signal.
#[test]
fn a_signal_delivered_twice_at_once_still_saves_the_state() {
    let dir = scratch("double-signal");
    let state = dir.join("state");
    for (attempt, threads) in ["1", "2", "1", "2", "4"].into_iter().enumerate() {
        let _ = std::fs::remove_file(&state);
        let (mut child, rx) = start(&[
            "dedup",
            "--threads",
            threads,
            "--state",
            state.to_str().unwrap(),
            "--capacity",
            "1000",
        ]);
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"a\nb\n").unwrap();
        stdin.flush().unwrap();
        let mut got = Vec::new();
        for _ in 0..2 {
            got.push(rx.recv_timeout(Duration::from_secs(60)).unwrap().unwrap());
        }
        assert_eq!(got, ["a", "b"]);
        kill("INT", &[child.id(), child.id()]);
        let status = child.wait().unwrap();
        let err = stderr_of(&mut child);
        drop(stdin);
        assert_eq!(status.code(), Some(130), "attempt {attempt}: {err}");
        assert!(
            err.contains("interrupted after 2 records") && state.exists(),
            "attempt {attempt} (--threads {threads}): the state was not saved: {err:?}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A second signal well after the first still exits at once (here the first cannot finish: the
/// output is blocked, nobody reads it).
#[test]
fn a_second_signal_later_exits_at_once() {
    for threads in ["1", "2"] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_seen"))
            .args(["dedup", "--threads", threads, "--capacity", "1000000"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let writer = std::thread::spawn(move || {
            let mut text = Vec::new();
            for i in 0..200_000 {
                writeln!(text, "line-{i}").unwrap();
            }
            let _ = stdin.write_all(&text);
            // Kept open: only the signals end the run.
            std::thread::sleep(Duration::from_secs(10));
        });
        std::thread::sleep(Duration::from_millis(500));
        kill("INT", &[child.id()]);
        std::thread::sleep(Duration::from_millis(500));
        assert!(child.try_wait().unwrap().is_none(), "blocked on its output");
        kill("INT", &[child.id()]);
        let started = Instant::now();
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(130), "--threads {threads}");
        assert!(started.elapsed() < Duration::from_secs(5));
        drop(child.stdout.take());
        drop(writer);
    }
}

/// Finding 3: a long line arriving through a pipe (64 KiB reads) is searched for its end from
/// its start after every read: quadratic, about 15 s for a 96 MiB line (0.2 s from a file).
#[test]
fn a_huge_line_from_a_pipe_is_read_in_linear_time() {
    let line_len = 96 << 20;
    let mut child = Command::new(env!("CARGO_BIN_EXE_seen"))
        .args(["dedup", "--exact", "--threads", "1"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        let block = vec![b'x'; 1 << 16];
        for _ in 0..line_len / block.len() {
            if stdin.write_all(&block).is_err() {
                return;
            }
        }
        let _ = stdin.write_all(b"\nshort\n");
    });
    let mut stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut out = Vec::new();
        stdout.read_to_end(&mut out).unwrap();
        let _ = tx.send(out.len());
    });
    let got = rx.recv_timeout(Duration::from_secs(6));
    if got.is_err() {
        let _ = child.kill();
    }
    let _ = child.wait();
    let _ = writer.join();
    assert_eq!(
        got,
        Ok(line_len + 1 + 6),
        "a 96 MiB line through a pipe took more than 6 s"
    );
}

/// Finding 4: `--threads N` does not print what `--threads 1` prints with `--remember` (the
/// overwrite map's buckets are shared by the shards, which run at different speeds), though
/// `--threads` says "the output is the same for every count".
#[test]
fn remember_prints_the_same_for_every_thread_count() {
    let input = seen(&["sample", "200000"], b"").stdout;
    let one = seen(&["dedup", "--remember", "1000", "--threads", "1"], &input);
    assert!(one.status.success());
    for threads in ["2", "4"] {
        let many = seen(
            &["dedup", "--remember", "1000", "--threads", threads],
            &input,
        );
        assert!(many.status.success());
        assert!(
            one.stdout == many.stdout,
            "--remember 1000: --threads {threads} printed {} lines, --threads 1 {}",
            many.stdout.split(|&b| b == b'\n').count(),
            one.stdout.split(|&b| b == b'\n').count()
        );
    }
}

/// Finding 5: JSON numbers are keyed by their `f64` value: two distinct integer ids beyond
/// 2^64 are one key, and the second record is dropped.
#[test]
fn distinct_big_json_numbers_are_distinct_keys() {
    let input = b"{\"id\":12345678901234567890123}\n{\"id\":12345678901234567890124}\n";
    let out = seen(&["dedup", "--exact", "--json-key", "id"], input);
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(input)
    );
}

/// Finding 6: an RFC 3339 time whose local date is 1969 but whose instant is after the epoch
/// (`1969-12-31T23:00:00-02:00` is 01:00 UTC on 1 January 1970) is refused as "not a time".
#[test]
fn a_1969_local_date_after_the_epoch_is_a_time() {
    let out = seen(
        &[
            "dedup",
            "--window",
            "1d",
            "--period",
            "1d",
            "-f",
            "1",
            "--time-field",
            "2",
        ],
        b"a\t1969-12-31T23:00:00-02:00\na\t1970-01-01T01:00:00Z\n",
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(out.stdout, b"a\t1969-12-31T23:00:00-02:00\n");
}

/// Finding 7: `--state` in a directory that does not exist is found out after the whole input
/// was printed (exit status 2, nothing saved: the next run prints it all again). It should
/// fail before reading.
#[test]
fn a_state_in_a_missing_directory_fails_before_printing() {
    let out = seen(
        &[
            "dedup",
            "--state",
            "/nonexistent-seen-review/dir/state",
            "--capacity",
            "100",
        ],
        b"a\nb\n",
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        out.stdout.is_empty(),
        "printed {:?} before failing",
        out.stdout
    );
    assert!(
        err.starts_with("seen: ") && err.lines().count() == 1,
        "{err}"
    );
    assert!(err.contains("/nonexistent-seen-review/dir/state"), "{err}");
}

/// Finding 8: `--grow` stops growing after 63 times `--capacity` at the default `--fpr`
/// (6 layers of the word layout), with an error about layouts the command cannot choose.
#[test]
fn grow_keeps_growing_past_63_times_the_capacity() {
    let mut input = Vec::new();
    for i in 0..100_000 {
        writeln!(input, "{i}").unwrap();
    }
    let out = seen(
        &[
            "dedup",
            "--grow",
            "--capacity",
            "1000",
            "--threads",
            "1",
            "--count",
        ],
        &input,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
}

/// Finding 9: at the default `--fpr`, `--window` fails for more than 15 generations
/// (`--window 1d --period 1h`, `--window 63d --period 1d`), with an error about layouts that
/// does not say what to change. The error must name `--fpr` and the smallest one that works.
#[test]
fn a_window_whose_fpr_is_too_low_says_which_fpr_works() {
    for window in [["1d", "1h"], ["62d", "1d"]] {
        let out = seen(
            &["dedup", "--window", window[0], "--period", window[1]],
            b"a\n",
        );
        let err = String::from_utf8_lossy(&out.stderr);
        if out.status.success() {
            continue;
        }
        assert_eq!(out.status.code(), Some(2));
        assert!(
            err.contains("--fpr") && !err.contains("layout"),
            "--window {} --period {}: {err}",
            window[0],
            window[1]
        );
    }
}

/// Finding 10: a `--state` that is a named pipe blocks the run forever (the load waits for a
/// writer); a directory or a device is read as a corrupt state. Anything but a regular file
/// should be refused at once, naming it.
#[test]
fn a_state_that_is_not_a_regular_file_is_refused_at_once() {
    let dir = scratch("fifo-state");
    let fifo = dir.join("state");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_seen"))
        .args(["dedup", "--state", fifo.to_str().unwrap()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() && started.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let exited = child.try_wait().unwrap();
    if exited.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    let err = stderr_of(&mut child);
    assert_eq!(
        exited.and_then(|s| s.code()),
        Some(2),
        "blocked on the FIFO: {err}"
    );
    assert!(err.contains(fifo.to_str().unwrap()), "{err}");
    for path in [dir.to_str().unwrap(), "/dev/null"] {
        let out = seen(&["dedup", "--state", path], b"a\n");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{path}: {err}");
        assert!(
            err.starts_with("seen: ") && err.contains(path),
            "{path}: {err}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Finding 11: a message on a standard error that cannot be written (a closed pipe: `seen
/// dedup ... 2>&1 | head -0`, a closed terminal) panicked (status 101) instead of the status
/// the run ends with; after SIGHUP with such a standard error, a one-thread run kept running.
/// And `seen completions SHELL > /dev/full` panicked in the generator.
#[test]
fn an_unwritable_standard_error_or_output_is_no_panic() {
    let run = |args: &[&str], input: &[u8]| {
        let mut child = Command::new(env!("CARGO_BIN_EXE_seen"))
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Standard error's reader is gone before the command writes to it.
        drop(child.stderr.take());
        let mut stdin = child.stdin.take().unwrap();
        let _ = stdin.write_all(input);
        drop(stdin);
        child.wait().unwrap().code()
    };
    assert_eq!(run(&["dedup", "/nonexistent-seen-review"], b""), Some(2));
    assert_eq!(run(&["dedup", "--stats"], b"a\n"), Some(0));
    let full = std::fs::OpenOptions::new().write(true).open("/dev/full");
    if let Ok(full) = full {
        let out = Command::new(env!("CARGO_BIN_EXE_seen"))
            .args(["completions", "bash"])
            .stdout(full)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

/// Finding 12: a `--json-key` path through an array (`u.0.id`) found nothing in any record:
/// every record had the empty key, and only the first was printed.
#[test]
fn a_json_path_through_an_array_takes_the_element() {
    let input = b"{\"u\":[{\"id\":5}]}\n{\"u\":[{\"id\":6}]}\n{\"u\":[{\"id\":5}]}\n{\"u\":[]}\n";
    let out = seen(
        &[
            "dedup",
            "--exact",
            "--json-key",
            "u.0.id",
            "--missing-key",
            "print",
        ],
        input,
    );
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "{\"u\":[{\"id\":5}]}\n{\"u\":[{\"id\":6}]}\n{\"u\":[]}\n"
    );
}
