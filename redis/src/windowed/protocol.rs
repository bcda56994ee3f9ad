//! The requests of a shared windowed filter and the reading of their replies, free of I/O:
//! where an item's bits are, the read (with its ledger check) and the insert scripts.

use redis::Value;
use seen::BlockBits;
use seen::hash::Hash128;

use super::SharedWindowedBloomFilter;
use super::builder::ledger;
use super::scripts::{CHECK, INSERT};
use super::time::Now;
use crate::server::Batch;
use crate::{Error, guard, names};

/// At most this many `GET`s in one `BITFIELD_RO` of a read.
pub(super) const MAX_FIELDS: usize = 512;

/// At most this many items per script call: each call holds the server for its run, so a
/// large batch is cut into calls of a few hundred microseconds (still one pipeline).
pub(super) const ITEMS_PER_SCRIPT: usize = 256;

/// Where one item's bits are.
pub(super) struct Located {
    pub(super) shard: usize,
    /// The index of the block's first word in its shard.
    pub(super) word: u64,
    pub(super) bits: BlockBits,
}

/// The read of a batch.
pub(super) struct Read {
    /// The first generation read (the reads cover `first ..= now + 1`).
    pub(super) first: u64,
    /// Per item, per word of its block with a bit: (shard's command index for generation
    /// `first`, the stride between generations' commands, position in the reply).
    pub(super) at: Vec<Vec<(usize, usize, usize)>>,
    /// Per shard read, the index of its check ([`CHECK`]), the shard and its first generation.
    pub(super) checks: Vec<(usize, usize, u64)>,
}

/// What the read found of one item: per generation read, its words.
pub(super) type Words = Vec<[u64; 8]>;

impl SharedWindowedBloomFilter {
    pub(super) fn words_per_block(&self) -> u64 {
        u64::from(self.generation.layout.block_bits() / 64)
    }

    pub(super) fn locate(&self, hash: Hash128) -> Located {
        let bits = BlockBits::new(hash, &self.generation);
        let shard = bits.block() / self.blocks_per_shard;
        let word = (bits.block() - shard * self.blocks_per_shard) * self.words_per_block();
        Located {
            shard: shard as usize,
            word,
            bits,
        }
    }

    /// The byte after shard `s`'s bits in each generation: its guard ([`guard`](crate::guard)).
    pub(super) fn guard_byte(&self, s: usize) -> u64 {
        let first = s as u64 * self.blocks_per_shard;
        (self.generation.blocks - first).min(self.blocks_per_shard) * self.words_per_block() * 8
    }

    pub(super) fn ledger(&self, s: usize) -> String {
        ledger(&self.name, s)
    }

    pub(super) fn missing(&self, key: String) -> Error {
        Error::Missing {
            name: self.name.clone(),
            key,
        }
    }

    /// The read of `items` at `now`: `EXISTS` of the description, then per shard touched and
    /// per generation `now - n ..= now + 1`, `BITFIELD_RO ... GET i64` of the key's guard and
    /// the items' words.
    pub(super) fn read_batch(&self, items: &[Located], now: Now) -> (Batch, Read) {
        let first = now.generation.saturating_sub(u64::from(self.periods));
        let generations = (now.generation + 2 - first) as usize;
        // Per shard, the word offsets to read (the same in every generation).
        let mut offsets: Vec<Vec<u64>> = vec![Vec::new(); self.shards as usize];
        let mut places = Vec::with_capacity(items.len());
        for item in items {
            let mine: Vec<usize> = item
                .bits
                .masks()
                .iter()
                .enumerate()
                .filter(|(_, mask)| **mask != 0)
                .map(|(j, _)| {
                    let list = &mut offsets[item.shard];
                    list.push((item.word + j as u64) * 64);
                    list.len() - 1
                })
                .collect();
            places.push(mine);
        }
        let mut batch = Batch::default();
        let meta = names::meta(&self.name);
        let k = batch.key(&meta);
        batch.push(k, {
            let mut c = redis::cmd("EXISTS");
            c.arg(&meta);
            c
        });
        let mut first_cmd = vec![0; self.shards as usize];
        let mut checks = Vec::new();
        for (s, list) in offsets.iter().enumerate() {
            if list.is_empty() {
                continue;
            }
            first_cmd[s] = batch.len();
            let mut keys = Vec::with_capacity(generations + 1);
            for g in first..=now.generation + 1 {
                let key = self.key(s as u32, g);
                let k = batch.key(&key);
                for chunk in list.chunks(MAX_FIELDS) {
                    // The key's guard first: a key of another creation (left by one that
                    // was destroyed) reads as empty, not as this filter's bits.
                    let mut cmd = redis::cmd("BITFIELD_RO");
                    cmd.arg(&key);
                    guard::get(&mut cmd, self.guard_byte(s));
                    for offset in chunk {
                        cmd.arg("GET").arg("i64").arg(offset);
                    }
                    batch.push_fields(k, cmd, chunk.len() + 1);
                }
                keys.push(key);
            }
            // After the reads, on the same connection: a generation that read as empty must
            // not be one the ledger holds live (lost, not empty).
            let ledger = self.ledger(s);
            let mut args = vec![self.guard_byte(s).to_string().into_bytes()];
            args.extend((first..=now.generation + 1).map(|g| g.to_string().into_bytes()));
            args.push(self.id.bytes());
            keys.push(ledger);
            let k = batch.key(&keys[generations]);
            let names: Vec<&str> = keys.iter().map(String::as_str).collect();
            checks.push((batch.len(), s, first));
            batch.push_script(k, &CHECK, &names, &args);
        }
        let at = items
            .iter()
            .zip(places)
            .map(|(item, mine)| {
                let stride = offsets[item.shard].len().div_ceil(MAX_FIELDS);
                mine.into_iter()
                    .map(|i| {
                        (
                            first_cmd[item.shard] + i / MAX_FIELDS,
                            stride,
                            // After the guard's value.
                            i % MAX_FIELDS + 1,
                        )
                    })
                    .collect()
            })
            .collect();
        debug_assert!(generations >= 2);
        (batch, Read { first, at, checks })
    }

    /// Each item's words in each generation read.
    pub(super) fn after_read(
        &self,
        items: &[Located],
        read: &Read,
        now: Now,
        replies: &[Value],
    ) -> Result<Vec<Words>, Error> {
        match replies.first() {
            Some(Value::Int(1)) => {}
            Some(Value::Int(0)) => {
                return Err(Error::Missing {
                    name: self.name.clone(),
                    key: names::meta(&self.name),
                });
            }
            other => {
                return Err(Error::corrupt(
                    &names::meta(&self.name),
                    format!("EXISTS answered {other:?}"),
                ));
            }
        }
        for &(i, s, first) in &read.checks {
            match replies.get(i) {
                Some(Value::Int(0)) => {}
                Some(Value::Int(-2)) => return Err(self.missing(self.ledger(s))),
                Some(Value::Int(k)) if (1..=(now.generation + 2 - first) as i64).contains(k) => {
                    return Err(self.missing(self.key(s as u32, first + *k as u64 - 1)));
                }
                other => {
                    return Err(Error::corrupt(
                        &self.ledger(s),
                        format!("the read's check answered {other:?}"),
                    ));
                }
            }
        }
        let generations = (now.generation + 2 - read.first) as usize;
        let mut all = Vec::with_capacity(items.len());
        for (item, places) in items.iter().zip(&read.at) {
            let mut words = vec![[0u64; 8]; generations];
            let mut places = places.iter();
            for (j, mask) in item.bits.masks().iter().enumerate() {
                if *mask == 0 {
                    continue;
                }
                let &(cmd, stride, pos) = places.next().expect("one place per word with a bit");
                for (gi, words) in words.iter_mut().enumerate() {
                    let at = cmd + gi * stride;
                    words[j] = match replies.get(at) {
                        Some(Value::Array(values)) if !guard::holds(self.id, values.first()) => 0,
                        Some(Value::Array(values)) => match values.get(pos) {
                            Some(Value::Int(v)) => *v as u64,
                            other => {
                                let key = self.key(item.shard as u32, read.first + gi as u64);
                                return Err(Error::corrupt(
                                    &key,
                                    format!("BITFIELD_RO answered {other:?}"),
                                ));
                            }
                        },
                        other => {
                            let key = self.key(item.shard as u32, read.first + gi as u64);
                            return Err(Error::corrupt(
                                &key,
                                format!("BITFIELD_RO answered {other:?}"),
                            ));
                        }
                    };
                }
            }
            all.push(words);
        }
        Ok(all)
    }

    /// Whether some generation read holds every bit of the item.
    pub(super) fn found(item: &Located, words: &Words) -> bool {
        words.iter().any(|words| {
            item.bits
                .masks()
                .iter()
                .zip(words)
                .all(|(m, w)| w & m == *m)
        })
    }

    pub(super) fn all_found(items: &[Located], words: &[Words]) -> Vec<bool> {
        items
            .iter()
            .zip(words)
            .map(|(i, w)| Self::found(i, w))
            .collect()
    }

    /// The item's bits as string offsets, after their count.
    pub(super) fn offsets(item: &Located, out: &mut Vec<Vec<u8>>) {
        let count = out.len();
        out.push(Vec::new());
        for (j, mask) in item.bits.masks().iter().enumerate() {
            let mut bits = *mask;
            while bits != 0 {
                let bit = bits.trailing_zeros();
                bits &= bits - 1;
                let offset = (item.word + j as u64) * 64 + u64::from(63 - bit);
                out.push(offset.to_string().into_bytes());
            }
        }
        out[count] = (out.len() - count - 1).to_string().into_bytes();
    }

    /// The oldest generation a client in generation `g` keeps: one before its window's first
    /// (`g - n`), for a client one generation behind, whose window starts there. The insert
    /// script that creates `g`'s key deletes the older ones (and their ledger entries) that
    /// are also dead on the server's clock (its end `(f + n + 1)·P` a period and more behind
    /// the server's time), so that a replay of old records keeps no more generations than
    /// that, not every one whose expiry in real time is still ahead; and so that a handle
    /// whose clock is far ahead (a record with a wrong time) never deletes what a handle on
    /// the server's time still reads.
    pub(super) fn oldest_kept(&self, g: u64) -> u64 {
        g.saturating_sub(u64::from(self.periods) + 1)
    }

    /// The write of the items the read did not find: per shard, script calls over the keys of
    /// generations `now`, `now - 1` (if live) and `now + 1`. Returns the batch and, per
    /// command, its items.
    pub(super) fn write_batch(
        &self,
        items: &[Located],
        words: &[Words],
        now: Now,
    ) -> (Batch, Vec<Vec<usize>>) {
        let g = now.generation;
        // The generations the script reads besides `g`, as indices into the read.
        let mut others = Vec::with_capacity(2);
        if self.periods >= 1 && g >= 1 {
            others.push(g - 1);
        }
        others.push(g + 1);
        let mut per_shard: Vec<Vec<usize>> = vec![Vec::new(); self.shards as usize];
        for (i, (item, words)) in items.iter().zip(words).enumerate() {
            if !Self::found(item, words) {
                per_shard[item.shard].push(i);
            }
        }
        // The expiry: the end of the last period in which generation `g` is live, plus one.
        let end = u128::from(g + u64::from(self.periods) + 2) * u128::from(self.period_ns);
        let ttl_ms = (end.saturating_sub(now.nanos)).div_ceil(1_000_000).max(1);
        let mut batch = Batch::default();
        let mut whose = Vec::new();
        for (s, mine) in per_shard.iter().enumerate() {
            if mine.is_empty() {
                continue;
            }
            let write_key = self.key(s as u32, g);
            let other_keys: Vec<String> = others.iter().map(|&o| self.key(s as u32, o)).collect();
            let ledger = self.ledger(s);
            let mut keys: Vec<&str> = vec![&write_key];
            keys.extend(other_keys.iter().map(String::as_str));
            keys.push(&ledger);
            let k = batch.key(&write_key);
            for chunk in mine.chunks(ITEMS_PER_SCRIPT) {
                let mut args = vec![
                    ttl_ms.to_string().into_bytes(),
                    self.guard_byte(s).to_string().into_bytes(),
                    g.to_string().into_bytes(),
                ];
                args.extend(others.iter().map(|o| o.to_string().into_bytes()));
                args.push(self.oldest_kept(g).to_string().into_bytes());
                args.push((u64::from(self.periods) + 3).to_string().into_bytes());
                args.push((self.period_ns as f64 / 1e6).to_string().into_bytes());
                for &i in chunk {
                    // Every bit, whatever the read found: `g`'s key may have expired since,
                    // and a key made again must get the whole item; the script reads the
                    // same bits in the neighbours (bits are only set, so finding them all set
                    // there is finding set the ones the read found unset).
                    Self::offsets(&items[i], &mut args);
                }
                args.push(self.id.bytes());
                batch.push_script(k, &INSERT, &keys, &args);
                whose.push(chunk.to_vec());
            }
        }
        (batch, whose)
    }

    /// The answers: an item is new if its script said so.
    pub(super) fn after_write(
        &self,
        count: usize,
        whose: &[Vec<usize>],
        now: Now,
        items: &[Located],
        replies: &[Value],
    ) -> Result<Vec<bool>, Error> {
        let mut new = vec![false; count];
        for (mine, reply) in whose.iter().zip(replies) {
            let bad = || {
                let key = self.key(items[mine[0]].shard as u32, now.generation);
                Error::corrupt(&key, format!("the insert script answered {reply:?}"))
            };
            let Value::Array(answers) = reply else {
                return Err(bad());
            };
            let shard = items[mine[0]].shard;
            match answers.first() {
                Some(Value::Int(-2)) => return Err(self.missing(self.ledger(shard))),
                Some(Value::Int(-1)) => {
                    // Key `k` of the script: `g`, then its neighbours in `others`' order.
                    let mut generations = vec![now.generation];
                    if self.periods >= 1 && now.generation >= 1 {
                        generations.push(now.generation - 1);
                    }
                    generations.push(now.generation + 1);
                    let lost = match answers.get(1) {
                        Some(Value::Int(k)) => usize::try_from(*k - 1)
                            .ok()
                            .and_then(|k| generations.get(k)),
                        _ => None,
                    };
                    let Some(&lost) = lost else {
                        return Err(bad());
                    };
                    return Err(self.missing(self.key(shard as u32, lost)));
                }
                _ => {}
            }
            if answers.len() != mine.len() {
                return Err(bad());
            }
            for (&i, answer) in mine.iter().zip(answers) {
                new[i] = match answer {
                    Value::Int(1) => true,
                    Value::Int(0) => false,
                    _ => return Err(bad()),
                };
            }
        }
        Ok(new)
    }
}
