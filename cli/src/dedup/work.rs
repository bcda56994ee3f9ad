//! A chunk of input on its way through the pipeline: the records it holds, their keys'
//! hashes and times once it is prepared, and each shard's decisions.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use seen::hash::Hash128;

use super::filter::Filter;
use super::key::Keyer;

/// The records prepared so far in this run (the records read, but for the rest of a chunk
/// after a record that cannot be keyed): after a failure, how many were not written.
pub(super) static PREPARED: AtomicU64 = AtomicU64::new(0);

/// A chunk of input on its way through the pipeline.
#[derive(Default)]
pub(super) struct Work {
    /// The chunk's place in the input.
    pub(super) seq: u64,
    /// The input it came from (an index into the input names).
    pub(super) input: usize,
    /// Whole records, each followed by its terminator (the input's last record may lack it).
    pub(super) bytes: Vec<u8>,
    /// A read failure after this chunk's records (the reader stops there).
    pub(super) failed: Option<String>,
    /// Prepared: where each record ends (before its terminator).
    pub(super) ends: Vec<usize>,
    /// Prepared: each record's key hash (the filter's hasher; the exact set keeps it too).
    pub(super) hashes: Vec<Hash128>,
    /// Prepared, with `--missing-key print`: which records have no key (empty when all do).
    pub(super) keyless: Vec<bool>,
    /// Prepared, with --time-field: each record's time (ns since the Unix epoch).
    pub(super) times: Vec<u64>,
    /// Prepared: the first record that could not be keyed, and why (the records before it
    /// are prepared).
    pub(super) bad: Option<(usize, String)>,
    /// Decided, by each shard: whether each of its records is new, in order; and the first
    /// record it could not insert.
    pub(super) decided: Vec<OnceLock<Decided>>,
    /// The shards that have not decided yet.
    pub(super) undecided: AtomicUsize,
}

/// One shard's decisions for one chunk.
#[derive(Default)]
pub(super) struct Decided {
    pub(super) new: Vec<bool>,
    pub(super) failed: Option<(usize, String)>,
    /// With --time-field: the records older than the clock (counted at its time), and of
    /// those the ones more than the window older.
    pub(super) late: u64,
    pub(super) very_late: u64,
    /// With --future clamp: the records dated past the tolerance, held there.
    pub(super) clamped: u64,
}

impl Work {
    /// Splits the chunk into records, keys and hashes them.
    pub(super) fn prepare(
        &mut self,
        keyer: &Keyer,
        filter: &Filter,
        terminator: u8,
        shards: usize,
    ) {
        self.ends.clear();
        self.hashes.clear();
        self.keyless.clear();
        self.times.clear();
        self.bad = None;
        let mut start = 0;
        while start < self.bytes.len() {
            let end = memchr::memchr(terminator, &self.bytes[start..])
                .map_or(self.bytes.len(), |i| start + i);
            let record = &self.bytes[start..end];
            match keyer.of(record) {
                Ok((key, time)) => {
                    match key {
                        Some(key) => {
                            self.hashes.push(filter.hash(&key));
                            if !self.keyless.is_empty() {
                                self.keyless.push(false);
                            }
                        }
                        None => {
                            // Printed as it is, decided by no shard.
                            self.hashes.push(Hash128 { h1: 0, h2: 0 });
                            self.keyless.resize(self.hashes.len() - 1, false);
                            self.keyless.push(true);
                        }
                    }
                    if let Some(t) = time {
                        self.times.push(t);
                    }
                }
                Err(why) => {
                    self.bad = Some((self.ends.len(), why));
                    break;
                }
            }
            self.ends.push(end);
            start = end + 1;
        }
        PREPARED.fetch_add(self.ends.len() as u64, Ordering::Relaxed);
        self.decided.clear();
        self.decided.resize_with(shards, OnceLock::new);
        self.undecided = AtomicUsize::new(shards);
    }

    /// Whether record `i` has a key.
    pub(super) fn keyed(&self, i: usize) -> bool {
        !self.keyless.get(i).copied().unwrap_or(false)
    }

    /// The shard of record `i` (`None`: it has no key, and is printed undecided).
    pub(super) fn shard(&self, i: usize, shards: usize) -> Option<usize> {
        self.keyed(i).then(|| {
            if shards == 1 {
                0
            } else {
                shard_of(self.hashes[i], shards)
            }
        })
    }
}

/// The shard of a key: all records of one key go to one shard, which decides them in input
/// order, so a key is new exactly at its first record whatever the threads do.
pub(super) fn shard_of(hash: Hash128, shards: usize) -> usize {
    (((hash.h2 >> 32) * shards as u64) >> 32) as usize
}
