//! The structures `seen dedup` decides with, at their limits: an overwrite map decides the
//! same for every thread count, a growing filter keeps growing, a window too long for --fpr
//! says which --fpr works.

use std::io::Write;

mod common;

use common::seen;

/// With `--remember`, `--threads N` prints what `--threads 1` prints (the overwrite map's
/// buckets keep the last key of each, so its records are decided in one shard, in input
/// order), as `--threads`' help says.
#[test]
fn remember_prints_the_same_for_every_thread_count() {
    let input = seen(&["sample", "200000"], b"").stdout;
    let one = seen(&["dedup", "--remember", "1000", "--threads", "1"], &input);
    assert!(one.status.success());
    for threads in ["2", "4"] {
        let many = seen(
            &["dedup", "--remember", "1000", "--threads", threads],
            &input,
        );
        assert!(many.status.success());
        assert!(
            one.stdout == many.stdout,
            "--remember 1000: --threads {threads} printed {} lines, --threads 1 {}",
            many.stdout.split(|&b| b == b'\n').count(),
            one.stdout.split(|&b| b == b'\n').count()
        );
    }
}

/// `--grow` keeps growing past 63 times `--capacity` at the default `--fpr` (6 layers of the
/// word layout would end there, with an error about layouts the command cannot choose).
#[test]
fn grow_keeps_growing_past_63_times_the_capacity() {
    let mut input = Vec::new();
    for i in 0..100_000 {
        writeln!(input, "{i}").unwrap();
    }
    let out = seen(
        &[
            "dedup",
            "--grow",
            "--capacity",
            "1000",
            "--threads",
            "1",
            "--count",
        ],
        &input,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
}

/// At the default `--fpr`, a `--window` of more generations than the layout reaches (`--window
/// 1d --period 1h`, `--window 62d --period 1d`) runs, or fails with an error that names `--fpr`
/// (and the smallest one that works), not the layouts the command cannot choose.
#[test]
fn a_window_whose_fpr_is_too_low_says_which_fpr_works() {
    for window in [["1d", "1h"], ["62d", "1d"]] {
        let out = seen(
            &["dedup", "--window", window[0], "--period", window[1]],
            b"a\n",
        );
        let err = String::from_utf8_lossy(&out.stderr);
        if out.status.success() {
            continue;
        }
        assert_eq!(out.status.code(), Some(2));
        assert!(
            err.contains("--fpr") && !err.contains("layout"),
            "--window {} --period {}: {err}",
            window[0],
            window[1]
        );
    }
}
