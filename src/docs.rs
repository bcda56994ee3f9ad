//! The long-form documentation: why the crate is built the way it is, the derivation of every
//! sizing formula, the memory orderings and what loom proves about them, and the benchmarks.
//!
//! Each page is a module with no items, whose documentation is one of the repository's
//! `docs/*.md` files, so the same text reads on docs.rs and in the repository (arc-swap keeps its
//! long-form docs the same way). Every Rust example in these pages runs as a doctest.
//!
//! - [`design`]: the architecture (the module tree, what each module owns, which way the
//!   dependencies point, where a new structure goes), then every design decision and why.
//! - [`sizing`]: the formulas, where they come from, and what the blocked filters allocate.
//! - [`concurrency`]: the orderings of every atomic protocol, why each is enough, and what the
//!   loom models check.
//! - [`benchmarks`]: the measurements against the peer crates, the machine, and the commands
//!   that reproduce them.
//! - [`format`](mod@format): the file format of saved structures, byte by byte, and its stability promise.

#[doc = include_str!("../docs/design.md")]
pub mod design {}

#[doc = include_str!("../docs/sizing.md")]
pub mod sizing {}

#[doc = include_str!("../docs/concurrency.md")]
pub mod concurrency {}

#[doc = include_str!("../docs/benchmarks.md")]
pub mod benchmarks {}

#[doc = include_str!("../docs/format.md")]
pub mod format {}
