//! The sequencer: the in-order end of a run. It writes the decided chunks in input order,
//! counts them, draws the progress bar, and at the end commits the keys of the records written,
//! saves the `--state` and prints the summary.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use super::filter::{Filter, identity, left_by_save};
use super::output::Output;
use super::progress::{progress_message, round_count};
use super::shard::{STOPPING, Shard};
use super::signals::{FAILED, INTERRUPTED, SAVED, SAVING, set_save};
use super::work::{PREPARED, Work};
use super::{Dedup, INTERRUPTED_STATUS};
use crate::Failure;

/// Why a run stopped before the end of its input.
pub(super) enum Stop {
    /// A record that cannot be keyed or decided, or an input that cannot be read: the run
    /// fails, and the state is not saved.
    Input(Failure),
    /// A write failed ([`Output`] knows where and why).
    Output,
}

/// How a run that did not fail ended.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum End {
    /// At the end of its input (or of its output's reader).
    Done,
    /// By SIGINT or SIGTERM.
    Interrupted,
}

/// The exit status after the reader of the output went away, as a tool killed by SIGPIPE
/// reports it (`seq 10 | head -1` leaves `seq` with 141 in `PIPESTATUS`).
pub(super) const BROKEN_PIPE_STATUS: i32 = 141;

/// The in-order end of a run: writes, counts, saves.
pub(super) struct Sequencer {
    pub(super) args: Dedup,
    pub(super) filter: Arc<Filter>,
    pub(super) shards: Arc<[Mutex<Shard>]>,
    pub(super) out: Output,
    /// The chunks whose records are all written, for the shards to commit.
    pub(super) written: Arc<AtomicU64>,
    pub(super) terminator: u8,
    pub(super) names: Vec<String>,
    /// The input being counted, and its records so far (for error messages).
    pub(super) input: usize,
    pub(super) input_records: u64,
    pub(super) records: u64,
    pub(super) new: u64,
    /// Records without a key (`--missing-key print`), printed undecided.
    pub(super) keyless: u64,
    /// With --time-field: records older than the clock, and more than the window older.
    pub(super) late: u64,
    pub(super) very_late: u64,
    /// With --future clamp: records dated past the tolerance, held there.
    pub(super) clamped: u64,
    pub(super) bytes: u64,
    pub(super) started: Instant,
    pub(super) progress: Option<indicatif::ProgressBar>,
    pub(super) last_draw: Instant,
    /// Past a fixed size: warned once.
    pub(super) overfill: Overfill,
    /// Whether a pipeline's writer loop ends an interrupted run (else the signal's thread).
    pub(super) pipeline: bool,
    /// Set once the run has ended (normally, by a failure, or interrupted).
    pub(super) finished: bool,
}

/// A structure that can be filled past what it was sized for: the count of new keys it
/// holds, to warn once (on standard error, `--stats` or not) when it passes its capacity.
pub(super) struct Overfill {
    /// The capacity, of the whole filter or of each period.
    pub(super) capacity: Option<u64>,
    /// Per period (a windowed filter's generation), not for the whole filter.
    pub(super) per_period: bool,
    /// The keys held (in the current generation, per period).
    pub(super) count: u64,
    pub(super) generation: u64,
    pub(super) warned: bool,
}

impl Sequencer {
    /// Writes one decided chunk (the next in input order) and counts it.
    pub(super) fn consume(&mut self, work: &Work) -> Result<(), Stop> {
        if work.input != self.input {
            self.input = work.input;
            self.input_records = 0;
        }
        // Each shard's decisions, in record order; the first record not decided.
        let shards = work.decided.len();
        let mut cursors: Vec<_> = work
            .decided
            .iter()
            .map(|d| d.get().map_or(&[][..], |d| &d.new[..]).iter())
            .collect();
        let mut failed: Option<(usize, &str)> = work.bad.as_ref().map(|(i, w)| (*i, w.as_str()));
        for d in work.decided.iter().filter_map(OnceLock::get) {
            if let Some((i, why)) = &d.failed
                && failed.is_none_or(|(f, _)| *i < f)
            {
                failed = Some((*i, why));
            }
            self.late += d.late;
            self.very_late += d.very_late;
            self.clamped += d.clamped;
        }
        let decided = failed.map_or(work.ends.len(), |(i, _)| i);
        let new_before = self.new;
        // The first write that failed: the writes after it fail too.
        let mut written = Ok(());
        // The run of records to print: its first record, and its bytes.
        let mut run: Option<(usize, usize, usize)> = None;
        let starts = std::iter::once(0).chain(work.ends.iter().map(|&e| e + 1));
        for (i, (start, &end)) in starts.zip(&work.ends).take(decided).enumerate() {
            let print = match work.shard(i, shards) {
                Some(shard) => {
                    let is_new = *cursors[shard]
                        .next()
                        .expect("every shard decided its records");
                    self.new += u64::from(is_new);
                    !self.args.count && is_new != self.args.repeated
                }
                None => {
                    self.keyless += 1;
                    !self.args.count && !self.args.repeated
                }
            };
            if !print {
                if let Some((first, s, e)) = run.take() {
                    written =
                        written.and_then(|()| self.out.run(work.seq, first, &work.bytes[s..e]));
                }
                continue;
            }
            // Records are back to back, and a dropped one ends the run above: a kept record
            // extends the run, or starts one.
            run = Some(run.map_or((i, start, end), |(first, s, _)| (first, s, end)));
        }
        if let Some((first, s, e)) = run {
            written = written.and_then(|()| self.out.run(work.seq, first, &work.bytes[s..e]));
        }
        // Counted whether or not the writes went through (the output knows how far it got).
        self.records += decided as u64;
        self.input_records += decided as u64;
        self.bytes += work.bytes.len() as u64;
        if failed.is_none() {
            written = written.and_then(|()| self.out.chunk_done(work.seq));
            self.written
                .store(self.out.written_chunks(), Ordering::Release);
        } else {
            // The records before the failed one are handed over: their keys are saved.
            self.out.part_done(work.seq, decided);
        }
        written.map_err(|_| Stop::Output)?;
        self.check_overfill(self.new - new_before);
        self.draw();
        let name = &self.names[work.input];
        if let Some((_, why)) = failed {
            let unit = if self.terminator == b'\n' {
                "line"
            } else {
                "record"
            };
            let mut message = format!("{name}, {unit} {}: {why}", self.input_records + 1);
            if let Filter::Shared(_) = &*self.filter {
                // Its keys go to the server as they are decided, ahead of the writes.
                let read = PREPARED
                    .load(Ordering::Relaxed)
                    .saturating_sub(self.records);
                message.push_str(&format!(
                    "; it and every {unit} after it were not written ({} read so far), and some \
                     of their keys may be in the shared filter already (decided ahead of the \
                     writes, or sent in a request whose outcome is unknown): a run over them \
                     again drops those",
                    read.max(1)
                ));
            }
            return Err(Stop::Input(Failure(message)));
        }
        if let Some(why) = &work.failed {
            return Err(Stop::Input(Failure(format!("cannot read {name}: {why}"))));
        }
        Ok(())
    }

    /// Writes the output gathered, so that the shards can commit its keys.
    pub(super) fn flush(&mut self) -> Result<(), Stop> {
        self.out.flush().map_err(|_| Stop::Output)?;
        self.written
            .store(self.out.written_chunks(), Ordering::Release);
        Ok(())
    }

    /// Counts `new` keys into a fixed-size structure, and warns once when it passes its
    /// capacity.
    pub(super) fn check_overfill(&mut self, new: u64) {
        let o = &mut self.overfill;
        let Some(capacity) = o.capacity else { return };
        if o.per_period {
            let generation = self.filter.generation();
            if generation != o.generation {
                o.generation = generation;
                o.count = 0;
            }
        }
        o.count = o.count.saturating_add(new);
        // A shared filter: the keys of every run, measured on the server now and then.
        if new > 0
            && let Some(count) = self.filter.measured_len()
        {
            o.count = count;
        }
        // Only new keys pass the capacity (a loaded state's estimate may sit just above it).
        if new > 0 && o.count > capacity && !o.warned {
            o.warned = true;
            let why = self.filter.overfill_warning(&self.args, capacity);
            if let Some(bar) = &self.progress {
                bar.suspend(|| say!("seen: warning: {why}"));
            } else {
                say!("seen: warning: {why}");
            }
        }
    }

    pub(super) fn draw(&mut self) {
        let Some(bar) = &self.progress else { return };
        if self.last_draw.elapsed() < Duration::from_millis(100) {
            return;
        }
        self.last_draw = Instant::now();
        let secs = self.started.elapsed().as_secs_f64().max(1e-9);
        bar.set_position(self.bytes);
        // The time left, from the bytes left at the rate so far (files only).
        let left = bar.length().map(|total| {
            let rate = self.bytes as f64 / secs;
            Duration::from_secs_f64(
                (total.saturating_sub(self.bytes) as f64 / rate.max(1.0)).min(1e9),
            )
        });
        bar.set_message(progress_message(
            self.records,
            self.records - self.new - self.keyless,
            self.records as f64 / secs,
            left,
        ));
    }

    /// Ends the run: the counts (`--count`), the output written, the keys of the records
    /// written committed, the state saved (after a failure too, with the keys of the records
    /// written before it), the summary (`--stats`). Returns the exit status, or the failure.
    pub(super) fn finish(&mut self, end: End, failure: Option<Failure>) -> Result<i32, Failure> {
        self.finished = true;
        STOPPING.store(true, Ordering::SeqCst);
        if let Some(bar) = self.progress.take() {
            bar.finish_and_clear();
        }
        let mut counts = format!(
            "{} new\n{} duplicates\n",
            self.new,
            self.records - self.new - self.keyless
        );
        if self.keyless > 0 {
            counts.push_str(&format!("{} without a key\n", self.keyless));
        }
        let written = if self.args.count && failure.is_none() {
            self.out.text(&counts)
        } else {
            self.out.flush()
        };
        let pipe = self.out.broken_pipe();
        let failure = failure.or_else(|| match written {
            Err(e) if !pipe => Some(Failure(format!("cannot write the output: {e}"))),
            _ => None,
        });
        // However the run ends (its input, a signal, a reader gone, a failure: a record, a
        // read, a full output), the keys of the records written, and no others, go into the
        // structure, and the state is saved: a rerun neither prints them again nor loses one.
        let cut = self.out.cut();
        // The keys the structure refused (a growing filter at the end of its layers, or out of
        // memory for one), and why.
        let mut refused: Option<(usize, String)> = None;
        for shard in self.shards.iter() {
            let mut shard = shard.lock().unwrap_or_else(PoisonError::into_inner);
            if let Err(why) = shard.commit(&self.filter, cut) {
                let left = shard.pending.before(cut);
                refused.get_or_insert((0, why)).0 += left;
            }
            shard.pending.clear();
        }
        let failure = failure.or_else(|| refused.as_ref().map(|(_, why)| Failure(why.clone())));
        if let Some(path) = &self.args.state {
            let before = identity(path);
            set_save(SAVING);
            failpoint!("save");
            if let Err(e) = self.filter.save(path) {
                set_save(FAILED);
                if let Some(Failure(why)) = failure {
                    say!("seen: {why}");
                }
                return Err(Failure(format!(
                    "cannot save the state {}: {e}; {}",
                    path.display(),
                    left_by_save(path, before)
                )));
            }
            if let Some((left, _)) = refused {
                say!(
                    "seen: the state {} is saved without the keys of {left} of the records \
                     written, which the filter refused: the next run over them prints them \
                     again (a growing filter at the end of its layers refuses every new key: \
                     go on with another --state, with a larger --capacity or --fpr)",
                    path.display()
                );
            }
        }
        set_save(SAVED);
        if self.args.stats {
            self.summary();
        }
        if self.very_late > 0 {
            say!(
                "seen: warning: {} more than --window older than a record before them (or than \
                 the --state's time): decided at the newer time, so a repeat of an older key \
                 may have been printed again; feed records in time order",
                records_were(self.very_late)
            );
        }
        if self.clamped > 0 {
            let tolerance = crate::units::format_duration(self.args.future_tolerance);
            say!(
                "seen: warning: {} dated more than --future-tolerance {tolerance} after the \
                 wall clock: decided at the wall clock plus {tolerance} (--future clamp)",
                records_were(self.clamped)
            );
        }
        match failure {
            Some(failure) => Err(failure),
            // Also a signal that came once the input had ended (during the final save, say),
            // and one after which the reader of the output went away (a Ctrl-C in a terminal
            // interrupts the whole pipeline: the reader too): the run was interrupted all the
            // same, and its status says so.
            None if end == End::Interrupted || INTERRUPTED.load(Ordering::SeqCst) => {
                say!("seen: interrupted after {}", records(self.records));
                Ok(INTERRUPTED_STATUS)
            }
            None if pipe => Ok(BROKEN_PIPE_STATUS),
            None => Ok(0),
        }
    }

    /// `--stats`: two lines on standard error.
    pub(super) fn summary(&self) {
        let secs = self.started.elapsed().as_secs_f64();
        let duplicates = self.records - self.new - self.keyless;
        let mut line = format!(
            "seen: {}: {} new, {} duplicates",
            records(self.records),
            self.new,
            duplicates
        );
        if let Some(fpr) = self.filter.estimated_fpr() {
            // Each new key was looked up once at a rate at most the final one (the filters
            // only fill, past a rotation too, on the whole): an upper estimate.
            let false_positives =
                (self.new as f64 * fpr / (1.0 - fpr).max(f64::MIN_POSITIVE)).min(duplicates as f64);
            line.push_str(&format!(
                " (of which at most about {} may be false positives: new records taken for \
                 duplicates)",
                round_count(false_positives)
            ));
        }
        if self.keyless > 0 {
            line.push_str(&format!(", {} without a key", self.keyless));
        }
        line.push_str(&format!(
            ", {:.0} records/s",
            self.records as f64 / secs.max(1e-9)
        ));
        say!("{line}");
        if self.late > 0 {
            say!(
                "seen: {} older than a record before them (or than the --state's time), and \
                 counted at the newer time; {} of them by more than --window",
                records_were(self.late),
                self.very_late
            );
        }
        say!(
            "seen: {}",
            self.filter.describe(exact_set(&self.shards), &self.args)
        );
    }
}

/// Locks the sequencer, whatever a panicking holder left.
pub(super) fn lock(m: &Mutex<Sequencer>) -> MutexGuard<'_, Sequencer> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The keys in the exact set's shards, and the bytes they take.
pub(super) fn exact_set(shards: &[Mutex<Shard>]) -> (usize, usize) {
    shards.iter().fold((0, 0), |(keys, bytes), s| {
        let s = s.lock().unwrap_or_else(PoisonError::into_inner);
        (keys + s.exact.len(), bytes + s.exact.memory_bytes())
    })
}

/// `1 record` or `N records`, for a message.
fn records(n: u64) -> String {
    if n == 1 {
        "1 record".to_string()
    } else {
        format!("{n} records")
    }
}

/// `1 record was` or `N records were`, for a message.
fn records_were(n: u64) -> String {
    if n == 1 {
        "1 record was".to_string()
    } else {
        format!("{n} records were")
    }
}
