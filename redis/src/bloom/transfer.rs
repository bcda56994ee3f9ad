//! Moving a filter between a local [`AtomicBloomFilter`] (or its file) and the server, byte for
//! byte: [`upload`](SharedBloomFilter::upload) and [`download`](SharedBloomFilter::download).

use std::path::Path;
use std::sync::LazyLock;

use redis::Value;
use seen::AtomicBloomFilter;
use seen::hash::StableHasher;

use super::SharedBloomFilter;
use crate::meta::{self, Begun, Meta};
use crate::script::Lua;
use crate::server::{Batch, Via};
use crate::{Error, Server, names};

/// An upload's merge of one shard: `KEYS[1]` the shard, `KEYS[2]` the upload's temporary key
/// of it; `ARGV[1]` the shard's guard offset, `ARGV[2]` the creation id. 1 once ORed in and
/// deleted; 0 if the temporary key is gone, -1 if the shard is (nothing written either way).
static MERGE: LazyLock<Lua> = LazyLock::new(|| {
    Lua::new(
        "upload merge",
        r"if redis.call('EXISTS', KEYS[2]) == 0 then return 0 end
local at = tonumber(ARGV[1])
if redis.call('GETRANGE', KEYS[1], at, at + 7) ~= ARGV[2] then return -1 end
redis.call('BITOP', 'OR', KEYS[1], KEYS[1], KEYS[2])
redis.call('DEL', KEYS[2])
return 1",
    )
});

/// The bytes moved per `GETRANGE` or `SETRANGE` by an upload or a download.
const TRANSFER_BYTES: u64 = 1 << 20;

impl SharedBloomFilter {
    /// Creates a filter called `name` holding exactly `local`'s bits: the same sizing, the same
    /// hasher seed, word for word. Its description is written first (`state=creating`, as
    /// `create` does: processes that open it wait); the bits are written under temporary keys
    /// of this upload, the shards created, the bits ORed into them (`BITOP OR`, atomic per
    /// shard), and only then is the filter `ready`. An upload that fails mid-way deletes its
    /// description, so that the name can be created again.
    ///
    /// # Errors
    ///
    /// [`Error::Exists`] if the name is taken: an upload never overwrites a filter.
    /// [`Error::Mismatch`] if it holds a structure of another kind; [`Error::Missing`] if the
    /// server lost the upload's keys before it finished; the server's errors.
    pub fn upload(
        server: &Server,
        name: &str,
        local: &AtomicBloomFilter<StableHasher>,
    ) -> Result<Self, Error> {
        names::check(name)?;
        let sizing = local.sizing();
        let builder = Self::builder(name, sizing.capacity)
            .fpr(sizing.fpr)
            .layout(sizing.layout)
            .seed(local.hasher().seed());
        let (meta, sizing, shards) = builder.meta()?;
        let id = server.block_on(meta::fresh_id(server, Via::Blocking, name))?;
        let meta = Meta { id, ..meta };
        let filter = Self::new(server, name, sizing, shards, local.hasher().seed(), id);
        match server.block_on(meta::begin(server, Via::Blocking, name, &meta)) {
            Ok(Begun::Won) => {}
            Ok(Begun::Found(_)) | Err(Error::Mismatch { field: "kind", .. }) => {
                // A description of the same kind with other parameters is the `Mismatch`
                // `begin` returns; of another kind, the name is taken all the same.
                return Err(Error::Exists {
                    name: name.to_owned(),
                });
            }
            Err(err) => return Err(err),
        }
        let result = filter.upload_bits(local);
        let result =
            result.and_then(|()| server.block_on(meta::finish(server, Via::Blocking, name, &meta)));
        if let Err(err) = result {
            server.block_on(meta::abandon(server, Via::Blocking, name, &meta));
            return Err(err);
        }
        Ok(filter)
    }

    /// The bits of `local` into this filter's shards, created here (see [`upload`](Self::upload)).
    fn upload_bits(&self, local: &AtomicBloomFilter<StableHasher>) -> Result<(), Error> {
        let (server, name) = (&self.server, &self.name);
        // Temporary keys of this upload only, in each shard's slot.
        let tag = format!("upload-{}", self.id.to_hex());
        let temp: Vec<String> = (0..self.keys.len() as u32)
            .map(|s| names::shard(name, s, &tag))
            .collect();
        for (s, key) in temp.iter().enumerate() {
            let words = self.shard_words(s);
            let first = s as u64 * self.blocks_per_shard * self.words_per_block();
            let mut batch = Batch::default();
            let k = batch.key(key);
            batch.push(k, {
                let mut c = redis::cmd("DEL");
                c.arg(key);
                c
            });
            let step = TRANSFER_BYTES / 8;
            let mut buf = vec![0u64; step as usize];
            let mut done = 0;
            while done < words {
                let n = step.min(words - done);
                let chunk = &mut buf[..n as usize];
                local.read_words(first + done, chunk)?;
                let bytes: Vec<u8> = chunk.iter().flat_map(|w| w.to_be_bytes()).collect();
                let mut cmd = redis::cmd("SETRANGE");
                cmd.arg(key).arg(done * 8).arg(bytes);
                batch.push(k, cmd);
                done += n;
                if batch.len() >= 16 {
                    server.run(&batch)?;
                    batch = Batch::default();
                    batch.key(key);
                }
            }
            server.run(&batch)?;
        }
        // The shards, empty with their guards, then the bits into them. One command per
        // request: a cluster pipeline refuses commands of two keys (these share a slot).
        let create = self.create_batch(self.id);
        meta::check_made(name, &create, &server.run(&create)?)?;
        for (s, (key, temp)) in self.keys.iter().zip(&temp).enumerate() {
            // One script: a temporary key or a shard lost since it was written (an eviction,
            // a `FLUSHALL`) fails the upload, never ORs nothing into the shard.
            let mut batch = Batch::default();
            let k = batch.key(key);
            let args = [self.guard_byte(s).to_string().into_bytes(), self.id.bytes()];
            batch.push_script(k, &MERGE, &[key, temp], &args);
            let lost = match server.run(&batch)?.first() {
                Some(Value::Int(1)) => continue,
                Some(Value::Int(0)) => temp,
                Some(Value::Int(-1)) => key,
                other => {
                    return Err(Error::corrupt(key, format!("the merge answered {other:?}")));
                }
            };
            return Err(Error::Missing {
                name: name.clone(),
                key: lost.clone(),
            });
        }
        Ok(())
    }

    /// [`upload`](Self::upload) of a filter saved to a file by
    /// [`AtomicBloomFilter::save`].
    ///
    /// # Errors
    ///
    /// As [`upload`](Self::upload), and [`Error::Local`] if the file cannot be read or is not
    /// an atomic Bloom filter's.
    pub fn upload_file(server: &Server, name: &str, path: impl AsRef<Path>) -> Result<Self, Error> {
        let local = AtomicBloomFilter::load(path)?;
        Self::upload(server, name, &local)
    }

    /// A local [`AtomicBloomFilter`] with this filter's sizing, hasher and bits, read shard by
    /// shard (`GETRANGE`, 1 MiB at a time). Each read is consistent; a download racing inserts
    /// holds every insert that returned before it started.
    ///
    /// # Errors
    ///
    /// [`Error::Missing`] if a shard is gone; [`Error::Local`] if this machine cannot allocate
    /// the filter; the server's errors.
    pub fn download(&self) -> Result<AtomicBloomFilter<StableHasher>, Error> {
        let local = AtomicBloomFilter::builder(self.sizing.capacity)
            .fpr(self.sizing.fpr)
            .layout(self.sizing.layout)
            .hasher(self.hasher)
            .build()?;
        for (s, key) in self.keys.iter().enumerate() {
            let words = self.shard_words(s);
            let first = s as u64 * self.blocks_per_shard * self.words_per_block();
            let mut batch = Batch::default();
            let k = batch.key(key);
            batch.push(k, {
                let mut c = redis::cmd("EXISTS");
                c.arg(key);
                c
            });
            let mut ranges = Vec::new();
            let mut done = 0;
            while done < words {
                let n = (TRANSFER_BYTES / 8).min(words - done);
                let mut cmd = redis::cmd("GETRANGE");
                cmd.arg(key).arg(done * 8).arg((done + n) * 8 - 1);
                batch.push(k, cmd);
                ranges.push((done, n));
                done += n;
            }
            // The guard last: a shard lost during the reads has none (see `guard`).
            let guard = self.guard_byte(s);
            batch.push(k, {
                let mut c = redis::cmd("GETRANGE");
                c.arg(key).arg(guard).arg(guard + 7);
                c
            });
            let replies = self.server.run(&batch)?;
            let guarded = matches!(replies.last(), Some(Value::BulkString(b)) if self.id.is(b));
            if !matches!(replies[0], Value::Int(1)) || !guarded {
                return Err(Error::Missing {
                    name: self.name.clone(),
                    key: key.clone(),
                });
            }
            for ((start, n), reply) in ranges.into_iter().zip(&replies[1..]) {
                let Value::BulkString(bytes) = reply else {
                    return Err(Error::corrupt(key, format!("GETRANGE answered {reply:?}")));
                };
                if bytes.len() as u64 != n * 8 {
                    return Err(Error::corrupt(
                        key,
                        format!("{} bytes where {} were written", bytes.len(), n * 8),
                    ));
                }
                let words: Vec<u64> = bytes
                    .chunks_exact(8)
                    .map(|b| u64::from_be_bytes(b.try_into().expect("8 bytes")))
                    .collect();
                local.union_words(first + start, &words)?;
            }
        }
        Ok(local)
    }

    /// [`download`](Self::download) saved to `path` ([`AtomicBloomFilter::save`]): the same
    /// file, byte for byte, as the local filter it was uploaded from would save.
    ///
    /// # Errors
    ///
    /// As [`download`](Self::download), and [`Error::Local`] if the file cannot be written.
    pub fn download_to_file(&self, path: impl AsRef<Path>) -> Result<(), Error> {
        self.download()?.save(path)?;
        Ok(())
    }
}
