//! The keys a shard found new whose records are not written yet.
//!
//! A record is decided by a lookup: new when its key is neither in the structure nor pending.
//! Its key enters the structure (is *committed*) only once the record is written, so the
//! structure, and the `--state` saved from it, never holds the key of a record that was not
//! written: a run that stops part way (a broken pipe, a signal) saves exactly what it printed.
//!
//! Each pending key carries a tag: where it falls in a windowed filter's time (its generation,
//! or its period), so that a key pending for longer than the window is forgotten as the
//! filter would forget it, and is committed into the generation it belongs to.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

use seen::hash::Hash128;

use super::output::Cut;

/// One pending key: its record's place in its chunk, its hash, its tag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Entry {
    pub(super) record: usize,
    pub(super) hash: Hash128,
    pub(super) tag: u64,
}

/// A shard's pending keys: the keys by chunk, in input order, and for lookups the latest
/// record of each key (its chunk, record and tag).
///
/// A commit does not remove its keys from the lookup map one by one (a random access each):
/// an entry at or before the commits' cut is simply not pending any more, and such entries are
/// swept out in one pass once they outnumber the pending ones.
#[derive(Default)]
pub(super) struct Pending {
    keys: HashMap<Hash128, (u64, usize, u64), BuildHasherDefault<Spread>>,
    chunks: VecDeque<(u64, Vec<Entry>)>,
    /// The records before this place are committed.
    committed: Cut,
    /// The keys in `chunks`.
    live: usize,
}

impl Pending {
    /// Whether record `record` of chunk `chunk` is after the commits (so, if it was added,
    /// still pending).
    pub(super) fn is_pending(&self, chunk: u64, record: usize) -> bool {
        Cut { chunk, record } >= self.committed
    }

    /// The tag of the key's latest pending record, if it has one.
    pub(super) fn get(&self, hash: Hash128) -> Option<u64> {
        match self.keys.get(&hash) {
            Some(&(chunk, record, tag)) if self.is_pending(chunk, record) => Some(tag),
            _ => None,
        }
    }

    #[cfg(test)]
    fn contains(&self, hash: Hash128) -> bool {
        self.get(hash).is_some()
    }

    /// Adds the key of record `record` of chunk `chunk` (chunks, and records within one, in
    /// input order), with its tag.
    pub(super) fn add(&mut self, chunk: u64, record: usize, hash: Hash128, tag: u64) {
        self.keys.insert(hash, (chunk, record, tag));
        let entry = Entry { record, hash, tag };
        match self.chunks.back_mut() {
            Some((c, keys)) if *c == chunk => keys.push(entry),
            _ => self.chunks.push_back((chunk, vec![entry])),
        }
        self.live += 1;
    }

    /// Commits, in input order, the pending keys of the records before `cut`: `insert` puts a
    /// run of them in the structure (all of one chunk), and returns how many it put there
    /// before it failed, with why. A lookup finds a key in the structure or here throughout.
    pub(super) fn commit(
        &mut self,
        cut: Cut,
        mut insert: impl FnMut(&[Entry]) -> Result<(), (usize, String)>,
    ) -> Result<(), String> {
        let mut failed = None;
        while let Some((chunk, keys)) = self.chunks.front_mut() {
            if *chunk > cut.chunk {
                break;
            }
            let take = if *chunk < cut.chunk {
                keys.len()
            } else {
                keys.partition_point(|e| e.record < cut.record)
            };
            let done = match insert(&keys[..take]) {
                Ok(()) => take,
                Err((done, why)) => {
                    failed = Some(why);
                    done
                }
            };
            self.live -= done;
            if done == keys.len() {
                self.chunks.pop_front();
            } else {
                // Where the commits stop: the first key not committed.
                let stop = Cut {
                    chunk: *chunk,
                    record: keys[done].record,
                };
                keys.drain(..done);
                self.committed = self.committed.max(stop.min(cut));
                return failed.map_or(Ok(()), Err);
            }
        }
        self.committed = self.committed.max(cut);
        if self.keys.len() > 2 * self.live + 4096 {
            let committed = self.committed;
            self.keys
                .retain(|_, &mut (chunk, record, _)| Cut { chunk, record } >= committed);
        }
        failed.map_or(Ok(()), Err)
    }

    /// The number of keys pending of the records before `cut`.
    pub(super) fn before(&self, cut: Cut) -> usize {
        self.chunks
            .iter()
            .take_while(|(chunk, _)| *chunk <= cut.chunk)
            .map(|(chunk, keys)| {
                if *chunk < cut.chunk {
                    keys.len()
                } else {
                    keys.partition_point(|e| e.record < cut.record)
                }
            })
            .sum()
    }

    /// The number of keys pending.
    pub(super) fn live(&self) -> usize {
        self.live
    }

    /// Forgets every pending key (the records after the cut, never written).
    pub(super) fn clear(&mut self) {
        self.keys.clear();
        self.chunks.clear();
        self.live = 0;
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.live
    }
}

/// The set's hasher: the keys are 128-bit hashes already, so their words are only folded.
#[derive(Default)]
pub(super) struct Spread(u64);

impl Hasher for Spread {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, word: u64) {
        self.0 = self.0.rotate_left(29) ^ word;
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(i: u64) -> Hash128 {
        Hash128 {
            h1: i.wrapping_mul(0x9e37_79b9_7f4a_7c15),
            h2: i,
        }
    }

    #[test]
    fn commit_takes_the_records_before_the_cut_in_input_order() {
        let mut p = Pending::default();
        p.add(0, 1, h(1), 0);
        p.add(0, 4, h(2), 0);
        p.add(2, 0, h(3), 0);
        p.add(2, 7, h(4), 0);
        assert_eq!(p.get(h(2)), Some(0));
        assert_eq!(p.get(h(5)), None);
        let mut got = Vec::new();
        let cut = Cut {
            chunk: 2,
            record: 7,
        };
        p.commit(cut, |run| {
            got.extend(run.iter().map(|e| e.hash));
            Ok(())
        })
        .unwrap();
        assert_eq!(got, [h(1), h(2), h(3)]);
        assert!(!p.contains(h(1)) && !p.contains(h(3)));
        assert!(p.contains(h(4)), "record 7 of chunk 2 is after the cut");
        assert_eq!(p.len(), 1);
        got.clear();
        p.commit(
            Cut {
                chunk: 3,
                record: 0,
            },
            |run| {
                got.extend(run.iter().map(|e| e.hash));
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(got, [h(4)]);
        assert_eq!(p.len(), 0);
    }

    /// A key pending twice (its first record's tag out of the window when the second came):
    /// committing the first keeps the second pending.
    #[test]
    fn a_key_pending_twice_stays_pending_until_its_last_record_is_committed() {
        let mut p = Pending::default();
        p.add(0, 0, h(1), 3);
        p.add(1, 0, h(1), 9);
        assert_eq!(p.get(h(1)), Some(9));
        let mut got = Vec::new();
        for (chunk, still) in [(1, Some(9)), (2, None)] {
            let cut = Cut { chunk, record: 0 };
            p.commit(cut, |run| {
                got.extend(run.iter().map(|e| (e.hash, e.tag)));
                Ok(())
            })
            .unwrap();
            assert_eq!(p.get(h(1)), still);
        }
        assert_eq!(got, [(h(1), 3), (h(1), 9)]);
    }

    #[test]
    fn a_failed_insert_keeps_the_keys_not_committed() {
        let mut p = Pending::default();
        for i in 0..4 {
            p.add(0, i as usize, h(i), 0);
        }
        let cut = Cut {
            chunk: 1,
            record: 0,
        };
        let failed = p.commit(cut, |run| {
            assert_eq!(run.len(), 4);
            // The third fails.
            Err((2, "full".into()))
        });
        assert_eq!(failed, Err("full".to_string()));
        assert!(!p.contains(h(1)) && p.contains(h(2)) && p.contains(h(3)));
        let mut got = Vec::new();
        p.commit(cut, |run| {
            got.extend(run.iter().map(|e| e.hash));
            Ok(())
        })
        .unwrap();
        assert_eq!(got, [h(2), h(3)]);
    }
}
