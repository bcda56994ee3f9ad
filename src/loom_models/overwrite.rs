//! `OverwriteMap` (fingerprints in `AtomicU64` slots) and `ExactOverwriteMap` (keys behind
//! swappable `Arc`s) under loom. Maps of one bucket, so that every item collides.

use crate::{ExactOverwriteMap, OverwriteMap};
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
