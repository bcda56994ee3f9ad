//! `seen dedup` run as a subprocess on generated input: the exact mode against a reference (and
//! against `awk '!seen[$0]++'` where awk is installed), the Bloom modes within their measured
//! false positives, keys from a field, NUL records, and every bad-input case's error and status.

use std::io::Write;
use std::process::{Command, Stdio};

mod common;

use common::{first_occurrences, lines, seen};

#[test]
fn exact_mode_prints_what_awk_prints() {
    let input = lines(200_000);
    let expected = first_occurrences(&input);
    let out = seen(&["dedup", "--exact"], &input);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.stdout, expected);
    // awk itself, where it is installed.
    if let Ok(mut awk) = Command::new("awk")
        .arg("!seen[$0]++")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
    {
        // Written from another thread: awk's output fills its pipe while it reads.
        let mut stdin = awk.stdin.take().unwrap();
        let feed = input.clone();
        let writer = std::thread::spawn(move || stdin.write_all(&feed).unwrap());
        let awk = awk.wait_with_output().unwrap();
        writer.join().unwrap();
        assert_eq!(out.stdout, awk.stdout, "seen --exact and awk differ");
    }
}

#[test]
fn exact_stats_give_the_keys_their_memory_and_the_collision_bound() {
    let input = lines(200_000);
    let distinct = first_occurrences(&input)
        .iter()
        .filter(|&&b| b == b'\n')
        .count();
    for threads in ["1", "2"] {
        let out = seen(
            &["dedup", "--exact", "--stats", "--threads", threads],
            &input,
        );
        assert!(out.status.success());
        let err = String::from_utf8(out.stderr).unwrap();
        let line = err
            .lines()
            .find_map(|l| l.strip_prefix("seen: exact set of "))
            .unwrap_or_else(|| panic!("no exact set line: {err}"));
        // "N keys, M MiB, collision probability at most P (96-bit fingerprints)"
        let (keys, rest) = line.split_once(" keys, ").expect(line);
        assert_eq!(keys.parse::<usize>().unwrap(), distinct);
        let (mib, rest) = rest
            .split_once(" MiB, collision probability at most ")
            .expect(line);
        // 12-byte slots, 68 % to 85 % full (a shard's table has 1,024 homes at least).
        let bytes_a_key = mib.parse::<f64>().unwrap() * 1048576.0 / distinct as f64;
        assert!((13.9..18.5).contains(&bytes_a_key), "{line}");
        let p = rest.strip_suffix(" (96-bit fingerprints)").expect(line);
        let n = distinct as f64;
        let bound = n * (n - 1.0) / 2.0 / 2f64.powi(96);
        assert_eq!(p, format!("{bound:.1e}"), "{line}");
    }
}

/// `seen` with `args` and `input` on standard input, in an address space of `kib` KiB
/// (`ulimit -v`: the system refuses allocations past it).
#[cfg(target_os = "linux")]
fn seen_in_address_space(kib: u32, args: &[&str], input: &[u8]) -> std::process::Output {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v {kib} && exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_seen"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let feed = input.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&feed);
    });
    let out = common::wait_with_deadline(child, &format!("seen {args:?} in {kib} KiB"));
    writer.join().unwrap();
    out
}

/// An exact set that cannot grow ends the run with one line and status 2, the records decided
/// before it written; not an abort.
#[cfg(target_os = "linux")]
#[test]
fn exact_out_of_memory_is_one_line_and_status_2() {
    // 4M lines, 3.2M distinct: a table of 45 MiB or more, past a 48 MiB address space.
    let input = lines(4_000_000);
    let out = seen_in_address_space(49152, &["dedup", "--exact", "--threads", "1"], &input);
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    let (_, held) = err
        .split_once(": out of memory: --exact holds ")
        .unwrap_or_else(|| panic!("{err}"));
    let held: usize = held.split(' ').next().unwrap().parse().unwrap();
    assert!(err.starts_with("seen: standard input, line "), "{err}");
    // Every key held was printed, and nothing else: the first-occurrence output's start.
    let expected = first_occurrences(&input);
    assert!(expected.starts_with(&out.stdout));
    assert_eq!(out.stdout.iter().filter(|&&b| b == b'\n').count(), held);
    assert!(held > 100_000, "{err}");
}

/// A growing filter whose next layer the system refuses: the run ends at the record whose
/// insert needed it, with one line naming it and status 2, every record before it decided and
/// written; with `--state`, the next run (with the memory) prints again exactly the records
/// whose keys the state could not take, as the first run said, then the rest. The shards
/// decide and commit their records in groups: this pins the record a failure is put at.
#[cfg(target_os = "linux")]
#[test]
fn a_growth_the_system_refuses_ends_the_run_at_its_record() {
    // 4M lines, 3.2M distinct, at 1e-9 from 1,000 keys: the layer after 2M keys (32 MB) does
    // not fit in a 64 MiB address space.
    let input = lines(4_000_000);
    let dir = common::scratch("growth-refused");
    // With `--state` and two threads, the memory runs out elsewhere first under any limit
    // (the run then says the state is not saved: `failures.rs`); the commits are the same code.
    for (threads, with_state) in [("1", false), ("2", false), ("1", true)] {
        let state = dir.join(format!("state-{threads}"));
        let mut args = vec![
            "dedup",
            "--capacity",
            "1000",
            "--fpr",
            "1e-9",
            "--threads",
            threads,
        ];
        if with_state {
            args.extend(["--state", state.to_str().unwrap()]);
        }
        let out = seen_in_address_space(65536, &args, &input);
        let err = String::from_utf8(out.stderr).unwrap();
        let case = format!("{args:?}: {err}");
        assert_eq!(out.status.code(), Some(2), "{case}");
        let last = err.lines().last().unwrap_or_default();
        let (line, _) = last
            .strip_prefix("seen: standard input, line ")
            .and_then(|rest| rest.split_once(": cannot insert: could not allocate "))
            .unwrap_or_else(|| panic!("{case}"));
        let line: usize = line.parse().unwrap();
        assert!(line > 1_000_000, "{case}");
        // The records before it, each the first time its key came (at 1e-9, no false
        // positive in these few million keys).
        let before: usize = input
            .split_inclusive(|&b| b == b'\n')
            .take(line - 1)
            .map(<[u8]>::len)
            .sum();
        assert!(
            out.stdout == first_occurrences(&input[..before]),
            "{case}: not the records before line {line}"
        );
        if !with_state {
            assert_eq!(err.lines().count(), 1, "{case}");
            continue;
        }
        // "saved without the keys of M of the records written": the next run, with the
        // memory, prints those M again, then the rest.
        let (_, rest) = err
            .split_once("is saved without the keys of ")
            .unwrap_or_else(|| panic!("{case}"));
        let unsaved: usize = rest.split(' ').next().unwrap().parse().unwrap();
        assert_eq!(err.lines().count(), 2, "{case}");
        let again = seen(&args, &input);
        assert!(again.status.success(), "{case}");
        let written: Vec<&[u8]> = out.stdout.split_inclusive(|&b| b == b'\n').collect();
        let mut expected = written[written.len() - unsaved..].concat();
        expected.extend_from_slice(&first_occurrences(&input)[out.stdout.len()..]);
        assert!(
            again.stdout == expected,
            "{case}: the next run did not print the {unsaved} unsaved records, then the rest"
        );
        std::fs::remove_file(&state).unwrap();
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_bloom_modes_differ_from_exact_only_by_dropped_new_lines() {
    let input = lines(200_000);
    let expected = first_occurrences(&input);
    let distinct = expected.split(|&b| b == b'\n').count() - 1;
    for args in [
        &["dedup", "--capacity", "200000", "--fpr", "0.01"][..],
        &["dedup", "--grow", "--capacity", "1000", "--fpr", "0.01"][..],
        &["dedup"][..],
    ] {
        let out = seen(args, &input);
        assert!(out.status.success(), "{args:?}");
        // The output is the exact output with some lines dropped (false positives), in order.
        let mut want = expected.split_inclusive(|&b| b == b'\n');
        let mut dropped = 0;
        for line in out.stdout.split_inclusive(|&b| b == b'\n') {
            loop {
                let next = want.next().expect("a line the exact mode does not print");
                if next == line {
                    break;
                }
                dropped += 1;
            }
        }
        dropped += want.count();
        // At most 1 % of the distinct lines (4 standard deviations over the rate's bound).
        let bound = 0.01 * distinct as f64 + 4.0 * (0.01 * distinct as f64).sqrt();
        assert!((dropped as f64) <= bound, "{args:?}: {dropped} dropped");
    }
}

#[test]
fn keys_from_a_field_nul_records_repeated_and_count() {
    let input = b"1,a\n2,b\n3,a\n4,c\n5,b\n";
    let out = seen(&["dedup", "--exact", "-f", "2", "-d", ","], input);
    assert_eq!(out.stdout, b"1,a\n2,b\n4,c\n");
    let out = seen(
        &["dedup", "--exact", "-f", "2", "-d", ",", "--repeated"],
        input,
    );
    assert_eq!(out.stdout, b"3,a\n5,b\n");
    let out = seen(
        &["dedup", "--exact", "-f", "2", "-d", ",", "--count"],
        input,
    );
    assert_eq!(out.stdout, b"3 new\n2 duplicates\n");
    // A missing field is no key: an error at its line, not a key shared by every such record
    // (which would drop all of them but the first); or printed, never deduplicated.
    for threads in ["1", "2"] {
        let args = [
            "dedup",
            "--exact",
            "-f",
            "3",
            "-d",
            ",",
            "--threads",
            threads,
        ];
        let out = seen(&args, input);
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(
            err.starts_with("seen: standard input, line 1: no field 3"),
            "{err}"
        );
        let out = seen(&[&args[..], &["--missing-key", "print"]].concat(), input);
        assert!(out.status.success());
        assert_eq!(out.stdout, input);
        let out = seen(
            &[&args[..], &["--missing-key", "print", "--stats"]].concat(),
            b"1,a,x\n2\n1,b,x\n3\n",
        );
        assert_eq!(out.stdout, b"1,a,x\n2\n3\n");
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(err.contains("2 without a key"), "{err}");
    }
    let out = seen(&["dedup", "-z", "--exact"], b"a\nb\0a\nb\0c");
    assert_eq!(out.stdout, b"a\nb\0c\0");
    // A last line without its newline is printed with one, as awk does.
    let out = seen(&["dedup", "--exact"], b"x\ny\nx");
    assert_eq!(out.stdout, b"x\ny\n");
}

#[test]
fn bad_input_is_one_line_of_error_and_status_2() {
    let missing = std::env::temp_dir().join("seen-cli-test-missing-file");
    let out = seen(&["dedup", missing.to_str().unwrap()], b"");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.starts_with("seen: cannot read ") && err.contains("seen-cli-test-missing-file"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    for (args, says) in [
        (&["dedup", "--fpr", "1e-30"][..], "false-positive rate"),
        (
            &["dedup", "--capacity", "18446744073709551615"][..],
            "capacity",
        ),
        (&["dedup", "-d", "ab", "-f", "1"][..], "one byte"),
    ] {
        let out = seen(args, b"a\n");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(
            err.starts_with("seen: ") && err.contains(says),
            "{args:?}: {err}"
        );
    }
    // Usage errors are clap's: status 2 as well.
    let out = seen(&["dedup", "-f", "0"], b"");
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn the_state_file_carries_the_filter_to_the_next_run_and_is_checked() {
    let dir = std::env::temp_dir().join(format!("seen-cli-state-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let state = dir.join("state.seen");
    let state_arg = state.to_str().unwrap();
    // The default grows; --fixed does not.
    for grow in [false, true] {
        let _ = std::fs::remove_file(&state);
        let mut args = vec!["dedup", "--state", state_arg, "--capacity", "1000"];
        if !grow {
            args.push("--fixed");
        }
        let first = seen(&args, b"a\nb\n");
        assert_eq!(first.stdout, b"a\nb\n", "grow {grow}");
        assert!(state.exists());
        let second = seen(&args, b"a\nc\nb\nd\n");
        assert_eq!(
            second.stdout, b"c\nd\n",
            "grow {grow}: yesterday's keys are remembered"
        );
        // Another configuration, or the other structure: a one-line error, the state kept.
        let before = std::fs::read(&state).unwrap();
        let mut other = vec!["dedup", "--state", state_arg, "--capacity", "2000"];
        if !grow {
            other.push("--fixed");
        }
        let out = seen(&other, b"x\n");
        assert_eq!(out.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&out.stderr).contains("--capacity 1000"));
        let mut flipped = vec!["dedup", "--state", state_arg, "--capacity", "1000"];
        if grow {
            flipped.push("--fixed");
        }
        let out = seen(&flipped, b"x\n");
        assert_eq!(out.status.code(), Some(2), "grow {grow}");
        let err = String::from_utf8_lossy(&out.stderr);
        if grow {
            assert!(
                err.contains(
                    "holds a growing filter, not a fixed-size filter (--fixed): open it \
                     with `--capacity 1000 --fpr 0.0001`"
                ),
                "{err}"
            );
        } else {
            // A fixed filter where the default now grows: the message says which flag.
            assert!(
                err.contains("open it with `--fixed --capacity 1000 --fpr 0.0001`"),
                "{err}"
            );
        }
        assert_eq!(
            std::fs::read(&state).unwrap(),
            before,
            "a refused run wrote the state"
        );
    }
    // A corrupt state: refused, and left as it was (not overwritten by an empty filter).
    std::fs::write(&state, b"not a state file").unwrap();
    let out = seen(&["dedup", "--state", state_arg], b"x\n");
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    assert_eq!(std::fs::read(&state).unwrap(), b"not a state file");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn json_keys_and_bad_json_records() {
    let input = b"{\"user\":{\"id\":1},\"x\":1}\n{\"user\":{\"id\":2}}\n{\"user\":{\"id\":1},\"x\":2}\n{\"user\":{\"id\":\"1\"}}\n{\"other\":3}\n{}\n";
    let out = seen(&["dedup", "--exact", "--json-key", "user.id"], input);
    // The records without the path are an error at the first of them (line 5).
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("seen: standard input, line 5: no key at user.id"),
        "{err}"
    );
    let out = seen(
        &[
            "dedup",
            "--exact",
            "--json-key",
            "user.id",
            "--missing-key",
            "print",
        ],
        input,
    );
    assert!(out.status.success());
    // 1 and 2 are new; the second 1 is not; the string "1" is the same text as the number 1
    // (a string's key is its text); the records without the path are printed, undecided.
    assert_eq!(
        out.stdout,
        b"{\"user\":{\"id\":1},\"x\":1}\n{\"user\":{\"id\":2}}\n{\"other\":3}\n{}\n"
    );
    let cases = [
        (
            &b"{\"a\":1}\nnot json\n{\"a\":3}\n"[..],
            2,
            &b"{\"a\":1}\n"[..],
        ),
        (&b"{\"a\":\"\xff\"}\n"[..], 1, &b""[..]),
    ];
    for (bad, line, printed) in cases {
        for threads in ["1", "2"] {
            let out = seen(&["dedup", "--json-key", "a", "--threads", threads], bad);
            assert_eq!(out.status.code(), Some(2));
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                err.starts_with(&format!(
                    "seen: standard input, line {line}: not a JSON record"
                )),
                "{err}"
            );
            assert_eq!(err.lines().count(), 1, "{err}");
            // The records before the bad one are written.
            assert_eq!(out.stdout, printed);
        }
    }
}

#[test]
fn memory_sizes_the_filter_and_completions_are_printed() {
    let out = seen(&["dedup", "--memory", "1MiB", "--stats"], b"a\nb\na\n");
    assert!(out.status.success());
    assert_eq!(out.stdout, b"a\nb\n");
    let err = String::from_utf8(out.stderr).unwrap();
    // At most the memory asked for: 1.00 MiB, the line layout.
    assert!(err.contains(", 1.00 MiB, line layout,"), "{err}");
    for (size, says) in [("10", "below the smallest filter"), ("5XB", "unknown unit")] {
        let out = seen(&["dedup", "--memory", size], b"");
        assert_eq!(out.status.code(), Some(2), "{size}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(says),
            "{size}"
        );
    }
    // --memory and --capacity are two ways to say one thing.
    let out = seen(&["dedup", "--memory", "1MiB", "--capacity", "5"], b"");
    assert_eq!(out.status.code(), Some(2));
    for shell in ["bash", "zsh", "fish"] {
        let out = seen(&["completions", shell], b"");
        assert!(out.status.success(), "{shell}");
        let script = String::from_utf8(out.stdout).unwrap();
        assert!(
            script.contains("dedup") && script.contains("json-key"),
            "{shell}"
        );
    }
}

/// A state used with the flags of another structure (or other sizes) is refused with the flags
/// that open it, and those flags do: for every pair of the structures a state can hold.
#[test]
fn a_state_of_another_structure_is_refused_with_the_flags_that_open_it() {
    let dir = common::scratch("mismatch");
    let state = dir.join("st");
    let state_arg = state.to_str().unwrap();
    let time = ["-f", "1", "--time-field", "2"];
    let kinds: [(&str, &[&str]); 6] = [
        ("grow", &["--capacity", "1000"]),
        (
            "grow, other sizes",
            &["--capacity", "2000", "--fpr", "0.001"],
        ),
        ("fixed", &["--fixed", "--capacity", "1000"]),
        (
            "window",
            &["--window", "2d", "--period", "1d", "--capacity", "1000"],
        ),
        (
            "window on the records' times",
            &[
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
            ],
        ),
        ("remember", &["--remember", "5000"]),
    ];
    let input = b"a\t1700000000\n";
    for (made, made_flags) in kinds {
        for (asked, asked_flags) in kinds {
            if made == asked {
                continue;
            }
            let _ = std::fs::remove_file(&state);
            let run = |flags: &[&str]| {
                seen(
                    &[&["dedup", "--state", state_arg][..], flags].concat(),
                    input,
                )
            };
            assert!(run(made_flags).status.success(), "{made}");
            let before = std::fs::read(&state).unwrap();
            let out = run(asked_flags);
            let err = String::from_utf8(out.stderr).unwrap();
            assert_eq!(out.status.code(), Some(2), "{made} as {asked}: {err}");
            assert_eq!(err.lines().count(), 1, "{made} as {asked}: {err}");
            assert!(
                std::fs::read(&state).unwrap() == before,
                "{made} as {asked}: written"
            );
            // A clock of the other kind names the one flag; anything else, all of them.
            if err.contains("--time-field, or use another state file") {
                continue;
            }
            let flags: Vec<&str> = err
                .split("open it with `")
                .nth(1)
                .and_then(|rest| rest.split('`').next())
                .unwrap_or_else(|| panic!("{made} as {asked}: no flags named: {err}"))
                .split(' ')
                .collect();
            let mut fitting = flags.clone();
            if err.contains("` and --time-field") {
                fitting.extend(time);
            }
            let out = run(&fitting);
            assert!(
                out.status.success(),
                "{made} as {asked}: {flags:?} named by {err:?} do not open it: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(out.stdout.is_empty(), "{made}: `a` is in the state");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
