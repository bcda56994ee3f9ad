//! The flags that several subcommands take (`--capacity`, `--fpr`, `--memory`,
//! `--remember-probability`, `--threads`): a value out of range is refused while the command
//! line is parsed, by every subcommand that takes the flag, with clap's error naming the flag
//! and status 2, before any work (nothing on standard output); and each flag takes the same
//! values everywhere.

mod common;

use common::seen;

/// The subcommands that take each flag, with the arguments the flag needs beside it.
const CAPACITY: &[&[&str]] = &[&["dedup"], &["size"], &["bench"]];
const FPR: &[&[&str]] = &[&["dedup"], &["size"], &["bench"]];
const MEMORY: &[&[&str]] = &[&["dedup"], &["size"]];
const REMEMBER_PROBABILITY: &[&[&str]] = &[
    &["dedup", "--remember", "10"],
    &["size", "--remember", "10"],
    &["bench", "--structures", "overwrite"],
];
const THREADS: &[&[&str]] = &[&["dedup"], &["bench"]];

/// Runs `command` with `flag value`, and checks that clap refused it: status 2, one error
/// naming the flag and saying `why`, nothing on standard output.
fn refused(command: &[&str], flag: &str, value: &str, why: &str) {
    let mut args = command.to_vec();
    args.extend([flag, value]);
    let out = seen(&args, b"a\n");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    // A list's value is named alone (`1,1025`: `'1025'`).
    let last = value.rsplit(',').next().unwrap();
    assert!(
        err.starts_with(&format!("error: invalid value '{last}' for '{flag} <")),
        "{args:?}: {err}"
    );
    assert!(err.contains(why), "{args:?}: {err}");
    assert!(out.stdout.is_empty(), "{args:?}");
}

#[test]
fn an_fpr_outside_0_to_1_is_refused_by_every_subcommand() {
    for command in FPR {
        for value in ["0", "1", "1.5", "-0.5", "NaN", "inf"] {
            refused(
                command,
                "--fpr",
                value,
                "a probability strictly between 0 and 1",
            );
        }
        refused(command, "--fpr", "lots", "not a number");
    }
    refused(&["size"], "--fpr", "1", "strictly between 0 and 1, got 1");
    refused(
        &["bench"],
        "--fpr",
        "-1",
        "strictly between 0 and 1, got -1",
    );
}

#[test]
fn a_remember_probability_outside_0_to_1_is_refused_by_every_subcommand() {
    for command in REMEMBER_PROBABILITY {
        for value in ["0", "1", "-1", "2", "NaN"] {
            refused(
                command,
                "--remember-probability",
                value,
                "a probability strictly between 0 and 1",
            );
        }
    }
}

#[test]
fn a_capacity_of_0_is_refused_by_every_subcommand() {
    for command in CAPACITY {
        refused(
            command,
            "--capacity",
            "0",
            "a count of keys of at least 1, got 0",
        );
        refused(command, "--capacity", "3x", "not a whole number from 1");
    }
}

#[test]
fn a_memory_that_is_not_a_size_is_refused_by_every_subcommand() {
    for command in MEMORY {
        refused(command, "--memory", "0", "not a size from 1 byte");
        refused(command, "--memory", "lots", "not a size");
        refused(command, "--memory", "1XB", "unknown unit");
    }
}

/// `--threads` is one count in `seen dedup` and a list in `seen bench`: each count from 1 to
/// 1024 in both.
#[test]
fn threads_take_1_to_1024_in_every_subcommand() {
    for command in THREADS {
        for value in ["0", "1025"] {
            refused(command, "--threads", value, "is not in 1..=1024");
        }
    }
    refused(&["bench"], "--threads", "1,1025", "1025 is not in 1..=1024");
    // The ends of the range are taken: a run that does the work.
    let out = seen(&["dedup", "--threads", "1024"], b"a\nb\na\n");
    assert!(out.status.success(), "{out:?}");
    assert_eq!(out.stdout, b"a\nb\n");
    for threads in ["1", "1024"] {
        let out = seen(
            &[
                "bench",
                "--items",
                "2",
                "--structures",
                "word",
                "--threads",
                threads,
            ],
            b"",
        );
        assert!(out.status.success(), "{threads}: {out:?}");
        let table = String::from_utf8(out.stdout).unwrap();
        assert!(
            table
                .lines()
                .any(|l| l.split_whitespace().take(2).eq(["word", threads])),
            "{table}"
        );
    }
}

/// The help of each subcommand names the range of its probabilities and thread counts.
#[test]
fn the_help_gives_the_ranges() {
    for (command, says) in [
        ("dedup", &["strictly between 0 and 1", "1 to 1024"][..]),
        ("size", &["strictly between 0 and 1"]),
        ("bench", &["strictly between 0 and 1", "each 1 to 1024"]),
    ] {
        let out = seen(&[command, "--help"], b"");
        assert!(out.status.success());
        let help = String::from_utf8(out.stdout).unwrap();
        for text in says {
            assert!(help.contains(text), "{command}: {text:?} in {help}");
        }
    }
}
