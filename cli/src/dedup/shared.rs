//! `--redis URL --name NAME`: the structure that decides kept on a Redis or Valkey server, shared
//! by every run, on any machine, that names it ([`Shared`], from [`seen_redis`]).
//!
//! A record is printed iff the shared filter says its key is new: each shard sends its records'
//! keys of a chunk as one batch (`insert_many_hashes`, two round trips whatever its size), and
//! the server's atomic test-and-set tells exactly one of any number of racing runs that a key
//! is new. The keys are hashed as the local structures hash them (`hash_bytes` of the key's
//! bytes with the filter's [`seen::hash::StableHasher`]), so a key is the same item here, in a
//! local `--state` and in a service using the library.
//!
//! Nothing is deferred to the write, as a local `--state` does (`dedup/pending.rs`): another
//! run must find a key as soon as it is decided here, or both would print it. So a run that
//! stops part way may have inserted keys of records it did not write: a failure says so.
//!
//! What the flags may ask is decided in one place, [`plan`]; [`Shared::open`] builds it.

use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use seen::Layout;
use seen::hash::{Hash128, ItemHasher};
use seen::sizing::BlockedSizing;
use seen_redis::{Error, Server, SharedBloomFilter};

use super::Dedup;
use super::filter::capacity_for;
use crate::Failure;

/// How often, at most, a run measures the shared filter's fill for the overfill warning:
/// `BITCOUNT` reads every byte of the filter on the server (a few milliseconds for the 26 MiB
/// of the default --capacity and --fpr), and other runs fill it too.
const MEASURE_EVERY: Duration = Duration::from_secs(10);

/// The shared layout: the line layout, as the local `--fixed` filter's, for half the server
/// memory of the word layout at the default --fpr (22 bits a key at 1e-4, not 46) and rates
/// below 6.4e-6, which the word layout does not reach. On the server an insert is exactly once
/// in both layouts (one `BITFIELD` sets all of a key's bits).
const LAYOUT: Layout = Layout::Line;

/// What the flags ask to share.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Plan {
    /// A fixed-size Bloom filter for `capacity` keys at `fpr`.
    Bloom { capacity: u64, fpr: f64 },
}

/// What `--redis` shares for these flags, or why it cannot: the one place that maps the
/// structure flags to a shared structure (checked before anything is opened or locked).
pub(super) fn plan(args: &Dedup) -> Result<Plan, Failure> {
    let refuse = |why: &str| Err(Failure(format!("--redis {why}")));
    if args.state.is_some() {
        return refuse(
            "keeps the state on the server, for every run that names it: --state is the local \
             option; pass one or the other",
        );
    }
    if args.exact {
        return refuse(
            "shares a Bloom filter: --exact keeps every key's fingerprint in this process, \
             which other runs cannot see; drop --exact",
        );
    }
    if args.grow {
        return refuse(
            "shares a fixed-size filter (a shared filter cannot grow): drop --grow, and size it \
             with --capacity",
        );
    }
    if args.remember.is_some() {
        return refuse("cannot share an overwrite map yet: drop --remember");
    }
    let fpr = args.sizing.fpr;
    let capacity = match args.sizing.memory {
        Some(bytes) => capacity_for(bytes, fpr)
            .map_err(|e| Failure(format!("cannot build the filter: {e}")))?,
        None => args.sizing.capacity,
    };
    match args.window {
        None => Ok(Plan::Bloom { capacity, fpr }),
        // The shared windowed filter (`seen_redis::SharedWindowedFilter`) comes here: a
        // `Plan::Windowed`, opened by `Shared::open` into a `Structure::Windowed`.
        Some(_) => refuse(
            "cannot share a windowed filter yet: drop --window (and --period), or run without \
             --redis",
        ),
    }
}

/// The structure on the server. A windowed filter will be a variant of its own.
enum Structure {
    Bloom(SharedBloomFilter),
}

/// The shared structure of a run, and what measures its fill.
pub(super) struct Shared {
    structure: Structure,
    /// What `--redis` named (for messages).
    at: String,
    /// For `BITCOUNT`: the URLs, and a connection kept between measures.
    urls: Vec<String>,
    probe: Mutex<Probe>,
}

/// The connection that measures the fill, and when it last did.
#[derive(Default)]
struct Probe {
    conn: Option<Box<dyn redis::ConnectionLike + Send>>,
    last: Option<Instant>,
}

/// The first failure of the shared filter in this run: every shard that comes after it decides
/// nothing more (it would insert keys of records that are not going to be written).
static FAILED: OnceLock<String> = OnceLock::new();

impl Shared {
    /// Connects to `--redis` and creates the filter of `--name`, or opens it if it exists with
    /// the same parameters.
    pub(super) fn open(args: &Dedup) -> Result<Self, Failure> {
        let plan = plan(args)?;
        let name = args.name.as_deref().expect("clap: --redis requires --name");
        let at = args.redis.join(" ");
        let server = match args.redis.as_slice() {
            [url] => Server::open(url),
            nodes => Server::cluster(nodes),
        }
        .map_err(|e| {
            Failure(match e {
                // At the start nothing was written: the client's own words say why.
                Error::Connection { source, .. } => {
                    format!("--redis {at}: cannot reach the server: {source}")
                }
                e => format!("--redis {at}: {e}{}", cluster_hint(&e)),
            })
        })?;
        let cannot = |e: Error| {
            let hint = match &e {
                Error::Mismatch { field: "kind", .. } => {
                    " (the name holds another kind of shared structure: pass another --name)"
                }
                Error::Mismatch { .. } => {
                    " (pass the --capacity and --fpr it was created with, or another --name)"
                }
                _ => cluster_hint(&e),
            };
            Failure(format!(
                "--redis {at}: cannot open the shared filter: {e}{hint}"
            ))
        };
        let structure = match plan {
            Plan::Bloom { capacity, fpr } => Structure::Bloom(
                SharedBloomFilter::builder(name, capacity)
                    .fpr(fpr)
                    .layout(LAYOUT)
                    .create(&server)
                    .map_err(cannot)?,
            ),
        };
        Ok(Self {
            structure,
            at,
            urls: args.redis.clone(),
            probe: Mutex::new(Probe::default()),
        })
    }

    fn bloom(&self) -> &SharedBloomFilter {
        match &self.structure {
            Structure::Bloom(f) => f,
        }
    }

    /// The filter's name (`--name`).
    pub(super) fn name(&self) -> &str {
        self.bloom().name()
    }

    /// The sizing the filter was created with.
    pub(super) fn sizing(&self) -> BlockedSizing {
        self.bloom().sizing()
    }

    /// The hash of a key: the filter's hasher, as a local filter's.
    pub(super) fn hash(&self, key: &[u8]) -> Hash128 {
        self.bloom().hasher().hash_bytes(key)
    }

    /// Inserts a batch of keys, appending whether each was new to `new`; on a failure (this
    /// batch's, or an earlier one's in this run), nothing is appended and the error says what
    /// failed.
    pub(super) fn insert_many_hashes(
        &self,
        hashes: &[Hash128],
        new: &mut Vec<bool>,
    ) -> Result<(), String> {
        if let Some(why) = FAILED.get() {
            return Err(why.clone());
        }
        let done = match &self.structure {
            Structure::Bloom(f) => f.insert_many_hashes(hashes, new),
        };
        done.map(drop).map_err(|e| {
            let why = format!(
                "the shared filter {} on {} failed: {e}{}",
                self.bloom().name(),
                self.at,
                cluster_hint(&e)
            );
            FAILED.get_or_init(|| why).clone()
        })
    }

    /// The filter's keys estimated from its bits set, at most once per [`MEASURE_EVERY`]
    /// unless `now`; `None` when not due, or when the measure failed (it only feeds a
    /// warning: the next insert reports a server that is gone).
    pub(super) fn measure(&self, now: bool) -> Option<u64> {
        let mut probe = self.probe.lock().unwrap_or_else(PoisonError::into_inner);
        if !now && probe.last.is_some_and(|t| t.elapsed() < MEASURE_EVERY) {
            return None;
        }
        probe.last = Some(Instant::now());
        let set = self.bits_set(&mut probe);
        if set.is_none() {
            probe.conn = None;
        }
        Some(estimated_len(set?, &self.sizing()))
    }

    /// The bits set in the filter's keys (`BITCOUNT`, one a key).
    fn bits_set(&self, probe: &mut Probe) -> Option<u64> {
        if probe.conn.is_none() {
            probe.conn = Some(match self.urls.as_slice() {
                [url] => {
                    let conn = redis::Client::open(url.as_str())
                        .ok()?
                        .get_connection_with_timeout(seen_redis::DEFAULT_TIMEOUT)
                        .ok()?;
                    conn.set_read_timeout(Some(seen_redis::DEFAULT_TIMEOUT))
                        .ok()?;
                    Box::new(conn)
                }
                nodes => Box::new(
                    redis::cluster::ClusterClient::new(nodes.to_vec())
                        .ok()?
                        .get_connection()
                        .ok()?,
                ),
            });
        }
        let conn = probe.conn.as_mut()?;
        let mut set = 0u64;
        for key in self.bloom().keys() {
            set += redis::cmd("BITCOUNT")
                .arg(key)
                .query::<u64>(&mut **conn)
                .ok()?;
        }
        Some(set)
    }

    /// One line for `--stats`.
    pub(super) fn describe(&self) -> String {
        let f = self.bloom();
        let sizing = f.sizing();
        let held = self
            .measure(true)
            .map_or("its fill could not be read".to_owned(), |n| {
                format!("about {n} keys now (all runs together)")
            });
        format!(
            "shared Bloom filter {} on {} (in {} key{}): line layout, {} bytes, capacity {}, fpr \
             {}, {held}",
            f.name(),
            self.at,
            f.keys().len(),
            if f.keys().len() == 1 { "" } else { "s" },
            sizing.bytes(),
            sizing.capacity,
            sizing.fpr
        )
    }
}

/// What to do about a cluster's redirection sent to a client of one server.
fn cluster_hint(e: &Error) -> &'static str {
    match e {
        Error::Server { code, .. } if ["MOVED", "ASK", "CLUSTERDOWN"].contains(&code.as_str()) => {
            " (the server is a node of a Redis Cluster: pass --redis for two or more of its \
             nodes)"
        }
        _ => "",
    }
}

/// The keys a filter of `sizing` holds with `set` of its bits set: the library's estimate
/// (`AtomicBloomFilter::estimated_len`), `-blocks · ln(1 - X/m) / (1 - (1 - 1/B)^k)`; `u64::MAX`
/// when every bit is set.
fn estimated_len(set: u64, sizing: &BlockedSizing) -> u64 {
    let m = sizing.bits as f64;
    if set as f64 >= m {
        return u64::MAX;
    }
    let b = f64::from(sizing.layout.block_bits());
    let per_item = -(f64::from(sizing.hashes) * (-1.0 / b).ln_1p()).exp_m1();
    (-(sizing.blocks as f64) * (-(set as f64) / m).ln_1p() / per_item).round() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The estimate from a count of bits is the library's from the words that hold them.
    #[test]
    fn the_fill_estimate_is_the_librarys() {
        let local = seen::AtomicBloomFilter::builder(20_000)
            .fpr(1e-3)
            .layout(LAYOUT)
            .build()
            .unwrap();
        for i in 0..15_000u64 {
            local.insert(&i);
        }
        let sizing = local.sizing();
        let mut words = vec![0u64; (sizing.bits / 64) as usize];
        local.read_words(0, &mut words);
        let set = words.iter().map(|w| u64::from(w.count_ones())).sum();
        assert_eq!(estimated_len(set, &sizing), local.estimated_len());
        let n = estimated_len(set, &sizing);
        assert!((14_000..16_000).contains(&n), "{n}");
        assert_eq!(estimated_len(sizing.bits, &sizing), u64::MAX);
    }
}
