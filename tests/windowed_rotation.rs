//! When `WindowedBloomFilter` rotates, at the edges: inserts that find rotations overdue rotate
//! once, a late rotation does not shorten the next generation, count-mode generations hold their
//! count (also a small count in a large filter), the end of time does not hang, and 1 and 63
//! generations keep G - 1 rotations.
#![cfg(not(seen_loom))]

mod common;

use std::time::Duration;

use common::keys;
use seen::WindowedBloomFilter;
use seen::clock::{Clock, ManualClock};

const HOUR: Duration = Duration::from_secs(3600);

const DAY: Duration = Duration::from_secs(86_400);

/// Time mode, no `maintain` for a while (idle service, laptop asleep, process stopped, or simply
/// a `maintain` timer that has not fired yet after a gap): the inserts that read the clock
/// rotate once for the overdue rotations, not once each while a rotation is due, which would
/// make G rotations within one burst of inserts *with the clock standing still* and forget an
/// item inserted at the start of the burst a few thousand inserts later, zero seconds after.
#[test]
fn inserts_with_rotations_overdue_rotate_once_not_g_times() {
    let start = 20_000 * DAY;
    let clock = ManualClock::new(start);
    let f = WindowedBloomFilter::builder(10_000)
        .periods(2)
        .rotate_every(HOUR)
        .clock(clock.clone())
        .build()
        .unwrap();
    // Idle for 10 hours (no maintain yet).
    clock.advance(10 * HOUR);
    let mut victims = Vec::new();
    for k in keys(1, 50) {
        if f.insert(&k) {
            victims.push(k);
        }
    }
    let g0 = f.generation();
    // More traffic, clock NOT moved: the retention promise is "(G - 1) periods" = 2 hours.
    for k in keys(2, 20_000) {
        f.insert(&k);
    }
    let lost = victims.iter().filter(|k| !f.contains(*k)).count();
    eprintln!(
        "generation {g0} -> {} with the clock standing still; {lost} of {} items inserted 0 s ago are forgotten",
        f.generation(),
        victims.len()
    );
    assert_eq!(lost, 0, "false negatives 0 s after the insert");
}

/// A rotation that runs late (maintain from a timer, fired half a period late) does not shorten
/// the next generation: items inserted after the rotation was due are kept (G - 1) periods
/// after their insert, as the docs promise ("found by every contains ... that starts within
/// (G - 1) periods of the insert's start"), not dropped by the next rotation on schedule.
#[test]
fn a_late_rotation_does_not_shorten_the_next_generation() {
    let start = 20_000 * DAY;
    let clock = ManualClock::new(start);
    let g = 2;
    let f = WindowedBloomFilter::builder(1_000)
        .periods(g - 1)
        .rotate_every(HOUR)
        .clock(clock.clone())
        .build()
        .unwrap();
    // The rotation at start + 1h is due, the timer fires at start + 1.5h.
    clock.set(start + HOUR + HOUR / 2);
    assert!(f.insert("x")); // t = 1.5 h, generation 0
    assert_eq!(f.maintain(), 1); // late rotation, generation 1
    clock.set(start + 2 * HOUR); // 30 minutes after the insert; retention promised: 1 hour
    f.maintain();
    let found = f.contains("x");
    eprintln!(
        "30 min after the insert (G = {g}, P = 1 h): generation {}, contains = {found}",
        f.generation()
    );
    assert!(
        found,
        "forgotten 30 min after its insert, promised (G-1) P = 60 min"
    );
}

/// Count mode: the docs promise retention for "at least (G - 1) · N new items later". With the
/// sampled count (N >= 2048), no generation closes after fewer than N new items, so the last
/// item of the previous generation is kept (G - 1) · N new items after its insert. Also
/// measures the spread against the "(0.03 %-3 %)" claim.
#[test]
fn count_mode_generations_hold_their_count() {
    let n = 4096u64; // s = ilog2(4) = 2
    let g = 2u32;
    let f = WindowedBloomFilter::builder(n)
        .periods(g - 1)
        .rotate_after(n)
        .build()
        .unwrap();
    let mut sizes = Vec::new();
    let mut in_gen = 0u64;
    let mut cur = f.generation();
    // Last new item of the previous generation and the new-item index at its insert.
    let mut prev_last: Option<(u64, u64)> = None;
    let mut last_new: Option<u64> = None;
    let mut idx = 0u64;
    let mut early_forgets = 0u64;
    for k in keys(7, 3_000_000) {
        if !f.insert(&k) {
            continue;
        }
        idx += 1;
        let now = f.generation();
        if now != cur {
            if let Some((x, at)) = prev_last
                && idx - at < (u64::from(g) - 1) * n
                && !f.contains(&x)
            {
                early_forgets += 1;
            }
            sizes.push(in_gen);
            in_gen = 0;
            cur = now;
            prev_last = last_new.map(|x| (x, idx - 1));
        }
        in_gen += 1;
        last_new = Some(k);
        if let Some((x, at)) = prev_last
            && idx - at < (u64::from(g) - 1) * n
            && !f.contains(&x)
        {
            early_forgets += 1;
            prev_last = None;
        }
    }
    sizes.remove(0);
    let min = *sizes.iter().min().unwrap();
    let max = *sizes.iter().max().unwrap();
    let dev = |s: u64| (s as f64 - n as f64).abs() / n as f64;
    let over3 = sizes.iter().filter(|&&s| dev(s) > 0.03).count();
    eprintln!(
        "N = {n}: {} generations, new items per generation min {min} max {max} ({:.1}% .. {:.1}%); {over3} beyond 3%; {early_forgets} items forgotten fewer than (G-1)N new items after their insert",
        sizes.len(),
        100.0 * (min as f64 / n as f64 - 1.0),
        100.0 * (max as f64 / n as f64 - 1.0),
    );
    assert!(
        min >= n,
        "a generation closed after {min} < N = {n} new items"
    );
    assert_eq!(early_forgets, 0);
}

/// Count mode with a count well below what the spare's chunks need: every generation holds
/// about its count ("every generation then holds about that many"), not many times it, as it
/// would if an insert that finds the count reached cleared one chunk and did not rotate.
#[test]
fn small_counts_against_large_filters_rotate_on_count() {
    for (cap, n) in [(1_000u64, 1u64), (100_000, 100), (1_000_000, 2_000)] {
        let f = WindowedBloomFilter::builder(cap)
            .periods(2)
            .rotate_after(n)
            .build()
            .unwrap();
        let mut news = 0u64;
        for k in keys(300, 200_000) {
            if f.insert(&k) {
                news += 1;
            }
        }
        let per = news as f64 / (f.generation() + 1) as f64;
        eprintln!(
            "capacity {cap}, rotate_after({n}): {news} new items, {} rotations, {per:.1} new items per generation",
            f.generation()
        );
        // The spare's clearing is spread over the count's ticks: a rotation is at most a
        // few inserts late (not 10x, 9x or 4.8x the count, as when one chunk was cleared per
        // rotation due).
        assert!(
            per <= n as f64 * 1.05 + 2.0,
            "{per} new items per generation for a count of {n}"
        );
    }
}

/// A clock reading at or past u64::MAX ns (year 2554; `Duration::MAX` from any `Clock`) does not
/// make `maintain()` rotate forever: after G catch-up rotations `next_due` saturates to
/// u64::MAX, where `now < next_due` is false for now == u64::MAX; the loop still ends, having
/// rotated exactly G times (`periods + 1`: the whole window forgotten), and a second call
/// rotates no more.
///
/// `maintain` runs on its own thread only so that a hang fails the test (the deadline is a
/// watchdog a working `maintain` never comes near: it returns in microseconds), instead of
/// hanging the test binary.
#[test]
fn a_clock_at_the_end_of_time_does_not_hang_maintain() {
    use std::sync::Arc;
    use std::sync::mpsc;
    let start = 20_000 * DAY;
    let clock = ManualClock::new(start);
    let f = Arc::new(
        WindowedBloomFilter::builder(1_000)
            .periods(2)
            .rotate_every(HOUR)
            .clock(clock.clone())
            .build()
            .unwrap(),
    );
    f.insert("before the end of time");
    clock.set(Duration::MAX);
    let (done, finished) = mpsc::channel();
    let g = Arc::clone(&f);
    std::thread::spawn(move || done.send((g.maintain(), g.maintain())));
    let (first, second) = finished
        .recv_timeout(Duration::from_secs(120))
        .expect("maintain() is still running after 2 minutes: it rotates on and on");
    assert_eq!(
        (first, second),
        (3, 0),
        "rotations by two maintain() calls at the end of time (G = 3)"
    );
    assert_eq!(f.generation(), 3);
    assert!(
        !f.contains("before the end of time"),
        "the whole window is forgotten"
    );
}

/// `ManualClock::advance` saturates at u64::MAX ns, as `set` does (a `fetch_add` would wrap
/// silently).
#[test]
fn manual_clock_advance_saturates() {
    let c = ManualClock::new(Duration::from_nanos(u64::MAX - 5));
    c.advance(Duration::from_nanos(10));
    eprintln!("u64::MAX - 5 ns + 10 ns = {:?}", c.now());
    assert!(
        c.now() >= Duration::from_nanos(u64::MAX - 5),
        "clock went backwards"
    );
}

/// G = 1 and G = 63: retention over G-1 rotations, forgotten at the G-th; rotate_after(1).
#[test]
fn extreme_generation_counts_keep_g_minus_one_rotations() {
    for g in [1u32, 2, 63] {
        let f = WindowedBloomFilter::builder(1_000)
            .periods(g - 1)
            .rotate_manually()
            .build()
            .unwrap();
        let batches: Vec<Vec<u64>> = (0..g as u64 + 2)
            .map(|i| {
                let b: Vec<u64> = keys(100 + i, 200)
                    .into_iter()
                    .filter(|k| f.insert(k))
                    .collect();
                f.rotate().unwrap();
                b
            })
            .collect();
        // Now at generation g + 2: batch j (gen j) live iff j >= g + 2 - g + 1 = 3.
        for (j, b) in batches.iter().enumerate() {
            let found = b.iter().filter(|k| f.contains(*k)).count();
            let live = (j as u64) + u64::from(g) > f.generation();
            if live {
                assert_eq!(found, b.len(), "g {g} batch {j}");
            } else {
                assert!(found < b.len() / 10 + 3, "g {g} batch {j}: {found}");
            }
        }
    }
    let f = WindowedBloomFilter::builder(1_000)
        .periods(2)
        .rotate_after(1)
        .build()
        .unwrap();
    let news: Vec<u64> = keys(200, 10_000)
        .into_iter()
        .filter(|k| f.insert(k))
        .collect();
    eprintln!(
        "rotate_after(1): {} new, generation {}",
        news.len(),
        f.generation()
    );
}
