//! The windowed filter's scripts: its insert, the check after a read, a ledger's creation and
//! the server's time. Their atomicity argument is in [`SharedWindowedBloomFilter`]'s docs.

use std::sync::LazyLock;

use crate::guard::fence;
use crate::script::Lua;

/// The insert script: `KEYS[1]` the generation written, `KEYS[2..]` its live neighbours, the
/// last key the shard's ledger; `ARGV[1]` the expiry in milliseconds, `ARGV[2]` the guard's
/// offset, then one generation number per generation key, the oldest generation kept on the
/// filter's clock, the periods after its start at which a generation is dead on the server's
/// clock (`n + 3`) and the period in milliseconds (older generations, dead on both clocks, are
/// deleted when the script creates `KEYS[1]`), then per item a count and that many bit offsets
/// (all its bits: the same in every generation), and last the creation id (every guard's
/// value). Returns one integer per item, 1 if new; or `{-1, k}` if
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
  -- The generations of KEYS[1]'s shard are its name with another number at the end.
  local prefix = string.sub(KEYS[1], 1, #KEYS[1] - #ARGV[3])
  local oldest = tonumber(ARGV[3 + nk])
  local after = tonumber(ARGV[4 + nk])
  local period = tonumber(ARGV[5 + nk])
  local all = redis.call('HGETALL', ledger)
  for j = 1, #all, 2 do
    local f = all[j]
    if f ~= 'guard' then
      if tonumber(all[j + 1]) <= now then
        redis.call('HDEL', ledger, f)
      elseif tonumber(f) < oldest and (tonumber(f) + after) * period <= now then
        -- Past every window on the filter's clock, which a replay of old records moves
        -- faster than the server's, and on the server's (a handle on it may still read
        -- it): gone now, with its entry, not at its expiry.
        redis.call('DEL', prefix .. f)
        redis.call('HDEL', ledger, f)
      end
    end
  end
end
if deadline > was then
  redis.call('HSET', ledger, ARGV[3], deadline)
  redis.call('PEXPIREAT', KEYS[1], deadline)
end
-- The items: where each one's bits are in ARGV (the same offsets in every generation).
local first, count = {}, {}
local n = 0
local i = 6 + nk
local argc = #ARGV
while i < argc do
  n = n + 1
  local c = tonumber(ARGV[i])
  first[n] = i + 1; count[n] = c
  i = i + 1 + c
end
-- BITFIELD of the fields in list, CHUNK at a time (unpack has a limit), one value per field.
local CHUNK = 500
local function run(cmd, key, list, width)
  local values, v = {}, 0
  local fields = #list / width
  for a = 1, fields, CHUNK do
    local b = math.min(a + CHUNK - 1, fields)
    local got = redis.call(cmd, key, unpack(list, (a - 1) * width + 1, b * width))
    for _, x in ipairs(got) do v = v + 1; values[v] = x end
  end
  return values
end
-- An item a live neighbour now holds whole is not new, and gets no write (the neighbours are
-- not written here, so reading them for every item first is reading them item by item).
local found = {}
for k = 2, nk do
  if present[k] then
    local gets, from, upto = {}, {}, {}
    local m = 0
    for t = 1, n do
      if not found[t] then
        from[t] = m / 3 + 1
        for j = 0, count[t] - 1 do
          gets[m + 1] = 'GET'; gets[m + 2] = 'u1'; gets[m + 3] = ARGV[first[t] + j]
          m = m + 3
        end
        upto[t] = m / 3
      end
    end
    local bits = run('BITFIELD_RO', KEYS[k], gets, 3)
    for t = 1, n do
      if from[t] then
        local whole = true
        for f = from[t], upto[t] do
          if bits[f] == 0 then whole = false; break end
        end
        found[t] = whole
      end
    end
  end
end
-- The others' bits in KEYS[1], in item order: the old values say which were new.
local sets, at, last = {}, {}, {}
local m = 0
for t = 1, n do
  if not found[t] and count[t] > 0 then
    at[t] = m / 4 + 1
    for j = 0, count[t] - 1 do
      sets[m + 1] = 'SET'; sets[m + 2] = 'u1'; sets[m + 3] = ARGV[first[t] + j]; sets[m + 4] = '1'
      m = m + 4
    end
    last[t] = m / 4
  end
end
local old = run('BITFIELD', KEYS[1], sets, 4)
local out = {}
for t = 1, n do
  local new = 0
  if at[t] then
    for f = at[t], last[t] do
      if old[f] == 0 then new = 1; break end
    end
  end
  out[t] = new
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

/// A shard's destruction: `KEYS[1]` its ledger; `ARGV[1]` the prefix of its generations' keys
/// (a generation's key is the prefix and its number), `ARGV[2]` the guard's offset, `ARGV[3]`
/// the creation id. Deletes every generation the ledger lists whose guard is the id (every
/// generation key gets its entry in the step that creates it, and loses it only with the
/// key), then the ledger: 1; 0 if the ledger is not this creation's (nothing deleted).
pub(super) static DESTROY_SHARD: LazyLock<Lua> = LazyLock::new(|| {
    Lua::new(
        "window destroy",
        r"if redis.call('TYPE', KEYS[1])['ok'] ~= 'hash' or redis.call('HGET', KEYS[1], 'guard') ~= ARGV[3] then
  return 0
end
local at = tonumber(ARGV[2])
for _, f in ipairs(redis.call('HKEYS', KEYS[1])) do
  local key = ARGV[1] .. f
  if f ~= 'guard' and redis.call('TYPE', key)['ok'] == 'string'
      and redis.call('GETRANGE', key, at, at + 7) == ARGV[3] then
    redis.call('DEL', key)
  end
end
redis.call('DEL', KEYS[1])
return 1",
    )
});

/// The server's time, read on the description's key's node.
pub(super) static TIME: LazyLock<Lua> =
    LazyLock::new(|| Lua::new("time", "return redis.call('TIME')"));
