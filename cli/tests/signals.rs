//! `seen dedup --state` interrupted: SIGINT and SIGTERM save the state of exactly the records
//! written; SIGKILL leaves the last saved state as it was.
#![cfg(unix)]

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command};
use std::sync::mpsc;
use std::time::Duration;

mod common;

use common::{scratch, seen};

/// A running `seen`, fed by the test, its output lines collected by a thread.
struct Running {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
}

impl Running {
    fn start(args: &[&str]) -> Self {
        let mut child = common::start(args);
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                if tx.send(line.unwrap()).is_err() {
                    break;
                }
            }
        });
        Self {
            child,
            stdin,
            lines,
        }
    }

    /// Writes `input`, then waits (at most a minute) for `expect` lines of output: the
    /// command writes what it decided before it waits for more input.
    fn feed(&mut self, input: &[u8], expect: &[&str]) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(input).unwrap();
        stdin.flush().unwrap();
        for want in expect {
            let got = self
                .lines
                .recv_timeout(Duration::from_secs(60))
                .expect("the output of records read is written while the input waits");
            assert_eq!(&got, want);
        }
    }

    fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .args([&format!("-{name}"), &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Waits for the exit; its status code and standard error. The input stays open (a
    /// signal, not the end of input, ends the run).
    fn wait(mut self) -> (Option<i32>, String, Vec<String>) {
        let status = self.child.wait().unwrap();
        drop(self.stdin.take());
        let mut err = String::new();
        std::io::Read::read_to_string(&mut self.child.stderr.take().unwrap(), &mut err).unwrap();
        let rest = self.lines.iter().collect();
        (status.code(), err, rest)
    }
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

#[test]
fn sigint_and_sigterm_save_what_was_written() {
    for (signal, threads, structure) in [
        ("INT", "1", &[][..]),
        ("INT", "2", &[][..]),
        ("TERM", "2", &["--grow"][..]),
        ("INT", "2", &["--remember", "1000"][..]),
        ("TERM", "1", &["--window", "7d", "--period", "1d"][..]),
    ] {
        let dir = scratch("sigint");
        let state = dir.join("state.seen");
        let mut args = vec![
            "dedup",
            "--state",
            state.to_str().unwrap(),
            "--threads",
            threads,
        ];
        args.extend_from_slice(structure);
        args.extend(["--capacity", "1000"]);
        let mut run = Running::start(&args);
        run.feed(b"a\nb\na\n", &["a", "b"]);
        run.feed(b"c\nb\n", &["c"]);
        run.signal(signal);
        let (code, err, rest) = run.wait();
        let case = format!("SIG{signal}, --threads {threads} {structure:?}");
        assert_eq!(code, Some(130), "{case}: {err}");
        assert!(rest.is_empty(), "{case}: {rest:?}");
        assert!(err.contains("interrupted after 5 records"), "{case}: {err}");
        assert_eq!(files_in(&dir), ["state.seen", "state.seen.lock"], "{case}");
        // The next run remembers a, b and c.
        let out = seen(&args, b"a\nd\nc\nb\ne\n");
        assert!(out.status.success(), "{case}");
        assert_eq!(out.stdout, b"d\ne\n", "{case}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn a_killed_run_leaves_the_last_saved_state() {
    let dir = scratch("sigkill");
    let state = dir.join("state.seen");
    let args = [
        "dedup",
        "--state",
        state.to_str().unwrap(),
        "--capacity",
        "1000",
    ];
    assert_eq!(seen(&args, b"a\nb\n").stdout, b"a\nb\n");
    let saved = std::fs::read(&state).unwrap();
    for threads in ["1", "2"] {
        let mut args = args.to_vec();
        args.extend(["--threads", threads]);
        let mut run = Running::start(&args);
        run.feed(b"a\nx\ny\n", &["x", "y"]);
        run.signal("KILL");
        let (code, _, _) = run.wait();
        assert_eq!(code, None, "killed by a signal");
        assert_eq!(std::fs::read(&state).unwrap(), saved, "--threads {threads}");
        assert_eq!(files_in(&dir), ["state.seen", "state.seen.lock"]);
    }
    // The next run has a and b, not x (its run never finished).
    assert_eq!(seen(&args, b"a\nx\nb\n").stdout, b"x\n");
    std::fs::remove_dir_all(&dir).unwrap();
}
