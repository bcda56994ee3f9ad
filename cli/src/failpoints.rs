//! Pause points for the tests: compiled only with the `failpoints` feature (off by default; on
//! in the README's test command, which passes `--all-features`). Without the feature the
//! `failpoint!` macro (`main.rs`) expands to nothing and this module does not exist.
//!
//! A test chooses where a run stops, for as long as it likes, and what happens meanwhile (a
//! signal during the save, say), instead of racing the run:
//!
//! - `SEEN_FAILPOINTS=DIR`: at a point named `NAME`, if `DIR/NAME` exists (a named pipe that
//!   the test made, and holds open for writing), the run writes `seen: failpoint NAME` on
//!   standard error, then waits until it reads one line from that pipe. The test reads standard
//!   error until the line comes (a blocking read), does what it wants, and writes a line to the
//!   pipe to let the run go on. Each pass through a point pauses once.
//! - `SEEN_OUT_OF_MEMORY_AT=NAME`: at the point `NAME`, the run ends as when the system refuses
//!   an allocation the command cannot do without (`oom.rs`).
//! - `SEEN_SAME_SIGNAL_MS=N`: a signal that comes less than `N` ms after the first is the
//!   first delivered twice (250 ms without it: `signals.rs`). A test that sends a second signal
//!   once the first was handled sets it to 0, rather than waiting out the quarter second.
//!
//! The points: `signal` (each SIGINT or SIGTERM, once its handler has done what it does,
//! unless that was to exit), `chunk` (a one-thread run, after each chunk is written, the
//! sequencer held), `save` (the end of a run with `--state`: the save has begun, as a second
//! signal sees it, and the file is not written yet).

use std::fs::OpenOptions;
use std::io::Read;
use std::path::PathBuf;
use std::time::Duration;

/// Pauses at `name` if the test asked for it (see the module docs).
pub(crate) fn pause(name: &str) {
    if std::env::var_os("SEEN_OUT_OF_MEMORY_AT").is_some_and(|at| at == name) {
        crate::oom::out_of_memory(0);
    }
    let Some(dir) = std::env::var_os("SEEN_FAILPOINTS") else {
        return;
    };
    let pipe = PathBuf::from(dir).join(name);
    if !pipe.exists() {
        return;
    }
    // Read and write: the open never waits for a writer, and the test's line, written once
    // the announcement is out, finds this end open.
    let mut pipe = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&pipe)
        .unwrap_or_else(|e| panic!("failpoint {name}: cannot open {}: {e}", pipe.display()));
    say!("seen: failpoint {name}");
    let mut byte = [0u8; 1];
    loop {
        match pipe.read(&mut byte) {
            Ok(1) if byte[0] == b'\n' => return,
            Ok(1) => {}
            Ok(_) => panic!("failpoint {name}: the pipe ended"),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => panic!("failpoint {name}: {e}"),
        }
    }
}

/// How soon after the first a signal counts as the first delivered twice, if the test says.
pub(crate) fn same_signal() -> Option<Duration> {
    let ms = std::env::var("SEEN_SAME_SIGNAL_MS").ok()?;
    Some(Duration::from_millis(ms.parse().unwrap_or_else(|_| {
        panic!("SEEN_SAME_SIGNAL_MS={ms:?}: a number of milliseconds")
    })))
}
