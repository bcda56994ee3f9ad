//! The guard: how a lost key is told from an empty one, and one structure from another of the
//! same name.
//!
//! Every structure has a creation id ([`Id`]): 8 bytes, the server's time in microseconds
//! (read by the creator on the description's node) and 11 random bits, written in its
//! description. Every shard of the structure (and
//! every generation of a windowed filter) holds the id in the 8 bytes after its data, written
//! when the shard is created and never again; the hashes beside the shards (a windowed
//! filter's ledgers, a map's leases) hold it in their `guard` field. Every command that reads
//! or writes a shard's data reads its guard in the same command (`BITFIELD ... GET i64
//! <guard>` before its other fields, or the script's first check), so in the same atomic
//! step, and the handle compares it with the id it opened:
//!
//! - a shard that is gone (`DEL`, `FLUSHALL`, an eviction, a restart without persistence)
//!   reads as a guard of 0, and the command's answers are not used: [`Error::Missing`];
//! - a write to a missing shard creates its key (`BITFIELD SET` creates a missing key, zeroed,
//!   as long as its highest offset): the key it creates has no guard, so the write's own reply
//!   says the shard was lost, and so does every later command on that key, from every client;
//! - a structure created again under the name (after a `FLUSHALL` that took its description,
//!   or a `destroy` and a `create`) has another id: the handles of the one that was lost read a
//!   guard that is not theirs, and get [`Error::Missing`] too, never the new structure's
//!   answers.
//!
//! So a lost shard stays lost for every handle that knew it; no write and no later open brings
//! it back as an empty one. Only the process that wrote the description creates the shards
//! ([`meta::create_with`](crate::meta::create_with)), once: [`CREATE`] replaces whatever the
//! key holds (nothing, or the remains of a structure whose description was lost) by an empty
//! shard with the id, unless the key holds the guard of a later creation ([`fence!`]): a
//! creator whose request was delayed past a loss of the name and its creation again leaves
//! the new structure alone (its own create is then `Missing`).

use std::hash::{BuildHasher, Hasher};
use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use redis::{Cmd, Value};

use crate::Error;
use crate::script::Lua;
use crate::server::Batch;

/// A structure's creation id: 8 bytes, never all 0 (so that a guard of zeros, a lost or
/// never-created key, is never an id).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Id([u8; 8]);

/// 64 bits that no other call or process draws alike: the process's random hash keys over the
/// time, the process id and a counter (no secret).
fn random_u64() -> u64 {
    static CALLS: AtomicU64 = AtomicU64::new(0);
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    hasher.write_u128(now);
    hasher.write_u32(std::process::id());
    hasher.write_u64(CALLS.fetch_add(1, Relaxed));
    hasher.finish()
}

impl Id {
    /// A fresh id of no order (a placeholder until the creation's [`ordered`](Self::ordered)
    /// one; 1 on a replaying server's thread).
    pub(crate) fn random() -> Self {
        #[cfg(any(test, fuzzing))]
        if REPLAYING.get() {
            return Self::from_u64(1);
        }
        Self::from_u64(random_u64())
    }

    /// The id of a creation that began at `micros` on the server's clock: the time in
    /// microseconds in its high bits (so that a later creation has a greater id: [`fence!`];
    /// two creations one after the other on one server are microseconds apart at least: a
    /// stale creator and the creation after a loss were within one millisecond under load),
    /// 11 random bits below.
    pub(crate) fn ordered(micros: u64) -> Self {
        Self::from_u64((micros << 11) | (random_u64() & 0x7ff))
    }

    /// The id of these 8 bytes (0 taken as 1).
    pub(crate) fn from_u64(v: u64) -> Self {
        Self(v.max(1).to_be_bytes())
    }

    /// Its 8 bytes, as a script's argument and a guard's value.
    pub(crate) fn bytes(&self) -> Vec<u8> {
        self.0.to_vec()
    }

    /// Whether `bytes` (a guard read by `GETRANGE`) is this id.
    pub(crate) fn is(&self, bytes: &[u8]) -> bool {
        bytes == self.0
    }

    /// As a `BITFIELD ... GET i64` reads it.
    fn as_i64(self) -> i64 {
        i64::from_be_bytes(self.0)
    }

    /// Its text in a description: 16 hexadecimal digits.
    pub(crate) fn to_hex(self) -> String {
        format!("{:016x}", u64::from_be_bytes(self.0))
    }

    /// The id written as [`to_hex`](Self::to_hex) writes it.
    pub(crate) fn from_hex(text: &str) -> Option<Self> {
        if text.len() != 16 {
            return None;
        }
        let v = u64::from_str_radix(text, 16).ok()?;
        (v != 0).then(|| Self(v.to_be_bytes()))
    }
}

#[cfg(any(test, fuzzing))]
thread_local! {
    /// Set on a thread that made a replaying server ([`crate::fuzzing::server`]): its
    /// structures get the id 1, so that canned replies can hold their guard (`:1`).
    pub(crate) static REPLAYING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// The Lua a creation script starts with: `newer(g)`, whether `g` (8 bytes read where a guard
/// is) is the id of a creation later than this one (`ARGV[2]`, an [`Id::ordered`]), and
/// `newer_string(key, at)`, whether a string key holds such a guard at `at` or in its last 8
/// bytes. A creation whose request arrives after a later creation of the name made the key
/// (its description lost meanwhile: a `FLUSHALL`, a restart, and another process created the
/// name again) leaves the key alone. An id past the server's time plus a minute (the nodes of
/// a cluster may disagree by that much) is no creation's: data bytes, which are replaced.
macro_rules! fence {
    () => {
        r"local function be32(v)
  return string.char(math.floor(v / 16777216) % 256, math.floor(v / 65536) % 256,
    math.floor(v / 256) % 256, v % 256)
end
local t = redis.call('TIME')
local us = tonumber(t[1]) * 1000000 + tonumber(t[2]) + 60000000
local top = be32(math.floor(us / 2097152)) .. be32((us % 2097152) * 2048 + 2047)
local function less(a, b)
  for i = 1, 8 do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return false
end
local function newer(g)
  return type(g) == 'string' and #g == 8 and less(ARGV[2], g) and not less(top, g)
end
local function newer_string(key, at)
  if redis.call('TYPE', key)['ok'] ~= 'string' then return false end
  local len = redis.call('STRLEN', key)
  if len < 8 then return false end
  return newer(redis.call('GETRANGE', key, len - 8, len - 1))
    or newer(redis.call('GETRANGE', key, at, at + 7))
end
"
    };
}
pub(crate) use fence;

/// A shard's creation, in one atomic step: whatever the key holds is replaced by an empty shard
/// with its guard, unless it is a later creation's shard ([`fence!`]).
pub(crate) static CREATE: LazyLock<Lua> = LazyLock::new(|| {
    Lua::new(
        "shard create",
        concat!(
            fence!(),
            r"-- KEYS[1]: a shard. ARGV[1]: its guard's offset, ARGV[2]: the creation id (8 bytes).
-- Returns 1 if made, -1 if a later creation's shard is there (left alone).
if newer_string(KEYS[1], tonumber(ARGV[1])) then return -1 end
redis.call('DEL', KEYS[1])
redis.call('SETRANGE', KEYS[1], tonumber(ARGV[1]), ARGV[2])
return 1"
        ),
    )
});

/// A key's deletion by a destroy: `KEYS[1]` a shard or a generation (a string whose guard is at
/// `ARGV[1]`) or a ledger or leases hash (its `guard` field), deleted only if its guard is the
/// creation id `ARGV[2]`. 1 if deleted, else 0.
pub(crate) static DESTROY: LazyLock<Lua> = LazyLock::new(|| {
    Lua::new(
        "key destroy",
        r"local t = redis.call('TYPE', KEYS[1])['ok']
if t == 'string' then
  local at = tonumber(ARGV[1])
  if redis.call('GETRANGE', KEYS[1], at, at + 7) ~= ARGV[2] then return 0 end
elseif t == 'hash' then
  if redis.call('HGET', KEYS[1], 'guard') ~= ARGV[2] then return 0 end
else
  return 0
end
redis.call('DEL', KEYS[1])
return 1",
    )
});

/// Appends to `batch` the deletion ([`DESTROY`]) of each of `keys` (its name and, for a
/// string, its guard's offset) whose guard is `id`.
pub(crate) fn destroy(batch: &mut Batch, id: Id, keys: impl IntoIterator<Item = (String, u64)>) {
    for (key, guard) in keys {
        let k = batch.key(&key);
        batch.push_script(
            k,
            &DESTROY,
            &[&key],
            &[guard.to_string().into_bytes(), id.bytes()],
        );
    }
}

/// Appends to `batch` the creation of each of `shards`: its key and its guard's offset (the
/// shard's length in bytes, data before it), under the creation id `id`.
pub(crate) fn create(batch: &mut Batch, id: Id, shards: impl IntoIterator<Item = (String, u64)>) {
    for (key, guard) in shards {
        let k = batch.key(&key);
        batch.push_script(
            k,
            &CREATE,
            &[&key],
            &[guard.to_string().into_bytes(), id.bytes()],
        );
    }
}

/// Appends the guard's `GET` to a `BITFIELD` or `BITFIELD_RO` command: its first field.
pub(crate) fn get(cmd: &mut Cmd, guard_byte: u64) {
    cmd.arg("GET").arg("i64").arg(guard_byte * 8);
}

/// `Ok` if `value`, a guard's `GET i64`, says the shard `key` of structure `name` is there and
/// is the one of creation `id`: a guard of 0 (a lost key) or of another id (a structure created
/// again under the name) is [`Error::Missing`].
/// Appends to `batch` (whose key `k` is `key`) the count of the bits set in `key`'s data
/// (`BITCOUNT` up to its guard at byte `guard_byte`), then the read of its guard: a guard there
/// after the count means the key was there during it (a lost key is never made again with its
/// guard). [`counted`] reads the two replies.
pub(crate) fn count(batch: &mut Batch, k: usize, key: &str, guard_byte: u64) {
    let mut count = redis::cmd("BITCOUNT");
    count.arg(key).arg(0).arg(guard_byte - 1);
    batch.push(k, count);
    let mut get = redis::cmd("GETRANGE");
    get.arg(key).arg(guard_byte).arg(guard_byte + 7);
    batch.push(k, get);
}

/// The bits set that [`count`]'s two `replies` give for `key` of structure `name`, creation
/// `id`: [`Error::Missing`] if the guard read after the count is not `id`'s.
pub(crate) fn counted(name: &str, key: &str, id: Id, replies: &[Value]) -> Result<u64, Error> {
    match replies.get(1) {
        Some(Value::BulkString(b)) if id.is(b) => {}
        _ => {
            return Err(Error::Missing {
                name: name.to_owned(),
                key: key.to_owned(),
            });
        }
    }
    match replies.first() {
        Some(Value::Int(n)) if *n >= 0 => Ok(*n as u64),
        other => Err(Error::corrupt(key, format!("BITCOUNT answered {other:?}"))),
    }
}

/// Whether `value`, a [`get`]'s reply, is the guard of creation `id`.
pub(crate) fn holds(id: Id, value: Option<&Value>) -> bool {
    matches!(value, Some(Value::Int(v)) if *v == id.as_i64())
}

pub(crate) fn check(name: &str, key: &str, id: Id, value: Option<&Value>) -> Result<(), Error> {
    match value {
        Some(Value::Int(v)) if *v == id.as_i64() => Ok(()),
        Some(Value::Int(_)) => Err(Error::Missing {
            name: name.to_owned(),
            key: key.to_owned(),
        }),
        other => Err(Error::corrupt(
            key,
            format!("the guard's GET i64 answered {other:?}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_is_never_zero_and_reads_back() {
        for v in [0, 1, u64::MAX, 0x00ff_0000_0000_0001] {
            let id = Id::from_u64(v);
            assert_ne!(id.0, [0; 8]);
            assert_eq!(Id::from_hex(&id.to_hex()), Some(id));
            assert!(id.is(&id.bytes()));
        }
        assert_eq!(Id::from_hex("0000000000000000"), None);
        assert_eq!(Id::from_hex("12"), None);
        assert_ne!(Id::random(), Id::random());
    }

    /// A later creation's id is greater, compared as the 8 bytes a script compares; within one
    /// microsecond the 11 random bits decide; the largest time kept is still a positive `i64`.
    #[test]
    fn ordered_ids_follow_the_time() {
        let us = 1_800_000_000_000_000;
        let (a, b) = (Id::ordered(us), Id::ordered(us + 1));
        assert!(a.0 < b.0);
        assert_eq!(u64::from_be_bytes(a.0) >> 11, us);
        assert!(Id::ordered((1 << 52) - 1).as_i64() > 0);
    }
}
