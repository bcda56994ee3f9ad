//! How a run of `seen dedup` ends when it is cut short: on SIGINT or SIGTERM (the records
//! written and the state saved, a second signal at once), and when its standard error or
//! output cannot be written (no panic).
#![cfg(unix)]

use std::io::Write;
use std::process::{Command, Stdio};

mod common;

#[cfg(feature = "failpoints")]
use common::{scratch, stderr_of};
#[cfg(feature = "failpoints")]
use std::io::{BufRead, BufReader};

/// `child`'s output lines, collected by a thread: the receiver gets each line, then `None` at
/// the end.
#[cfg(feature = "failpoints")]
fn lines_of(child: &mut std::process::Child) -> std::sync::mpsc::Receiver<Option<String>> {
    use std::sync::mpsc;
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let _ = tx.send(Some(line.unwrap()));
        }
        let _ = tx.send(None);
    });
    rx
}

/// Sends `signal` to `pids` with one `kill` command: `kill -INT 7 7` signals twice within
/// microseconds, as GNU `timeout` does when it forwards a signal (to the child, then to its
/// process group).
#[cfg(feature = "failpoints")]
fn kill(signal: &str, pids: &[u32]) {
    let mut cmd = Command::new("kill");
    cmd.arg(format!("-{signal}"));
    for pid in pids {
        cmd.arg(pid.to_string());
    }
    assert!(cmd.status().unwrap().success());
}

/// With `--threads 1`, SIGINT saves the keys of the records written and no others (not those of
/// a chunk read but never written): the interrupted run and the next with the same state
/// together print every line exactly once. The signal comes while the run is paused after its
/// first chunk, or its third, is written; the run ends before it decides another.
#[cfg(feature = "failpoints")]
#[test]
fn one_thread_interrupt_saves_only_the_records_written() {
    use common::{Failpoints, Stderr, command, seen, signal, wait_with_deadline};
    use std::collections::HashSet;
    let dir = scratch("one-thread-sigint");
    let input = dir.join("input");
    // About 5 MB: 20 chunks of 256 KiB.
    let lines = 400_000;
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
    for chunks in [1, 3] {
        let _ = std::fs::remove_file(&state);
        let mut points = Failpoints::new(&dir, &["chunk", "signal"]);
        let mut run = command(&args);
        points.apply(&mut run);
        let mut child = run.spawn().unwrap();
        let mut err = Stderr::of(&mut child);
        let stdout = child.stdout.take().unwrap();
        let output = std::thread::spawn(move || {
            BufReader::new(stdout)
                .lines()
                .map(Result::unwrap)
                .collect::<Vec<_>>()
        });
        for _ in 1..chunks {
            err.wait_for("seen: failpoint chunk");
            points.release("chunk");
        }
        err.wait_for("seen: failpoint chunk");
        signal(child.id(), nix::sys::signal::Signal::SIGINT);
        err.wait_for("seen: failpoint signal");
        points.release("signal");
        points.release("chunk");
        let status = wait_with_deadline(child, "the interrupted run").status;
        let first = output.join().unwrap();
        let err = err.all();
        assert_eq!(status.code(), Some(130), "{err}");
        assert!(
            !first.is_empty() && first.len() < lines,
            "after chunk {chunks}: {} lines printed, {err}",
            first.len()
        );
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
            "after chunk {chunks}: the interrupted run printed {} lines ({err:?}), the next {}: \
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
///
/// A second delivery counts as the same signal when its handler runs within 250 ms of the
/// first's: on a stalled machine the two handlers can run further apart than that, so the test
/// widens the window to 10 minutes (`SEEN_SAME_SIGNAL_MS`, feature `failpoints`) and checks
/// what the run does with two deliveries inside it, whatever the scheduler does.
#[cfg(feature = "failpoints")]
#[test]
fn a_signal_delivered_twice_at_once_still_saves_the_state() {
    use std::time::Duration;
    let dir = scratch("double-signal");
    let state = dir.join("state");
    for (attempt, threads) in ["1", "2", "1", "2", "4"].into_iter().enumerate() {
        let _ = std::fs::remove_file(&state);
        let mut child = common::command(&[
            "dedup",
            "--threads",
            threads,
            "--state",
            state.to_str().unwrap(),
            "--capacity",
            "1000",
        ])
        .env("SEEN_SAME_SIGNAL_MS", "600000")
        .spawn()
        .unwrap();
        let rx = lines_of(&mut child);
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

/// A second signal still exits at once (here the first cannot finish: the output is blocked,
/// nobody reads it). The second is sent once the first was handled.
#[cfg(feature = "failpoints")]
#[test]
fn a_second_signal_later_exits_at_once() {
    use common::{Failpoints, command, feed, signal, wait_with_deadline};
    use nix::sys::signal::Signal::SIGINT;
    use std::io::Read;
    let dir = scratch("second-signal");
    for threads in ["1", "2"] {
        let mut points = Failpoints::new(&dir, &["signal"]);
        let mut run = command(&["dedup", "--threads", threads, "--capacity", "1000000"]);
        // The second is not the first delivered twice, however soon it comes.
        points.apply(&mut run).env("SEEN_SAME_SIGNAL_MS", "0");
        let mut child = run.spawn().unwrap();
        let mut err = common::Stderr::of(&mut child);
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
        read.recv_timeout(common::DEADLINE)
            .expect("the run reads its input");
        // And has decided the long record: its first byte is out (a run that has read the
        // record without having written any of it yet would end at the first signal with
        // nothing to finish). One byte read leaves the rest of the 100 KiB blocked on the pipe.
        let mut first = [0u8; 1];
        child
            .stdout
            .as_mut()
            .unwrap()
            .read_exact(&mut first)
            .unwrap();
        assert_eq!(first[0], b'x');
        signal(child.id(), SIGINT);
        err.wait_for("seen: failpoint signal");
        points.release("signal");
        assert!(child.try_wait().unwrap().is_none(), "blocked on its output");
        signal(child.id(), SIGINT);
        // Nobody reads the output and the input stays open: only an exit at the second signal
        // ends the run (a run that waited for its output would never end, and fail the
        // deadline).
        let stdout = child.stdout.take();
        let status = wait_with_deadline(child, threads).status;
        assert_eq!(status.code(), Some(130), "--threads {threads}");
        drop(stdout);
        drop(writer.join().unwrap());
    }
    std::fs::remove_dir_all(&dir).unwrap();
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
