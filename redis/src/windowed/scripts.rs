//! The windowed filter's scripts: its insert, the check after a read, a ledger's creation and
//! the server's time. Their atomicity argument is in [`SharedWindowedBloomFilter`]'s docs.

use std::sync::LazyLock;

use crate::guard::fence;
use crate::script::Lua;

/// The insert script: `KEYS[1]` the generation written, `KEYS[2..]` its live neighbours, the
/// last key the shard's ledger; `ARGV[1]` the expiry in milliseconds, `ARGV[2]` the guard's
/// offset, then one generation number per generation key, then per item, per generation key
/// in order, a count and that many bit offsets (the item's bits that the read found unset in
/// that key), and last the creation id (every guard's value). Returns one integer per item, 1 if new; or `{-1, k}` if
/// generation key `k` is lost, `{-2}` if the ledger is. Its atomicity argument is in
/// [`SharedWindowedBloomFilter`]'s docs.
pub(super) static INSERT: LazyLock<Lua> = LazyLock::new(|| {
    Lua::new(
        "window insert",
        r"local nk = #KEYS - 1
local ledger = KEYS[#KEYS]
local id = ARGV[#ARGV]
if redis.call('HGET', ledger, 'guard') ~= id then return {-2} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local guard = tonumber(ARGV[2])
local present = {}
for k = 1, nk do
  if redis.call('GETRANGE', KEYS[k], guard, guard + 7) == id then
    present[k] = true
  else
    local d = redis.call('HGET', ledger, ARGV[2 + k])
    if d and tonumber(d) > now then return {-1, k} end
    present[k] = false
  end
end
local deadline = now + tonumber(ARGV[1])
local was = 0
if present[1] then
  was = tonumber(redis.call('HGET', ledger, ARGV[3]) or '0')
else
  redis.call('DEL', KEYS[1])
  redis.call('SETRANGE', KEYS[1], guard, id)
  local all = redis.call('HGETALL', ledger)
  for j = 1, #all, 2 do
    if all[j] ~= 'guard' and tonumber(all[j + 1]) <= now then redis.call('HDEL', ledger, all[j]) end
  end
end
if deadline > was then
  redis.call('HSET', ledger, ARGV[3], deadline)
  redis.call('PEXPIREAT', KEYS[1], deadline)
end
local out = {}
local i = 3 + nk
while i < #ARGV do
  local found = false
  local sets = {}
  for k = 1, nk do
    local c = tonumber(ARGV[i])
    i = i + 1
    if k == 1 then
      for j = 0, c - 1 do
        local n = #sets
        sets[n + 1] = 'SET'; sets[n + 2] = 'u1'; sets[n + 3] = ARGV[i + j]; sets[n + 4] = 1
      end
    elseif present[k] and not found then
      local gets = {}
      for j = 0, c - 1 do
        local n = #gets
        gets[n + 1] = 'GET'; gets[n + 2] = 'u1'; gets[n + 3] = ARGV[i + j]
      end
      found = true
      for _, bit in ipairs(redis.call('BITFIELD_RO', KEYS[k], unpack(gets))) do
        if bit == 0 then found = false; break end
      end
    end
    i = i + c
  end
  local new = 0
  if not found and #sets > 0 then
    for _, bit in ipairs(redis.call('BITFIELD', KEYS[1], unpack(sets))) do
      if bit == 0 then new = 1; break end
    end
  end
  out[#out + 1] = new
end
return out",
    )
});

/// The check after a read of one shard's generations: `KEYS` the generation keys read, the
/// last key the shard's ledger; `ARGV[1]` the guard's offset, then one generation number per
/// generation key, then the creation id. Returns 0 if every generation the ledger holds live is there, `k` if
/// generation key `k` is lost, -2 if the ledger is.
pub(super) static CHECK: LazyLock<Lua> = LazyLock::new(|| {
    Lua::new(
        "window check",
        r"local ledger = KEYS[#KEYS]
local id = ARGV[#ARGV]
if redis.call('HGET', ledger, 'guard') ~= id then return -2 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local g = tonumber(ARGV[1])
for k = 1, #KEYS - 1 do
  if redis.call('GETRANGE', KEYS[k], g, g + 7) ~= id then
    local d = redis.call('HGET', ledger, ARGV[1 + k])
    if d and tonumber(d) > now then return k end
  end
end
return 0",
    )
});

/// A ledger's creation: `KEYS[1]` the ledger, `ARGV[2]` the creation id, its guard field
/// (`ARGV[1]` unused); whatever the key held is replaced, unless it is a later creation's
/// ledger ([`guard`](crate::guard)): 1 if made, -1 if not.
pub(super) static CREATE_LEDGER: LazyLock<Lua> = LazyLock::new(|| {
    Lua::new(
        "ledger create",
        concat!(
            fence!(),
            r"if redis.call('TYPE', KEYS[1])['ok'] == 'hash' and newer(redis.call('HGET', KEYS[1], 'guard')) then
  return -1
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'guard', ARGV[2])
return 1"
        ),
    )
});

/// The server's time, read on the description's key's node.
pub(super) static TIME: LazyLock<Lua> =
    LazyLock::new(|| Lua::new("time", "return redis.call('TIME')"));
