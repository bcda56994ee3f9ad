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
type Entry = (usize, Hash128, u64);

/// A shard's pending keys: the latest tag of each, for lookups, and the keys by chunk, in
/// input order.
#[derive(Default)]
pub(super) struct Pending {
    keys: HashMap<Hash128, u64, BuildHasherDefault<Spread>>,
    chunks: VecDeque<(u64, Vec<Entry>)>,
}

impl Pending {
    /// The tag of the key's latest pending record, if it has one.
    pub(super) fn get(&self, hash: Hash128) -> Option<u64> {
        self.keys.get(&hash).copied()
    }

    #[cfg(test)]
    fn contains(&self, hash: Hash128) -> bool {
        self.keys.contains_key(&hash)
    }

    /// Adds the key of record `record` of chunk `chunk` (chunks, and records within one, in
    /// input order), with its tag.
    pub(super) fn add(&mut self, chunk: u64, record: usize, hash: Hash128, tag: u64) {
        self.keys.insert(hash, tag);
        match self.chunks.back_mut() {
            Some((c, keys)) if *c == chunk => keys.push((record, hash, tag)),
            _ => self.chunks.push_back((chunk, vec![(record, hash, tag)])),
        }
    }

    /// Commits, in input order, the pending keys of the records before `cut`: each is handed
    /// with its tag to `insert` (which puts it in the structure) before it leaves the pending
    /// set, so a lookup finds it in one or the other throughout. Stops at the first failure.
    pub(super) fn commit(
        &mut self,
        cut: Cut,
        mut insert: impl FnMut(Hash128, u64) -> Result<(), String>,
    ) -> Result<(), String> {
        while let Some((chunk, keys)) = self.chunks.front_mut() {
            if *chunk > cut.chunk {
                break;
            }
            let whole = *chunk < cut.chunk;
            let take = if whole {
                keys.len()
            } else {
                keys.partition_point(|&(record, ..)| record < cut.record)
            };
            for (done, &(_, hash, tag)) in keys[..take].iter().enumerate() {
                if let Err(e) = insert(hash, tag) {
                    keys.drain(..done);
                    return Err(e);
                }
                // Unless a later record of the key is pending too.
                if self.keys.get(&hash) == Some(&tag) {
                    self.keys.remove(&hash);
                }
            }
            if take == keys.len() {
                self.chunks.pop_front();
            } else {
                keys.drain(..take);
                break;
            }
        }
        Ok(())
    }

    /// Forgets every pending key (the records after the cut, never written).
    pub(super) fn clear(&mut self) {
        self.keys.clear();
        self.chunks.clear();
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.keys.len()
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
        p.commit(cut, |x, _| {
            got.push(x);
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
            |x, _| {
                got.push(x);
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
            p.commit(cut, |x, tag| {
                got.push((x, tag));
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
        let mut calls = 0;
        let failed = p.commit(cut, |x, _| {
            calls += 1;
            if x == h(2) {
                Err("full".into())
            } else {
                Ok(())
            }
        });
        assert_eq!(failed, Err("full".to_string()));
        assert_eq!(calls, 3);
        assert!(!p.contains(h(1)) && p.contains(h(2)) && p.contains(h(3)));
        let mut got = Vec::new();
        p.commit(cut, |x, _| {
            got.push(x);
            Ok(())
        })
        .unwrap();
        assert_eq!(got, [h(2), h(3)]);
    }
}
