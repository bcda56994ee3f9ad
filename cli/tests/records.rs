//! How `seen dedup` reads its records: a long line through a pipe, keys from JSON (numbers by
//! their text, paths through arrays), and times (Unix seconds or RFC 3339).
#![cfg(unix)]

use std::io::Write;
use std::process::{Command, Stdio};

mod common;

use common::seen;

/// A long line arriving through a pipe (64 KiB reads) is searched for its end once, not from its
/// start after every read (quadratic: about 15 s of CPU for a 96 MiB line, against 0.2 s from a
/// file). The run may use 5 s of CPU time (`ulimit -t`: the run's own time, however busy the
/// machine), then SIGXCPU kills it.
#[test]
fn a_huge_line_from_a_pipe_is_read_in_linear_time() {
    use std::os::unix::process::ExitStatusExt;
    let line_len = 96 << 20;
    let mut child = Command::new("sh")
        .arg("-c")
        .arg("ulimit -t 5 && exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_seen"))
        .args(["dedup", "--exact", "--threads", "1"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        let block = vec![b'x'; 1 << 16];
        for _ in 0..line_len / block.len() {
            if stdin.write_all(&block).is_err() {
                return;
            }
        }
        let _ = stdin.write_all(b"\nshort\n");
    });
    let out = common::wait_with_deadline(child, "a huge line");
    writer.join().unwrap();
    assert_eq!(
        (out.status.code(), out.stdout.len()),
        (Some(0), line_len + 1 + 6),
        "a 96 MiB line through a pipe: {:?} (SIGXCPU is {}: more than 5 s of CPU)",
        out.status.signal(),
        nix::sys::signal::Signal::SIGXCPU as i32
    );
}

/// JSON numbers are keyed by their text, not their `f64` value: two distinct integer ids beyond
/// 2^64 are two keys, and both records are printed.
#[test]
fn distinct_big_json_numbers_are_distinct_keys() {
    let input = b"{\"id\":12345678901234567890123}\n{\"id\":12345678901234567890124}\n";
    let out = seen(&["dedup", "--exact", "--json-key", "id"], input);
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(input)
    );
}

/// A `--json-key` path through an array (`u.0.id`) takes the array's element: each record its
/// own key (not the empty key for all, which would print only the first).
#[test]
fn a_json_path_through_an_array_takes_the_element() {
    let input = b"{\"u\":[{\"id\":5}]}\n{\"u\":[{\"id\":6}]}\n{\"u\":[{\"id\":5}]}\n{\"u\":[]}\n";
    let out = seen(
        &[
            "dedup",
            "--exact",
            "--json-key",
            "u.0.id",
            "--missing-key",
            "print",
        ],
        input,
    );
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "{\"u\":[{\"id\":5}]}\n{\"u\":[{\"id\":6}]}\n{\"u\":[]}\n"
    );
}

/// An RFC 3339 time whose local date is 1969 but whose instant is after the epoch
/// (`1969-12-31T23:00:00-02:00` is 01:00 UTC on 1 January 1970) is a time.
#[test]
fn a_1969_local_date_after_the_epoch_is_a_time() {
    let out = seen(
        &[
            "dedup",
            "--window",
            "1d",
            "--period",
            "1d",
            "-f",
            "1",
            "--time-field",
            "2",
        ],
        b"a\t1969-12-31T23:00:00-02:00\na\t1970-01-01T01:00:00Z\n",
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(out.stdout, b"a\t1969-12-31T23:00:00-02:00\n");
}

/// RFC 3339 times through `--time-field`: one instant written with different offsets is one
/// time (a repeat within the window is dropped), a leap second (`:60`) is the second before it,
/// and a far date is refused with its line: one past the wall clock by more than the window,
/// or one past what the clock holds (2554).
#[test]
fn rfc_3339_times_with_offsets_leap_seconds_and_far_dates() {
    let args = [
        "dedup",
        "--window",
        "1d",
        "--period",
        "1d",
        "-f",
        "1",
        "--time-field",
        "2",
    ];
    let input = b"a\t2016-12-31T23:59:60Z\nb\t2017-01-01T00:59:59+01:00\n\
                  a\t2016-12-31T18:59:59-05:00\nb\t2016-12-31T23:59:59.5Z\n";
    let out = seen(&args, input);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "a\t2016-12-31T23:59:60Z\nb\t2017-01-01T00:59:59+01:00\n"
    );
    assert!(!err.contains("older"), "{err}");
    for (time, says) in [
        (
            "2500-01-01T00:00:00+02:00",
            "after the wall clock, more than --future-tolerance 1m",
        ),
        ("2600-01-01", "out of range"),
        ("2026-11-22T09:30:60", "not a time"),
    ] {
        let input = format!("a\t2020-01-01T00:00:00Z\nb\t{time}\n");
        let out = seen(&args, input.as_bytes());
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{time}: {err}");
        assert!(
            err.starts_with("seen: standard input, line 2: ") && err.contains(says),
            "{time}: {err}"
        );
        assert_eq!(out.stdout, b"a\t2020-01-01T00:00:00Z\n", "{time}");
    }
}

/// A JSON number time and the same text in a string are one time, read from the text and cut
/// to the nanosecond: `1483228799.999999999999` as a number was rounded through an `f64` to the
/// next second, here the next day, while the string was cut within the day. The second record,
/// the same time as a string, is neither older (`--stats` would count it) nor in another
/// period.
#[test]
fn a_json_number_time_is_its_text_as_a_string_is() {
    let args = [
        "dedup",
        "--json-key",
        "k",
        "--time-field",
        "t",
        "--window",
        "1d",
        "--period",
        "1d",
        "--capacity",
        "1000",
        "--stats",
    ];
    let input =
        b"{\"k\":1,\"t\":1483228799.999999999999}\n{\"k\":2,\"t\":\"1483228799.999999999999\"}\n";
    let out = seen(&args, input);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(out.stdout, input);
    assert!(!err.contains("older"), "{err}");
}
