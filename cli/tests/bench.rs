//! `seen bench` run as a subprocess on small workloads (20,000 keys: fast in a debug build):
//! the JSON against the library's sizing and the false-positive bounds, the table, keys from a
//! file, the batch path against the one-by-one path, the bar chart, and every bad input.

use std::ops::Range;
use std::process::{Command, Output};

use seen::Layout;
use seen::sizing;
use serde_json::Value;

mod svg;

fn seen(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_seen"))
        .args(args)
        .output()
        .unwrap()
}

fn json_of(args: &[&str]) -> Value {
    let mut all = vec!["bench", "--json"];
    all.extend_from_slice(args);
    let out = seen(&all);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The results for `structure`, one per thread count.
fn results<'a>(json: &'a Value, structure: &str) -> Vec<&'a Value> {
    json["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["structure"] == structure)
        .collect()
}

fn tempdir() -> std::path::PathBuf {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "seen-bench-test-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

const N: u64 = 20_000;

/// 20,000 keys into a growing filter sized for 100: at the default rate it runs out of layers
/// (an insert fails).
const GROW_PAST_ITS_LAYERS: [&str; 6] = [
    "--items",
    "20000",
    "--capacity",
    "100",
    "--structures",
    "grow",
];

/// Generated key `i` of `seen bench` (`cli/src/bench.rs`, `generated`): SplitMix64 of `i` in 16
/// hex digits; keys `0..n` are inserted, `n..2n` looked up as absent. (The test below checks
/// this copy: its one-thread counts, which depend on every key, must be the bench's.)
fn generated(i: u64) -> String {
    let mut z = i.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    format!("{:016x}", z ^ (z >> 31))
}

/// A Bloom filter of `seen bench`, built as it builds it, whose inserts the test replays in an
/// order of its choosing.
#[allow(clippy::large_enum_variant)] // one model per test run, built once
enum Model {
    Bloom(seen::AtomicBloomFilter),
    /// Compacted after every insert: its snapshot then holds every key inserted.
    Semi(seen::SemiConcurrentBloomFilter, seen::hash::StableHasher),
    Grow(seen::GrowingBloomFilter),
    Window(seen::WindowedBloomFilter),
}

/// The windowed filter's generations in the test's bench (the default).
const GENERATIONS: usize = 7;

impl Model {
    fn new(structure: &str) -> Self {
        let fpr = 0.01;
        match structure {
            "word" | "line" => Self::Bloom(
                seen::AtomicBloomFilter::builder(N)
                    .fpr(fpr)
                    .layout(if structure == "word" {
                        Layout::Word
                    } else {
                        Layout::Line
                    })
                    .build()
                    .unwrap(),
            ),
            "semi" => {
                let f = seen::SemiConcurrentBloomFilter::builder(N)
                    .fpr(fpr)
                    .layout(Layout::Word)
                    .build()
                    .unwrap();
                let hasher = *f.hasher();
                Self::Semi(f, hasher)
            }
            "grow" => Self::Grow(seen::GrowingBloomFilter::with_capacity(N, fpr).unwrap()),
            "window" => Self::Window(
                seen::WindowedBloomFilter::builder(N.div_ceil(GENERATIONS as u64))
                    .fpr(fpr)
                    .periods(GENERATIONS as u32 - 1)
                    .rotate_manually()
                    .build()
                    .unwrap(),
            ),
            other => unreachable!("{other}"),
        }
    }

    /// Inserts key `i` (`generated(i)`, hashed as the bench hashes it); whether it was new.
    fn insert(&self, i: u64) -> bool {
        use seen::hash::ItemHasher;
        let key = generated(i);
        match self {
            Self::Bloom(f) => f.insert_hash(f.hasher().hash_bytes(key.as_bytes())),
            Self::Semi(f, hasher) => {
                let new = f.insert_hash(hasher.hash_bytes(key.as_bytes()));
                f.compact();
                new
            }
            Self::Grow(f) => f
                .insert_hash(f.hasher().hash_bytes(key.as_bytes()))
                .unwrap(),
            Self::Window(f) => f.insert_hash(f.hasher().hash_bytes(key.as_bytes())),
        }
    }

    fn rotate(&self) {
        if let Self::Window(f) = self {
            f.rotate();
        }
    }

    /// Inserts the keys of `uncounted`, then those of `counted`; the inserts of `counted`
    /// that were not new.
    fn duplicates(&self, uncounted: Range<u64>, counted: Range<u64>) -> u64 {
        uncounted.for_each(|i| {
            self.insert(i);
        });
        counted.map(|i| u64::from(!self.insert(i))).sum()
    }
}

/// `range` in `parts` consecutive pieces, as the bench splits its keys over threads and periods.
fn split(range: Range<u64>, parts: u64) -> Vec<Range<u64>> {
    let len = range.end - range.start;
    (0..parts)
        .map(|p| range.start + len * p / parts..range.start + len * (p + 1) / parts)
        .collect()
}

/// The keys each insert of `structure` found already there (false duplicates: the keys are
/// distinct), as the bench inserts them on one thread, and the bounds that hold on two threads
/// whatever the interleaving.
///
/// An insert into these filters is a lookup of the key's bits (in any generation, for the
/// window) that then sets them: it answers "seen" iff every bit was already set, by the keys
/// whose inserts came first, wholly or in part. On two threads, each inserting its half of the
/// keys (of each period, for the window, with the earlier periods wholly inserted and a rotation
/// between them), the bits that a key of one half finds set include those of its own half's
/// earlier keys, and are among those of its own half's earlier keys and all of the other half:
/// so a key is a false duplicate if it is one when inserted after its half's earlier keys
/// alone (the lower bound, summed over the keys), and only if it is one when inserted after
/// those and the other half (the upper bound). Bits only get set, so both are monotone in the
/// keys inserted. The growing filter never grows here: only 20,000 new keys, its first layer's
/// capacity, would make it. The semi-concurrent filter's insert finds a key in its snapshot,
/// the compacted keys, or pending (exactly: a distinct key never is); which keys were still
/// pending depends on the scheduler, so it has the upper bound (a model that compacts after
/// every insert has every earlier key in its snapshot), and 0 as its lower bound.
fn false_duplicates(structure: &str) -> (u64, u64, u64) {
    let periods = if structure == "window" {
        split(0..N, GENERATIONS as u64)
    } else {
        split(0..N, 1)
    };
    let one_thread = {
        let f = Model::new(structure);
        let mut dups = 0;
        for (p, period) in periods.iter().enumerate() {
            if p > 0 {
                f.rotate();
            }
            dups += f.duplicates(0..0, period.clone());
        }
        dups
    };
    let (mut lower, mut upper) = (0, 0);
    for (p, period) in periods.iter().enumerate() {
        let halves = split(period.clone(), 2);
        for (own, other) in [(0, 1), (1, 0)] {
            // The earlier periods whole, a rotation, then this period's keys.
            let model = || {
                let f = Model::new(structure);
                for earlier in &periods[..p] {
                    f.duplicates(earlier.clone(), 0..0);
                    f.rotate();
                }
                f
            };
            lower += model().duplicates(0..0, halves[own].clone());
            upper += model().duplicates(halves[other].clone(), halves[own].clone());
        }
    }
    if structure == "semi" {
        lower = 0;
    }
    (one_thread, lower, upper)
}

#[test]
fn json_reports_every_structure_with_its_memory_and_sane_rates() {
    let json = json_of(&["--items", "20000", "--fpr", "0.01", "--threads", "1,2"]);
    assert_eq!(json["keys"]["inserted"], N);
    assert_eq!(json["keys"]["absent"], N);
    assert_eq!(json["capacity"], N);
    assert_eq!(json["results"].as_array().unwrap().len(), 14);
    let word = sizing::blocked(N, 0.01, Layout::Word).unwrap();
    let line = sizing::blocked(N, 0.01, Layout::Line).unwrap();
    let window = sizing::window(N.div_ceil(7), 7, 0.01).unwrap();
    let buckets = sizing::overwrite_buckets(N, 0.9).unwrap();
    // The word filter's false positives: its final bits are every key's, on any thread count.
    let word_fp = results(&json, "word")[0]["false_positives"]
        .as_u64()
        .unwrap();
    for (structure, bytes) in [
        ("word", Some(word.bytes())),
        ("line", Some(line.bytes())),
        ("window", Some(window.bytes())),
        ("overwrite", Some(buckets * 8)),
        ("semi", None),
        ("grow", None),
        ("exact", None),
    ] {
        let rs = results(&json, structure);
        assert_eq!(rs.len(), 2, "{structure}");
        let bounds =
            (!matches!(structure, "overwrite" | "exact")).then(|| false_duplicates(structure));
        for r in rs {
            let threads = r["threads"].as_u64().unwrap();
            for time in ["insert_ns_per_op", "absent_ns_per_op", "present_ns_per_op"] {
                let t = r[time].as_f64().unwrap();
                assert!(t > 0.0 && t.is_finite(), "{structure} {time}: {t}");
            }
            if let Some(bytes) = bytes {
                assert_eq!(r["memory_bytes"], bytes, "{structure}");
                assert_eq!(r["memory_estimated"], false);
            }
            let fpr = r["measured_fpr"].as_f64().unwrap();
            let false_positives = r["false_positives"].as_u64().unwrap();
            assert_eq!(fpr, false_positives as f64 / N as f64);
            // New keys an insert called seen before: the false positives met while filling.
            let false_duplicates = N - r["inserts_new"].as_u64().unwrap();
            match structure {
                "exact" => {
                    assert_eq!(false_positives, 0);
                    assert_eq!(false_duplicates, 0);
                    assert_eq!(r["present_found"], N);
                    assert_eq!(r["memory_estimated"], true);
                    // At least the keys' 16 bytes and a pointer each.
                    assert!(r["memory_bytes"].as_u64().unwrap() > N * 32);
                }
                // A wrong "seen" takes a 64-bit fingerprint collision: none in 20,000.
                "overwrite" => {
                    assert_eq!(false_positives, 0);
                    assert_eq!(false_duplicates, 0);
                    // Key i survives N - 1 - i later insertions, each with probability
                    // 1 - 1/buckets: on average about (1 - 0.9) / ln(1 / 0.9) = 0.949 of the
                    // keys are remembered. Each key's survival is a coin of its own; the count
                    // varies by about 31 keys (0.16%): 0.94 to 0.96 is 6 of those either side.
                    // The keys found are the buckets any key went to (each keeps one key, the
                    // last to go there, whichever thread wrote it): the same count on any
                    // number of threads, for these fixed keys.
                    let found = r["present_found_fraction"].as_f64().unwrap();
                    assert!(
                        (0.94..0.96).contains(&found),
                        "overwrite remembered {found}"
                    );
                }
                // Bloom filters: every key, and a rate at or under the target up to the
                // sample's noise. The expected count of false positives at capacity is at
                // most 0.97 · 0.01 · 20,000 = 194, its standard deviation about 14: 270 is
                // more than 5 of them above (the keys are fixed, so the count is anyway). The
                // growing filter grew at its capacity, so its rate is its first layer's 0.002
                // (40 expected).
                _ => {
                    assert_eq!(r["present_found"], N, "{structure}: a false negative");
                    assert!(false_positives <= 270, "{structure}: {false_positives}");
                    // A filter that answers "absent" to everything would pass the bound above.
                    // The semi-concurrent filter on two threads ends with the keys that were
                    // pending (looked up exactly) out of its bits: its count depends on the
                    // scheduler, and is at most the word filter's, whose bits it has.
                    let floor = if structure == "grow" { 10 } else { 120 };
                    if structure == "semi" {
                        assert!(false_positives <= word_fp, "semi {false_positives}");
                    }
                    if structure != "semi" || threads == 1 {
                        assert!(false_positives >= floor, "{structure}: {false_positives}");
                    }
                    // While it fills, the rate climbs from 0 to the final one: the false
                    // duplicates are some and fewer than the false positives after the fill.
                    // On one thread their count is the model's (which checks the model); on
                    // two, within the bounds that hold for every interleaving (the lower one
                    // may be 0: each half alone is half the capacity).
                    let (one_thread, lower, upper) = bounds.unwrap();
                    assert!(
                        0 < one_thread && upper < false_positives,
                        "{structure}: {one_thread} false duplicates on one thread, at most \
                         {upper} on two, {false_positives} false positives"
                    );
                    if threads == 1 {
                        assert_eq!(false_duplicates, one_thread, "{structure}");
                    } else {
                        assert!(
                            (lower..=upper).contains(&false_duplicates),
                            "{structure}: {false_duplicates} false duplicates on two threads, \
                             not in {lower}..={upper}"
                        );
                    }
                }
            }
        }
    }
    // Two threads insert the same keys: the same final filter, so the same answers.
    for structure in ["word", "line", "window", "grow", "exact"] {
        let rs = results(&json, structure);
        assert_eq!(
            rs[0]["false_positives"], rs[1]["false_positives"],
            "{structure}"
        );
    }
    // The semi-concurrent filter has the word filter's bits, and looks its pending keys up
    // exactly: on one thread (its compactions then come at the same inserts every run), no
    // more false duplicates than the word filter, whose bits are never behind.
    let word = results(&json, "word");
    let dups = |r: &Value| N - r["inserts_new"].as_u64().unwrap();
    let semi = results(&json, "semi");
    assert!(
        dups(semi[0]) <= dups(word[0]),
        "semi {}, word {}",
        semi[0],
        word[0]
    );
    let word_bytes = word[0]["memory_bytes"].as_u64().unwrap();
    for semi in semi {
        // "SemiConcurrentBloomFilter, word layout, k = 5, a compaction every 1,024 inserts
        // (19 run, 515 keys pending at the end); ...".
        let description = semi["description"].as_str().unwrap();
        assert!(
            description.starts_with("SemiConcurrentBloomFilter, word layout"),
            "{description}"
        );
        let count = |after: &str| -> u64 {
            let tail = &description[description.find(after).unwrap() + after.len()..];
            tail[..tail.find(' ').unwrap()]
                .replace(',', "")
                .parse()
                .unwrap()
        };
        let (compactions, pending) = (count("("), count("run, "));
        // The first insert that finds 1,024 keys pending compacts, or another is compacting.
        assert!(compactions >= 1 && pending < N, "{description}");
        // Two copies of the word filter's bits, the buffer (two tables of 4,096 slots of 16
        // bytes at the default 1,024 inserts per compaction), the summary (16,384 slots of 8
        // bytes), and 64 bytes per key in the overflow (some of the pending keys, or none).
        assert_eq!(semi["memory_estimated"], true);
        let fixed = 2 * word_bytes + 2 * 4096 * 16 + 16384 * 4;
        let memory = semi["memory_bytes"].as_u64().unwrap();
        assert!(
            memory >= fixed && memory <= fixed + 64 * pending,
            "{memory} {fixed} {description}"
        );
    }
}

#[test]
fn the_table_has_a_row_per_structure_and_thread_count() {
    let out = seen(&[
        "bench",
        "--items",
        "20000",
        "--structures",
        "word,semi,exact",
        "--threads",
        "1,2",
    ]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let names = ["word", "semi", "exact"];
    let rows: Vec<Vec<&str>> = text
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|cells| cells.len() == 11 && names.contains(&cells[0]))
        .collect();
    assert_eq!(rows.len(), 6, "{text}");
    let expected = ["1", "2"]
        .into_iter()
        .flat_map(|threads| names.map(|name| (name, threads)));
    for (row, (name, threads)) in rows.iter().zip(expected) {
        assert_eq!((row[0], row[1]), (name, threads), "{text}");
        assert_eq!(row[7], "100%", "{text}");
    }
    let bytes = sizing::blocked(N, 1e-4, Layout::Word).unwrap().bytes();
    let word_bytes: u64 = rows[0][8].replace(',', "").parse().unwrap();
    assert_eq!(word_bytes, bytes);
    assert!(rows[1][8].ends_with('*'), "the estimate is marked");
    assert!(rows[2][8].ends_with('*'), "the estimate is marked");
    assert!(text.contains("exact     dashmap::DashMap"), "{text}");
    assert!(!text.contains("Mutex"), "{text}");
}

#[test]
fn keys_from_a_file_duplicates_included() {
    let dir = tempdir();
    let path = dir.join("keys.txt");
    // 5,000 lines, 4,000 distinct.
    let text: String = (0..5000).map(|i| format!("user-{}\n", i % 4000)).collect();
    std::fs::write(&path, text).unwrap();
    let json = json_of(&[
        "--input",
        path.to_str().unwrap(),
        "--structures",
        "exact,line",
        "--fpr",
        "0.01",
    ]);
    assert_eq!(json["keys"]["source"], "file");
    assert_eq!(json["keys"]["inserted"], 5000);
    assert_eq!(json["keys"]["distinct"], 4000);
    assert_eq!(json["keys"]["absent"], 4000);
    assert_eq!(json["capacity"], 4000);
    let exact = results(&json, "exact")[0];
    assert_eq!(exact["present_found"], 5000);
    // Each distinct key new once, its repeats not.
    assert_eq!(exact["inserts_new"], 4000);
    // The absent keys are really absent: the exact set finds none.
    assert_eq!(exact["false_positives"], 0);
    let line = results(&json, "line")[0];
    assert_eq!(line["present_found"], 5000);
    assert_eq!(
        line["memory_bytes"],
        sizing::blocked(4000, 0.01, Layout::Line).unwrap().bytes()
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn two_threads_share_one_exact_set() {
    let dir = tempdir();
    let path = dir.join("keys.txt");
    // The same 4,000 keys twice: with 2 threads, each inserts one copy, both in the same order
    // at the same time, into one set (a set per thread would call 8,000 of them new).
    let text: String = (0..8000).map(|i| format!("key-{}\n", i % 4000)).collect();
    std::fs::write(&path, text).unwrap();
    let json = json_of(&[
        "--input",
        path.to_str().unwrap(),
        "--structures",
        "exact,semi",
        "--threads",
        "2",
    ]);
    let exact = results(&json, "exact")[0];
    assert_eq!(exact["inserts_new"], 4000);
    assert_eq!(exact["present_found"], 8000);
    assert_eq!(exact["false_positives"], 0);
    let semi = results(&json, "semi")[0];
    assert_eq!(semi["present_found"], 8000);
    // At least once: a key the two threads insert at the same moment can be new to both.
    assert!(semi["inserts_new"].as_u64().unwrap() <= 8000);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn the_batch_path_answers_as_one_by_one() {
    let args = [
        "--items",
        "20000",
        "--fpr",
        "0.01",
        "--structures",
        "word,line,semi,grow,window,overwrite",
    ];
    let single = json_of(&args);
    let mut batched = args.to_vec();
    batched.push("--batch");
    let batched = json_of(&batched);
    assert_eq!(batched["batch"], true);
    for structure in ["word", "line", "semi", "grow", "window", "overwrite"] {
        let (a, b) = (
            results(&single, structure)[0],
            results(&batched, structure)[0],
        );
        assert_eq!(a["false_positives"], b["false_positives"], "{structure}");
        assert_eq!(a["present_found"], b["present_found"], "{structure}");
        assert_eq!(a["inserts_new"], b["inserts_new"], "{structure}");
    }
}

#[test]
fn the_plot_has_a_bar_per_structure_and_operation() {
    let dir = tempdir();
    let path = dir.join("bench.svg");
    let out = seen(&[
        "bench",
        "--items",
        "20000",
        "--structures",
        "word,semi,exact",
        "--threads",
        "1,2",
        "--plot",
        path.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&path).unwrap();
    svg::check_well_formed(&text);
    // 3 structures × 2 thread counts, 3 operations each.
    let bars: Vec<&str> = text.split(r#"<rect class="bar""#).skip(1).collect();
    assert_eq!(bars.len(), 18, "{text}");
    for bar in &bars {
        let height = bar.split(r#"height=""#).nth(1).unwrap();
        let height: f64 = height[..height.find('"').unwrap()].parse().unwrap();
        assert!(height > 0.0, "{bar}");
    }
    for group in ["word ×1", "semi ×2", "exact ×2"] {
        assert!(text.contains(group), "{group}");
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_structure_that_fails_costs_the_others_their_results() {
    // 20,000 keys into filters sized for 100: the growing filter runs out of layers at this
    // rate; every other structure is measured and shown, then the failure, and status 2.
    let out = seen(&["bench", "--json", "--items", "20000", "--capacity", "100"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("grow: an insert failed") && stderr.contains("raise --capacity"),
        "{stderr}"
    );
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    for structure in ["word", "line", "semi", "window", "overwrite", "exact"] {
        assert_eq!(results(&json, structure).len(), 1, "{structure}");
    }
    assert!(results(&json, "grow").is_empty());
}

#[test]
fn the_plot_path_is_checked_before_anything_is_measured() {
    // Both the keys' file and the plot's path are missing: the plot's is reported, so it was
    // checked before the keys were read, let alone measured.
    let out = seen(&[
        "bench",
        "--input",
        "/nonexistent-dir/keys.txt",
        "--plot",
        "/nonexistent-dir/b.svg",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("/nonexistent-dir/b.svg"), "{stderr}");
    assert!(!stderr.contains("keys.txt"), "{stderr}");
    // A run that fails leaves no plot it created, and an existing file as it was.
    let dir = tempdir();
    let mut failing = vec!["bench"];
    failing.extend_from_slice(&GROW_PAST_ITS_LAYERS);
    failing.push("--plot");
    let new = dir.join("new.svg");
    let mut args = failing.clone();
    args.push(new.to_str().unwrap());
    assert_eq!(seen(&args).status.code(), Some(2));
    assert!(!new.exists());
    let old = dir.join("old.svg");
    std::fs::write(&old, "an earlier plot").unwrap();
    let mut args = failing.clone();
    args.push(old.to_str().unwrap());
    assert_eq!(seen(&args).status.code(), Some(2));
    assert_eq!(std::fs::read_to_string(&old).unwrap(), "an earlier plot");
    std::fs::remove_dir_all(dir).unwrap();
}

#[cfg(unix)]
#[test]
fn a_killed_run_leaves_no_new_plot_behind() {
    use std::sync::mpsc;
    // The keys come from a FIFO: `seen` opens it to read them after checking the plot's path,
    // and the test's open of the FIFO for writing returns only once `seen` has opened it. The
    // run is killed (SIGKILL: no destructor runs) right there.
    let dir = tempdir();
    let fifo = dir.join("keys.fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let old = dir.join("old.svg");
    std::fs::write(&old, "an earlier plot").unwrap();
    for plot in [dir.join("new.svg"), old.clone()] {
        let child = Command::new(env!("CARGO_BIN_EXE_seen"))
            .args(["bench", "--input"])
            .arg(&fifo)
            .arg("--plot")
            .arg(&plot)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Two threads, one channel: the FIFO opened by `seen`, or `seen` ending without
        // opening it (the writer's thread then stays blocked, and the test fails).
        enum Event {
            Opened(std::io::Result<std::fs::File>),
            Ended(std::process::ExitStatus),
        }
        let (events, event) = mpsc::channel();
        let pid = child.id();
        let opener = events.clone();
        let writer_path = fifo.clone();
        std::thread::spawn(move || {
            let writer = std::fs::OpenOptions::new().write(true).open(writer_path);
            let _ = opener.send(Event::Opened(writer));
        });
        std::thread::spawn(move || {
            let mut child = child;
            let _ = events.send(Event::Ended(child.wait().unwrap()));
        });
        let deadline = std::time::Duration::from_secs(120);
        let writer = match event.recv_timeout(deadline).expect("seen opens the FIFO") {
            Event::Opened(writer) => writer.unwrap(),
            Event::Ended(status) => panic!("seen ended before reading the keys: {status}"),
        };
        let killed = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(i32::try_from(pid).unwrap()),
            nix::sys::signal::Signal::SIGKILL,
        );
        assert_eq!(killed, Ok(()));
        match event.recv_timeout(deadline).expect("the killed run ends") {
            Event::Ended(status) => assert!(!status.success(), "{status}"),
            Event::Opened(_) => unreachable!("opened once"),
        }
        drop(writer);
        if plot == old {
            assert_eq!(std::fs::read_to_string(&old).unwrap(), "an earlier plot");
        } else {
            assert!(!plot.exists(), "{}", plot.display());
        }
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn the_plot_can_go_to_a_device_or_a_pipe() {
    // Neither /dev/null nor a pipe can be truncated (`set_len` fails with EINVAL), yet both
    // take a plot: only a regular file has contents to replace.
    let out = seen(&["bench", "--items", "1000", "--plot", "/dev/null"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // `output()` gives the command a pipe for its standard output.
    let out = seen(&["bench", "--items", "1000", "--plot", "/dev/stdout"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("<svg") && stdout.contains("structure"),
        "{stdout}"
    );
}

#[test]
fn the_plot_is_never_written_over_the_keys() {
    // The same file as --input (by its name, or through a link): refused before anything is
    // measured, the keys left as they were; a missing one is reported as missing, not created.
    let dir = tempdir();
    let keys = dir.join("keys.txt");
    std::fs::write(&keys, "a\nb\nc\n").unwrap();
    let mut plots = vec![keys.clone()];
    #[cfg(unix)]
    {
        let link = dir.join("link.svg");
        std::os::unix::fs::symlink(&keys, &link).unwrap();
        plots.push(link);
    }
    for plot in plots {
        let out = seen(&[
            "bench",
            "--input",
            keys.to_str().unwrap(),
            "--plot",
            plot.to_str().unwrap(),
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains("--input"), "{stderr}");
        assert_eq!(std::fs::read_to_string(&keys).unwrap(), "a\nb\nc\n");
    }
    let missing = dir.join("missing.txt");
    let path = missing.to_str().unwrap();
    let out = seen(&["bench", "--input", path, "--plot", path]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(!missing.exists());
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn bad_input_is_one_line_of_error_and_status_2() {
    let dir = tempdir();
    let empty = dir.join("empty.txt");
    std::fs::write(&empty, "").unwrap();
    let empty = empty.to_str().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (
            &["--input", "/nonexistent-dir/keys.txt"],
            "/nonexistent-dir/keys.txt",
        ),
        (&["--input", empty], empty),
        // One structure, which cannot be built: nothing to show (with others, they would be
        // shown: `a_structure_that_fails_costs_the_others_their_results`).
        (
            &["--fpr", "1e-5", "--structures", "grow"],
            "leave it out with --structures",
        ),
        (&GROW_PAST_ITS_LAYERS, "grow: an insert failed"),
        (
            &["--items", "1000", "--plot", "/nonexistent-dir/b.svg"],
            "/nonexistent-dir/b.svg",
        ),
    ];
    for (args, why) in cases {
        let mut all = vec!["bench"];
        all.extend_from_slice(args);
        let out = seen(&all);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(
            stderr.starts_with("seen: ") && stderr.contains(why),
            "{args:?}: {stderr}"
        );
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    // Usage errors are clap's (status 2 too).
    for args in [
        &["bench", "--threads", "0"][..],
        &["bench", "--structures", "word,bogus"],
        &["bench", "--items", "0"],
        &["bench", "--items", "5", "--input", empty],
        // Checked while parsing, whatever the structures.
        &["bench", "--structures", "window", "--generations", "64"],
        &["bench", "--structures", "word", "--generations", "0"],
    ] {
        let out = seen(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    std::fs::remove_dir_all(dir).unwrap();
}
