//! SIGINT and SIGTERM: the first ends the run after the chunks read are written and the
//! state saved; a second (not the first delivered twice) ends it at once, its status saying
//! what the state file holds.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use super::INTERRUPTED_STATUS;
use super::sequencer::{End, Sequencer, lock};
use crate::Failure;

/// Whether SIGINT or SIGTERM arrived.
pub(super) static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// How far the state's save got, for a second signal: [`UNSAVED`], [`SAVING`], [`SAVED`]
/// (also when there is nothing to save) or [`FAILED`]. A mutex, not an atomic: a signal's
/// decision and the start of the save exclude each other, so the line it prints is true.
pub(super) static SAVE: Mutex<u8> = Mutex::new(UNSAVED);
pub(super) const UNSAVED: u8 = 0;
pub(super) const SAVING: u8 = 1;
pub(super) const SAVED: u8 = 2;
pub(super) const FAILED: u8 = 3;

pub(super) fn set_save(to: u8) {
    *SAVE.lock().unwrap_or_else(PoisonError::into_inner) = to;
}

/// The signals after the first that were not the first delivered twice, handled so far.
pub(super) static AGAIN: AtomicU8 = AtomicU8::new(0);

/// A signal this soon after the first is the same one delivered twice (GNU `timeout` sends
/// the signal it forwards to the command and to its process group), not a second one.
pub(super) const SAME_SIGNAL: Duration = Duration::from_millis(250);

/// On SIGINT or SIGTERM: the run ends after the chunks read so far are written (by the
/// pipeline's writer, or between two chunks of a one-thread run: by its loop, or here if the
/// loop waits for input), with the state saved ([`interrupted`]), and exits with status 130,
/// also when the signal came during the final save of a run that reached the end of its input,
/// or when the reader of the output goes away before the records are written
/// ([`Sequencer::finish`]). With `--state`, a first signal before the save says so on standard
/// error: what the run does now (the writes may wait for a reader that does not read), and
/// what a second signal does. A second signal (at least [`SAME_SIGNAL`] after the first) ends
/// the run at once, and its status says what the state file holds:
///
/// - no `--state`: 130, as for one signal;
/// - the save not begun: 2, with a line saying that the state file keeps its previous save,
///   without this run's records (the next run prints them again);
/// - the save under way: a line says that it ends in a moment, and the run exits once it is
///   done, with 130 (or 2 if it failed); a third signal stops at once, with status 2 and a line
///   saying that the file holds the previous save or this run's, whole (a save is renamed into
///   place in one step; the temporary file a stopped save leaves is removed by the next save);
/// - the save done (or failed): the run ends with its own status a moment later.
pub(super) fn on_interrupt(sequencer: Arc<Mutex<Sequencer>>, state: Option<PathBuf>) {
    let installed = ctrlc::set_handler(move || {
        handle(&sequencer, state.as_ref());
        // Handled (a test sends the next signal only now: two sent before would be one).
        failpoint!("signal");
    });
    // Without a handler (another one is installed), a signal ends the process as usual: the
    // state file keeps its last save.
    let _ = installed;
}

/// One SIGINT or SIGTERM (see [`on_interrupt`]).
fn handle(sequencer: &Arc<Mutex<Sequencer>>, state: Option<&PathBuf>) {
    static FIRST: OnceLock<Instant> = OnceLock::new();
    if INTERRUPTED.swap(true, Ordering::SeqCst) {
        if FIRST.get().is_none_or(|at| at.elapsed() >= same_signal()) {
            again(state.is_some());
        }
        return;
    }
    let _ = FIRST.set(Instant::now());
    if let Some(path) = state {
        // Before the save (held: the save does not begin meanwhile, so the line is true).
        let save = SAVE.lock().unwrap_or_else(PoisonError::into_inner);
        if *save == UNSAVED {
            // On a terminal, the progress bar's line cleared first (it is drawn again below).
            let clear = if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
                "\r\x1b[2K"
            } else {
                ""
            };
            say!(
                "{clear}seen: interrupted: writing the records already decided (as fast as the \
                 output takes them), then saving --state {}; interrupt again to quit without \
                 saving (the state then keeps what it held before this run, and the next run \
                 prints this run's records again)",
                path.display()
            );
        }
    }
    // The handler must return to see a second signal: finish on another thread (here, if the
    // system gives no thread).
    let end = |sequencer: Arc<Mutex<Sequencer>>| {
        let mut s = lock(&sequencer);
        if !s.pipeline {
            interrupted(&mut s);
        }
    };
    let other = Arc::clone(sequencer);
    if std::thread::Builder::new()
        .spawn(move || end(other))
        .is_err()
    {
        end(Arc::clone(sequencer));
    }
}

/// A signal after the first, not the first delivered twice (see [`on_interrupt`]).
fn again(state: bool) {
    let earlier = AGAIN.fetch_add(1, Ordering::SeqCst);
    // Held to the exit: the save does not begin meanwhile, so the line printed is true.
    let save = SAVE.lock().unwrap_or_else(PoisonError::into_inner);
    match *save {
        _ if !state => std::process::exit(INTERRUPTED_STATUS),
        // The run exits with 130 once the save is done, or says why it failed.
        SAVING if earlier == 0 => say!(
            "seen: saving --state, which ends in a moment (a third signal stops without \
             waiting)"
        ),
        SAVING => {
            say!(
                "seen: interrupted during the save of --state: the file holds its previous \
                 save or this run's, whole"
            );
            std::process::exit(2);
        }
        SAVED | FAILED => {}
        _ => {
            say!(
                "seen: interrupted again before --state was saved: it keeps its previous save, \
                 without the records printed by this run (the next run prints them again)"
            );
            std::process::exit(2);
        }
    }
}

/// [`SAME_SIGNAL`], or what a test set (`failpoints.rs`).
fn same_signal() -> Duration {
    #[cfg(feature = "failpoints")]
    if let Some(ms) = crate::failpoints::same_signal() {
        return ms;
    }
    SAME_SIGNAL
}

/// Ends an interrupted run: the records decided are written, the state saved, then the
/// process exits with status 130. Nothing if the run had already finished.
pub(super) fn interrupted(s: &mut Sequencer) {
    if s.finished {
        return;
    }
    let status = match s.finish(End::Interrupted, None) {
        Ok(status) => status,
        Err(Failure(why)) => {
            say!("seen: {why}");
            2
        }
    };
    std::process::exit(status);
}
