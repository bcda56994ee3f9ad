//! `--state` paths that cannot be saved (a loop of links, a name of a directory) or that are not
//! what they seem (a link in place of the lock file): refused before the run prints anything.
#![cfg(unix)]

mod common;

use common::{scratch, seen};

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
