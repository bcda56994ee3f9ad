//! What the command's tests share: running it, and generated input.
#![allow(dead_code)] // Each test binary uses some of it.

use std::io::Write;
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How long a test waits for a run to do what it must (a line, an exit) before it fails: far
/// more than any run here takes, so that only a run that never does it fails.
pub(crate) const DEADLINE: Duration = Duration::from_secs(120);

/// `seen` with `args`, its three standard streams piped to the test (to change before it
/// starts: its environment, a stream).
pub(crate) fn command(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_seen"));
    command
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

/// Starts `seen` with `args`, its three standard streams piped to the test.
pub(crate) fn start(args: &[&str]) -> Child {
    command(args).spawn().unwrap()
}

/// Waits for `child` to exit, at most [`DEADLINE`] (a thread waits on it; the test waits on a
/// channel), and returns its output (the streams still piped to the test). A child still
/// running then is killed, and the test fails: it waited for something that never came.
pub(crate) fn wait_with_deadline(child: Child, what: &str) -> Output {
    wait_within(child, DEADLINE, what)
}

/// [`wait_with_deadline`] with a deadline of the test's own: for a run that must end within a
/// bound it promises.
pub(crate) fn wait_within(child: Child, deadline: Duration, what: &str) -> Output {
    let pid = child.id();
    let (done, exited) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(child.wait_with_output());
    });
    match exited.recv_timeout(deadline) {
        Ok(output) => output.unwrap(),
        Err(_) => {
            signal(pid, nix::sys::signal::Signal::SIGKILL);
            panic!("{what}: the run did not end within {deadline:?}");
        }
    }
}

/// Sends `signal` to `pid` with one system call (a run that has just exited is not an error).
pub(crate) fn signal(pid: u32, signal: nix::sys::signal::Signal) {
    use nix::unistd::Pid;
    let pid = Pid::from_raw(i32::try_from(pid).expect("a pid fits an i32"));
    match nix::sys::signal::kill(pid, signal) {
        Ok(()) | Err(nix::errno::Errno::ESRCH) => {}
        Err(e) => panic!("kill -{signal} {pid}: {e}"),
    }
}

/// A run's standard error, line by line as it comes, read by a thread: the test waits for a
/// line (a blocking read, at most [`DEADLINE`]), and takes the whole text at the end.
pub(crate) struct Stderr {
    lines: mpsc::Receiver<String>,
    /// Every line so far, in order.
    seen: Vec<String>,
    /// The lines no wait has taken yet (two threads of the run may announce in either order).
    waiting: std::collections::VecDeque<String>,
}

impl Stderr {
    pub(crate) fn of(child: &mut Child) -> Self {
        use std::io::BufRead;
        let stderr = std::io::BufReader::new(child.stderr.take().unwrap());
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in stderr.lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self {
            lines,
            seen: Vec::new(),
            waiting: std::collections::VecDeque::new(),
        }
    }

    /// Takes the first line not taken yet that contains `text`, waiting for it if it has not
    /// come. Fails if standard error ends first (the run exited) or nothing comes within
    /// [`DEADLINE`].
    pub(crate) fn wait_for(&mut self, text: &str) {
        if let Some(at) = self.waiting.iter().position(|l| l.contains(text)) {
            self.waiting.remove(at);
            return;
        }
        loop {
            match self.lines.recv_timeout(DEADLINE) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if line.contains(text) {
                        return;
                    }
                    self.waiting.push_back(line);
                }
                Err(e) => panic!(
                    "no line with {text:?} on standard error ({e}); it said: {:?}",
                    self.seen
                ),
            }
        }
    }

    /// Everything it said, to its end (the run's exit closes it).
    pub(crate) fn all(mut self) -> String {
        while let Ok(line) = self.lines.recv_timeout(DEADLINE) {
            self.seen.push(line);
        }
        self.seen.iter().map(|l| format!("{l}\n")).collect()
    }
}

/// Pause points of a run (`cli/src/failpoints.rs`, compiled with the `failpoints` feature): a
/// named pipe per point, in a directory of their own, each held open by the test. A run given
/// the directory ([`apply`](Self::apply)) stops at each pass through a point, says so on
/// standard error (`seen: failpoint NAME`: [`Stderr::wait_for`]), and goes on once the test
/// [`release`](Self::release)s it.
#[cfg(feature = "failpoints")]
pub(crate) struct Failpoints {
    dir: std::path::PathBuf,
    pipes: Vec<(String, std::fs::File)>,
}

#[cfg(feature = "failpoints")]
impl Failpoints {
    /// The points `names`, in a new directory `failpoints-N` under `dir`.
    pub(crate) fn new(dir: &std::path::Path, names: &[&str]) -> Self {
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = dir.join(format!("failpoints-{}", N.fetch_add(1, Ordering::Relaxed)));
        std::fs::create_dir_all(&dir).unwrap();
        let pipes = names
            .iter()
            .map(|&name| {
                let path = dir.join(name);
                nix::unistd::mkfifo(&path, nix::sys::stat::Mode::S_IRWXU).unwrap();
                // Read and write: the open does not wait for the run, and a line written
                // stays in the pipe until the run reads it.
                let pipe = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(&path)
                    .unwrap();
                (name.to_string(), pipe)
            })
            .collect();
        Self { dir, pipes }
    }

    /// Gives `command` the points.
    pub(crate) fn apply<'c>(&self, command: &'c mut Command) -> &'c mut Command {
        command.env("SEEN_FAILPOINTS", &self.dir)
    }

    /// Lets the run go on from the point `name` (where it waits, or will).
    pub(crate) fn release(&mut self, name: &str) {
        let (_, pipe) = self
            .pipes
            .iter_mut()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("no point {name}"));
        pipe.write_all(b"\n").unwrap();
    }
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
    // A run that never ends (one that waits for a lock, say) fails the test, not hangs it.
    let out = wait_with_deadline(child, &format!("seen {args:?}"));
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
