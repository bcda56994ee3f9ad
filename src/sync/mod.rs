//! The loom facade: the only module that names `std::sync::atomic`, `loom`, `arc_swap` or
//! `crossbeam_skiplist`.
//!
//! Everything else in the crate imports its atomics, `Arc`, [`spin_hint`], [`ArcCell`] and
//! [`PendingSet`] from here. A normal build gets `std_impl.rs`: the standard library's atomics,
//! `arc_swap::ArcSwap` and `crossbeam_skiplist::SkipSet`. A build with `RUSTFLAGS="--cfg seen_loom"`
//! gets `loom_impl.rs`: loom's atomics, and two stand-ins built on loom's primitives, because
//! neither arc-swap nor the skip list can run inside `loom::model`.
//!
//! The stand-ins model, step by step and with the same or weaker orderings, what the real
//! components do as far as our code can observe (the skip list's replacing insert in two steps,
//! its consume-ordered lookups, its approximate `len`; arc-swap's Acquire loads). What the loom
//! build proves is "our protocol is correct provided `ArcSwap` and `SkipSet` behave no better
//! than these stand-ins": the table in `docs/concurrency.md` cites, for each, the source file it was
//! read from.
//!
//! The choice is made on `cfg(seen_loom)` alone: the whole crate, not only its tests, runs on loom's
//! types in a loom build. The models themselves are `cfg(all(test, seen_loom))`
//! (`loom-tests/`).

// The facade offers the whole surface the structures need; a given build uses only part of it.
#![allow(dead_code, unused_imports)]

#[cfg(not(seen_loom))]
mod std_impl;
#[cfg(not(seen_loom))]
pub(crate) use std_impl::*;

#[cfg(seen_loom)]
pub(crate) mod loom_impl;
#[cfg(seen_loom)]
pub(crate) use loom_impl::*;

#[cfg(all(test, not(seen_loom)))]
mod tests;
