//! The arguments of `seen dedup`.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::key::Missing;
use crate::flags::{DEFAULT_REMEMBER_PROBABILITY, Sizing, probability, threads};
use crate::units::parse_duration;

/// What a record dated too far ahead of the wall clock is (`--future`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Future {
    /// An error at its line.
    Refuse,
    /// Decided at the wall clock plus the tolerance.
    Clamp,
}

/// `--future-tolerance`: a duration, zero included (`0`, `0s`).
fn tolerance(text: &str) -> Result<Duration, String> {
    let digits = text
        .trim_end_matches(|c: char| c.is_ascii_alphabetic())
        .trim();
    if !digits.is_empty() && digits.bytes().all(|b| b == b'0') {
        return Ok(Duration::ZERO);
    }
    parse_duration(text)
}

/// `seen dedup`'s command line.
#[derive(Args, Clone)]
#[command(group = clap::ArgGroup::new("structure").multiple(false).args(["exact", "grow", "fixed", "window", "remember", "memory"]))]
pub(crate) struct Dedup {
    /// Files to read, in order; standard input when none is given, or for `-`.
    pub(super) files: Vec<PathBuf>,
    /// Records end with NUL, not newline (input and output).
    #[arg(short = 'z', long)]
    pub(super) zero_terminated: bool,
    /// The key is field N of the record (from 1), fields split by --delimiter.
    #[arg(short = 'f', long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub(super) field: Option<u64>,
    /// The field delimiter, one byte.
    #[arg(short = 'd', long, default_value = "\t", value_name = "BYTE")]
    pub(super) delimiter: String,
    /// Records are JSON objects, one per line; the key is the value at PATH (dotted:
    /// `user.id`, `items.0.sku` for an array's first element; a string's text, any other
    /// value's JSON). A record that is not JSON is an error; one without a value at PATH
    /// (`null` counts as none), or that is not an object, is handled by --missing-key.
    #[arg(long, value_name = "PATH", conflicts_with = "field")]
    pub(super) json_key: Option<String>,
    /// What a record without a key is (one with fewer fields than -f N, or without --json-key's
    /// PATH): `error` (the default) stops the run at it with its line number; `print` prints
    /// it, never deduplicated (counted apart in --stats). Such records are never given a
    /// shared key: that would drop all but the first as duplicates.
    #[arg(long, value_enum, default_value_t = Missing::Error, value_name = "WHAT")]
    pub(super) missing_key: Missing,
    /// Keep a 96-bit fingerprint of every key (14 to 18 bytes a key: memory grows with the
    /// distinct keys). Exact but for fingerprint collisions: with N distinct keys, the
    /// probability that any new record of the run is dropped is at most N²/2^97 (2.5e-15 for
    /// 20 million keys, 6.3e-12 for a billion), for keys not crafted to collide under xxh3.
    #[arg(long, help_heading = "Structure (one of)")]
    pub(super) exact: bool,
    /// Grow the filter past --capacity (RedisBloom's scaling filter), so that its
    /// false-positive rate stays under --fpr as the keys come, until its schedule of layers
    /// ends: far past any input at the default --fpr, sooner for a very small one (127 times
    /// --capacity at 1e-13), and the run then stops with an error saying so, the state saved.
    /// The default.
    #[arg(long, help_heading = "Structure (one of)")]
    pub(super) grow: bool,
    /// A filter of fixed size for --capacity keys (or --memory): bounded memory, but past
    /// its capacity it drops more new records than --fpr says (a warning tells when).
    #[arg(long, help_heading = "Structure (one of)")]
    pub(super) fixed: bool,
    /// Forget keys after a window of time: a repeat within WINDOW of a key's first printed
    /// record is always dropped; one more than WINDOW + PERIOD later is always printed
    /// (between the two, it depends on the time of day the key came). A windowed filter of
    /// WINDOW / PERIOD + 1 generations of --capacity keys each. Time is the wall clock, or
    /// --time-field. Up to 7 generations share one cache line (`--window 6d --period 1d`);
    /// more read two lines or more (see `seen size --window 7d --period 1d`).
    #[arg(long, value_name = "WINDOW", value_parser = parse_duration, requires = "period", help_heading = "Structure (one of)")]
    pub(super) window: Option<Duration>,
    /// With --window: how often the oldest generation is forgotten (`1d`; WINDOW must be a
    /// multiple of it, from 1 to 62 times; more than 14 times needs a --fpr above 1e-4, 4e-4
    /// for 62).
    #[arg(long, value_name = "PERIOD", value_parser = parse_duration, requires = "window", help_heading = "Structure (one of)")]
    pub(super) period: Option<Duration>,
    /// With --window: take each record's time from field N (with -f's --delimiter) or, with
    /// --json-key, from the JSON value at PATH: Unix seconds (`1700000000`, `1700000000.25`,
    /// `1.7e9`; a JSON number and a string of the same text are the same time, cut to the
    /// nanosecond) or RFC 3339 with its offset (`2026-11-22T09:30:00Z`, `...+01:00`;
    /// `2026-11-22` is its midnight UTC; a leap second `:60` counts as `:59`). Time never runs
    /// backwards: a record older than one before it (or than the --state's time) counts at the
    /// newer time; --stats counts them, and a warning says when one is more than WINDOW older.
    /// A record dated more than --future-tolerance after the wall clock is refused, or held
    /// there (--future). A --state remembers which
    /// clock it follows: a run that would switch between --time-field and the wall clock is
    /// refused. With --redis, each run's clock follows its own records: runs that share the
    /// name print a key once between them when their records' times are within a --period of
    /// each other (without --time-field, the server's clock is the time).
    #[arg(
        long,
        value_name = "N|PATH",
        requires = "window",
        help_heading = "Structure (one of)"
    )]
    pub(super) time_field: Option<String>,
    /// With --time-field: what a record dated more than --future-tolerance after the wall clock
    /// is. `refuse` (the default): an error at its line (the records before it are written,
    /// and with --state their keys saved). `clamp`: it is decided at the wall clock plus the
    /// tolerance, and a warning at the end says how many were. Either way the window's clock
    /// runs at most the tolerance ahead of the wall clock, so one record from the future never
    /// makes the window forget the present: a repeat within WINDOW minus the tolerance of its
    /// key's first printed record is always dropped. A --state whose window's clock is further
    /// ahead (saved on a host whose clock ran ahead, by a run with a larger --future-tolerance,
    /// or by an older seen) is refused the same
    /// way, naming its clock; with `clamp` a warning says so and the run goes on with it.
    #[arg(
        long,
        value_enum,
        value_name = "WHAT",
        default_value_t = Future::Refuse,
        requires = "time_field",
        help_heading = "Structure (one of)"
    )]
    pub(super) future: Future,
    /// With --time-field: how far after the wall clock a record's time may be (the clocks of
    /// the machines that dated the records may run ahead of this one's): `0s` up to --window.
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "1m",
        value_parser = tolerance,
        requires = "time_field",
        help_heading = "Structure (one of)"
    )]
    pub(super) future_tolerance: Duration,
    /// Never drop a new record: an overwrite map that remembers a key across N later records
    /// with probability --remember-probability, and may print a duplicate it forgot.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..), help_heading = "Structure (one of)")]
    pub(super) remember: Option<u64>,
    /// With --remember: the probability that a key is still remembered N records later,
    /// strictly between 0 and 1.
    #[arg(
        long,
        value_name = "Q",
        default_value_t = DEFAULT_REMEMBER_PROBABILITY,
        value_parser = probability,
        allow_negative_numbers = true,
        requires = "remember",
        help_heading = "Structure (one of)"
    )]
    pub(super) remember_probability: f64,
    #[command(flatten, next_help_heading = "Sizing")]
    pub(super) sizing: Sizing,
    /// Print only the duplicates (each time a key is seen again).
    #[arg(long, conflicts_with = "count", help_heading = "Output")]
    pub(super) repeated: bool,
    /// Print the number of new and of duplicate records instead of the records.
    #[arg(long, help_heading = "Output")]
    pub(super) count: bool,
    /// Print a summary on standard error at the end: records, new, duplicates (and how many
    /// of them may be false positives), records/s, the structure's memory and estimated
    /// false-positive rate.
    #[arg(long, help_heading = "Output")]
    pub(super) stats: bool,
    /// No progress bar (it shows on standard error only when that is a terminal).
    #[arg(long, help_heading = "Output")]
    pub(super) no_progress: bool,
    /// Load the filter from FILE if it exists, and save it there when the run ends, however it
    /// ends: at the end of the input, on SIGINT or SIGTERM, when the reader of the output goes
    /// away, and when the run fails (crash-safely: a temporary file renamed over it, through a
    /// symbolic link to its target, keeping its permissions), so that a daily run remembers the
    /// days before. FILE then holds exactly the keys of the records written (a failed run's,
    /// up to the failure); keys the filter refuses (a growing filter at the end of its layers)
    /// are named on standard error. One run at a time: another run on FILE fails at once (the
    /// lock is FILE.lock); a FILE with more than one name (a hard link) is refused. Not with
    /// --exact (its fingerprints are no filter file) or --memory (a state is checked against
    /// the --capacity and --fpr that size it: give those).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["exact", "memory"])]
    pub(super) state: Option<PathBuf>,
    /// Share the state with every `seen dedup` that names the same --name on this Redis or
    /// Valkey server: `redis://[user:password@]host:port[/db]` or `unix:///path/to/socket`.
    /// Given twice or more, the URLs are nodes of one Redis Cluster. A record is printed when
    /// the shared filter says its key is new, so runs on any number of machines print each key
    /// once between them (false positives aside, as with any Bloom filter). The filter is a
    /// fixed-size Bloom filter (line layout) for --capacity keys at --fpr (or --memory) or,
    /// with --window, a windowed filter of the local --window's semantics (--capacity new keys
    /// a period, one key per generation on the server, expiring on its own, or on
    /// --time-field's clock deleted once the records' clock has left it behind; the server's
    /// clock, or --time-field's). The first run creates it and the others open it (a run with
    /// other sizes, --window or --period is refused); it cannot grow: a warning says when it
    /// holds more than --capacity keys (in one --period with --window), all runs together. Not
    /// with --state (the server is the state), --exact, --grow or --remember. A server error
    /// stops the run, naming the key, after writing every record decided before it.
    #[arg(
        long,
        value_name = "URL",
        requires = "name",
        help_heading = "Shared state"
    )]
    pub(super) redis: Vec<String>,
    /// With --redis: the name of the shared filter (1 to 200 bytes, no braces, spaces or
    /// control characters); its keys on the server are `seen:{NAME...}:...`.
    #[arg(
        long,
        value_name = "NAME",
        requires = "redis",
        help_heading = "Shared state"
    )]
    pub(super) name: Option<String>,
    /// Threads that split, hash and decide records, 1 to 1024 (default: one per core). With 2 or more,
    /// one more thread reads and the main thread writes, in input order. Every key is decided
    /// by one thread in input order, so the output is in input order and no key is printed
    /// twice. With --exact (fingerprint collisions aside), --remember or --time-field it is
    /// the same for every count; a Bloom filter's rare false positives may differ.
    #[arg(long, value_name = "N", value_parser = threads())]
    pub(super) threads: Option<u32>,
}
