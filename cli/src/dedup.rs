//! `seen dedup`: print each record the first time its key is seen.
//!
//! # How a run is organized
//!
//! The input is read in chunks of whole records ([`reader`]) by a reader thread. A chunk is
//! *prepared* (split into records, each record's key extracted and hashed) by any of
//! `--threads` workers, in any order. Each record is then *decided* in its key's shard: one
//! shard per worker, each with a mutex, deciding its records chunk after chunk in input order
//! ([`shard`]): whichever worker holds a shard's mutex decides every chunk that is
//! ready for it. The main thread writes the decided chunks in input order.
//!
//! A key's records all go to one shard, which sees them in input order, so a key is new at its
//! first record whatever the threads do: the exact set prints exactly the one-thread output
//! (unless two keys' 96-bit fingerprints collide: `dedup/exact.rs`).
//! The shards share the filter, though, and run at their own pace: a false positive of a Bloom
//! or growing filter depends on the bits the other shards' keys had set by then, and a growing
//! filter that cannot grow fails at a record that depends on them. So with 2 or more threads
//! the filters' output may differ from the one-thread output, only in false positives (rarely
//! below capacity: none or a few in a million at --fpr 1e-4). The structures whose decisions
//! depend on the order of different keys are decided in one shard, in input order: the
//! windowed filter on the records' times (`--time-field`, the clock follows the records) and
//! the overwrite map (`--remember`, a bucket keeps the last of the keys that share it).
//!
//! With `--state`, a record is decided by a lookup: new when its key is neither in the
//! structure nor pending in its shard. Its key is *committed* (inserted into the structure)
//! only once the record is written, that is accepted by the system ([`output`]): the shards
//! commit the keys of the chunks written when they next decide, and the end of the run commits
//! the rest up to the last record written ([`pending`]). So the `--state` saved holds exactly
//! the keys of the records written, however the run ends: at the end of the input, on SIGINT
//! or SIGTERM (the chunks already read are decided and written first), when the reader of
//! the output goes away (`seen dedup --state s | head`), or at a failure (the records before
//! it), and a later run neither repeats nor loses a record. One run at a time holds a state
//! ([`mod@lock`]). Without `--state` nothing
//! shows what the structure holds, and a key goes into it as it is decided (one access, not
//! a lookup and a later insert: about half the time per record).
//!
//! With `--redis URL --name NAME` the structure is on a Redis or Valkey server, shared by every
//! run that names it ([`shared`]): a record is new iff the server's filter says its key is new,
//! one batch per shard and chunk, at once (never deferred: another run must find the key as
//! soon as it is decided here). A server error stops the run at the first record it leaves
//! undecided, after writing the records before it.
//!
//! The sequencer's state (output, counters) is behind a mutex that the writer holds while it
//! writes a chunk (and, with one thread, while it decides it); with one thread, the run's loop
//! ends an interrupted run before it decides another chunk, and a signal's thread ends one
//! that waits for input (it takes that mutex between two chunks).
//!
//! # Stages, one module each
//!
//! - [`args`]: the command line.
//! - [`reader`]: the inputs, cut into chunks of whole records.
//! - [`work`]: a chunk on its way: prepared (records, keys' hashes and times, from [`key`]),
//!   then decided by each shard.
//! - [`shard`]: the decisions, in input order per shard, and the commits of written keys
//!   ([`pending`]) into the structure ([`filter`]; [`exact`] for `--exact`, [`shared`] for
//!   `--redis`).
//! - [`mod@pipeline`]: how chunks move: all on one thread, or a reader, workers and the writer.
//! - [`sequencer`]: the in-order end: writes ([`output`]), counts, [`progress`], and at the
//!   end the commits, the save of `--state` ([`mod@lock`] holds it for the run) and `--stats`.
//! - [`signals`]: SIGINT and SIGTERM, a first and a second.
//! - this file: [`run`], which builds them from the arguments and starts the run.

use std::io::{self, IsTerminal};
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::Failure;

mod args;
mod exact;
mod filter;
mod key;
mod lock;
mod output;
mod pending;
mod pipeline;
mod progress;
mod reader;
mod sequencer;
mod shard;
mod shared;
mod signals;
mod work;

pub(crate) use args::Dedup;
use args::Future;
use filter::Filter;
pub(crate) use filter::generations;
use key::{Key, Keyer};
use output::Output;
use pipeline::{one_thread, pipeline};
use progress::{PROGRESS_FILES, PROGRESS_STREAM};
use reader::Reader;
use sequencer::{End, Overfill, Sequencer, Stop, lock};
use shard::{Ahead, Shard};
use signals::on_interrupt;

/// Bytes read at a time; a chunk holds at least this much input (or what one read of a pipe
/// gave), cut after its last complete record.
const CHUNK: usize = 1 << 18;

/// The status of a run ended by SIGINT or SIGTERM (128 + SIGINT's number, as shells report).
const INTERRUPTED_STATUS: i32 = 130;

/// Runs `seen dedup`: checks the arguments, opens the structure (and locks the `--state`),
/// and moves the input through the stages to the end.
pub(crate) fn run(args: &Dedup) -> Result<(), Failure> {
    let delimiter = match args.delimiter.as_bytes() {
        [b] => *b,
        _ => {
            return Err(Failure(format!(
                "the delimiter must be one byte, got {:?}",
                args.delimiter
            )));
        }
    };
    let key = match (&args.json_key, args.field) {
        (Some(path), _) => Key::Json(path.split('.').map(str::to_string).collect()),
        (None, Some(n)) => Key::Field(n),
        (None, None) => Key::Whole,
    };
    let time = match &args.time_field {
        None => None,
        Some(spec) if args.json_key.is_some() => {
            Some(Key::Json(spec.split('.').map(str::to_string).collect()))
        }
        Some(spec) => match spec.parse::<u64>() {
            Ok(n) if n >= 1 => Some(Key::Field(n)),
            _ => {
                return Err(Failure(format!(
                    "--time-field {spec:?}: a field number from 1 (or a JSON path with \
                     --json-key)"
                )));
            }
        },
    };
    if let (Some(window), Some(period)) = (args.window, args.period) {
        generations(window, period)?;
        if args.time_field.is_some() && args.future_tolerance > window {
            return Err(Failure(format!(
                "--future-tolerance {} is longer than --window {}: one record that far ahead \
                 would make the window forget every key",
                crate::units::format_duration(args.future_tolerance),
                crate::units::format_duration(window)
            )));
        }
    }
    if !args.redis.is_empty() {
        // Refused before anything is opened or locked.
        shared::plan(args)?;
    }
    // Checked before anything is read or locked. A closed output: the records would vanish
    // (into the /dev/null the standard library puts in its place), and with --state their
    // keys be saved as printed. An output open on /dev/null (`> /dev/null`, `1<> /dev/null`, a
    // launcher's) drops them on purpose, and one that cannot be written (`1< /dev/null`) fails
    // at the first write.
    if crate::os::closed_at_start(1) {
        return Err(Failure(
            "the standard output is closed (`>&-`): the records would be lost; send them to a \
             file, or to /dev/null (`> /dev/null`) to drop them"
                .to_string(),
        ));
    }
    // A closed input would read as empty (the /dev/null in its place), as if the run had
    // nothing to do: an error, as for `cat <&-`.
    let reads_stdin = args.files.is_empty() || args.files.iter().any(|p| p.as_os_str() == "-");
    if reads_stdin && crate::os::closed_at_start(0) {
        return Err(Failure(
            "the standard input is closed (`<&-`): there is nothing to read; give the input on \
             it, or name FILEs"
                .to_string(),
        ));
    }
    let terminator = if args.zero_terminated { 0 } else { b'\n' };
    if let Some(state) = &args.state {
        filter::check_state(state)?;
    }
    // Held to the end of the process: from before the state is loaded to after it is saved.
    let _lock = args.state.as_deref().map(lock::lock).transpose()?;
    if let Some(state) = &args.state {
        crate::oom::note_state(state);
    }
    let filter = Arc::new(crate::oom::fallible(|| Filter::open(args))?);
    let overfill = filter.overfill();
    let keyer = Keyer {
        key,
        time,
        delimiter,
        missing: args.missing_key,
    };
    let inputs: Vec<Option<PathBuf>> = if args.files.is_empty() {
        vec![None]
    } else {
        args.files
            .iter()
            .map(|p| (p.as_os_str() != "-").then(|| p.clone()))
            .collect()
    };
    let names = inputs
        .iter()
        .map(|i| {
            i.as_ref()
                .map_or("standard input".into(), |p| p.display().to_string())
        })
        .collect();
    // The progress bar's length: the files' sizes, when every input is a file.
    let total: Option<u64> = inputs
        .iter()
        .map(|i| {
            std::fs::metadata(i.as_ref()?)
                .ok()
                .filter(|m| m.is_file())
                .map(|m| m.len())
        })
        .sum();
    let progress = (!args.no_progress && io::stderr().is_terminal()).then(|| {
        let bar = match total {
            Some(len) => indicatif::ProgressBar::new(len).with_style(
                indicatif::ProgressStyle::with_template(PROGRESS_FILES).expect("a valid template"),
            ),
            None => indicatif::ProgressBar::new_spinner().with_style(
                indicatif::ProgressStyle::with_template(PROGRESS_STREAM).expect("a valid template"),
            ),
        };
        bar.with_finish(indicatif::ProgressFinish::AndClear)
    });
    let threads = args.threads.map_or_else(
        || std::thread::available_parallelism().map_or(1, |n| n.get()),
        |n| n as usize,
    );
    // Records with their own times are decided in one order (the clock follows them), and so
    // is the overwrite map (a bucket keeps the last of the keys that share it: the order of
    // different keys counts); the other concurrent structures by one shard per thread.
    let shards = if threads == 1 || args.time_field.is_some() || args.remember.is_some() {
        1
    } else {
        threads
    };
    let (time, period_index) = filter.start();
    let shards: Arc<[Mutex<Shard>]> = (0..shards)
        .map(|_| {
            Mutex::new(Shard {
                time,
                period_index,
                ahead: Ahead {
                    tolerance: args.future_tolerance.as_nanos() as u64,
                    clamp: args.future == Future::Clamp,
                },
                deferred: args.state.is_some(),
                ..Shard::default()
            })
        })
        .collect();
    let out =
        Output::stdout(terminator).map_err(|e| Failure(format!("cannot write the output: {e}")))?;
    let sequencer = Arc::new(Mutex::new(Sequencer {
        args: args.clone(),
        filter: Arc::clone(&filter),
        shards: Arc::clone(&shards),
        out,
        written: Arc::new(AtomicU64::new(0)),
        terminator,
        names,
        input: 0,
        input_records: 0,
        records: 0,
        new: 0,
        keyless: 0,
        late: 0,
        very_late: 0,
        clamped: 0,
        bytes: 0,
        started: Instant::now(),
        progress,
        last_draw: Instant::now(),
        overfill,
        pipeline: threads > 1,
        finished: false,
    }));
    on_interrupt(Arc::clone(&sequencer), args.state.clone());
    let reader = Reader::new(inputs, terminator);
    let result = if threads <= 1 {
        one_thread(reader, &keyer, &filter, &shards, &sequencer, terminator)
    } else {
        pipeline(
            reader, keyer, filter, shards, &sequencer, terminator, threads,
        )
    };
    let mut s = lock(&sequencer);
    let status = match result {
        Ok(()) | Err(Stop::Output) => s.finish(End::Done, None),
        // Write out what was decided; keep the last good state.
        Err(Stop::Input(failure)) => s.finish(End::Done, Some(failure)),
    }?;
    if status != 0 {
        std::process::exit(status);
    }
    Ok(())
}
