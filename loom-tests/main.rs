//! Loom models of every atomic protocol in the crate, one module per structure.
//!
//! Run (the README's test command does):
//!
//! ```sh
//! RUSTFLAGS="--cfg loom -C debug_assertions" LOOM_MAX_PREEMPTIONS=2 \
//!     CARGO_TARGET_DIR=target/loom cargo test --release --test loom
//! ```
//!
//! Every invariant has a `#[should_panic]` twin that runs the same model against a deliberately
//! broken variant, as proof that the model can fail.
#![cfg(loom)]

mod atomic_bloom;
mod facade;
mod overwrite;
mod semi_concurrent;
