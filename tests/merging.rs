//! Merging Bloom filters: shards built apart union into one filter, filters that place items
//! differently refuse to merge, intersect keeps what both hold, and a union racing inserts into
//! both filters loses nothing.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};

use common::files::{bloom, bytes_of};
use seen::hash::StableHasher;
use seen::{AtomicBloomFilter, Error, Layout};

#[test]
fn shards_built_apart_merge_into_one_filter() {
    // Three workers build shards of one campaign; the shards travel as files; one union.
    let keys = common::keys(60, 300_000);
    let shards: Vec<Vec<u8>> = keys
        .chunks(100_000)
        .map(|part| {
            let shard = bloom(400_000, 0.01, Layout::Word);
            shard.insert_counting_new(part);
            bytes_of(&shard)
        })
        .collect();
    let merged = bloom(400_000, 0.01, Layout::Word);
    for file in &shards {
        merged
            .union(&AtomicBloomFilter::read_from(&file[..]).unwrap())
            .unwrap();
    }
    assert!(keys.iter().all(|k| merged.contains(k)));
    let estimate = merged.estimated_len() as f64;
    assert!((estimate - 300_000.0).abs() < 6_000.0, "{estimate}");
    // Overlapping sets count once.
    let again = bloom(400_000, 0.01, Layout::Word);
    again.insert_counting_new(&keys[..200_000]);
    merged.union(&again).unwrap();
    let estimate = merged.estimated_len() as f64;
    assert!((estimate - 300_000.0).abs() < 6_000.0, "{estimate}");
    let others = common::keys(61, 100_000);
    let fp = others.iter().filter(|k| merged.contains(*k)).count();
    assert!(
        fp < 1_000,
        "{fp} false positives of 100,000 at 3/4 of capacity"
    );
}

#[test]
fn merging_filters_that_place_items_differently_is_an_error() {
    let a = bloom(1000, 0.01, Layout::Word);
    a.insert("a");
    let before = bytes_of(&a);
    let incompatible = |other: &AtomicBloomFilter<_>| a.union(other).unwrap_err();
    assert_eq!(
        incompatible(&bloom(1000, 0.01, Layout::Line)),
        Error::Incompatible { what: "layout" }
    );
    assert_eq!(
        incompatible(&bloom(5000, 0.01, Layout::Word)),
        Error::Incompatible { what: "blocks" }
    );
    let seeded = AtomicBloomFilter::builder(1000)
        .hasher(StableHasher::with_seed(1))
        .build()
        .unwrap();
    assert_eq!(
        a.union(&AtomicBloomFilter::read_from(&bytes_of(&seeded)[..]).unwrap())
            .unwrap_err(),
        Error::Incompatible { what: "hasher" }
    );
    assert_eq!(bytes_of(&a), before, "a refused union changes nothing");
    // A hasher that cannot name itself cannot be checked: refused too.
    let random = std::hash::RandomState::new();
    let x = AtomicBloomFilter::builder(1000)
        .hasher(random.clone())
        .build()
        .unwrap();
    let y = AtomicBloomFilter::builder(1000)
        .hasher(random)
        .build()
        .unwrap();
    assert_eq!(
        x.union(&y).unwrap_err(),
        Error::Incompatible { what: "hasher" }
    );
}

#[test]
fn intersect_keeps_what_both_hold() {
    let keys = common::keys(70, 30_000);
    let mut a = bloom(100_000, 0.001, Layout::Line);
    let b = bloom(100_000, 0.001, Layout::Line);
    a.insert_counting_new(&keys[..20_000]);
    b.insert_counting_new(&keys[10_000..]);
    a.intersect(&b).unwrap();
    assert!(keys[10_000..20_000].iter().all(|k| a.contains(k)));
    let only_one = keys[..10_000].iter().chain(&keys[20_000..]);
    let reported = only_one.filter(|k| a.contains(*k)).count();
    assert!(
        reported < 200,
        "{reported} of 20,000 items of only one filter reported"
    );
}

/// A union racing inserts into both filters loses nothing: every key inserted into either
/// before the union began, and every key inserted into the target at any time, is found after.
/// The writers hold their last key until a union is done, so that unions run while they write
/// however busy the machine is; whether one lands between the read and the write of a word
/// that a writer sets is the scheduler's, which the next test decides instead.
#[test]
fn a_union_racing_inserts_into_both_filters_loses_nothing() {
    // Five rounds: one round catches a union that stores instead of ORing 2 times in 3.
    for round in 0..5u64 {
        const KEYS: usize = 1_000_000;
        // Small filters (about 1.5 MB): the unions sweep them many times while the writers run.
        let target = &bloom(KEYS as u64, 0.01, Layout::Word);
        let source = &bloom(KEYS as u64, 0.01, Layout::Word);
        let before = common::keys(80 + 10 * round, KEYS / 4);
        source.insert_counting_new(&before);
        let [into_target, into_source] = [
            common::keys(81 + 10 * round, KEYS / 2),
            common::keys(82 + 10 * round, KEYS / 4),
        ];
        let writing = AtomicU64::new(2);
        let merged = &common::Count::new();
        // Each writer holds its last key until a union is done, however busy the machine is.
        let write = |filter: &AtomicBloomFilter, keys: &[u64]| {
            let (last, rest) = keys.split_last().unwrap();
            rest.iter().for_each(|k| _ = filter.insert(k));
            merged.wait_for(1);
            filter.insert(last);
            writing.fetch_sub(1, Ordering::Release);
        };
        let unions = std::thread::scope(|s| {
            s.spawn(|| write(target, &into_target));
            s.spawn(|| write(source, &into_source));
            let mut unions = 0;
            while writing.load(Ordering::Acquire) > 0 {
                target.union(source).unwrap();
                unions = merged.add();
            }
            unions
        });
        assert!(
            unions >= 1,
            "only {unions} unions ran while the writers did"
        );
        assert!(before.iter().all(|k| target.contains(k)));
        assert!(into_target.iter().all(|k| target.contains(k)));
        target.union(source).unwrap();
        assert!(into_source.iter().all(|k| target.contains(k)));
    }
}

/// A union paused at the one word of the target that lacks bits of the source's (the
/// `atomic.union.word` pause point: it has read the word, not yet written it), while the test
/// inserts into the target a key whose bits lie in that very word: released, the union's
/// `fetch_or` keeps them. Checked to fail: a union that writes the word it read ORed with the
/// source's (a read-modify-write split in two) loses the key every time.
#[cfg(feature = "failpoints")]
#[test]
fn a_union_keeps_a_key_inserted_into_the_word_it_is_merging() {
    use std::sync::mpsc::channel;
    use std::time::Duration;
    const CAPACITY: u64 = 1_000;
    // The word a key sets alone, and its bits there (the word layout sets one word per key).
    let word_of = |key: u64| {
        let f = bloom(CAPACITY, 0.01, Layout::Word);
        f.insert(&key);
        let mut words = vec![0; (f.bit_len() / 64) as usize];
        f.read_words(0, &mut words).unwrap();
        let at = words.iter().position(|&w| w != 0).unwrap();
        (at, words[at])
    };
    let candidates = common::keys(90, 100_000);
    for (round, &theirs) in candidates[..20].iter().enumerate() {
        let (word, their_bits) = word_of(theirs);
        // A key of the same word with a bit the source's key lacks.
        let ours = *candidates[20..]
            .iter()
            .find(|&&k| {
                let (w, bits) = word_of(k);
                w == word && bits & !their_bits != 0
            })
            .expect("a key of the same word");
        let target = &bloom(CAPACITY, 0.01, Layout::Word);
        let source = &bloom(CAPACITY, 0.01, Layout::Word);
        source.insert(&theirs);
        let (reached, paused) = channel();
        let (release, go) = channel::<()>();
        let pauses = std::thread::scope(|s| {
            let union = s.spawn(move || {
                let pauses = std::rc::Rc::new(std::cell::Cell::new(0));
                let count = pauses.clone();
                let _armed = seen::failpoints::arm(move |point| {
                    if point == "atomic.union.word" {
                        count.set(count.get() + 1);
                        let _ = reached.send(());
                        let _ = go.recv(); // an error once released: passes at once
                    }
                });
                target.union(source).unwrap();
                pauses.get()
            });
            paused
                .recv_timeout(Duration::from_secs(60))
                .expect("the union never reached the word");
            assert!(target.insert(&ours), "round {round}");
            drop(release); // and any later pause passes at once
            union.join().unwrap()
        });
        assert_eq!(pauses, 1);
        assert!(target.contains(&theirs), "round {round}");
        assert!(
            target.contains(&ours),
            "round {round}: the union lost a key"
        );
    }
}
