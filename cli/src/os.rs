//! The command's system calls (Linux; elsewhere each does nothing or says "not known"): which
//! standard descriptors were open when the process started, and SIGXFSZ ignored.
//!
//! - **Closed at start.** The standard library opens `/dev/null` (read and write) in place of
//!   a standard descriptor that is closed when the process starts, before `main`, so that the
//!   process never writes to a file it opened later under that number. After that, a closed
//!   standard output (`seen dedup >&-`, whose records would vanish) looks like one that a
//!   launcher opened on `/dev/null` on purpose (`1<> /dev/null`, Python's
//!   `subprocess.DEVNULL`, glibc's `daemon()`). So a function in `.init_array`, which the C
//!   runtime calls before `main` and so before the standard library's substitution, records
//!   which of descriptors 0 and 1 were open ([`closed_at_start`]).
//! - **SIGXFSZ.** A write past the file size limit (`ulimit -f`) sends SIGXFSZ, whose default
//!   action kills the process: a run with `--state` would end without saving it. Ignored
//!   ([`ignore_file_size_signal`]), the write fails with `EFBIG` instead, and the run ends as
//!   on a full disk: an error, with the keys of the records written saved (or, when the save
//!   itself passes the limit, an error saying so: the save's temporary file is removed, and
//!   the state keeps its previous save).
//!
//! One of the command's two modules with `unsafe` (`.ci/run` checks): `oom.rs` is the other.
#![allow(unsafe_code)]

#[cfg(target_os = "linux")]
use std::sync::atomic::{AtomicU8, Ordering};

/// Set once [`record_open`] has run; bit `fd` (0 or 1) set when that descriptor was open.
#[cfg(target_os = "linux")]
const RECORDED: u8 = 1 << 7;

/// What [`record_open`] found, before `main`.
#[cfg(target_os = "linux")]
static OPEN_AT_START: AtomicU8 = AtomicU8::new(0);

/// Called by the C runtime before `main` (glibc and musl run the executable's
/// `.init_array` before they call `main`, and the standard library's substitution of
/// `/dev/null` happens in `main`). Without arguments: glibc passes `argc`, `argv` and `envp`,
/// which the C calling convention lets a callee ignore; musl passes none.
#[cfg(target_os = "linux")]
#[used]
#[unsafe(link_section = ".init_array")]
static RECORD_OPEN: extern "C" fn() = record_open;

/// Records which of descriptors 0 and 1 are open ([`OPEN_AT_START`]).
#[cfg(target_os = "linux")]
extern "C" fn record_open() {
    let mut open = RECORDED;
    for fd in 0..2 {
        // SAFETY: `fcntl(F_GETFD)` reads the descriptor's flags and changes nothing; on a
        // descriptor that is not open it fails with `EBADF` (and sets `errno`, which nothing
        // before `main` reads). It touches no memory of ours, so it is sound however early it
        // runs.
        if unsafe { libc::fcntl(fd, libc::F_GETFD) } != -1 {
            open |= 1 << fd;
        }
    }
    OPEN_AT_START.store(open, Ordering::Relaxed);
}

/// Whether the standard descriptor `fd` (0: input, 1: output) was closed when the process
/// started (`<&-`, `>&-`), whatever the standard library put in its place. `false` where that
/// is not known (not Linux, or the runtime did not run [`record_open`]).
#[cfg(target_os = "linux")]
pub(crate) fn closed_at_start(fd: u8) -> bool {
    debug_assert!(fd < 2);
    let open = OPEN_AT_START.load(Ordering::Relaxed);
    open & RECORDED != 0 && open & (1 << fd) == 0
}

/// Not Linux: not known, so `false`.
#[cfg(not(target_os = "linux"))]
pub(crate) fn closed_at_start(_fd: u8) -> bool {
    false
}

/// Ignores SIGXFSZ, so that a write past the file size limit fails with `EFBIG` (an error the
/// command reports, after saving what it can) instead of killing the process (see the module
/// docs).
#[cfg(target_os = "linux")]
pub(crate) fn ignore_file_size_signal() {
    // SAFETY: `signal(SIGXFSZ, SIG_IGN)` sets the disposition of one signal to "ignore"; no
    // handler of ours runs, so nothing about async-signal safety applies, and no memory is
    // passed. Called at the start of `main`, before the command's threads, and nothing else in
    // the process sets SIGXFSZ's disposition (the signal handler of `ctrlc` is for SIGINT and
    // SIGTERM).
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
}

/// Not Linux: SIGXFSZ keeps its default action.
#[cfg(not(target_os = "linux"))]
pub(crate) fn ignore_file_size_signal() {}
