//! How a run of `seen dedup` ends when it is cut short: on SIGINT or SIGTERM (the records
//! written and the state saved, a second signal at once), and when its standard error or
//! output cannot be written (no panic).
#![cfg(unix)]

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

mod common;

use common::{feed, scratch, seen, start as start_piped, stderr_of};

/// Starts `seen` with `args` (input from a file or an open pipe), its output lines collected
/// by a thread: the receiver gets each line, then `None` at the end.
fn start(args: &[&str]) -> (Child, mpsc::Receiver<Option<String>>) {
    let mut child = start_piped(args);
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

/// With `--threads 1`, SIGINT saves the keys of the records written and no others (not those of
/// a chunk decided but never written): the interrupted run and the next with the same state
/// together print every line exactly once. Each attempt interrupts a run over distinct lines.
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

/// One signal delivered twice within microseconds (GNU `timeout` forwarding SIGINT or SIGTERM
/// sends it to the child and to its process group) is taken as one signal: the run ends with
/// status 130 and the state saved, not at once without the save.
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
        let mut child = start_piped(&["dedup", "--threads", threads, "--capacity", "1000000"]);
        // A first record of 100 KiB: its output cannot fit a pipe's buffer (64 KiB), so once
        // the run has read it, its writes stay blocked while nobody reads them.
        let mut text = vec![b'x'; 100 << 10];
        text.push(b'\n');
        let long = text.len();
        for i in 0..200_000 {
            writeln!(text, "line-{i}").unwrap();
        }
        // The long record and 65 KiB more: once written, the run has read the whole long
        // record. The input stays open until the run ends: only the signals end it.
        let (writer, read) = feed(child.stdin.take().unwrap(), text, long + (65 << 10));
        read.recv_timeout(Duration::from_secs(120))
            .expect("the run reads its input");
        // And has decided the long record: its first byte is out (on a loaded machine the run
        // can have read the record without having written any of it yet, and a first signal
        // then ends it at once with nothing to finish). One byte read leaves the rest of the
        // 100 KiB blocked on the pipe.
        let mut first = [0u8; 1];
        child
            .stdout
            .as_mut()
            .unwrap()
            .read_exact(&mut first)
            .unwrap();
        assert_eq!(first[0], b'x');
        kill("INT", &[child.id()]);
        // Past the 250 ms in which a second delivery counts as the same signal.
        std::thread::sleep(Duration::from_millis(500));
        assert!(child.try_wait().unwrap().is_none(), "blocked on its output");
        kill("INT", &[child.id()]);
        // Nobody reads the output and the input stays open: only an exit at the second signal
        // ends the run (a run that waited for its output would never end).
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(130), "--threads {threads}");
        drop(child.stdout.take());
        drop(writer.join().unwrap());
    }
}

/// A message on a standard error that cannot be written (a closed pipe: `seen dedup ... 2>&1 |
/// head -0`, a closed terminal) is no panic (status 101): the run ends with its own status.
/// Nor is `seen completions SHELL > /dev/full`: status 2.
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
    assert_eq!(run(&["dedup", "/nonexistent-seen-dir"], b""), Some(2));
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
