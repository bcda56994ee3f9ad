//! `seen`: print each record of a stream the first time it is seen, in bounded memory.
//!
//! Subcommands: `dedup` (the stream filter, `dedup.rs`), `size` (the sizing calculator,
//! `size.rs`), `bench` (the harness for picking a structure, `bench.rs`), `sample` (generated
//! input, `sample.rs`), `completions`. `plot.rs` draws their SVG charts, `table.rs` prints their
//! tables, `units.rs` parses sizes and durations, `flags.rs` defines the flags that several
//! subcommands take.

/// `eprintln!` that never panics: a line on standard error, a failure to write it ignored (a
/// closed terminal, `2>&1 | head`), so that the run still ends as it should.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// A pause point for the tests (`failpoints.rs`): nothing at all unless the command is built
/// with the `failpoints` feature.
macro_rules! failpoint {
    ($name:literal) => {{
        #[cfg(feature = "failpoints")]
        crate::failpoints::pause($name);
    }};
}

mod bench;
mod dedup;
#[cfg(feature = "failpoints")]
mod failpoints;
mod flags;
mod oom;
mod os;
mod plot;
mod sample;
mod size;
mod table;
mod units;

use std::io;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Print each record the first time it is seen, in bounded memory.
#[derive(Parser)]
#[command(name = "seen", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print each record of FILEs (or standard input) the first time its key is seen.
    ///
    /// By default a Bloom filter that grows past --capacity decides: a new record is dropped
    /// as a duplicate with probability at most --fpr (a false positive), however many keys
    /// come, and a duplicate is never printed twice. --exact keeps a 96-bit fingerprint of every
    /// key (memory grows with the keys; wrong only if two fingerprints collide); --fixed or --memory bound the memory (past their capacity the rate rises,
    /// and a warning says so); --window forgets keys after a time; --remember never drops a
    /// new record.
    #[command(after_long_help = DEDUP_EXAMPLES)]
    Dedup(Box<dedup::Dedup>),
    /// Print generated lines, about a fifth of them repeats of earlier ones: input to try
    /// `seen dedup` on (`seen sample 1000000 | seen dedup --stats > /dev/null`).
    Sample(sample::Sample),
    /// Print how large each structure is for given parameters, from the library's sizing.
    ///
    /// By default: a Bloom filter for --capacity keys at --fpr in both layouts (bytes, bits per
    /// key, k, the expected rate at capacity), the textbook figure, and the rate past capacity.
    /// --memory turns the question around (the most keys that fit); --window/--period add a
    /// windowed filter, --grow a growing filter's layers; --remember sizes an overwrite map
    /// instead. --plot draws the curves as SVG.
    Size(size::Size),
    /// Measure the structures on your keys (or generated ones): insert and lookup time,
    /// measured false-positive rate, memory.
    ///
    /// Each structure chosen by --structures is built for --capacity keys at --fpr, the keys
    /// are inserted split over each thread count of --threads, then looked up: the inserted
    /// ones (a Bloom filter must find all) and as many never inserted (the fraction found is
    /// the measured false-positive rate). A table on standard output, or --json. A structure
    /// that cannot be built or refuses an insert at these settings is left out of the results
    /// and named on standard error after them, with exit status 2.
    Bench(bench::Bench),
    /// Print a completion script for SHELL on standard output, for example
    /// `seen completions bash > ~/.local/share/bash-completion/completions/seen`.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

const DEDUP_EXAMPLES: &str = "\
Examples:
  seen dedup access.log > unique.log
  seen sample 10000000 | seen dedup --stats > /dev/null
  seen dedup -f 2 -d , events.csv              # the key is the second comma-separated field
  seen dedup --json-key user.id --exact events.jsonl
  seen dedup --state daily.seen --capacity 100000000 today.log   # remembers earlier days
  seen dedup --window 8d --period 1d --json-key id --time-field ts events.jsonl
  tail -f app.log | seen dedup --remember 1000000   # never drops a new line
  seen dedup --redis redis://10.0.0.5:6379 --name orders --capacity 100000000 orders.log
                                      # one state for every run, on any machine, naming it

A --state file is a filter of the `seen` library: a service reads it with
`seen::GrowingBloomFilter::load(path)` (the default; `AtomicBloomFilter` with --fixed,
`WindowedBloomFilter` with --window, `OverwriteMap` with --remember) and asks
`contains(\"key\")`: a key is the same item in the command and the library.

Exit status: 0 on success, 2 on an error (one line on standard error, naming the file and the
line; --state saved with the records written before it), 130 after SIGINT or SIGTERM (the
records decided so far written, --state saved; also for a signal during the final save, and
when the reader of the output goes away after the signal), 141 when the reader of the output
went away (--state saved with the records written). With --state a first signal says on
standard error what the run still does (writing the records decided may wait for the output's
reader); a second ends the run at once, with 2 if --state could not be saved (a line says
what it holds).";

/// A failure, as the one line the command prints before exiting with status 2.
pub(crate) struct Failure(pub(crate) String);

fn main() -> ExitCode {
    // A write past `ulimit -f` fails (and is reported, with the state saved) instead of
    // killing the process.
    os::ignore_file_size_signal();
    match Cli::parse().command {
        Command::Dedup(args) => exit(dedup::run(&args)),
        Command::Sample(args) => exit(sample::run(&args)),
        Command::Size(args) => exit(size::run(&args)),
        Command::Bench(args) => exit(bench::run(&args)),
        Command::Completions { shell } => {
            use clap::CommandFactory;
            use std::io::Write;
            // Into memory first: the generator panics on a write error.
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "seen", &mut script);
            let mut out = io::stdout();
            exit(match out.write_all(&script).and_then(|()| out.flush()) {
                Err(e) if e.kind() != io::ErrorKind::BrokenPipe => {
                    Err(Failure(format!("cannot write the output: {e}")))
                }
                _ => Ok(()),
            })
        }
    }
}

/// The status for `result`, its failure printed as one line.
fn exit(result: Result<(), Failure>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure(why)) => {
            say!("seen: {why}");
            ExitCode::from(2)
        }
    }
}
