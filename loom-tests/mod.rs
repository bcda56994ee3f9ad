//! Loom models of every atomic protocol in the crate, one module per structure (`README.md` in
//! this folder: how to run them, each model and the broken twin it catches, how to add one).
//!
//! Compiled as a private child module of the library, only for the crate's own tests under
//! `--cfg seen_loom` (`src/lib.rs`: `#[cfg(all(test, seen_loom))] #[path = "../loom-tests/mod.rs"]
//! mod loom_tests;`), so that the models reach the facade's stand-ins and the structures'
//! internals without any of them being public. Run (the README's test command does):
//!
//! ```sh
//! RUSTFLAGS="--cfg seen_loom -C debug_assertions" LOOM_MAX_PREEMPTIONS=2 \
//!     CARGO_TARGET_DIR=target/loom cargo test --release --lib
//! ```
//!
//! Every invariant has a `#[should_panic]` twin that runs the same model against a deliberately
//! broken variant, as proof that the model can fail. A twin is either a
//! `cfg(all(test, seen_loom))` function next to the code it breaks, or a [`Twin`] selected for
//! one call with [`with`]: the protocol asks `twin!(Name)` (defined in `src/bloom/mod.rs`), which
//! is the literal `false` in every other build.

// tokio's guard: a loom build without debug assertions checks less (the protocols'
// `debug_assert!`s are part of what the models check) and lets overflow wrap silently.
#[cfg(not(debug_assertions))]
compile_error!(
    "the loom models need debug assertions: build with \
     RUSTFLAGS=\"--cfg seen_loom -C debug_assertions\""
);

use core::cell::Cell;

mod atomic_bloom;
mod facade;
mod growing;
mod overwrite;
mod persist;
mod semi_concurrent;
mod windowed;

/// The deliberately broken variants of the growing, windowed and semi-concurrent protocols:
/// each names one step done wrong. The protocol asks `twin!(Name)`, true only while a model
/// runs an operation through [`with`] on the same thread.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Twin {
    /// The protocol as documented.
    Correct,
    /// Windowed: an insert takes its first write's answer, with no second look after a rotation.
    IgnoreRotation,
    /// Windowed: after a rotation, an insert writes into the new generation without looking at
    /// the generations that became current while it ran.
    SkipBecameCurrent,
    /// Windowed: a rotation publishes the spare once every chunk is *claimed*, not finished.
    PublishWhenClaimed,
    /// Growing: the insert does not re-check the number of layers after its write.
    IgnoreGrowth,
    /// Growing: the insert's write is a load and a separate store per word where a
    /// read-modify-write is needed (`or_at` without its `fetch_or`), so another thread's bits
    /// written to the same word in between are lost.
    RacyOr,
    /// Growing: the growth publishes the new layer, then zeroes its bits (the memory held
    /// another layer's bits before: "publishes a layer before it is initialised").
    PublishBeforeInit,
    /// Growing, and not broken: a growth by this insert fails as an allocation failure would
    /// (the models of the stuck state and the retry).
    FailGrowth,
    /// Growing: a growth by this insert fails, and the failure keeps the claim instead of
    /// marking the filter stuck: every later insert of a new item waits for a growth no one runs.
    FailKeepingClaim,
    /// Semi-concurrent: the insert uses the skip list's replacing insert (remove the existing
    /// entry, then link a new one).
    ReplacingInsert,
    /// Semi-concurrent: an inserter whose node was not linked keeps its summary increment.
    KeepUnlinkedIncrement,
    /// Semi-concurrent: the batch leaves the pending set (and the summary) before the swap.
    RemoveBeforeSwap,
    /// Semi-concurrent: the summary is lowered before the swap, the hashes removed after it.
    LowerSummaryBeforeSwap,
    /// Semi-concurrent: a compaction clears its hashes' slots instead of lowering them by one
    /// each.
    ClearSummary,
    /// Semi-concurrent, and not broken: the insert skips the buffer and goes to the overflow
    /// (as when the buffer has no free slot near the hash's home), so that the models reach
    /// the skip list's steps.
    Overflow,
    /// Semi-concurrent: the drain swaps every slot's `val` to "taken", published ones too, so a
    /// drained hash is no longer whole in the buffer before the swap of the copy holding it.
    DrainTakesPublished,
    /// Semi-concurrent: the drain reads each claimed slot instead of closing the unpublished
    /// ones, so a publish can land after the drain passed.
    DrainWithoutClosing,
    /// Semi-concurrent: a reset writes the stamp the table already had, so a claim made before
    /// it can publish after it.
    ResetToSameStamp,
    /// Semi-concurrent: an insert publishes without checking, after its claim, that its table's
    /// turn goes on, so it can publish in a free slot the drain has passed.
    SkipTurnCheck,
}

loom::thread_local! {
    /// The twin the running (loom) thread selected. A thread-local, not a field of the
    /// structure, so that a twin breaks only the operations its model runs through it (another
    /// thread's insert into the same filter stays correct), as a parameter would; reading it is
    /// no scheduling point for loom.
    static SELECTED: Cell<Twin> = Cell::new(Twin::Correct);
}

/// Runs `op` on this thread as `twin` does it.
pub(crate) fn with<R>(twin: Twin, op: impl FnOnce() -> R) -> R {
    let before = SELECTED.with(|s| s.replace(twin));
    let out = op();
    SELECTED.with(|s| s.set(before));
    out
}

/// Whether this thread runs an operation as `twin` (what `twin!(Name)` asks).
pub(crate) fn selected(twin: Twin) -> bool {
    SELECTED.with(|s| s.get() == twin)
}
