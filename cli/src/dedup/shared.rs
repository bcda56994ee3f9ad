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
//! With `--window W --period P` the structure is a [`SharedWindowedBloomFilter`] of `n = W / P`
//! periods aligned on the Unix epoch, in the word layout: the local `--window` filter's
//! semantics and bits (an item has the same block and bits in each generation as in the local
//! windowed filter). Its time is the server's (`TIME`), or with `--time-field` a clock the
//! records' times move, as the local filter's: see [`Plan::Windowed`].
//!
//! What the flags may ask is decided in one place, [`plan`]; [`Shared::open`] builds it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use seen::Layout;
use seen::clock::ManualClock;
use seen::hash::{Hash128, ItemHasher};
use seen::sizing::BlockedSizing;
use seen_redis::{Error, Server, SharedBloomFilter, SharedWindowedBloomFilter};

use super::Dedup;
use super::filter::{build_failure, capacity_for, generations};
use crate::Failure;
use crate::units::format_duration;

/// How often, at most, a run measures the shared filter's fill for the overfill warning: the
/// library's `info()` counts every byte of the filter on the server (`BITCOUNT`: a few
/// milliseconds for the 26 MiB of the default --capacity and --fpr), and other runs fill it
/// too.
const MEASURE_EVERY: Duration = Duration::from_secs(10);

/// The shared layout: the line layout, as the local `--fixed` filter's, for half the server
/// memory of the word layout at the default --fpr (22 bits a key at 1e-4, not 46) and rates
/// below 6.4e-6, which the word layout does not reach. On the server an insert is exactly once
/// in both layouts (one `BITFIELD` sets all of a key's bits).
const LAYOUT: Layout = Layout::Line;

/// The shared windowed layout: the word layout, the local `--window` filter's, so an item has
/// the same block and bits in each generation as there and `--fpr` reaches the same rates
/// (`seen size --window W --period P` says). Each generation is its own key on the server, so
/// the line layout would take less of its memory, but a lookup reads every live generation,
/// a word of each here and about a line (7 or 8 words) there: measured on 200,000 records
/// (160,000 distinct) at `--window 7d --period 1d --capacity 1000000`, the line layout took
/// 3.6 MB a generation instead of 10.2, but 2.6 times the server's CPU on new keys (6.0 s,
/// not 2.3) and 6.2 times on repeats (3.6 s, not 0.6). Inserts are exactly-once in both (one
/// `BITFIELD` sets all of a key's bits).
const WINDOW_LAYOUT: Layout = Layout::Word;

/// What the flags ask to share.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Plan {
    /// A fixed-size Bloom filter for `capacity` keys at `fpr`.
    Bloom { capacity: u64, fpr: f64 },
    /// A windowed filter of `periods` (`--window / --period`) aligned periods, `capacity` new
    /// keys a period, `fpr` over the window. On the server's time, or with `records`
    /// (`--time-field`) on a clock that the records' times move, never back, as the local
    /// filter's: a batch then holds records of one period, and runs that share the name must
    /// read records of about the same times (their clocks within a period of each other) for
    /// the exactly-once promise to hold, as the library says of a clock of event times.
    Windowed {
        capacity: u64,
        fpr: f64,
        periods: u32,
        period: Duration,
        records: bool,
    },
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
    let Some(window) = args.window else {
        return Ok(Plan::Bloom { capacity, fpr });
    };
    let period = args.period.expect("clap: --window requires --period");
    let (generations, _) = generations(window, period)?;
    // The generation's sizing, checked before anything is opened: the local --window's
    // message when --fpr is below what the layout reaches.
    seen::sizing::window(capacity, generations, fpr).map_err(|e| build_failure(e, args))?;
    Ok(Plan::Windowed {
        capacity,
        fpr,
        periods: generations - 1,
        period,
        records: args.time_field.is_some(),
    })
}

/// The structure on the server.
enum Structure {
    Bloom(SharedBloomFilter),
    Windowed {
        filter: SharedWindowedBloomFilter,
        /// With `--time-field`: the filter's clock, which the records' times set.
        records: Option<ManualClock>,
        /// The last generation read (the server's time is read again now and then, which
        /// can fail: the overfill count then stays in the last one).
        generation: AtomicU64,
    },
}

/// The shared structure of a run, and what measures its fill.
pub(super) struct Shared {
    structure: Structure,
    /// What `--redis` named (for messages).
    at: String,
    /// When the fill was last measured, and which generation.
    probe: Mutex<Probe>,
}

/// When the fill was last measured, and which generation (a windowed filter's: a new one is
/// measured at once, since other runs may have filled it).
#[derive(Default)]
struct Probe {
    last: Option<Instant>,
    generation: u64,
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
            Failure(format!(
                "--redis {at}: cannot open the shared filter: {e}{}",
                hint(&e)
            ))
        };
        let structure = match plan {
            Plan::Bloom { capacity, fpr } => Structure::Bloom(
                SharedBloomFilter::builder(name, capacity)
                    .fpr(fpr)
                    .layout(LAYOUT)
                    .open_or_create(&server)
                    .map_err(cannot)?,
            ),
            Plan::Windowed {
                capacity,
                fpr,
                periods,
                period,
                records,
            } => {
                let builder = SharedWindowedBloomFilter::builder(name, capacity)
                    .fpr(fpr)
                    .periods(periods)
                    .period(period)
                    .layout(WINDOW_LAYOUT);
                // From records, the clock starts at 0 (as the local filter's): each batch sets
                // it to its records' time first.
                let clock = records.then(|| ManualClock::new(Duration::ZERO));
                let builder = match &clock {
                    Some(clock) => builder.clock(clock.clone()),
                    None => builder,
                };
                let filter = builder.open_or_create(&server).map_err(cannot)?;
                let generation = AtomicU64::new(filter.generation().map_err(cannot)?);
                Structure::Windowed {
                    filter,
                    records: clock,
                    generation,
                }
            }
        };
        Ok(Self {
            structure,
            at,
            probe: Mutex::new(Probe::default()),
        })
    }

    /// The filter's name (`--name`).
    pub(super) fn name(&self) -> &str {
        match &self.structure {
            Structure::Bloom(f) => f.name(),
            Structure::Windowed { filter, .. } => filter.name(),
        }
    }

    /// The sizing the filter was created with (a windowed filter's: one generation's).
    pub(super) fn sizing(&self) -> BlockedSizing {
        match &self.structure {
            Structure::Bloom(f) => f.sizing(),
            Structure::Windowed { filter, .. } => filter.sizing(),
        }
    }

    /// The hash of a key: the filter's hasher, as a local filter's.
    pub(super) fn hash(&self, key: &[u8]) -> Hash128 {
        match &self.structure {
            Structure::Bloom(f) => f.hasher().hash_bytes(key),
            Structure::Windowed { filter, .. } => filter.hasher().hash_bytes(key),
        }
    }

    /// Whether the capacity is of each period (a windowed filter), not of the whole filter.
    pub(super) fn per_period(&self) -> bool {
        matches!(self.structure, Structure::Windowed { .. })
    }

    /// The rate the filter keeps to while it holds at most its capacity (a windowed filter's:
    /// over the window, each generation at most its capacity).
    pub(super) fn expected_fpr(&self) -> f64 {
        match &self.structure {
            Structure::Bloom(f) => f.sizing().expected_fpr,
            Structure::Windowed { filter, .. } => filter.fpr(),
        }
    }

    /// A windowed filter's current generation (0 for a Bloom filter): the time since the Unix
    /// epoch over the period, by the filter's clock. When the server's time cannot be read
    /// again, the last one read.
    pub(super) fn generation(&self) -> u64 {
        match &self.structure {
            Structure::Bloom(_) => 0,
            Structure::Windowed {
                filter, generation, ..
            } => match filter.generation() {
                Ok(g) => {
                    generation.store(g, Ordering::Relaxed);
                    g
                }
                Err(_) => generation.load(Ordering::Relaxed),
            },
        }
    }

    /// With `--time-field`: the windowed filter's clock, which the records' times set, its
    /// period and the window (both in nanoseconds).
    pub(super) fn records_clock(&self) -> Option<(&ManualClock, u64, u64)> {
        match &self.structure {
            Structure::Windowed {
                filter,
                records: Some(clock),
                ..
            } => {
                let period = filter.period().as_nanos() as u64;
                Some((
                    clock,
                    period,
                    period.saturating_mul(u64::from(filter.periods())),
                ))
            }
            _ => None,
        }
    }

    /// Stops the shared filter for the rest of the run (a record refused before its key was
    /// sent): every later batch fails with `why` and inserts nothing.
    pub(super) fn fail(&self, why: &str) {
        let _ = FAILED.set(why.to_owned());
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
            Structure::Bloom(f) => f.insert_many_hashes(hashes.iter().copied(), new),
            Structure::Windowed { filter, .. } => {
                filter.insert_many_hashes(hashes.iter().copied(), new)
            }
        };
        done.map(drop).map_err(|e| {
            let why = format!(
                "the shared filter {} on {} failed: {e}{}",
                self.name(),
                self.at,
                cluster_hint(&e)
            );
            FAILED.get_or_init(|| why).clone()
        })
    }

    /// The filter's keys (a windowed filter's: its current generation's, the new keys of this
    /// period) estimated from its bits set, at most once per [`MEASURE_EVERY`] unless `now`; `None` when not due, or when the measure failed (it only feeds a
    /// warning: the next insert reports a server that is gone).
    pub(super) fn measure(&self, now: bool) -> Option<u64> {
        let generation = self.generation();
        let mut probe = self.probe.lock().unwrap_or_else(PoisonError::into_inner);
        if !now
            && probe.generation == generation
            && probe.last.is_some_and(|t| t.elapsed() < MEASURE_EVERY)
        {
            return None;
        }
        probe.last = Some(Instant::now());
        probe.generation = generation;
        // The library's count (`BITCOUNT` on the server, one request); a failure only skips
        // the warning: the next insert reports a server that is gone.
        let info = match &self.structure {
            Structure::Bloom(f) => f.info(),
            Structure::Windowed { filter, .. } => filter.generation_info(generation),
        };
        info.ok().map(|info| info.estimated_len)
    }

    /// One line for `--stats`.
    pub(super) fn describe(&self) -> String {
        let measured = self.measure(true);
        match &self.structure {
            Structure::Bloom(f) => {
                let sizing = f.sizing();
                let held = measured.map_or("its fill could not be read".to_owned(), |n| {
                    format!("about {n} keys now (all runs together)")
                });
                format!(
                    "shared Bloom filter {} on {} (in {} key{}): line layout, {} bytes, capacity \
                     {}, fpr {}, {held}",
                    f.name(),
                    self.at,
                    f.keys().len(),
                    if f.keys().len() == 1 { "" } else { "s" },
                    sizing.bytes(),
                    sizing.capacity,
                    sizing.fpr
                )
            }
            Structure::Windowed {
                filter, records, ..
            } => {
                let sizing = filter.sizing();
                let period = filter.period();
                let held = measured.map_or("its fill could not be read".to_owned(), |n| {
                    format!("about {n} new keys in this period (all runs together)")
                });
                format!(
                    "shared windowed filter {} on {}: --window {} --period {} ({} generations \
                     of {} key{} each, expiring on their own; time: {}): word layout, {} bytes \
                     a generation, capacity {} a period, fpr {} over the window, {held}",
                    filter.name(),
                    self.at,
                    format_duration(period * filter.periods()),
                    format_duration(period),
                    filter.generations(),
                    filter.shards(),
                    if filter.shards() == 1 { "" } else { "s" },
                    if records.is_some() {
                        "the records'"
                    } else {
                        "the server's"
                    },
                    sizing.bytes(),
                    sizing.capacity,
                    filter.fpr()
                )
            }
        }
    }
}

/// What to do about an error at open: for a mismatch, the flags that match the structure the
/// name holds; for a cluster's redirection, the nodes.
fn hint(e: &Error) -> String {
    let Error::Mismatch {
        field,
        stored,
        requested,
        ..
    } = e
    else {
        return cluster_hint(e).to_owned();
    };
    match (*field, stored.as_str(), requested.as_str()) {
        ("kind", "bloom", "window") => " (the name holds a shared Bloom filter, created without \
                                        --window: drop --window and --period, or use another \
                                        --name)"
            .to_owned(),
        ("kind", "window", _) => " (the name holds a shared windowed filter: pass the --window \
                                  and --period it was created with, or use another --name)"
            .to_owned(),
        ("kind", ..) => {
            " (the name holds another kind of structure: use another --name)".to_owned()
        }
        ("periods", ..) => format!(
            " (its --window is {stored} times its --period, not {requested}: pass the --window \
             and --period it was created with, or use another --name)"
        ),
        ("period_ns", ..) => format!(
            " (its --period is {}, not {}: pass the --window and --period it was created with, or \
             use another --name)",
            nanos(stored),
            nanos(requested)
        ),
        _ => " (pass the --capacity and --fpr it was created with, or another --name)".to_owned(),
    }
}

/// A description's duration in nanoseconds, as the flags write it (as is if it is no number).
fn nanos(text: &str) -> String {
    text.parse().map_or(text.to_owned(), |n| {
        format_duration(Duration::from_nanos(n))
    })
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
