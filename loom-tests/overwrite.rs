//! `OverwriteMap` (fingerprints in `AtomicU64` slots) and `ExactOverwriteMap` (keys behind
//! swappable `Arc`s) under loom, and their `claim` guards. Maps of one bucket, so that every
//! item collides.

use crate::{Claim, ExactClaim, ExactOverwriteMap, OverwriteMap};
use loom::sync::Arc;
use loom::thread;

/// The operations the models need, for both maps.
trait Map: Send + Sync + 'static {
    fn one_bucket() -> Self;
    fn insert(&self, item: &str) -> bool;
    fn contains(&self, item: &str) -> bool;
}

impl Map for OverwriteMap {
    fn one_bucket() -> Self {
        OverwriteMap::with_buckets(1).unwrap()
    }
    fn insert(&self, item: &str) -> bool {
        OverwriteMap::insert(self, item)
    }
    fn contains(&self, item: &str) -> bool {
        OverwriteMap::contains(self, item)
    }
}

impl Map for ExactOverwriteMap {
    fn one_bucket() -> Self {
        ExactOverwriteMap::with_buckets(1).unwrap()
    }
    fn insert(&self, item: &str) -> bool {
        ExactOverwriteMap::insert(self, item)
    }
    fn contains(&self, item: &str) -> bool {
        ExactOverwriteMap::contains(self, item)
    }
}

/// One thread's work in a model.
type Work<M, R> = Box<dyn FnOnce(&M) -> R + Send>;

/// Runs `work` on `threads` threads sharing one map; returns the map and the results.
fn race<M: Map, R: Send + 'static>(map: Arc<M>, work: Vec<Work<M, R>>) -> Vec<R> {
    let handles: Vec<_> = work
        .into_iter()
        .map(|w| {
            let map = Arc::clone(&map);
            thread::spawn(move || w(&map))
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

fn exactly_one_new<M: Map>(threads: usize, insert: fn(&M, &str) -> bool) {
    loom::model(move || {
        let map = Arc::new(M::one_bucket());
        let work = (0..threads)
            .map(|_| Box::new(move |m: &M| insert(m, "msg")) as Work<M, bool>)
            .collect();
        let news = race(Arc::clone(&map), work)
            .into_iter()
            .filter(|&n| n)
            .count();
        assert_eq!(news, 1, "{threads} threads: {news} told new");
        assert!(map.contains("msg"));
    });
}

#[test]
fn fingerprint_racing_inserts_of_one_item_have_exactly_one_new() {
    exactly_one_new::<OverwriteMap>(2, |m, i| m.insert(i));
    exactly_one_new::<OverwriteMap>(3, |m, i| m.insert(i));
}

#[test]
fn exact_racing_inserts_of_one_item_have_exactly_one_new() {
    exactly_one_new::<ExactOverwriteMap>(2, |m, i| m.insert(i));
    exactly_one_new::<ExactOverwriteMap>(3, |m, i| m.insert(i));
}

/// Twin: a load and a separate store lets two inserters both be told "new".
#[test]
#[should_panic(expected = "told new")]
fn fingerprint_load_then_store_insert_is_not_exactly_once() {
    exactly_one_new::<OverwriteMap>(2, |m, i| m.racy_insert(i));
}

/// Two items fight over the single slot while a third thread asks about an item nobody inserted:
/// it is never "seen", and at the end the slot holds exactly one of the two.
fn colliding_items_never_make_a_stranger_seen<M: Map>() {
    loom::model(|| {
        let map = Arc::new(M::one_bucket());
        let work: Vec<Work<M, bool>> = vec![
            Box::new(|m: &M| m.insert("a")),
            Box::new(|m: &M| m.insert("b")),
            Box::new(|m: &M| m.contains("stranger")),
        ];
        let results = race(Arc::clone(&map), work);
        assert!(
            results[0] && results[1],
            "distinct items are each new: {results:?}"
        );
        assert!(!results[2], "an item never inserted was reported seen");
        assert!(
            map.contains("a") != map.contains("b"),
            "the slot holds exactly one"
        );
        assert!(!map.contains("stranger"));
    });
}

#[test]
fn fingerprint_colliding_items_never_make_a_stranger_seen() {
    colliding_items_never_make_a_stranger_seen::<OverwriteMap>();
}

#[test]
fn exact_colliding_items_never_make_a_stranger_seen() {
    colliding_items_never_make_a_stranger_seen::<ExactOverwriteMap>();
}

/// The slot holds "a". One thread forgets "a" while another inserts "b" into the same slot: "b"
/// must survive in every interleaving (forget erases only what is still ours), and "a" is gone.
fn forget_racing_with_an_overwrite_keeps_the_other_item<M: Map>(forget: fn(&M, &str) -> bool) {
    loom::model(move || {
        let map = Arc::new(M::one_bucket());
        assert!(map.insert("a"));
        let work: Vec<Work<M, bool>> = vec![
            Box::new(move |m: &M| forget(m, "a")),
            Box::new(|m: &M| m.insert("b")),
        ];
        let results = race(Arc::clone(&map), work);
        assert!(
            map.contains("b"),
            "forget(a) erased b (forget returned {})",
            results[0]
        );
        assert!(!map.contains("a"));
    });
}

#[test]
fn fingerprint_forget_never_erases_an_item_that_overwrote_ours() {
    forget_racing_with_an_overwrite_keeps_the_other_item::<OverwriteMap>(|m, i| m.forget(i));
}

#[test]
fn exact_forget_never_erases_an_item_that_overwrote_ours() {
    forget_racing_with_an_overwrite_keeps_the_other_item::<ExactOverwriteMap>(|m, i| m.forget(i));
}

/// Twins: a forget that checks and then stores without comparing erases "b".
#[test]
#[should_panic(expected = "erased b")]
fn fingerprint_check_then_store_forget_erases_the_other_item() {
    forget_racing_with_an_overwrite_keeps_the_other_item::<OverwriteMap>(|m, i| m.racy_forget(i));
}

#[test]
#[should_panic(expected = "erased b")]
fn exact_check_then_store_forget_erases_the_other_item() {
    forget_racing_with_an_overwrite_keeps_the_other_item::<ExactOverwriteMap>(|m, i| {
        m.racy_forget(i)
    });
}

/// Exact mode allocates an entry per insert and frees the one it replaces: with inserts, a
/// re-insert and a forget racing, every entry is freed by the end of the model (loom fails the
/// model on a leaked `Arc`, and on any access to a freed one).
#[test]
fn exact_entries_are_freed_under_races() {
    loom::model(|| {
        let map = Arc::new(ExactOverwriteMap::with_buckets(1).unwrap());
        let work: Vec<Work<ExactOverwriteMap, bool>> = vec![
            Box::new(|m: &ExactOverwriteMap| m.insert("a") | m.forget("a")),
            Box::new(|m: &ExactOverwriteMap| m.insert("b") | m.insert("a")),
        ];
        race(Arc::clone(&map), work);
        drop(map);
    });
}

/// Twin of the model above: proof that loom's leak checking is on. A map whose entries are never
/// freed (here: the map itself is leaked) fails the model.
#[test]
#[should_panic(expected = "leak")]
fn leaked_exact_entries_are_caught() {
    loom::model(|| {
        let map = ExactOverwriteMap::with_buckets(1).unwrap();
        map.insert("a");
        std::mem::forget(map);
    });
}

// ---------------------------------------------------------------------------------------------
// Claims: `claim` / `commit` / drop.
// ---------------------------------------------------------------------------------------------

/// The claim operations the models need, for both maps.
trait ClaimMap: Map {
    type Guard<'a>;
    fn claim(&self, item: &str) -> Option<Self::Guard<'_>>;
    fn commit(guard: Self::Guard<'_>);
}

impl ClaimMap for OverwriteMap {
    type Guard<'a> = Claim<'a>;
    fn claim(&self, item: &str) -> Option<Claim<'_>> {
        OverwriteMap::claim(self, item)
    }
    fn commit(guard: Claim<'_>) {
        guard.commit();
    }
}

impl ClaimMap for ExactOverwriteMap {
    type Guard<'a> = ExactClaim<'a>;
    fn claim(&self, item: &str) -> Option<ExactClaim<'_>> {
        ExactOverwriteMap::claim(self, item)
    }
    fn commit(guard: ExactClaim<'_>) {
        guard.commit();
    }
}

/// How a model takes a claim: the real `claim`, or a broken twin.
type ClaimFn<M> = for<'a> fn(&'a M, &str) -> Option<<M as ClaimMap>::Guard<'a>>;

/// How a model gives up a claim whose processing failed: a plain drop, or a broken twin.
type Release<M> = for<'a> fn(<M as ClaimMap>::Guard<'a>);

#[derive(Clone, Copy, Debug)]
enum Then {
    Commit,
    Drop,
}

/// Two threads claim one item; the one that gets a claim checks that the map remembers the item
/// (nobody else's claim or drop may erase a live claim), then commits or drops it as `plan` says.
/// Invariants: at most one claim commits (the second claim of a remembered item is a duplicate);
/// and a claim made after both (happens-after: the joins) gets through exactly when nobody
/// committed: a dropped claim lets the retry through, a committed one keeps it out.
fn racing_claims_of_one_item<M: ClaimMap>(claim: ClaimFn<M>, release: Release<M>) {
    use Then::{Commit, Drop};
    for plan in [[Commit, Commit], [Drop, Commit], [Drop, Drop]] {
        loom::model(move || {
            let map = Arc::new(M::one_bucket());
            let work = plan
                .iter()
                .map(|&then| {
                    Box::new(move |m: &M| {
                        let Some(guard) = claim(m, "a") else {
                            return (false, true);
                        };
                        let remembered = m.contains("a");
                        match then {
                            Commit => M::commit(guard),
                            Drop => release(guard),
                        }
                        (matches!(then, Commit), remembered)
                    }) as Work<M, (bool, bool)>
                })
                .collect();
            let results = race(Arc::clone(&map), work);
            assert!(
                results.iter().all(|&(_, remembered)| remembered),
                "{plan:?}: a live claim was not remembered"
            );
            let commits = results.iter().filter(|&&(committed, _)| committed).count();
            assert!(
                commits <= 1,
                "{plan:?}: {commits} claims of one item committed"
            );
            let later = map.claim("a").is_some();
            assert!(
                later == (commits == 0),
                "{plan:?}: {commits} commits, yet a later claim {}",
                if later {
                    "got through (a committed item forgotten)"
                } else {
                    "was refused (a message lost)"
                }
            );
        });
    }
}

#[test]
fn fingerprint_racing_claims_of_one_item_commit_at_most_once_and_a_drop_lets_the_retry_through() {
    racing_claims_of_one_item::<OverwriteMap>(|m, i| m.claim(i), |guard| drop(guard));
}

#[test]
fn exact_racing_claims_of_one_item_commit_at_most_once_and_a_drop_lets_the_retry_through() {
    racing_claims_of_one_item::<ExactOverwriteMap>(|m, i| m.claim(i), |guard| drop(guard));
}

/// Twin: a claim that loads and then stores (not one swap) lets both threads claim and commit.
#[test]
#[should_panic(expected = "2 claims of one item committed")]
fn fingerprint_load_then_store_claim_lets_two_claims_commit() {
    racing_claims_of_one_item::<OverwriteMap>(|m, i| m.racy_claim(i), |guard| drop(guard));
}

/// Twin: a claim that takes the slot with a `swap` (as the exact `insert` once did) replaces the
/// first claimant's entry with an equal one of its own while being told "duplicate"; the first
/// claimant's drop then cannot find its entry, and the item stays remembered with nobody having
/// processed it.
#[test]
#[should_panic(expected = "was refused (a message lost)")]
fn exact_swapping_claim_keeps_a_dropped_claim_remembered() {
    racing_claims_of_one_item::<ExactOverwriteMap>(|m, i| m.swapping_claim(i), |guard| drop(guard));
}

/// Twin of the first check: a claim erased while it lives (here by a `forget` right after it)
/// leaves the item unremembered while it is being processed.
#[test]
#[should_panic(expected = "a live claim was not remembered")]
fn fingerprint_claim_erased_while_live_is_not_remembered() {
    racing_claims_of_one_item::<OverwriteMap>(
        |m, i| {
            let guard = m.claim(i);
            m.forget(i);
            guard
        },
        |guard| drop(guard),
    );
}

/// Twin: a guard whose drop forgets nothing (here: every drop is a commit) refuses the retry.
#[test]
#[should_panic(expected = "was refused (a message lost)")]
fn fingerprint_drop_that_forgets_nothing_refuses_the_retry() {
    racing_claims_of_one_item::<OverwriteMap>(|m, i| m.claim(i), |guard| guard.commit());
}

/// The main thread claims "a"; another thread claims "b" (same slot: it overwrites "a") and
/// commits it while the main thread gives its claim up. Invariant: "b" survives in every
/// interleaving: a drop never erases another item's committed claim.
fn dropped_claim_racing_another_items_commit<M: ClaimMap>(release: Release<M>) {
    loom::model(move || {
        let map = Arc::new(M::one_bucket());
        let ours = map.claim("a").expect("an empty map");
        let other = {
            let map = Arc::clone(&map);
            thread::spawn(move || {
                let guard = map.claim("b");
                let claimed = guard.is_some();
                guard.map(M::commit);
                claimed
            })
        };
        release(ours);
        assert!(
            other.join().unwrap(),
            "b overwrites whatever the slot holds"
        );
        assert!(
            map.contains("b"),
            "the drop of a's claim erased b's committed claim"
        );
        assert!(!map.contains("a"));
    });
}

#[test]
fn fingerprint_dropped_claim_never_erases_another_items_commit() {
    dropped_claim_racing_another_items_commit::<OverwriteMap>(|guard| drop(guard));
}

#[test]
fn exact_dropped_claim_never_erases_another_items_commit() {
    dropped_claim_racing_another_items_commit::<ExactOverwriteMap>(|guard| drop(guard));
}

/// Twins: a drop that loads, checks and then stores (no compare-exchange) erases "b".
#[test]
#[should_panic(expected = "erased b's committed claim")]
fn fingerprint_check_then_store_drop_erases_another_items_commit() {
    dropped_claim_racing_another_items_commit::<OverwriteMap>(|guard| {
        guard.check_then_store_forget();
    });
}

#[test]
#[should_panic(expected = "erased b's committed claim")]
fn exact_check_then_store_drop_erases_another_items_commit() {
    dropped_claim_racing_another_items_commit::<ExactOverwriteMap>(|guard| {
        guard.check_then_store_forget();
    });
}

/// The main thread claims "a" (slow processing); meanwhile another thread claims "b", which
/// overwrites "a", and then claims "a" again, which it gets (the map forgot the first claim),
/// and commits both. The main thread's processing fails and it drops its claim. Returns whether
/// "a" is still remembered at the end; asserts in every interleaving that if it is not, a later
/// claim gets through (the consequence is a duplicate, never a lost message).
fn reclaim_after_an_overwrite<M: ClaimMap>(release: Release<M>) -> bool {
    let map = Arc::new(M::one_bucket());
    let first = map.claim("a").expect("an empty map");
    let other = {
        let map = Arc::clone(&map);
        thread::spawn(move || {
            let b = map
                .claim("b")
                .expect("b overwrites whatever the slot holds");
            M::commit(b);
            let again = map.claim("a").expect("the slot holds b: a is new again");
            M::commit(again);
        })
    };
    release(first);
    other.join().unwrap();
    let remembered = map.contains("a");
    if !remembered {
        assert!(map.claim("a").is_some(), "an erased item must be claimable");
    }
    remembered
}

/// Invariant (exact map): the drop of the first claim never erases the later committed claim of
/// the same key, because it forgets its own entry, by identity.
#[test]
fn exact_dropped_claim_never_erases_a_later_committed_claim_of_the_same_key() {
    loom::model(|| {
        assert!(
            reclaim_after_an_overwrite::<ExactOverwriteMap>(|guard| drop(guard)),
            "the drop of a's first claim erased a's later committed claim"
        );
    });
}

/// Twin: a drop that forgets whatever entry holds the same bytes (as the fingerprint map must)
/// erases the later committed claim.
#[test]
#[should_panic(expected = "erased a's later committed claim")]
fn exact_drop_by_bytes_erases_a_later_committed_claim_of_the_same_key() {
    loom::model(|| {
        assert!(
            reclaim_after_an_overwrite::<ExactOverwriteMap>(|guard| {
                guard.forget_by_bytes();
            }),
            "the drop of a's first claim erased a's later committed claim"
        );
    });
}

/// The documented limit of the fingerprint map's `Claim`: the same model, where the drop of the
/// first claim does erase the later committed claim in some interleavings (the slot holds a
/// fingerprint, not a claim's identity). Loom must find one, so that the docs' limit is real and
/// the exact map's invariant above is not vacuous; in every interleaving an erased item is
/// claimable again (a duplicate, not a loss).
#[test]
fn fingerprint_dropped_claim_can_erase_a_later_committed_claim_of_the_same_item() {
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
    // A std counter: outside what loom models, only read after the model.
    let erased = std::sync::Arc::new(AtomicUsize::new(0));
    let counter = std::sync::Arc::clone(&erased);
    loom::model(move || {
        if !reclaim_after_an_overwrite::<OverwriteMap>(|guard| drop(guard)) {
            counter.fetch_add(1, Relaxed);
        }
    });
    assert!(erased.load(Relaxed) > 0, "no interleaving erased it");
}

/// Three parties on one slot: a claim of "a" that fails (dropped), an insert of another key "b",
/// and a claim of "a" that commits. The no-loss invariant of both guards: if "a" is remembered
/// at the end, some claim of it committed (a refusal of the redelivery is never a lost message).
/// Runs the real exact insert's compare-and-swap loop against an overwrite between its load and
/// its compare-and-swap, and a drop racing both.
fn no_loss_with_an_overwrite_in_between<M: ClaimMap>(claim: ClaimFn<M>) {
    loom::model(move || {
        let map = Arc::new(M::one_bucket());
        let failing = {
            let map = Arc::clone(&map);
            thread::spawn(move || drop(map.claim("a")))
        };
        let other = {
            let map = Arc::clone(&map);
            thread::spawn(move || {
                map.insert("b");
            })
        };
        let committed = claim(&map, "a").map(M::commit).is_some();
        failing.join().unwrap();
        other.join().unwrap();
        assert!(
            committed || !map.contains("a"),
            "a is remembered, yet its only claim that got through was dropped: a lost message"
        );
    });
}

#[test]
fn fingerprint_claim_never_loses_with_an_overwrite_in_between() {
    no_loss_with_an_overwrite_in_between::<OverwriteMap>(|m, i| m.claim(i));
}

#[test]
fn exact_claim_never_loses_with_an_overwrite_in_between() {
    no_loss_with_an_overwrite_in_between::<ExactOverwriteMap>(|m, i| m.claim(i));
}

/// Twin: the committing side takes the slot with a `swap`, as the exact insert once did. When
/// the failing claim's entry is in the slot, the swap replaces it with an equal entry and reports
/// "seen"; the failing claim's drop no longer recognizes the slot's entry, so "a" stays
/// remembered with no claim of it committed.
#[test]
#[should_panic(expected = "a lost message")]
fn exact_swapping_claim_loses_with_an_overwrite_in_between() {
    no_loss_with_an_overwrite_in_between::<ExactOverwriteMap>(|m, i| m.swapping_claim(i));
}

/// The exact guard after an explicit `forget`: the main thread's claim of "a" is erased by
/// `forget("a")` on another thread, which then claims "a" again and commits; the main thread's
/// drop must not erase that committed entry (it compares its own `Arc`, which `forget` removed).
#[test]
fn exact_dropped_claim_never_erases_a_claim_made_after_an_explicit_forget() {
    claim_after_an_explicit_forget(|first| drop(first));
}

/// Twin: a release that forgets whatever entry holds the same bytes erases the second claim's
/// committed entry.
#[test]
#[should_panic(expected = "erased the second claim's committed entry")]
fn exact_drop_by_bytes_erases_a_claim_made_after_an_explicit_forget() {
    claim_after_an_explicit_forget(|first| {
        first.forget_by_bytes();
    });
}

fn claim_after_an_explicit_forget(release: fn(ExactClaim<'_>)) {
    loom::model(move || {
        let map = Arc::new(ExactOverwriteMap::one_bucket());
        let first = map.claim("a").expect("an empty map");
        let other = {
            let map = Arc::clone(&map);
            thread::spawn(move || {
                map.forget("a"); // erases the first claim's entry, unless its drop did
                map.claim("a")
                    .expect("forgotten or dropped: claimable again")
                    .commit();
            })
        };
        release(first);
        other.join().unwrap();
        assert!(
            map.contains("a"),
            "the first claim's drop erased the second claim's committed entry"
        );
    });
}
