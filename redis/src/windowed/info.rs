//! What a shared windowed filter holds, from the bits set on the server: [`info`](SharedWindowedBloomFilter::info)
//! and [`generation_info`](SharedWindowedBloomFilter::generation_info).

use redis::Value;
use seen::BloomInfo;

use super::SharedWindowedBloomFilter;
use super::scripts::CHECK;
use crate::Error;
use crate::server::{Batch, Via};

impl SharedWindowedBloomFilter {
    /// The request that counts the bits set of generations `from ..= to` in every shard
    /// (`BITCOUNT` of their bits, not their guards), each shard's counts followed by the ledger
    /// check of a read ([`CHECK`]): a generation counted as empty is not a lost one.
    pub(super) fn count_batch(&self, from: u64, to: u64) -> Batch {
        let mut batch = Batch::default();
        for s in 0..self.shards as usize {
            let guard = self.guard_byte(s);
            let mut keys = Vec::new();
            for g in from..=to {
                let key = self.key(s as u32, g);
                let k = batch.key(&key);
                let mut count = redis::cmd("BITCOUNT");
                count.arg(&key).arg(0).arg(guard - 1);
                batch.push(k, count);
                keys.push(key);
            }
            let mut args = vec![guard.to_string().into_bytes()];
            args.extend((from..=to).map(|g| g.to_string().into_bytes()));
            args.push(self.id.bytes());
            keys.push(self.ledger(s));
            let k = batch.key(&keys[keys.len() - 1]);
            let names: Vec<&str> = keys.iter().map(String::as_str).collect();
            batch.push_script(k, &CHECK, &names, &args);
        }
        batch
    }

    /// The bits set in each generation `from ..= to`, over every shard.
    pub(super) fn after_count(
        &self,
        from: u64,
        to: u64,
        replies: &[Value],
    ) -> Result<Vec<u64>, Error> {
        let per_shard = (to - from + 2) as usize;
        let mut set = vec![0u64; (to - from + 1) as usize];
        for (s, shard) in replies.chunks(per_shard).enumerate() {
            match shard.last() {
                Some(Value::Int(0)) => {}
                Some(Value::Int(-2)) => return Err(self.missing(self.ledger(s))),
                Some(Value::Int(k)) if (1..per_shard as i64).contains(k) => {
                    return Err(self.missing(self.key(s as u32, from + *k as u64 - 1)));
                }
                other => {
                    return Err(Error::corrupt(
                        &self.ledger(s),
                        format!("the count's check answered {other:?}"),
                    ));
                }
            }
            for (i, reply) in shard[..per_shard - 1].iter().enumerate() {
                match reply {
                    Value::Int(n) if *n >= 0 => set[i] += *n as u64,
                    other => {
                        return Err(Error::corrupt(
                            &self.key(s as u32, from + i as u64),
                            format!("BITCOUNT answered {other:?}"),
                        ));
                    }
                }
            }
        }
        Ok(set)
    }

    /// The window's info from the bits set of its live generations.
    pub(super) fn window_info(&self, sets: &[u64]) -> BloomInfo {
        let generations = self.generations();
        let mut info = BloomInfo::from_bits_set("SharedWindowedBloomFilter", &self.generation, 0);
        info.capacity = self
            .generation
            .capacity
            .saturating_mul(u64::from(generations));
        info.fpr = self.fpr;
        info.bytes = self
            .generation
            .bytes()
            .saturating_mul(u64::from(generations));
        info.layers = generations;
        let lens: Vec<u64> = sets
            .iter()
            .map(|&set| self.generation.estimated_len(set))
            .collect();
        info.estimated_len = lens.iter().fold(0u64, |a, &b| a.saturating_add(b));
        let pass: f64 = lens
            .iter()
            .map(|&len| {
                1.0 - if len == u64::MAX {
                    1.0
                } else {
                    self.generation.fpr_at(len)
                }
            })
            .product();
        info.estimated_fpr = 1.0 - pass;
        info
    }

    /// What the filter is and holds over its live generations: capacity (a generation's
    /// times `n + 1`), rate, bytes, and the distinct items and false-positive rate estimated
    /// from the bits set ([`BloomInfo`], as the local windowed filter's `info()`). One round
    /// trip; the server counts every byte of the live generations: for monitoring, not per
    /// item.
    ///
    /// # Errors
    ///
    /// [`Error::Missing`] if a live generation or a ledger is lost; the server's errors.
    pub fn info(&self) -> Result<BloomInfo, Error> {
        self.server.block_on(self.info_via(Via::Blocking))
    }

    /// [`info`](Self::info), on the tokio connection.
    ///
    /// # Errors
    ///
    /// As [`info`](Self::info).
    pub async fn info_async(&self) -> Result<BloomInfo, Error> {
        self.info_via(Via::Async).await
    }

    async fn info_via(&self, via: Via) -> Result<BloomInfo, Error> {
        let g = self.now(via).await?.generation;
        let from = g.saturating_sub(u64::from(self.periods));
        let replies = self.server.send(via, &self.count_batch(from, g)).await?;
        Ok(self.window_info(&self.after_count(from, g, &replies)?))
    }

    /// The info of one generation (its period's new items: capacity
    /// [`capacity`](Self::capacity)), from its bits set. A generation never written, or
    /// expired, is empty.
    ///
    /// # Errors
    ///
    /// As [`info`](Self::info).
    pub fn generation_info(&self, generation: u64) -> Result<BloomInfo, Error> {
        let replies = self.server.run(&self.count_batch(generation, generation))?;
        let set = self.after_count(generation, generation, &replies)?[0];
        Ok(BloomInfo::from_bits_set(
            "SharedWindowedBloomFilter",
            &self.generation,
            set,
        ))
    }
}
