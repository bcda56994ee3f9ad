//! The [`seen`] filters shared by every process and machine that opens them by name, kept in
//! a Redis or Valkey server (or cluster) in plain string keys: stock commands only
//! (`BITFIELD`, `GETRANGE`, `SET`, a script for one compare-and-clear), no module, so managed
//! services work too.
//!
//! - [`SharedBloomFilter`]: the [`seen::AtomicBloomFilter`] block for block, exactly-once
//!   inserts, batches of one or two round trips, upload and download of a local filter.
//! - [`SharedWindowedFilter`]: the last `n` periods, as a [`seen::WindowedBloomFilter`] with an
//!   aligned rotation: one key per generation that expires on its own, lookups in one round
//!   trip, exactly-once inserts across clients whose clocks straddle a period boundary.
//! - [`SharedOverwriteMap`]: the [`seen::OverwriteMap`] slot for slot, with its at-least-once
//!   claims ([`SharedClaim`]): consumers on many machines share one map, and a failed
//!   handler's forget never erases another message's entry.
//!
//! Every structure has a blocking API and the same methods with `_async` on tokio; errors are
//! typed ([`Error`]) and name the key.

mod bloom;
mod error;
mod map;
mod meta;
mod names;
mod server;
mod windowed;

pub use bloom::{SharedBloomBuilder, SharedBloomFilter};
pub use error::Error;
pub use map::{SharedClaim, SharedMapBuilder, SharedOverwriteMap};
pub use server::{DEFAULT_TIMEOUT, Server};
pub use windowed::{SharedWindowBuilder, SharedWindowedFilter};
