//! Loom models of every atomic protocol in the crate, one module per structure.
//!
//! Compiled only for the crate's own tests under `--cfg seen_loom` (`cfg(all(test, seen_loom))`, as tokio
//! keeps its loom tests next to the code), so that the models reach the facade's stand-ins and
//! the broken twins without any of them being public. Run (the README's test command does):
//!
//! ```sh
//! RUSTFLAGS="--cfg seen_loom -C debug_assertions" LOOM_MAX_PREEMPTIONS=2 \
//!     CARGO_TARGET_DIR=target/loom cargo test --release --lib
//! ```
//!
//! Every invariant has a `#[should_panic]` twin that runs the same model against a deliberately
//! broken variant, as proof that the model can fail. The twins are `cfg(all(test, seen_loom))`
//! functions next to the code they break, so they share its helpers and drift with it.

mod atomic_bloom;
mod facade;
mod growing;
mod overwrite;
mod persist;
mod semi_concurrent;
mod windowed;
