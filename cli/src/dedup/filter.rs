//! The structure that decides: built from the arguments or loaded from `--state`, checked
//! against them, saved, described.

use std::io;
use std::path::Path;
use std::time::{Duration, SystemTime};

use seen::clock::ManualClock;
use seen::hash::{Hash128, ItemHasher, StableHasher};
use seen::{
    AtomicBloomFilter, Error, GrowingBloomFilter, OverwriteMap, Rotation, WindowedBloomFilter,
};

use super::Dedup;
use crate::Failure;
use crate::units::format_duration;

/// The structure that decides. Shared by the workers (the hasher, and lookups of the filters
/// that only gain items) and the sequencer.
pub(super) enum Filter {
    /// The exact set lives in the shards (it is not concurrent).
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
}

impl Filter {
    /// The filter of `--state` if its file exists (checked against the arguments), else a
    /// new one.
    pub(super) fn open(args: &Dedup) -> Result<Self, Failure> {
        if let Some(path) = &args.state {
            check_writable(path)?;
            // A named pipe would block the load until something writes to it, and the save
            // replaces whatever is there with a file.
            if let Ok(meta) = std::fs::metadata(path)
                && !meta.is_file()
            {
                return Err(Failure(format!(
                    "the state {} is not a regular file",
                    path.display()
                )));
            }
        }
        let Some(path) = args.state.as_ref().filter(|p| p.exists()) else {
            return Self::new(args);
        };
        let name = path.display();
        let cannot = |e: Error| Failure(format!("cannot load the state {name}: {e}"));
        let loaded = if args.grow {
            Self::Growing(
                load_state(
                    path,
                    |p| GrowingBloomFilter::load(p),
                    |input, hasher| GrowingBloomFilter::read_from_trusting_hasher(input, hasher),
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
            if (filter.rotation(), filter.generations()) != asked {
                return Err(Failure(format!(
                    "the state {name} holds a window of {}, not --window {} --period {}: pass \
                     those, or another state file",
                    match filter.rotation() {
                        Rotation::EveryAligned(p) => format!(
                            "{} generations of {} (--window {} --period {})",
                            filter.generations(),
                            format_duration(p),
                            format_duration(p * filter.generations()),
                            format_duration(p)
                        ),
                        other => format!("{} generations rotated {other:?}", filter.generations()),
                    },
                    format_duration(window),
                    format_duration(period),
                )));
            }
            Self::windowed(filter, clock, period, args)
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
                     --remember {later} --remember-probability {}: pass those, or another state \
                     file",
                    map.buckets(),
                    args.remember_probability
                )));
            }
            Self::Remember(map)
        } else {
            Self::Bloom(
                load_state(
                    path,
                    |p| AtomicBloomFilter::load(p),
                    |input, hasher| AtomicBloomFilter::read_from_trusting_hasher(input, hasher),
                )
                .map_err(cannot)?,
            )
        };
        let held = match &loaded {
            Self::Growing(f) => Some((f.capacity(), f.fpr())),
            Self::Bloom(f) => Some((f.capacity(), f.fpr())),
            Self::Windowed { filter, .. } => Some((filter.capacity(), filter.fpr())),
            Self::Exact | Self::Remember(_) => None,
        };
        if let Some((capacity, fpr)) = held
            && (capacity, fpr) != (args.capacity, args.fpr)
        {
            return Err(Failure(format!(
                "the state {name} holds a filter for --capacity {capacity} --fpr {fpr}, not \
                 --capacity {} --fpr {}: pass those, or another state file",
                args.capacity, args.fpr
            )));
        }
        Ok(loaded)
    }

    pub(super) fn new(args: &Dedup) -> Result<Self, Failure> {
        Self::build(args).map_err(|e| match e {
            // The rate asked of the layout is --fpr scaled (a growing filter's first layer
            // gets a fifth of it): say which --fpr works, not which layout.
            Error::FprBelowLayoutLimit { fpr, min_fpr, .. } if fpr > 0.0 => {
                let lowest = min_fpr * args.fpr / fpr;
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
                    args.fpr
                ))
            }
            e => Failure(format!("cannot build the filter: {e}")),
        })
    }

    pub(super) fn build(args: &Dedup) -> Result<Self, Error> {
        if let Some(bytes) = args.memory {
            let capacity = capacity_for(bytes, args.fpr)?;
            return Ok(Self::Bloom(
                AtomicBloomFilter::builder(capacity)
                    .fpr(args.fpr)
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
            let filter = WindowedBloomFilter::builder(args.capacity)
                .fpr(args.fpr)
                .generations(generations)
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
        } else if args.grow {
            // The line layout, as the plain filter: the word layout's schedule ends where a
            // layer's rate falls below 6.4e-6 (6 layers, 63 times --capacity at --fpr 1e-4).
            Self::Growing(
                GrowingBloomFilter::builder(args.capacity)
                    .fpr(args.fpr)
                    .layout(seen::Layout::Line)
                    .build()?,
            )
        } else {
            Self::Bloom(
                AtomicBloomFilter::builder(args.capacity)
                    .fpr(args.fpr)
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
            // Only to pick the shard: the set compares the keys themselves.
            Self::Exact => StableHasher::default().hash_bytes(key),
            Self::Bloom(f) => f.hasher().hash_bytes(key),
            Self::Growing(f) => f.hasher().hash_bytes(key),
            Self::Windowed { filter, .. } => filter.hasher().hash_bytes(key),
            Self::Remember(m) => m.hasher().hash_bytes(key),
        }
    }

    /// Saves the filter to `path` (a temporary file, then a rename).
    pub(super) fn save(&self, path: &Path) -> Result<(), Error> {
        match self {
            Self::Bloom(f) => f.save(path),
            Self::Growing(f) => f.save(path),
            Self::Windowed { filter, .. } => filter.save(path),
            Self::Remember(m) => m.save(path),
            Self::Exact => Ok(()),
        }
    }

    /// One line about the structure, for `--stats`.
    pub(super) fn describe(&self, exact_keys: usize, args: &Dedup) -> String {
        match self {
            Self::Exact => format!("exact set of {exact_keys} keys"),
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
        }
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
    };
    let mut input = io::BufReader::new(std::fs::File::open(path).map_err(io_error)?);
    let loaded = trusting(&mut input, StableHasher::with_seed(file.seed()))?;
    // `load` checked the length; the file may have changed since.
    match io::Read::read(&mut input, &mut [0]).map_err(io_error)? {
        0 => Ok(loaded),
        _ => Err(Error::Corrupt(seen::Corruption::TrailingBytes)),
    }
}

/// Fails unless a file can be created beside `path` (as the save's temporary file will be):
/// a state that cannot be saved is found out before the run, not after it printed everything.
pub(super) fn check_writable(path: &Path) -> Result<(), Failure> {
    let dir = match path.parent() {
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

/// The generations of `--window` over `--period`, and the period.
pub(super) fn generations(window: Duration, period: Duration) -> Result<(u32, Duration), Failure> {
    let (w, p) = (window.as_millis(), period.as_millis());
    let max = u128::from(seen::sizing::MAX_GENERATIONS);
    if p == 0 || w % p != 0 || !(1..=max).contains(&(w / p)) {
        return Err(Failure(format!(
            "--window {} must be 1 to {max} times --period {}",
            format_duration(window),
            format_duration(period)
        )));
    }
    Ok(((w / p) as u32, period))
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
