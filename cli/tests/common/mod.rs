//! What the command's tests share: running it, and generated input.
#![allow(dead_code)] // Each test binary uses some of it.

use std::io::Write;
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;

/// Starts `seen` with `args`, its three standard streams piped to the test.
pub(crate) fn start(args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_seen"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Writes `text` to a run's standard input on a thread of its own, and says on the receiver
/// once the run has read from it: the first `first` bytes (more than a pipe's buffer, 64 KiB)
/// are written apart, so their write returns only after the run has read some. The run sets
/// its signal handler before its first read, so a signal sent then is handled, not fatal. The
/// thread returns the input, still open.
pub(crate) fn feed(
    mut stdin: ChildStdin,
    text: Vec<u8>,
    first: usize,
) -> (JoinHandle<ChildStdin>, mpsc::Receiver<()>) {
    assert!(first > 64 << 10 && first <= text.len());
    let (reading, read) = mpsc::channel();
    let writer = std::thread::spawn(move || {
        let (head, rest) = text.split_at(first);
        let _ = stdin.write_all(head);
        let _ = reading.send(());
        let _ = stdin.write_all(rest);
        stdin
    });
    (writer, read)
}

/// Runs `seen` with `args`, `input` on standard input.
pub(crate) fn seen(args: &[&str], input: &[u8]) -> Output {
    let mut child = start(args);
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    out
}

/// `n` lines `key-<i>` with about one in five a repeat of an earlier one (pseudo-random, fixed).
pub(crate) fn lines(n: usize) -> Vec<u8> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut out = Vec::new();
    for i in 0..n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let key = if i > 0 && x.is_multiple_of(5) {
            x as usize % i
        } else {
            i
        };
        writeln!(out, "key-{key}").unwrap();
    }
    out
}

/// What `awk '!seen[$0]++'` prints: each line the first time it occurs.
pub(crate) fn first_occurrences(input: &[u8]) -> Vec<u8> {
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for line in input.split_inclusive(|&b| b == b'\n') {
        if seen.insert(line) {
            out.extend_from_slice(line);
        }
    }
    out
}

/// A fresh scratch directory for one test: `seen-cli-NAME-PID` in the temporary directory,
/// emptied first (the PID tells the test binaries apart; NAME the tests within one).
pub(crate) fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("seen-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Everything a child wrote on its standard error (piped), to its end.
pub(crate) fn stderr_of(child: &mut std::process::Child) -> String {
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    err
}
