//! `seen dedup --state` against what loses state: two runs at once, a reader that goes away,
//! a second signal during the save; and what drops records silently: overfill, keyless records.
#![cfg(unix)]

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::{feed, scratch, seen, start, stderr_of};

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
        let started = Instant::now();
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
        assert!(started.elapsed() < Duration::from_secs(30), "it waited");
        assert_eq!(std::fs::read(&state).unwrap(), before);
    }
    drop(stdin);
    assert!(first.wait().unwrap().success());
    // Both runs' keys, none lost.
    assert_eq!(seen(&strs(&args(&link)), b"a\nb\nc\n").stdout, b"c\n");
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
        // the pipe when it closed (written, and lost with the pipe: at most its capacity).
        let next = seen(&args, &input);
        assert!(next.status.success(), "{case}");
        let printed = next.stdout;
        assert!(
            input.ends_with(&printed),
            "{case}: the next run printed a line twice or out of order"
        );
        let resumed = input.len() - printed.len();
        assert!(
            resumed >= whole && resumed - whole <= (1 << 20) + 13,
            "{case}: {} bytes read, the next run resumed at {resumed}",
            read.len()
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

/// Signals during the save (sent once the save's temporary file exists, at least 250 ms
/// after the first): the exit status and the line on standard error always say what the state
/// file holds. A second signal waits for the save ("ends in a moment"), then exits 130 with
/// the new state; a third stops at once, exit 2, saying the file is the previous save or this
/// run's, whole (and it loads, and the next save removes the stopped save's temporary file).
#[test]
fn signals_during_the_save_never_leave_a_saved_status_on_an_old_state() {
    let dir = scratch("second-signal");
    let state = dir.join("st");
    // A large filter, so that its save takes a while: 720 MB, about a second here (a 240 MB
    // one took a third of that, and on a busy machine the third signal came too late for it).
    let args = [
        "dedup",
        "--fixed",
        "--capacity",
        "300000000",
        "--state",
        state.to_str().unwrap(),
    ];
    assert!(seen(&args, b"old\n").status.success());
    let old_len = std::fs::metadata(&state).unwrap().len();
    let (mut waited, mut stopped) = (0, 0);
    let mut outcomes = Vec::new();
    for attempt in 0..8 {
        let third = attempt % 2 == 1;
        // Lines the run reads but cannot write while the test does not read its output: the
        // first signal then waits for the writes, and the save begins once the test reads.
        let key = format!("new-{attempt}\n");
        let lines: Vec<u8> = [key.as_bytes().to_vec(), distinct(200_000)].concat();
        let mut child = start(&args);
        // 128 KiB: once written, the run has read its input, and its signal handler is in place.
        let (feed, read) = feed(child.stdin.take().unwrap(), lines, 128 << 10);
        read.recv_timeout(Duration::from_secs(120))
            .expect("the run reads its input");
        // Its standard error, line by line as it comes, and whole at the end. In a run that
        // gets a third signal, this thread sends it the moment the run says it handled the
        // second ("ends in a moment"): then, not merged with the second into one pending
        // signal, and while the save (a few hundred milliseconds for this state) still runs.
        // (No such line: the save was over when the second came, and the run ended.)
        let stderr = BufReader::new(child.stderr.take().unwrap());
        let pid = child.id();
        let errors = std::thread::spawn(move || {
            let mut all = String::new();
            for line in stderr.lines().map_while(Result::ok) {
                if third && line.contains("ends in a moment") {
                    signal(pid);
                }
                all += &line;
                all.push('\n');
            }
            all
        });
        // The key is the run's first new line: once it is out, the run has taken it in (a
        // signal sent before could stop the run with it still unread in a buffer, and the
        // state rightly without it), and the rest of the output soon fills the pipe.
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        out.read_line(&mut first).unwrap();
        assert_eq!(first, key, "the run's first new line");
        signal(child.id());
        std::thread::sleep(Duration::from_millis(300));
        let drain = std::thread::spawn(move || {
            let mut sink = Vec::new();
            let _ = out.read_to_end(&mut sink);
        });
        // The save begins: its temporary file appears.
        let started = Instant::now();
        let saving = loop {
            let temp = std::fs::read_dir(&dir)
                .unwrap()
                .any(|e| e.unwrap().file_name().to_string_lossy().ends_with(".tmp"));
            if temp {
                break true;
            }
            if child.try_wait().unwrap().is_some() || started.elapsed() > Duration::from_secs(60) {
                break false;
            }
            std::thread::sleep(Duration::from_millis(1));
        };
        if saving {
            signal(child.id());
        }
        drain.join().unwrap();
        let stdin = feed.join().unwrap();
        // Standard error ends with the run, before the run is reaped: no signal from that
        // thread can reach a later process given the same pid.
        let err = errors.join().unwrap();
        let code = child.wait().unwrap().code();
        drop(stdin);
        let saved = seen(&args, key.as_bytes()).stdout.is_empty();
        outcomes.push(format!(
            "attempt {attempt}: exit {code:?}{}",
            if err.contains("ends in a moment") {
                ", waited"
            } else {
                ""
            }
        ));
        match code {
            Some(130) => {
                assert!(saved, "exit 130 but the state lacks {key:?}: {err}");
                waited += usize::from(err.contains("ends in a moment"));
            }
            Some(2) if err.contains("keeps its previous save") => {
                assert!(!saved, "exit 2, yet the state was saved: {err}");
            }
            Some(2) if err.contains("holds its previous save or this run's, whole") => {
                // Either, and it loaded (the run above read it).
                stopped += 1;
            }
            other => panic!("exit {other:?}: {err}"),
        }
        // No temporary file is left by the runs since, whatever the stopped save left.
        let temps: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".tmp"))
            .collect();
        assert!(temps.is_empty(), "{temps:?}");
        assert_eq!(std::fs::metadata(&state).unwrap().len(), old_len);
        if waited > 0 && stopped > 0 {
            break;
        }
    }
    assert!(
        waited > 0 && stopped > 0,
        "no save was caught by the signals ({waited} waited, {stopped} stopped): the test did \
         not test it; {outcomes:?}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Sends SIGINT to `pid` with one system call (a run that has just exited is not an error).
fn signal(pid: u32) {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    let pid = Pid::from_raw(i32::try_from(pid).expect("a pid fits an i32"));
    match kill(pid, Signal::SIGINT) {
        Ok(()) | Err(nix::errno::Errno::ESRCH) => {}
        Err(e) => panic!("kill -INT {pid}: {e}"),
    }
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
        (
            250_000,
            format!("head -c 2000000000 /dev/zero | {bin} dedup"),
            "out of memory: a record of more than",
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
