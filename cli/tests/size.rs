//! `seen size` run as a subprocess: every figure it prints is checked against the library's
//! own sizing called here, the plots are well-formed SVG with the curves they promise, and
//! every bad input is one line of error and status 2, quickly.

use std::process::{Command, Output};

use seen::Layout;
use seen::sizing::{self, BloomSizing, GrowingSizing};

mod svg;

fn seen(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_seen"))
        .args(args)
        .output()
        .unwrap()
}

/// `seen` with `args`, allowed 10 seconds of CPU time (`ulimit -t`): a run that loops over
/// what it could compute at once is killed by SIGXCPU, however busy or quiet the machine
/// (CPU time, unlike the time on a clock, is the run's own).
fn seen_quickly(args: &[&str]) -> Output {
    Command::new("sh")
        .arg("-c")
        .arg("ulimit -t 10 && exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_seen"))
        .args(args)
        .output()
        .unwrap()
}

/// Standard output of a run that must succeed.
fn stdout_of(args: &[&str]) -> String {
    let out = seen(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The cells of the first line whose first cell is `name` (cells are separated by two or
/// more spaces).
fn row<'a>(text: &'a str, name: &str) -> Vec<&'a str> {
    row_where(text, name, |first| first == name)
}

/// The cells of the first line whose first cell starts with `prefix`.
fn row_starting<'a>(text: &'a str, prefix: &str) -> Vec<&'a str> {
    row_where(text, prefix, |first| first.starts_with(prefix))
}

fn row_where<'a>(text: &'a str, name: &str, found: impl Fn(&str) -> bool) -> Vec<&'a str> {
    text.lines()
        .map(|line| {
            line.trim()
                .split("  ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .collect::<Vec<_>>()
        })
        .find(|cells| cells.first().is_some_and(|first| found(first)))
        .unwrap_or_else(|| panic!("no row {name:?} in\n{text}"))
}

fn number(cell: &str) -> u64 {
    cell.replace(',', "")
        .parse()
        .unwrap_or_else(|_| panic!("{cell:?}"))
}

/// The rate as the table prints it: 3 significant digits.
fn rate(p: f64) -> String {
    format!("{p:.2e}")
}

#[test]
fn the_bloom_table_is_the_library_sizing() {
    for (capacity, fpr) in [(1_000_000u64, 0.01), (10_000_000, 1e-4), (777, 0.3)] {
        let text = stdout_of(&[
            "size",
            "--capacity",
            &capacity.to_string(),
            "--fpr",
            &fpr.to_string(),
        ]);
        for (name, layout) in [("word layout", Layout::Word), ("line layout", Layout::Line)] {
            let s = sizing::blocked(capacity, fpr, layout).unwrap();
            let cells = row(&text, name);
            assert_eq!(number(cells[1]), capacity, "{name}");
            assert_eq!(cells[2], s.hashes.to_string(), "{name} k");
            assert_eq!(cells[3], format!("{:.2}", s.bits_per_item()), "{name}");
            assert_eq!(number(cells[4]), s.bytes(), "{name} bytes");
            assert_eq!(cells[6], rate(s.expected_fpr), "{name} fpr");
        }
        for (name, s) in [
            ("classic (textbook)", BloomSizing::optimal(capacity, fpr)),
            (
                "classic, guaranteed",
                BloomSizing::guaranteed(capacity, fpr),
            ),
        ] {
            let s = s.unwrap();
            let cells = row(&text, name);
            assert_eq!(cells[2], s.hashes.to_string(), "{name} k");
            assert_eq!(number(cells[4]), s.bytes(), "{name} bytes");
            assert_eq!(cells[6], rate(s.fpr_at(capacity)), "{name} fpr");
        }
    }
}

#[test]
fn past_capacity_the_rates_follow_the_library_and_rise() {
    let (capacity, fpr) = (1_000_000u64, 0.01);
    let text = stdout_of(&["size", "--capacity", "1000000", "--fpr", "0.01"]);
    let past = &text[text.find("Past capacity").unwrap()..];
    let loads = [0.5, 1.0, 2.0, 4.0];
    let classic = BloomSizing::optimal(capacity, fpr).unwrap();
    let cells = row(past, "classic (textbook)");
    for (cell, t) in cells[1..].iter().zip(loads) {
        let items = (t * capacity as f64) as u64;
        assert_eq!(*cell, rate(classic.fpr_at(items)), "classic at {t}x");
    }
    let cells = row_starting(past, "rule of thumb");
    for (cell, t) in cells[1..].iter().zip(loads) {
        let p = sizing::overfull_fpr_estimate(classic.hashes, t).unwrap();
        assert_eq!(*cell, rate(p), "rule of thumb at {t}x");
    }
    // The layouts' rates come from a model filter: at capacity they must agree with the
    // sizing's exact model (measured: within 5% at 100,000 keys; 20% is far outside the
    // noise and far inside any wrong k or load, which moves the rate by 2x or more).
    for (name, layout) in [("word layout", Layout::Word), ("line layout", Layout::Line)] {
        let expected = sizing::blocked(capacity, fpr, layout).unwrap().expected_fpr;
        let rates: Vec<f64> = row(past, name)[1..]
            .iter()
            .map(|c| c.parse().unwrap())
            .collect();
        assert!(
            (rates[1] / expected - 1.0).abs() < 0.2,
            "{name}: {} at 1x, expected {expected}",
            rates[1]
        );
        assert!(rates.windows(2).all(|w| w[0] < w[1]), "{name}: {rates:?}");
        assert!(rates[3] > 10.0 * fpr, "{name} at 4x: {rates:?}");
    }
}

#[test]
fn memory_gives_the_most_keys_that_fit() {
    let bytes = 1u64 << 20;
    let text = stdout_of(&["size", "--memory", "1MiB", "--fpr", "0.001"]);
    for (name, layout) in [("word layout", Layout::Word), ("line layout", Layout::Line)] {
        let keys = number(row(&text, name)[1]);
        assert!(sizing::blocked(keys, 0.001, layout).unwrap().bytes() <= bytes);
        assert!(
            sizing::blocked(keys + 1, 0.001, layout).unwrap().bytes() > bytes,
            "{name}"
        );
    }
    let keys = number(row(&text, "classic (textbook)")[1]);
    assert!(BloomSizing::optimal(keys, 0.001).unwrap().bytes() <= bytes);
    assert!(BloomSizing::optimal(keys + 1, 0.001).unwrap().bytes() > bytes);
    // With --window, the keys per period.
    let text = stdout_of(&[
        "size", "--memory", "1MiB", "--fpr", "0.01", "--window", "7d", "--period", "1d",
    ]);
    let cell = row(&text, "keys per period")[1];
    let keys = number(cell.split(' ').next().unwrap());
    // 7 days of 1 day: 8 live generations, as `seen dedup --window 7d --period 1d` builds.
    assert!(sizing::window(keys, 8, 0.01).unwrap().bytes() <= bytes);
    assert!(
        sizing::window(keys + 1, 8, 0.01).unwrap().bytes() > bytes,
        "{keys}"
    );
}

#[test]
fn the_window_is_sizing_window_of_its_generations() {
    // One generation per period of the window and the current one: what `seen dedup` builds.
    for (window, period, generations) in [
        ("8d", "1d", 9u32),
        ("36h", "12h", 4),
        ("1w", "1d", 8),
        ("90m", "30m", 4),
    ] {
        let text = stdout_of(&[
            "size",
            "--capacity",
            "1000000",
            "--fpr",
            "0.01",
            "--window",
            window,
            "--period",
            period,
        ]);
        let s = sizing::window(1_000_000, generations, 0.01).unwrap();
        let section = &text[text.find("Windowed filter").unwrap()..];
        assert!(
            section.contains(&format!("{generations} generations of {period}")),
            "{section}"
        );
        assert_eq!(row(section, "k")[1], s.generation.hashes.to_string());
        assert_eq!(
            row(section, "fpr per generation")[1],
            rate(s.generation_fpr)
        );
        let bytes = row(section, "bytes")[1];
        assert_eq!(
            number(bytes.split(' ').next().unwrap()),
            s.bytes(),
            "{window}"
        );
        assert_eq!(
            row(section, "lines per lookup")[1],
            s.lines_per_lookup().to_string()
        );
        assert!(row(section, "expected fpr")[1].starts_with(&rate(s.expected_fpr)));
    }
}

#[test]
fn the_growing_schedule_is_growing_sizing() {
    let (capacity, fpr, items) = (1_000_000u64, 0.01, 100_000_000u64);
    let text = stdout_of(&[
        "size",
        "--capacity",
        "1000000",
        "--fpr",
        "0.01",
        "--grow",
        "--items",
        "100000000",
    ]);
    let g = GrowingSizing::new(capacity, fpr, Layout::Word, 2, 0.8).unwrap();
    let layers = g.layers_for(items).unwrap();
    assert_eq!(layers, 7);
    let section = &text[text.find("Growing filter").unwrap()..];
    assert!(
        section.contains(&format!("take {layers} layers")),
        "{section}"
    );
    for i in 0..layers {
        let cells = row(section, &i.to_string());
        let layer = g.layer(i).unwrap();
        assert_eq!(number(cells[1]), g.layer_capacity(i).unwrap(), "layer {i}");
        assert_eq!(cells[3], rate(g.layer_fpr(i)), "layer {i}");
        assert_eq!(cells[4], layer.hashes.to_string(), "layer {i}");
        assert_eq!(number(cells[5]), layer.bytes(), "layer {i}");
    }
    let total = row_starting(section, "total:")[0];
    let bytes = total
        .trim_start_matches("total: ")
        .split(' ')
        .next()
        .unwrap();
    assert_eq!(number(bytes), g.bytes(layers).unwrap());
    assert!(total.contains(&rate(g.fpr_bound(layers))), "{total}");
    // The line layout, asked for, reaches rates the word layout does not.
    let text = stdout_of(&[
        "size",
        "--grow",
        "--layout",
        "line",
        "--items",
        "1000000000",
    ]);
    let g = GrowingSizing::new(10_000_000, 1e-4, Layout::Line, 2, 0.8).unwrap();
    assert!(text.contains(&format!(
        "take {} layers",
        g.layers_for(1_000_000_000).unwrap()
    )));
}

#[test]
fn remember_sizes_the_overwrite_map() {
    let text = stdout_of(&["size", "--remember", "3600000"]);
    let buckets = sizing::overwrite_buckets(3_600_000, 0.9).unwrap();
    assert_eq!(buckets, 34_168_399);
    assert_eq!(number(row(&text, "buckets")[1]), buckets);
    let bytes = row(&text, "bytes")[1];
    let map = seen::OverwriteMap::with_buckets(1000).unwrap();
    assert_eq!(
        number(bytes.split(' ').next().unwrap()),
        buckets * map.memory_bytes() / 1000
    );
    let window = sizing::overwrite_window(buckets, 0.9).unwrap();
    assert_eq!(
        number(row(&text, "window")[1].split(' ').next().unwrap()),
        window
    );
    for later in [900_000u64, 3_600_000, 14_400_000] {
        let p = sizing::overwrite_remember_probability(buckets, later).unwrap();
        assert_eq!(
            row(&text, &seen_grouped(later))[1],
            format!("{p:.6}"),
            "{later}"
        );
    }
    // The trap the design notes describe: 0.1 remembers, and needs far fewer buckets.
    let text = stdout_of(&[
        "size",
        "--remember",
        "3600000",
        "--remember-probability",
        "0.1",
    ]);
    assert_eq!(number(row(&text, "buckets")[1]), 1_563_461);
}

/// `seen size --remember N` prints the duplicates a consumer should expect against the memory,
/// for N keys a window delivered once or twice: every figure is the library's sizing (the
/// table of `docs/sizing.md`, "Duplicates against memory", for the window given).
#[test]
fn remember_prints_the_duplicates_against_memory_for_one_and_two_deliveries() {
    for (window, asked) in [(3_600_000u64, 0.9), (10_000, 0.95)] {
        let text = stdout_of(&[
            "size",
            "--remember",
            &window.to_string(),
            "--remember-probability",
            &asked.to_string(),
        ]);
        let once_at = text.find("Delivered once").expect(&text);
        let twice_at = text.find("Delivered twice").expect(&text);
        let (once, twice) = (&text[once_at..twice_at], &text[twice_at..]);
        assert!(once.contains(&format!("(--remember {window})")), "{once}");
        assert!(
            twice.contains(&format!("(--remember {})", 2 * window)),
            "{twice}"
        );
        let mut rows = vec![0.5, 0.9, 0.99, 0.999];
        if !rows.contains(&asked) {
            rows.push(asked);
        }
        for r in rows {
            let name = r.to_string();
            let again = |buckets: u64, later: u64| {
                1.0 - sizing::overwrite_remember_probability(buckets, later).unwrap()
            };
            let n1 = sizing::overwrite_buckets(window, r).unwrap();
            let n2 = sizing::overwrite_buckets(2 * window, r).unwrap();
            let cells = row(once, &name);
            assert_eq!(number(cells[1]), n1, "once {r}");
            assert_close(memory(cells[2]), n1 as f64 * 8.0, "once memory {r}");
            assert_close(rate_percent(cells[3]), again(n1, window), "once again {r}");
            assert!(
                rate_percent(cells[3]) <= (1.0 - r) * 1.005,
                "{r}: {}",
                cells[3]
            );
            let cells = row(twice, &name);
            assert_eq!(number(cells[1]), n2, "twice {r}");
            assert_close(memory(cells[2]), n2 as f64 * 8.0, "twice memory {r}");
            assert_close(
                rate_percent(cells[3]),
                again(n2, 2 * window),
                "twice again {r}",
            );
            // The map sized for one delivery, given two: about 1 - r^2.
            let sized_for_once = again(n1, 2 * window);
            assert_close(
                rate_percent(cells[4]),
                sized_for_once,
                "twice in once's map {r}",
            );
            assert!((sized_for_once - (1.0 - r * r)).abs() < 0.002, "{r}");
        }
    }
}

/// Within the 3 significant digits the tables print.
fn assert_close(printed: f64, exact: f64, what: &str) {
    assert!(
        (printed - exact).abs() <= exact * 0.005,
        "{what}: printed {printed}, exact {exact}"
    );
}

/// `39.6 MiB` in bytes.
fn memory(cell: &str) -> f64 {
    let (value, unit) = cell.split_once(' ').unwrap();
    let shift = match unit {
        "KiB" => 10,
        "MiB" => 20,
        "GiB" => 30,
        "TiB" => 40,
        _ => panic!("{cell:?}"),
    };
    value.parse::<f64>().unwrap() * (1u64 << shift) as f64
}

/// `19.0%` as 0.19.
fn rate_percent(cell: &str) -> f64 {
    cell.strip_suffix('%').unwrap().parse::<f64>().unwrap() / 100.0
}

/// `1,234,567`, as the tables print counts.
fn seen_grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[test]
fn the_fpr_plot_has_a_rising_curve_per_filter_and_marks_the_capacity() {
    let dir = tempdir();
    let path = dir.join("fpr.svg");
    let path = path.to_str().unwrap();
    stdout_of(&[
        "size",
        "--capacity",
        "100000",
        "--fpr",
        "0.01",
        "--plot",
        path,
    ]);
    let text = std::fs::read_to_string(path).unwrap();
    svg::check_well_formed(&text);
    let curves = svg::polylines(&text);
    // Word, line, the textbook filter and the rule of thumb.
    assert_eq!(curves.len(), 4, "{text}");
    for (name, points) in &curves {
        assert!(points.len() > 20, "{name}: {points:?}");
        // x grows; the rate grows, so the SVG's y (downwards) falls.
        assert!(points.windows(2).all(|w| w[0].0 < w[1].0), "{name}");
        assert!(points.windows(2).all(|w| w[0].1 >= w[1].1), "{name}");
    }
    let names: Vec<&str> = curves.iter().map(|c| c.0.as_str()).collect();
    assert!(
        names.contains(&"word layout") && names.contains(&"line layout"),
        "{names:?}"
    );
    assert_eq!(text.matches(r#"class="mark""#).count(), 2);
    assert!(
        text.contains(&rate(
            sizing::blocked(100_000, 0.01, Layout::Word)
                .unwrap()
                .expected_fpr
        ))
    );
    // Log scale: decade ticks.
    assert!(text.contains(">1e-3<") && text.contains(">0.01<"), "{text}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn the_remember_plot_is_a_falling_curve() {
    let dir = tempdir();
    let path = dir.join("remember.svg");
    let path = path.to_str().unwrap();
    stdout_of(&["size", "--remember", "10000", "--plot", path]);
    let text = std::fs::read_to_string(path).unwrap();
    svg::check_well_formed(&text);
    let curves = svg::polylines(&text);
    assert_eq!(curves.len(), 1);
    let points = &curves[0].1;
    assert!(points.len() > 20);
    assert!(points.windows(2).all(|w| w[0].0 < w[1].0));
    // The probability falls, so the SVG's y (downwards) grows, from the top (probability 1).
    assert!(points.windows(2).all(|w| w[0].1 < w[1].1), "{points:?}");
    assert_eq!(text.matches(r#"class="mark""#).count(), 1);
    std::fs::remove_dir_all(dir).unwrap();
}

fn tempdir() -> std::path::PathBuf {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "seen-size-test-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn bad_input_is_one_line_of_error_and_status_2_quickly() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["--fpr", "1e-30"],
            "below 4.7e-15, the lowest the Line layout reaches",
        ),
        (&["--capacity", "18446744073709551615"], "exceed the limit"),
        (&["--memory", "10"], "below the smallest filter"),
        (&["--memory", "lots"], "not a size"),
        (
            &["--window", "8d", "--period", "3d"],
            "not a whole number of --period 3d",
        ),
        (
            &["--window", "100d", "--period", "1d"],
            "must be 1 to 62 times --period 1d",
        ),
        (
            &["--window", "8d", "--period", "1d", "--fpr", "1e-5"],
            "windowed filter",
        ),
        (&["--window", "8", "--period", "1d"], "no unit"),
        (&["--grow", "--fpr", "1e-5"], "growing filter"),
        (&["--grow", "--items", "1000000000000"], "layer 6"),
        (
            &[
                "--remember",
                "18446744073709551615",
                "--remember-probability",
                "0.99",
            ],
            "buckets",
        ),
        (
            &["--plot", "/nonexistent-dir/fpr.svg"],
            "/nonexistent-dir/fpr.svg",
        ),
        (
            &["--remember", "10", "--plot", "/nonexistent-dir/r.svg"],
            "/nonexistent-dir/r.svg",
        ),
    ];
    for (args, why) in cases {
        let mut all = vec!["size"];
        all.extend_from_slice(args);
        let out = seen_quickly(&all);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}");
        // Clap's usage errors are its own; the command's are one line.
        if !stderr.starts_with("error:") {
            assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
            assert!(stderr.starts_with("seen: "), "{args:?}: {stderr}");
        }
        assert!(stderr.contains(why), "{args:?}: {stderr}");
    }
    // Flags that belong to another question are usage errors.
    for args in [
        &["size", "--remember", "10", "--capacity", "5"][..],
        &["size", "--items", "5"],
        &["size", "--window", "8d"],
        &["size", "--memory", "1MiB", "--grow"],
    ] {
        assert_eq!(seen(args).status.code(), Some(2), "{args:?}");
    }
}

#[test]
fn a_huge_capacity_is_answered_quickly() {
    let out = seen_quickly(&["size", "--capacity", "1000000000000"]);
    assert!(
        out.status.success(),
        "{:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let s = sizing::blocked(1_000_000_000_000, 1e-4, Layout::Line).unwrap();
    assert_eq!(number(row(&text, "line layout")[4]), s.bytes());
    assert!(row(&text, "line layout")[5].ends_with("TiB"));
}
