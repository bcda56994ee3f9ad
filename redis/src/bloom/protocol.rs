//! The requests of a shared Bloom filter and the reading of their replies, free of I/O: where
//! an item's bits are, the read, the write, the count and the creation of the shards. The
//! drivers in `mod.rs` send them.

use redis::{Cmd, Value};
use seen::hash::Hash128;
use seen::{BlockBits, BloomInfo};

use super::SharedBloomFilter;
use crate::Error;
use crate::guard::{self, Id};
use crate::server::Batch;

/// At most this many `GET`s or `SET`s in one `BITFIELD`: the server parses a command's
/// arguments before running it, and a few hundred keep each command short.
const MAX_FIELDS: usize = 512;

/// The write of a batch: where each item's old values are, and each command's shard.
pub(super) struct Write {
    /// Per item written, where its old values are.
    pub(super) written: Vec<Written>,
    /// Per command, the shard it writes (its first value is the shard's guard).
    pub(super) shards: Vec<usize>,
}

/// Where one item's bits are on the server.
pub(super) struct Located {
    pub(super) shard: usize,
    /// The index of the block's first word in its shard.
    pub(super) word: u64,
    pub(super) bits: BlockBits,
}

/// Where the old values of one item's written bits are in a write's replies.
pub(super) struct Written {
    pub(super) item: usize,
    /// The reply (command) index.
    pub(super) reply: usize,
    /// The item's first field in that reply, and how many it has.
    pub(super) first: usize,
    pub(super) fields: usize,
}

/// The read of a batch: for each item, where its words' values are in the replies.
pub(super) struct Read {
    pub(super) at: Places,
    /// Per command whose first value is a shard's guard: its index and the shard.
    pub(super) guards: Vec<(usize, usize)>,
}

/// Where each item's words are in a read's replies.
pub(super) enum Places {
    /// A word block: per item, per word of its block with a bit, (reply index, position in
    /// the reply), in `BITFIELD_RO` commands of many items.
    Fields(Vec<Vec<(usize, usize)>>),
    /// A line block: per item, the reply index of the `GETRANGE` of its whole block.
    Ranges(Vec<usize>),
}

impl SharedBloomFilter {
    /// The request that counts the bits set of every shard (`BITCOUNT` of its bits, not its
    /// guard), each followed by the read of its guard: a guard there after the count means the
    /// shard was there during it (a lost shard is never made again with its guard).
    pub(super) fn count_batch(&self) -> Batch {
        let mut batch = Batch::default();
        for (s, key) in self.keys.iter().enumerate() {
            let k = batch.key(key);
            guard::count(&mut batch, k, key, self.guard_byte(s));
        }
        batch
    }

    /// What the filter is and holds ([`BloomInfo`], as the local filter's `info()`), from the
    /// bits set on the server: one request, a `BITCOUNT` per shard (it reads every byte of the
    /// shard on the server: call it for monitoring, not per item).
    pub(super) fn after_count(&self, replies: &[Value]) -> Result<BloomInfo, Error> {
        let mut set = 0u64;
        for (s, pair) in replies.chunks(2).enumerate() {
            set += guard::counted(&self.name, &self.keys[s], self.id, pair)?;
        }
        Ok(BloomInfo::from_bits_set(
            "SharedBloomFilter",
            &self.sizing,
            set,
        ))
    }

    pub(super) fn locate(&self, hash: Hash128) -> Located {
        let bits = BlockBits::new(hash, &self.sizing);
        let shard = bits.block() / self.blocks_per_shard;
        let word = (bits.block() - shard * self.blocks_per_shard) * self.words_per_block();
        Located {
            shard: shard as usize,
            word,
            bits,
        }
    }

    /// The byte after shard `s`'s bits: its guard ([`guard`](crate::guard)).
    pub(super) fn guard_byte(&self, s: usize) -> u64 {
        self.shard_words(s) * 8
    }

    /// The creation of every shard, empty, with its guard ([`guard::CREATE`]): the string
    /// takes its full length at once, so inserts never reallocate it.
    pub(super) fn create_batch(&self, id: Id) -> Batch {
        let mut batch = Batch::default();
        guard::create(
            &mut batch,
            id,
            (0..self.keys.len()).map(|s| (self.keys[s].clone(), self.guard_byte(s))),
        );
        batch
    }

    /// The read of `items`: for a word block, per shard touched, `BITFIELD_RO` commands of
    /// the shard's guard and up to [`MAX_FIELDS`] `GET i64` of the items' words; for a line
    /// block, [`read_ranges`](Self::read_ranges).
    pub(super) fn read_batch(&self, items: &[Located]) -> (Batch, Read) {
        if self.words_per_block() > 1 {
            return self.read_ranges(items);
        }
        // Per shard: its GETs so far, cut into commands of MAX_FIELDS.
        let mut per_shard: Vec<Vec<Vec<u64>>> = vec![Vec::new(); self.keys.len()];
        let mut at = Vec::with_capacity(items.len());
        for item in items {
            let gets = &mut per_shard[item.shard];
            let mut mine = Vec::new();
            for (j, mask) in item.bits.masks().iter().enumerate() {
                if *mask == 0 {
                    continue;
                }
                if gets.last().is_none_or(|cmd| cmd.len() == MAX_FIELDS) {
                    gets.push(Vec::new());
                }
                let cmd = gets.len() - 1;
                let last = gets.last_mut().expect("pushed above");
                // After the guard's value.
                mine.push((cmd, last.len() + 1));
                last.push((item.word + j as u64) * 64);
            }
            at.push((item.shard, mine));
        }
        let mut batch = Batch::default();
        let mut first_cmd = vec![0; self.keys.len()];
        let mut guards = Vec::new();
        for (s, gets) in per_shard.iter().enumerate() {
            if gets.is_empty() {
                continue;
            }
            let k = batch.key(&self.keys[s]);
            first_cmd[s] = batch.len();
            for offsets in gets {
                let mut cmd = redis::cmd("BITFIELD_RO");
                cmd.arg(&self.keys[s]);
                guard::get(&mut cmd, self.guard_byte(s));
                for offset in offsets {
                    cmd.arg("GET").arg("i64").arg(offset);
                }
                guards.push((batch.len(), s));
                batch.push_fields(k, cmd, offsets.len() + 1);
            }
        }
        let at = at
            .into_iter()
            .map(|(s, mine)| {
                mine.into_iter()
                    .map(|(cmd, pos)| (first_cmd[s] + cmd, pos))
                    .collect()
            })
            .collect();
        (
            batch,
            Read {
                at: Places::Fields(at),
                guards,
            },
        )
    }

    /// The read of line blocks: per item a `GETRANGE` of its block's bytes, and per shard
    /// touched, after its items' reads, a `BITFIELD_RO` of its guard alone (a guard there
    /// after the reads means the shard was there during them: a lost shard is never made
    /// again with its guard).
    ///
    /// One command and one reply per item, where `BITFIELD_RO` takes a field and a reply
    /// integer per word with a bit (about 5 of a line's 8 at 1%): the server's time and the
    /// client's parsing per item are about an `EXISTS`'s (`benches/redis.rs`, `line
    /// contains`).
    fn read_ranges(&self, items: &[Located]) -> (Batch, Read) {
        let bytes = self.words_per_block() * 8;
        let mut per_shard: Vec<Vec<usize>> = vec![Vec::new(); self.keys.len()];
        for (i, item) in items.iter().enumerate() {
            per_shard[item.shard].push(i);
        }
        let mut batch = Batch::default();
        let mut at = vec![0; items.len()];
        let mut guards = Vec::new();
        for (s, mine) in per_shard.iter().enumerate() {
            if mine.is_empty() {
                continue;
            }
            let k = batch.key(&self.keys[s]);
            for &i in mine {
                let first = items[i].word * 8;
                let mut cmd = redis::cmd("GETRANGE");
                cmd.arg(&self.keys[s]).arg(first).arg(first + bytes - 1);
                at[i] = batch.len();
                batch.push(k, cmd);
            }
            let mut cmd = redis::cmd("BITFIELD_RO");
            cmd.arg(&self.keys[s]);
            guard::get(&mut cmd, self.guard_byte(s));
            guards.push((batch.len(), s));
            batch.push_fields(k, cmd, 1);
        }
        (
            batch,
            Read {
                at: Places::Ranges(at),
                guards,
            },
        )
    }

    /// `Ok` if the first value of every command in `guards` (its index and shard), the
    /// shard's guard, says the shard is there.
    pub(super) fn check_guards(
        &self,
        guards: impl IntoIterator<Item = (usize, usize)>,
        replies: &[Value],
    ) -> Result<(), Error> {
        for (i, s) in guards {
            let guard = match replies.get(i) {
                Some(Value::Array(values)) => values.first(),
                _ => None,
            };
            guard::check(&self.name, &self.keys[s], self.id, guard)?;
        }
        Ok(())
    }

    /// Each item's words (as many as its block has; a word with no bit of the item may read
    /// as 0).
    pub(super) fn after_read(
        &self,
        items: &[Located],
        read: &Read,
        replies: &[Value],
    ) -> Result<Vec<[u64; 8]>, Error> {
        self.check_guards(read.guards.iter().copied(), replies)?;
        let mut words = Vec::with_capacity(items.len());
        match &read.at {
            Places::Fields(at) => {
                for (item, places) in items.iter().zip(at) {
                    let mut mine = [0u64; 8];
                    let mut places = places.iter();
                    for (j, mask) in item.bits.masks().iter().enumerate() {
                        if *mask == 0 {
                            continue;
                        }
                        let &(cmd, pos) = places.next().expect("one place per word with a bit");
                        let value = match &replies[cmd] {
                            Value::Array(values) => values.get(pos),
                            _ => None,
                        };
                        let Some(Value::Int(value)) = value else {
                            return Err(Error::corrupt(
                                &self.keys[item.shard],
                                format!("BITFIELD_RO answered {:?}", replies[cmd]),
                            ));
                        };
                        mine[j] = *value as u64;
                    }
                    words.push(mine);
                }
            }
            Places::Ranges(at) => {
                let bytes = self.words_per_block() as usize * 8;
                for (item, &cmd) in items.iter().zip(at) {
                    // The shard is there (its guard, read after): a block of another length
                    // is no block of it.
                    let block = match replies.get(cmd) {
                        Some(Value::BulkString(b)) if b.len() == bytes => b,
                        other => {
                            return Err(Error::corrupt(
                                &self.keys[item.shard],
                                format!("GETRANGE of a {bytes}-byte block answered {other:?}"),
                            ));
                        }
                    };
                    let mut mine = [0u64; 8];
                    for (word, chunk) in mine.iter_mut().zip(block.chunks_exact(8)) {
                        // BITFIELD's offset 0 is the first byte's high bit: big-endian.
                        *word = u64::from_be_bytes(chunk.try_into().expect("8 bytes"));
                    }
                    words.push(mine);
                }
            }
        }
        Ok(words)
    }

    /// The write of the items whose bits `words` do not all hold: per shard, `BITFIELD`
    /// commands of the shard's guard (`GET u8`) and `SET u1 offset 1` fields for the bits that
    /// were unset, up to [`MAX_FIELDS`] per command and every item's fields in one command (so
    /// that its bits are set atomically). Returns the batch and where each item's old values
    /// are.
    ///
    /// Many items per command rather than one each (measured with `benches/redis.rs`): the
    /// client's instructions per new item fell from 16.8k to 10.2k (callgrind, 20k ids), its
    /// CPU from 1.95 to 1.15 us per item (200k ids), with fewer commands to build, copy and
    /// parse; the server's time in `BITFIELD` per item did not grow.
    pub(super) fn write_batch(&self, items: &[Located], words: &[[u64; 8]]) -> (Batch, Write) {
        let mut batch = Batch::default();
        let mut written = Vec::new();
        // Per shard: its open command (fields so far, the guard's included) and its index
        // among `cmds`.
        let mut open: Vec<Option<(usize, usize)>> = vec![None; self.keys.len()];
        // Per command: its shard, the command, and its fields.
        let mut cmds: Vec<(usize, Cmd, usize)> = Vec::new();
        for (i, (item, words)) in items.iter().zip(words).enumerate() {
            let missing: u32 = item
                .bits
                .masks()
                .iter()
                .zip(words)
                .map(|(m, w)| (m & !w).count_ones())
                .sum();
            if missing == 0 {
                continue;
            }
            let missing = missing as usize;
            debug_assert!(missing < MAX_FIELDS);
            let (cmd, first) = match open[item.shard] {
                Some((cmd, fields)) if fields + missing <= MAX_FIELDS => (cmd, fields),
                _ => {
                    let mut c = redis::cmd("BITFIELD");
                    c.arg(&self.keys[item.shard]);
                    guard::get(&mut c, self.guard_byte(item.shard));
                    cmds.push((item.shard, c, 1));
                    (cmds.len() - 1, 1)
                }
            };
            open[item.shard] = Some((cmd, first + missing));
            cmds[cmd].2 = first + missing;
            let c = &mut cmds[cmd].1;
            for (j, mask) in item.bits.masks().iter().enumerate() {
                let mut bits = mask & !words[j];
                while bits != 0 {
                    let bit = bits.trailing_zeros();
                    bits &= bits - 1;
                    let offset = (item.word + j as u64) * 64 + u64::from(63 - bit);
                    c.arg("SET").arg("u1").arg(offset).arg(1);
                }
            }
            written.push(Written {
                item: i,
                reply: cmd,
                first,
                fields: missing,
            });
        }
        let mut shards = Vec::with_capacity(cmds.len());
        for (shard, cmd, fields) in cmds {
            let k = batch.key(&self.keys[shard]);
            batch.push_fields(k, cmd, fields);
            shards.push(shard);
        }
        (batch, Write { written, shards })
    }

    /// The answers: an item is new if its write found one of its bits unset. A shard whose
    /// guard was gone answers nothing: the write created its key again, without the guard, and
    /// every later command on it says so too.
    pub(super) fn after_write(
        &self,
        items: &[Located],
        write: &Write,
        replies: &[Value],
    ) -> Result<Vec<bool>, Error> {
        self.check_guards(write.shards.iter().copied().enumerate(), replies)?;
        let mut new = vec![false; items.len()];
        for w in &write.written {
            let old = match replies.get(w.reply) {
                Some(Value::Array(old)) => old.get(w.first..w.first + w.fields),
                _ => None,
            };
            let Some(old) = old else {
                return Err(Error::corrupt(
                    &self.keys[items[w.item].shard],
                    format!("BITFIELD answered {:?}", replies.get(w.reply)),
                ));
            };
            // Each old value of a `SET u1` is a bit: another value is no answer.
            for v in old {
                match v {
                    Value::Int(0) => new[w.item] = true,
                    Value::Int(1) => {}
                    other => {
                        return Err(Error::corrupt(
                            &self.keys[items[w.item].shard],
                            format!("BITFIELD SET u1 answered {other:?}"),
                        ));
                    }
                }
            }
        }
        Ok(new)
    }

    pub(super) fn present(items: &[Located], words: &[[u64; 8]]) -> Vec<bool> {
        items
            .iter()
            .zip(words)
            .map(|(item, words)| {
                item.bits
                    .masks()
                    .iter()
                    .zip(words)
                    .all(|(m, w)| w & m == *m)
            })
            .collect()
    }
}
