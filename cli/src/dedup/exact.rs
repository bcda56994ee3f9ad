//! The set of `seen dedup --exact`: a 96-bit fingerprint of each distinct key, in a table of
//! 12 bytes a slot that grows in place.
//!
//! # What it keeps
//!
//! A key's 128-bit hash (xxh3-128 of its bytes, [`Hash128`]) is cut to a 96-bit fingerprint:
//! all of `h1` and the low 32 bits of `h2`. The high bits of `h2` pick the key's shard
//! (`shard_of` in `dedup/work.rs`), so within a shard they are not random; the fingerprint leaves
//! them out. Two keys are one if their fingerprints are equal: with `n` distinct keys, the
//! probability that any new key is taken for an earlier one is at most `n(n-1)/2 / 2^96 <
//! n² / 2^97` ([`collision_bound`]): 2.5e-15 for 20 million keys, 6.3e-12 for a billion, for
//! keys not crafted against xxh3 (which is not a cryptographic hash). The fingerprint 0 marks
//! an empty slot: a key whose fingerprint is 0 is stored as 1 (one more pair of values that
//! collide, a change of 2^-95 in the bound's terms).
//!
//! # The table
//!
//! Ordered linear probing: a fingerprint's home slot is `top * homes / 2^64` (`top` its high
//! 64 bits, `homes` the number of home slots: any size, not a power of two), which keeps the
//! order of the fingerprints. The slots hold the fingerprints in ascending order, each at or
//! after its home with no empty slot between (an insert shifts the larger ones of its run one
//! slot on), so a lookup walks from the home to the first empty or larger slot. The table
//! runs a few slots past the last home, and more when a run reaches its end, instead of
//! wrapping around.
//!
//! It grows by a quarter when it is 85 % full (so it is 68 % to 85 % full: 14 to 18 bytes a
//! key), in place. The vector is extended first (glibc's `realloc` moves a large block's pages
//! with `mremap`, without copying them or holding both); every fingerprint is packed to the
//! end; then each is moved back down to its new home or just after the one before. A
//! fingerprint's new place is never before its old one nor after its packed one, so each pass
//! reads a slot before it overwrites it, and both go through memory in order. The peak memory
//! is the new table, not the old and the new together (hashbrown's doubling, which huniq uses,
//! holds both: 1.5 times the new table).
//!
//! The new length is known before anything moves, so an allocation that fails leaves the
//! table as it was. The slots hold `homes` before and `homes' = r·homes` after. The layout is
//! the one that placing the fingerprints in order, each at its home or just after the one
//! before, gives, so the last one lands at the largest `home(j) + (n-1-j)` over the `n`
//! fingerprints (`j` from 0). With `t` a fingerprint's high 64 bits over 2^64, its old home is
//! `⌊t·homes⌋`, so its new one, `⌊t·homes'⌋`, is below `r·(old home + 1)`: the last one lands
//! below `r` times (the largest old `home(j) + (n-1-j)`, plus one): `r` times the slots up to
//! the last one. So `⌈r · (the last one's old place + 1)⌉` slots are enough (and `homes'` plus
//! the tail at least). Not `r` times the old length: the slots past the last home would then
//! grow by `r` at every growth, not with the homes.
//!
//! A table larger than the caches costs a cache miss per new key, at its home slot:
//! [`ExactSet::insert_many`] reads the home slots of 16 keys before it inserts them, so that
//! their misses overlap.
//!
//! An allocation that fails is a [`GrowError`]: the set keeps every key it held and says how
//! many, and the command ends with one line and status 2.

use std::fmt;

use seen::hash::Hash128;

/// A slot: a fingerprint's high, middle and low 32 bits; all zero when empty.
type Slot = [u32; 3];

const EMPTY: Slot = [0; 3];

/// Hashes whose home slots [`ExactSet::insert_many`] reads before it inserts them.
const GROUP: usize = 16;

/// Home slots of the first table.
const INITIAL_HOMES: usize = 1 << 10;

/// The table grows to `homes * GROW_NUM / GROW_DEN` when it holds `homes * LOAD_NUM /
/// LOAD_DEN` keys.
const GROW_NUM: usize = 5;
const GROW_DEN: usize = 4;
const LOAD_NUM: usize = 85;
const LOAD_DEN: usize = 100;

/// The set: 96-bit fingerprints of keys, in ascending order (module docs).
#[derive(Debug, Default)]
pub(super) struct ExactSet {
    /// `homes` home slots and the slots after them; empty before the first insert.
    slots: Vec<Slot>,
    homes: usize,
    /// The fingerprints held, and how many the table holds before it grows.
    len: usize,
    limit: usize,
}

/// An allocation the set needed and could not get.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct GrowError {
    /// The keys held, and the bytes they take.
    pub(super) keys: usize,
    pub(super) bytes: usize,
    /// The bytes the table could not grow to.
    pub(super) wanted: usize,
}

impl fmt::Display for GrowError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "out of memory: --exact holds {} keys in {} MiB and cannot grow to {} MiB (without \
             --exact, a filter's memory is bounded)",
            self.keys,
            mib(self.bytes),
            mib(self.wanted)
        )
    }
}

/// `bytes` in MiB, one decimal.
fn mib(bytes: usize) -> String {
    format!("{:.1}", bytes as f64 / f64::from(1 << 20))
}

/// The probability that, among `keys` distinct keys, any two have one fingerprint (a new key
/// is then dropped as a duplicate): at most the pairs over 2^96 (module docs).
pub(super) fn collision_bound(keys: usize) -> f64 {
    let n = keys as f64;
    (n * (n - 1.0) / 2.0 * 2f64.powi(-96)).max(0.0)
}

/// The 96-bit fingerprint of `hash` (module docs), never 0.
fn fingerprint(hash: Hash128) -> u128 {
    let fp = (u128::from(hash.h1) << 32) | u128::from(hash.h2 as u32);
    fp.max(1)
}

fn to_slot(fp: u128) -> Slot {
    [(fp >> 64) as u32, (fp >> 32) as u32, fp as u32]
}

fn of_slot(slot: Slot) -> u128 {
    (u128::from(slot[0]) << 64) | (u128::from(slot[1]) << 32) | u128::from(slot[2])
}

/// The home of `fp` among `homes` home slots: its high 64 bits scaled (order-keeping).
fn home(fp: u128, homes: usize) -> usize {
    (((fp >> 32) * homes as u128) >> 64) as usize
}

/// Slots past the last home in a table of `homes` (a run that passes them adds more).
fn tail(homes: usize) -> usize {
    64 + homes / 1024
}

/// Where a lookup of `fp` stopped.
enum Probe {
    Found,
    /// Not held: `fp` belongs at this slot (empty, larger, or one past the end).
    Absent(usize),
}

impl ExactSet {
    /// The number of keys held.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// The bytes the table takes (its allocation).
    pub(super) fn memory_bytes(&self) -> usize {
        self.slots.capacity() * size_of::<Slot>()
    }

    /// Whether a key with this hash is held (or one with the same fingerprint). The command
    /// only inserts; the tests look up.
    #[cfg(test)]
    pub(super) fn contains(&self, hash: Hash128) -> bool {
        matches!(self.probe(fingerprint(hash)), Probe::Found)
    }

    /// Adds the key with this hash; returns whether it was new (false: it, or a key with the
    /// same fingerprint, was held).
    ///
    /// # Errors
    ///
    /// When the table must grow (or run past its end) and the allocation fails; the set then
    /// holds the keys it held.
    pub(super) fn insert(&mut self, hash: Hash128) -> Result<bool, GrowError> {
        let fp = fingerprint(hash);
        let mut at = match self.probe(fp) {
            Probe::Found => return Ok(false),
            Probe::Absent(at) => at,
        };
        if self.len >= self.limit {
            self.grow()?;
            at = match self.probe(fp) {
                Probe::Absent(at) => at,
                Probe::Found => unreachable!("growing keeps the same fingerprints"),
            };
        }
        // The run from `at` ends at the first empty slot: shift it one slot on.
        let end = match self.slots[at..].iter().position(|s| *s == EMPTY) {
            Some(i) => at + i,
            None => {
                let end = self.slots.len();
                self.extend(1)?;
                end
            }
        };
        self.slots.copy_within(at..end, at + 1);
        self.slots[at] = to_slot(fp);
        self.len += 1;
        Ok(true)
    }

    /// [`insert`](Self::insert) of each hash in order, appending whether each was new to
    /// `new`. Reads the home slots of a group of hashes before inserting them, so that their
    /// cache misses overlap instead of following one another.
    ///
    /// # Errors
    ///
    /// As `insert`; `new` then holds the answers of the hashes before the one that failed.
    pub(super) fn insert_many(
        &mut self,
        hashes: impl IntoIterator<Item = Hash128>,
        new: &mut Vec<bool>,
    ) -> Result<(), GrowError> {
        let mut hashes = hashes.into_iter().peekable();
        let mut group = [Hash128 { h1: 0, h2: 0 }; GROUP];
        while hashes.peek().is_some() {
            let mut len = 0;
            for (slot, hash) in group.iter_mut().zip(&mut hashes) {
                *slot = hash;
                len += 1;
            }
            let group = &group[..len];
            if self.homes > 0 {
                let mut touched = 0;
                for hash in group {
                    let at = home(fingerprint(*hash), self.homes);
                    touched ^= self.slots[at][0];
                }
                std::hint::black_box(touched);
            }
            for hash in group {
                new.push(self.insert(*hash)?);
            }
        }
        Ok(())
    }

    fn probe(&self, fp: u128) -> Probe {
        if self.homes == 0 {
            return Probe::Absent(0);
        }
        let mut at = home(fp, self.homes);
        while let Some(&slot) = self.slots.get(at) {
            if slot == EMPTY {
                break;
            }
            let held = of_slot(slot);
            if held == fp {
                return Probe::Found;
            }
            if held > fp {
                break;
            }
            at += 1;
        }
        Probe::Absent(at)
    }

    /// The error of a failed allocation of `more` slots.
    fn failure(&self, more: usize) -> GrowError {
        GrowError {
            keys: self.len,
            bytes: self.memory_bytes(),
            wanted: (self.slots.len().saturating_add(more)).saturating_mul(size_of::<Slot>()),
        }
    }

    /// Adds `more` empty slots at the end (at least that many, so that a run reaching the end
    /// does not reallocate on every insert).
    fn extend(&mut self, more: usize) -> Result<(), GrowError> {
        let more = more.max(tail(self.homes));
        self.slots
            .try_reserve_exact(more)
            .map_err(|_| self.failure(more))?;
        self.slots.resize(self.slots.len() + more, EMPTY);
        Ok(())
    }

    /// Grows the table in place (module docs): more home slots, each fingerprint moved to
    /// its new place. Allocates first: on failure the table is as it was.
    fn grow(&mut self) -> Result<(), GrowError> {
        let homes = if self.homes == 0 {
            INITIAL_HOMES
        } else {
            scale(self.homes, GROW_NUM, GROW_DEN)
        };
        // Room for every fingerprint at its new place (the walk below), with `r = homes /
        // self.homes`: a fingerprint's new home is below `r` times its old home plus one,
        // and the last one lands below `r` times the old place of the last one, plus one
        // (module docs).
        let old = self.slots.len();
        let used = self
            .slots
            .iter()
            .rposition(|s| *s != EMPTY)
            .map_or(0, |i| i + 1);
        let total = (homes + tail(homes))
            .max((used as u128 * homes as u128).div_ceil(self.homes.max(1) as u128) as usize)
            .max(old);
        let more = total - old;
        self.slots
            .try_reserve_exact(more)
            .map_err(|_| self.failure(more))?;
        self.slots.resize(total, EMPTY);
        self.homes = homes;
        self.limit = scale(homes, LOAD_NUM, LOAD_DEN);
        // Pack every fingerprint to the end, in order (each moves on, or stays).
        let mut to = total;
        for from in (0..old).rev() {
            let slot = self.slots[from];
            if slot != EMPTY {
                to -= 1;
                self.slots[from] = EMPTY;
                self.slots[to] = slot;
            }
        }
        // Move each back to its home, or just after the one before: never after its packed
        // place (the length above leaves room), so the slot written was read.
        let mut next = 0;
        for from in to..total {
            let slot = self.slots[from];
            let at = home(of_slot(slot), homes).max(next);
            assert!(at <= from, "slot {from} would move on to {at}");
            self.slots[from] = EMPTY;
            self.slots[at] = slot;
            next = at + 1;
        }
        Ok(())
    }
}

/// `x * num / den`, rounded down.
fn scale(x: usize, num: usize, den: usize) -> usize {
    (x as u128 * num as u128 / den as u128) as usize
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use proptest::prelude::*;

    use super::*;

    /// A hash whose fingerprint is `fp` (96 bits): `h1` its high 64 bits, `h2`'s low 32 bits
    /// the rest, `h2`'s high half arbitrary (the shard's bits, not part of the fingerprint).
    fn hash_of(fp: u128, shard_bits: u32) -> Hash128 {
        Hash128 {
            h1: (fp >> 32) as u64,
            h2: (u64::from(shard_bits) << 32) | u64::from(fp as u32),
        }
    }

    /// The module's invariants: fingerprints in ascending order, each at or after its home
    /// with no empty slot between, `len` of them.
    fn check(set: &ExactSet) {
        let mut last = 0u128;
        let mut held = 0;
        for (i, &slot) in set.slots.iter().enumerate() {
            if slot == EMPTY {
                continue;
            }
            let fp = of_slot(slot);
            assert!(fp > last, "slot {i} out of order");
            last = fp;
            let home = home(fp, set.homes);
            assert!(home <= i, "slot {i} before its home {home}");
            assert!(
                set.slots[home..i].iter().all(|s| *s != EMPTY),
                "an empty slot between slot {i} and its home {home}"
            );
            held += 1;
        }
        assert_eq!(held, set.len);
    }

    /// xorshift64*: fixed pseudo-random 64-bit values.
    fn random(state: &mut u64) -> u64 {
        *state ^= *state >> 12;
        *state ^= *state << 25;
        *state ^= *state >> 27;
        state.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    #[test]
    fn many_keys_answer_as_a_hash_set_of_their_fingerprints() {
        let mut set = ExactSet::default();
        let mut reference = HashSet::new();
        let mut state = 7;
        let mut hashes = Vec::new();
        for i in 0..300_000 {
            // One in four a repeat of an earlier key.
            let hash = if i > 0 && random(&mut state).is_multiple_of(4) {
                hashes[random(&mut state) as usize % hashes.len()]
            } else {
                let h = Hash128 {
                    h1: random(&mut state),
                    h2: random(&mut state),
                };
                hashes.push(h);
                h
            };
            let fp = (u128::from(hash.h1) << 32) | u128::from(hash.h2 as u32);
            assert_eq!(set.insert(hash), Ok(reference.insert(fp)), "insert {i}");
        }
        check(&set);
        assert_eq!(set.len(), reference.len());
        for hash in &hashes {
            assert!(set.contains(*hash));
        }
        for _ in 0..100_000 {
            let absent = Hash128 {
                h1: random(&mut state),
                h2: random(&mut state),
            };
            assert!(!set.contains(absent));
        }
    }

    #[test]
    fn growth_keeps_every_key_and_at_most_18_bytes_a_key() {
        let mut set = ExactSet::default();
        let mut state = 11;
        let mut hashes = Vec::new();
        let mut grown = 0;
        for _ in 0..1_000_000 {
            let hash = Hash128 {
                h1: random(&mut state),
                h2: random(&mut state),
            };
            let homes = set.homes;
            assert_eq!(set.insert(hash), Ok(true));
            if set.homes != homes {
                grown += 1;
                // Right after a growth: every key held so far is still found, and the table
                // runs no further past its last home than a new one would.
                check(&set);
                assert_eq!(set.slots.len(), set.homes + tail(set.homes));
                assert!(hashes.iter().all(|h| set.contains(*h)));
            }
            hashes.push(hash);
        }
        // From 1,024 homes by 5/4 at a time to about 1M / 0.85.
        assert!(grown >= 25, "grew {grown} times");
        assert_eq!(set.len(), 1_000_000);
        let per_key = set.memory_bytes() as f64 / set.len() as f64;
        // At least 12 / 0.85, at most 12 / 0.68, plus the tail past the last home.
        assert!((14.0..18.0).contains(&per_key), "{per_key} bytes a key");
        assert!(hashes.iter().all(|h| set.contains(*h)));
    }

    #[test]
    fn the_zero_fingerprint_is_a_key_not_an_empty_slot() {
        let mut set = ExactSet::default();
        let zero = hash_of(0, 5);
        assert!(!set.contains(zero));
        assert_eq!(set.insert(zero), Ok(true));
        assert!(set.contains(zero));
        assert_eq!(set.insert(zero), Ok(false));
        // It is stored as 1: the key whose fingerprint is 1 is taken for it (the bound's
        // 2^-95 term), and nothing else is.
        assert!(set.contains(hash_of(1, 0)));
        assert!(!set.contains(hash_of(2, 0)));
        assert!(!set.contains(hash_of(1 << 32, 0)));
        // Still held after growing past it.
        let mut state = 3;
        for _ in 0..10_000 {
            let _ = set.insert(Hash128 {
                h1: random(&mut state),
                h2: random(&mut state),
            });
        }
        check(&set);
        assert!(set.contains(zero));
        assert_eq!(set.insert(zero), Ok(false));
    }

    #[test]
    fn the_shard_bits_are_not_part_of_the_fingerprint() {
        let mut set = ExactSet::default();
        assert_eq!(set.insert(hash_of(12345, 0)), Ok(true));
        assert_eq!(set.insert(hash_of(12345, u32::MAX)), Ok(false));
        // Keys of one shard share the high bits of `h2`: their homes still spread over the
        // whole table.
        let mut state = 5;
        for _ in 0..100_000 {
            let fp = (u128::from(random(&mut state)) << 32) | u128::from(random(&mut state) as u32);
            let _ = set.insert(hash_of(fp, 7));
        }
        let half = set.homes / 2;
        let low = set.slots[..half].iter().filter(|s| **s != EMPTY).count();
        assert!(
            (0.45..0.55).contains(&(low as f64 / set.len() as f64)),
            "{low} of {} in the first half",
            set.len()
        );
    }

    #[test]
    fn runs_past_the_last_home_extend_the_table() {
        // Every fingerprint's home is the last home slot: one run, longer than the tail.
        let mut set = ExactSet::default();
        let top = u128::from(u64::MAX) << 32;
        for i in 0..5_000u128 {
            assert_eq!(set.insert(hash_of(top | i, 0)), Ok(true), "{i}");
        }
        check(&set);
        for i in (0..5_000u128).rev() {
            assert_eq!(set.insert(hash_of(top | i, 0)), Ok(false), "{i}");
        }
        // And keys from everywhere else after them.
        let mut state = 9;
        for _ in 0..20_000 {
            let _ = set.insert(Hash128 {
                h1: random(&mut state) >> 1,
                h2: random(&mut state),
            });
        }
        check(&set);
        assert!((0..5_000u128).all(|i| set.contains(hash_of(top | i, 0))));
    }

    #[test]
    fn a_growth_that_cannot_be_allocated_keeps_the_set() {
        let mut set = ExactSet::default();
        for i in 1..=100u128 {
            assert_eq!(set.insert(hash_of(i << 40, 0)), Ok(true));
        }
        // A table whose next growth asks for more than the address space (its slots are
        // the same, its home count is made absurd).
        set.homes = usize::MAX / 16;
        let before = set.slots.clone();
        set.len = scale(set.homes, LOAD_NUM, LOAD_DEN);
        set.limit = set.len;
        let err = set
            .insert(hash_of(u128::MAX >> 33, 0))
            .expect_err("no such allocation");
        assert_eq!(err.keys, set.len);
        assert!(err.wanted > err.bytes);
        assert!(
            err.to_string().starts_with(&format!(
                "out of memory: --exact holds {} keys in ",
                set.len
            )),
            "{err}"
        );
        assert_eq!(set.slots, before);
        assert_eq!(set.homes, usize::MAX / 16);
    }

    #[test]
    fn the_collision_bound_is_the_pairs_over_2_to_the_96() {
        assert_eq!(collision_bound(0), 0.0);
        assert_eq!(collision_bound(1), 0.0);
        assert_eq!(collision_bound(2), 2f64.powi(-96));
        let twenty_million = collision_bound(20_000_000);
        assert!(
            (2.4e-15..2.6e-15).contains(&twenty_million),
            "{twenty_million}"
        );
        let billion = collision_bound(1_000_000_000);
        assert!((6.2e-12..6.4e-12).contains(&billion), "{billion}");
    }

    proptest! {
        /// Any sequence of inserts and lookups answers as a `HashSet` of the fingerprints:
        /// values drawn from a few clusters (the first and last homes, the middle) so that
        /// runs collide, shift, cross the end and grow.
        #[test]
        fn answers_as_a_hash_set(ops in prop::collection::vec(
            (any::<bool>(), 0..4u8, 0..400u64, any::<u32>()), 1..3_000)
        ) {
            let mut set = ExactSet::default();
            let mut reference = HashSet::new();
            for (insert, cluster, offset, low) in ops {
                let h1 = match cluster {
                    0 => offset,
                    1 => u64::MAX - offset,
                    2 => (1 << 63) + offset * (1 << 40),
                    _ => offset.wrapping_mul(0x9e37_79b9_7f4a_7c15),
                };
                // Few low values too, so that equal fingerprints recur.
                let hash = Hash128 { h1, h2: u64::from(low % 3) };
                let fp = fingerprint(hash);
                if insert {
                    prop_assert_eq!(set.insert(hash), Ok(reference.insert(fp)));
                } else {
                    prop_assert_eq!(set.contains(hash), reference.contains(&fp));
                }
            }
            check(&set);
            prop_assert_eq!(set.len(), reference.len());
        }
    }
}
