//! A warehouse ingest that drops the records it loaded in the last 8 days, with a
//! `WindowedBloomFilter` on a simulated clock: 20 days of out-of-order records in seconds.
//!
//! ```sh
//! cargo run --release --example rolling_ingest
//! ```
//!
//! The story: records arrive out of order (a record's event time may be days, sometimes weeks,
//! behind its arrival) and more than once (redeliveries and replays, from seconds to days after
//! the first copy). The job loads a record only if it did not load it in the last 8 days. It used
//! to keep one filter per day for the last 8 days and check each record against all of them; one
//! `WindowedBloomFilter` does the same in one lookup:
//!
//! - one generation per UTC day, rotated at midnight (`rotate_every_aligned(DAY)`); the window
//!   counts arrival time (the filter's clock), not event time: a record first seen today is new,
//!   however old its event time;
//! - `insert` is `true` only if no live generation holds the record: load it. A `false` does not
//!   renew the record: the window counts from the copy that was loaded;
//! - `maintain()` from a timer, every hour on the hour, as a service would: it rotates at
//!   midnight and clears the spare generation off the insert path.
//!
//! Time is a `ManualClock` moved by the simulation (set to each record's arrival time, and to
//! each hour for the timer), so 20 days run in a few seconds. Each record comes once, and with
//! some probability again after each of these delays (independently, so some come 3 times):
//! the same day, about 3 days later, exactly 8 days later (the edge of the guarantee), between 8
//! and 9 days later, exactly 9 days later (forgotten), about 12 days later (well beyond).
//!
//! The filter is built with `periods(8)`: every record is remembered for at least 8 full days
//! after the copy that was loaded, so it keeps `G = 9` live generations (today's and 8 full
//! days). With a rotation at every midnight the window is exact in calendar days: a record loaded
//! on UTC day `d` is dropped through day `d + 8` and forgotten from day `d + 9` (the documented
//! 8 to 9 periods). The example models that and asserts: every copy the window still
//! holds is dropped, with no exception (a Bloom filter has no false negatives); every record the
//! window no longer holds, old or new, is let through, except for false positives, whose count
//! stays within a bound computed from the target rate (see `fp_bound`).

use std::hash::Hash;
use std::time::{Duration, Instant};

use seen::WindowedBloomFilter;
use seen::clock::ManualClock;
use seen::sizing::window;

const HOUR: u64 = 3_600;
const DAY: u64 = 24 * HOUR;
/// The first simulated day, midnight UTC, in days since the UNIX epoch (2024-10-04).
const DAY0: u64 = 20_000;
/// Simulated days. Copies due after the last day are not generated.
const DAYS: u64 = 20;
/// New records a day (distinct; each also comes again now and then, see `DELAYS`).
const NEW_PER_DAY: u64 = 250_000;
/// The items one generation (a day) is sized for: the new records and the replays older than
/// the window that it lets through again, with room to spare (asserted below).
const CAPACITY: u64 = 300_000;
/// The target false-positive rate of a lookup over the whole window: a new record taken for a
/// duplicate and not loaded. One in a thousand.
const FPR: f64 = 0.001;
/// The job's need: a copy arriving up to 8 days (192 hours) after the loaded one is dropped:
/// the filter's `periods(NEED_DAYS)`.
const NEED_DAYS: u64 = 8;
/// The live generations `periods(NEED_DAYS)` keeps: today's and `NEED_DAYS` full days. A record
/// loaded at time `t` on day `d` is remembered until the midnight that starts day `d + G`: at
/// least `G - 1 = NEED_DAYS` full days after `t`, at most `G`.
///
/// - `periods(6)`, the default (`G = 7`), fits one cache line (7 generations and the spare are 8
///   words), but guarantees only 6 days.
/// - `periods(7)` (`G = 8`) is the old scheme (today's filter and the 7 before it): 7 days
///   guaranteed; a copy 7 to 8 days late is dropped only if it arrives before the midnight that
///   ends the window.
/// - `periods(8)` (`G = 9`) guarantees 8. From 8 to 15 generations a block is 16 words (two
///   cache lines per lookup), so 9 costs the same lines as 8 and about as much memory (each
///   generation is sized for `FPR / G`: a little more bits for 9), but about twice the memory
///   of 7 (16 words a block instead of 8, 6 of them padding).
/// - Were memory tighter than the calendar: `periods(6)` of 32 hours each (`rotate_every(32 h)`,
///   a third more records each) also guarantees 8 days (6 × 32 h), in one line and about two
///   thirds of the memory, but a generation no longer is a UTC day.
///
/// The report prints the sizes of all four.
const G: u32 = NEED_DAYS as u32 + 1;

/// When a record comes again after its first delivery, and how likely each is.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Delay {
    /// 1 second to 6 hours later (may cross midnight).
    SameDay,
    /// 3 days later, give or take 12 hours.
    ThreeDays,
    /// Exactly `G - 1` days later: the last moment the guarantee covers. Dropped.
    EdgeIn,
    /// Strictly between `G - 1` and `G` days later: dropped if it arrives before the midnight
    /// that ends the window, let through after.
    Between,
    /// Exactly `G` days later: forgotten. Let through.
    EdgeOut,
    /// 12 days later, give or take 12 hours: a replay of old data. Let through.
    Beyond,
}

const DELAYS: [(Delay, f64); 6] = [
    (Delay::SameDay, 0.20),
    (Delay::ThreeDays, 0.10),
    (Delay::EdgeIn, 0.02),
    (Delay::Between, 0.03),
    (Delay::EdgeOut, 0.02),
    (Delay::Beyond, 0.05),
];

impl Delay {
    fn seconds(self, rng: &mut Rng) -> u64 {
        let g = u64::from(G);
        match self {
            Delay::SameDay => 1 + rng.below(6 * HOUR),
            Delay::ThreeDays => 3 * DAY - 12 * HOUR + rng.below(DAY),
            Delay::EdgeIn => (g - 1) * DAY,
            Delay::Between => (g - 1) * DAY + 1 + rng.below(DAY - 1),
            Delay::EdgeOut => g * DAY,
            Delay::Beyond => 12 * DAY - 12 * HOUR + rng.below(DAY),
        }
    }

    fn index(self) -> usize {
        DELAYS.iter().position(|&(d, _)| d == self).unwrap()
    }
}

/// The SplitMix64 finalizer: a good 64-bit mix of a counter.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// SplitMix64 with a fixed seed, so that every run tells the same story.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix(self.0)
    }

    /// Uniform in `0..n`.
    fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(n)) >> 64) as u64
    }

    fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
}

/// A record as the warehouse keys it; record `r` is the `r`-th new record of the simulation.
#[derive(Hash)]
struct Row {
    source_id: u64,
    /// Seconds since the UNIX epoch.
    event_time: u64,
}

/// When record `r` first arrives, in seconds since `DAY0`'s midnight: on day
/// `r / NEW_PER_DAY`, at a time of day drawn from `r`.
fn first_arrival(r: u64) -> u64 {
    r / NEW_PER_DAY * DAY + mix(r ^ 0xA11) % DAY
}

/// How far record `r`'s event time is behind its first arrival: mostly hours, 15% up to 3
/// days, and 5% (a back-fill) 10 to 30 days, older than the window.
fn event_lag(r: u64) -> u64 {
    let h = mix(r ^ 0xE7E);
    let u = h >> 8;
    match h % 100 {
        0..80 => u % (6 * HOUR),
        80..95 => 6 * HOUR + u % (3 * DAY - 6 * HOUR),
        _ => 10 * DAY + u % (20 * DAY),
    }
}

fn row(r: u64) -> Row {
    Row {
        source_id: r,
        event_time: DAY0 * DAY + first_arrival(r) - event_lag(r),
    }
}

/// One arrival: when (seconds since `DAY0`'s midnight), which record, and, for a copy, after
/// which delay (`None`: the first delivery).
#[derive(Clone, Copy)]
struct Delivery {
    at: u64,
    record: u32,
    delay: Option<Delay>,
}

/// The model's view of record `r`: the arrival time of the copy the filter last let through
/// (`NONE`: never), and two flags.
const NONE: u32 = u32::MAX;
/// A copy the window no longer held was dropped (a false positive) and none let through since:
/// later copies are echoes of that false positive (same hash, same bits), not fresh lookups.
const SKIPPED: u8 = 1;
/// A copy was dropped as a duplicate since the last let-through one.
const DROPPED_SINCE: u8 = 2;

/// The copies the model expects let through, by kind.
#[derive(Clone, Copy, Default)]
struct Lookups {
    /// Copies looked up (the record not in the window).
    total: u64,
    /// Let through.
    let_through: u64,
}

impl Lookups {
    fn false_positives(&self) -> u64 {
        self.total - self.let_through
    }
}

/// The most false positives among `lookups` lookups of records the window does not hold.
///
/// While no generation holds more than its capacity (asserted: each day lets through at most
/// `CAPACITY` records), a lookup of a record the window does not hold is a false positive with
/// probability at most `FPR` (the sizing's `expected_fpr`, below it, is the rate when every
/// generation is full). Distinct records hash independently, so the count is at most
/// binomial(`lookups`, `FPR`): we allow its mean plus five standard deviations, plus 5.
fn fp_bound(lookups: u64) -> f64 {
    let mean = lookups as f64 * FPR;
    mean + 5.0 * mean.sqrt() + 5.0
}

fn main() -> Result<(), seen::Error> {
    let started = Instant::now();
    let clock = ManualClock::new(Duration::from_secs(DAY0 * DAY));
    let filter = WindowedBloomFilter::builder(CAPACITY)
        .fpr(FPR)
        .periods(NEED_DAYS as u32)
        .rotate_every_aligned(Duration::from_secs(DAY))
        .clock(clock.clone())
        .build()?;

    let records = DAYS * NEW_PER_DAY;
    let mut rng = Rng(42);
    let mut later: Vec<Vec<Delivery>> = (0..DAYS).map(|_| Vec::new()).collect();
    let mut loaded_at = vec![NONE; records as usize];
    let mut flags = vec![0u8; records as usize];

    let (mut deliveries, mut rotations, mut max_per_day) = (0u64, 0u64, 0u64);
    // Copies the window holds: dropped (by delay), and how many of them were within the
    // documented guarantee (at most G - 1 days after the loaded copy). `held_let_through` must
    // stay 0.
    let (mut dropped, mut guaranteed, mut held_let_through) = ([0u64; 6], 0u64, 0u64);
    let mut first_error = None;
    // Copies the window no longer holds: new records, old ones (by delay), echoes.
    let (mut new, mut old, mut echoes) = (Lookups::default(), [Lookups::default(); 6], 0u64);
    let (mut late_events, mut late_events_loaded, mut not_renewed) = (0u64, 0u64, 0u64);

    for day in 0..DAYS {
        let mut today = std::mem::take(&mut later[day as usize]);
        for r in day * NEW_PER_DAY..(day + 1) * NEW_PER_DAY {
            let first = first_arrival(r);
            let record = r as u32;
            today.push(Delivery {
                at: first,
                record,
                delay: None,
            });
            for (delay, p) in DELAYS {
                if rng.chance(p) {
                    let at = first + delay.seconds(&mut rng);
                    let copy = Delivery {
                        at,
                        record,
                        delay: Some(delay),
                    };
                    match at / DAY {
                        d if d == day => today.push(copy),
                        d if d < DAYS => later[d as usize].push(copy),
                        _ => {}
                    }
                }
            }
        }
        today.sort_unstable_by_key(|d| (d.at, d.record));

        let mut loaded_today = 0;
        let mut next = 0;
        for hour in 0..24 {
            // The timer: on the hour, as a service's would.
            clock.set(Duration::from_secs((DAY0 + day) * DAY + hour * HOUR));
            rotations += filter.maintain();
            let end = day * DAY + (hour + 1) * HOUR;
            while let Some(&Delivery { at, record, delay }) = today.get(next).filter(|d| d.at < end)
            {
                next += 1;
                deliveries += 1;
                clock.set(Duration::from_secs(DAY0 * DAY + at));
                let r = record as usize;
                let loaded = filter.insert(&row(u64::from(record)));
                if loaded {
                    loaded_today += 1;
                }
                let last = loaded_at[r];
                if last != NONE && at / DAY - u64::from(last) / DAY < u64::from(G) {
                    // The window holds it: must be dropped.
                    let within = at - u64::from(last) <= (u64::from(G) - 1) * DAY;
                    guaranteed += u64::from(within);
                    if loaded {
                        held_let_through += 1;
                        first_error.get_or_insert((record, last, at, delay, within));
                        (loaded_at[r], flags[r]) = (at as u32, 0);
                    } else {
                        dropped[delay.map_or(0, Delay::index)] += 1;
                        flags[r] |= DROPPED_SINCE;
                    }
                    continue;
                }
                // The window does not hold it: let through, unless a false positive.
                if flags[r] & SKIPPED != 0 {
                    echoes += 1;
                } else {
                    let lookups = match delay {
                        None => &mut new,
                        Some(d) => &mut old[d.index()],
                    };
                    lookups.total += 1;
                    lookups.let_through += u64::from(loaded);
                }
                if delay.is_none() && event_lag(u64::from(record)) > u64::from(G) * DAY {
                    late_events += 1;
                    late_events_loaded += u64::from(loaded);
                }
                if loaded {
                    not_renewed += u64::from(flags[r] & DROPPED_SINCE != 0);
                    (loaded_at[r], flags[r]) = (at as u32, 0);
                } else {
                    flags[r] |= SKIPPED;
                }
            }
        }
        assert_eq!(next, today.len());
        max_per_day = max_per_day.max(loaded_today);
    }
    let elapsed = started.elapsed();

    let old_total = old.iter().fold(Lookups::default(), |a, b| Lookups {
        total: a.total + b.total,
        let_through: a.let_through + b.let_through,
    });
    let (new_bound, old_bound) = (fp_bound(new.total), fp_bound(old_total.total));
    let sizing = filter.sizing();
    let mib = |bytes: u64| bytes as f64 / f64::from(1 << 20);
    let at = |d: Delay| d.index();

    println!(
        "{DAYS} simulated days, periods({NEED_DAYS}): {G} generations of a UTC day (rotated at \
         midnight by maintain()), target fpr {FPR} over the window"
    );
    println!(
        "records          {deliveries} arrivals of {records} distinct records, at most \
         {max_per_day} loaded a day (capacity {CAPACITY}); {late_events} first arriving over {G} \
         days after their event time: {late_events_loaded} loaded"
    );
    println!(
        "dropped dups     {} (same day {}, ~3 days {}, exactly {} days {}, {} to {} days {}); \
         {guaranteed} within the guaranteed {} days; let through: {held_let_through}",
        dropped.iter().sum::<u64>(),
        dropped[at(Delay::SameDay)],
        dropped[at(Delay::ThreeDays)],
        G - 1,
        dropped[at(Delay::EdgeIn)],
        G - 1,
        G,
        dropped[at(Delay::Between)],
        G - 1,
    );
    println!(
        "old let through  {} of {} past the window ({} to {} days {}, exactly {G} days {}, \
         ~12 days {}; {not_renewed} after a dropped copy in between); false positives {} \
         (bound {old_bound:.0})",
        old_total.let_through,
        old_total.total,
        G - 1,
        G,
        old[at(Delay::Between)].let_through,
        old[at(Delay::EdgeOut)].let_through,
        old[at(Delay::Beyond)].let_through,
        old_total.false_positives(),
    );
    println!(
        "new let through  {} of {}; false positives {} = {:.2e} (target {FPR}, expected when \
         full {:.2e}, bound {new_bound:.0}); {echoes} later copies of a skipped record",
        new.let_through,
        new.total,
        new.false_positives(),
        new.false_positives() as f64 / new.total as f64,
        sizing.expected_fpr,
    );
    println!(
        "memory           {:.1} MiB, {} cache lines a lookup; periods(7): {:.1} MiB (7 days), \
         periods(6): {:.1} MiB (1 line, 6 days), periods(6) of 32 h: {:.1} MiB (1 line, 8 days)",
        mib(filter.memory_bytes()),
        sizing.lines_per_lookup(),
        mib(window(CAPACITY, 8, FPR)?.bytes()),
        mib(window(CAPACITY, 7, FPR)?.bytes()),
        mib(window(CAPACITY * 4 / 3, 7, FPR)?.bytes()),
    );
    println!(
        "wall time        {:.2} s ({:.0} ns an arrival, generation included)",
        elapsed.as_secs_f64(),
        elapsed.as_nanos() as f64 / deliveries as f64
    );

    // A rotation at each of the DAYS - 1 midnights, none in between.
    assert_eq!((rotations, filter.generation()), (DAYS - 1, DAYS - 1));
    // The false-positive bound assumes no generation over its capacity.
    assert!(max_per_day <= CAPACITY, "{max_per_day} records in a day");
    // No false negatives: every copy the window holds is dropped.
    assert_eq!(
        held_let_through, 0,
        "copies the window holds were let through (record, loaded at, arrived at, delay, \
         within the guarantee): first {first_error:?}"
    );
    assert!(guaranteed > 0 && dropped[at(Delay::EdgeIn)] > 0);
    // Forgotten after G = NEED_DAYS + 1 days at most, and a dropped copy does not renew a
    // record: old copies are let
    // through, except for false positives.
    assert!(
        (old_total.false_positives() as f64) <= old_bound,
        "{} of {} records past the window dropped: more than the bound {old_bound:.0}",
        old_total.false_positives(),
        old_total.total
    );
    assert!(old[at(Delay::EdgeOut)].total > 0 && not_renewed > 0);
    assert!(
        (new.false_positives() as f64) <= new_bound,
        "{} of {} new records dropped: more than the bound {new_bound:.0}",
        new.false_positives(),
        new.total
    );
    Ok(())
}
