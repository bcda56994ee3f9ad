//! `OverwriteMap` and `ExactOverwriteMap` on real threads: the forgetting curve, exactly-once
//! inserts, `forget`, and bad parameters.
#![cfg(not(seen_loom))]

mod common;

use common::{LyingSizeHint, keys, same_key_race};

use std::hash::RandomState;

use seen::builder::MapSize;
use seen::hash::{ItemHasher, StableHasher};
use seen::sizing::overwrite_remember_probability;
use seen::{DedupFilter, Error, ExactOverwriteMap, OverwriteMap};

/// The fraction of items still remembered after `x` later insertions of fresh items matches
/// `overwrite_remember_probability(N, x)`.
///
/// Method: insert a stream of fresh keys; after inserting key `j`, check whether key `j - x` (which
/// has had exactly `x` later insertions) is still remembered. With `T = 1,000,000` checks the
/// binomial standard deviation is at most `sqrt(0.25 / T) = 0.0005`; the checks are not
/// independent (windows overlap), but two checks interact only through a shared slot or a shared
/// later insertion, a correlation of order `1/N` per pair, which at `x <= 3N` at most doubles the
/// variance: sd <= 0.0007. The tolerance, 0.004, is over 5.5 of those. A map that rounded its
/// buckets to a power of two (1024 instead of 1000) is off by 0.0087 in the first configuration
/// and fails.
#[test]
fn measured_remember_fraction_matches_the_forgetting_curve() {
    const CHECKS: usize = 1_000_000;
    for (buckets, x) in [(1_000u64, 1_000usize), (1_000, 100), (10_000, 30_000)] {
        let expected = overwrite_remember_probability(buckets, x as u64).unwrap();
        for exact in [false, true] {
            let stream = keys(buckets ^ x as u64, CHECKS + x);
            let remembered = if exact {
                let map = ExactOverwriteMap::with_buckets(buckets).unwrap();
                let bytes: Vec<[u8; 8]> = stream.iter().map(|k| k.to_le_bytes()).collect();
                (0..bytes.len())
                    .filter(|&j| {
                        map.insert(&bytes[j]);
                        j >= x && map.contains(&bytes[j - x])
                    })
                    .count()
            } else {
                let map = OverwriteMap::with_buckets(buckets).unwrap();
                (0..stream.len())
                    .filter(|&j| {
                        map.insert(&stream[j]);
                        j >= x && map.contains(&stream[j - x])
                    })
                    .count()
            };
            let measured = remembered as f64 / CHECKS as f64;
            eprintln!(
                "N={buckets} x={x} exact={exact}: measured {measured:.5}, expected {expected:.5}"
            );
            assert!(
                (measured - expected).abs() < 0.004,
                "N={buckets} x={x} exact={exact}: measured {measured}, expected {expected}"
            );
        }
    }
}

#[test]
fn for_window_allocates_the_sizing_bucket_count_without_rounding() {
    let map = OverwriteMap::for_window(3_600_000, 0.9).unwrap();
    assert_eq!(map.buckets(), 34_168_399);
    assert_eq!(map.memory_bytes(), 34_168_399 * 8);
    assert_eq!(
        OverwriteMap::for_window(3_600_000, 0.1).unwrap().buckets(),
        1_563_461
    );
    assert_eq!(
        ExactOverwriteMap::for_window(3_600_000, 0.1)
            .unwrap()
            .buckets(),
        1_563_461
    );
}

#[test]
fn never_seen_items_are_never_reported_seen() {
    // A tiny map, full of collisions: a key that was never inserted is never "seen".
    let map = OverwriteMap::with_buckets(16).unwrap();
    let exact = ExactOverwriteMap::with_buckets(16).unwrap();
    let inserted = keys(1, 10_000);
    for k in &inserted {
        map.insert(k);
        exact.insert(&k.to_le_bytes());
    }
    for k in keys(2, 100_000) {
        assert!(!map.contains(&k));
        assert!(!exact.contains(&k.to_le_bytes()));
    }
    // The last item of each slot is remembered.
    assert!(map.contains(&inserted[9_999]) && exact.contains(&inserted[9_999].to_le_bytes()));
}

/// Two threads insert the same 100K keys at once, in the same order, in step (a barrier every
/// 1,024 keys: `common::same_key_race`); after each `insert(k)` the same thread checks
/// `contains(k)` and inserts `k` again. A key is reported new by exactly one
/// thread (one atomic swap per insert), and both later checks say "seen", unless the key shares
/// its slot with another key in flight at that moment.
///
/// 2^26 buckets (512 MiB) for the fingerprint map: about n^2 / 2N = 75 pairs of keys share a
/// slot; 2^24 for the exact map: about 300. Each pair can spoil at most its two keys in each
/// count, so a count above 4 x pairs is a broken insert (a load-then-store insert spoils tens of
/// thousands).
#[test]
fn same_keys_from_two_threads_are_exactly_once_and_remembered() {
    let all = keys(3, 100_000);
    let map = OverwriteMap::with_buckets(1 << 26).unwrap();
    let exact = ExactOverwriteMap::with_buckets(1 << 24).unwrap();
    /// The exact map takes bytes: insert each key's little-endian bytes.
    struct Bytes<'a>(&'a ExactOverwriteMap);
    impl DedupFilter<u64> for Bytes<'_> {
        fn insert(&self, k: &u64) -> bool {
            self.0.insert(&k.to_le_bytes())
        }
        fn contains(&self, k: &u64) -> bool {
            self.0.contains(&k.to_le_bytes())
        }
    }
    for (name, race, pairs) in [
        ("fingerprint", same_key_race(&map, &all, None), 75),
        ("exact", same_key_race(&Bytes(&exact), &all, None), 300),
    ] {
        eprintln!("{name}: {race:?}");
        for (what, count) in [
            ("reported new by both", race.both_new),
            ("reported new by neither", race.neither_new),
            ("not contained right after insert", race.false_negatives),
            ("new again on a second insert", race.new_again),
        ] {
            assert!(count <= 4 * pairs, "{name}: {count} keys {what}: {race:?}");
        }
    }
}

#[test]
fn forget_erases_only_its_own_item() {
    let map = OverwriteMap::with_buckets(1).unwrap();
    map.insert("a");
    map.insert("b"); // overwrites a
    assert!(!map.forget("a"));
    assert!(map.contains("b"));
    assert!(map.forget("b"));
    assert!(map.insert("b"));

    let exact = ExactOverwriteMap::with_buckets(1).unwrap();
    exact.insert("a");
    exact.insert("b");
    assert!(!exact.forget("a"));
    assert!(exact.contains("b") && exact.forget("b") && !exact.contains("b"));
}

#[test]
fn shared_trait_and_debug() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<OverwriteMap>();
    assert_send_sync::<ExactOverwriteMap>();
    let map = OverwriteMap::with_buckets(100).unwrap();
    let dynamic: &dyn DedupFilter<str> = &map;
    assert!(dynamic.insert("x") && !dynamic.insert("x") && dynamic.contains("x"));
    let exact = ExactOverwriteMap::with_buckets(100).unwrap();
    let dynamic: &dyn DedupFilter<[u8]> = &exact;
    assert!(dynamic.insert(b"x") && dynamic.contains(b"x"));
    assert_eq!(format!("{map:?}"), "OverwriteMap { buckets: 100, .. }");
    let claim = map.claim("y").unwrap();
    assert!(format!("{claim:?}").starts_with("Claim { hash: Hash128 { h1: "));
    claim.commit();
    let claim = exact.claim("y").unwrap();
    assert!(format!("{claim:?}").ends_with(", key: [121], .. }"));
    drop(claim);
    fn assert_send<T: Send>(_: &T) {}
    assert_send(&map.claim("z"));
    assert_send(&exact.claim("z"));
}

/// The item methods are the hash-level ones on the hasher's hash; the exact map compares bytes
/// whatever hash it is given, so a wrong hash misplaces a key but never makes another key seen.
#[test]
fn hash_level_methods_agree_with_item_methods() {
    let map = OverwriteMap::with_buckets(64).unwrap();
    let exact = ExactOverwriteMap::with_buckets(64).unwrap();
    for k in keys(4, 1_000) {
        let bytes = k.to_le_bytes();
        let (h, hb) = (
            map.hasher().hash_item(&k),
            exact.hasher().hash_bytes(&bytes),
        );
        let was = map.contains(&k);
        assert_eq!(map.contains_hash(h), was);
        assert_eq!(map.insert_hash(h), !was);
        assert!(map.contains(&k) && !map.insert(&k));
        let was = exact.contains(&bytes);
        assert_eq!(exact.contains_hashed(hb, &bytes), was);
        assert_eq!(exact.insert_hashed(hb, &bytes), !was);
        assert!(exact.contains(&bytes) && !exact.insert(&bytes));
        // A hash of another key: whatever that slot holds, it is not these bytes.
        let wrong = exact.hasher().hash_bytes(&(k ^ 1).to_le_bytes());
        assert!(!exact.contains_hashed(wrong, &(k ^ 2).to_le_bytes()));
        if k % 2 == 0 {
            assert!(map.forget_hash(h) && !map.contains(&k));
            assert!(exact.forget_hashed(hb, &bytes) && !exact.contains(&bytes));
        }
    }
    let (mut map, mut exact) = (map, exact);
    map.extend(["x", "y"]);
    exact.extend([&b"x"[..], b"y"]);
    assert!(map.contains("y") && exact.contains("y"));
}

#[test]
fn builder_sizes_by_count_or_window_and_takes_a_hasher() {
    let window = MapSize::Window {
        later_insertions: 3_600_000,
        remember_probability: 0.1,
    };
    let builder = OverwriteMap::builder(window);
    assert_eq!(
        format!("{builder:?}"),
        "MapBuilder { size: Window { later_insertions: 3600000, remember_probability: 0.1 }, .. }"
    );
    assert_eq!(builder.clone().build().unwrap().buckets(), 1_563_461);
    assert_eq!(
        ExactOverwriteMap::builder(window)
            .build()
            .unwrap()
            .buckets(),
        1_563_461
    );
    assert_eq!(MapSize::from(7), MapSize::Buckets(7));
    let seeded = OverwriteMap::builder(100)
        .hasher(StableHasher::with_seed(3))
        .build()
        .unwrap();
    assert_eq!(seeded.hasher().seed(), 3);
    let exact = ExactOverwriteMap::builder(100)
        .hasher(RandomState::new())
        .build()
        .unwrap();
    assert!(exact.insert("a") && exact.contains("a"));
    assert_eq!(
        format!("{exact:?}"),
        "ExactOverwriteMap { buckets: 100, .. }"
    );
}

#[test]
fn bad_parameters_are_errors() {
    assert!(matches!(
        OverwriteMap::with_buckets(0),
        Err(Error::ZeroBuckets)
    ));
    assert!(matches!(
        ExactOverwriteMap::with_buckets(0),
        Err(Error::ZeroBuckets)
    ));
    assert!(matches!(
        OverwriteMap::with_buckets(u64::MAX),
        Err(Error::TooLarge {
            what: "buckets",
            ..
        })
    ));
    assert!(matches!(
        OverwriteMap::for_window(100, 1.5),
        Err(Error::InvalidProbability(_))
    ));
    assert!(matches!(
        ExactOverwriteMap::builder(MapSize::Window {
            later_insertions: 100,
            remember_probability: f64::NAN,
        })
        .build(),
        Err(Error::InvalidProbability(_))
    ));
    assert!(matches!(
        OverwriteMap::builder(0).hasher(RandomState::new()).build(),
        Err(Error::ZeroBuckets)
    ));
}

mod properties {
    use proptest::prelude::*;
    use seen::{ExactOverwriteMap, OverwriteMap};

    #[derive(Clone, Debug)]
    enum Op {
        Insert(u8),
        Forget(u8),
    }

    fn ops() -> impl Strategy<Value = Vec<Op>> {
        proptest::collection::vec(
            prop_oneof![
                any::<u8>().prop_map(Op::Insert),
                any::<u8>().prop_map(Op::Forget)
            ],
            0..200,
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        /// For any sequence of inserts and forgets on a small map (many collisions): an item
        /// reported seen was inserted and not forgotten since; the item just inserted is always
        /// remembered; `insert` says "seen" only for an item that is remembered.
        #[test]
        fn seen_only_what_was_inserted_and_not_forgotten(ops in ops(), buckets in 1u64..32) {
            let map = OverwriteMap::with_buckets(buckets).unwrap();
            let exact = ExactOverwriteMap::with_buckets(buckets).unwrap();
            let mut live = [false; 256]; // inserted and not forgotten since (a superset of what is remembered)
            for op in ops {
                match op {
                    Op::Insert(i) => {
                        let was = map.contains(&i);
                        prop_assert_eq!(map.insert(&i), !was);
                        let was_exact = exact.contains(&[i]);
                        prop_assert_eq!(exact.insert(&[i]), !was_exact);
                        live[i as usize] = true;
                        prop_assert!(map.contains(&i) && exact.contains(&[i]));
                    }
                    Op::Forget(i) => {
                        let was = map.contains(&i);
                        prop_assert_eq!(map.forget(&i), was);
                        let was_exact = exact.contains(&[i]);
                        prop_assert_eq!(exact.forget(&[i]), was_exact);
                        live[i as usize] = false;
                        prop_assert!(!map.contains(&i) && !exact.contains(&[i]));
                    }
                }
                for j in 0..=255u8 {
                    if map.contains(&j) || exact.contains(&[j]) {
                        prop_assert!(live[j as usize], "{} reported seen but not live", j);
                    }
                }
            }
        }
    }
}

/// How long a two-thread round test waits for the other thread before it calls it a hang (not
/// a timing: the other thread has one short step to do).
const HANG: std::time::Duration = std::time::Duration::from_secs(60);

/// The loom model's shape on real threads, in orders the test chooses: the slot holds `a_i`
/// (one-bucket maps); one thread calls `forget(a_i)` and the test inserts `b_i` into the same
/// slot. Even rounds: the forget first (it finds `a_i` and erases it; `b_i` then goes in); odd
/// rounds: the insert first (`b_i` overwrites `a_i`; the forget finds `b_i` and must leave
/// it). Either way `b_i` survives (`forget` erases only its own item), and the forgets that
/// found their item are exactly the even rounds'. The interleavings inside the two operations
/// (an insert between the forget's read and its write) are the loom models'
/// (`loom-tests/overwrite.rs`: `fingerprint_forget_never_erases_an_item_that_overwrote_ours`,
/// its exact twin, and the check-then-store twins they catch). Checked to fail: a `forget`
/// that clears the slot whatever it holds loses `b_i` in every odd round.
#[test]
fn forget_racing_an_overwrite_never_erases_the_other_item() {
    use std::sync::mpsc::channel;
    const ROUNDS: u64 = 1_000;
    let map = OverwriteMap::with_buckets(1).unwrap();
    let exact = ExactOverwriteMap::with_buckets(1).unwrap();
    let (forget, to_forget) = channel::<u64>();
    let (forgot, forgotten) = channel::<u64>();
    let (lost, forgets) = std::thread::scope(|s| {
        s.spawn(|| {
            for a in to_forget {
                let found = u64::from(map.forget(&a)) + u64::from(exact.forget(&a.to_le_bytes()));
                forgot.send(found).unwrap();
            }
        });
        let (mut lost, mut forgets) = (0u64, 0u64);
        for i in 0..ROUNDS {
            let (a, b) = (2 * i, 2 * i + 1);
            map.insert(&a);
            exact.insert(&a.to_le_bytes());
            let mut forget_a = || {
                forget.send(a).unwrap();
                forgets += forgotten.recv_timeout(HANG).expect("the forget hung");
            };
            if i % 2 == 0 {
                forget_a();
            }
            map.insert(&b);
            exact.insert(&b.to_le_bytes());
            if i % 2 == 1 {
                forget_a();
            }
            lost += u64::from(!map.contains(&b)) + u64::from(!exact.contains(&b.to_le_bytes()));
        }
        drop(forget);
        (lost, forgets)
    });
    assert_eq!(lost, 0, "forget erased an item that overwrote its own");
    // Both maps, in the even rounds: their forgets came before the overwrite.
    assert_eq!(forgets, ROUNDS, "forgets that found their item");
}

/// The replicated case: every message is delivered twice, the copy exactly `x` messages late.
/// Between a message and its copy the map sees `x` originals *and* the copies of the `x` messages
/// before it; a copy of a message that shared our slot (and that we displaced) comes back and
/// displaces us. So the copy is recognized with probability `(1 - 1/N)^{2x}`: 0.81, not 0.9, for
/// a map sized with `for_window(x, 0.9)`; `for_window(2 * x, 0.9)` gives 0.9. (The docs of
/// `OverwriteMap::for_window` state the rule.)
///
/// Each measurement averages 190K checks (standard deviation under 0.001 even allowing for the
/// overlap of windows); the tolerance is 0.006.
#[test]
fn replicated_deliveries_count_twice_against_the_window() {
    const X: u64 = 10_000;
    const MESSAGES: u64 = 200_000;
    for (sized_for, expected_remember) in [(X, 0.81), (2 * X, 0.9)] {
        let map = OverwriteMap::for_window(sized_for, 0.9).unwrap();
        let predicted = overwrite_remember_probability(map.buckets(), 2 * X).unwrap();
        assert!((predicted - expected_remember).abs() < 0.001, "{predicted}");
        let mut recognized = 0u64;
        for t in 0..MESSAGES {
            map.insert(&t);
            if t >= X {
                recognized += u64::from(!map.insert(&(t - X)));
            }
        }
        let measured = recognized as f64 / (MESSAGES - X) as f64;
        eprintln!(
            "for_window({sized_for}, 0.9): copies recognized {measured:.4}, predicted {predicted:.4}"
        );
        assert!(
            (measured - predicted).abs() < 0.006,
            "{measured} vs {predicted}"
        );
    }
}

/// What the claim stress tests need of a map: claim `id`, run `process`, commit if it succeeded
/// and drop the claim otherwise. `None` for a duplicate, else whether it committed.
trait Claims: Sync {
    fn handle(&self, id: u64, process: &mut dyn FnMut() -> bool) -> Option<bool>;
    fn contains_id(&self, id: u64) -> bool;
}

impl Claims for OverwriteMap {
    fn handle(&self, id: u64, process: &mut dyn FnMut() -> bool) -> Option<bool> {
        let claim = self.claim(&id)?;
        let ok = process();
        if ok {
            claim.commit();
        }
        Some(ok)
    }
    fn contains_id(&self, id: u64) -> bool {
        self.contains(&id)
    }
}

impl Claims for ExactOverwriteMap {
    fn handle(&self, id: u64, process: &mut dyn FnMut() -> bool) -> Option<bool> {
        let claim = self.claim(&id.to_le_bytes())?;
        let ok = process();
        if ok {
            claim.commit();
        }
        Some(ok)
    }
    fn contains_id(&self, id: u64) -> bool {
        self.contains(&id.to_le_bytes())
    }
}

/// Which of `ids` share their slot with another of them (those, and only those, can be forgotten
/// when the map is filled with `ids` alone): an id whose slot is shared is overwritten by
/// another id when the ids are inserted in order, or in reverse order.
fn shared_slots<M: Claims>(make: impl Fn() -> M, ids: &[u64]) -> Vec<bool> {
    let (forward, backward) = (make(), make());
    for &id in ids {
        forward.handle(id, &mut || true);
    }
    for &id in ids.iter().rev() {
        backward.handle(id, &mut || true);
    }
    ids.iter()
        .map(|&id| !forward.contains_id(id) || !backward.contains_id(id))
        .collect()
}

/// Two threads handle the same 100K ids at once, in the same order, as two consumers of a queue
/// that delivers every message to both. Processing fails a quarter of the time (a fixed
/// pseudo-random choice per thread, id and attempt); a handler whose processing failed drops its
/// claim and retries (the redelivery), until it commits or its claim is refused (a duplicate:
/// someone else holds or has committed the id).
///
/// Invariants: every id is processed and committed at least once (a dropped claim lets the retry
/// through, and a refusal means someone else is on it: at-least-once); and an id is committed
/// twice only if its slot is shared with another id (only then can the map forget it while it
/// is claimed or after it is committed).
///
/// Against broken guards patched in by hand (three runs each, 2-vCPU VM): a drop that forgets
/// nothing left 24,959 ids never committed; a load-then-store `claim` committed 4,859 to
/// 16,178 unshared ids twice (and lost 1 or 2); an exact `claim` that swaps, as the exact
/// `insert` once did, lost 8,845 to 9,742 ids. The real guards: 0 and 0, every run.
#[test]
fn claims_of_the_same_ids_from_two_threads_commit_each_at_least_once_and_twice_only_if_forgotten() {
    use std::sync::Barrier;
    use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
    let ids = keys(5, 100_000);
    let fails = |thread: u64, index: usize, attempt: u64| {
        StableHasher::with_seed(thread)
            .hash_item(&(index, attempt))
            .h1
            .is_multiple_of(4)
    };
    let run = |name: &str, map: &dyn Claims, shared: &[bool]| {
        let committed: Vec<AtomicU32> = ids.iter().map(|_| AtomicU32::new(0)).collect();
        let start = Barrier::new(2);
        let consumer = |thread: u64| {
            start.wait();
            let (mut refused, mut failed) = (0u64, 0u64);
            for (index, &id) in ids.iter().enumerate() {
                for attempt in 0u64.. {
                    let mut process = || {
                        let ok = !fails(thread, index, attempt);
                        if ok {
                            committed[index].fetch_add(1, Relaxed);
                        }
                        ok
                    };
                    match map.handle(id, &mut process) {
                        None => {
                            refused += 1;
                            break;
                        }
                        Some(true) => break,
                        Some(false) => failed += 1,
                    }
                }
            }
            (refused, failed)
        };
        let (a, b) = std::thread::scope(|s| {
            let a = s.spawn(|| consumer(0));
            let b = s.spawn(|| consumer(1));
            (a.join().unwrap(), b.join().unwrap())
        });
        let counts: Vec<u32> = committed.iter().map(|c| c.load(Relaxed)).collect();
        let lost = counts.iter().filter(|&&c| c == 0).count();
        let twice_unshared = counts
            .iter()
            .zip(shared)
            .filter(|&(&c, &shared)| c > 1 && !shared)
            .count();
        let twice_shared = counts
            .iter()
            .zip(shared)
            .filter(|&(&c, &shared)| c > 1 && shared)
            .count();
        let shared = shared.iter().filter(|&&s| s).count();
        eprintln!(
            "{name}: refused {} + {}, failed {} + {}; {lost} ids never committed, \
             {twice_unshared} unshared ids committed twice, {twice_shared} of {shared} shared ids",
            a.0, b.0, a.1, b.1
        );
        assert_eq!(lost, 0, "{name}: {lost} ids never committed");
        assert_eq!(
            twice_unshared, 0,
            "{name}: {twice_unshared} ids committed twice while remembered"
        );
    };
    // About n^2 / 2N = 1,200 pairs of ids share a slot in the fingerprint map, 2,400 in the
    // exact one.
    let make = || OverwriteMap::with_buckets(1 << 22).unwrap();
    run("fingerprint", &make(), &shared_slots(make, &ids));
    let make = || ExactOverwriteMap::with_buckets(1 << 21).unwrap();
    run("exact", &make(), &shared_slots(make, &ids));
}

/// The loom claim models' shapes on real threads, with one-bucket maps, in orders the test
/// chooses. Another thread claims `a_i` in two maps and holds both claims (its processing
/// fails); the test, in each map, claims and commits other ids, and has that thread drop its
/// claim at a chosen step:
///
/// - in the first map the test claims `b_i` (overwriting `a_i`) and commits it; the drop comes
///   before the claim, between the claim and the commit, or after the commit (round `i % 3`).
///   `b_i` must survive: a drop never erases another id's commit;
/// - in the second map the test claims `b_i`, commits, then claims `a_i` again (the map forgot
///   it) and commits; the drop comes at one of the five steps (round `i % 5`). In the exact map
///   `a_i` must survive (a drop forgets only its own entry); in the fingerprint map the drop
///   erases it exactly when it comes after the second claim of `a_i` (the documented limit of
///   `Claim`: the slot holds a fingerprint, not a claim), two rounds of five.
///
/// The interleavings inside a drop (a claim between its read and its write) are the loom
/// models' (`loom-tests/overwrite.rs`: `fingerprint_dropped_claim_never_erases_another_items_commit`,
/// `reclaim_after_an_overwrite` and their twins). Checked to fail: a drop that clears the slot
/// whatever it holds erases `b_i`; an exact drop that forgets by bytes instead of by entry
/// erases the second claim of `a_i`.
#[test]
fn dropped_claims_racing_other_claims_never_erase_a_commit_they_do_not_own() {
    use std::sync::mpsc::channel;
    const ROUNDS: u64 = 600;
    fn run<M: Claims>(name: &str, make: impl Fn() -> M) -> (u64, u64, u64) {
        let (other_id, reclaim) = (make(), make());
        let (claim, to_claim) = channel::<u64>();
        let (drop_next, to_drop) = channel::<()>();
        let (done, steps) = channel::<&str>();
        let (other_id, reclaim) = (&other_id, &reclaim);
        std::thread::scope(|s| {
            s.spawn(move || {
                let wait_for_drop = || to_drop.recv().expect("the test hung up");
                for a in to_claim {
                    // Both claims live until the test asks; dropped (forgotten) inner first.
                    let outer = other_id.handle(a, &mut || {
                        let inner = reclaim.handle(a, &mut || {
                            done.send("claimed").unwrap();
                            wait_for_drop();
                            false
                        });
                        assert_eq!(inner, Some(false), "{name}: a claimed in the second map");
                        done.send("dropped").unwrap();
                        wait_for_drop();
                        false
                    });
                    assert_eq!(outer, Some(false), "{name}: a claimed in the first map");
                    done.send("dropped").unwrap();
                }
            });
            let step = |expected: &str| {
                let got = steps.recv_timeout(HANG).expect("the claiming thread hung");
                assert_eq!(got, expected, "{name}");
            };
            let drop_a = || {
                drop_next.send(()).unwrap();
                step("dropped");
            };
            let (mut lost_other, mut lost_reclaim, mut late_drops) = (0u64, 0u64, 0u64);
            for i in 0..ROUNDS {
                let (a, b) = (2 * i, 2 * i + 1);
                claim.send(a).unwrap();
                step("claimed");
                let commit = |map: &M, id: u64, drop_first: bool| {
                    let got = map.handle(id, &mut || {
                        if drop_first {
                            drop_a();
                        }
                        true
                    });
                    assert_eq!(got, Some(true), "{name}: round {i}, id {id}");
                };
                // The second map: the drop before step `i % 5` of claim b, commit b, claim a,
                // commit a (5: after them all).
                let at = i % 5;
                if at == 0 {
                    drop_a();
                }
                commit(reclaim, b, at == 1);
                if at == 2 {
                    drop_a();
                }
                commit(reclaim, a, at == 3);
                if at == 4 {
                    drop_a();
                }
                late_drops += u64::from(at >= 3);
                // The first map: the drop before step `i % 3` of claim b, commit b.
                let at = i % 3;
                if at == 0 {
                    drop_a();
                }
                commit(other_id, b, at == 1);
                if at == 2 {
                    drop_a();
                }
                lost_other += u64::from(!other_id.contains_id(b));
                lost_reclaim += u64::from(!reclaim.contains_id(a));
            }
            drop(claim);
            eprintln!(
                "{name}: {ROUNDS} rounds; another id's commit erased {lost_other} times, a later \
                 commit of the same id erased {lost_reclaim} times ({late_drops} drops after it)"
            );
            (lost_other, lost_reclaim, late_drops)
        })
    }
    let (lost_other, lost_reclaim, late_drops) =
        run("fingerprint", || OverwriteMap::with_buckets(1).unwrap());
    assert_eq!(
        lost_other, 0,
        "fingerprint: a drop erased another id's commit"
    );
    assert_eq!(
        lost_reclaim, late_drops,
        "fingerprint: the documented limit, exactly when the drop comes after the second claim"
    );
    let (lost_other, lost_reclaim, _) =
        run("exact", || ExactOverwriteMap::with_buckets(1).unwrap());
    assert_eq!(lost_other, 0, "exact: a drop erased another id's commit");
    assert_eq!(
        lost_reclaim, 0,
        "exact: a drop erased a later commit of its id"
    );
}

/// `insert_many` / `contains_many` (and the `_hashes` forms) give what one-by-one calls give,
/// item by item, in order: on a map of 8 buckets (the plain loop: a small map is not grouped),
/// where items overwrite each other and come back, and on a map of 8 MiB (grouped), with two
/// keys of one slot alternating within a group, the case where a slot read at the start of a
/// group is stale by the time an item is written. Checked to fail: answering inserts from the
/// group's first loads instead of re-reading each slot.
#[test]
fn batch_operations_agree_with_one_by_one() {
    let mut items = keys(3, 20_000);
    items.extend_from_within(..2_000);
    for i in (0..items.len()).step_by(7) {
        items[i] = items[i / 2]; // repeats near and far
    }
    let queries = keys(4, 5_000)
        .into_iter()
        .chain(items[..5_000].iter().copied());
    let queries: Vec<u64> = queries.collect();
    for buckets in [8, 1 << 20] {
        let (one, many) = (
            OverwriteMap::with_buckets(buckets).unwrap(),
            OverwriteMap::with_buckets(buckets).unwrap(),
        );
        let expected: Vec<bool> = items.iter().map(|k| one.insert(k)).collect();
        let mut got = vec![false]; // results are appended
        let new = many.insert_many(&items, &mut got);
        assert_eq!(got[1..], expected[..], "{buckets} buckets");
        assert_eq!(new, expected.iter().filter(|&&n| n).count());
        let expected: Vec<bool> = queries.iter().map(|k| one.contains(k)).collect();
        got.clear();
        many.contains_many(&queries, &mut got);
        assert_eq!(got, expected, "{buckets} buckets");
        got.clear();
        let hashes = queries.iter().map(|k| many.hasher().hash_item(k));
        many.contains_many_hashes(hashes, &mut got);
        assert_eq!(got, expected);
        // Two keys of one slot, alternating within a group: each overwrites the other, so a
        // slot read at the start of the group is stale by the time the later ones write.
        let slot = |k: &u64| {
            let h = many.hasher().hash_item(k).h1;
            ((u128::from(h) * u128::from(buckets)) >> 64) as u64
        };
        let a = keys(6, 1)[0];
        let b = (0..)
            .map(|i| a ^ (i + 1) << 20)
            .find(|k| slot(k) == slot(&a))
            .unwrap();
        // `a` is in the slot when the group starts; `b` overwrites it, then `a` is new again.
        for pattern in [&[a][..], &[b, a, a, b, b, a, b]] {
            let expected: Vec<bool> = pattern.iter().map(|k| one.insert(k)).collect();
            got.clear();
            many.insert_many(pattern, &mut got);
            assert_eq!(got, expected, "{buckets} buckets, colliding keys");
        }

        let (one, many) = (
            ExactOverwriteMap::with_buckets(buckets).unwrap(),
            ExactOverwriteMap::with_buckets(buckets).unwrap(),
        );
        let bytes: Vec<[u8; 8]> = items.iter().map(|k| k.to_le_bytes()).collect();
        let expected: Vec<bool> = bytes.iter().map(|k| one.insert(k)).collect();
        got.clear();
        many.insert_many(&bytes, &mut got);
        assert_eq!(got, expected, "exact, {buckets} buckets");
        let expected: Vec<bool> = bytes.iter().map(|k| one.contains(k)).collect();
        got.clear();
        many.contains_many(&bytes, &mut got);
        assert_eq!(got, expected, "exact, {buckets} buckets");
    }
}

/// Two threads `insert_many` the same keys in the same order, in groups of 100 (meeting at a
/// barrier before each, so neither runs far ahead: a key the leader inserted long ago may be
/// overwritten by the time the other thread gets to it, which is forgetting, not a race), each
/// checking its group with `contains_many` right after: in a map with 16 buckets per key, no
/// key is new to both threads (exactly once) and none is missing right after its insert.
/// Checked to fail (three runs of three, on a loaded 2-vCPU machine; with 200K keys it failed
/// only one run of two, hence 1M): a batch insert that decides "new" from its early load
/// instead of from the `swap`.
#[test]
fn same_keys_from_two_threads_in_batches_are_exactly_once() {
    let all = keys(5, 1_000_000);
    let map = OverwriteMap::with_buckets(16 * 1_000_000).unwrap();
    let step = std::sync::Barrier::new(2);
    let run = || {
        let (mut new, mut out, mut missing) = (Vec::new(), Vec::new(), 0);
        for chunk in all.chunks(100) {
            step.wait();
            out.clear();
            map.insert_many(chunk, &mut out);
            new.extend_from_slice(&out);
            out.clear();
            missing += chunk.len() - map.contains_many(chunk, &mut out);
        }
        (new, missing)
    };
    let ((a, missing_a), (b, missing_b)) = std::thread::scope(|s| {
        let a = s.spawn(run);
        let b = s.spawn(run);
        (a.join().unwrap(), b.join().unwrap())
    });
    // A key can be overwritten by another key of the same group (100 keys in 16M buckets:
    // about 6 keys of 1M by chance); a lost insert would show as many.
    assert!(missing_a + missing_b < 20, "{missing_a} + {missing_b}");
    let both = a.iter().zip(&b).filter(|(x, y)| **x && **y).count();
    assert!(both < 20, "{both} keys new to both threads");
}

/// A lower bound the iterator does not reach only sizes the result vector's reservation: no
/// panic (`usize::MAX`), no abort (2^40), and the items are inserted as one by one.
#[test]
fn batch_operations_survive_an_iterator_whose_size_hint_lies() {
    for lie in [usize::MAX, 1 << 40] {
        let items = keys(lie as u64 & 0xff, 20);
        for buckets in [1_000, 2 << 20] {
            let map = OverwriteMap::with_buckets(buckets).unwrap();
            let mut new = Vec::new();
            assert_eq!(
                map.insert_many(LyingSizeHint(items.iter(), lie), &mut new),
                20
            );
            let mut hits = Vec::new();
            let hashes = items.iter().map(|k| map.hasher().hash_item(k));
            assert_eq!(
                map.contains_many_hashes(LyingSizeHint(hashes, lie), &mut hits),
                20
            );
        }
        let map = ExactOverwriteMap::with_buckets(1_000).unwrap();
        let bytes: Vec<[u8; 8]> = items.iter().map(|k| k.to_le_bytes()).collect();
        let mut new = Vec::new();
        assert_eq!(
            map.insert_many(LyingSizeHint(bytes.iter(), lie), &mut new),
            20
        );
        let mut hits = Vec::new();
        assert_eq!(
            map.contains_many(LyingSizeHint(bytes.iter(), lie), &mut hits),
            20
        );
    }
}

/// Batches of 0, 1, 15, 16, 17 and 33 items, with repeats within a group, across the group
/// boundary (15 and 16) and at both ends, against one-by-one calls: the fingerprint map below
/// and at its 8 MiB (grouped) threshold, and the exact map with keys of different lengths
/// (empty, one byte, prefixes of each other, 100 bytes).
#[test]
fn batches_of_every_length_around_a_group_agree_with_one_by_one() {
    for buckets in [64, 1 << 20, (1 << 20) - 1, 4 << 20] {
        let (one, many) = (
            OverwriteMap::with_buckets(buckets).unwrap(),
            OverwriteMap::with_buckets(buckets).unwrap(),
        );
        let grouped = many.memory_bytes() >= 8 << 20;
        assert_eq!(grouped, buckets >= 1 << 20, "{buckets}");
        for (seed, len) in [0usize, 1, 15, 16, 17, 33].into_iter().enumerate() {
            let mut items = keys(200 + seed as u64, len);
            if len >= 17 {
                items[16] = items[15];
                items[3] = items[1];
            }
            if len >= 2 {
                items[len - 1] = items[0];
            }
            let expected: Vec<bool> = items.iter().map(|k| one.insert(k)).collect();
            let mut got = Vec::new();
            many.insert_many(&items, &mut got);
            assert_eq!(got, expected, "{buckets} buckets, len {len}");
            let expected: Vec<bool> = items.iter().map(|k| one.contains(k)).collect();
            got.clear();
            many.contains_many(&items, &mut got);
            assert_eq!(got, expected, "{buckets} buckets, len {len}");
        }
    }

    let long = [7u8; 100];
    let keys: Vec<&[u8]> = vec![
        b"",
        b"a",
        b"ab",
        b"abc",
        &long,
        b"a",
        b"",
        &long[..99],
        b"ab",
        b"abc",
        b"b",
        b"",
        b"abcd",
        b"abc",
        b"x",
        b"y",
        b"a", // 17: "a" again at 16, right after the first group
        &long,
        b"",
        b"ab",
    ];
    for buckets in [3, 1_000] {
        let (one, many) = (
            ExactOverwriteMap::with_buckets(buckets).unwrap(),
            ExactOverwriteMap::with_buckets(buckets).unwrap(),
        );
        for len in [0, 1, 15, 16, 17, keys.len()] {
            let expected: Vec<bool> = keys[..len].iter().map(|k| one.insert(k)).collect();
            let mut got = Vec::new();
            many.insert_many(keys[..len].iter().copied(), &mut got);
            assert_eq!(got, expected, "exact, {buckets} buckets, len {len}");
            let expected: Vec<bool> = keys[..len].iter().map(|k| one.contains(k)).collect();
            got.clear();
            many.contains_many(keys[..len].iter().copied(), &mut got);
            assert_eq!(got, expected, "exact, {buckets} buckets, len {len}");
        }
    }
}

/// Two threads insert the same keys in the same order, one with single `insert` calls, the
/// other with `insert_many` in chunks of 100 (meeting at a barrier before each chunk, as in
/// `same_keys_from_two_threads_in_batches_are_exactly_once`), each checking `contains` right
/// after: on the grouped path, a key is new to at most one thread, and none is missing right
/// after its insert (up to the few keys a key of the same chunk overwrote, ~6 per 1M).
#[test]
fn same_keys_from_single_calls_and_batches_are_exactly_once() {
    let all = keys(13, 400_000);
    let map = OverwriteMap::with_buckets(16 * 1_000_000).unwrap();
    let step = std::sync::Barrier::new(2);
    let (single, batched) = std::thread::scope(|s| {
        let a = s.spawn(|| {
            let (mut new, mut missing) = (Vec::new(), 0);
            for chunk in all.chunks(100) {
                step.wait();
                for k in chunk {
                    new.push(map.insert(k));
                    missing += usize::from(!map.contains(k));
                }
            }
            (new, missing)
        });
        let b = s.spawn(|| {
            let (mut new, mut out, mut missing) = (Vec::new(), Vec::new(), 0);
            for chunk in all.chunks(100) {
                step.wait();
                out.clear();
                map.insert_many(chunk, &mut out);
                new.extend_from_slice(&out);
                missing += chunk.iter().filter(|k| !map.contains(k)).count();
            }
            (new, missing)
        });
        (a.join().unwrap(), b.join().unwrap())
    });
    assert!(single.1 + batched.1 < 10, "{} + {}", single.1, batched.1);
    let both = single
        .0
        .iter()
        .zip(&batched.0)
        .filter(|(x, y)| **x && **y)
        .count();
    assert!(both < 10, "{both} keys new to both threads");
}
