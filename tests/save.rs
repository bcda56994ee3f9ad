//! What a save does to the files around it (Unix): through symbolic links it writes the file
//! they lead to and keeps the links; the saved file keeps the permissions and owner of the one
//! it replaces; and the temporary files that crashed saves left behind (a `kill -9` midway)
//! are removed by the next save of the same file, never those that a live save is writing.
#![cfg(unix)]

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use seen::{AtomicBloomFilter, Error};

/// A directory of this test's own, emptied.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("seen-save-{}-{name}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A small filter holding `key`.
fn holding(key: &str) -> AtomicBloomFilter {
    let filter = AtomicBloomFilter::builder(1000).fpr(0.01).build().unwrap();
    filter.insert(key);
    filter
}

fn holds(path: &Path, key: &str) -> bool {
    AtomicBloomFilter::load(path).unwrap().contains(key)
}

fn is_link(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
}

/// A child process killed (SIGKILL) and reaped when dropped, whatever the test did.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A process ID that no process has: above the kernel's limit (`pid_max`, at most 2^22).
fn dead_pid() -> u32 {
    let max: u32 = fs::read_to_string("/proc/sys/kernel/pid_max")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(1 << 22);
    max + 1
}

#[test]
fn save_through_a_symlink_writes_its_target_and_keeps_the_link() {
    let dir = scratch("links");
    let (data, links) = (dir.join("data"), dir.join("links"));
    fs::create_dir_all(&data).unwrap();
    fs::create_dir_all(&links).unwrap();
    let target = data.join("state.seen");
    holding("old").save(&target).unwrap();
    // An absolute link, a relative one read from its own directory (not the current one), and
    // a chain: an absolute link to a relative link in another directory, to the file.
    let absolute = links.join("absolute");
    symlink(&target, &absolute).unwrap();
    let relative = links.join("relative");
    symlink("../data/state.seen", &relative).unwrap();
    let middle = data.join("middle");
    symlink("state.seen", &middle).unwrap();
    let chain = links.join("chain");
    symlink(&middle, &chain).unwrap();
    for (link, key) in [(&absolute, "a"), (&relative, "r"), (&chain, "c")] {
        holding(key).save(link).unwrap();
        assert!(is_link(link), "{} was replaced", link.display());
        assert!(
            holds(&target, key),
            "{} did not reach the file",
            link.display()
        );
        assert!(!holds(&target, "old"));
    }
    assert_eq!(
        fs::read_link(&relative).unwrap(),
        Path::new("../data/state.seen")
    );
    assert_eq!(fs::read_link(&chain).unwrap(), middle);
    assert!(is_link(&middle));
    // No temporary file left, where the links are or where the file is.
    assert_eq!(files_in(&links), ["absolute", "chain", "relative"]);
    assert_eq!(files_in(&data), ["middle", "state.seen"]);
    fs::remove_dir_all(&dir).unwrap();
}

/// A link to nothing yet (set up before the first run): the save creates the file it names.
/// A link into a directory that does not exist, or a loop of links, is an error that names
/// the link, and leaves it as it was.
#[test]
fn save_through_a_dangling_symlink_creates_its_target() {
    let dir = scratch("dangling");
    let link = dir.join("state.seen");
    symlink("data/new.seen", &link).unwrap();
    fs::create_dir(dir.join("data")).unwrap();
    holding("k").save(&link).unwrap();
    assert!(is_link(&link));
    assert!(holds(&dir.join("data/new.seen"), "k"));

    let nowhere = dir.join("nowhere.seen");
    symlink("missing/new.seen", &nowhere).unwrap();
    match holding("k").save(&nowhere) {
        Err(Error::Io { message, .. }) => {
            assert!(message.contains("nowhere.seen"), "{message}");
            assert!(message.contains("missing"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert!(is_link(&nowhere));

    let (a, b) = (dir.join("loop-a"), dir.join("loop-b"));
    symlink("loop-b", &a).unwrap();
    symlink("loop-a", &b).unwrap();
    match holding("k").save(&a) {
        Err(Error::Io { message, .. }) => assert!(message.contains("loop-a"), "{message}"),
        other => panic!("{other:?}"),
    }
    assert!(is_link(&a) && is_link(&b));
    assert_eq!(
        files_in(&dir),
        ["data", "loop-a", "loop-b", "nowhere.seen", "state.seen"]
    );
    fs::remove_dir_all(&dir).unwrap();
}

/// The saved file has the mode of the one it replaces, also through a link; a new file gets
/// the mode any new file gets (the process's umask).
#[test]
fn save_keeps_the_mode_of_the_file_it_replaces() {
    let dir = scratch("mode");
    let path = dir.join("state.seen");
    for mode in [0o600, 0o640, 0o604, 0o400, 0o666] {
        holding("old").save(&path).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(mode)).unwrap();
        holding("new").save(&path).unwrap();
        assert!(holds(&path, "new"));
        let kept = fs::metadata(&path).unwrap().mode() & 0o7777;
        assert_eq!(kept, mode, "{mode:o} came back {kept:o}");
    }
    let link = dir.join("link");
    symlink("state.seen", &link).unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
    holding("linked").save(&link).unwrap();
    assert!(holds(&path, "linked"));
    assert_eq!(fs::metadata(&path).unwrap().mode() & 0o7777, 0o600);

    let fresh = dir.join("fresh.seen");
    holding("k").save(&fresh).unwrap();
    fs::write(dir.join("plain"), b"x").unwrap();
    let umask_mode = fs::metadata(dir.join("plain")).unwrap().mode() & 0o7777;
    assert_eq!(fs::metadata(&fresh).unwrap().mode() & 0o7777, umask_mode);
    fs::remove_dir_all(&dir).unwrap();
}

/// A root process (a cron job, an administrator) saving a user's file leaves it the user's,
/// so that the user can still read a 0600 state. Only root may give a file away: as another
/// user there is nothing to check.
#[test]
fn save_by_root_keeps_the_owner_of_the_file_it_replaces() {
    let dir = scratch("owner");
    let path = dir.join("state.seen");
    holding("old").save(&path).unwrap();
    if fs::metadata(&path).unwrap().uid() != 0 {
        fs::remove_dir_all(&dir).unwrap();
        return; // not root
    }
    let nobody = 65534;
    std::os::unix::fs::chown(&path, Some(nobody), Some(nobody)).unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
    holding("new").save(&path).unwrap();
    assert!(holds(&path, "new"));
    let saved = fs::metadata(&path).unwrap();
    assert_eq!((saved.uid(), saved.gid()), (nobody, nobody));
    assert_eq!(saved.mode() & 0o7777, 0o600);
    fs::remove_dir_all(&dir).unwrap();
}

/// A process that lives until the test drops it: `cat` reading a pipe that the test holds
/// open (and kills on drop).
fn live_process() -> Killed {
    Killed(
        Command::new("cat")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

/// What crashed saves of `state.seen` left is removed by its next save: a temporary file of
/// a process that is gone, and one with this process's ID that no save here is writing (an
/// earlier process had the ID, as every run in a container may). Kept: the temporary file of
/// a live process (one that lives until the test ends, however long it takes), and anything
/// not named as a temporary file of exactly this target.
#[test]
fn the_next_save_removes_stale_temps_of_its_target_and_nothing_else() {
    let dir = scratch("stale");
    let path = dir.join("state.seen");
    holding("old").save(&path).unwrap();
    let (dead, me) = (dead_pid(), std::process::id());
    let live = live_process();
    let live_pid = live.0.id();
    let stale = [
        format!(".state.seen.{dead}-0.tmp"),
        format!(".state.seen.{dead}-17.tmp"),
        format!(".state.seen.{me}-5.tmp"),
    ];
    let kept = [
        format!(".state.seen.{live_pid}-0.tmp"),
        format!(".state.seen.{dead}-0.tmp.keep"),
        format!(".state.seen.{dead}.tmp"),
        format!(".state.seen.0{dead}-0.tmp"),
        format!(".state.seen.{dead}-x.tmp"),
        format!("state.seen.{dead}-0.tmp"),
        format!(".other.seen.{dead}-0.tmp"),
        format!(".state.{dead}-0.tmp"),
        format!(".state.seen.x.{dead}-0.tmp"),
    ];
    for name in stale.iter().chain(&kept) {
        fs::write(dir.join(name), b"partial state").unwrap();
    }
    // A directory and a link by a stale file's name are not temporary files.
    let (subdir, link) = (
        format!(".state.seen.{dead}-1.tmp"),
        format!(".state.seen.{dead}-2.tmp"),
    );
    fs::create_dir(dir.join(&subdir)).unwrap();
    symlink("state.seen", dir.join(&link)).unwrap();

    holding("new").save(&path).unwrap();
    assert!(holds(&path, "new"));
    let mut expected: Vec<String> = kept.to_vec();
    expected.extend([subdir, link, "state.seen".to_owned()]);
    expected.sort();
    assert_eq!(files_in(&dir), expected);

    // A 250-byte name's temporary files are not named by its first 128 bytes alone: a stale
    // file of another target with the same start (as a cut name would give) stays.
    let long = "n".repeat(250);
    let cut = format!(".{}.{dead}-0.tmp", &long[..128]);
    fs::write(dir.join(&cut), b"partial").unwrap();
    holding("k").save(dir.join(&long)).unwrap();
    assert!(holds(&dir.join(&long), "k"));
    expected.extend([cut, long]);
    expected.sort();
    assert_eq!(files_in(&dir), expected);
    drop(live);
    fs::remove_dir_all(&dir).unwrap();
}

/// Threads of one process save one file at once, again and again: no save removes another's
/// temporary file (each would then fail to rename it), each leaves none, and a stale one
/// with this process's ID, from an earlier process, is removed. Whether two saves overlap here
/// is the scheduler's; the next test makes them.
#[test]
fn concurrent_saves_keep_each_others_temps() {
    let dir = scratch("concurrent");
    let path = dir.join("state.seen");
    let stale = format!(".state.seen.{}-9.tmp", std::process::id());
    fs::write(dir.join(&stale), b"partial").unwrap();
    // 4 MB: long enough to write that the saves may overlap.
    let filter = AtomicBloomFilter::builder(3_000_000)
        .fpr(0.01)
        .build()
        .unwrap();
    filter.insert("k");
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..10 {
                    filter.save(&path).unwrap();
                }
            });
        }
    });
    assert!(holds(&path, "k"));
    assert_eq!(files_in(&dir), ["state.seen"]);
    fs::remove_dir_all(&dir).unwrap();
}

/// Four threads of one process save one file, and meet at the `save.temp.created` pause point
/// (each has created its temporary file, none has yet looked for stale ones): the four
/// temporary files exist side by side. Released, each save removes the stale file with this
/// process's ID, keeps the three others' files, and renames its own: every save succeeds and
/// none leaves a file. Three rounds. Checked to fail: a save that removes every temporary file
/// of its target with this process's ID but its own (no account of the saves in progress)
/// makes the others' renames fail.
#[cfg(feature = "failpoints")]
#[test]
fn saves_paused_together_keep_each_others_temps() {
    use std::sync::{Arc, Barrier};
    const SAVERS: usize = 4;
    let dir = scratch("paused");
    let path = dir.join("state.seen");
    let me = std::process::id();
    let filter = holding("k");
    for round in 0..3 {
        let stale = format!(".state.seen.{me}-{}.tmp", 1000 + round);
        fs::write(dir.join(&stale), b"partial").unwrap();
        // The savers and the test meet here: once every temporary file exists, and once the
        // test has listed them.
        let met = Arc::new(Barrier::new(SAVERS + 1));
        let listed = std::thread::scope(|s| {
            for _ in 0..SAVERS {
                let filter = &filter;
                let (path, met) = (&path, Arc::clone(&met));
                s.spawn(move || {
                    let _armed = seen::failpoints::arm(move |point| {
                        if point == "save.temp.created" {
                            met.wait();
                            met.wait();
                        }
                    });
                    filter.save(path).unwrap();
                });
            }
            met.wait();
            let listed = files_in(&dir);
            met.wait();
            listed
        });
        let temps: Vec<&String> = listed
            .iter()
            .filter(|n| n.starts_with(&format!(".state.seen.{me}-")) && **n != stale)
            .collect();
        assert_eq!(temps.len(), SAVERS, "round {round}: {listed:?}");
        assert!(temps.iter().all(|n| n.ends_with(".tmp")), "{listed:?}");
        assert!(listed.contains(&stale), "{listed:?}");
        assert!(holds(&path, "k"));
        assert_eq!(files_in(&dir), ["state.seen"], "round {round}");
    }
    fs::remove_dir_all(&dir).unwrap();
}

/// Set in the child process of the next tests: the file it saves to.
const CHILD_SAVES_TO: &str = "SEEN_TEST_CHILD_SAVES_TO";

/// A filter of 24 MB holding "child": what the child processes save.
fn large() -> AtomicBloomFilter {
    let filter = AtomicBloomFilter::builder(20_000_000)
        .fpr(0.01)
        .build()
        .unwrap();
    filter.insert("child");
    filter
}

/// The temporary files in `dir` of the process `pid`.
fn temps_of(dir: &Path, pid: u32) -> Vec<String> {
    files_in(dir)
        .into_iter()
        .filter(|n| n.starts_with(&format!(".state.seen.{pid}-")) && n.ends_with(".tmp"))
        .collect()
}

/// A process saving a large filter is stopped midway by the kernel: its file size limit
/// (`ulimit -f`, 1 MiB or 2 MiB as the shell counts blocks; no core file) ends it with `SIGXFSZ` on the
/// write that would pass it. It leaves its partial temporary file, and the next save of the
/// same file, from another process, removes it. The child is this test binary, run again for
/// this test alone under the limit.
#[test]
fn a_save_killed_midway_leaves_a_temp_that_the_next_save_removes() {
    if let Some(path) = std::env::var_os(CHILD_SAVES_TO) {
        large().save(&path).unwrap();
        unreachable!("the save passed the file size limit");
    }
    let dir = scratch("killed");
    let path = dir.join("state.seen");
    holding("old").save(&path).unwrap();
    let mut child = Killed(
        Command::new("sh")
            .arg("-c")
            .arg("ulimit -c 0 && ulimit -f 2048 && exec \"$0\" --exact \"$1\" --test-threads=1")
            .arg(std::env::current_exe().unwrap())
            .arg("a_save_killed_midway_leaves_a_temp_that_the_next_save_removes")
            .env(CHILD_SAVES_TO, &path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let status = child.0.wait().unwrap();
    assert_eq!(status.signal(), Some(libc_sigxfsz()), "{status}");
    let left = temps_of(&dir, child.0.id());
    assert_eq!(left.len(), 1, "{:?}", files_in(&dir));
    let size = fs::metadata(dir.join(&left[0])).unwrap().len();
    assert!((1 << 20..=2 << 20).contains(&size), "{size}");
    assert!(holds(&path, "old"));
    holding("after").save(&path).unwrap();
    assert!(holds(&path, "after"));
    assert_eq!(files_in(&dir), ["state.seen"]);
    fs::remove_dir_all(&dir).unwrap();
}

/// `SIGXFSZ`: 25 on Linux; elsewhere the value of the system's `kill -l XFSZ`.
fn libc_sigxfsz() -> i32 {
    if cfg!(target_os = "linux") {
        return 25;
    }
    let out = Command::new("sh")
        .args(["-c", "kill -l XFSZ"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

/// The line a child of the next test prints once paused, before the test kills it.
#[cfg(feature = "failpoints")]
const PAUSED: &str = "paused at save.temp.written";

/// A process is killed (SIGKILL) at a chosen step of its save: it has written the whole file
/// to its temporary file and not yet renamed it (the `save.temp.written` pause point, where
/// the child prints a line and waits). It leaves that temporary file, holding the whole
/// filter, and the target as it was; the next save of the same file, from another process,
/// removes it. The child is this test binary, run again for this test alone.
#[cfg(feature = "failpoints")]
#[test]
fn a_save_killed_before_its_rename_leaves_a_temp_that_the_next_save_removes() {
    use std::io::{BufRead, BufReader, Read, Write};
    use std::time::Duration;
    if let Some(path) = std::env::var_os(CHILD_SAVES_TO) {
        let _armed = seen::failpoints::arm(|point| {
            if point == "save.temp.written" {
                let mut out = std::io::stdout().lock();
                writeln!(out, "{PAUSED}").unwrap();
                out.flush().unwrap();
                // Until the test kills this process (or, should the test itself die, closes
                // the pipe).
                let _ = std::io::stdin().read_to_end(&mut Vec::new());
                std::process::exit(1);
            }
        });
        large().save(&path).unwrap();
        unreachable!("the save went past its pause point");
    }
    let dir = scratch("paused-kill");
    let path = dir.join("state.seen");
    holding("old").save(&path).unwrap();
    let mut child = Killed(
        Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "a_save_killed_before_its_rename_leaves_a_temp_that_the_next_save_removes",
                "--test-threads=1",
                "--nocapture",
            ])
            .env(CHILD_SAVES_TO, &path)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let stdout = child.0.stdout.take().unwrap();
    let (line, paused) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(stdout).lines() {
            let Ok(l) = l else { break };
            if l.ends_with(PAUSED) {
                let _ = line.send(());
                break;
            }
        }
    });
    paused
        .recv_timeout(Duration::from_secs(120))
        .expect("the child never reached save.temp.written");
    child.0.kill().unwrap();
    let status = child.0.wait().unwrap();
    assert_eq!(status.signal(), Some(9), "{status}");
    let left = temps_of(&dir, child.0.id());
    assert_eq!(left.len(), 1, "{:?}", files_in(&dir));
    // The whole filter, not renamed.
    let mut whole = Vec::new();
    large().write_to(&mut whole).unwrap();
    assert_eq!(fs::read(dir.join(&left[0])).unwrap(), whole);
    assert!(holds(&path, "old"));
    holding("after").save(&path).unwrap();
    assert!(holds(&path, "after"));
    assert_eq!(files_in(&dir), ["state.seen"]);
    fs::remove_dir_all(&dir).unwrap();
}
