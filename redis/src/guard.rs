//! The guard byte: how a lost key is told from an empty one.
//!
//! Every shard of a structure (and every generation of a windowed filter) holds one byte of
//! value 1 after its data, written when the shard is created, and never written again. Every
//! command that reads or writes the shard's data reads the guard in the same command
//! (`BITFIELD ... GET u8 <guard>` before its other fields), so in the same atomic step:
//!
//! - a shard that is gone (`DEL`, `FLUSHALL`, an eviction, a restart without persistence)
//!   reads as a guard of 0, and the command's answers are not used: [`Error::Missing`];
//! - a write to a missing shard creates its key (`BITFIELD SET` creates a missing key, zeroed,
//!   as long as its highest offset): the key it creates has no guard, so the write's own reply
//!   says the shard was lost, and so does every later command on that key, from every client.
//!   A lost shard therefore stays lost until the structure is destroyed and created again; no
//!   write ever brings it back as an empty one.
//!
//! The guard is the first of 8 bytes, `\x01SEENGRD`, written together: a key a write made
//! again after a loss ends in data, never in those 8 bytes, so a shard of this crate (of any
//! parameters) is told from such a key by its last 8 bytes.
//!
//! A shard is created by [`CREATE`]: a shard that holds its guard at this shard's offset is
//! kept (a racing creator of the same parameters made it, or only the description was lost);
//! a key that ends in a guard elsewhere is another structure's shard (a creator of other
//! parameters racing under the same name) and is left as it is, the create failing; any other
//! key under the name (one a write made again after a loss) is replaced by an empty shard with
//! its guard, in one script.

use std::sync::LazyLock;

use redis::{Cmd, Value};

use crate::Error;
use crate::script::Lua;
use crate::server::Batch;

/// A shard's creation, in one atomic step.
pub(crate) static CREATE: LazyLock<Lua> = LazyLock::new(|| {
    Lua::new(
        "shard create",
        r"-- KEYS[1]: a shard. ARGV[1]: its guard's offset.
-- Returns 1 if it created the shard, 0 if the shard was there with its guard, -1 if the key is
-- another structure's shard (its guard elsewhere), left untouched.
local at = tonumber(ARGV[1])
if redis.call('GETRANGE', KEYS[1], at, at + 7) == '\1SEENGRD' then return 0 end
local len = redis.call('STRLEN', KEYS[1])
if len >= 8 and redis.call('GETRANGE', KEYS[1], len - 8, len - 1) == '\1SEENGRD' then return -1 end
redis.call('DEL', KEYS[1])
redis.call('SETRANGE', KEYS[1], at, '\1SEENGRD')
return 1",
    )
});

/// Appends to `batch` the creation of each of `shards`: its key and its guard byte's offset
/// (the shard's length in bytes, data before it).
pub(crate) fn create(batch: &mut Batch, shards: impl IntoIterator<Item = (String, u64)>) {
    for (key, guard) in shards {
        let k = batch.key(&key);
        batch.push_script(k, &CREATE, &[&key], &[guard.to_string().into_bytes()]);
    }
}

/// Appends the guard's `GET` to a `BITFIELD` or `BITFIELD_RO` command: its first field.
pub(crate) fn get(cmd: &mut Cmd, guard_byte: u64) {
    cmd.arg("GET").arg("u8").arg(guard_byte * 8);
}

/// `Ok` if `value`, a guard's `GET u8`, says the shard `key` of structure `name` is there.
pub(crate) fn check(name: &str, key: &str, value: Option<&Value>) -> Result<(), Error> {
    match value {
        Some(Value::Int(1)) => Ok(()),
        Some(Value::Int(0)) => Err(Error::Missing {
            name: name.to_owned(),
            key: key.to_owned(),
        }),
        other => Err(Error::corrupt(
            key,
            format!("the guard byte's GET u8 answered {other:?}"),
        )),
    }
}
