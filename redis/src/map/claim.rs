//! [`SharedClaim`]: an item claimed for at-least-once processing, held by a lease.
//!
//! Beside each shard `seen:{NAME:s}:slots` is a hash `seen:{NAME:s}:leases` (the same hash
//! tag: one Cluster slot, so one script reaches both): one field per claimed slot (its first
//! byte's offset), whose value is the claimed fingerprint's 8 bytes, the lease's end in the
//! server's milliseconds, `:` and the claim's token. Its field `guard` (value 1), written when
//! the shard is created, tells a lost hash from an empty one, as the shard's guard byte does.
//! Every script below reads both guards first and answers -1 (shard) or -2 (leases) without
//! writing if one is gone. The time is the server's (`TIME` in the script), so every client's
//! leases end by one clock.

use std::hash::Hash;
use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use redis::Value;
use seen::hash::{Hash128, ItemHasher};

use super::SharedOverwriteMap;
use super::protocol::Located;
use crate::Error;
use crate::script::Lua;
use crate::server::{Batch, Via};

/// The checks every script starts with, and the server's time in milliseconds as `now`.
/// `KEYS[1]` a shard, `KEYS[2]` its leases; `ARGV[1]` the slot's first byte, `ARGV[2]` the
/// fingerprint's 8 bytes, `ARGV[3]` the guard's offset, the last `ARGV` the creation id: the
/// shard's guard and the leases' `guard` field must be that id ([`guard`](crate::guard)).
macro_rules! prologue {
    () => {
        r"local id = ARGV[#ARGV]
local g = tonumber(ARGV[3])
if redis.call('GETRANGE', KEYS[1], g, g + 7) ~= id then return -1 end
if redis.call('HGET', KEYS[2], 'guard') ~= id then return -2 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local at = tonumber(ARGV[1])
local function mine(v, token)
  return v and string.sub(v, 1, 8) == ARGV[2] and string.sub(v, -#token - 1) == ':' .. token
end
local function ends(v) return tonumber(string.match(string.sub(v, 9), '^(%d+)')) end
"
    };
}

/// A claim: `ARGV[4]` the lease in milliseconds, `ARGV[5]` the claim's token. 1 if claimed
/// (the slot did not hold the item, or held it under a lease that has ended: taken over),
/// 0 if the slot holds it, committed or inserted, or under a live lease. Then one lease field
/// picked at random is swept if it has ended: its slot cleared if it still holds the
/// fingerprint (the claim is forgotten, as if its holder had dropped it), the field deleted.
static CLAIM: LazyLock<Lua> = LazyLock::new(|| {
    Lua::new(
        "claim",
        concat!(
            prologue!(),
            r"local answer = 1
if redis.call('GETRANGE', KEYS[1], at, at + 7) == ARGV[2] then
  local v = redis.call('HGET', KEYS[2], ARGV[1])
  if not v or string.sub(v, 1, 8) ~= ARGV[2] or (ends(v) or 0) > now then answer = 0 end
end
if answer == 1 then
  redis.call('SETRANGE', KEYS[1], at, ARGV[2])
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[2] .. (now + tonumber(ARGV[4])) .. ':' .. ARGV[5])
end
local f = redis.call('HRANDFIELD', KEYS[2])
if f and f ~= 'guard' and f ~= ARGV[1] then
  local v = redis.call('HGET', KEYS[2], f)
  local e = ends(v)
  if e and e <= now then
    local o = tonumber(f)
    if redis.call('GETRANGE', KEYS[1], o, o + 7) == string.sub(v, 1, 8) then
      redis.call('SETRANGE', KEYS[1], o, '\0\0\0\0\0\0\0\0')
    end
    redis.call('HDEL', KEYS[2], f)
  end
end
return answer"
        ),
    )
});

/// A commit: `ARGV[4]` the token. 1 if the lease was this claim's (now deleted: the item stays
/// remembered for good), 0 if not (it ended and another claim took the item over, or it was
/// swept, or another item overwrote the slot).
static COMMIT: LazyLock<Lua> = LazyLock::new(|| {
    Lua::new(
        "commit",
        concat!(
            prologue!(),
            r"if not mine(redis.call('HGET', KEYS[2], ARGV[1]), ARGV[4]) then return 0 end
redis.call('HDEL', KEYS[2], ARGV[1])
if redis.call('GETRANGE', KEYS[1], at, at + 7) ~= ARGV[2] then return 0 end
return 1"
        ),
    )
});

/// A renewal: `ARGV[4]` the lease in milliseconds, `ARGV[5]` the token. 1 if the lease was
/// this claim's (it now ends `ARGV[4]` from now), 0 if not.
static RENEW: LazyLock<Lua> = LazyLock::new(|| {
    Lua::new(
        "renew",
        concat!(
            prologue!(),
            r"if not mine(redis.call('HGET', KEYS[2], ARGV[1]), ARGV[5]) then return 0 end
if redis.call('GETRANGE', KEYS[1], at, at + 7) ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2] .. (now + tonumber(ARGV[4])) .. ':' .. ARGV[5])
return 1"
        ),
    )
});

/// A release (a claim forgotten): `ARGV[4]` the token. 1 if the lease was this claim's and
/// the slot still held the item (now cleared), 0 if not (nothing is touched: the item is
/// another claim's now, or another item's slot).
static RELEASE: LazyLock<Lua> = LazyLock::new(|| {
    Lua::new(
        "release",
        concat!(
            prologue!(),
            r"if not mine(redis.call('HGET', KEYS[2], ARGV[1]), ARGV[4]) then return 0 end
redis.call('HDEL', KEYS[2], ARGV[1])
if redis.call('GETRANGE', KEYS[1], at, at + 7) ~= ARGV[2] then return 0 end
redis.call('SETRANGE', KEYS[1], at, '\0\0\0\0\0\0\0\0')
return 1"
        ),
    )
});

/// The start of every script on a batch of one shard's claims: `ARGV[1]` the guard's offset,
/// the last `ARGV` the creation id; -1 (shard) or -2 (leases) if a guard is not that id.
macro_rules! many_guards {
    () => {
        r"local id = ARGV[#ARGV]
local g = tonumber(ARGV[1])
if redis.call('GETRANGE', KEYS[1], g, g + 7) ~= id then return -1 end
if redis.call('HGET', KEYS[2], 'guard') ~= id then return -2 end
"
    };
}

/// A script that settles a batch of one shard's claims ([`COMMIT_MANY`], [`RELEASE_MANY`]):
/// per claim whose lease is its own, the lease deleted, then `$held` (which sets `answer`) if
/// the slot still holds the claimed fingerprint.
macro_rules! settle_many {
    ($held:expr) => {
        concat!(
            many_guards!(),
            r"local answers = {}
for i = 2, #ARGV - 1, 3 do
  local field, fp, token = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local v = redis.call('HGET', KEYS[2], field)
  local answer = 0
  if v and string.sub(v, 1, 8) == fp and string.sub(v, -#token - 1) == ':' .. token then
    redis.call('HDEL', KEYS[2], field)
    local at = tonumber(field)
    if redis.call('GETRANGE', KEYS[1], at, at + 7) == fp then
      ",
            $held,
            r"
    end
  end
  answers[#answers + 1] = answer
end
return answers"
        )
    };
}

/// The most claims one [`CLAIM_MANY`] script makes: a script holds the server while it runs
/// (about a millisecond for 512 claims), as the `BITFIELD`s of a batch insert hold it for
/// their 512 slots.
const CLAIMS_PER_SCRIPT: usize = 512;

/// Claims of several items of one shard: the guards read and the time taken once; first as
/// many leases as items, picked at random (distinct: `HRANDFIELD` with a count, with their
/// values), are swept as [`CLAIM`] sweeps its one; then each item is claimed in order exactly
/// as `CLAIM` claims it (an item whose ended lease was just swept is new: claimed, as a
/// take-over would). `ARGV[1]`
/// the guard's offset, `ARGV[2]` the lease in milliseconds, then per item its slot's first
/// byte, its fingerprint's 8 bytes and its claim's token, and last the creation id. The
/// answers (1 or 0) in an array, or -1 / -2 for a lost shard or leases (nothing written).
static CLAIM_MANY: LazyLock<Lua> = LazyLock::new(|| {
    Lua::new(
        "claim_many",
        concat!(
            many_guards!(),
            r"local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease = tonumber(ARGV[2])
local function ends(v) return tonumber(string.match(string.sub(v, 9), '^(%d+)')) end
local sample = redis.call('HRANDFIELD', KEYS[2], (#ARGV - 3) / 3, 'WITHVALUES')
for j = 1, #sample - 1, 2 do
  local f, v = sample[j], sample[j + 1]
  local e = f ~= 'guard' and ends(v)
  if e and e <= now then
    local o = tonumber(f)
    if redis.call('GETRANGE', KEYS[1], o, o + 7) == string.sub(v, 1, 8) then
      redis.call('SETRANGE', KEYS[1], o, '\0\0\0\0\0\0\0\0')
    end
    redis.call('HDEL', KEYS[2], f)
  end
end
local answers = {}
for i = 3, #ARGV - 1, 3 do
  local field, fp, token = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local at = tonumber(field)
  local answer = 1
  if redis.call('GETRANGE', KEYS[1], at, at + 7) == fp then
    local v = redis.call('HGET', KEYS[2], field)
    if not v or string.sub(v, 1, 8) ~= fp or (ends(v) or 0) > now then answer = 0 end
  end
  if answer == 1 then
    redis.call('SETRANGE', KEYS[1], at, fp)
    redis.call('HSET', KEYS[2], field, fp .. (now + lease) .. ':' .. token)
  end
  answers[#answers + 1] = answer
end
return answers"
        ),
    )
});

/// Commits of several claims of one shard, in order, each exactly as [`COMMIT`], the guards
/// read once: `ARGV[1]` the guard's offset, then per claim its slot's first byte, its
/// fingerprint's 8 bytes and its token, and last the creation id. The answers (1 or 0) in an
/// array, or -1 / -2 for a lost shard or leases (nothing written).
static COMMIT_MANY: LazyLock<Lua> =
    LazyLock::new(|| Lua::new("commit_many", settle_many!("answer = 1")));

/// Forgets of several claims of one shard, in order, each exactly as [`RELEASE`], the guards
/// read once: the arguments as [`COMMIT_MANY`]'s. The answers (1: erased, 0: not) in an array,
/// or -1 / -2 for a lost shard or leases (nothing written).
static RELEASE_MANY: LazyLock<Lua> = LazyLock::new(|| {
    Lua::new(
        "release_many",
        settle_many!(
            r"redis.call('SETRANGE', KEYS[1], at, '\0\0\0\0\0\0\0\0')
      answer = 1"
        ),
    )
});

/// A token no other claim has: this process's random state, its id, a count.
fn token() -> String {
    use std::hash::{BuildHasher, Hasher};
    static COUNT: AtomicU64 = AtomicU64::new(0);
    static PROCESS: LazyLock<u64> = LazyLock::new(|| {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos()),
        );
        h.finish()
    });
    format!("{:x}-{:x}", *PROCESS, COUNT.fetch_add(1, Relaxed))
}

impl SharedOverwriteMap {
    /// The commits ([`COMMIT_MANY`]) or forgets ([`RELEASE_MANY`]) of `spent` (each claim's
    /// hash and token), a request per [`REQUEST_ITEMS`](crate::REQUEST_ITEMS): one script per
    /// shard touched and 512 claims. Stops at the first request that fails.
    async fn settle_all(
        &self,
        via: Via,
        script: &Lua,
        spent: &[(Hash128, String)],
    ) -> Result<Vec<bool>, Error> {
        let mut settled = Vec::with_capacity(spent.len());
        for request in spent.chunks(crate::REQUEST_ITEMS) {
            let (answered, failed) = self.per_shard(via, script, request, &[]).await?;
            if let Some(failed) = failed {
                return Err(failed);
            }
            let mut answers = vec![false; request.len()];
            for (i, answer) in answered {
                answers[i] = answer;
            }
            settled.extend(answers);
        }
        Ok(settled)
    }

    /// Runs `script` once per shard of `claims` (each an item's hash and its claim's token)
    /// and [`CLAIMS_PER_SCRIPT`] of them, in one request: its `ARGV` the shard's guard offset,
    /// `before`, per claim its slot's first byte, its fingerprint's 8 bytes and its token, and
    /// the creation id. The index and answer (1: `true`, 0: `false`) of every claim a script
    /// answered, and the first script's failure (a lost shard or leases: `Missing`; an error
    /// reply: `Server`; a reply of another shape: `Corrupt`) if any.
    async fn per_shard(
        &self,
        via: Via,
        script: &Lua,
        claims: &[(Hash128, String)],
        before: &[Vec<u8>],
    ) -> Result<(Vec<(usize, bool)>, Option<Error>), Error> {
        let items: Vec<Located> = claims.iter().map(|(hash, _)| self.locate(*hash)).collect();
        // Per shard, its items in their order (one item's operations stay in order: one
        // shard, its scripts in the order pushed, which the server runs in turn).
        let mut by_shard = std::collections::BTreeMap::<usize, Vec<usize>>::new();
        for (i, item) in items.iter().enumerate() {
            by_shard.entry(item.shard).or_default().push(i);
        }
        let mut batch = Batch::default();
        batch.errors_per_command();
        let mut scripts = Vec::new();
        for (&s, mine) in &by_shard {
            for part in mine.chunks(CLAIMS_PER_SCRIPT) {
                let mut argv = Vec::with_capacity(2 + before.len() + 3 * part.len());
                argv.push(self.guard_byte(s).to_string().into_bytes());
                argv.extend(before.iter().cloned());
                for &i in part {
                    argv.push((items[i].offset / 8).to_string().into_bytes());
                    argv.push(items[i].fingerprint.to_be_bytes().to_vec());
                    argv.push(claims[i].1.clone().into_bytes());
                }
                argv.push(self.id.bytes());
                let k = batch.key(&self.keys[s]);
                batch.push_script(k, script, &[&self.keys[s], &self.leases[s]], &argv);
                scripts.push((s, part));
            }
        }
        let replies = self.server.send(via, &batch).await?;
        let mut answers = Vec::with_capacity(items.len());
        let mut failed = None;
        for ((s, part), reply) in scripts.into_iter().zip(replies) {
            let corrupt = |what: &Value| {
                Error::corrupt(
                    &self.keys[s],
                    format!("a script of {} items answered {what:?}", part.len()),
                )
            };
            match reply {
                Value::Array(values) if values.len() == part.len() => {
                    for (&i, value) in part.iter().zip(values) {
                        match value {
                            Value::Int(1) => answers.push((i, true)),
                            Value::Int(0) => answers.push((i, false)),
                            other => {
                                failed.get_or_insert_with(|| corrupt(&other));
                            }
                        }
                    }
                }
                Value::Int(-1) => {
                    failed.get_or_insert_with(|| Error::Missing {
                        name: self.name.clone(),
                        key: self.keys[s].clone(),
                    });
                }
                Value::Int(-2) => {
                    failed.get_or_insert_with(|| Error::Missing {
                        name: self.name.clone(),
                        key: self.leases[s].clone(),
                    });
                }
                Value::ServerError(err) => {
                    failed.get_or_insert_with(|| Error::from_reply(&self.keys[s], &err));
                }
                other => {
                    failed.get_or_insert_with(|| corrupt(&other));
                }
            }
        }
        Ok((answers, failed))
    }
}

impl SharedOverwriteMap {
    /// The request that runs `script` on `hash`'s slot with the extra arguments `more`.
    fn lease_batch(&self, script: &Lua, hash: Hash128, more: &[&[u8]]) -> (Batch, usize) {
        let item = self.locate(hash);
        let s = item.shard;
        let mut args = vec![
            (item.offset / 8).to_string().into_bytes(),
            item.fingerprint.to_be_bytes().to_vec(),
            self.guard_byte(s).to_string().into_bytes(),
        ];
        args.extend(more.iter().map(|a| a.to_vec()));
        args.push(self.id.bytes());
        let mut batch = Batch::default();
        let k = batch.key(&self.keys[s]);
        batch.push_script(k, script, &[&self.keys[s], &self.leases[s]], &args);
        (batch, s)
    }

    /// A lease script's answer: `true` for 1, `false` for 0.
    fn lease_answer(&self, shard: usize, replies: Vec<Value>) -> Result<bool, Error> {
        let key = |k: &[String]| k[shard].clone();
        match replies.into_iter().next() {
            Some(Value::Int(1)) => Ok(true),
            Some(Value::Int(0)) => Ok(false),
            Some(Value::Int(-1)) => Err(Error::Missing {
                name: self.name.clone(),
                key: key(&self.keys),
            }),
            Some(Value::Int(-2)) => Err(Error::Missing {
                name: self.name.clone(),
                key: key(&self.leases),
            }),
            other => Err(Error::corrupt(
                &key(&self.keys),
                format!("a claim's script answered {other:?}"),
            )),
        }
    }

    fn claim_batch(&self, hash: Hash128, token: &str) -> (Batch, usize) {
        let lease = self.lease_millis().to_string();
        self.lease_batch(&CLAIM, hash, &[lease.as_bytes(), token.as_bytes()])
    }

    /// The lease in milliseconds: at least 1, at most 2^40 (34 years), so that its end on the
    /// server's clock stays below 10^14 ms, which Lua writes out in full (`%.14g`): a longer
    /// lease was written in exponent notation and read back as ending in 1970.
    fn lease_millis(&self) -> u128 {
        self.lease.as_millis().clamp(1, 1 << 40)
    }

    /// Claims `item` for at-least-once processing: `Ok(None)` if the map remembers it (a
    /// duplicate, or an item another consumer's claim holds: acknowledge and drop it),
    /// otherwise a [`SharedClaim`] that keeps it remembered, for every process, for the
    /// handle's [`lease`](Self::lease) (renewable). [`commit`](SharedClaim::commit) it once
    /// processing succeeded. A claim that is neither committed nor renewed (its consumer
    /// crashed, hung, or lost the server) ends with its lease: the next claim of the item
    /// takes it over, so that its redelivery is processed. Among racing claims of an item the
    /// map does not remember, from any number of processes, exactly one gets it. One round
    /// trip.
    ///
    /// # Errors
    ///
    /// As [`insert`](Self::insert): never a claim for a write whose outcome is unknown. After
    /// an [`Error::Connection`] the item **may be claimed with no [`SharedClaim`] to commit
    /// or forget it**: its redelivery is refused until the lease ends, and processed after.
    /// [`Error::Missing`] also when the shard's leases are gone.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use seen_redis::{Server, SharedOverwriteMap};
    /// # let server = Server::open("redis://127.0.0.1:6379")?;
    /// let map = SharedOverwriteMap::builder("inbox", 1_000_000).open_or_create(&server)?;
    /// let claim = map.claim("msg-1")?.expect("new");
    /// assert!(map.claim("msg-1")?.is_none()); // claimed: a duplicate, in any process
    /// drop(claim); // processing failed: forgotten
    /// assert!(map.claim("msg-1")?.is_some()); // the redelivery gets through
    /// # Ok::<(), seen_redis::Error>(())
    /// ```
    #[must_use = "dropping the claim at once forgets the item: bind it and `commit` it"]
    pub fn claim<T: Hash + ?Sized>(&self, item: &T) -> Result<Option<SharedClaim<'_>>, Error> {
        self.claim_hash(self.hasher.hash_item(item))
    }

    /// [`claim`](Self::claim) of a hash from [`hasher`](Self::hasher).
    ///
    /// # Errors
    ///
    /// As [`claim`](Self::claim).
    #[must_use = "dropping the claim at once forgets the item: bind it and `commit` it"]
    pub fn claim_hash(&self, hash: Hash128) -> Result<Option<SharedClaim<'_>>, Error> {
        self.server.block_on(self.claim_via(Via::Blocking, hash))
    }

    /// One claim's request, and the claim if it got the item (its drop forgets as `via`'s API
    /// does: blocking, or in a spawned task).
    async fn claim_via(&self, via: Via, hash: Hash128) -> Result<Option<SharedClaim<'_>>, Error> {
        let token = token();
        let (batch, s) = self.claim_batch(hash, &token);
        let claimed = self.lease_answer(s, self.server.send(via, &batch).await?)?;
        Ok(claimed.then(|| SharedClaim::new(self, hash, token, via == Via::Async)))
    }

    /// [`claim`](Self::claim), on the tokio connection. A claim from here, dropped without
    /// `commit`, forgets its item in a task spawned on the [`Server`](crate::Server)'s own runtime: it never
    /// blocks the thread, and runs even if the caller's runtime ends (see [`SharedClaim`]).
    ///
    /// # Errors
    ///
    /// As [`claim`](Self::claim).
    #[must_use = "dropping the claim at once forgets the item: bind it and `commit` it"]
    pub async fn claim_async<T: Hash + ?Sized>(
        &self,
        item: &T,
    ) -> Result<Option<SharedClaim<'_>>, Error> {
        self.claim_hash_async(self.hasher.hash_item(item)).await
    }

    /// [`claim_hash`](Self::claim_hash), on the tokio connection.
    ///
    /// # Errors
    ///
    /// As [`claim`](Self::claim).
    #[must_use = "dropping the claim at once forgets the item: bind it and `commit` it"]
    pub async fn claim_hash_async(&self, hash: Hash128) -> Result<Option<SharedClaim<'_>>, Error> {
        self.claim_via(Via::Async, hash).await
    }

    /// Claims every item of `items`: per item, in order, what [`claim`](Self::claim) would
    /// answer one by one (an item given twice gets one claim, unless an item given between
    /// the two took its slot, as one by one). One round trip per
    /// [`REQUEST_ITEMS`](crate::REQUEST_ITEMS) items: one script per shard touched and 512
    /// items, each claim made as `claim` makes it (racing claims of an item, single or in
    /// batches, from any process: exactly one gets it).
    ///
    /// # Errors
    ///
    /// As [`claim`](Self::claim); then no claim is returned, and those the call made are
    /// forgotten first, in one more request (the items' redeliveries get through; if that
    /// request fails too, their leases end by themselves). After an [`Error::Connection`],
    /// the items of the request that failed **may be claimed with no [`SharedClaim`]**: their
    /// redeliveries are refused until the lease ends, and processed after. An error reply to
    /// one shard's script (a key of another type, the server out of memory) does not hide the
    /// other shards' claims: they are forgotten with the rest.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use seen_redis::{Server, SharedOverwriteMap};
    /// # let server = Server::open("redis://127.0.0.1:6379")?;
    /// let map = SharedOverwriteMap::builder("inbox", 1_000_000).open_or_create(&server)?;
    /// let claims = map.claim_many(["msg-1", "msg-2", "msg-1"])?;
    /// assert!(claims[0].is_some() && claims[1].is_some() && claims[2].is_none());
    /// for claim in claims.into_iter().flatten() {
    ///     // ... process the message ...
    ///     claim.commit()?;
    /// }
    /// # Ok::<(), seen_redis::Error>(())
    /// ```
    #[must_use = "dropping the claims at once forgets their items: `commit` each"]
    pub fn claim_many<'a, T, I>(&self, items: I) -> Result<Vec<Option<SharedClaim<'_>>>, Error>
    where
        T: Hash + ?Sized + 'a,
        I: IntoIterator<Item = &'a T>,
    {
        self.claim_many_hashes(items.into_iter().map(|item| self.hasher.hash_item(item)))
    }

    /// [`claim_many`](Self::claim_many) of hashes from [`hasher`](Self::hasher).
    ///
    /// # Errors
    ///
    /// As [`claim_many`](Self::claim_many).
    #[must_use = "dropping the claims at once forgets their items: `commit` each"]
    pub fn claim_many_hashes<I: IntoIterator<Item = Hash128>>(
        &self,
        hashes: I,
    ) -> Result<Vec<Option<SharedClaim<'_>>>, Error> {
        let hashes: Vec<Hash128> = hashes.into_iter().collect();
        self.server
            .block_on(self.claim_many_via(Via::Blocking, &hashes))
    }

    /// [`claim_many`](Self::claim_many), on the tokio connection (the claims' drops spawn
    /// their forgets, as [`claim_async`](Self::claim_async)'s).
    ///
    /// # Errors
    ///
    /// As [`claim_many`](Self::claim_many).
    #[must_use = "dropping the claims at once forgets their items: `commit` each"]
    pub async fn claim_many_async<'a, T, I>(
        &self,
        items: I,
    ) -> Result<Vec<Option<SharedClaim<'_>>>, Error>
    where
        T: Hash + ?Sized + 'a,
        I: IntoIterator<Item = &'a T>,
    {
        let hashes: Vec<Hash128> = items
            .into_iter()
            .map(|item| self.hasher.hash_item(item))
            .collect();
        self.claim_many_hashes_async(hashes).await
    }

    /// [`claim_many_hashes`](Self::claim_many_hashes), on the tokio connection.
    ///
    /// # Errors
    ///
    /// As [`claim_many`](Self::claim_many).
    #[must_use = "dropping the claims at once forgets their items: `commit` each"]
    pub async fn claim_many_hashes_async<I: IntoIterator<Item = Hash128>>(
        &self,
        hashes: I,
    ) -> Result<Vec<Option<SharedClaim<'_>>>, Error> {
        let hashes: Vec<Hash128> = hashes.into_iter().collect();
        self.claim_many_via(Via::Async, &hashes).await
    }

    /// The claims of `hashes`, a request per [`REQUEST_ITEMS`](crate::REQUEST_ITEMS) items. On
    /// an error, the claims made so far are forgotten first ([`RELEASE_MANY`]: a request per
    /// 8,192 of them, not a round trip each, up to the first that fails; after that their
    /// leases end by themselves), so that the call fails within one more timeout.
    async fn claim_many_via(
        &self,
        via: Via,
        hashes: &[Hash128],
    ) -> Result<Vec<Option<SharedClaim<'_>>>, Error> {
        let mut claims = Vec::with_capacity(hashes.len());
        for request in hashes.chunks(crate::REQUEST_ITEMS) {
            if let Err(failed) = self.claim_request(via, request, &mut claims).await {
                let (spent, _) = spend_all(claims.into_iter().flatten());
                let spent: Vec<(Hash128, String)> = spent.into_iter().flatten().collect();
                let _ = self.settle_all(via, &RELEASE_MANY, &spent).await;
                return Err(failed);
            }
        }
        Ok(claims)
    }

    /// One request of [`claim_many_via`](Self::claim_many_via): appends a claim or `None` per
    /// item of `hashes` (on an error too, for every item a script answered 1, so that each
    /// claim made is held, and forgotten when dropped).
    async fn claim_request<'m>(
        &'m self,
        via: Via,
        hashes: &[Hash128],
        claims: &mut Vec<Option<SharedClaim<'m>>>,
    ) -> Result<(), Error> {
        let made: Vec<(Hash128, String)> = hashes.iter().map(|&hash| (hash, token())).collect();
        let lease = self.lease_millis().to_string().into_bytes();
        let (answered, failed) = self.per_shard(via, &CLAIM_MANY, &made, &[lease]).await?;
        let mut claimed = vec![false; hashes.len()];
        for (i, answer) in answered {
            claimed[i] = answer;
        }
        let spawn = via == Via::Async;
        claims.extend(
            made.into_iter()
                .zip(claimed)
                .map(|((hash, token), claimed)| {
                    claimed.then(|| SharedClaim::new(self, hash, token, spawn))
                }),
        );
        failed.map_or(Ok(()), Err)
    }
}

/// An item claimed in a [`SharedOverwriteMap`] for at-least-once processing (from
/// [`SharedOverwriteMap::claim`] or [`claim_async`](SharedOverwriteMap::claim_async)),
/// held by a **lease**: commit it once processed, or forget it to let the item through again.
///
/// While the lease lasts, every other claim of the item, from any process, gets `None`. The
/// lease ends [`lease`](SharedOverwriteMap::lease) after the claim (default
/// [`DEFAULT_LEASE`](crate::DEFAULT_LEASE), by the server's clock) unless
/// [`renew`](Self::renew)ed; after it ends, the next claim of the item takes it over (and
/// one on the same shard may sweep it: the item forgotten, as if dropped). So a consumer that
/// crashes while holding claims (`kill -9`, `process::exit`, a lost machine) delays its
/// messages' redeliveries by at most the lease, and loses none. Set the lease below the time
/// your queue takes to redeliver an unacknowledged message (NSQ's `msg-timeout`, 60 s by
/// default; SQS's visibility timeout, 30 s), and above the time a message takes to process,
/// or renew it while processing: a claim whose lease ended may be taken over, and its
/// message processed twice (at least once, never lost).
///
/// - [`commit`](Self::commit): processing succeeded; deletes the lease (one round trip), so
///   that the item stays remembered for good (until another item overwrites its slot).
/// - [`forget`](Self::forget) / [`forget_async`](Self::forget_async): processing failed;
///   clears the slot if the lease is still this claim's, and says whether it did.
/// - [`commit_many`](Self::commit_many) / [`forget_many`](Self::forget_many) (and their
///   `_async` forms): the same for a batch of claims, in one round trip per map and 8,192
///   claims (dropping a batch costs a round trip per claim).
/// - **Dropped** without either: forgets as `forget` does, ignoring errors (the lease ends
///   by itself if the server cannot be reached). A claim from [`claim`](SharedOverwriteMap::claim)
///   blocks for that round trip; one from [`claim_async`](SharedOverwriteMap::claim_async)
///   spawns it on the [`Server`](crate::Server)'s own runtime (the one that drives the blocking API), so it
///   never blocks the thread and still runs when the claim is dropped as the caller's runtime
///   ends (the last thing a `block_on` does, or a task cancelled at shutdown): in async code, call
///   [`forget_async`](Self::forget_async)`.await` before handing a failed message back, so
///   that its redelivery cannot arrive before the forget.
///
/// # Examples
///
/// ```no_run
/// # use seen_redis::{Server, SharedOverwriteMap};
/// # use std::time::Duration;
/// # let server = Server::open("redis://127.0.0.1:6379")?;
/// let map = SharedOverwriteMap::builder("inbox", 1_000_000)
///     .lease(Duration::from_secs(20))
///     .open_or_create(&server)?;
/// let mut claim = map.claim("msg-2")?.expect("new");
/// assert!(claim.forget()?); // failed: forgotten now, the error (if any) seen
/// let claim = map.claim("msg-2")?.expect("the retry gets through");
/// assert!(claim.commit()?); // processed, under its lease
/// assert!(map.claim("msg-2")?.is_none());
/// # Ok::<(), seen_redis::Error>(())
/// ```
#[must_use = "dropping a claim forgets the item: `commit` it once the item is processed"]
pub struct SharedClaim<'a> {
    map: &'a SharedOverwriteMap,
    /// The claimed hash; `None` once committed or forgotten, so that the drop does nothing.
    hash: Option<Hash128>,
    token: String,
    /// Claimed by `claim_async`: the drop spawns its forget rather than blocking.
    spawn: bool,
}

impl<'a> SharedClaim<'a> {
    fn new(map: &'a SharedOverwriteMap, hash: Hash128, token: String, spawn: bool) -> Self {
        Self {
            map,
            hash: Some(hash),
            token,
            spawn,
        }
    }

    fn commit_batch(&self, hash: Hash128) -> (Batch, usize) {
        self.map
            .lease_batch(&COMMIT, hash, &[self.token.as_bytes()])
    }

    fn renew_batch(&self, hash: Hash128) -> (Batch, usize) {
        let lease = self.map.lease_millis().to_string();
        let more: [&[u8]; 2] = [lease.as_bytes(), self.token.as_bytes()];
        self.map.lease_batch(&RENEW, hash, &more)
    }

    fn release_batch(&self, hash: Hash128) -> (Batch, usize) {
        self.map
            .lease_batch(&RELEASE, hash, &[self.token.as_bytes()])
    }

    /// Processing succeeded: deletes the lease, so that the item stays remembered and later
    /// deliveries of it are dropped. `Ok(true)` if the lease was still this claim's; `Ok(false)`
    /// if it had ended and the item was taken over by another claim or swept, or another item
    /// overwrote the slot: the item may then be processed again (at least once).
    ///
    /// # Errors
    ///
    /// The server's errors: the lease then stays until it ends, and the item's redelivery is
    /// processed again after it. The claim is spent either way (it never forgets the item).
    pub fn commit(self) -> Result<bool, Error> {
        let server = self.map.server.clone();
        server.block_on(self.commit_via(Via::Blocking))
    }

    /// [`commit`](Self::commit), on the tokio connection.
    ///
    /// # Errors
    ///
    /// As [`commit`](Self::commit).
    pub async fn commit_async(self) -> Result<bool, Error> {
        self.commit_via(Via::Async).await
    }

    async fn commit_via(mut self, via: Via) -> Result<bool, Error> {
        let Some(hash) = self.hash.take() else {
            return Ok(false);
        };
        let (batch, s) = self.commit_batch(hash);
        self.map
            .lease_answer(s, self.map.server.send(via, &batch).await?)
    }

    /// Commits every claim of `claims` (of one map or several): per claim, in order, what
    /// [`commit`](Self::commit) would answer (`false` for one committed or forgotten before).
    /// One round trip per map and [`REQUEST_ITEMS`](crate::REQUEST_ITEMS) claims: one script
    /// per shard touched and 512 claims.
    ///
    /// # Errors
    ///
    /// As [`commit`](Self::commit), and every claim is spent either way (none forgets its
    /// item): after an error, the claims of the request that failed and of the maps not
    /// reached yet keep their leases until they end.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use seen_redis::{Server, SharedClaim, SharedOverwriteMap};
    /// # let server = Server::open("redis://127.0.0.1:6379")?;
    /// let map = SharedOverwriteMap::builder("inbox", 1_000_000).open_or_create(&server)?;
    /// let claims: Vec<SharedClaim> = map.claim_many(["msg-1", "msg-2"])?.into_iter().flatten().collect();
    /// // ... process the messages ...
    /// assert_eq!(SharedClaim::commit_many(claims)?, [true, true]);
    /// # Ok::<(), seen_redis::Error>(())
    /// ```
    pub fn commit_many(
        claims: impl IntoIterator<Item = SharedClaim<'a>>,
    ) -> Result<Vec<bool>, Error> {
        settle_blocking(claims, &COMMIT_MANY)
    }

    /// [`commit_many`](Self::commit_many), on the tokio connection.
    ///
    /// # Errors
    ///
    /// As [`commit_many`](Self::commit_many).
    pub async fn commit_many_async(
        claims: impl IntoIterator<Item = SharedClaim<'a>>,
    ) -> Result<Vec<bool>, Error> {
        settle_async(claims, &COMMIT_MANY).await
    }

    /// Forgets every claim of `claims` (of one map or several): per claim, in order, what
    /// [`forget`](Self::forget) would answer (`false` for one committed or forgotten before).
    /// One round trip per map and [`REQUEST_ITEMS`](crate::REQUEST_ITEMS) claims, where
    /// dropping them costs one each: what a consumer calls when a batch failed.
    ///
    /// # Errors
    ///
    /// The server's errors. Every claim is spent either way: after an error, the claims not
    /// forgotten keep their leases until they end (their items' redeliveries are refused
    /// until then, and processed after), as for a dropped claim whose forget fails.
    pub fn forget_many(
        claims: impl IntoIterator<Item = SharedClaim<'a>>,
    ) -> Result<Vec<bool>, Error> {
        settle_blocking(claims, &RELEASE_MANY)
    }

    /// [`forget_many`](Self::forget_many), on the tokio connection.
    ///
    /// # Errors
    ///
    /// As [`forget_many`](Self::forget_many).
    pub async fn forget_many_async(
        claims: impl IntoIterator<Item = SharedClaim<'a>>,
    ) -> Result<Vec<bool>, Error> {
        settle_async(claims, &RELEASE_MANY).await
    }

    /// Extends the lease to [`lease`](SharedOverwriteMap::lease) from now, for processing
    /// that takes longer than the lease. `Ok(false)` if the lease was no longer this claim's
    /// (it ended and was taken over or swept): stop processing, or accept a second one.
    ///
    /// # Errors
    ///
    /// The server's errors; the lease is then unchanged.
    pub fn renew(&self) -> Result<bool, Error> {
        self.map.server.block_on(self.renew_via(Via::Blocking))
    }

    /// [`renew`](Self::renew), on the tokio connection.
    ///
    /// # Errors
    ///
    /// As [`renew`](Self::renew).
    pub async fn renew_async(&self) -> Result<bool, Error> {
        self.renew_via(Via::Async).await
    }

    async fn renew_via(&self, via: Via) -> Result<bool, Error> {
        let Some(hash) = self.hash else {
            return Ok(false);
        };
        let (batch, s) = self.renew_batch(hash);
        self.map
            .lease_answer(s, self.map.server.send(via, &batch).await?)
    }

    /// Processing failed: forgets the item now, as dropping the claim would, and returns
    /// whether it erased it (`false` if its lease was no longer this claim's, or another item
    /// had overwritten the slot: nothing is touched then). After it returns `Ok`, the claim
    /// does nothing more.
    ///
    /// # Errors
    ///
    /// The server's errors; the claim then stays armed (calling `forget` again, or the drop,
    /// tries again).
    pub fn forget(&mut self) -> Result<bool, Error> {
        let server = self.map.server.clone();
        server.block_on(self.forget_via(Via::Blocking))
    }

    /// [`forget`](Self::forget), on the tokio connection: what async code calls when processing
    /// failed.
    ///
    /// # Errors
    ///
    /// As [`forget`](Self::forget).
    pub async fn forget_async(&mut self) -> Result<bool, Error> {
        self.forget_via(Via::Async).await
    }

    async fn forget_via(&mut self, via: Via) -> Result<bool, Error> {
        let Some(hash) = self.hash else {
            return Ok(false);
        };
        let (batch, s) = self.release_batch(hash);
        let erased = self
            .map
            .lease_answer(s, self.map.server.send(via, &batch).await?)?;
        self.hash = None;
        Ok(erased)
    }

    /// The claimed item's hash, or `None` once committed or forgotten.
    pub fn hash(&self) -> Option<Hash128> {
        self.hash
    }
}

/// [`SharedClaim::commit_many`] or [`SharedClaim::forget_many`]: spends `claims`, then runs
/// `script` on each map's live claims, blocking.
fn settle_blocking<'a>(
    claims: impl IntoIterator<Item = SharedClaim<'a>>,
    script: &Lua,
) -> Result<Vec<bool>, Error> {
    let (spent, maps) = spend_all(claims);
    let mut answers = vec![false; spent.len()];
    for (map, mine) in maps {
        let request: Vec<(Hash128, String)> =
            mine.iter().filter_map(|&i| spent[i].clone()).collect();
        let settled = map
            .server
            .block_on(map.settle_all(Via::Blocking, script, &request))?;
        for (i, answer) in mine.into_iter().zip(settled) {
            answers[i] = answer;
        }
    }
    Ok(answers)
}

/// [`settle_blocking`] on the tokio connections.
async fn settle_async<'a>(
    claims: impl IntoIterator<Item = SharedClaim<'a>>,
    script: &Lua,
) -> Result<Vec<bool>, Error> {
    let (spent, maps) = spend_all(claims);
    let mut answers = vec![false; spent.len()];
    for (map, mine) in maps {
        let request: Vec<(Hash128, String)> =
            mine.iter().filter_map(|&i| spent[i].clone()).collect();
        let settled = map.settle_all(Via::Async, script, &request).await?;
        for (i, answer) in mine.into_iter().zip(settled) {
            answers[i] = answer;
        }
    }
    Ok(answers)
}

/// Per claim, its hash and token, or `None` if it was committed or forgotten before; and the
/// maps the claims belong to, each with the indices of its live claims, in order.
type Spent<'a> = (
    Vec<Option<(Hash128, String)>>,
    Vec<(&'a SharedOverwriteMap, Vec<usize>)>,
);

/// Spends `claims` (their drops then do nothing): see [`Spent`].
fn spend_all<'a>(claims: impl IntoIterator<Item = SharedClaim<'a>>) -> Spent<'a> {
    let mut spent = Vec::new();
    let mut maps: Vec<(&'a SharedOverwriteMap, Vec<usize>)> = Vec::new();
    for mut claim in claims {
        let live = claim
            .hash
            .take()
            .map(|hash| (hash, std::mem::take(&mut claim.token)));
        if live.is_some() {
            match maps
                .iter_mut()
                .find(|(map, _)| std::ptr::eq(*map, claim.map))
            {
                Some((_, mine)) => mine.push(spent.len()),
                None => maps.push((claim.map, vec![spent.len()])),
            }
        }
        spent.push(live);
    }
    (spent, maps)
}

impl Drop for SharedClaim<'_> {
    /// Forgets the item unless the claim was committed or forgotten, errors ignored: blocking
    /// for a claim from `claim`; for one from `claim_async`, in a task on the [`Server`](crate::Server)'s own
    /// runtime, never the caller's, whose end (a `current_thread` runtime's `block_on`
    /// returning, a shutdown) would drop the task unrun (see the type docs).
    fn drop(&mut self) {
        let Some(hash) = self.hash.take() else {
            return;
        };
        if self.spawn {
            let (server, batch) = (self.map.server.clone(), self.release_batch(hash).0);
            if self.map.server.spawn(async move {
                let _ = server.send(Via::Blocking, &batch).await;
            }) {
                return;
            }
        }
        let _ = self.map.server.run(&self.release_batch(hash).0);
    }
}

impl std::fmt::Debug for SharedClaim<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedClaim")
            .field("map", &self.map.name)
            .field("hash", &self.hash)
            .finish_non_exhaustive()
    }
}
