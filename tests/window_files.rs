//! Saving and loading `WindowedBloomFilter`: a loaded window keeps its answers, generation,
//! rotation schedule and time base; one loaded late catches up; a rotation waits for a save;
//! the bytes of its file; and crafted window files are refused for what they say.
#![cfg(not(seen_loom))]

mod common;

use std::time::Duration;

use common::files::{bloom, bytes_of, put_u64, resign, scratch, window_bytes};
use common::keys;
use seen::builder::Rotation;
use seen::clock::{Clock, ManualClock, TimeBase};
use seen::hash::StableHasher;
use seen::{AtomicBloomFilter, Corruption, Error, Layout, WindowedBloomFilter};

/// The period of the time-mode windows below.
const HOUR: Duration = Duration::from_secs(3600);
const DAY: Duration = Duration::from_secs(86_400);

/// A window of 3 generations, 1,000 items each, on `clock`, rotated as `rotation` says.
fn window_on(
    rotation: Rotation,
    clock: &ManualClock,
) -> WindowedBloomFilter<StableHasher, ManualClock> {
    let builder = WindowedBloomFilter::builder(1000).periods(2);
    let builder = match rotation {
        Rotation::AfterInserts(n) => builder.rotate_after(n),
        Rotation::Every(p) => builder.rotate_every(p),
        Rotation::EveryAligned(p) => builder.rotate_every_aligned(p),
        _ => builder.rotate_manually(),
    };
    builder.clock(clock.clone()).build().unwrap()
}

/// A window saved in each rotation mode loads with the same bits, generation, rotation, count
/// and next rotation time: it answers as the saved one, writes the same bytes back, rotates
/// after the same number of new items (count mode) or at the same instant (time modes).
#[test]
fn a_loaded_window_keeps_its_answers_generation_and_schedule() {
    let start = Duration::from_secs(20_000 * 86_400 + 1234);
    let keys = common::keys(120, 1_500);
    let others = common::keys(121, 20_000);
    for rotation in [
        Rotation::AfterInserts(400),
        Rotation::Every(HOUR),
        Rotation::EveryAligned(HOUR),
        Rotation::Manual,
    ] {
        let clock = ManualClock::new(start);
        let f = window_on(rotation, &clock);
        // The first rotation time: an hour after the build, or the next full hour.
        let mut due = match rotation {
            Rotation::EveryAligned(_) => Duration::from_secs(20_000 * 86_400 + 3600),
            _ => start + HOUR,
        };
        // New items since the last rotation: the count a count-mode filter holds (every item
        // counts below 2,048 per generation).
        let mut counted = 0u64;
        for (i, batch) in keys.chunks(500).enumerate() {
            if i > 0 && !matches!(rotation, Rotation::AfterInserts(_)) {
                clock.set(due);
                due += HOUR;
                if matches!(rotation, Rotation::Manual) {
                    f.rotate().unwrap();
                } else {
                    assert_eq!(f.maintain(), 1, "{rotation:?}");
                }
            }
            for k in batch {
                let generation = f.generation();
                if f.insert(k) {
                    counted += 1;
                }
                if f.generation() != generation {
                    counted = 0;
                }
            }
        }
        assert!(f.generation() >= 2, "{rotation:?}");
        let file = window_bytes(&f);
        let mine = ManualClock::new(clock.now());
        let loaded = WindowedBloomFilter::read_from(&file[..])
            .unwrap()
            .with_clock(mine.clone());
        assert_eq!(
            (loaded.generation(), loaded.rotation(), loaded.sizing()),
            (f.generation(), f.rotation(), f.sizing()),
            "{rotation:?}"
        );
        for k in keys.iter().chain(&others) {
            assert_eq!(loaded.contains(k), f.contains(k), "{rotation:?}");
        }
        assert_eq!(window_bytes(&loaded), file, "{rotation:?}");
        let generation = loaded.generation();
        match rotation {
            Rotation::AfterInserts(n) => {
                // The count survived: the loaded filter rotates at the (n - counted)-th new
                // item (its spare is clear, so at once).
                assert!(counted < n);
                let mut new = 0;
                for k in common::keys(122, 1_000) {
                    new += u64::from(loaded.insert(&k));
                    if loaded.generation() != generation {
                        break;
                    }
                }
                assert_eq!(new, n - counted);
                assert_eq!(loaded.generation(), generation + 1);
            }
            Rotation::Every(_) | Rotation::EveryAligned(_) => {
                // The next rotation time survived, to the nanosecond.
                mine.set(due - Duration::from_nanos(1));
                assert_eq!(loaded.maintain(), 0, "{rotation:?}");
                mine.set(due);
                assert_eq!(loaded.maintain(), 1, "{rotation:?}");
                assert_eq!(loaded.generation(), generation + 1);
            }
            _ => {
                mine.set(due + 100 * HOUR);
                assert_eq!(loaded.maintain(), 0);
                assert!(loaded.rotate().is_some());
                assert_eq!(loaded.generation(), generation + 1);
            }
        }
    }
}

/// The spare is saved as zeros, and loaded as clear and ready: after one rotation, the loaded
/// window answers as the saved one does after its own (which clears its spare first). The
/// spare holds a generation of items, out of the window but not yet cleared, when saved.
#[test]
fn a_loaded_window_starts_its_next_generation_empty() {
    let clock = ManualClock::new(HOUR);
    let f = window_on(Rotation::Manual, &clock);
    let batches: Vec<Vec<u64>> = (0..4).map(|i| common::keys(130 + i, 500)).collect();
    for (i, batch) in batches.iter().enumerate() {
        if i > 0 {
            f.rotate().unwrap();
        }
        batch.iter().for_each(|k| _ = f.insert(k));
    }
    // Generation 4: the batches of generations 2 and 3 live (and 4, empty), the one of
    // generation 1 in the spare, out of the window.
    f.rotate().unwrap();
    assert_eq!(f.generation(), 4);
    let file = window_bytes(&f);
    let loaded = WindowedBloomFilter::read_from(&file[..]).unwrap();
    let found = |w: &dyn Fn(&u64) -> bool, batch: &[u64]| batch.iter().filter(|&&k| w(&k)).count();
    assert_eq!(
        found(&|k| loaded.contains(k), &batches[1]),
        found(&|k| f.contains(k), &batches[1])
    );
    loaded.rotate().unwrap();
    f.rotate().unwrap();
    assert_eq!((loaded.generation(), f.generation()), (5, 5));
    for batch in &batches {
        for k in batch {
            assert_eq!(loaded.contains(k), f.contains(k));
        }
    }
    // Only batch 3 is live now; batch 1, in the spare when saved, is not back.
    assert_eq!(found(&|k| loaded.contains(k), &batches[3]), 500);
    let stale = found(&|k| loaded.contains(k), &batches[1]);
    assert!(stale <= 10, "{stale} of 500 keys from the spare came back");
}

/// A time-mode window loaded after its next rotation time catches up at `maintain`: one period
/// late, it forgets its oldest generation; more than `G` periods late, everything; the next
/// rotation is then a period after the catch-up (aligned: the next boundary).
#[test]
fn a_window_loaded_late_forgets_what_the_missed_periods_forget() {
    let start = Duration::from_secs(20_000 * 86_400);
    let batches: Vec<Vec<u64>> = (0..3).map(|i| common::keys(140 + i, 300)).collect();
    for rotation in [Rotation::Every(HOUR), Rotation::EveryAligned(HOUR)] {
        let clock = ManualClock::new(start);
        let f = window_on(rotation, &clock);
        for (i, batch) in batches.iter().enumerate() {
            if i > 0 {
                clock.advance(HOUR);
                assert_eq!(f.maintain(), 1);
            }
            batch.iter().for_each(|k| _ = f.insert(k));
        }
        // Generation 2, the next rotation at 03:00: saved at 02:00.
        let file = window_bytes(&f);
        let load_at = |time: Duration| {
            let clock = ManualClock::new(time);
            let f = WindowedBloomFilter::read_from(&file[..])
                .unwrap()
                .with_clock(clock.clone());
            (f, clock)
        };
        let found = |f: &WindowedBloomFilter<_, _>, batch: &[u64]| {
            batch.iter().filter(|k| f.contains(*k)).count()
        };

        // An hour and a half later: one period missed.
        let (late, late_clock) = load_at(start + 2 * HOUR + 3 * HOUR / 2);
        assert_eq!(late.generation(), 2);
        assert_eq!(found(&late, &batches[0]), 300, "{rotation:?}");
        assert_eq!(late.maintain(), 1);
        assert_eq!(late.generation(), 3);
        // The first hour's keys are out; the two others in (a few false positives allowed:
        // the window's rate is 1% when full, and it holds 600 of 3,000).
        assert!(found(&late, &batches[0]) < 10, "{rotation:?}");
        assert_eq!(
            (found(&late, &batches[1]), found(&late, &batches[2])),
            (300, 300)
        );
        // The next rotation: a period after the late one ran (03:30 to 04:30), or, aligned,
        // at the next boundary (04:00).
        let next = |ran: Duration| match rotation {
            Rotation::Every(p) => ran + p,
            _ => HOUR * (ran.as_secs() / 3600 + 1) as u32,
        };
        let due = next(start + 2 * HOUR + 3 * HOUR / 2);
        late_clock.set(due - Duration::from_nanos(1));
        assert_eq!(late.maintain(), 0);
        late_clock.set(due);
        assert_eq!(late.maintain(), 1);

        // Ten and a half hours later: more than the window. `G` rotations, every generation
        // new and empty.
        let (stale, stale_clock) = load_at(start + 12 * HOUR + HOUR / 2);
        assert_eq!(stale.maintain(), 3, "{rotation:?}");
        assert_eq!(stale.generation(), 5);
        assert_eq!(batches.iter().map(|b| found(&stale, b)).sum::<usize>(), 0);
        // Ten periods passed (03:00 to 12:00): the next rotation is a period after 12:30
        // (aligned: 13:00).
        assert_eq!(stale.maintain(), 0);
        let due = next(start + 12 * HOUR + HOUR / 2);
        stale_clock.set(due - Duration::from_nanos(1));
        assert_eq!(stale.maintain(), 0);
        stale_clock.set(due);
        assert_eq!(stale.maintain(), 1);
    }
}

/// A time-mode file loaded later than its next rotation time catches up at the next `maintain`
/// (until then the inserts that read the clock rotate once each, as documented) and keeps the
/// items inserted after the load: the overdue rotations do not flush them.
#[test]
fn a_file_loaded_late_keeps_new_inserts_until_maintain() {
    let start = 20_000 * DAY;
    let clock = ManualClock::new(start);
    let f = WindowedBloomFilter::builder(10_000)
        .periods(2)
        .rotate_every(HOUR)
        .clock(clock.clone())
        .build()
        .unwrap();
    let mut file = Vec::new();
    f.write_to(&mut file).unwrap();
    clock.advance(24 * HOUR);
    let loaded = WindowedBloomFilter::read_from(&file[..])
        .unwrap()
        .with_clock(clock.clone());
    let victims: Vec<u64> = keys(3, 50)
        .into_iter()
        .filter(|k| loaded.insert(k))
        .collect();
    for k in keys(4, 20_000) {
        loaded.insert(&k);
    }
    let lost = victims.iter().filter(|k| !loaded.contains(*k)).count();
    eprintln!(
        "loaded file: generation {}; {lost} of {} fresh items forgotten with the clock standing still",
        loaded.generation(),
        victims.len()
    );
    assert_eq!(lost, 0);
}

/// The window record's `clock` field (payload offset 20): each time base a filter records is
/// written as its number, loads back, and survives `with_clock` and a second save; a file of
/// any other number is refused.
#[test]
fn a_window_file_keeps_what_time_its_filter_rotated_by() {
    const R: usize = 112 + 20; // the record's clock field
    let day = Duration::from_secs(86_400);
    let manual = ManualClock::new(20_000 * day);
    let builder = || {
        WindowedBloomFilter::builder(1000)
            .periods(2)
            .rotate_every_aligned(day)
    };
    let cases: [(
        &str,
        WindowedBloomFilter<StableHasher, ManualClock>,
        TimeBase,
        u8,
    ); 5] = [
        (
            "the system clock",
            builder().build().unwrap().with_clock(manual.clone()),
            TimeBase::Wall,
            1,
        ),
        (
            "a manual clock",
            builder().clock(manual.clone()).build().unwrap(),
            TimeBase::Other,
            2,
        ),
        (
            "a manual clock marked as the wall clock",
            builder()
                .clock(manual.clone())
                .time_base(TimeBase::Wall)
                .build()
                .unwrap(),
            TimeBase::Wall,
            1,
        ),
        (
            "the system clock marked as another",
            builder()
                .time_base(TimeBase::Other)
                .build()
                .unwrap()
                .with_clock(manual.clone()),
            TimeBase::Other,
            2,
        ),
        (
            "a manual clock marked as unknown",
            builder()
                .clock(manual.clone())
                .build()
                .unwrap()
                .with_time_base(TimeBase::Unknown),
            TimeBase::Unknown,
            0,
        ),
    ];
    for (what, f, base, number) in cases {
        assert_eq!(f.time_base(), base, "{what}");
        f.insert("a");
        let file = window_bytes(&f);
        assert_eq!(&file[R..R + 4], &[number, 0, 0, 0], "{what}");
        // Loaded with the system clock, then given a manual one: the file's time base stays.
        let loaded = WindowedBloomFilter::read_from(&file[..]).unwrap();
        assert_eq!(loaded.time_base(), base, "{what}");
        let loaded = loaded.with_clock(manual.clone());
        assert_eq!(loaded.time_base(), base, "{what}");
        assert!(loaded.contains("a"));
        assert_eq!(window_bytes(&loaded), file, "{what}");
        // A program that goes on by the wall clock records it.
        let wall = loaded.with_time_base(TimeBase::Wall);
        assert_eq!(&window_bytes(&wall)[R..R + 4], &[1, 0, 0, 0], "{what}");
    }
    // No writer writes 3 or more: refused, naming the field.
    let mut file = window_bytes(&builder().clock(manual.clone()).build().unwrap());
    for number in [3u32, 255, u32::MAX] {
        file[R..R + 4].copy_from_slice(&number.to_le_bytes());
        common::reseal(&mut file);
        assert_eq!(
            WindowedBloomFilter::read_from(&file[..]).unwrap_err(),
            Error::Corrupt(Corruption::Header("unknown clock")),
            "clock {number}"
        );
    }
}

/// A file holds generation numbers below 2^63: a filter at 2^63 - 1 (loaded from a crafted
/// file; honestly reached, 292 years of a rotation every nanosecond) does not rotate past it,
/// by `rotate`, `maintain`, a count or the clock, so that what it saves loads again, with
/// everything it held.
#[test]
fn a_window_at_the_last_generation_rotates_no_more_and_saves_a_file_that_loads() {
    const LAST: u64 = (1 << 63) - 1;
    const R: usize = 112; // the window record
    let hour = Duration::from_secs(3600);
    let start = Duration::from_secs(20_000 * 86_400);
    let clock = ManualClock::new(start);
    let keys = common::keys(130, 300);
    for rotation in [
        Rotation::Manual,
        Rotation::AfterInserts(100),
        Rotation::Every(hour),
        Rotation::EveryAligned(hour),
    ] {
        clock.set(start);
        // 3 generations and the spare: generation 3, like 2^63 - 1, lives in slot 3.
        let f = window_on(rotation, &clock);
        for _ in 0..3 {
            f.rotate().unwrap();
        }
        keys[..50].iter().for_each(|k| _ = f.insert(k));
        let mut file = window_bytes(&f);
        file[R + 8..R + 16].copy_from_slice(&LAST.to_le_bytes());
        common::reseal(&mut file);
        let f = WindowedBloomFilter::read_from(&file[..])
            .unwrap()
            .with_clock(clock.clone());
        assert_eq!(f.generation(), LAST, "{rotation:?}");
        // Every way to rotate: none does.
        assert_eq!(f.rotate(), None, "{rotation:?}");
        keys.iter().for_each(|k| _ = f.insert(k)); // 250 more: past a count of 100
        clock.advance(10 * hour); // past the next rotation time
        keys.iter().for_each(|k| _ = f.insert(k));
        assert_eq!(f.maintain(), 0, "{rotation:?}");
        assert_eq!(f.rotate(), None, "{rotation:?}");
        assert_eq!(f.generation(), LAST, "{rotation:?}");
        // Saved, it loads, holding every key.
        let loaded = WindowedBloomFilter::read_from(&window_bytes(&f)[..]).unwrap();
        assert_eq!(loaded.generation(), LAST, "{rotation:?}");
        assert!(keys.iter().all(|k| loaded.contains(k)), "{rotation:?}");
    }
    // One generation earlier, the last rotation happens; the next does not.
    let f = window_on(Rotation::Manual, &clock);
    let mut file = window_bytes(&f);
    file[R + 8..R + 16].copy_from_slice(&(LAST - 1).to_le_bytes());
    common::reseal(&mut file);
    let f = WindowedBloomFilter::read_from(&file[..]).unwrap();
    assert_eq!((f.rotate(), f.rotate()), (Some(LAST), None));
    WindowedBloomFilter::read_from(&window_bytes(&f)[..]).unwrap();
}

/// A writer for `write_to` that holds the save at its first write until the test releases it:
/// says `started` then waits for `release` (or its hang-up). Keeps the bytes.
struct HeldWriter {
    started: Option<std::sync::mpsc::Sender<()>>,
    release: std::sync::mpsc::Receiver<()>,
    bytes: Vec<u8>,
}

impl std::io::Write for HeldWriter {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        if let Some(started) = self.started.take() {
            started.send(()).unwrap();
            let _ = self.release.recv();
        }
        self.bytes.extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A manual window, a save of it held at its first write (so holding the rotation lock), and
/// the sender that releases it: runs `during` while the save is held, then joins it and
/// returns what `during` returned and the saved file.
fn while_a_save_is_held<R: Send>(
    f: &WindowedBloomFilter,
    during: impl FnOnce(std::sync::mpsc::Sender<()>) -> R + Send,
) -> (R, Vec<u8>) {
    use std::sync::mpsc::channel;
    let (started, save_started) = channel();
    let (release, held) = channel();
    std::thread::scope(|s| {
        let saver = s.spawn(move || {
            let mut out = HeldWriter {
                started: Some(started),
                release: held,
                bytes: Vec::new(),
            };
            f.write_to(&mut out).unwrap();
            out.bytes
        });
        save_started
            .recv_timeout(Duration::from_secs(60))
            .expect("the save never wrote");
        let r = during(release);
        (r, saver.join().unwrap())
    })
}

/// `rotate()` during a save waits for the save and rotates: `None` means only "another thread
/// rotated meanwhile (its rotation then stands for this one)", as its docs say. In manual mode
/// nobody rotates later, so a rotation skipped for a save would be silently lost. The save is
/// held at its first write (holding the rotation lock) while a thread calls `rotate()`; the
/// test releases the save once that thread has found the lock held and is about to wait for it
/// (the `sync.lock.wait` pause point, after `windowed.rotate.lock`): the rotation comes after
/// the save, whose file is of generation 0. Checked to fail: a `rotate()` that only tries the
/// lock, as the inserts' rotations do, returns `None` without waiting.
#[cfg(feature = "failpoints")]
#[test]
fn a_rotate_during_a_save_waits_and_rotates() {
    let f = WindowedBloomFilter::builder(1000)
        .rotate_manually()
        .build()
        .unwrap();
    f.insert("before");
    enum Rotator {
        AtLock,
        Waits,
        Returned(Option<u64>),
    }
    let ((r, steps), file) = while_a_save_is_held(&f, |release| {
        std::thread::scope(|s| {
            let (tell, told) = std::sync::mpsc::channel();
            let f = &f;
            s.spawn(move || {
                let hook = tell.clone();
                let _armed = seen::failpoints::arm(move |point| {
                    let _ = hook.send(match point {
                        "windowed.rotate.lock" => Rotator::AtLock,
                        "sync.lock.wait" => Rotator::Waits,
                        _ => return,
                    });
                });
                let _ = tell.send(Rotator::Returned(f.rotate()));
            });
            let mut steps = Vec::new();
            let r = loop {
                match told.recv_timeout(Duration::from_secs(60)) {
                    Ok(Rotator::AtLock) => steps.push("at the lock"),
                    Ok(Rotator::Waits) => {
                        steps.push("waits");
                        // Held: what lets it through is the end of the save.
                        release.send(()).unwrap();
                    }
                    Ok(Rotator::Returned(r)) => break r,
                    Err(e) => panic!("rotate() neither waited nor returned: {e}"),
                }
            };
            (r, steps)
        })
    });
    assert_eq!(r, Some(1), "the rotation was dropped");
    assert_eq!(steps, ["at the lock", "waits"]);
    assert_eq!(f.generation(), 1);
    let saved = WindowedBloomFilter::read_from(&file[..]).unwrap();
    assert_eq!(saved.generation(), 0);
    assert!(saved.contains("before"));
}

/// The same without the pause point: the save is held at its first write while a thread calls
/// `rotate()`, and released right after that thread is spawned; whether the rotation reaches the lock
/// before the save ends is the scheduler's (the test above decides it). Either way the
/// rotation happens, and the save is of generation 0 or 1.
#[test]
fn a_rotate_racing_a_save_rotates() {
    let f = WindowedBloomFilter::builder(1000)
        .rotate_manually()
        .build()
        .unwrap();
    let (r, file) = while_a_save_is_held(&f, |release| {
        std::thread::scope(|s| {
            let rotator = s.spawn(|| f.rotate());
            release.send(()).unwrap();
            rotator.join().unwrap()
        })
    });
    assert_eq!(r, Some(1), "the rotation was dropped");
    assert_eq!(f.generation(), 1);
    let saved = WindowedBloomFilter::read_from(&file[..]).unwrap();
    assert!(saved.generation() <= 1);
}

/// A window's file, byte by byte as the format notes describe kind 5: the header's Bloom fields,
/// the window record, and the bits (a generation in its slot, the spare's words as zeros).
#[test]
fn window_files_are_laid_out_as_the_format_notes_say() {
    let u32_at = |file: &[u8], at: usize| u32::from_le_bytes(file[at..at + 4].try_into().unwrap());
    let u64_at = |file: &[u8], at: usize| u64::from_le_bytes(file[at..at + 8].try_into().unwrap());
    let f = WindowedBloomFilter::builder(1000)
        .periods(1)
        .rotate_manually()
        .build()
        .unwrap();
    let sizing = f.sizing();
    let blocks = sizing.generation.blocks;
    // The hash whose block is `block` (`(h1 × B) >> 64`).
    let at = |block: u64, h2: u64| seen::hash::Hash128 {
        h1: ((u128::from(block) << 64).div_ceil(u128::from(blocks))) as u64,
        h2,
    };
    // Generation 0 in slot 0, generation 1 in slot 1; at generation 2, slot 0 is the spare.
    assert!(f.insert_hash(at(5, 0x0123_4567_89ab_cdef)));
    f.rotate().unwrap();
    assert!(f.insert_hash(at(7, 0xfedc_ba98_7654_3210)));
    f.rotate().unwrap();
    let file = window_bytes(&f);
    const H: usize = 112;
    let payload = 64 + 8 * blocks * 4;
    assert_eq!((file[16], file[17]), (5, 1));
    assert_eq!(u32_at(&file, 20), sizing.generation.hashes);
    assert_eq!(u64_at(&file, 24), 1000);
    assert_eq!(u64_at(&file, 32), 0.01f64.to_bits());
    assert_eq!(u64_at(&file, 40), sizing.expected_fpr.to_bits());
    assert_eq!(u64_at(&file, 48), blocks);
    assert_eq!(u64_at(&file, 56), payload);
    assert_eq!(u64_at(&file, 64), 0);
    assert_eq!(file.len(), H + payload as usize + 8); // one chunk
    let r = |at: usize| H + at;
    assert_eq!((u32_at(&file, r(0)), u32_at(&file, r(4))), (2, 4));
    assert_eq!(u64_at(&file, r(8)), 2);
    // Manual rotation; built on the system clock: the wall clock.
    assert_eq!((u32_at(&file, r(16)), u32_at(&file, r(20))), (4, 1));
    assert_eq!(u64_at(&file, r(24)), 0);
    assert_eq!(u64_at(&file, r(32)), u64::MAX);
    assert_eq!(u64_at(&file, r(40)), 0);
    assert_eq!(u64_at(&file, r(48)), sizing.generation_fpr.to_bits());
    assert_eq!(
        u64_at(&file, r(56)),
        sizing.generation.expected_fpr.to_bits()
    );
    // One word set: block 7's slot 1 (generation 1). Block 5's slot 0, generation 0's word,
    // is the spare's: saved as zero (the filter itself has not cleared it yet).
    let words: Vec<u64> = (0..4 * blocks as usize)
        .map(|i| u64_at(&file, r(64 + 8 * i)))
        .collect();
    let set: Vec<usize> = (0..words.len()).filter(|&i| words[i] != 0).collect();
    assert_eq!(set, [7 * 4 + 1]);
    assert!(words[29].count_ones() <= sizing.generation.hashes);
    let loaded = WindowedBloomFilter::read_from(&file[..]).unwrap();
    assert!(loaded.contains_hash(at(7, 0xfedc_ba98_7654_3210)));
    assert!(!loaded.contains_hash(at(5, 0x0123_4567_89ab_cdef)));
}

/// A window of 8 generations and more is saved in packed blocks, `G + 1` words each, as the
/// format notes say: 9 slots in 9 words, generation `e` in word `block × 9 + e mod 9`, wrapping
/// around the slots; the loaded filter answers as the saved one at every generation through
/// three wraps, and saves the same bytes.
#[test]
fn windows_of_8_generations_and_more_are_saved_in_packed_blocks() {
    let u32_at = |file: &[u8], at: usize| u32::from_le_bytes(file[at..at + 4].try_into().unwrap());
    let u64_at = |file: &[u8], at: usize| u64::from_le_bytes(file[at..at + 8].try_into().unwrap());
    let f = WindowedBloomFilter::builder(1000)
        .periods(7)
        .rotate_manually()
        .build()
        .unwrap();
    let sizing = f.sizing();
    let blocks = sizing.generation.blocks;
    assert_eq!(sizing.stride_words, 9);
    assert_eq!(f.memory_bytes(), 9 * sizing.generation.bytes());
    let at = |block: u64, h2: u64| seen::hash::Hash128 {
        h1: ((u128::from(block) << 64).div_ceil(u128::from(blocks))) as u64,
        h2,
    };
    const H: usize = 112;
    let keys: Vec<u64> = common::keys(160, 30 * 50);
    for (e, batch) in keys.chunks(50).enumerate() {
        let e = e as u64;
        if e > 0 {
            assert_eq!(f.rotate(), Some(e));
        }
        // One probe per generation at block 3, in the generation's slot.
        assert!(f.insert_hash(at(3, 0x9e37_79b9_7f4a_7c15u64.wrapping_mul(e + 1))));
        batch.iter().for_each(|k| _ = f.insert(k));
        let file = window_bytes(&f);
        assert_eq!(u64_at(&file, 56), 64 + 8 * blocks * 9);
        assert_eq!((u32_at(&file, H), u32_at(&file, H + 4)), (8, 9));
        let word = |block: u64, slot: u64| u64_at(&file, H + 64 + 8 * (block * 9 + slot) as usize);
        // The spare's word is zero in the file; the current generation's holds its probe.
        assert_eq!(word(3, (e + 1) % 9), 0);
        assert_ne!(word(3, e % 9), 0);
        let loaded = WindowedBloomFilter::read_from(&file[..]).unwrap();
        assert_eq!(loaded.sizing(), sizing);
        for (i, k) in keys[..(e as usize + 1) * 50].iter().enumerate() {
            assert_eq!(loaded.contains(k), f.contains(k), "generation {e}, key {i}");
        }
        // Kept for 8 generations (the current one and 7 before it), forgotten after.
        let oldest = e.saturating_sub(7) as usize;
        assert!(
            keys[oldest * 50..(e as usize + 1) * 50]
                .iter()
                .all(|k| loaded.contains(k))
        );
        assert_eq!(window_bytes(&loaded), file);
    }
}

/// A windowed filter's file whose header or window record says something impossible, re-signed
/// so that only that is wrong: each a typed error, from `load` and from `read_from`, before any
/// allocation of the size it names.
#[test]
fn crafted_window_files_are_refused_for_what_they_say() {
    // 2 generations: 4 words per block, slot 3 is padding; generation 1's spare is slot 2.
    let f = WindowedBloomFilter::builder(300)
        .periods(1)
        .rotate_manually()
        .build()
        .unwrap();
    common::keys(150, 200).iter().for_each(|k| _ = f.insert(k));
    f.rotate();
    common::keys(151, 200).iter().for_each(|k| _ = f.insert(k));
    let good = window_bytes(&f);
    const H: usize = 112;
    const R: usize = H; // the window record: the first 64 payload bytes
    let blocks = u64::from_le_bytes(good[48..56].try_into().unwrap()) as usize;
    assert_eq!(good.len(), H + 64 + blocks * 4 * 8 + 8);
    let dir = scratch("crafted-window");
    let path = dir.join("w.seen");
    let refused = |file: &[u8], what: &str| {
        std::fs::write(&path, file).unwrap();
        for result in [
            WindowedBloomFilter::load(&path).map(|_| ()),
            WindowedBloomFilter::read_from(file).map(|_| ()),
        ] {
            assert!(
                matches!(result, Err(Error::Corrupt(_) | Error::TooLarge { .. })),
                "{what}: {result:?}"
            );
        }
        // And a stream read names the field (the file's length is not checked first).
        WindowedBloomFilter::read_from(file).unwrap_err()
    };
    // The record's fields, each set to something no filter writes.
    let record_cases: [(&str, usize, &[u8]); 17] = [
        ("0 generations", 0, &0u32.to_le_bytes()),
        // Packed blocks are for 9 slots and more: 3 slots take 4 words (one line).
        ("3 words per block", 4, &3u32.to_le_bytes()),
        ("64 generations", 0, &64u32.to_le_bytes()),
        ("4 generations in 4 words", 0, &4u32.to_le_bytes()),
        ("8 words per block", 4, &8u32.to_le_bytes()),
        ("generation 2^63", 8, &(1u64 << 63).to_le_bytes()),
        ("rotation mode 0", 16, &0u32.to_le_bytes()),
        ("rotation mode 5", 16, &5u32.to_le_bytes()),
        ("clock 3", 20, &3u32.to_le_bytes()),
        ("a manual period", 24, &5u64.to_le_bytes()),
        ("a count of 0", 16, &1u32.to_le_bytes()),
        ("a period of 0", 16, &2u32.to_le_bytes()),
        ("a manual rotation time", 32, &7u64.to_le_bytes()),
        ("a manual count", 40, &3u64.to_le_bytes()),
        ("generation rate 0", 48, &0f64.to_bits().to_le_bytes()),
        ("generation rate NaN", 48, &f64::NAN.to_bits().to_le_bytes()),
        ("expected rate 2", 56, &2f64.to_bits().to_le_bytes()),
    ];
    for (what, at, bytes) in record_cases {
        let mut file = good.clone();
        file[R + at..R + at + bytes.len()].copy_from_slice(bytes);
        common::reseal(&mut file);
        let err = refused(&file, what);
        assert!(
            matches!(err, Error::Corrupt(Corruption::Header(_))),
            "{what}: {err:?}"
        );
    }
    // An aligned rotation whose next time is off its period.
    let mut file = good.clone();
    file[R + 16..R + 20].copy_from_slice(&3u32.to_le_bytes());
    file[R + 24..R + 32].copy_from_slice(&1000u64.to_le_bytes());
    file[R + 32..R + 40].copy_from_slice(&1500u64.to_le_bytes());
    common::reseal(&mut file);
    refused(&file, "aligned off its period");
    file[R + 32..R + 40].copy_from_slice(&2000u64.to_le_bytes());
    common::reseal(&mut file);
    let aligned = WindowedBloomFilter::read_from(&file[..]).unwrap();
    assert_eq!(
        aligned.rotation(),
        Rotation::EveryAligned(Duration::from_micros(1))
    );
    // A set bit in the spare (slot 2 of generation 1) or in the padding (slot 3): no filter
    // saves one.
    for (what, slot) in [("spare", 2), ("padding", 3)] {
        let mut file = good.clone();
        let word = R + 64 + 8 * (4 * (blocks / 2) + slot);
        file[word] |= 1;
        common::reseal(&mut file);
        let err = refused(&file, what);
        assert!(
            matches!(err, Error::Corrupt(Corruption::Header(_))),
            "{what}: {err:?}"
        );
    }
    // The header's fields.
    let payload = (64 + blocks * 32) as u64;
    for (what, at, value) in [
        ("7 blocks", 48, 7),
        ("0 blocks", 48, 0),
        ("1 record", 64, 1),
        ("payload 8 longer", 56, payload + 8),
        ("payload without the record", 56, payload - 64),
        ("payload of 3 words per block", 56, 64 + blocks as u64 * 24),
        (
            "payload of 128 words per block",
            56,
            64 + blocks as u64 * 1024,
        ),
        ("k 0", 20, 0),
        ("capacity 0", 24, 0),
    ] {
        let mut file = good.clone();
        if at == 20 {
            file[20..24].copy_from_slice(&(value as u32).to_le_bytes());
            resign(&mut file);
        } else {
            put_u64(&mut file, at, value);
        }
        let err = refused(&file, what);
        assert!(
            matches!(err, Error::Corrupt(Corruption::Header(_))),
            "{what}: {err:?}"
        );
    }
    for layout in [0u8, 2] {
        let mut file = good.clone();
        file[17] = layout;
        resign(&mut file);
        refused(&file, "layout");
    }
    // 2^60 bytes of bits, consistent with the blocks: refused from the file's length, and
    // from a stream when its bytes run out (allocating as they arrive); 2^66 bits, too large.
    let mut huge = good.clone();
    put_u64(&mut huge, 48, 1 << 55);
    put_u64(&mut huge, 56, 64 + (1 << 60));
    std::fs::write(&path, &huge).unwrap();
    assert_eq!(
        WindowedBloomFilter::load(&path).unwrap_err(),
        Error::Corrupt(Corruption::Truncated)
    );
    assert!(matches!(
        WindowedBloomFilter::read_from(&huge[..]),
        Err(Error::Corrupt(
            Corruption::Truncated | Corruption::ChunkChecksum { .. }
        ))
    ));
    put_u64(&mut huge, 48, 1 << 58);
    put_u64(&mut huge, 56, 64 + (1 << 63));
    assert!(matches!(
        WindowedBloomFilter::read_from(&huge[..]),
        Err(Error::TooLarge { what: "bits", .. })
    ));
    // Kinds are not interchangeable.
    assert!(matches!(
        AtomicBloomFilter::read_from(&good[..]),
        Err(Error::WrongStructure { .. })
    ));
    let atomic = bytes_of(&bloom(300, 0.01, Layout::Word));
    assert!(matches!(
        WindowedBloomFilter::read_from(&atomic[..]),
        Err(Error::WrongStructure { .. })
    ));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The window record's count is range-checked on load: a (checksummed) file with `counted` at or
/// beyond 2^63 is refused, since the next counted insert would overflow `fetch_add(step) + step`
/// (a panic in debug builds; in release the sum would wrap and the filter never rotate by count).
#[test]
fn a_loaded_count_beyond_2_63_is_refused() {
    let f = WindowedBloomFilter::builder(300)
        .periods(1)
        .rotate_after(300)
        .build()
        .unwrap();
    let mut file = Vec::new();
    f.write_to(&mut file).unwrap();
    let h = u32::from_le_bytes(file[12..16].try_into().unwrap()) as usize;
    file[h + 40..h + 48].copy_from_slice(&(u64::MAX).to_le_bytes());
    common::reseal(&mut file);
    assert!(matches!(
        WindowedBloomFilter::read_from(&file[..]),
        Err(seen::Error::Corrupt(_))
    ));
}

/// A period past u64::MAX ns (e.g. `Duration::MAX` for "practically never") is refused by the
/// builder, so every period a filter has round-trips through its file (one saved as u64::MAX ns
/// would load with another `rotation()` than the saved filter's).
#[test]
fn a_period_beyond_u64_nanoseconds_is_refused() {
    assert!(matches!(
        WindowedBloomFilter::builder(300)
            .rotate_every(Duration::MAX)
            .build(),
        Err(seen::Error::InvalidParameter(_))
    ));
    // The longest period accepted round-trips.
    let f = WindowedBloomFilter::builder(300)
        .rotate_every(Duration::from_nanos(u64::MAX))
        .build()
        .unwrap();
    let mut file = Vec::new();
    f.write_to(&mut file).unwrap();
    let l = WindowedBloomFilter::read_from(&file[..]).unwrap();
    assert_eq!(f.rotation(), l.rotation());
}
