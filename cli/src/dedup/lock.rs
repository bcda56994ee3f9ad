//! One run at a time per `--state` file.
//!
//! Two runs that load one state and each save their own would keep only the last save: the
//! other's keys would be lost, and their records printed again by the next run. So a run holds
//! an exclusive lock for its whole length, from before it loads the state to after it saves
//! it. The lock is on a file beside the state, `STATE.lock`, which is never replaced (the state
//! itself is, by each save's rename, so a lock on it would not outlive the first save); the
//! lock ends with the process, however it ends. A second run fails at once, naming the first.
//!
//! A lock beside a name covers that name (and the symbolic links to it, which lead to it): a
//! hard link is another name for the same file, with a lock file of its own. So a state with
//! more than one name is refused: two runs by two names would both run and one's keys be lost
//! (and a save, renamed over one name, leaves the others on the old state anyway).

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

use crate::Failure;

/// The lock, held while this lives (for the whole run).
#[derive(Debug)]
pub(super) struct StateLock {
    _file: File,
}

/// The lock file of the state at `path`: beside the file the path leads to (through symbolic
/// links), so that two runs reaching one state by different paths exclude each other.
pub(super) fn lock_path(path: &Path) -> PathBuf {
    let path = &super::filter::resolve(path);
    let real = std::fs::canonicalize(path).ok().or_else(|| {
        let parent = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        Some(std::fs::canonicalize(parent).ok()?.join(path.file_name()?))
    });
    let mut name = real.unwrap_or_else(|| path.to_path_buf()).into_os_string();
    name.push(".lock");
    PathBuf::from(name)
}

/// Takes the lock of the state at `path`, or fails at once if another run holds it.
pub(super) fn lock(path: &Path) -> Result<StateLock, Failure> {
    let lock = lock_path(path);
    let state = path.display();
    // The lock file is this command's own, never followed: a link planted in its place (in a
    // shared directory) would have the open create, and the PID below overwrite, the file it
    // points to.
    let planted = || {
        Failure(format!(
            "cannot lock the state {state}: {} is a symbolic link, not a lock file of seen: \
             remove it",
            lock.display()
        ))
    };
    if std::fs::symlink_metadata(&lock).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(planted());
    }
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&lock)
        .map_err(|e| {
            Failure(format!(
                "cannot lock the state {state}: cannot open {}: {e}",
                lock.display()
            ))
        })?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            let holder = match holder.trim().parse::<u32>() {
                Ok(pid) => format!("another run of seen (process {pid})"),
                Err(_) => "another run of seen".to_string(),
            };
            return Err(Failure(format!(
                "the state {state} is in use by {holder}: wait for it to end, or use another \
                 --state (the lock is on {})",
                lock.display()
            )));
        }
        Err(TryLockError::Error(e)) => {
            return Err(Failure(format!(
                "cannot lock the state {state} ({}): {e}",
                lock.display()
            )));
        }
    }
    // A link put in place between the check and the open: the file opened is not the one at
    // the path.
    if !same_file(&file, &lock) {
        return Err(planted());
    }
    // Who holds it, for the message of a run that finds it taken.
    let _ = file
        .set_len(0)
        .and_then(|()| file.rewind())
        .and_then(|()| writeln!(file, "{}", std::process::id()));
    let held = StateLock { _file: file };
    one_name(path)?;
    Ok(held)
}

/// Fails if the state file has more than one name (hard links): the lock is on its name's
/// lock file, so a run by another name would not be excluded, and each save (a new file renamed
/// over the name) would leave the other names on the old state. Checked with the lock held, so
/// that a run by another name that started first, or starts later, is refused too.
#[cfg(unix)]
fn one_name(path: &Path) -> Result<(), Failure> {
    use std::os::unix::fs::MetadataExt;
    let links = std::fs::metadata(super::filter::resolve(path)).map_or(1, |m| m.nlink());
    if links > 1 {
        return Err(Failure(format!(
            "the state {} has {links} names (hard links): one run at a time is ensured for one \
             name only, and a save would leave the others on the old state; remove the other \
             names (`find -samefile`), or copy the file",
            path.display()
        )));
    }
    Ok(())
}

#[cfg(not(unix))]
fn one_name(_: &Path) -> Result<(), Failure> {
    Ok(())
}

/// Whether `file` is the file at `path` itself (not one a symbolic link there leads to).
#[cfg(unix)]
fn same_file(file: &File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (file.metadata(), std::fs::symlink_metadata(path)) {
        (Ok(a), Ok(b)) => (a.dev(), a.ino()) == (b.dev(), b.ino()),
        _ => false,
    }
}

#[cfg(not(unix))]
fn same_file(_: &File, path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| !m.file_type().is_symlink())
}
