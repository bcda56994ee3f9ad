//! `seen dedup` with threads, a window of time and the overwrite map, run as a subprocess.

mod common;

use common::{first_occurrences, lines, seen};

/// Every thread count prints what one thread prints, and (exact set) what awk prints; the
/// Bloom filter's output is the exact output less its false positives, whatever the threads.
#[test]
fn every_thread_count_prints_the_first_occurrences() {
    // Over a megabyte, so that the pipeline has many chunks in flight.
    let input = lines(150_000);
    let expected = first_occurrences(&input);
    for threads in ["1", "2", "3", "8"] {
        let out = seen(&["dedup", "--exact", "--threads", threads], &input);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.stdout == expected, "--exact --threads {threads}");
        let out = seen(
            &["dedup", "--repeated", "--exact", "--threads", threads],
            &input,
        );
        let repeated = input.len() - expected.len();
        assert_eq!(out.stdout.len(), repeated, "--repeated --threads {threads}");
    }
    let expected_lines: Vec<&[u8]> = expected.split_inclusive(|&b| b == b'\n').collect();
    for threads in ["1", "2", "3"] {
        for structure in [
            &["--capacity", "120000"][..],
            &["--grow", "--capacity", "20000"],
        ] {
            let mut args = vec!["dedup", "--fpr", "0.001", "--threads", threads];
            args.extend_from_slice(structure);
            let out = seen(&args, &input);
            assert!(out.status.success(), "{args:?}");
            // A subsequence of the exact output: the records it lacks are false positives.
            let got: Vec<&[u8]> = out.stdout.split_inclusive(|&b| b == b'\n').collect();
            let mut at = expected_lines.iter();
            for line in &got {
                assert!(
                    at.any(|e| e == line),
                    "{args:?}: {line:?} out of order or repeated"
                );
            }
            let dropped = expected_lines.len() - got.len();
            // At most the target rate plus 4 standard deviations.
            let n = expected_lines.len() as f64;
            let bound = 0.001 * n + 4.0 * (0.001 * n).sqrt();
            assert!((dropped as f64) <= bound, "{args:?}: {dropped} dropped");
        }
    }
}

/// `--window 8d --period 1d --time-field`: a key is a duplicate for 7 to 8 days after it was
/// first printed, then new again; the clock follows the records, never backwards.
#[test]
fn a_window_forgets_keys_after_it() {
    let day = 86_400u64;
    let t0 = 1_700_000_000u64 / day * day; // midnight
    let records = [
        (0, "a"),           // new
        (day - 1, "d"),     // new, in the last second of day 0
        (3 * day, "a"),     // 3 days: a duplicate
        (3 * day, "b"),     // new
        (2 * day, "c"),     // older than the record before: counts at day 3
        (7 * day + 5, "a"), // 7 days later, inside the 8-day window: a duplicate
        (9 * day - 2, "d"), // 8 days less a second: inside the window, a duplicate
        (8 * day + 5, "a"), // 8 days and 5 s, just past it: kept to the end of day 8
        (9 * day, "a"),     // 9 days: forgotten, new again
        (9 * day + 1, "d"), // 8 days and 2 s: forgotten at the start of day 9
        (9 * day, "b"),     // b is 6 days old: a duplicate
        (12 * day, "c"),    // c counted at day 3: 9 days, new again
    ];
    let mut tsv = Vec::new();
    let mut json = Vec::new();
    for (t, key) in records {
        tsv.extend_from_slice(format!("{key}\t{}\n", t0 + t).as_bytes());
        // RFC 3339 in JSON.
        let (days, secs) = ((t0 + t) / day, (t0 + t) % day);
        json.extend_from_slice(
            format!(
                "{{\"k\":\"{key}\",\"at\":\"{}T{:02}:{:02}:{:02}Z\"}}\n",
                date(days),
                secs / 3600,
                secs / 60 % 60,
                secs % 60
            )
            .as_bytes(),
        );
    }
    let want = [
        true, true, false, true, true, false, false, false, true, true, false, true,
    ];
    let keep = |input: &[u8]| -> Vec<u8> {
        input
            .split_inclusive(|&b| b == b'\n')
            .zip(want)
            .filter(|(_, w)| *w)
            .flat_map(|(l, _)| l.to_vec())
            .collect()
    };
    for threads in ["1", "2"] {
        let window = [
            "--window",
            "8d",
            "--period",
            "1d",
            "--threads",
            threads,
            "--capacity",
            "1000",
        ];
        let mut args = vec!["dedup", "-f", "1", "--time-field", "2"];
        args.extend_from_slice(&window);
        let out = seen(&args, &tsv);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&keep(&tsv))
        );
        let mut args = vec!["dedup", "--json-key", "k", "--time-field", "at"];
        args.extend_from_slice(&window);
        let out = seen(&args, &json);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&keep(&json))
        );
    }
    // The wall clock: within one run, a window of a week forgets nothing.
    let out = seen(
        &[
            "dedup",
            "--window",
            "7d",
            "--period",
            "1d",
            "--capacity",
            "1000",
        ],
        b"a\nb\na\nb\nc\n",
    );
    assert_eq!(out.stdout, b"a\nb\nc\n");
}

/// The date `days` after 1970-01-01, as YYYY-MM-DD (a civil-calendar walk, for the test).
fn date(mut days: u64) -> String {
    let leap = |y: u64| (y.is_multiple_of(4) && !y.is_multiple_of(100)) || y.is_multiple_of(400);
    let mut y = 1970;
    while days >= if leap(y) { 366 } else { 365 } {
        days -= if leap(y) { 366 } else { 365 };
        y += 1;
    }
    let lengths = [
        31,
        if leap(y) { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    let mut m = 0;
    while days >= lengths[m] {
        days -= lengths[m];
        m += 1;
    }
    format!("{y:04}-{:02}-{:02}", m + 1, days + 1)
}

#[test]
fn bad_times_and_windows_are_one_line_errors() {
    for (args, input, says) in [
        (
            &[
                "dedup",
                "-f",
                "1",
                "--time-field",
                "2",
                "--window",
                "8d",
                "--period",
                "1d",
            ][..],
            &b"a\t1700000000\nb\tyesterday\n"[..],
            "standard input, line 2: not a time: \"yesterday\"",
        ),
        (
            &[
                "dedup",
                "-f",
                "1",
                "--time-field",
                "2",
                "--window",
                "8d",
                "--period",
                "1d",
            ],
            b"a\t2026-02-30T00:00:00Z\n",
            "line 1: not a time",
        ),
        (
            &[
                "dedup",
                "-f",
                "1",
                "--time-field",
                "2",
                "--window",
                "8d",
                "--period",
                "1d",
            ],
            b"a\t1700000000\nb\t9999999999\n",
            "line 2: its time is ",
        ),
        (
            &[
                "dedup",
                "--json-key",
                "k",
                "--time-field",
                "t",
                "--window",
                "8d",
                "--period",
                "1d",
            ],
            b"{\"k\":1,\"t\":1.7e9}\n{\"k\":2,\"t\":true}\n",
            "line 2: not a time: true",
        ),
        (
            &["dedup", "--window", "10d", "--period", "3d"],
            b"a\n",
            "--window 10d is not a whole number of --period 3d",
        ),
        (
            &["dedup", "--window", "63d", "--period", "1d"],
            b"a\n",
            "1 to 62 times",
        ),
        (
            &[
                "dedup",
                "--time-field",
                "x",
                "--window",
                "8d",
                "--period",
                "1d",
            ],
            b"a\n",
            "a field number",
        ),
        (
            &["dedup", "--remember", "18446744073709551615"],
            b"a\n",
            "cannot build the filter",
        ),
    ] {
        for threads in ["1", "2"] {
            let mut args = args.to_vec();
            args.extend(["--threads", threads, "--capacity", "1000"]);
            let out = seen(&args, input);
            assert_eq!(out.status.code(), Some(2), "{args:?}");
            let err = String::from_utf8(out.stderr).unwrap();
            assert!(
                err.starts_with("seen: ") && err.contains(says),
                "{args:?}: {err}"
            );
            assert_eq!(err.lines().count(), 1, "{err}");
        }
    }
    // clap's: --time-field and --period need --window; one structure at a time.
    for args in [
        &["dedup", "--time-field", "2"][..],
        &["dedup", "--period", "1d"],
        &["dedup", "--window", "8d"],
        &["dedup", "--exact", "--grow"],
        &[
            "dedup",
            "--remember",
            "10",
            "--window",
            "8d",
            "--period",
            "1d",
        ],
        &["dedup", "--memory", "1MiB", "--capacity", "10"],
    ] {
        let out = seen(args, b"");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
}

/// `--remember N` never drops a new record (its output holds every first occurrence) and
/// drops a duplicate it still remembers.
#[test]
fn remember_never_drops_a_new_record() {
    let input = lines(100_000);
    let expected = first_occurrences(&input);
    for threads in ["1", "2"] {
        let out = seen(
            &["dedup", "--remember", "1000", "--threads", threads],
            &input,
        );
        assert!(out.status.success());
        let got: std::collections::HashSet<&[u8]> =
            out.stdout.split_inclusive(|&b| b == b'\n').collect();
        for line in expected.split_inclusive(|&b| b == b'\n') {
            assert!(got.contains(line), "{line:?} dropped");
        }
        // Duplicates far apart are forgotten (the input's repeats are uniform over the past),
        // so more than the first occurrences are printed, but not every record.
        assert!(out.stdout.len() > expected.len() && out.stdout.len() < input.len());
    }
    // A duplicate right after its key is remembered (with probability 0.9 at 1000 later
    // records; at 1 later record, 1 - 1/buckets).
    let out = seen(&["dedup", "--remember", "1000"], b"a\na\nb\nb\na\n");
    assert_eq!(out.stdout, b"a\nb\n");
}

/// `seen sample`: the same lines for the same seed, about the share of repeats asked for,
/// each repeat a key printed before.
#[test]
fn sample_prints_the_duplicates_asked_for() {
    let a = seen(&["sample", "200000"], b"");
    assert!(a.status.success());
    assert_eq!(
        a.stdout,
        seen(&["sample", "200000", "--seed", "1"], b"").stdout
    );
    assert_ne!(
        a.stdout,
        seen(&["sample", "200000", "--seed", "2"], b"").stdout
    );
    let lines: Vec<&[u8]> = a.stdout.split_inclusive(|&b| b == b'\n').collect();
    assert_eq!(lines.len(), 200_000);
    let distinct = first_occurrences(&a.stdout);
    let repeats = 200_000 - distinct.split_inclusive(|&b| b == b'\n').count();
    // 0.2 · 200,000 = 40,000, the standard deviation 179: within 5 of them.
    assert!((repeats as f64 - 40_000.0).abs() < 900.0, "{repeats}");
    // New keys are numbered in order: the first occurrences are key-0, key-1, ...
    for (i, line) in distinct.split_inclusive(|&b| b == b'\n').enumerate() {
        assert_eq!(line, format!("key-{i}\n").as_bytes());
    }
    for bad in ["1", "-0.1", "nan"] {
        let out = seen(&["sample", "10", "--duplicates", bad], b"");
        assert_eq!(out.status.code(), Some(2), "{bad}");
    }
}

/// `--grow` at the default rate keeps growing far past its capacity (the word layout's rate
/// limit would end the schedule at about 63 times it).
#[test]
fn grow_goes_a_thousand_times_past_its_capacity() {
    let input = seen(&["sample", "120000", "--duplicates", "0"], b"").stdout;
    let out = seen(&["dedup", "--grow", "--capacity", "100", "--stats"], &input);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    // 1,200 times the capacity: 11 layers; a false positive is possible, at most 1e-4 each.
    assert!(out.stdout.len() >= input.len() * 999 / 1000, "{err}");
    assert!(err.contains("11 layers"), "{err}");
}

/// A window's state refuses another window, saying which one it holds, as the flags.
#[test]
fn a_window_state_names_its_window() {
    let dir = std::env::temp_dir().join(format!("seen-cli-window-state-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let state = dir.join("w.seen");
    let state = state.to_str().unwrap();
    let mut args = vec!["dedup", "--capacity", "1000", "--state", state];
    args.extend(["--window", "7d", "--period", "1d"]);
    assert_eq!(seen(&args, b"a\n").stdout, b"a\n");
    let out = seen(
        &[
            "dedup",
            "--capacity",
            "1000",
            "--state",
            state,
            "--window",
            "62d",
            "--period",
            "1d",
        ],
        b"a\n",
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("holds a window of 8 generations of 1d (--window 7d --period 1d), not --window 62d --period 1d"),
        "{err}"
    );
    assert_eq!(seen(&args, b"a\nb\n").stdout, b"b\n");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A record dated ahead of the wall clock moves the window's clock only up to
/// `--future-tolerance` (1 minute by default). Here `a` comes a minute before today (UTC), a
/// record dated two days from now, then `a` again a minute after its first: had the clock
/// followed the second record, today and yesterday would be out of the 2-day window, and `a`
/// printed twice, silently. By default (`--future refuse`) the record is an error naming its
/// line; `--future clamp` decides it at the wall clock plus the tolerance, and says so once; a
/// record within the tolerance moves the clock without a word. With and without `--state`
/// (keys committed once written, or inserted at once).
#[test]
fn a_record_from_the_future_is_refused_or_held_at_the_tolerance() {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let day = 86_400;
    let today = now / day * day;
    let dir = common::scratch("future");
    for state in [false, true] {
        let state_file = dir.join(format!("st-{state}"));
        let args = |more: &[&'static str]| {
            let mut args = vec![
                "dedup".to_string(),
                "-f".into(),
                "1".into(),
                "--time-field".into(),
                "2".into(),
                "--window".into(),
                "2d".into(),
                "--period".into(),
                "1d".into(),
            ];
            if state {
                let _ = std::fs::remove_file(&state_file);
                args.extend(["--state".into(), state_file.to_str().unwrap().into()]);
            }
            args.extend(more.iter().map(|s| s.to_string()));
            args
        };
        let run = |args: &[String], input: &str| {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let out = seen(&args, input.as_bytes());
            let err = String::from_utf8(out.stderr).unwrap();
            (
                out.status.code(),
                String::from_utf8(out.stdout).unwrap(),
                err,
            )
        };
        let first = format!("a\t{}\n", today - 60);
        let ahead = format!("z\t{}\n", now + 2 * day);
        let input = format!("{first}{ahead}a\t{today}\n");
        let (code, out, err) = run(&args(&[]), &input);
        assert_eq!(code, Some(2), "--state {state}: {out:?} {err}");
        assert_eq!(out, first, "--state {state}");
        assert!(
            err.starts_with("seen: standard input, line 2: its time is ")
                && err.contains("more than --future-tolerance 1m"),
            "--state {state}: {err}"
        );
        let (code, out, err) = run(&args(&["--future", "clamp"]), &input);
        assert_eq!(code, Some(0), "--state {state}: {err}");
        assert_eq!(out, format!("{first}{ahead}"), "--state {state}: {err}");
        assert!(
            err.starts_with("seen: warning: 1 record was dated more than --future-tolerance 1m after the wall clock")
                && err.lines().count() == 1,
            "--state {state}: {err}"
        );
        // Within the tolerance (here 30 s of the default minute, or 3 hours of 4).
        for (tolerance, ahead) in [(&[][..], 30), (&["--future-tolerance", "4h"][..], 3 * 3600)] {
            let ahead = format!("z\t{}\n", now + ahead);
            let (code, out, err) = run(&args(tolerance), &format!("{first}{ahead}a\t{today}\n"));
            assert_eq!(code, Some(0), "--state {state}: {err}");
            assert_eq!(out, format!("{first}{ahead}"), "--state {state}");
            assert!(err.is_empty(), "--state {state}: {err}");
        }
        // A tolerance longer than the window would let one record empty it.
        let (code, _, err) = run(&args(&["--future-tolerance", "3d"]), &input);
        assert_eq!(code, Some(2), "{err}");
        assert!(
            err.contains("--future-tolerance 3d is longer than --window 2d"),
            "{err}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
