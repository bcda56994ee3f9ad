//! The requests of a shared map and the reading of their replies, free of I/O: where an item's
//! slot is, the batched `BITFIELD`s of inserts and lookups, and the forget script.

use std::sync::LazyLock;

use redis::Value;
use seen::MapSlot;
use seen::hash::Hash128;

use super::SharedOverwriteMap;
use crate::Error;
use crate::guard;
use crate::script::Lua;
use crate::server::Batch;

/// At most this many `SET`s or `GET`s of slots in one `BITFIELD` (as for the Bloom filter: the
/// server parses a command's arguments before running it).
pub(super) const MAX_FIELDS: usize = 512;

/// The compare-and-clear. Every value is a string: offsets are below 2^29 (exact in Lua's
/// doubles), and the fingerprint is compared as its 8 bytes, never as a number.
pub(super) static FORGET: LazyLock<Lua> = LazyLock::new(|| {
    Lua::new(
        "forget",
        r"-- KEYS[1]: a shard. ARGV[1]: the slot's first byte; ARGV[2]: the fingerprint,
-- 8 bytes big-endian; ARGV[3]: the guard's offset; ARGV[4]: the creation id.
-- Returns 1 if the slot held the fingerprint (now cleared), 0 if not, -1 if the shard is gone.
local g = tonumber(ARGV[3])
if redis.call('GETRANGE', KEYS[1], g, g + 7) ~= ARGV[4] then return -1 end
local at = tonumber(ARGV[1])
if redis.call('GETRANGE', KEYS[1], at, at + 7) ~= ARGV[2] then return 0 end
redis.call('SETRANGE', KEYS[1], at, '\0\0\0\0\0\0\0\0')
return 1",
    )
});

/// Where one item is on the server.
#[derive(Clone, Copy)]
pub(super) struct Located {
    pub(super) shard: usize,
    /// The slot's bit offset in its shard.
    pub(super) offset: u64,
    pub(super) fingerprint: u64,
}

/// Per item, where its answer is in the replies: (reply index, position in the reply).
pub(super) type Places = Vec<(usize, usize)>;

impl SharedOverwriteMap {
    /// The number of slots in shard `s`.
    pub(super) fn shard_slots(&self, s: usize) -> u64 {
        let first = s as u64 * self.slots_per_shard;
        (self.buckets - first).min(self.slots_per_shard)
    }

    /// The offset of shard `s`'s guard byte, in bytes.
    pub(super) fn guard_byte(&self, s: usize) -> u64 {
        self.shard_slots(s) * 8
    }

    pub(super) fn locate(&self, hash: Hash128) -> Located {
        let at = MapSlot::new(hash, self.buckets);
        let shard = at.slot() / self.slots_per_shard;
        Located {
            shard: shard as usize,
            offset: (at.slot() - shard * self.slots_per_shard) * 64,
            fingerprint: at.fingerprint(),
        }
    }

    /// One `BITFIELD` (`write`) or `BITFIELD_RO` per shard touched and 512 items, each reading
    /// the guard first; per item, where its slot's value is in the replies.
    pub(super) fn batch(&self, items: &[Located], write: bool) -> (Batch, Places) {
        let mut per_shard: Vec<Vec<Vec<usize>>> = vec![Vec::new(); self.keys.len()];
        let mut at = vec![(0, 0); items.len()];
        for (i, item) in items.iter().enumerate() {
            let cmds = &mut per_shard[item.shard];
            if cmds.last().is_none_or(|cmd| cmd.len() == MAX_FIELDS) {
                cmds.push(Vec::new());
            }
            let last = cmds.len() - 1;
            at[i] = (last, cmds[last].len() + 1); // after the guard's GET
            cmds[last].push(i);
        }
        let mut batch = Batch::default();
        let mut first_cmd = vec![0; self.keys.len()];
        for (s, cmds) in per_shard.iter().enumerate() {
            if cmds.is_empty() {
                continue;
            }
            let key = &self.keys[s];
            let k = batch.key(key);
            first_cmd[s] = batch.len();
            for members in cmds {
                let mut cmd = redis::cmd(if write { "BITFIELD" } else { "BITFIELD_RO" });
                cmd.arg(key);
                guard::get(&mut cmd, self.guard_byte(s));
                for &i in members {
                    let item = &items[i];
                    if write {
                        cmd.arg("SET")
                            .arg("i64")
                            .arg(item.offset)
                            .arg(item.fingerprint as i64);
                    } else {
                        cmd.arg("GET").arg("i64").arg(item.offset);
                    }
                }
                // The guard's value, then one per item.
                batch.push_fields(k, cmd, members.len() + 1);
            }
        }
        for (place, item) in at.iter_mut().zip(items) {
            place.0 += first_cmd[item.shard];
        }
        (batch, at)
    }

    /// Each item's slot value (the old one, for a write), checking every command's guard.
    pub(super) fn slot_values(
        &self,
        items: &[Located],
        at: &Places,
        replies: &[Value],
    ) -> Result<Vec<u64>, Error> {
        let what = |shard: usize, reply: &Value| {
            Error::corrupt(&self.keys[shard], format!("BITFIELD answered {reply:?}"))
        };
        let mut checked = vec![false; replies.len()];
        let mut values = Vec::with_capacity(items.len());
        for (item, &(cmd, pos)) in items.iter().zip(at) {
            let reply = replies
                .get(cmd)
                .ok_or_else(|| what(item.shard, &Value::Nil))?;
            let Value::Array(fields) = reply else {
                return Err(what(item.shard, reply));
            };
            if !checked[cmd] {
                guard::check(&self.name, &self.keys[item.shard], self.id, fields.first())?;
                checked[cmd] = true;
            }
            match fields.get(pos) {
                Some(Value::Int(v)) => values.push(*v as u64),
                _ => return Err(what(item.shard, reply)),
            }
        }
        Ok(values)
    }

    pub(super) fn locate_all(&self, hashes: &[Hash128]) -> Vec<Located> {
        hashes.iter().map(|&h| self.locate(h)).collect()
    }

    /// The compare-and-clear of `hash`'s slot ([`FORGET`]), and its shard's key.
    pub(super) fn forget_batch(&self, hash: Hash128) -> (Batch, &str) {
        let item = self.locate(hash);
        let key = &self.keys[item.shard];
        let args = [
            (item.offset / 8).to_string().into_bytes(),
            item.fingerprint.to_be_bytes().to_vec(),
            self.guard_byte(item.shard).to_string().into_bytes(),
            self.id.bytes(),
        ];
        let mut batch = Batch::default();
        let k = batch.key(key);
        batch.push_script(k, &FORGET, &[key], &args);
        (batch, key)
    }

    pub(super) fn after_forget(&self, key: &str, replies: Vec<Value>) -> Result<bool, Error> {
        match replies.into_iter().next().unwrap_or(Value::Nil) {
            Value::Int(1) => Ok(true),
            Value::Int(0) => Ok(false),
            Value::Int(-1) => Err(Error::Missing {
                name: self.name.clone(),
                key: key.to_owned(),
            }),
            other => Err(Error::corrupt(
                key,
                format!("the forget script answered {other:?}"),
            )),
        }
    }
}
