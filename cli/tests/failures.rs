//! Runs that fail after printing records keep the work done: with `--state`, the keys of the
//! records written are saved (or a line says which are not, and why), so that a rerun neither
//! prints them again nor fails at the same place having done nothing. And an output that
//! cannot take the records (closed, full) is an error, never a silent loss.
#![cfg(unix)]

use std::io::Write;
use std::process::{Command, Stdio};

mod common;

use common::{scratch, seen, wait_with_deadline};

/// `n` distinct lines of 13 bytes: `line-0000000\n`, ...
fn distinct(n: usize) -> Vec<u8> {
    (0..n)
        .flat_map(|i| format!("line-{i:07}\n").into_bytes())
        .collect()
}

fn lines(bytes: &[u8]) -> Vec<&[u8]> {
    bytes.split_inclusive(|&b| b == b'\n').collect()
}

/// A growing filter that reaches the end of its layers (an accepted `--fpr 1e-13` ends them at
/// 127 times the capacity) fails at a record, exit status 2; the state is saved with the keys
/// of the records written that the filter took, and a line names how many it did not. The next
/// run over the same input prints none of the records whose keys were saved.
#[test]
fn a_filter_that_cannot_grow_saves_the_keys_it_took() {
    let dir = scratch("cannot-grow");
    let input = distinct(20_000);
    for threads in ["1", "2"] {
        let state = dir.join(format!("st-{threads}"));
        let args = [
            "dedup",
            "--capacity",
            "100",
            "--fpr",
            "1e-13",
            "--threads",
            threads,
            "--state",
            state.to_str().unwrap(),
        ];
        let first = seen(&args, &input);
        let err = String::from_utf8_lossy(&first.stderr);
        assert_eq!(first.status.code(), Some(2), "--threads {threads}: {err}");
        let printed = lines(&first.stdout);
        assert!(!printed.is_empty(), "--threads {threads}: {err}");
        assert!(
            first.stdout == input[..first.stdout.len()],
            "--threads {threads}: not the first lines of the input"
        );
        // "the state ... is saved without the keys of N of the records written".
        let unsaved: usize = err
            .split("without the keys of ")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("--threads {threads}: no count of keys not saved: {err}"));
        assert!(unsaved < printed.len(), "--threads {threads}: {err}");
        let second = seen(&args, &input);
        let again: std::collections::HashSet<&[u8]> = lines(&second.stdout).into_iter().collect();
        let repeated = printed.iter().filter(|l| again.contains(*l)).count();
        assert!(
            repeated <= unsaved,
            "--threads {threads}: the next run printed {repeated} of the {} records printed \
             before, of which only {unsaved} were not saved: {err}",
            printed.len()
        );
        if threads == "1" {
            // One shard: the keys not saved are the last ones written, and the next run
            // starts with the first of them.
            let resumed = String::from_utf8_lossy(lines(&second.stdout)[0]);
            let first_unsaved = String::from_utf8_lossy(printed[printed.len() - unsaved]);
            assert_eq!(resumed, first_unsaved, "{err}");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// An output device that fills up part way (here a file past `ulimit -f`, whose SIGXFSZ would
/// kill the run by default: the command ignores it, so the write that crosses the limit is cut
/// short and the next fails with EFBIG, as on a full disk) is an error, exit status 2, and the
/// state holds the keys of the records written whole: the next run prints exactly the rest. A device full from the start (`/dev/full`): nothing written,
/// the next run prints everything.
#[test]
fn a_full_output_saves_the_keys_of_the_records_written() {
    let dir = scratch("full-output");
    // 2.6 MB of output against a limit of 1 MiB (2,048 blocks of 512 bytes, as POSIX shells
    // count them), which the state (a fixed filter for 150,000 keys at 1e-6: 545 KB) stays
    // under: the limit is the process's, for every file it writes.
    let input = distinct(200_000);
    for threads in ["1", "2"] {
        let state = dir.join(format!("st-{threads}"));
        let out_path = dir.join(format!("out-{threads}"));
        let args = [
            "dedup",
            "--fixed",
            "--capacity",
            "150000",
            "--fpr",
            "1e-6",
            "--threads",
            threads,
            "--state",
            state.to_str().unwrap(),
        ];
        let out = std::fs::File::create(&out_path).unwrap();
        let mut child = Command::new("sh")
            .arg("-c")
            .arg("ulimit -f 2048 && exec \"$0\" \"$@\"")
            .arg(env!("CARGO_BIN_EXE_seen"))
            .args(args)
            .stdin(Stdio::piped())
            .stdout(out)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let feed = {
            let input = input.clone();
            std::thread::spawn(move || {
                let _ = stdin.write_all(&input);
            })
        };
        let first = wait_with_deadline(child, "a full output");
        feed.join().unwrap();
        let err = String::from_utf8_lossy(&first.stderr);
        assert_eq!(first.status.code(), Some(2), "--threads {threads}: {err}");
        assert!(
            err.contains("cannot write the output: File too large"),
            "--threads {threads}: {err}"
        );
        let written = std::fs::read(&out_path).unwrap();
        assert_eq!(written.len(), 1 << 20, "--threads {threads}: {err}");
        assert!(
            written == input[..written.len()],
            "--threads {threads}: not the first lines of the input"
        );
        let whole = written.len() - written.len() % 13;
        let second = seen(&args, &input);
        assert!(second.status.success(), "--threads {threads}");
        assert!(
            second.stdout == input[whole..],
            "--threads {threads}: {} bytes written, {whole} of them whole lines; the next run \
             printed {} bytes, from {:?}: it must print the lines not written whole, only",
            written.len(),
            second.stdout.len(),
            String::from_utf8_lossy(lines(&second.stdout).first().copied().unwrap_or(b""))
        );
        // /dev/full: every write fails.
        let _ = std::fs::remove_file(&state);
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let mut run = common::command(&args);
        run.stdout(full);
        let mut child = run.spawn().unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let feed = {
            let input = input.clone();
            std::thread::spawn(move || {
                let _ = stdin.write_all(&input);
            })
        };
        let first = wait_with_deadline(child, "/dev/full");
        feed.join().unwrap();
        let err = String::from_utf8_lossy(&first.stderr);
        assert_eq!(first.status.code(), Some(2), "--threads {threads}: {err}");
        assert!(
            err.contains("cannot write the output: No space left on device"),
            "--threads {threads}: {err}"
        );
        assert!(
            seen(&args, &input).stdout == input,
            "--threads {threads}: nothing was written, all is printed next"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A save past the file size limit (`ulimit -f`; the output, /dev/null, is no file and has
/// none), as one on a full disk, is an error that names the state, exit status 2: not a run
/// killed by SIGXFSZ in the middle of the save. Its temporary file is removed, the state keeps
/// its previous save, and the line says so, and that the next run prints the records again
/// (or, without a previous save, that the state is not written).
#[test]
fn a_save_past_the_file_size_limit_keeps_the_previous_state() {
    let dir = scratch("save-limit");
    let state = dir.join("st");
    // A fixed filter for 150,000 keys at 1e-6: 545 KB, over a limit of 128 KiB (256 blocks
    // of 512 bytes).
    let args = [
        "dedup",
        "--fixed",
        "--capacity",
        "150000",
        "--fpr",
        "1e-6",
        "--state",
        state.to_str().unwrap(),
    ];
    assert_eq!(seen(&args, b"old\n").stdout, b"old\n");
    let old = std::fs::read(&state).unwrap();
    for (threads, previous) in [("1", true), ("2", true), ("2", false)] {
        if !previous {
            std::fs::remove_file(&state).unwrap();
        }
        let mut child = Command::new("sh")
            .arg("-c")
            .arg("ulimit -f 256 && exec \"$0\" \"$@\"")
            .arg(env!("CARGO_BIN_EXE_seen"))
            .args(args)
            .args(["--threads", threads])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let _ = child.stdin.take().unwrap().write_all(&distinct(1000));
        let out = wait_with_deadline(child, "a save past the limit");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "--threads {threads}: {err}");
        assert!(
            err.starts_with(&format!(
                "seen: cannot save the state {}: ",
                state.display()
            )) && err.contains("File too large"),
            "--threads {threads}: {err}"
        );
        assert_eq!(err.lines().count(), 1, "--threads {threads}: {err}");
        let mut left: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        if previous {
            assert!(
                err.ends_with(
                    "; it keeps what it held before this run, and the next run prints this \
                     run's records again\n"
                ),
                "--threads {threads}: {err}"
            );
            assert_eq!(std::fs::read(&state).unwrap(), old, "--threads {threads}");
            assert_eq!(
                left,
                ["st", "st.lock"],
                "--threads {threads}: a temporary file is left"
            );
        } else {
            assert!(
                err.ends_with(
                    "; it is not written, and the next run prints this run's records again\n"
                ),
                "no previous save: {err}"
            );
            assert_eq!(left, ["st.lock"], "no previous save");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A closed standard output (`seen dedup ... >&-`; the standard library gives the process
/// /dev/null in its place) is an error before anything is read, exit status 2, and the state
/// is left alone: the records are not discarded as if written. `> /dev/null` still discards
/// them on purpose.
#[test]
fn a_closed_standard_output_is_an_error_not_a_silent_loss() {
    let dir = scratch("closed-stdout");
    let state = dir.join("st");
    let args = [
        "dedup",
        "--capacity",
        "1000",
        "--state",
        state.to_str().unwrap(),
    ];
    let mut child = Command::new("sh")
        .arg("-c")
        .arg("exec \"$0\" \"$@\" >&-")
        .arg(env!("CARGO_BIN_EXE_seen"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let _ = child.stdin.take().unwrap().write_all(b"a\nb\n");
    let out = wait_with_deadline(child, ">&-");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("standard output is closed"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(!state.exists(), "the state was written");
    // On purpose: `> /dev/null`.
    let mut run = common::command(&args);
    run.stdout(Stdio::null());
    let mut child = run.spawn().unwrap();
    let _ = child.stdin.take().unwrap().write_all(b"a\nb\n");
    let out = wait_with_deadline(child, "> /dev/null");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(seen(&args, b"a\nb\nc\n").stdout, b"c\n");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `sh -c 'exec seen ARGS REDIRECTION'`, `input` on its standard input (unless the
/// redirection takes it), its standard output and error piped.
fn through_sh(redirection: &str, args: &[&str], input: &[u8]) -> std::process::Output {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!("exec \"$0\" \"$@\" {redirection}"))
        .arg(env!("CARGO_BIN_EXE_seen"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let _ = child.stdin.take().unwrap().write_all(input);
    wait_with_deadline(child, redirection)
}

/// A standard output open on `/dev/null` for reading and writing is no closed one: `1<>
/// /dev/null`, and what Python's `subprocess.DEVNULL` and glibc's `daemon()` pass (the same
/// descriptor the standard library puts in place of a closed one, which is why it was once
/// taken for one) drop the records on purpose, and their keys are saved. One open for reading
/// only (`1< /dev/null`) fails at the first write, as any output that cannot take the records.
#[test]
fn an_output_open_on_dev_null_is_no_closed_output() {
    let dir = scratch("dev-null-rdwr");
    let state = dir.join("st");
    let args = [
        "dedup",
        "--capacity",
        "1000",
        "--state",
        state.to_str().unwrap(),
    ];
    let out = through_sh("1<>/dev/null", &args, b"a\nb\n");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "1<>/dev/null: {err}");
    assert_eq!(err, "", "1<>/dev/null");
    assert_eq!(seen(&args, b"a\nb\nc\n").stdout, b"c\n", "1<>/dev/null");
    // A descriptor opened as Python's DEVNULL is: /dev/null, O_RDWR.
    let devnull = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
        .unwrap();
    let mut run = common::command(&args);
    run.stdout(devnull);
    let mut child = run.spawn().unwrap();
    let _ = child.stdin.take().unwrap().write_all(b"d\n");
    let out = wait_with_deadline(child, "/dev/null, O_RDWR");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "/dev/null, O_RDWR: {err}");
    assert_eq!(
        seen(&args, b"a\nd\ne\n").stdout,
        b"e\n",
        "/dev/null, O_RDWR"
    );
    // Python itself, where it is installed.
    let python = Command::new("python3")
        .args(["-c", "pass"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if python {
        let out = Command::new("python3")
            .arg("-c")
            .arg(
                "import subprocess, sys; sys.exit(subprocess.run(sys.argv[1:], input=b'f\\n', \
                 stdout=subprocess.DEVNULL).returncode)",
            )
            .arg(env!("CARGO_BIN_EXE_seen"))
            .args(args)
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "subprocess.DEVNULL: {err}");
        assert_eq!(seen(&args, b"f\ng\n").stdout, b"g\n", "subprocess.DEVNULL");
    }
    // Open, but not for writing: the first write fails, and no key is saved.
    let out = through_sh("1</dev/null", &args, b"h\n");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "1</dev/null: {err}");
    assert!(
        err.contains("cannot write the output: Bad file descriptor"),
        "1</dev/null: {err}"
    );
    assert_eq!(seen(&args, b"h\n").stdout, b"h\n", "1</dev/null");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A standard input closed at start (`<&-`; the standard library gives the process
/// `/dev/null` in its place, which reads as empty) is an error when the run reads it, as for
/// `cat <&-`, before anything is locked or saved; a run that reads only files does not mind.
#[test]
fn a_closed_standard_input_is_an_error_not_an_empty_input() {
    let dir = scratch("closed-stdin");
    let state = dir.join("st");
    let with_state = [
        "dedup",
        "--capacity",
        "1000",
        "--state",
        state.to_str().unwrap(),
        "-",
    ];
    for args in [&["dedup"][..], &with_state[..]] {
        let out = through_sh("<&-", args, b"");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("the standard input is closed"),
            "{args:?}: {err}"
        );
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    }
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        0,
        "the state or its lock was written"
    );
    let file = dir.join("in");
    std::fs::write(&file, b"a\na\nb\n").unwrap();
    let out = through_sh("<&-", &["dedup", file.to_str().unwrap()], b"");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.stdout, b"a\nb\n");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Out of memory where the command cannot do without the memory (the allocator's refusal,
/// here made at the `chunk` point of a one-thread run, after the first chunk was written: feature
/// `failpoints`): the state cannot be saved (that takes memory), so the one line says so, names
/// it, and says that the next run prints the records again; the state keeps what it held.
#[cfg(feature = "failpoints")]
#[test]
fn out_of_memory_says_the_state_is_not_saved() {
    let dir = scratch("oom-state");
    let state = dir.join("state");
    let input = distinct(300_000);
    let args = [
        "dedup",
        "--threads",
        "1",
        "--state",
        state.to_str().unwrap(),
    ];
    // A first run saves the first 1,000 records' keys.
    let out = seen(&args, &input[..13 * 1000]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let saved = std::fs::read(&state).unwrap();
    let mut run = common::command(&args);
    run.env("SEEN_OUT_OF_MEMORY_AT", "chunk");
    let mut child = run.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let feed = input.clone();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&feed);
    });
    let out = wait_with_deadline(child, "a run out of memory");
    writer.join().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("seen: out of memory")
            && err.contains(&format!("the state {} is not saved", state.display()))
            && err.contains("the next run prints this run's records again"),
        "{err}"
    );
    // It left the state as it was, and printed none of the records the state holds.
    assert_eq!(std::fs::read(&state).unwrap(), saved);
    assert!(input[13 * 1000..].starts_with(&out.stdout));
    std::fs::remove_dir_all(&dir).unwrap();
}
