//! The structure that decides: built from the arguments or loaded from `--state`, checked
//! against them, saved, described.

use std::io;
use std::path::Path;
use std::time::{Duration, SystemTime};

use seen::builder::Rotation;
use seen::clock::{ManualClock, TimeBase};
use seen::hash::{Hash128, ItemHasher, StableHasher};
use seen::{AtomicBloomFilter, Error, GrowingBloomFilter, OverwriteMap, WindowedBloomFilter};

use super::shared::Shared;
use super::{Dedup, Overfill};
use crate::Failure;
use crate::units::format_duration;

/// The structure that decides. Shared by the workers (the hasher, and lookups of the filters
/// that only gain items) and the sequencer.
pub(super) enum Filter {
    /// The exact set lives in the shards (it is not concurrent): `ExactSet`, one a shard.
    Exact,
    Bloom(AtomicBloomFilter),
    Growing(GrowingBloomFilter),
    Windowed {
        filter: Box<WindowedBloomFilter<StableHasher, ManualClock>>,
        clock: ManualClock,
        period: Duration,
        /// Times come from the records, not the wall clock.
        from_records: bool,
    },
    Remember(OverwriteMap),
    /// On a Redis or Valkey server, shared by every run that names it (`--redis`): never
    /// deferred (no `--state`), decided a batch at a time.
    Shared(Box<Shared>),
}

impl Filter {
    /// The filter of `--state` if its file exists (checked against the arguments), else a
    /// new one.
    pub(super) fn open(args: &Dedup) -> Result<Self, Failure> {
        if !args.redis.is_empty() {
            return Ok(Self::Shared(Box::new(Shared::open(args)?)));
        }
        // The state's path was checked before it was locked (`check_state`).
        let Some(path) = args.state.as_ref().filter(|p| p.exists()) else {
            return Self::new(args);
        };
        let name = path.display();
        // Another structure: say which, and the flags that open it.
        let cannot = |e: Error| match e {
            Error::WrongStructure { found, .. } => other_structure(path, found, args),
            e => Failure(format!("cannot load the state {name}: {e}")),
        };
        let loaded = if args.fixed {
            Self::Bloom(
                load_state(
                    path,
                    |p| AtomicBloomFilter::load(p),
                    |input, hasher| AtomicBloomFilter::read_from_trusting_hasher(input, hasher),
                )
                .map_err(cannot)?,
            )
        } else if let Some(window) = args.window {
            let period = args.period.expect("clap: --window requires --period");
            let clock = ManualClock::new(Duration::ZERO);
            let filter = load_state(
                path,
                |p| WindowedBloomFilter::load(p),
                |input, hasher| WindowedBloomFilter::read_from_trusting_hasher(input, hasher),
            )
            .map_err(cannot)?
            .with_clock(clock.clone());
            let (generations, _) = generations(window, period)?;
            let asked = (Rotation::EveryAligned(period), generations);
            if (filter.rotation(), filter.generations()) == (asked.0, generations - 1)
                && filter.time_base() == TimeBase::Unknown
            {
                // Before a window meant what it says, `--window W` kept W / PERIOD
                // generations, so a repeat was dropped for W - PERIOD at least (such a state
                // does not say which clock it follows; today's always do).
                let kept = period * (generations - 2);
                return Err(Failure(if kept.is_zero() {
                    format!(
                        "the state {name} was written by an older seen for --window {} --period \
                         {}, which kept a key for less than one period; it is not a window of \
                         --window {} now: use another state file",
                        format_duration(window),
                        format_duration(period),
                        format_duration(window)
                    )
                } else {
                    format!(
                        "the state {name} was written by an older seen for --window {} --period \
                         {}, which kept a key for {} at least: to go on with it, pass --window {} \
                         --period {} (which now means that); for a {} window, use another state \
                         file",
                        format_duration(window),
                        format_duration(period),
                        format_duration(kept),
                        format_duration(kept),
                        format_duration(period),
                        format_duration(window)
                    )
                }));
            }
            if (filter.rotation(), filter.generations()) != asked {
                return Err(Failure(format!(
                    "the state {name} holds a window of {}, not --window {} --period {}: {}",
                    match filter.rotation() {
                        Rotation::EveryAligned(p) if filter.generations() > 1 => format!(
                            "{} generations of {} (--window {} --period {})",
                            filter.generations(),
                            format_duration(p),
                            format_duration(p * (filter.generations() - 1)),
                            format_duration(p)
                        ),
                        other => format!("{} generations rotated {other:?}", filter.generations()),
                    },
                    format_duration(window),
                    format_duration(period),
                    open_with(&window_flags(&filter)),
                )));
            }
            // The clock the state follows: a run on the other would jump its generations.
            let records = args.time_field.is_some();
            let filter = match (filter.time_base(), records) {
                (TimeBase::Wall, true) => {
                    return Err(Failure(format!(
                        "the state {name} follows the wall clock (it was built without \
                         --time-field): drop --time-field, or use another state file"
                    )));
                }
                (TimeBase::Other, false) => {
                    return Err(Failure(format!(
                        "the state {name} follows the records' times (it was built with \
                         --time-field): pass --time-field, or use another state file"
                    )));
                }
                // A state of an older seen does not say: from now on it does.
                (_, records) => filter.with_time_base(time_base(records)),
            };
            let filter = Self::windowed(filter, clock, period, args);
            if records {
                filter.check_ahead(path, period, args)?;
            }
            filter
        } else if let Some(later) = args.remember {
            let map = load_state(
                path,
                |p| OverwriteMap::load(p),
                |input, hasher| OverwriteMap::read_from_trusting_hasher(input, hasher),
            )
            .map_err(cannot)?;
            let asked = seen::sizing::overwrite_buckets(later, args.remember_probability)
                .map_err(|e| Failure(format!("cannot build the filter: {e}")))?;
            if map.buckets() != asked {
                return Err(Failure(format!(
                    "the state {name} holds an overwrite map of {} buckets, not the {asked} of \
                     --remember {later} --remember-probability {}: {}",
                    map.buckets(),
                    args.remember_probability,
                    open_with(&map_flags(&map, args))
                )));
            }
            Self::Remember(map)
        } else {
            let growing = load_state(
                path,
                |p| GrowingBloomFilter::load(p),
                |input, hasher| GrowingBloomFilter::read_from_trusting_hasher(input, hasher),
            );
            match growing {
                Ok(filter) => Self::Growing(filter),
                Err(e) => return Err(cannot(e)),
            }
        };
        let held = match &loaded {
            Self::Growing(f) => Some((f.capacity(), f.fpr(), growing_flags(f))),
            Self::Bloom(f) => Some((f.capacity(), f.fpr(), bloom_flags(f))),
            Self::Windowed { filter, .. } => {
                Some((filter.capacity(), filter.fpr(), window_flags(filter)))
            }
            Self::Exact | Self::Remember(_) | Self::Shared(_) => None,
        };
        if let Some((capacity, fpr, flags)) = held
            && (capacity, fpr) != (args.sizing.capacity, args.sizing.fpr)
        {
            return Err(Failure(format!(
                "the state {name} holds a filter for --capacity {capacity} --fpr {fpr}, not \
                 --capacity {} --fpr {}: {}",
                args.sizing.capacity,
                args.sizing.fpr,
                open_with(&flags)
            )));
        }
        Ok(loaded)
    }

    pub(super) fn new(args: &Dedup) -> Result<Self, Failure> {
        Self::build(args).map_err(|e| build_failure(e, args))
    }

    pub(super) fn build(args: &Dedup) -> Result<Self, Error> {
        if let Some(bytes) = args.sizing.memory {
            let capacity = capacity_for(bytes, args.sizing.fpr)?;
            return Ok(Self::Bloom(
                AtomicBloomFilter::builder(capacity)
                    .fpr(args.sizing.fpr)
                    .layout(seen::Layout::Line)
                    .build()?,
            ));
        }
        if let Some(window) = args.window {
            let period = args.period.expect("clap: --window requires --period");
            // Checked by `run` before the filter is built.
            let generations = generations(window, period).map_or(1, |(g, _)| g);
            // From records, the clock starts at 0: the first record's time then rotates the
            // (empty) filter into its period.
            let clock = ManualClock::new(if args.time_field.is_some() {
                Duration::ZERO
            } else {
                now()
            });
            let filter = WindowedBloomFilter::builder(args.sizing.capacity)
                .fpr(args.sizing.fpr)
                .periods(generations - 1)
                .time_base(time_base(args.time_field.is_some()))
                .rotate_every_aligned(period)
                .clock(clock.clone())
                .build()?;
            return Ok(Self::windowed(filter, clock, period, args));
        }
        if let Some(later) = args.remember {
            return Ok(Self::Remember(OverwriteMap::for_window(
                later,
                args.remember_probability,
            )?));
        }
        Ok(if args.exact {
            Self::Exact
        } else if args.fixed {
            Self::Bloom(
                AtomicBloomFilter::builder(args.sizing.capacity)
                    .fpr(args.sizing.fpr)
                    .layout(seen::Layout::Line)
                    .build()?,
            )
        } else {
            // The default (and --grow): its rate stays under --fpr for any number of keys.
            // The line layout, as the fixed filter: the word layout's schedule ends where a
            // layer's rate falls below 6.4e-6 (6 layers, 63 times --capacity at --fpr 1e-4).
            Self::Growing(
                GrowingBloomFilter::builder(args.sizing.capacity)
                    .fpr(args.sizing.fpr)
                    .layout(seen::Layout::Line)
                    .build()?,
            )
        })
    }

    pub(super) fn windowed(
        filter: WindowedBloomFilter<StableHasher, ManualClock>,
        clock: ManualClock,
        period: Duration,
        args: &Dedup,
    ) -> Self {
        Self::Windowed {
            filter: Box::new(filter),
            clock,
            period,
            from_records: args.time_field.is_some(),
        }
    }

    /// The hash of a key (the hasher is the filter's: a loaded filter brings its seed).
    pub(super) fn hash(&self, key: &[u8]) -> Hash128 {
        match self {
            // The shard, and the exact set's fingerprint.
            Self::Exact => StableHasher::default().hash_bytes(key),
            Self::Bloom(f) => f.hasher().hash_bytes(key),
            Self::Growing(f) => f.hasher().hash_bytes(key),
            Self::Windowed { filter, .. } => filter.hasher().hash_bytes(key),
            Self::Remember(m) => m.hasher().hash_bytes(key),
            Self::Shared(f) => f.hash(key),
        }
    }

    /// Saves the filter to `path` (a temporary file, then a rename).
    pub(super) fn save(&self, path: &Path) -> Result<(), Error> {
        match self {
            Self::Bloom(f) => f.save(path),
            Self::Growing(f) => f.save(path),
            Self::Windowed { filter, .. } => filter.save(path),
            Self::Remember(m) => m.save(path),
            // No --state: the server keeps it.
            Self::Exact | Self::Shared(_) => Ok(()),
        }
    }

    /// What can overfill, for the warning ([`Overfill`]): a fixed filter's capacity (less the
    /// keys a loaded state holds), a windowed filter's capacity per period, a shared filter's
    /// capacity (less the keys it holds, measured now and then: other runs fill it too).
    pub(super) fn overfill(&self) -> Overfill {
        let (capacity, per_period, count) = match self {
            Self::Bloom(f) => (Some(f.capacity()), false, f.estimated_len()),
            Self::Windowed { filter, .. } => (Some(filter.capacity()), true, 0),
            Self::Shared(f) => (
                Some(f.sizing().capacity),
                f.per_period(),
                f.measure(true).unwrap_or(0),
            ),
            Self::Exact | Self::Growing(_) | Self::Remember(_) => (None, false, 0),
        };
        Overfill {
            capacity,
            per_period,
            count,
            generation: self.generation(),
            warned: false,
        }
    }

    /// What the overfill warning says: what passed which capacity, and the flag that helps.
    pub(super) fn overfill_warning(&self, args: &Dedup, capacity: u64) -> String {
        let rate = format!(
            "from here on it drops more new records as duplicates than --fpr {} says",
            args.sizing.fpr
        );
        match (self, args.sizing.memory, args.period) {
            (Self::Shared(f), _, Some(period)) if f.per_period() => format!(
                "more than --capacity {capacity} new keys in one --period {} in the shared \
                 filter {} (all runs together, estimated from its bits on the server): {rate}; \
                 a shared filter cannot grow: use another --name with a larger --capacity",
                format_duration(period),
                f.name()
            ),
            (Self::Shared(f), _, _) => format!(
                "more than the {capacity} distinct keys the shared filter {} is sized for (all \
                 runs together, estimated from its bits on the server): {rate}; a shared filter \
                 cannot grow: use another --name with a larger --capacity",
                f.name()
            ),
            (Self::Windowed { .. }, _, Some(period)) => format!(
                "more than --capacity {capacity} new keys in one --period {}: {rate}; pass a \
                 larger --capacity",
                format_duration(period)
            ),
            (_, Some(bytes), _) => format!(
                "more than the {capacity} distinct keys that --memory {} holds at --fpr {}: \
                 {rate}; drop --memory (the filter then grows past its capacity), or give it \
                 more",
                crate::units::format_size(bytes),
                args.sizing.fpr
            ),
            _ => format!(
                "more than --capacity {capacity} distinct keys in the fixed-size filter: {rate}; \
                 drop --fixed (the filter then grows past its capacity), or pass a larger \
                 --capacity"
            ),
        }
    }

    /// A shared filter's keys, measured on the server now and then (`None` when not due).
    pub(super) fn measured_len(&self) -> Option<u64> {
        match self {
            Self::Shared(f) => f.measure(false),
            _ => None,
        }
    }

    /// The current generation of a windowed filter, local or shared (0 for the others).
    pub(super) fn generation(&self) -> u64 {
        match self {
            Self::Windowed { filter, .. } => filter.generation(),
            Self::Shared(f) => f.generation(),
            _ => 0,
        }
    }

    /// Where a windowed filter on the records' times starts: the start of the period it has
    /// rotated to (records older than that are counted late, at its time), in nanoseconds
    /// since the Unix epoch, and that period's number. Zeros for the others.
    pub(super) fn start(&self) -> (u64, u64) {
        match self {
            Self::Windowed {
                filter,
                period,
                from_records: true,
                ..
            } => {
                let period = period.as_nanos() as u64;
                let index = filter
                    .next_rotation()
                    .map_or(0, |due| (due.as_nanos() as u64 / period).saturating_sub(1));
                (index.saturating_mul(period), index)
            }
            _ => (0, 0),
        }
    }

    /// Refuses (or with `--future clamp` warns about) a window on the records' times whose
    /// clock is ahead of the wall clock by more than `--future-tolerance`: saved by a run on a
    /// host whose clock was ahead, by a run with a larger `--future-tolerance`, or by an older
    /// seen, which let a record from the future move it. A run never moves the clock back, so the records dated now would be decided at
    /// its time, in a window that has moved past them: their keys' earlier records forgotten,
    /// they would be printed again. Compared by period, as the window rotates: the clock is
    /// ahead when the period it has rotated to begins after the wall clock plus the tolerance.
    fn check_ahead(&self, path: &Path, period: Duration, args: &Dedup) -> Result<(), Failure> {
        let (start, _) = self.start();
        let latest = now().saturating_add(args.future_tolerance);
        let start = Duration::from_nanos(start);
        if start <= latest {
            return Ok(());
        }
        let at = i128::try_from(start.as_nanos())
            .ok()
            .and_then(|ns| jiff::Timestamp::from_nanosecond(ns).ok())
            .map_or_else(|| format!("{}s", start.as_secs()), |t| t.to_string());
        let ahead = crate::units::format_approximate(start - now().min(start));
        let clock = format!(
            "the state {} follows its records' times, and its window's clock is in the \
             --period {} that begins at {at}, at least {ahead} ahead of the wall clock (more \
             than --future-tolerance {})",
            path.display(),
            format_duration(period),
            format_duration(args.future_tolerance)
        );
        if args.future == super::args::Future::Clamp {
            say!(
                "seen: warning: {clock}: going on with it (--future clamp): records dated \
                 before it count as at its time, and a repeat of a key printed more than \
                 --window before it is printed again"
            );
            return Ok(());
        }
        Err(Failure(format!(
            "{clock}: records dated now would be decided at its time, in a window that has \
             forgotten what came before it; wait until the wall clock is within the tolerance \
             of it, pass --future clamp to go on with it all the same, or use another state \
             file"
        )))
    }

    /// The false-positive rate now, for the filters that have one.
    pub(super) fn estimated_fpr(&self) -> Option<f64> {
        match self {
            Self::Bloom(f) => Some(f.info().estimated_fpr),
            Self::Growing(f) => Some(f.info().estimated_fpr),
            Self::Windowed { filter, .. } => Some(filter.info().estimated_fpr),
            // At or below capacity, at most the rate at capacity (a filter's rate only rises as
            // it fills); past it, unknown.
            Self::Shared(f) => f
                .measure(true)
                .filter(|&n| n <= f.sizing().capacity)
                .map(|_| f.expected_fpr()),
            Self::Exact | Self::Remember(_) => None,
        }
    }

    /// One line about the structure, for `--stats` (`exact`: the exact set's keys and bytes).
    pub(super) fn describe(&self, exact: (usize, usize), args: &Dedup) -> String {
        match self {
            Self::Exact => format!(
                "exact set of {} keys, {:.1} MiB, collision probability at most {:.1e} \
                 (96-bit fingerprints)",
                exact.0,
                exact.1 as f64 / f64::from(1 << 20),
                super::exact::collision_bound(exact.0)
            ),
            Self::Bloom(f) => f.info().to_string(),
            Self::Growing(f) => f.info().to_string(),
            Self::Windowed { filter, .. } => filter.info().to_string(),
            Self::Remember(m) => format!(
                "OverwriteMap: {} buckets, {} bytes, remembers a key across {} later records \
                 with probability {}",
                m.buckets(),
                m.memory_bytes(),
                args.remember.unwrap_or(0),
                args.remember_probability
            ),
            Self::Shared(f) => f.describe(),
        }
    }
}

/// The flags of `seen dedup` that open a state, and whether it follows the records' times
/// (then `--time-field` too, whose field or path the state does not know).
#[derive(Default)]
struct Fitting {
    flags: String,
    records: bool,
    /// What the flags stand for, if they are not all known.
    note: String,
}

/// The end of a message that refuses a state: the flags that open it.
fn open_with(fitting: &Fitting) -> String {
    format!(
        "open it with `{}`{}{}, or use another state file",
        fitting.flags,
        if fitting.records {
            " and --time-field (it follows its records' times)"
        } else {
            ""
        },
        fitting.note
    )
}

fn growing_flags(f: &GrowingBloomFilter) -> Fitting {
    Fitting {
        flags: format!("--capacity {} --fpr {}", f.capacity(), f.fpr()),
        ..Fitting::default()
    }
}

fn bloom_flags(f: &AtomicBloomFilter) -> Fitting {
    Fitting {
        flags: format!("--fixed --capacity {} --fpr {}", f.capacity(), f.fpr()),
        ..Fitting::default()
    }
}

fn window_flags(f: &WindowedBloomFilter<StableHasher, ManualClock>) -> Fitting {
    let records = f.time_base() == TimeBase::Other;
    match f.rotation() {
        Rotation::EveryAligned(p) if f.generations() > 1 => Fitting {
            flags: format!(
                "--window {} --period {} --capacity {} --fpr {}",
                format_duration(p * (f.generations() - 1)),
                format_duration(p),
                f.capacity(),
                f.fpr()
            ),
            records,
            note: String::new(),
        },
        // Not a state of `seen dedup` (the library's own window, rotated otherwise).
        other => Fitting {
            flags: "--window W --period P".to_string(),
            records,
            note: format!(
                " (none do: its {} generations are rotated {other:?}, not every period)",
                f.generations()
            ),
        },
    }
}

/// `--remember N` (and `--remember-probability`, the run's or the default) that sizes a map of
/// `map`'s buckets: the map's buckets grow with N, so a search finds one if there is one.
fn map_flags(map: &OverwriteMap, args: &Dedup) -> Fitting {
    let buckets = map.buckets();
    let default = crate::flags::DEFAULT_REMEMBER_PROBABILITY;
    let found = [args.remember_probability, default]
        .into_iter()
        .find_map(|q| {
            let size = |n: u64| seen::sizing::overwrite_buckets(n, q).unwrap_or(u64::MAX);
            // The fewest later records that size at least `buckets` buckets.
            let (mut low, mut high) = (1u64, 1u64 << 62);
            while low < high {
                let mid = low + (high - low) / 2;
                if size(mid) >= buckets {
                    high = mid;
                } else {
                    low = mid + 1;
                }
            }
            (size(low) == buckets).then_some((low, q))
        });
    match found {
        Some((later, q)) if q == default => Fitting {
            flags: format!("--remember {later}"),
            ..Fitting::default()
        },
        Some((later, q)) => Fitting {
            flags: format!("--remember {later} --remember-probability {q}"),
            ..Fitting::default()
        },
        None => Fitting {
            flags: "--remember N --remember-probability Q".to_string(),
            records: false,
            note: format!(
                " for an N and a Q that size {buckets} buckets (`seen size --remember N \
                 --remember-probability Q` shows them)"
            ),
        },
    }
}

/// The refusal of a state that holds another structure than `args` ask for (`found`, the
/// library's name for it): which it holds, and the flags that open it.
fn other_structure(path: &Path, found: &str, args: &Dedup) -> Failure {
    let name = path.display();
    let asked = if args.fixed {
        "a fixed-size filter (--fixed)"
    } else if args.window.is_some() {
        "a windowed filter (--window)"
    } else if args.remember.is_some() {
        "an overwrite map (--remember)"
    } else {
        "a growing filter (the default)"
    };
    let growing = || {
        load_state(
            path,
            |p| GrowingBloomFilter::load(p),
            |input, hasher| GrowingBloomFilter::read_from_trusting_hasher(input, hasher),
        )
    };
    let bloom = || {
        load_state(
            path,
            |p| AtomicBloomFilter::load(p),
            |input, hasher| AtomicBloomFilter::read_from_trusting_hasher(input, hasher),
        )
    };
    let window = || {
        load_state(
            path,
            |p| WindowedBloomFilter::load(p),
            |input, hasher| WindowedBloomFilter::read_from_trusting_hasher(input, hasher),
        )
    };
    let map = || {
        load_state(
            path,
            |p| OverwriteMap::load(p),
            |input, hasher| OverwriteMap::read_from_trusting_hasher(input, hasher),
        )
    };
    let (what, fitting) = if let Ok(f) = growing() {
        ("a growing filter", growing_flags(&f))
    } else if let Ok(f) = bloom() {
        (
            if args.fixed || args.window.is_some() || args.remember.is_some() {
                "a fixed-size filter"
            } else {
                // Before the filter grew by default, it was a fixed-size one.
                "a fixed-size filter (the default of an older seen; the default now grows past \
                 --capacity)"
            },
            bloom_flags(&f),
        )
    } else if let Ok(f) = window() {
        (
            "a windowed filter",
            window_flags(&f.with_clock(ManualClock::new(Duration::ZERO))),
        )
    } else if let Ok(m) = map() {
        ("an overwrite map", map_flags(&m, args))
    } else {
        return Failure(format!(
            "the state {name} holds {found}, which seen dedup does not keep: use another state \
             file"
        ));
    };
    Failure(format!(
        "the state {name} holds {what}, not {asked}: {}",
        open_with(&fitting)
    ))
}

/// Why the filter of `args` cannot be built, from the library's error.
pub(super) fn build_failure(e: Error, args: &Dedup) -> Failure {
    match e {
        // A window's rate asked of the layout is --fpr scaled: say which --fpr works, not
        // which layout. (A growing filter's error names --fpr's lowest value itself.)
        Error::FprBelowLayoutLimit { fpr, min_fpr, .. } if fpr > 0.0 => {
            let lowest = min_fpr * args.sizing.fpr / fpr;
            let hint = match (args.window, args.period) {
                (Some(window), Some(period)) => format!(
                    " for a window of {} generations (--window {} --period {}): raise \
                     --fpr, or lengthen --period",
                    generations(window, period).map_or(0, |(g, _)| g),
                    format_duration(window),
                    format_duration(period)
                ),
                _ => String::new(),
            };
            Failure(format!(
                "cannot build the filter: --fpr {:e} is below the lowest rate it reaches, \
                 {lowest:.3e}{hint}",
                args.sizing.fpr
            ))
        }
        e => Failure(format!("cannot build the filter: {e}")),
    }
}

/// `load(path)`, or, for a state written before the library's default hasher took its current
/// name (`Error::RetiredHasher`), the file read by `trusting` with the default hasher and the
/// file's seed. The old hasher differs only for string items of the library's `insert`, which
/// this command never used: it inserts `hash_bytes` of each key, which hashes as it did, so
/// the old state answers as before, and its next save carries the current name.
fn load_state<T>(
    path: &Path,
    load: impl FnOnce(&Path) -> Result<T, Error>,
    trusting: impl FnOnce(&mut io::BufReader<std::fs::File>, StableHasher) -> Result<T, Error>,
) -> Result<T, Error> {
    let file = match load(path) {
        Err(Error::RetiredHasher { file }) => file,
        other => return other,
    };
    let io_error = |e: io::Error| Error::Io {
        kind: e.kind(),
        message: format!("read {}: {e}", path.display()),
        source: e.into(),
    };
    let mut input = io::BufReader::new(std::fs::File::open(path).map_err(io_error)?);
    let loaded = trusting(&mut input, StableHasher::with_seed(file.seed()))?;
    // `load` checked the length; the file may have changed since.
    match io::Read::read(&mut input, &mut [0]).map_err(io_error)? {
        0 => Ok(loaded),
        _ => Err(Error::Corrupt(seen::Corruption::TrailingBytes)),
    }
}

/// Fails unless `path` is a regular file or nothing yet, and a file can be created beside it
/// (as the save's temporary file will be): a state that cannot be saved is found out before
/// the run, not after it printed everything. Checked before the state is locked, so that a
/// path refused leaves no lock file behind (`/dev/null.lock`).
pub(super) fn check_state(path: &Path) -> Result<(), Failure> {
    // `sub/` is a directory's name, which no file can take (`Path` drops the slash).
    if path.as_os_str().as_encoded_bytes().ends_with(b"/") {
        return Err(Failure(format!(
            "the state {} names a directory (it ends with /): name a file",
            path.display()
        )));
    }
    // A named pipe would block the load until something writes to it, a device or a
    // directory is no state, and the save replaces whatever is there with a file.
    if let Ok(meta) = std::fs::metadata(path)
        && !meta.is_file()
    {
        return Err(Failure(format!(
            "the state {} is not a regular file ({}): name a file",
            path.display(),
            kind(&meta.file_type())
        )));
    }
    // The save writes the file a symbolic link leads to, beside it.
    let target = resolve(path);
    // A chain that does not end (a loop) is the save's error too: found out now.
    if std::fs::symlink_metadata(&target).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(Failure(format!(
            "cannot save the state {}: its symbolic links do not lead to a file (more than 40, \
             each to the next: a loop?)",
            path.display()
        )));
    }
    let dir = match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let probe = dir.join(format!(".seen-probe.{}.tmp", std::process::id()));
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
    {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(Failure(format!(
            "cannot save the state {}: cannot create a file in {}: {e}",
            path.display(),
            dir.display()
        ))),
    }
}

/// Which file is at a state's path (through its symbolic links), to tell after a save that did
/// not finish whether it replaced the file: a save writes a new file and renames it over the
/// old one, so the file there is either the old one or the new one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Identity {
    /// No file there.
    Absent,
    /// The file's device and inode.
    File(u64, u64),
    /// Not known (it cannot be read, or not on Unix).
    Unknown,
}

/// The file at the state's path `path` now ([`Identity`]).
pub(super) fn identity(path: &Path) -> Identity {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        match std::fs::metadata(resolve(path)) {
            Ok(meta) => Identity::File(meta.dev(), meta.ino()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Identity::Absent,
            Err(_) => Identity::Unknown,
        }
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        Identity::Unknown
    }
}

/// What the state at `path` holds after a save that did not finish, the file there before it
/// being `before`: the end of a one-line message.
pub(super) fn left_by_save(path: &Path, before: Identity) -> &'static str {
    match (before, identity(path)) {
        (_, Identity::Absent) => {
            "it is not written, and the next run prints this run's records again"
        }
        (Identity::File(..), after) if after == before => {
            "it keeps what it held before this run, and the next run prints this run's records \
             again"
        }
        (Identity::Unknown, _) | (_, Identity::Unknown) => {
            "it holds its previous save or this run's, whole"
        }
        // Replaced: the save had renamed its file over the state (a failure after the rename,
        // the flush of the directory, or a signal then).
        _ => "this run's save is in place (renamed over the state before it stopped)",
    }
}

/// What a file that is not a regular file is, for a message.
#[cfg(unix)]
fn kind(file: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if file.is_dir() {
        "a directory"
    } else if file.is_fifo() {
        "a named pipe"
    } else if file.is_char_device() {
        "a character device"
    } else if file.is_block_device() {
        "a block device"
    } else if file.is_socket() {
        "a socket"
    } else {
        "not a file"
    }
}

#[cfg(not(unix))]
fn kind(file: &std::fs::FileType) -> &'static str {
    if file.is_dir() {
        "a directory"
    } else {
        "not a file"
    }
}

/// What a window's time is: the records' (`--time-field`) or the wall clock. Both read a
/// manual clock that the run sets (the wall clock once a chunk), so it is said, not derived.
fn time_base(records: bool) -> TimeBase {
    if records {
        TimeBase::Other
    } else {
        TimeBase::Wall
    }
}

/// The file `path` leads to through symbolic links (as the library's save follows them): the
/// end of the chain, which may not exist yet. `path` itself when it is no link, or the chain
/// cannot be read (the save then says why).
pub(super) fn resolve(path: &Path) -> std::path::PathBuf {
    let mut at = path.to_path_buf();
    for _ in 0..40 {
        match std::fs::symlink_metadata(&at) {
            Ok(meta) if meta.file_type().is_symlink() => match std::fs::read_link(&at) {
                Ok(to) => {
                    at = match at.parent() {
                        Some(dir) if to.is_relative() => dir.join(to),
                        _ => to,
                    }
                }
                Err(_) => break,
            },
            _ => break,
        }
    }
    at
}

/// The live generations for `--window` over `--period`, and the period: one per period of
/// the window, and the current one, so that a key is kept for the whole window after the
/// period it came in.
pub(crate) fn generations(window: Duration, period: Duration) -> Result<(u32, Duration), Failure> {
    let (w, p) = (window.as_millis(), period.as_millis());
    let max = u128::from(seen::sizing::MAX_GENERATIONS) - 1;
    if p != 0 && w % p != 0 {
        return Err(Failure(format!(
            "--window {} is not a whole number of --period {}: the window is made of whole \
             periods",
            format_duration(window),
            format_duration(period)
        )));
    }
    if p == 0 || !(1..=max).contains(&(w / p)) {
        return Err(Failure(format!(
            "--window {} must be 1 to {max} times --period {}",
            format_duration(window),
            format_duration(period)
        )));
    }
    Ok(((w / p) as u32 + 1, period))
}

/// The wall clock, as a duration since the Unix epoch.
pub(super) fn now() -> Duration {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
}

/// The most distinct keys a line-layout filter of at most `bytes` holds at `fpr` (`seen
/// size --memory`'s search over the library's own sizing, so the filter built is at most
/// `bytes`).
pub(super) fn capacity_for(bytes: u64, fpr: f64) -> Result<u64, Error> {
    let size = |keys| seen::sizing::blocked(keys, fpr, seen::Layout::Line).map(|s| s.bytes());
    crate::size::most_keys(bytes, &size)?.ok_or(Error::InvalidParameter(
        "--memory is below the smallest filter at this --fpr (one cache line)",
    ))
}
