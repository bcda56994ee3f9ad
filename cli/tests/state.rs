//! `seen dedup --state` against what loses state: two runs at once, a reader that goes away,
//! a second signal during the save; and what drops records silently: overfill, keyless records.
#![cfg(unix)]

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

mod common;

use common::{scratch, seen, start, stderr_of};

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// `n` distinct lines of 13 bytes: `line-0000000\n`, ...
fn distinct(n: usize) -> Vec<u8> {
    (0..n)
        .flat_map(|i| format!("line-{i:07}\n").into_bytes())
        .collect()
}

/// While one run holds a state, a second on the same file (by its path or through a symbolic
/// link) fails at once with one line naming the first, and leaves the state alone; the first
/// then saves as usual.
#[test]
fn a_second_run_on_a_state_in_use_fails_at_once_naming_the_first() {
    let dir = scratch("lock");
    let state = dir.join("st");
    let link = dir.join("link");
    std::os::unix::fs::symlink("st", &link).unwrap();
    let args = |path: &Path| -> Vec<String> {
        [
            "dedup",
            "--state",
            path.to_str().unwrap(),
            "--capacity",
            "1000",
        ]
        .map(String::from)
        .to_vec()
    };
    assert_eq!(seen(&strs(&args(&state)), b"a\n").stdout, b"a\n");
    let before = std::fs::read(&state).unwrap();
    let mut first = start(&strs(&args(&state)));
    let mut stdin = first.stdin.take().unwrap();
    stdin.write_all(b"b\n").unwrap();
    stdin.flush().unwrap();
    // The first run holds the lock once its output has started.
    let mut out = first.stdout.take().unwrap();
    let mut got = [0u8; 2];
    out.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"b\n");
    for path in [&state, &link] {
        // A run that waited for the lock would never end (the first holds it until its input
        // ends): `seen` fails the test after its deadline.
        let second = seen(&strs(&args(path)), b"c\n");
        let err = String::from_utf8(second.stderr).unwrap();
        assert_eq!(second.status.code(), Some(2), "{err}");
        assert!(second.stdout.is_empty());
        assert!(
            err.contains("is in use by another run of seen")
                && err.contains(&format!("(process {})", first.id())),
            "{err}"
        );
        assert_eq!(err.lines().count(), 1, "{err}");
        assert_eq!(std::fs::read(&state).unwrap(), before);
    }
    drop(stdin);
    assert!(first.wait().unwrap().success());
    // Both runs' keys, none lost.
    assert_eq!(seen(&strs(&args(&link)), b"a\nb\nc\n").stdout, b"c\n");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A hard link is another name for the state file: the lock, beside the name (`NAME.lock`), does
/// not cover it, and a save (a new file renamed over the name) would leave the other name on
/// the old state: two runs, one by each name, both ran and one's keys were lost. A state with
/// more than one link is refused by every name, before anything is printed, and left alone.
#[test]
fn a_state_with_a_second_hard_link_is_refused_by_every_name() {
    let dir = scratch("hardlink");
    let state = dir.join("st");
    let link = dir.join("link");
    let args = |path: &Path| -> Vec<String> {
        [
            "dedup",
            "--state",
            path.to_str().unwrap(),
            "--capacity",
            "1000",
        ]
        .map(String::from)
        .to_vec()
    };
    assert_eq!(seen(&strs(&args(&state)), b"a\n").stdout, b"a\n");
    std::fs::hard_link(&state, &link).unwrap();
    let before = std::fs::read(&state).unwrap();
    for path in [&state, &link] {
        let out = seen(&strs(&args(path)), b"b\n");
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(2), "{}: {err}", path.display());
        assert!(out.stdout.is_empty(), "{}: printed", path.display());
        assert!(
            err.contains("has 2 names (hard links)") && err.lines().count() == 1,
            "{err}"
        );
        assert_eq!(std::fs::read(&state).unwrap(), before);
    }
    // One name again: it runs.
    std::fs::remove_file(&link).unwrap();
    assert_eq!(seen(&strs(&args(&state)), b"a\nb\n").stdout, b"b\n");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `seen dedup --state s | head`: the reader goes away; the run saves the state with exactly
/// the records whose write the system accepted, and exits 141 as a tool killed by SIGPIPE;
/// the next run prints exactly the records that were not written, in order.
#[test]
fn a_broken_pipe_saves_exactly_the_records_written() {
    let lines = 400_000;
    let input = distinct(lines);
    for (threads, structure) in [
        ("1", &[][..]),
        ("2", &[][..]),
        ("2", &["--fixed"][..]),
        ("1", &["--window", "7d", "--period", "1d"][..]),
        ("2", &["--window", "7d", "--period", "1d"][..]),
    ] {
        let case = format!("--threads {threads} {structure:?}");
        let dir = scratch("pipe");
        let state = dir.join("st");
        let mut args = vec![
            "dedup",
            "--state",
            state.to_str().unwrap(),
            "--capacity",
            "1000000",
            "--threads",
            threads,
        ];
        args.extend_from_slice(structure);
        let mut child = start(&args);
        let mut stdin = child.stdin.take().unwrap();
        let feed = {
            let input = input.clone();
            std::thread::spawn(move || {
                let _ = stdin.write_all(&input);
            })
        };
        // Read about 100 KB, then go away.
        let mut out = child.stdout.take().unwrap();
        // What the pipe holds: 64 KiB unless the system says otherwise.
        #[cfg(target_os = "linux")]
        let capacity =
            nix::fcntl::fcntl(&out, nix::fcntl::FcntlArg::F_GETPIPE_SZ).unwrap() as usize;
        #[cfg(not(target_os = "linux"))]
        let capacity = 64 << 10;
        let mut read = Vec::new();
        let mut buf = [0u8; 4096];
        while read.len() < 100_000 {
            let n = out.read(&mut buf).unwrap();
            assert!(n > 0, "{case}: the output ended early");
            read.extend_from_slice(&buf[..n]);
        }
        drop(out);
        let err = stderr_of(&mut child);
        let status = child.wait().unwrap();
        feed.join().unwrap();
        assert_eq!(status.code(), Some(141), "{case}: {err}");
        assert!(err.is_empty(), "{case}: {err}");
        // What was read: the first lines, in order.
        let whole = read.len() - read.len() % 13;
        assert_eq!(read[..whole], input[..whole], "{case}");
        // The next run prints every line from some point on: the lines in between were in
        // the pipe when it closed (written, and lost with the pipe: at most its capacity, as
        // the README says; a reader that reads ahead and exits, such as `head`, loses what it
        // read and did not use too, which this reader does not).
        let next = seen(&args, &input);
        assert!(next.status.success(), "{case}");
        let printed = next.stdout;
        assert!(
            input.ends_with(&printed),
            "{case}: the next run printed a line twice or out of order"
        );
        let resumed = input.len() - printed.len();
        assert!(
            resumed >= whole && resumed <= read.len() + capacity,
            "{case}: {} bytes read, the next run resumed at {resumed} (the pipe holds \
             {capacity})",
            read.len()
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

/// Signals during the final save, each sent while the run is paused in it (the save begun as a
/// second signal sees it, the file not yet written) and once the one before was handled. One
/// or two end the run with status 130 and the new state saved, the second saying that the save
/// ends in a moment; a third stops the run at once, with status 2 and a line saying that the
/// file holds its previous save or this run's, whole: here the previous one, which loads. The
/// same whether the run reached the end of its input or a first signal, before the save, ended
/// it. (The library's own tests check that the next save removes a stopped save's temporary
/// file: `src/persist/save.rs`.)
#[cfg(feature = "failpoints")]
#[test]
fn signals_during_the_save_say_what_the_state_holds() {
    use common::{Failpoints, Stderr, command, signal, wait_with_deadline};
    use nix::sys::signal::Signal::{SIGINT, SIGTERM};
    use std::io::{BufRead, BufReader};
    let dir = scratch("save-signals");
    let state = dir.join("st");
    let args = [
        "dedup",
        "--capacity",
        "1000",
        "--state",
        state.to_str().unwrap(),
    ];
    assert_eq!(seen(&args, b"old\n").stdout, b"old\n");
    let old = std::fs::read(&state).unwrap();
    // (signals before the save, signals during it, threads)
    for (before, during, threads) in [
        (0, 1, "1"),
        (0, 1, "2"),
        (0, 2, "1"),
        (0, 2, "2"),
        (0, 3, "2"),
        (1, 1, "2"),
        (1, 1, "1"),
        (1, 2, "1"),
        (1, 2, "2"),
    ] {
        let case =
            format!("{before} signal(s) before the save, {during} during it, --threads {threads}");
        std::fs::write(&state, &old).unwrap();
        let mut points = Failpoints::new(&dir, &["save", "signal"]);
        let mut run = command(&[&args[..], &["--threads", threads]].concat());
        // Each signal is a second one once the first was handled: no quarter second to wait.
        points.apply(&mut run).env("SEEN_SAME_SIGNAL_MS", "0");
        let mut child = run.spawn().unwrap();
        let pid = child.id();
        let mut err = Stderr::of(&mut child);
        let mut stdin = child.stdin.take();
        let input = stdin.as_mut().unwrap();
        input.write_all(b"new\n").unwrap();
        input.flush().unwrap();
        // Its record is written: the run has taken it in (a signal before could end the run
        // with it unread, and the state rightly without it).
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        out.read_line(&mut first).unwrap();
        assert_eq!(first, "new\n", "{case}");
        // SIGINT and SIGTERM alike.
        let kinds = [SIGINT, SIGTERM, SIGINT];
        let mut sent = 0;
        let mut send = |err: &mut Stderr, points: &mut Failpoints| {
            signal(pid, kinds[sent]);
            sent += 1;
            // The first two are handled (the handler then pauses, and is let go); a third
            // ends the run.
            if sent < 3 {
                err.wait_for("seen: failpoint signal");
                points.release("signal");
            }
        };
        if before == 1 {
            // The input stays open: the signal ends the run.
            send(&mut err, &mut points);
        } else {
            // The end of the input ends the run.
            drop(stdin.take());
        }
        err.wait_for("seen: failpoint save");
        for _ in 0..during {
            send(&mut err, &mut points);
        }
        if sent < 3 {
            points.release("save");
        }
        let end = wait_with_deadline(child, &case);
        let mut rest = Vec::new();
        out.read_to_end(&mut rest).unwrap();
        let err = err.all();
        drop(stdin);
        assert!(rest.is_empty(), "{case}: {rest:?}");
        let saved = seen(&args, b"new\nold\n");
        assert!(saved.status.success(), "{case}: the state does not load");
        match sent {
            1 | 2 => {
                assert_eq!(end.status.code(), Some(130), "{case}: {err}");
                assert!(
                    err.contains("interrupted after 1 record\n"),
                    "{case}: {err}"
                );
                assert_eq!(err.contains("ends in a moment"), sent == 2, "{case}: {err}");
                assert!(
                    saved.stdout.is_empty(),
                    "{case}: the state lacks the new key"
                );
            }
            _ => {
                assert_eq!(end.status.code(), Some(2), "{case}: {err}");
                assert!(
                    err.contains("the file holds its previous save or this run's, whole"),
                    "{case}: {err}"
                );
                assert_eq!(saved.stdout, b"new\n", "{case}: the previous state");
            }
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A second signal before the save (the first ended the run, whose last records wait for a
/// reader that does not read): the run exits at once with status 2, saying that the state keeps
/// its previous save, and it does.
#[cfg(feature = "failpoints")]
#[test]
fn a_second_signal_before_the_save_keeps_the_previous_state() {
    use common::{Failpoints, Stderr, command, feed, signal, wait_with_deadline};
    use nix::sys::signal::Signal::SIGINT;
    let dir = scratch("before-save");
    let state = dir.join("st");
    let args = [
        "dedup",
        "--capacity",
        "1000000",
        "--state",
        state.to_str().unwrap(),
    ];
    assert_eq!(seen(&args, b"old\n").stdout, b"old\n");
    let old = std::fs::read(&state).unwrap();
    for threads in ["1", "2"] {
        let mut points = Failpoints::new(&dir, &["signal"]);
        let mut run = command(&[&args[..], &["--threads", threads]].concat());
        points.apply(&mut run).env("SEEN_SAME_SIGNAL_MS", "0");
        let mut child = run.spawn().unwrap();
        let mut err = Stderr::of(&mut child);
        // A first record of 100 KiB: its output cannot fit a pipe's buffer (64 KiB), so once
        // the run has read it, its writes stay blocked while nobody reads them, and the save
        // cannot begin. The long record and 65 KiB more: once written, the run has read it.
        let mut text = vec![b'x'; 100 << 10];
        text.push(b'\n');
        let long = text.len();
        text.extend(distinct(10_000));
        let (writer, read) = feed(child.stdin.take().unwrap(), text, long + (65 << 10));
        read.recv_timeout(common::DEADLINE)
            .expect("the run reads its input");
        // Its first byte is out: the run has decided it (a run that had not would end at the
        // first signal with nothing to write).
        let mut out = child.stdout.take().unwrap();
        let mut first = [0u8; 1];
        out.read_exact(&mut first).unwrap();
        assert_eq!(first[0], b'x');
        signal(child.id(), SIGINT);
        err.wait_for("seen: failpoint signal");
        points.release("signal");
        // Handled, and the run cannot end: its output is blocked.
        assert!(child.try_wait().unwrap().is_none(), "--threads {threads}");
        signal(child.id(), SIGINT);
        let end = wait_with_deadline(child, threads);
        let err = err.all();
        drop(out);
        drop(writer.join().unwrap());
        assert_eq!(end.status.code(), Some(2), "--threads {threads}: {err}");
        assert!(
            err.contains("interrupted again before --state was saved: it keeps its previous save"),
            "--threads {threads}: {err}"
        );
        assert_eq!(std::fs::read(&state).unwrap(), old, "--threads {threads}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A first signal while the output is blocked (its reader does not read) says in one line what
/// the run does meanwhile (it writes the records decided, then saves) and what a second signal
/// does. When the reader then goes away (as a Ctrl-C in a terminal makes a pipeline's reader
/// do), the run ends as interrupted: status 130, not the 141 of a reader gone by itself, with
/// the state saved.
#[cfg(feature = "failpoints")]
#[test]
fn a_first_signal_says_what_the_run_does_and_a_reader_gone_after_it_is_an_interrupt() {
    use common::{Failpoints, Stderr, command, feed, signal, wait_with_deadline};
    use nix::sys::signal::Signal::SIGINT;
    let dir = scratch("first-signal");
    let state = dir.join("st");
    let args = [
        "dedup",
        "--capacity",
        "1000000",
        "--state",
        state.to_str().unwrap(),
    ];
    assert_eq!(seen(&args, b"old\n").stdout, b"old\n");
    for threads in ["1", "2"] {
        let mut points = Failpoints::new(&dir, &["signal"]);
        let mut run = command(&[&args[..], &["--threads", threads]].concat());
        points.apply(&mut run);
        let mut child = run.spawn().unwrap();
        let mut err = Stderr::of(&mut child);
        // A first record of 100 KiB, more than a pipe holds: once the run has read it, its
        // writes stay blocked while nobody reads them (as in the test above).
        let mut text = vec![b'x'; 100 << 10];
        text.push(b'\n');
        let long = text.len();
        text.extend(distinct(10_000));
        let (writer, read) = feed(child.stdin.take().unwrap(), text, long + (65 << 10));
        read.recv_timeout(common::DEADLINE)
            .expect("the run reads its input");
        let mut out = child.stdout.take().unwrap();
        let mut first = [0u8; 1];
        out.read_exact(&mut first).unwrap();
        assert_eq!(first[0], b'x');
        signal(child.id(), SIGINT);
        err.wait_for(&format!(
            "seen: interrupted: writing the records already decided (as fast as the \
             output takes them), then saving --state {}; interrupt again to quit without saving",
            state.display()
        ));
        err.wait_for("seen: failpoint signal");
        points.release("signal");
        assert!(child.try_wait().unwrap().is_none(), "--threads {threads}");
        // The reader goes away: the blocked write fails.
        drop(out);
        let end = wait_with_deadline(child, threads);
        let err = err.all();
        drop(writer.join().unwrap());
        assert_eq!(end.status.code(), Some(130), "--threads {threads}: {err}");
        assert!(
            err.contains("interrupted after"),
            "--threads {threads}: {err}"
        );
        // Saved, and loads: the old key is in it.
        let again = seen(&args, b"old\n");
        assert!(again.status.success(), "--threads {threads}");
        assert_eq!(again.stdout, b"", "--threads {threads}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// With no sizing flags, `seen dedup` grows: 100 times its capacity of distinct lines, and
/// it drops no more than its rate says, silently. A fixed-size filter past its capacity says
/// so on standard error once, naming the flag, with or without --stats.
#[test]
fn the_default_never_overfills_and_a_fixed_filter_warns_once() {
    let lines = 100_000;
    let input = distinct(lines);
    let out = seen(&["dedup", "--capacity", "1000"], &input);
    assert!(out.status.success());
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // At most --fpr 1e-4 of the 100,000 new lines are dropped: 10 expected; 40 or more has a
    // probability below 1e-11 (Poisson(10)).
    let dropped = lines - out.stdout.len() / 13;
    assert!(dropped < 40, "{dropped} new lines dropped");
    for stats in [false, true] {
        for (flags, names) in [
            (&["--fixed", "--capacity", "1000"][..], "drop --fixed"),
            (&["--memory", "4KiB"][..], "--memory 4KiB holds"),
        ] {
            let mut args = vec!["dedup"];
            args.extend_from_slice(flags);
            if stats {
                args.push("--stats");
            }
            let out = seen(&args, &input);
            assert!(out.status.success());
            let err = String::from_utf8(out.stderr).unwrap();
            let warnings: Vec<_> = err.lines().filter(|l| l.contains("warning")).collect();
            assert_eq!(warnings.len(), 1, "{args:?}: {err}");
            assert!(warnings[0].contains(names), "{args:?}: {err}");
        }
    }
    // A state filled to its capacity: no warning while no new key comes (its estimate may be a
    // little above the capacity), one when one does.
    let dir = scratch("full");
    let state = dir.join("st");
    let full = [
        "dedup",
        "--fixed",
        "--capacity",
        "1000",
        "--state",
        state.to_str().unwrap(),
    ];
    assert!(seen(&full, &input[..13 * 1000]).status.success());
    let out = seen(&full, &input[..13]);
    assert!(out.status.success() && out.stdout.is_empty());
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = seen(&full, &input[13 * 1000..13 * 1100]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("warning"));
    std::fs::remove_dir_all(&dir).unwrap();
    // A window: more new keys in one period than --capacity.
    let out = seen(
        &[
            "dedup",
            "--window",
            "1d",
            "--period",
            "1d",
            "--capacity",
            "1000",
        ],
        &input[..13 * 5000],
    );
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("warning: more than --capacity 1000 new keys in one --period 1d"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
}

/// JSON records that are not objects (or lack the key's path) are an error at their line,
/// never a key shared by all of them; `--missing-key print` passes them through, each one.
#[test]
fn records_without_a_key_are_refused_never_merged() {
    for (record, what) in [
        (&b"1\n"[..], "a number"),
        (b"\"x\"\n", "a string"),
        (b"[3]\n", "an array"),
        (b"true\n", "a boolean"),
        (b"null\n", "null"),
    ] {
        for threads in ["1", "2"] {
            let input = [&b"{\"id\":7}\n"[..], record].concat();
            let out = seen(&["dedup", "--json-key", "id", "--threads", threads], &input);
            assert_eq!(out.status.code(), Some(2));
            let err = String::from_utf8(out.stderr).unwrap();
            assert!(
                err.starts_with("seen: standard input, line 2: no key at id")
                    && err.contains(&format!("the record is {what}, not an object")),
                "{err}"
            );
            assert_eq!(out.stdout, b"{\"id\":7}\n");
        }
    }
    let input = b"1\n\"x\"\n[3]\ntrue\n1\n{\"id\":1}\n{}\n{\"id\":1}\n";
    let out = seen(
        &["dedup", "--json-key", "id", "--missing-key", "print"],
        input,
    );
    assert!(out.status.success());
    assert_eq!(out.stdout, b"1\n\"x\"\n[3]\ntrue\n1\n{\"id\":1}\n{}\n");
}

/// Out of memory anywhere (a record without an end, the exact set past the memory, more
/// bench keys than the machine holds): one line on standard error and status 2, never an abort.
/// The memory is limited with `ulimit -v`, so the system refuses allocations.
#[test]
fn out_of_memory_is_one_line_and_status_2() {
    let bin = env!("CARGO_BIN_EXE_seen");
    for (limit, script, says) in [
        // The message names the record once the memory runs out past 4 chunks of it; under
        // the limit the address space taken by the allocator's per-thread arenas (64 MiB each,
        // more of them when threads contend) can leave less, and the run then fails on its
        // first chunks with "no room for the next bytes of input": one line and status 2 too.
        (
            250_000,
            format!("head -c 2000000000 /dev/zero | {bin} dedup"),
            "out of memory: ",
        ),
        // 6 million keys of 14 to 18 bytes in 80 MB.
        (
            80_000,
            format!("{bin} sample 6000000 | {bin} dedup --exact --threads 2"),
            "out of memory",
        ),
        (
            80_000,
            format!("{bin} sample 6000000 | {bin} dedup --exact --threads 1"),
            "out of memory",
        ),
        (
            250_000,
            format!("{bin} bench --items 18446744073709551615"),
            "more than this machine gives",
        ),
    ] {
        let out = Command::new("sh")
            .args(["-c", &format!("ulimit -v {limit} && {script}")])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{script}: {err}");
        assert_eq!(err.lines().count(), 1, "{script}: {err}");
        // A thread the system cannot start under the limit is the same kind of failure.
        assert!(
            err.starts_with("seen: ")
                && (err.contains(says) || err.contains("cannot start a thread")),
            "{script}: {err}"
        );
    }
}

/// A window on the records' times: records older than the state's time (an older day's file
/// replayed) are counted at the state's time, and the run says so: in --stats, and on
/// standard error when they are more than the window older.
#[test]
fn records_older_than_the_state_are_reported() {
    let dir = scratch("late");
    let state = dir.join("st");
    let day = 86_400u64;
    let t0 = 1_700_000_000 / day * day;
    let args = [
        "dedup",
        "-f",
        "1",
        "--time-field",
        "2",
        "--window",
        "2d",
        "--period",
        "1d",
        "--capacity",
        "1000",
        "--state",
        state.to_str().unwrap(),
    ];
    let recent = format!("a\t{}\nb\t{}\n", t0 + 10 * day, t0 + 10 * day + 5);
    assert!(seen(&args, recent.as_bytes()).status.success());
    // Day 9 is within the window of day 10; day 1 is not.
    let old = format!(
        "c\t{}\nd\t{}\ne\t{}\n",
        t0 + 9 * day,
        t0 + day,
        t0 + day + 1
    );
    let out = seen(&[&args[..], &["--stats"]].concat(), old.as_bytes());
    assert!(out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("3 records were older than a record before them (or than the --state's time)")
            && err.contains("2 of them by more than --window"),
        "{err}"
    );
    assert!(
        err.contains("warning: 2 records were more than --window older"),
        "{err}"
    );
    // Without --stats, the warning alone.
    let out = seen(&args, old.as_bytes());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.starts_with("seen: warning: 2 records"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A window on the records' times whose clock is ahead of the wall clock by more than
/// `--future-tolerance` (saved on a host whose clock was ahead, or by an older seen that let a
/// record from the future move it; here made with the library, ten days ahead) would decide
/// the records dated now at its time, in a window that has moved past them: a repeat of a key
/// printed yesterday would be printed again. By default (`--future refuse`) the state is
/// refused, naming its clock and how far ahead it is; with `--future clamp` a warning says so
/// and the run goes on. A state whose clock is not ahead loads without a word.
#[test]
fn a_window_state_ahead_of_the_wall_clock_is_refused_or_used_with_a_warning() {
    use seen::clock::{ManualClock, TimeBase};
    use seen::hash::ItemHasher;
    let dir = scratch("state-ahead");
    let state = dir.join("st");
    let day = Duration::from_secs(86_400);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    let args = [
        "dedup",
        "-f",
        "1",
        "--time-field",
        "2",
        "--window",
        "3d",
        "--period",
        "1d",
        "--capacity",
        "1000",
        "--fpr",
        "0.0001",
        "--state",
        state.to_str().unwrap(),
    ];
    let save_at = |clock: Duration| {
        let filter = seen::WindowedBloomFilter::builder(1000)
            .fpr(0.0001)
            .periods(3)
            .time_base(TimeBase::Other)
            .rotate_every_aligned(day)
            .clock(ManualClock::new(clock))
            .build()
            .unwrap();
        filter.insert_hash(filter.hasher().hash_bytes(b"x"));
        filter.save(&state).unwrap();
    };
    let y = format!("y\t{}\n", now.as_secs() - 5);
    let input = format!("x\t{}\n{y}", now.as_secs() - 5);
    save_at(now + 10 * day);
    let saved = std::fs::read(&state).unwrap();
    let out = seen(&args, input.as_bytes());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.starts_with(&format!(
            "seen: the state {} follows its records' times, and its window's clock is in the \
             --period 1d that begins at ",
            state.display()
        )) && err.contains("d ahead of the wall clock (more than --future-tolerance 1m)")
            && err.contains("--future clamp"),
        "{err}"
    );
    // The period it is in begins 9 to 10 days ahead, as the time of day goes: "at least 9.3d"
    // or "at least 10.0d".
    let ahead: f64 = err
        .split_once("at least ")
        .and_then(|(_, rest)| rest.split_once("d ahead"))
        .and_then(|(days, _)| days.parse().ok())
        .unwrap_or_else(|| panic!("no \"at least Nd ahead\": {err}"));
    assert!((9.0..=10.0).contains(&ahead), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(out.stdout.is_empty());
    assert_eq!(
        std::fs::read(&state).unwrap(),
        saved,
        "the state was changed"
    );
    // --future clamp: a warning, and the run goes on at the state's time.
    let out = seen(
        &[&args[..], &["--future", "clamp"]].concat(),
        input.as_bytes(),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.starts_with("seen: warning: the state ")
            && err.contains("ahead of the wall clock")
            && err.contains("going on with it (--future clamp)"),
        "{err}"
    );
    // And the records, dated before it, are counted late: the warning of records more than a
    // window older says so too.
    assert!(
        err.lines().nth(1).is_some_and(
            |l| l.starts_with("seen: warning: 2 records were more than --window older")
        ),
        "{err}"
    );
    // x is in the state, y is new.
    assert_eq!(out.stdout, y.as_bytes());
    // Not ahead (its clock at the wall clock): no word.
    save_at(now);
    let out = seen(&args, input.as_bytes());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(err, "");
    assert_eq!(out.stdout, y.as_bytes());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--state` through a symbolic link into another directory: the save writes the link's
/// target, keeps the link and the file's permissions.
#[test]
fn a_state_through_a_symbolic_link_keeps_the_link_and_the_mode() {
    use std::os::unix::fs::PermissionsExt;
    let dir = scratch("symlink");
    let real_dir = dir.join("real");
    std::fs::create_dir_all(&real_dir).unwrap();
    let real = real_dir.join("st");
    let link = dir.join("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let args = [
        "dedup",
        "--capacity",
        "1000",
        "--state",
        link.to_str().unwrap(),
    ];
    // A dangling link: the first save creates its target.
    assert_eq!(seen(&args, b"a\n").stdout, b"a\n");
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert_eq!(seen(&args, b"a\nb\n").stdout, b"b\n");
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    let mode = std::fs::metadata(&real).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert_eq!(seen(&args, b"a\nb\nc\n").stdout, b"c\n");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A window state remembers the clock it follows: a run that would switch between the records'
/// times (--time-field) and the wall clock is refused, naming the flag; the state is kept.
#[test]
fn a_window_state_refuses_a_run_on_the_other_clock() {
    let dir = scratch("clock");
    let state = dir.join("st");
    let window = [
        "--window",
        "2d",
        "--period",
        "1d",
        "--capacity",
        "1000",
        "--state",
        state.to_str().unwrap(),
    ];
    let by_records = [&["dedup", "-f", "1", "--time-field", "2"][..], &window].concat();
    let by_wall = [&["dedup", "-f", "1"][..], &window].concat();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let input = format!("a\t{now}\n");
    for (first, second, says) in [
        (&by_records, &by_wall, "pass --time-field"),
        (&by_wall, &by_records, "drop --time-field"),
    ] {
        let _ = std::fs::remove_file(&state);
        assert!(seen(first, input.as_bytes()).status.success());
        let before = std::fs::read(&state).unwrap();
        let out = seen(second, input.as_bytes());
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(says), "{err}");
        assert!(out.stdout.is_empty());
        assert_eq!(std::fs::read(&state).unwrap(), before);
        // The same clock goes on.
        let out = seen(first, input.as_bytes());
        assert!(out.status.success());
        assert!(out.stdout.is_empty(), "a is remembered");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A window state of an older seen, whose `--window 8d --period 1d` kept 8 generations (a key
/// for 7 days at least): refused by `--window 8d`, with the flags that keep its meaning.
#[test]
fn an_older_window_state_is_refused_with_the_flags_that_keep_its_meaning() {
    use seen::clock::{ManualClock, TimeBase};
    let dir = scratch("old-window");
    let state = dir.join("st");
    let day = Duration::from_secs(86_400);
    // What the older seen wrote: 8 generations, no clock recorded.
    let old = seen::WindowedBloomFilter::builder(1000)
        .fpr(1e-4)
        .periods(7)
        .rotate_every_aligned(day)
        .clock(ManualClock::new(Duration::ZERO))
        .time_base(TimeBase::Unknown)
        .build()
        .unwrap();
    old.save(&state).unwrap();
    let args = |window: &'static str| {
        vec![
            "dedup",
            "--window",
            window,
            "--period",
            "1d",
            "--capacity",
            "1000",
            "--state",
            state.to_str().unwrap(),
        ]
    };
    let out = seen(&args("8d"), b"a\n");
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("kept a key for 7d at least: to go on with it, pass --window 7d --period 1d"),
        "{err}"
    );
    let out = seen(&args("7d"), b"a\n");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.stdout, b"a\n");
    std::fs::remove_dir_all(&dir).unwrap();
}
