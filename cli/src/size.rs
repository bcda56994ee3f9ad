//! `seen size`: the sizing calculator. Every figure comes from the library's own sizing
//! (`seen::sizing`), so what it prints is what the structures allocate.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};
use seen::sizing::{
    self, BlockedSizing, BloomSizing, DEFAULT_EXPANSION, DEFAULT_TIGHTENING, GrowingSizing,
};
use seen::{AtomicBloomFilter, Error, Layout};

use crate::Failure;
use crate::flags::{DEFAULT_REMEMBER_PROBABILITY, Sizing, probability};
use crate::plot::{self, Curve, LineChart, Mark, Scale};
use crate::table::{self, Table, given, grouped, human_bytes, percent, rate};
use crate::units::{format_duration, parse_duration};

#[derive(Args)]
#[command(after_help = "\
Examples:
  seen size --capacity 10000000 --fpr 1e-4      both layouts, the textbook figure, past capacity
  seen size --memory 256MiB --fpr 1e-4          the most keys that fit in 256 MiB
  seen size --capacity 1000000 --window 8d --period 1d
                                                a filter of the last 8 days, 1M new keys a day
  seen size --capacity 1000000 --grow --items 100000000
                                                the layers a growing filter adds to reach 100M
  seen size --remember 3600000 --remember-probability 0.9
                                                an overwrite map that remembers a key for 3.6M more,
                                                and the duplicates against memory
  seen size --capacity 1000000 --plot fpr.svg   the false-positive rate up to 4x the capacity")]
pub(crate) struct Size {
    #[command(flatten)]
    sizing: Sizing,
    /// Add a windowed filter that remembers the last DURATION (`8d`, `12h`, `90m`), one
    /// generation per --period: --capacity new keys each.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, requires = "period")]
    window: Option<Duration>,
    /// The windowed filter's generation; --window must be a whole number of them (1 to 63).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, requires = "window")]
    period: Option<Duration>,
    /// Add the growing filter's schedule: the layers it adds past --capacity (each twice the
    /// keys of the one before, at 0.8 times its rate) until it holds --items keys.
    #[arg(long, conflicts_with = "memory")]
    grow: bool,
    /// With --grow: the keys the growing filter must hold [default: 10 × --capacity].
    #[arg(long, value_name = "N", requires = "grow", value_parser = clap::value_parser!(u64).range(1..))]
    items: Option<u64>,
    /// With --grow: the layers' layout (word, the default of `GrowingBloomFilter` and of `seen
    /// dedup --grow`, or line, which reaches lower rates).
    #[arg(long, value_enum, default_value_t = LayoutArg::Word, requires = "grow")]
    layout: LayoutArg,
    /// Size an overwrite map instead of Bloom filters: one that still remembers a key after N
    /// later insertions of other keys, with probability --remember-probability. Also prints the
    /// duplicates to expect against the memory for N keys a window, each delivered once or
    /// twice.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..),
          conflicts_with_all = ["capacity", "fpr", "memory", "window", "grow"])]
    remember: Option<u64>,
    /// With --remember: the probability of still remembering the key (of *not* having
    /// forgotten it), strictly between 0 and 1.
    #[arg(
        long,
        value_name = "Q",
        default_value_t = DEFAULT_REMEMBER_PROBABILITY,
        value_parser = probability,
        requires = "remember",
        allow_negative_numbers = true
    )]
    remember_probability: f64,
    /// Also draw an SVG to FILE: the Bloom filters' false-positive rate against the keys
    /// inserted, up to 4 times the capacity (log scale), one curve per layout; with --remember,
    /// the probability of remembering a key against the later insertions.
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
}

/// A block layout on the command line.
#[derive(Clone, Copy, ValueEnum)]
enum LayoutArg {
    Word,
    Line,
}

impl From<LayoutArg> for Layout {
    fn from(layout: LayoutArg) -> Self {
        match layout {
            LayoutArg::Word => Layout::Word,
            LayoutArg::Line => Layout::Line,
        }
    }
}

/// The multiples of the capacity at which the table gives the rate past capacity.
const TABLE_LOADS: [f64; 4] = [0.5, 1.0, 2.0, 4.0];

/// The plot's points: 64 steps from 0 to 4 times the capacity (the table's loads among them).
const PLOT_STEPS: u32 = 64;
const PLOT_MAX_LOAD: f64 = 4.0;

/// The most keys of the model filter that the rate past capacity is read off (see
/// [`overfull`]): enough blocks that the rate is an average over tens of thousands of them,
/// few enough that filling it to 4 times takes milliseconds.
const MODEL_KEYS: u64 = 100_000;

/// The bytes of one overwrite-map bucket: one `AtomicU64` (`OverwriteMap::memory_bytes`).
const BUCKET_BYTES: u64 = 8;

/// The remember probabilities of the duplicates table (with --remember-probability's own).
const DUPLICATES_ROWS: [f64; 4] = [0.5, 0.9, 0.99, 0.999];

pub(crate) fn run(args: &Size) -> Result<(), Failure> {
    if let Some(later) = args.remember {
        return remember(args, later);
    }
    let mut out = String::new();
    let rows = bloom_rows(args)?;
    write_bloom(&mut out, args, &rows);
    if let (Some(window), Some(period)) = (args.window, args.period) {
        write_window(&mut out, args, window, period)?;
    }
    if args.grow {
        write_grow(&mut out, args)?;
    }
    if let Some(path) = &args.plot {
        plot::save(path, &bloom_plot(args, &rows).to_svg())?;
    }
    table::print(&out)
}

/// One row of the Bloom table: a filter's sizing, or why it has none.
struct Row {
    name: &'static str,
    sizing: Result<Figures, String>,
}

/// What a row sizes: one of the filters, or the textbook reference.
enum Figures {
    /// An `AtomicBloomFilter`, and its rate after each multiple of its capacity (from the
    /// model, [`overfull`]).
    Blocked(BlockedSizing, Vec<f64>),
    Classic(BloomSizing),
}

impl Figures {
    fn capacity(&self) -> u64 {
        match self {
            Self::Blocked(s, _) => s.capacity,
            Self::Classic(s) => s.capacity,
        }
    }

    fn hashes(&self) -> u32 {
        match self {
            Self::Blocked(s, _) => s.hashes,
            Self::Classic(s) => s.hashes,
        }
    }

    fn bits_per_item(&self) -> f64 {
        match self {
            Self::Blocked(s, _) => s.bits_per_item(),
            Self::Classic(s) => s.bits as f64 / s.capacity as f64,
        }
    }

    fn bytes(&self) -> u64 {
        match self {
            Self::Blocked(s, _) => s.bytes(),
            Self::Classic(s) => s.bytes(),
        }
    }

    /// The expected rate at capacity: the exact blocked model, or the textbook formula.
    fn expected_fpr(&self) -> f64 {
        match self {
            Self::Blocked(s, _) => s.expected_fpr,
            Self::Classic(s) => s.fpr_at(s.capacity),
        }
    }

    /// The rate after `load` times the capacity, `load` one of the plot's points.
    fn fpr_after(&self, load: f64) -> f64 {
        match self {
            Self::Blocked(_, rates) => {
                rates[(load * f64::from(PLOT_STEPS) / PLOT_MAX_LOAD).round() as usize]
            }
            Self::Classic(s) => s.fpr_at((load * s.capacity as f64).round() as u64),
        }
    }
}

/// The two layouts and the two textbook sizings, each for --capacity or the most keys that
/// fit in --memory. A row that cannot be sized keeps its error; if no filter can, that is the
/// command's failure.
fn bloom_rows(args: &Size) -> Result<Vec<Row>, Failure> {
    let fpr = args.sizing.fpr;
    let capacity = |size: &dyn Fn(u64) -> Result<u64, Error>| match args.sizing.memory {
        None => Ok(args.sizing.capacity),
        Some(bytes) => match most_keys(bytes, size) {
            Ok(Some(keys)) => Ok(keys),
            Ok(None) => Err(format!(
                "--memory {bytes} is below the smallest filter at this --fpr ({} bytes)",
                size(1).map_or("?".into(), grouped)
            )),
            Err(e) => Err(e.to_string()),
        },
    };
    let blocked = |layout: Layout| -> Result<Figures, String> {
        let size = |keys| sizing::blocked(keys, fpr, layout).map(|s| s.bytes());
        let s = sizing::blocked(capacity(&size)?, fpr, layout).map_err(|e| e.to_string())?;
        let rates = overfull(layout, fpr, s.capacity).map_err(|e| e.to_string())?;
        Ok(Figures::Blocked(s, rates))
    };
    let classic = |sizing: fn(u64, f64) -> Result<BloomSizing, Error>| -> Result<Figures, String> {
        let size = |keys| sizing(keys, fpr).map(|s| s.bytes());
        let s = sizing(capacity(&size)?, fpr).map_err(|e| e.to_string())?;
        Ok(Figures::Classic(s))
    };
    let rows = vec![
        Row {
            name: "word layout",
            sizing: blocked(Layout::Word),
        },
        Row {
            name: "line layout",
            sizing: blocked(Layout::Line),
        },
        Row {
            name: CLASSIC,
            sizing: classic(BloomSizing::optimal),
        },
        Row {
            name: GUARANTEED,
            sizing: classic(BloomSizing::guaranteed),
        },
    ];
    // The line layout reaches every rate the word layout does: if it has no sizing, no filter
    // has, and its error is the one to report.
    if let Err(e) = &rows[1].sizing {
        let asked = match args.sizing.memory {
            None => format!("--capacity {} --fpr {}", args.sizing.capacity, given(fpr)),
            Some(bytes) => format!("--memory {bytes} --fpr {}", given(fpr)),
        };
        return Err(Failure(format!(
            "cannot size a Bloom filter for {asked}: {e}"
        )));
    }
    Ok(rows)
}

/// The name of the textbook row, whose `k` the rule of thumb uses.
const CLASSIC: &str = "classic (textbook)";
/// The name of the textbook row sized so that its rate at capacity is at most the target.
const GUARANTEED: &str = "classic, guaranteed";

/// The most keys whose structure takes at most `bytes`, where `size` gives the bytes for a
/// number of keys (monotone in it): a doubling, then a bisection, over the library's own
/// sizing. `None` if not even one key fits; a size past the address space does not fit.
pub(crate) fn most_keys(
    bytes: u64,
    size: &dyn Fn(u64) -> Result<u64, Error>,
) -> Result<Option<u64>, Error> {
    let fits = |keys: u64| match size(keys) {
        Ok(b) => Ok(b <= bytes),
        Err(Error::TooLarge { .. }) => Ok(false),
        Err(e) => Err(e),
    };
    if !fits(1)? {
        return Ok(None);
    }
    // `lo` fits, `hi` does not (or is past u64).
    let mut lo = 1u64;
    let mut hi = loop {
        match lo.checked_mul(2) {
            Some(next) if fits(next)? => lo = next,
            Some(next) => break next,
            None if fits(u64::MAX)? => return Ok(Some(u64::MAX)),
            None => break u64::MAX,
        }
    };
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if fits(mid)? {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(Some(lo))
}

/// The false-positive rate of a filter of `layout` at `fpr` after 0, 1/16, 2/16, ... 4 times
/// its capacity, read off a model: a real filter of the same layout and rate, hence the same
/// `k` and the same keys per block, for at most [`MODEL_KEYS`] keys, filled with generated
/// keys and read with `estimated_fpr` (exact for the bits it holds: the mean over blocks of
/// `(set bits / block bits)^k`). The rate of a blocked filter depends on its keys per block,
/// not on its size, and the library has no closed form for it past capacity.
fn overfull(layout: Layout, fpr: f64, capacity: u64) -> Result<Vec<f64>, Error> {
    let keys = capacity.min(MODEL_KEYS);
    let model = AtomicBloomFilter::builder(keys)
        .fpr(fpr)
        .layout(layout)
        .build()?;
    let mut inserted = 0u64;
    Ok((0..=PLOT_STEPS)
        .map(|step| {
            let load = PLOT_MAX_LOAD * f64::from(step) / f64::from(PLOT_STEPS);
            let target = (load * keys as f64).round() as u64;
            while inserted < target {
                model.insert(&inserted);
                inserted += 1;
            }
            model.estimated_fpr()
        })
        .collect())
}

fn write_bloom(out: &mut String, args: &Size, rows: &[Row]) {
    let _ = match args.sizing.memory {
        None => writeln!(
            out,
            "Bloom filters for {} keys at a false-positive rate of {}",
            grouped(args.sizing.capacity),
            given(args.sizing.fpr)
        ),
        Some(bytes) => writeln!(
            out,
            "Bloom filters in {} ({} bytes) at a false-positive rate of {}: the most keys each holds",
            human_bytes(bytes),
            grouped(bytes),
            given(args.sizing.fpr)
        ),
    };
    out.push('\n');
    let mut table = Table::new(&[
        "filter",
        "keys",
        "k",
        "bits/key",
        "bytes",
        "memory",
        "fpr at capacity",
    ]);
    let mut past = Table::new(&["filter", "0.5x", "1x", "2x", "4x"]);
    let mut notes = Vec::new();
    for row in rows {
        match &row.sizing {
            Ok(s) => {
                table.row(vec![
                    row.name.to_string(),
                    grouped(s.capacity()),
                    s.hashes().to_string(),
                    format!("{:.2}", s.bits_per_item()),
                    grouped(s.bytes()),
                    human_bytes(s.bytes()),
                    rate(s.expected_fpr()),
                ]);
                let mut cells = vec![row.name.to_string()];
                cells.extend(TABLE_LOADS.iter().map(|&t| rate(s.fpr_after(t))));
                past.row(cells);
            }
            Err(e) => {
                table.row(vec![row.name.to_string(), "-".into()]);
                notes.push(format!("{}: {e}", row.name));
            }
        }
    }
    if let Some(Ok(classic)) = rows.iter().find(|r| r.name == CLASSIC).map(|r| &r.sizing) {
        let k = classic.hashes();
        let mut cells = vec![format!("rule of thumb, k = {k}")];
        cells.extend(
            TABLE_LOADS
                .iter()
                .map(|&t| sizing::overfull_fpr_estimate(k, t).map_or("-".into(), rate)),
        );
        past.row(cells);
    }
    let _ = write!(out, "{table}");
    for note in notes {
        let _ = writeln!(out, "  {note}");
    }
    let _ = writeln!(
        out,
        "\nThe layouts are what AtomicBloomFilter allocates (sizing::blocked), its fpr the exact \
         model's.\nclassic: the textbook m = -n ln p / (ln 2)^2 bits, k = ceil(log2(1/p)), for \
         reference;\nguaranteed: the fewest bits with that k whose rate at capacity is at most \
         p.\n\nPast capacity: the false-positive rate after 0.5 to 4 times the keys\n"
    );
    let _ = write!(out, "{past}");
    let _ = writeln!(
        out,
        "\nThe layouts' rates are read off a model filter of {} keys or fewer (the same k and \
         keys per block)\nwith its estimated_fpr, within a few percent; the classic filter's \
         are BloomSizing::fpr_at,\nthe rule of thumb's (1 - 0.5^t)^k.",
        grouped(MODEL_KEYS)
    );
}

fn write_window(
    out: &mut String,
    args: &Size,
    window: Duration,
    period: Duration,
) -> Result<(), Failure> {
    let (w, p) = (format_duration(window), format_duration(period));
    // What `seen dedup --window W --period P` builds: one generation per period of the window
    // and the current one.
    let (generations, _) = crate::dedup::generations(window, period)?;
    let periods = generations - 1;
    let fail = |e: Error| {
        Failure(format!(
            "cannot size the windowed filter (--window {w} / --period {p} = {generations} \
             generations, --fpr {}): {e}",
            given(args.sizing.fpr)
        ))
    };
    let per_period = match args.sizing.memory {
        None => args.sizing.capacity,
        Some(bytes) => {
            let size = |keys| sizing::window(keys, generations, args.sizing.fpr).map(|s| s.bytes());
            most_keys(bytes, &size).map_err(fail)?.ok_or_else(|| {
                Failure(format!(
                    "--memory {bytes} is below the smallest windowed filter of {generations} \
                     generations at this --fpr"
                ))
            })?
        }
    };
    let s = sizing::window(per_period, generations, args.sizing.fpr).map_err(fail)?;
    let _ = writeln!(
        out,
        "\nWindowed filter (word layout): the last {w} as {generations} generations of {p} \
         ({periods} full and the current one)\n"
    );
    let lines = [
        (
            "keys per period",
            format!(
                "{} ({} in the window)",
                grouped(s.items_per_period()),
                grouped(s.items_per_period().saturating_mul(u64::from(periods)))
            ),
        ),
        ("k", s.generation.hashes.to_string()),
        ("fpr per generation", rate(s.generation_fpr)),
        (
            "bytes",
            format!(
                "{} ({}: {} generations and the spare, {} words per block)",
                grouped(s.bytes()),
                human_bytes(s.bytes()),
                generations,
                s.stride_words
            ),
        ),
        (
            "bits/key",
            format!("{:.2} (full window)", s.bits_per_item()),
        ),
        ("lines per lookup", s.lines_per_lookup().to_string()),
        (
            "expected fpr",
            format!(
                "{} over the window, every generation full",
                rate(s.expected_fpr)
            ),
        ),
    ];
    for (name, value) in lines {
        let _ = writeln!(out, "  {name:<20}{value}");
    }
    Ok(())
}

fn write_grow(out: &mut String, args: &Size) -> Result<(), Failure> {
    let layout = Layout::from(args.layout);
    let items = args
        .items
        .unwrap_or(args.sizing.capacity.saturating_mul(10));
    let fail = |e: Error| Failure(format!("cannot size the growing filter: {e}"));
    let g = GrowingSizing::new(
        args.sizing.capacity,
        args.sizing.fpr,
        layout,
        DEFAULT_EXPANSION,
        DEFAULT_TIGHTENING,
    )
    .map_err(fail)?;
    let layers = g.layers_for(items).map_err(|e| {
        Failure(format!(
            "cannot size the growing filter for --items {items}: {e}"
        ))
    })?;
    let mut table = Table::new(&[
        "layer",
        "capacity",
        "keys so far",
        "fpr",
        "k",
        "bytes",
        "memory",
    ])
    .numbers_only();
    let mut total_keys = 0u64;
    for i in 0..layers {
        let layer_fail = |e: Error| {
            let why = match e {
                // It names the layer and derives its rate from --fpr.
                Error::GrowingFprBelowLayoutLimit { .. } => e.to_string(),
                _ => format!("layer {i} (fpr {}): {e}", rate(g.layer_fpr(i))),
            };
            Failure(format!(
                "cannot size the growing filter for --items {items}: it needs {layers} layers, \
                 and {why}"
            ))
        };
        let capacity = g.layer_capacity(i).map_err(layer_fail)?;
        let layer = g.layer(i).map_err(layer_fail)?;
        total_keys = total_keys.saturating_add(capacity);
        table.row(vec![
            i.to_string(),
            grouped(capacity),
            grouped(total_keys),
            rate(g.layer_fpr(i)),
            layer.hashes.to_string(),
            grouped(layer.bytes()),
            human_bytes(layer.bytes()),
        ]);
    }
    let bytes = g.bytes(layers).map_err(fail)?;
    let _ = writeln!(
        out,
        "\nGrowing filter ({} layout, expansion {DEFAULT_EXPANSION}, tightening \
         {DEFAULT_TIGHTENING}): {} keys take {layers} layer{}\n",
        match layout {
            Layout::Line => "line",
            _ => "word",
        },
        grouped(items),
        if layers == 1 { "" } else { "s" }
    );
    let _ = write!(out, "{table}");
    let _ = writeln!(
        out,
        "\n  total: {} bytes ({}), fpr at most {} (the sum of the layers' rates)",
        grouped(bytes),
        human_bytes(bytes),
        rate(g.fpr_bound(layers))
    );
    Ok(())
}

/// The Bloom filters' rate against the keys inserted: one curve per row, a mark at each
/// filter's capacity (its expected rate there), and the rule of thumb for the textbook `k`.
fn bloom_plot(args: &Size, rows: &[Row]) -> LineChart {
    let mut chart = LineChart::new(
        &format!(
            "False-positive rate past capacity (target {})\nlayouts: model filter's \
             estimated_fpr; classic: BloomSizing::fpr_at; marks: the expected rate at capacity",
            given(args.sizing.fpr)
        ),
        "keys inserted",
        "false-positive rate",
        Scale::Log,
    );
    let top_decade = args.sizing.fpr.log10().floor();
    chart.y_range = Some((10f64.powf(top_decade - 4.0), 1.0));
    let loads = || (0..=PLOT_STEPS).map(|j| PLOT_MAX_LOAD * f64::from(j) / f64::from(PLOT_STEPS));
    // The guaranteed sizing's curve is the textbook one, a hair lower: the table has it.
    for row in rows.iter().filter(|r| r.name != GUARANTEED) {
        let Ok(s) = &row.sizing else { continue };
        let capacity = s.capacity() as f64;
        let blocked = matches!(s, Figures::Blocked(..));
        chart.curves.push(Curve {
            name: row.name.to_string(),
            points: loads().map(|t| (t * capacity, s.fpr_after(t))).collect(),
            dashed: !blocked,
        });
        if blocked {
            chart.marks.push(Mark {
                curve: chart.curves.len() - 1,
                x: capacity,
                y: s.expected_fpr(),
                label: format!("{}: {}", row.name, rate(s.expected_fpr())),
            });
        }
    }
    if let Some(Ok(classic)) = rows.iter().find(|r| r.name == CLASSIC).map(|r| &r.sizing) {
        let (k, capacity) = (classic.hashes(), classic.capacity() as f64);
        chart.curves.push(Curve {
            name: format!("rule of thumb (1 - 0.5^t)^{k}"),
            points: loads()
                .filter_map(|t| {
                    let p = sizing::overfull_fpr_estimate(k, t).ok()?;
                    Some((t * capacity, p))
                })
                .collect(),
            dashed: true,
        });
    }
    chart
}

/// The duplicates a consumer should expect against the memory, for `window` keys a window,
/// each delivered once (and now and then again) or twice, the later delivery at most a window
/// after the first: a map sized for `c · window` later insertions with probability `r` lets at
/// most `1 - r` of them through (`docs/sizing.md`, "Duplicates against memory"). One row per
/// probability of [`DUPLICATES_ROWS`] and `asked`; a row the sizing refuses shows `-`.
fn write_duplicates(out: &mut String, window: u64, asked: f64) {
    let mut rows = DUPLICATES_ROWS.to_vec();
    if !rows.contains(&asked) {
        rows.push(asked);
        rows.sort_by(f64::total_cmp);
    }
    // The buckets of a map sized for `later` insertions at `r`, its memory, and the share of
    // deliveries `later` insertions late that it processes again; `None` past the sizing.
    let map = |later: Option<u64>, r: f64| {
        let buckets = sizing::overwrite_buckets(later?, r).ok()?;
        let bytes = buckets.checked_mul(BUCKET_BYTES)?;
        Some((buckets, bytes))
    };
    let again = |buckets: u64, later: Option<u64>| {
        later
            .and_then(|x| sizing::overwrite_remember_probability(buckets, x).ok())
            .map_or("-".into(), |p| percent(1.0 - p))
    };
    let twice = window.checked_mul(2);
    let mut once_table =
        Table::new(&["remember", "buckets", "memory", "processed again"]).numbers_only();
    let mut twice_table = Table::new(&[
        "remember",
        "buckets",
        "memory",
        "processed again",
        "in the map for once",
    ])
    .numbers_only();
    for r in rows {
        let once = map(Some(window), r);
        let mut cells = vec![r.to_string()];
        match once {
            Some((buckets, bytes)) => cells.extend([
                grouped(buckets),
                human_bytes(bytes),
                again(buckets, Some(window)),
            ]),
            None => cells.extend(["-".into(), "-".into(), "-".into()]),
        }
        once_table.row(cells);
        let mut cells = vec![r.to_string()];
        match map(twice, r) {
            Some((buckets, bytes)) => {
                cells.extend([grouped(buckets), human_bytes(bytes), again(buckets, twice)])
            }
            None => cells.extend(["-".into(), "-".into(), "-".into()]),
        }
        cells.push(once.map_or("-".into(), |(buckets, _)| again(buckets, twice)));
        twice_table.row(cells);
    }
    let twice_flag = twice.map_or("more than a u64 counts".into(), |x| x.to_string());
    let _ = writeln!(
        out,
        "\nDuplicates against memory: {} keys a window, each delivered once or twice\n\n\
         Delivered once, and now and then again at most a window later (--remember {window}):\n",
        grouped(window)
    );
    let _ = write!(out, "{once_table}");
    let _ = writeln!(
        out,
        "\nDelivered twice, the copy at most a window later (--remember {twice_flag}):\n"
    );
    let _ = write!(out, "{twice_table}");
    let _ = writeln!(
        out,
        "\nprocessed again: at most, for a delivery a full window after the first (sooner ones \
         are\ncaught more often). in the map for once: every key twice, in the map sized for \
         one delivery.\nEach further 9 costs about ten times the memory."
    );
}

/// `seen size --remember N`: the overwrite map, its window and its forgetting curve, and the
/// duplicates to expect against the memory.
fn remember(args: &Size, later: u64) -> Result<(), Failure> {
    let q = args.remember_probability;
    let fail = |e: Error| {
        Failure(format!(
            "cannot size an overwrite map for --remember {later} --remember-probability {}: {e}",
            given(q)
        ))
    };
    let buckets = sizing::overwrite_buckets(later, q).map_err(fail)?;
    let bytes = buckets.checked_mul(BUCKET_BYTES).ok_or_else(|| {
        fail(Error::TooLarge {
            what: "bytes",
            requested: buckets as f64 * BUCKET_BYTES as f64,
            limit: u64::MAX,
        })
    })?;
    let remembered = sizing::overwrite_remember_probability(buckets, later).map_err(fail)?;
    let window = sizing::overwrite_window(buckets, q).map_err(fail)?;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Overwrite map: remember a key across {} later insertions with probability {q}\n",
        grouped(later)
    );
    let lines = [
        ("buckets", grouped(buckets)),
        (
            "bytes",
            format!(
                "{} ({}, {BUCKET_BYTES} bytes per bucket)",
                grouped(bytes),
                human_bytes(bytes)
            ),
        ),
        (
            "remembers",
            format!("{remembered:.6} after {} later insertions", grouped(later)),
        ),
        (
            "window",
            format!(
                "{} later insertions remembered with probability at least {q}",
                grouped(window)
            ),
        ),
    ];
    for (name, value) in lines {
        let _ = writeln!(out, "  {name:<12}{value}");
    }
    let mut table = Table::new(&["later insertions", "remember probability"]).numbers_only();
    for t in [0.25, 0.5, 1.0, 2.0, 4.0] {
        let x = (t * later as f64).round() as u64;
        let p = sizing::overwrite_remember_probability(buckets, x).map_err(fail)?;
        table.row(vec![grouped(x), format!("{p:.6}")]);
    }
    let _ = write!(out, "\n{table}");
    write_duplicates(&mut out, later, q);
    if let Some(path) = &args.plot {
        let mut chart = LineChart::new(
            &format!(
                "Forgetting curve of an overwrite map of {} buckets\nsizing::overwrite_remember_probability",
                grouped(buckets)
            ),
            "later insertions",
            "probability of remembering a key",
            Scale::Linear,
        );
        chart.y_range = Some((0.0, 1.0));
        let points = (0..=PLOT_STEPS)
            .map(|j| {
                let x = (PLOT_MAX_LOAD * f64::from(j) / f64::from(PLOT_STEPS) * later as f64)
                    .round() as u64;
                let p = sizing::overwrite_remember_probability(buckets, x).map_err(fail)?;
                Ok((x as f64, p))
            })
            .collect::<Result<_, Failure>>()?;
        chart.curves.push(Curve {
            name: format!("{} buckets", grouped(buckets)),
            points,
            dashed: false,
        });
        chart.marks.push(Mark {
            curve: 0,
            x: later as f64,
            y: remembered,
            label: format!("{} later: {remembered:.3}", grouped(later)),
        });
        plot::save(path, &chart.to_svg())?;
    }
    table::print(&out)
}
