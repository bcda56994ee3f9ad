//! `GrowingBloomFilter`: the rate at 10 and 100 times the initial capacity, two threads
//! growing it 100 times over (no false negative, exactly once, the overshoot bound), the
//! non-scaling mode, and the errors at the ends of the schedule.
#![cfg(not(seen_loom))]

mod common;

use common::{keys, same_key_race};
use seen::sizing::GrowingSizing;
use seen::{DedupFilter, Error, GrowingBloomFilter, Layout};

/// The trait's `bool` for the shared race helper: an `Err` fails the test.
struct Unwrapped<'a>(&'a GrowingBloomFilter);

impl DedupFilter<u64> for Unwrapped<'_> {
    fn insert(&self, item: &u64) -> bool {
        self.0.insert(item).expect("the growth never fails here")
    }

    fn contains(&self, item: &u64) -> bool {
        self.0.contains(item)
    }
}

/// The fraction of `fresh` keys (never inserted) that `f` reports present.
fn measured_fpr(f: &GrowingBloomFilter, fresh: &[u64]) -> f64 {
    fresh.iter().filter(|k| f.contains(*k)).count() as f64 / fresh.len() as f64
}

/// The most new items a layer may be counted past its capacity with `threads` inserting: the
/// documented bound, 1/64 of the capacity plus one item, plus one item per other thread (each
/// may have passed the check before the count moved).
fn overshoot_bound(capacity: u64, threads: u64) -> u64 {
    capacity / 64 + 1 + (threads - 1)
}

/// Two threads insert their own keys at once; each looks every key up right after its insert
/// when `check_each`. They meet every 256 keys, so that they insert together whatever the
/// scheduler does (two threads that ran one after the other would race nothing).
fn insert_from_two_threads(f: &GrowingBloomFilter, keys: [&[u64]; 2], check_each: bool) {
    assert_eq!(keys[0].len(), keys[1].len());
    let meet = &std::sync::Barrier::new(2);
    std::thread::scope(|s| {
        for own in keys {
            s.spawn(move || {
                for (i, k) in own.iter().enumerate() {
                    if i % 256 == 0 {
                        meet.wait();
                    }
                    f.insert(k).unwrap();
                    assert!(
                        !check_each || f.contains(k),
                        "false negative right after the insert"
                    );
                }
            });
        }
    });
}

#[test]
fn the_rate_at_10_and_100_times_the_initial_capacity_is_under_the_target() {
    let c0 = 10_000u64;
    let fresh = keys(99, 400_000);
    for (fpr, layout, tightening) in [
        (0.01, Layout::Word, 0.8),
        (0.01, Layout::Line, 0.8),
        (0.001, Layout::Word, 0.8),
        (0.001, Layout::Line, 0.8),
        (0.01, Layout::Word, 0.5),
        (0.01, Layout::Word, 0.9),
        (0.05, Layout::Line, 0.85),
    ] {
        let f = GrowingBloomFilter::builder(c0)
            .fpr(fpr)
            .layout(layout)
            .tightening(tightening)
            .build()
            .unwrap();
        let items = keys(1, 100 * c0 as usize);
        let mut new = 0;
        for (i, k) in items.iter().enumerate() {
            new += usize::from(f.insert(k).unwrap());
            if i + 1 == 10 * c0 as usize || i + 1 == items.len() {
                let what = format!("{layout:?} {fpr} t {tightening} at {}", i + 1);
                let measured = measured_fpr(&f, &fresh);
                let info = f.info();
                assert!(measured <= fpr, "{what}: measured {measured}");
                assert!(info.estimated_fpr <= fpr, "{what}: {info}");
                // The estimate from the bits is the rate the fresh keys measure.
                let sigma = (info.estimated_fpr / fresh.len() as f64).sqrt();
                assert!(
                    (measured - info.estimated_fpr).abs() <= 5.0 * sigma + 1e-5,
                    "{what}: measured {measured}, estimated {info}"
                );
                let layers = f.sizing().layers_for(i as u64 + 1).unwrap() as usize;
                assert!(
                    f.layers() == layers || f.layers() == layers + 1,
                    "{what}: {} layers, {layers} expected",
                    f.layers()
                );
                // Exact counts below 2^17 per layer; sampled above (within 3/256 at 3 sigma).
                let inserted = info.sampled_new_items.unwrap() as f64;
                assert!(
                    (inserted - new as f64).abs() <= 0.02 * new as f64,
                    "{what}: {info}"
                );
            }
        }
        assert!(items.iter().all(|k| f.contains(k)), "a false negative");
        assert!(new as f64 >= (1.0 - fpr) * items.len() as f64);
    }
}

#[test]
fn two_threads_growing_the_filter_100_times_over_lose_nothing_and_are_exactly_once() {
    let c0 = 1000u64;
    let mut worst = 0f64;
    for round in 0..6 {
        let f = GrowingBloomFilter::builder(c0).fpr(0.01).build().unwrap();
        let items = keys(round, 100 * c0 as usize);
        // Both threads insert every key, in the same order, and check each right after; the
        // same keys at once is where two threads can both be told "new".
        let race = same_key_race(&Unwrapped(&f), &items, None);
        assert_eq!(race.false_negatives, 0, "round {round}: {race:?}");
        assert_eq!(race.new_again, 0, "round {round}: {race:?}");
        assert_eq!(
            race.both_new, 0,
            "round {round}: two threads told new: {race:?}"
        );
        assert!(
            items.iter().all(|k| f.contains(k)),
            "false negative after join"
        );
        // Neither was told "new" only for a false positive.
        assert!(
            race.neither_new < items.len() / 100,
            "round {round}: {race:?}"
        );
        let measured = measured_fpr(&f, &keys(1000 + round, 200_000));
        assert!(measured <= 0.01, "round {round}: fpr {measured}");
        // 1000 + 2000 + ... + 64,000 = 127,000: seven layers hold 100,000 items.
        assert_eq!(f.layers(), 7, "round {round}");
        let layers = f.layer_info();
        for (i, layer) in layers.iter().enumerate().take(layers.len() - 1) {
            let over = layer.sampled_new_items.saturating_sub(layer.capacity);
            assert!(
                over <= overshoot_bound(layer.capacity, 2),
                "round {round}, layer {i}: {} new items past a capacity of {}",
                over,
                layer.capacity
            );
            assert!(
                layer.sampled_new_items >= layer.capacity,
                "layer {i} grew early"
            );
            worst = worst.max(over as f64 / layer.capacity as f64);
        }
    }
    println!(
        "largest overshoot: {:.3} % of a layer's capacity",
        100.0 * worst
    );
}

#[test]
fn threads_inserting_disjoint_keys_through_many_growths_see_their_own_and_each_others() {
    // Small layers (expansion 1: 64 growths of 50 items) so that most inserts race a growth.
    let f = GrowingBloomFilter::builder(50)
        .fpr(0.1)
        .layout(Layout::Line)
        .expansion(1)
        .tightening(0.95)
        .build()
        .unwrap();
    let (a, b) = (keys(7, 1500), keys(8, 1500));
    insert_from_two_threads(&f, [&a, &b], true);
    assert!(a.iter().chain(&b).all(|k| f.contains(k)));
    assert_eq!(f.layers(), f.sizing().layers_for(3000).unwrap() as usize);
    assert!(f.info().estimated_fpr <= 0.1, "{}", f.info());
}

#[test]
fn a_non_scaling_filter_refuses_new_items_once_full_and_still_answers() {
    let f = GrowingBloomFilter::builder(5000)
        .fpr(0.01)
        .scaling(false)
        .build()
        .unwrap();
    assert!(!f.is_scaling());
    // The only layer gets the whole rate (with 1/32 of room).
    assert_eq!(f.sizing().layer(0).unwrap().fpr, 0.01);
    let items = keys(3, 20_000);
    let (mut new, mut full) = (0, 0);
    for k in &items {
        match f.insert(k) {
            Ok(n) => new += usize::from(n),
            Err(Error::Full { capacity: 5000 }) => full += 1,
            Err(e) => panic!("{e}"),
        }
    }
    // Exactly the capacity (the count is exact below 2^17 items and one thread inserts).
    assert_eq!(new, 5000);
    assert_eq!(f.layers(), 1);
    assert!(full > 14_000, "{full}");
    // Accepted items are still "seen"; refused ones were not inserted.
    let accepted: Vec<u64> = items.iter().copied().filter(|k| f.contains(k)).collect();
    assert!(accepted.iter().all(|k| f.insert(k) == Ok(false)));
    assert!(f.info().estimated_fpr <= 0.01, "{}", f.info());
    assert!(measured_fpr(&f, &keys(4, 100_000)) <= 0.01);
    assert_eq!(
        Error::Full { capacity: 5000 }.to_string(),
        "the non-scaling filter holds its capacity of 5000 new items: the item was not inserted"
    );
}

#[test]
fn the_end_of_the_schedule_is_an_error_for_new_items_and_nothing_is_lost() {
    // Tightening 0.1 reaches the word layout's limit at the fifth layer (0.009 · 0.1^4 < 6.4e-6).
    let f = GrowingBloomFilter::builder(1)
        .fpr(0.01)
        .tightening(0.1)
        .build()
        .unwrap();
    let items = keys(5, 100);
    let mut accepted = Vec::new();
    let mut refused = 0;
    for k in &items {
        match f.insert(k) {
            Ok(_) => accepted.push(*k),
            Err(Error::GrowingFprBelowLayoutLimit {
                fpr: 0.01,
                tightening: 0.1,
                layer: 4,
                use_layout: Some(Layout::Line),
                ..
            }) => refused += 1,
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(f.layers(), 4);
    // 1 + 2 + 4 + 8 items, plus the room of the last layer's limit, at most.
    assert!(
        (15..=15 + 2).contains(&accepted.len()),
        "{}",
        accepted.len()
    );
    assert_eq!(refused, items.len() - accepted.len());
    assert!(
        accepted
            .iter()
            .all(|k| f.contains(k) && f.insert(k) == Ok(false))
    );
}

/// The errors quote the caller's own parameters: `with_capacity(1000, 1e-7)` refused
/// "1.9999999999999994e-8", its first layer's rate, which the caller never typed. Now the
/// message names the target and the ratio given, and derives the layer's rate from them.
#[test]
fn errors_quote_the_callers_target_and_derive_the_layers_rate() {
    let e = GrowingBloomFilter::with_capacity(1000, 1e-7).unwrap_err();
    assert_eq!(e.lowest_growing_fpr(), Some(6.4e-6 / (1.0 - 0.8)));
    let text = e.to_string();
    assert!(
        text.starts_with("false-positive rate 1e-7 is too low for a growing filter")
            && text.contains("tightening ratio 0.8")
            && text.contains("1e-7 · (1 - 0.8) = 2e-8")
            && text.contains("the lowest rate it takes is 3.2e-5")
            && !text.contains("999"),
        "{text}"
    );
    // A line layout takes a lower target; its limit with tightening 0.5 is 9.4e-15.
    let e = GrowingBloomFilter::builder(10)
        .fpr(1e-15)
        .layout(Layout::Line)
        .tightening(0.5)
        .build()
        .unwrap_err();
    let text = e.to_string();
    assert!(
        text.starts_with("false-positive rate 1e-15 is too low")
            && text.contains("tightening ratio 0.5")
            && text.ends_with(
                "the lowest rate it takes is 9.4e-15; no layout of this crate reaches it"
            ),
        "{text}"
    );
    // At the end of the schedule: the layer that cannot be added, and its rate, derived.
    let f = GrowingBloomFilter::builder(1)
        .fpr(0.01)
        .tightening(0.1)
        .build()
        .unwrap();
    let e = keys(7, 100).iter().find_map(|k| f.insert(k).err()).unwrap();
    assert_eq!(
        e.to_string(),
        "the growing filter (false-positive rate 0.01, tightening ratio 0.1, Word layout) \
         cannot add layer 4: it would get 0.01 · (1 - 0.1) · 0.1^4 = 9e-7, below the layout's \
         limit of 6.4e-6; the Line layout reaches further"
    );
    assert_eq!(e.lowest_growing_fpr(), Some(6.4e-6 / 0.9));
    // A non-scaling filter's one layer gets the target itself: the plain error, which quotes it.
    let e = GrowingBloomFilter::builder(10)
        .fpr(1e-6)
        .scaling(false)
        .build()
        .unwrap_err();
    assert!(
        matches!(e, Error::FprBelowLayoutLimit { fpr: 1e-6, .. }),
        "{e:?}"
    );
    assert!(
        e.to_string()
            .starts_with("false-positive rate 1e-6 is below 6.4e-6"),
        "{e}"
    );
}

#[test]
fn bad_parameters_are_typed_errors() {
    let build = |e: u32, t: f64| {
        GrowingBloomFilter::builder(100)
            .expansion(e)
            .tightening(t)
            .build()
    };
    assert!(matches!(build(0, 0.8), Err(Error::InvalidParameter(_))));
    assert!(matches!(build(2, 1.0), Err(Error::InvalidParameter(_))));
    assert!(matches!(build(2, -0.5), Err(Error::InvalidParameter(_))));
    assert!(matches!(
        build(2, f64::NAN),
        Err(Error::InvalidParameter(_))
    ));
    assert!(matches!(
        GrowingBloomFilter::with_capacity(0, 0.01),
        Err(Error::ZeroCapacity)
    ));
    assert!(matches!(
        GrowingBloomFilter::with_capacity(10, 1.0),
        Err(Error::InvalidFpr(_))
    ));
    // The first layer's rate is fpr / 5 with the default ratio: below the word limit here.
    assert!(matches!(
        GrowingBloomFilter::with_capacity(10, 1e-5),
        Err(Error::GrowingFprBelowLayoutLimit {
            fpr: 1e-5,
            layer: 0,
            use_layout: Some(Layout::Line),
            ..
        })
    ));
    assert!(matches!(
        GrowingBloomFilter::with_capacity(u64::MAX / 2, 0.01),
        Err(Error::TooLarge { .. })
    ));
    // The schedule is the one `GrowingSizing` describes.
    let f = GrowingBloomFilter::builder(1000)
        .expansion(3)
        .build()
        .unwrap();
    assert_eq!(
        f.sizing(),
        GrowingSizing::new(1000, 0.01, Layout::Word, 3, 0.8).unwrap()
    );
    assert_eq!(f.memory_bytes(), f.sizing().bytes(1).unwrap());
}

/// A lightly filled filter's rate is tiny, not zero: `1 - Π (1 - f_i)` rounded it to 0, and
/// `--stats` printed `fpr 0% now`.
#[test]
fn the_rate_of_a_lightly_filled_filter_keeps_its_digits() {
    let f = GrowingBloomFilter::builder(10_000_000)
        .fpr(1e-4)
        .layout(Layout::Line)
        .build()
        .unwrap();
    for k in keys(8, 1000) {
        f.insert(&k).unwrap();
    }
    let (info, layer) = (f.info(), f.layer_info()[0].estimated_fpr);
    assert!(layer > 0.0 && layer < 1e-15, "{layer}");
    assert!(
        (info.estimated_fpr - layer).abs() <= layer * 1e-12,
        "{} vs {layer}",
        info.estimated_fpr
    );
    assert!(!info.to_string().contains("fpr 0"), "{info}");
}

#[test]
fn info_describes_every_bloom_filter_on_one_line() {
    let growing = GrowingBloomFilter::with_capacity(1000, 0.01).unwrap();
    for k in keys(6, 5000) {
        growing.insert(&k).unwrap();
    }
    let info = growing.info();
    assert_eq!(
        (info.layers, info.capacity, info.expansion),
        (3, 7000, Some(2))
    );
    assert!((4800..5200).contains(&info.estimated_len), "{info}");
    let line = info.to_string();
    assert!(
        line.starts_with("GrowingBloomFilter: capacity 7000, 3 layers (expansion 2), "),
        "{line}"
    );
    assert!(
        line.contains("word layout, about ") && line.ends_with("(target 1%)"),
        "{line}"
    );
    assert_eq!(info.bytes, growing.memory_bytes());

    let semi = seen::SemiConcurrentBloomFilter::with_capacity(1000, 0.01).unwrap();
    for k in keys(6, 500) {
        semi.insert(&k);
    }
    let info = semi.info();
    assert!((480..520).contains(&info.estimated_len), "{info}");
    assert_eq!(info.structure, "SemiConcurrentBloomFilter");
    semi.compact();
    let frozen = semi.snapshot().info();
    assert_eq!(frozen.structure, "FrozenBloomFilter");
    assert!((480..520).contains(&frozen.estimated_len), "{frozen}");

    let full = seen::AtomicBloomFilter::with_capacity(1, 0.5).unwrap();
    for k in keys(6, 10_000) {
        full.insert(&k);
    }
    let line = full.info().to_string();
    assert!(
        line.contains("saturated, fpr 100% now (target 50%)"),
        "{line}"
    );
}

#[test]
fn inserts_racing_the_zeroing_of_a_large_new_layer_are_not_lost() {
    // Layers of 100,000 to 1.6M items (up to 3 MB): the allocation and zeroing of each new
    // layer takes long enough for the other thread to insert thousands of items meanwhile,
    // all of which must be found afterwards.
    let f = GrowingBloomFilter::builder(100_000)
        .fpr(0.01)
        .build()
        .unwrap();
    let (a, b) = (keys(11, 1_500_000), keys(12, 1_500_000));
    insert_from_two_threads(&f, [&a, &b], false);
    assert_eq!(f.layers(), 5);
    let lost = a.iter().chain(&b).filter(|k| !f.contains(*k)).count();
    assert_eq!(lost, 0, "{lost} false negatives");
}

/// The windows the spinning test below can only hope to hit, held open. Thread A's insert of a
/// key is held at one of two steps (pause points): after it read the layers and picked the
/// newest, before it writes (`growing.insert.writing`); or after it wrote, before it checks
/// whether a growth began (`growing.insert.written`). Meanwhile B inserts a fresh item that
/// grows the filter, or not, then the same key; then A goes on. In each of the four orders,
/// exactly one of the two is told "new", both find the key, and so does the filter afterwards.
/// An insert that ignores a growth begun after it read the layers (loom's `IgnoreGrowth` twin,
/// patched in by hand) tells both "new" in the order "held before its write, B grows".
#[cfg(feature = "failpoints")]
#[test]
fn an_insert_held_across_a_growth_and_a_racing_insert_give_one_new() {
    use std::sync::mpsc;
    for round in 0..200u64 {
        // Layers of one item (expansion 1): every new item fills its layer.
        let f = GrowingBloomFilter::builder(1)
            .fpr(0.1)
            .expansion(1)
            .tightening(0.95)
            .build()
            .unwrap();
        for k in &keys(3000 + round, 1 + round as usize % 20) {
            f.insert(k).unwrap();
        }
        // A key and a grower the filter does not hold yet (not false positives), so that A's
        // insert writes, and B's grower grows.
        let mut fresh = keys(4000 + round, 64)
            .into_iter()
            .filter(|k| !f.contains(k));
        let (key, grower) = (fresh.next().unwrap(), fresh.next().unwrap());
        let grow = round % 2 == 0;
        let step = if round % 4 < 2 {
            "growing.insert.writing"
        } else {
            "growing.insert.written"
        };
        let layers_before = f.layers();
        let (reached, at_point) = mpsc::channel();
        let (go, going) = mpsc::channel::<()>();
        let (a, b) = std::thread::scope(|s| {
            // Owned here: a panic below drops it, which ends A's wait.
            let go = go;
            let a = s.spawn(|| {
                // Held once, at its first pass: a retry in a newer layer goes on.
                let mut hold = Some((reached, going));
                let _armed = seen::failpoints::arm(move |point| {
                    if point == step
                        && let Some((reached, going)) = hold.take()
                    {
                        reached.send(()).unwrap();
                        going.recv().unwrap();
                    }
                });
                let new = f.insert(&key).unwrap();
                (new, f.contains(&key))
            });
            at_point
                .recv_timeout(std::time::Duration::from_secs(120))
                .expect("A's insert never reached its step");
            if grow {
                assert!(f.insert(&grower).unwrap());
                assert!(f.layers() > layers_before, "round {round}: no growth");
            }
            let b = f.insert(&key).unwrap();
            assert!(f.contains(&key), "round {round}: B's key missing");
            go.send(()).unwrap();
            (a.join().unwrap(), b)
        });
        assert!(a.1, "round {round}: A's key missing right after its insert");
        assert!(f.contains(&key) && (!grow || f.contains(&grower)));
        assert_eq!(
            u8::from(a.0) + u8::from(b),
            1,
            "round {round} (held at {step}, growth: {grow}): A new {}, B new {b}",
            a.0
        );
    }
}

#[test]
fn two_threads_inserting_one_key_at_once_across_growths_get_one_new() {
    // Layers of one item (expansion 1), so every new item grows the filter. Before each key
    // the two threads meet at a spin barrier; then one inserts a fresh item of its own (which
    // grows the filter) and the key, while the other waits a varying number of spins and
    // inserts the key: its insert starts on one side of the growth or the other, and at
    // some delays it reads the layers just as the growth publishes.
    use std::sync::atomic::{AtomicUsize, Ordering};
    let mut both = 0;
    let mut races = 0;
    for round in 0..1500u64 {
        let f = GrowingBloomFilter::builder(1)
            .fpr(0.1)
            .expansion(1)
            .tightening(0.95)
            .build()
            .unwrap();
        // 31 keys and 31 growers: 62 growths, within the 64 layers.
        let items = keys(2000 + round, 31);
        let growers = keys(5000 + round, 31);
        let arrived = AtomicUsize::new(0);
        let run = |grower: bool| {
            let mut new = Vec::with_capacity(items.len());
            for (i, k) in items.iter().enumerate() {
                arrived.fetch_add(1, Ordering::AcqRel);
                let mut spins = 0u32;
                while arrived.load(Ordering::Acquire) < 2 * (i + 1) {
                    spins += 1;
                    if spins.is_multiple_of(1024) {
                        std::thread::yield_now();
                    }
                    std::hint::spin_loop();
                }
                if grower {
                    f.insert(&growers[i]).unwrap();
                } else {
                    for _ in 0..(round as usize * 7 + i * 3) % 24 {
                        std::hint::spin_loop();
                    }
                }
                new.push(f.insert(k).unwrap());
            }
            new
        };
        let (x, y) = std::thread::scope(|s| {
            let x = s.spawn(|| run(true));
            let y = s.spawn(|| run(false));
            (x.join().unwrap(), y.join().unwrap())
        });
        both += x.iter().zip(&y).filter(|(x, y)| **x && **y).count();
        races += items.len();
        assert!(items.iter().chain(&growers).all(|k| f.contains(k)));
    }
    assert_eq!(both, 0, "{both} of {races} keys told new to both threads");
}

/// A `Write` that, at its first write, says so on `paused` and waits for `go`: the test decides
/// what happens while a save is under way (it has captured the layers it writes, and written
/// nothing yet).
struct PausedWriter {
    out: Vec<u8>,
    paused: Option<std::sync::mpsc::Sender<()>>,
    go: std::sync::mpsc::Receiver<()>,
}

impl std::io::Write for PausedWriter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        if let Some(paused) = self.paused.take() {
            paused.send(()).unwrap();
            self.go.recv().unwrap();
        }
        self.out.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A save racing two writers and the growths they set off, in rounds the test schedules: each
/// round starts a save and holds it after it captured its layers; both writers then insert
/// their round's keys (at once, 100 each at a time) until the filter has grown, while the save
/// is held; the save is let go and finishes while the writers insert the rest of the round's
/// keys. Every key inserted before the save began is in the file, and the file holds exactly
/// the layers published when it began (none of those added meanwhile): layers 1, 2, ..., 9
/// over the nine saves.
#[test]
fn a_save_racing_two_writers_and_their_growths_keeps_every_insert_before_it() {
    use std::sync::mpsc;
    const ROUNDS: u32 = 9;
    // Round r: 600 · 2^r keys per writer, 1.2 times layer r's capacity (1000 · 2^r) in all:
    // the layers grow one a round.
    let per_round = |r: u32| 600usize << r;
    let total: usize = (0..ROUNDS).map(per_round).sum();
    let f = &GrowingBloomFilter::with_capacity(1000, 0.01).unwrap();
    let keys = [keys(21, total), keys(22, total)];
    // Both writers insert their keys `range` at once, each checking each key right after.
    let insert = |range: std::ops::Range<usize>| {
        std::thread::scope(|w| {
            for keys in &keys {
                let part = &keys[range.clone()];
                w.spawn(move || {
                    for k in part {
                        f.insert(k).unwrap();
                        assert!(f.contains(k), "false negative right after its insert");
                    }
                });
            }
        });
    };
    let mut inserted = 0;
    let mut layers_saved = Vec::new();
    for round in 0..ROUNDS {
        let end = inserted + per_round(round);
        let layers_before = f.layers();
        let (paused, is_paused) = mpsc::channel();
        let (go, going) = mpsc::channel();
        let (file, at) = std::thread::scope(|s| {
            // Owned here: a panic below drops it, which ends the saver's wait.
            let go = go;
            let saver = s.spawn(move || {
                let mut out = PausedWriter {
                    out: Vec::new(),
                    paused: Some(paused),
                    go: going,
                };
                f.write_to(&mut out).unwrap();
                out.out
            });
            is_paused
                .recv_timeout(std::time::Duration::from_secs(120))
                .expect("the save never wrote");
            // Held: insert until the filter grows (or the round's keys run out).
            let mut at = inserted;
            while f.layers() == layers_before && at < end {
                let next = (at + 100).min(end);
                insert(at..next);
                at = next;
            }
            go.send(()).unwrap();
            insert(at..end);
            (saver.join().unwrap(), at)
        });
        assert!(
            at < end,
            "round {round}: the filter did not grow while the save was held"
        );
        let loaded = GrowingBloomFilter::read_from(&file[..]).unwrap();
        layers_saved.push(loaded.layers());
        assert_eq!(
            loaded.layers(),
            layers_before,
            "round {round}: the save holds the layers published when it began"
        );
        let lost = keys
            .iter()
            .flat_map(|k| &k[..inserted])
            .filter(|k| !loaded.contains(*k))
            .count();
        assert_eq!(
            lost, 0,
            "round {round}: keys inserted before the save, lost"
        );
        inserted = end;
    }
    assert_eq!(layers_saved, (1..=ROUNDS as usize).collect::<Vec<_>>());
    assert_eq!(f.layers(), 10);
    assert!(keys.iter().flatten().all(|k| f.contains(k)));
}

#[test]
fn a_growing_filter_is_send_and_sync() {
    fn shared<T: Send + Sync>() {}
    shared::<GrowingBloomFilter>();
    shared::<seen::BloomInfo>();
}

/// The line layout, two threads inserting the same keys across 30 to 60 growths: at
/// least one is told "new" for (almost) every key, nothing is lost. The line layout is
/// at-least-once, so a key told "new" to both threads counts twice: 1,200 keys in layers
/// of 40 take 30 layers, or up to 60 if every key raced, never past the limit of 64
/// whatever the scheduler does (layers of 20 could ask for a 65th, and did under CI).
#[test]
fn line_layout_same_key_race_across_growths_is_at_least_once() {
    let f = GrowingBloomFilter::builder(40)
        .fpr(0.05)
        .layout(Layout::Line)
        .expansion(1)
        .tightening(0.95)
        .build()
        .unwrap();
    let items = keys(71, 1200);
    let run = || {
        let mut new = Vec::new();
        for k in &items {
            new.push(f.insert(k).unwrap());
            assert!(f.contains(k), "false negative right after the insert");
        }
        new
    };
    let (x, y) = std::thread::scope(|s| {
        let x = s.spawn(run);
        let y = s.spawn(run);
        (x.join().unwrap(), y.join().unwrap())
    });
    let neither = x.iter().zip(&y).filter(|(a, b)| !**a && !**b).count();
    assert!(neither < 60, "{neither} keys new to neither");
    assert!(items.iter().all(|k| f.contains(k)));
    assert!(
        f.layers() > 20,
        "{} layers: the race crossed too few growths",
        f.layers()
    );
}
