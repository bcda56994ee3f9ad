//! `seen`: print each record of a stream the first time it is seen, in bounded memory.
//!
//! Work in progress (issue 14). Done: `seen dedup` with lines or NUL-terminated records; a key
//! that is the whole record, one field or a JSON value; an exact set, a Bloom filter (sized by
//! `--capacity` or `--memory`), a growing Bloom filter, a windowed filter (`--window`, wall
//! clock or `--time-field`) or an overwrite map (`--remember`); threads; `--repeated`,
//! `--count`, `--stats`, `--state` (saved on SIGINT and SIGTERM too), the progress bar;
//! `seen sample`; `seen completions`. Not yet: `seen size`, `seen bench`.

/// `eprintln!` that never panics: a line on standard error, a failure to write it ignored (a
/// closed terminal, `2>&1 | head`), so that the run still ends as it should.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

mod dedup;
mod sample;
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
    /// By default a Bloom filter sized for --capacity distinct keys at --fpr decides: a new
    /// record is dropped as a duplicate with probability at most --fpr (a false positive), a
    /// duplicate is never printed twice. --exact keeps every key (unbounded memory, no false
    /// positives); --grow adds layers past the capacity so the rate stays under --fpr.
    Dedup(Box<dedup::Dedup>),
    /// Print generated lines, about a fifth of them repeats of earlier ones: input to try
    /// `seen dedup` on (`seen sample 1000000 | seen dedup --stats > /dev/null`).
    Sample(sample::Sample),
    /// Print a completion script for SHELL on standard output, for example
    /// `seen completions bash > ~/.local/share/bash-completion/completions/seen`.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

/// A failure, as the one line the command prints before exiting with status 2.
pub(crate) struct Failure(pub(crate) String);

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Dedup(args) => exit(dedup::run(&args)),
        Command::Sample(args) => exit(sample::run(&args)),
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
