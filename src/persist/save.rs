//! The crash-safe save that every structure's `save` goes through: a temporary file beside the
//! target, flushed and renamed over it; through symbolic links, keeping the replaced file's
//! permissions, and removing what crashed saves left behind.

use std::ffi::OsStr;
use std::fs::{self, File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::Error;

/// The longest part of a temporary file's name that names its target ([`temp_key`]).
const TEMP_NAME_BYTES: usize = 128;

/// The most symbolic links a save follows, each to the next, before it calls the chain a loop
/// (Linux's own limit for a path).
const MAX_LINKS: usize = 40;

/// The temporary files that saves in this process are writing: created and not yet renamed or
/// removed. A temporary file with this process's ID that is not listed here was left by an
/// earlier process that had the same ID. A file is listed under the lock as it is created, and
/// a cleanup holds the lock from its check to the removal, so it never removes a listed one.
static SAVING: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn saving() -> MutexGuard<'static, Vec<PathBuf>> {
    // The list stays consistent whatever panicked while holding it: each change is one call.
    SAVING.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Writes a file at `path` so that a crash at any moment leaves either the old file or the
/// whole new one, never a mix: the bytes go to a new temporary file in the same directory,
/// which is flushed to disk (`fsync`) and renamed over `path`; then the directory is flushed
/// so that the rename itself survives a power loss (on Unix; elsewhere the platform's rename).
/// On error the temporary file is removed and `path` is untouched, unless the error is the
/// directory's flush, after the rename.
///
/// Through a symbolic link, the file written is the one the link leads to
/// ([`resolve_links`]), and the link stays. The new file gets the old one's permissions (and
/// on Unix its owner, when the saver may give it: [`carry_over`]) before a byte is written.
/// Before writing, the save removes the temporary files that earlier saves of the same file
/// left behind and that no live process is writing ([`remove_stale_temps`]).
pub(crate) fn save_atomically(
    path: &Path,
    write: impl FnOnce(&mut BufWriter<&File>) -> Result<(), Error>,
) -> Result<(), Error> {
    let target = resolve_links(path)?;
    let saved = replace(&target, write);
    if target == path {
        return saved;
    }
    saved.map_err(|e| {
        e.io_suffixed(format_args!(
            " ({} is a symbolic link to {})",
            path.display(),
            target.display()
        ))
    })
}

/// The file that a save to `path` writes: `path` itself, or, when it is a symbolic link, the
/// end of its chain of links, each relative link read from the directory that holds it. The
/// end need not exist: a save through a dangling link creates the file it names, as writing
/// through the link with the shell's `>` would. Only the last component is followed: the
/// directories on the way are the operating system's to resolve, and a rename inside one is
/// atomic whatever path reached it.
fn resolve_links(path: &Path) -> Result<PathBuf, Error> {
    let mut target = path.to_path_buf();
    let mut followed = 0;
    // Not a link, nothing there (a new file, or a dangling link's end) or not reachable: the
    // save itself reports what is wrong with that path.
    while fs::symlink_metadata(&target).is_ok_and(|m| m.file_type().is_symlink()) {
        if followed == MAX_LINKS {
            return Err(Error::io_refused(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "save to {}: more than {MAX_LINKS} symbolic links, each to the next \
                     (a loop?)",
                    path.display()
                ),
            ));
        }
        let link = fs::read_link(&target).map_err(|e| Error::io_at(&target, "read the link", e))?;
        // `join` keeps an absolute link as it is.
        target = match target.parent() {
            Some(dir) => dir.join(link),
            None => link,
        };
        followed += 1;
    }
    Ok(target)
}

/// [`save_atomically`] of a path that is not a symbolic link.
fn replace(
    target: &Path,
    write: impl FnOnce(&mut BufWriter<&File>) -> Result<(), Error>,
) -> Result<(), Error> {
    let dir = match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let key = temp_key(target.file_name().ok_or_else(|| {
        Error::io_refused(
            std::io::ErrorKind::InvalidInput,
            format!("save to {}: not a file name", target.display()),
        )
    })?);
    // The file being replaced: its permissions and owner go to the new one.
    let old = fs::metadata(target).ok().filter(fs::Metadata::is_file);
    let temp = Temp::create(&dir, &key)?;
    failpoint!("save.temp.created");
    remove_stale_temps(&dir, &key, Processes::listed(temp.file()));
    if let Some(old) = &old {
        carry_over(temp.file(), old)
            .map_err(|e| Error::io_at(&temp.path, "set the permissions of", e))?;
    }
    let mut out = BufWriter::with_capacity(1 << 20, temp.file());
    write(&mut out).map_err(|e| e.io_prefixed(format_args!("write {}", temp.path.display())))?;
    out.flush()
        .map_err(|e| Error::io_at(&temp.path, "write", e))?;
    drop(out);
    failpoint!("save.temp.written");
    temp.file()
        .sync_all()
        .map_err(|e| Error::io_at(&temp.path, "flush to disk", e))?;
    fs::rename(&temp.path, target).map_err(|e| Error::io_at(target, "rename onto", e))?;
    temp.renamed();
    sync_dir(&dir)
}

/// The part of a temporary file's name that names its target: the target's name when it is
/// UTF-8 of at most [`TEMP_NAME_BYTES`] bytes; otherwise its start (converted lossily, so cut
/// to leave room within the usual 255-byte limit on a name) and a hash of the whole name, so
/// that two targets share a key only if their names are the same (or their 64-bit hashes).
fn temp_key(name: &OsStr) -> String {
    if let Some(name) = name.to_str().filter(|n| n.len() <= TEMP_NAME_BYTES) {
        return name.to_owned();
    }
    let hash = xxhash_rust::xxh3::xxh3_64(name.as_encoded_bytes());
    let lossy = name.to_string_lossy();
    let cut = (0..=TEMP_NAME_BYTES - 17)
        .rev()
        .find(|&i| lossy.is_char_boundary(i))
        .unwrap_or(0);
    format!("{}~{hash:016x}", &lossy[..cut])
}

/// The process ID in `name` if it is the name of a temporary file of `key`,
/// `.{key}.{pid}-{n}.tmp`, with both numbers written as [`Temp::create`] writes them.
fn temp_pid(name: &str, key: &str) -> Option<u32> {
    let numbers = name
        .strip_prefix('.')?
        .strip_prefix(key)?
        .strip_prefix('.')?
        .strip_suffix(".tmp")?;
    let (pid, n) = numbers.split_once('-')?;
    // Digits only, no sign and no leading zero: the number's own decimal form.
    let number = |s: &str| s.parse::<u64>().ok().filter(|v| v.to_string() == s);
    number(n)?;
    u32::try_from(number(pid)?).ok()
}

/// A temporary file being written: listed in [`SAVING`] while it exists, and removed when
/// dropped unless it was renamed.
struct Temp {
    path: PathBuf,
    file: Option<File>,
    renamed: bool,
}

impl Temp {
    /// Creates `.{key}.{pid}-{n}.tmp` in `dir`, the first `n` free (savers racing for a name
    /// retry).
    fn create(dir: &Path, key: &str) -> Result<Self, Error> {
        let pid = std::process::id();
        let mut saving = saving();
        let mut n = 0u64;
        loop {
            let path = dir.join(format!(".{key}.{pid}-{n}.tmp"));
            match OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(file) => {
                    saving.push(path.clone());
                    return Ok(Self {
                        path,
                        file: Some(file),
                        renamed: false,
                    });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => n += 1,
                Err(e) => return Err(Error::io_at(&path, "create", e)),
            }
        }
    }

    fn file(&self) -> &File {
        self.file.as_ref().expect("open until dropped")
    }

    /// Records that the file now has its target's name: nothing is left to remove.
    fn renamed(mut self) {
        self.renamed = true;
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        drop(self.file.take());
        if !self.renamed {
            remove_temp(&self.path);
        }
        let mut saving = saving();
        if let Some(i) = saving.iter().position(|p| *p == self.path) {
            saving.swap_remove(i);
        }
    }
}

/// Removes the temporary files of `key` in `dir` (regular files named as [`temp_pid`] reads)
/// that no live process is writing: those with this process's ID that no save in this process
/// holds (left by an earlier process with the same ID, as in a container whose every run has
/// the same), and those of a process that `processes` says is gone. Best effort: a directory
/// that cannot be listed, or a file that cannot be removed, is left as it is and the save goes
/// on.
fn remove_stale_temps(dir: &Path, key: &str, processes: Option<Processes>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let me = std::process::id();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|name| temp_pid(name, key)) else {
            continue;
        };
        // Not following a link: a link or a directory by that name is not a temporary file.
        let Ok(metadata) = entry.metadata() else {
            continue;
        };
        if !metadata.is_file() {
            continue;
        }
        if pid == me {
            // Held until the file is removed, so that no save here creates one by that name
            // meanwhile. Compared by name alone: another directory's save holding the same
            // name keeps this one (until a later save), never the other way round.
            let saving = saving();
            if !saving.iter().any(|p| p.file_name() == Some(&name)) {
                let _ = fs::remove_file(entry.path());
            }
        } else if processes.as_ref().is_some_and(|p| p.gone(pid, &metadata)) {
            // A new process with that ID could have started since the check, but it would
            // not have this name: it exists, so that process's save takes another `n`.
            let _ = fs::remove_file(entry.path());
        }
    }
}

/// Which processes are gone, as `/proc` tells where it lists processes (Linux, and other Unix
/// systems that mount a process file system there).
#[cfg(unix)]
struct Processes {
    /// The user that saves: the owner of its temporary file.
    saver: u32,
}

#[cfg(unix)]
impl Processes {
    /// `None` when `/proc` does not list this process: it then tells nothing.
    fn listed(temp: &File) -> Option<Self> {
        use std::os::unix::fs::MetadataExt;
        let me = format!("/proc/{}", std::process::id());
        if !fs::symlink_metadata(me).is_ok_and(|m| m.is_dir()) {
            return None;
        }
        Some(Self {
            saver: temp.metadata().ok()?.uid(),
        })
    }

    /// Whether process `pid`, which left the temporary file `file`, is surely gone: `/proc`
    /// has no entry for it, and the file is the saver's own or the saver is root (a `/proc`
    /// mounted with `hidepid` hides the live processes of other users). A zombie, or a thread
    /// of a live process, has an entry: its files stay.
    fn gone(&self, pid: u32, file: &fs::Metadata) -> bool {
        use std::os::unix::fs::MetadataExt;
        (self.saver == 0 || file.uid() == self.saver)
            && matches!(
                fs::symlink_metadata(format!("/proc/{pid}")),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound
            )
    }
}

/// No `/proc` to ask: only this process's own stale temporary files are removed.
#[cfg(not(unix))]
struct Processes;

#[cfg(not(unix))]
impl Processes {
    fn listed(_temp: &File) -> Option<Self> {
        None
    }

    fn gone(&self, _pid: u32, _file: &fs::Metadata) -> bool {
        false
    }
}

/// Gives the temporary file `temp` what the file it replaces, `old`, has: on Unix its owner
/// and group (when the saver may: root always, another user only the group, and only to a
/// group of its own; otherwise the new file is the saver's, as after any save that replaces a
/// file), then its mode bits (after the owner, whose change clears the set-ID bits);
/// elsewhere, the read-only flag.
#[cfg(unix)]
fn carry_over(temp: &File, old: &fs::Metadata) -> std::io::Result<()> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt, fchown};
    let new = temp.metadata()?;
    if (new.uid(), new.gid()) != (old.uid(), old.gid())
        && fchown(temp, Some(old.uid()), Some(old.gid())).is_err()
    {
        let _ = fchown(temp, None, Some(old.gid()));
    }
    temp.set_permissions(fs::Permissions::from_mode(old.mode() & 0o7777))
}

#[cfg(not(unix))]
fn carry_over(temp: &File, old: &fs::Metadata) -> std::io::Result<()> {
    temp.set_permissions(old.permissions())
}

#[cfg(unix)]
fn remove_temp(path: &Path) {
    let _ = fs::remove_file(path);
}

/// Where the read-only flag is all of a file's permissions, a read-only file may refuse
/// removal: the flag goes first.
#[cfg(not(unix))]
fn remove_temp(path: &Path) {
    if let Ok(m) = fs::metadata(path) {
        let mut writable = m.permissions();
        writable.set_readonly(false);
        let _ = fs::set_permissions(path, writable);
    }
    let _ = fs::remove_file(path);
}

#[cfg(unix)]
fn sync_dir(dir: &Path) -> Result<(), Error> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io_at(dir, "flush directory", e))
}

#[cfg(not(unix))]
fn sync_dir(_dir: &Path) -> Result<(), Error> {
    Ok(())
}

#[cfg(all(test, not(seen_loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_temporary_name_matches_the_pattern_of_its_own_target_only() {
        assert_eq!(temp_pid(".a.seen.12-0.tmp", "a.seen"), Some(12));
        assert_eq!(
            temp_pid(".a.seen.4294967295-99.tmp", "a.seen"),
            Some(u32::MAX)
        );
        for other in [
            ".a.seen.12-0.tmp.keep",     // a suffix
            "a.seen.12-0.tmp",           // no leading dot
            ".a.seen.12.tmp",            // no counter
            ".a.seen.12-.tmp",           // an empty counter
            ".a.seen.-0.tmp",            // no process ID
            ".a.seen.012-0.tmp",         // a leading zero
            ".a.seen.+12-0.tmp",         // a sign
            ".a.seen.12-x.tmp",          // not a number
            ".a.seen.4294967296-0.tmp",  // past a process ID
            ".b.seen.12-0.tmp",          // another target
            ".a.seen.x.12-0.tmp",        // another target, `a.seen.x`
            ".a.12-0.tmp",               // another target, `a`
            ".a.seen.12-0.tmp.13-0.tmp", // a temporary name's own temporary file
        ] {
            assert_eq!(temp_pid(other, "a.seen"), None, "{other}");
        }
        // The temporary files of `a` never match `a.5`'s pattern, and the other way round.
        assert_eq!(temp_pid(".a.5.12-0.tmp", "a"), None);
        assert_eq!(temp_pid(".a.12-0.tmp", "a.5"), None);
    }

    /// Names past the limit, or not UTF-8, share a key only if they are the same name: two
    /// 250-byte names that differ in their last byte, and two non-UTF-8 names that a lossy
    /// conversion makes equal, get different keys, each short enough for a file name.
    #[test]
    fn only_the_same_name_gives_the_same_key() {
        let long = |last: &str| OsStr::new(&format!("{}{last}", "n".repeat(249))).to_owned();
        let (a, b) = (long("a"), long("b"));
        assert_eq!(temp_key(OsStr::new("state.seen")), "state.seen");
        assert_eq!(temp_key(&a), temp_key(&a));
        assert_ne!(temp_key(&a), temp_key(&b));
        assert!(temp_key(&a).len() <= TEMP_NAME_BYTES);
        #[cfg(unix)]
        {
            use std::os::unix::ffi::OsStrExt;
            let (x, y) = (
                OsStr::from_bytes(&[0xff; 200]),
                OsStr::from_bytes(&[0xfe; 200]),
            );
            assert_eq!(x.to_string_lossy(), y.to_string_lossy());
            assert_ne!(temp_key(x), temp_key(y));
            assert!(temp_key(x).len() <= TEMP_NAME_BYTES);
            let (x, y) = (OsStr::from_bytes(b"s\xff"), OsStr::from_bytes(b"s\xfe"));
            assert_ne!(temp_key(x), temp_key(y));
        }
    }
}
