//! `--state` paths that cannot be saved (a loop of links, a name of a directory, a missing
//! directory) or that are not what they seem (a link in place of the lock file, a named pipe, a
//! device): refused before the run prints anything.
#![cfg(unix)]

mod common;

use std::process::{Command, Stdio};

use common::{scratch, seen, wait_with_deadline};

/// A `--state` that is a loop of symbolic links can never be saved: the run refuses it
/// before it prints anything (it printed every record, then failed to save, so the next run
/// printed them all again).
#[test]
fn a_state_that_is_a_loop_of_symbolic_links_is_refused_before_the_run() {
    let dir = scratch("loop");
    let (one, two) = (dir.join("one"), dir.join("two"));
    std::os::unix::fs::symlink(&two, &one).unwrap();
    std::os::unix::fs::symlink(&one, &two).unwrap();
    let out = seen(
        &[
            "dedup",
            "--capacity",
            "1000",
            "--state",
            one.to_str().unwrap(),
        ],
        b"a\nb\n",
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(out.stdout.is_empty(), "printed before refusing: {err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("symbolic links"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The lock file beside the state is the command's own: a symbolic link planted in its place
/// (in a shared directory such as /tmp) is refused, not followed, so the file it points to is
/// neither created nor truncated.
#[test]
fn a_symbolic_link_in_place_of_the_lock_file_is_refused_not_followed() {
    let dir = scratch("locklink");
    let victim = dir.join("victim");
    std::fs::write(&victim, b"precious\n").unwrap();
    let state = dir.join("st");
    std::os::unix::fs::symlink(&victim, dir.join("st.lock")).unwrap();
    let absent = dir.join("absent");
    std::os::unix::fs::symlink(&absent, dir.join("other.lock")).unwrap();
    for state in [state, dir.join("other")] {
        let out = seen(
            &[
                "dedup",
                "--capacity",
                "1000",
                "--state",
                state.to_str().unwrap(),
            ],
            b"a\n",
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(out.stdout.is_empty(), "{err}");
        assert!(err.contains("symbolic link"), "{err}");
        assert!(!state.exists());
    }
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious\n");
    assert!(
        !absent.exists(),
        "the lock created the file its link points to"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A `--state` that names a directory (`sub/`, which does not exist yet) can never be saved
/// as a file: refused before the run (it printed every record, then failed to save).
#[test]
fn a_state_named_as_a_directory_is_refused_before_the_run() {
    let dir = scratch("slash");
    let state = format!("{}/sub/", dir.display());
    let out = seen(&["dedup", "--capacity", "1000", "--state", &state], b"a\n");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(out.stdout.is_empty(), "printed before refusing: {err}");
    assert!(err.contains(&state), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--state` in a directory that does not exist fails before the run reads anything (not after
/// the whole input was printed, with nothing saved, so that the next run prints it all again).
#[test]
fn a_state_in_a_missing_directory_fails_before_printing() {
    let out = seen(
        &[
            "dedup",
            "--state",
            "/nonexistent-seen-dir/dir/state",
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
    assert!(err.contains("/nonexistent-seen-dir/dir/state"), "{err}");
}

/// A `--state` that is not a regular file is refused at once, naming it and what it is: a named
/// pipe (the load would wait for a writer forever), a directory (not "2 names", its link
/// count) or a device (read as a corrupt state). Refused before it is locked: no lock file is
/// left beside it (`/dev/null.lock`).
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
    let child = Command::new(env!("CARGO_BIN_EXE_seen"))
        .args(["dedup", "--state", fifo.to_str().unwrap()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A run blocked on the FIFO never ends: the deadline fails the test.
    let out = wait_with_deadline(child, "blocked on the FIFO?");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "the state {} is not a regular file (a named pipe)",
            fifo.display()
        )),
        "{err}"
    );
    let dev_null_lock = std::path::Path::new("/dev/null.lock");
    let dev_null_locked = dev_null_lock.exists();
    for (path, what) in [
        (dir.to_str().unwrap(), "a directory"),
        ("/dev/null", "a character device"),
    ] {
        let out = seen(&["dedup", "--state", path], b"a\n");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{path}: {err}");
        assert!(
            err.starts_with(&format!(
                "seen: the state {path} is not a regular file ({what})"
            )),
            "{path}: {err}"
        );
        assert_eq!(err.lines().count(), 1, "{path}: {err}");
    }
    // No lock file: beside the named pipe, beside the directory, in /dev (unless one was there
    // before the test).
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        1,
        "a lock file in {dir:?}"
    );
    let mut dir_lock = dir.clone().into_os_string();
    dir_lock.push(".lock");
    assert!(!std::path::Path::new(&dir_lock).exists(), "{dir_lock:?}");
    assert_eq!(dev_null_lock.exists(), dev_null_locked, "/dev/null.lock");
    std::fs::remove_dir_all(&dir).unwrap();
}
