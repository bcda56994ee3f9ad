//! `WindowedBloomFilter` under loom: no false negative across a rotation while the spare is
//! being cleared, and exactly one `true` among racing inserts of one new item across one or two
//! rotations (and in packed blocks of 9 words). Each has a twin: a rotation that publishes the
//! spare before its clearing is finished, an insert that ignores a rotation, and one that skips
//! the generations that became current while it ran.

use super::{Twin, with};
use crate::WindowedBloomFilter;
use loom::sync::Arc;
use loom::thread;

/// The smallest window: `generations` live generations and the spare, each one line of 8
/// words (for 2 and 3 generations, 4 words per block, so a lookup reads 4 words; for 8, a packed
/// block of 9), rotated only by hand.
fn tiny(generations: u32) -> Arc<WindowedBloomFilter> {
    let f = WindowedBloomFilter::builder(4)
        .fpr(0.1)
        .periods(generations - 1)
        .rotate_manually()
        .build()
        .unwrap();
    let stride = if generations == 8 { 9 } else { 4 };
    assert_eq!(f.sizing().stride_words, stride);
    assert_eq!(f.memory_bytes(), u64::from(stride) * 64);
    Arc::new(f)
}

/// The main thread claims and clears the spare's chunk (as an insert picked by its hash does)
/// while one thread rotates and another inserts `x` and checks it at once. The spare starts
/// dirty: it holds `y`, inserted two rotations ago. (The clearer is the main thread so that the
/// interleaving "claim, rotate, insert, clear, check" fits in two preemptions.)
fn insert_while_clearing_and_rotating(rotate: fn(&WindowedBloomFilter) -> Option<u64>) {
    loom::model(move || {
        let f = tiny(2);
        assert!(f.insert("y"));
        f.rotate();
        f.rotate();
        // Generation 2: "y"'s slot is the spare, and nothing has cleared it.
        let rotator = {
            let f = Arc::clone(&f);
            thread::spawn(move || {
                rotate(&f);
            })
        };
        let inserter = {
            let f = Arc::clone(&f);
            thread::spawn(move || {
                f.insert("x");
                assert!(f.contains("x"), "false negative right after the insert");
            })
        };
        f.clear_one_chunk();
        rotator.join().unwrap();
        inserter.join().unwrap();
        assert!(f.contains("x"), "false negative after join");
        assert_eq!(f.generation(), 3);
    });
}

#[test]
fn no_false_negative_while_the_spare_is_cleared_and_rotated_in() {
    insert_while_clearing_and_rotating(|f| f.rotate());
}

#[test]
#[should_panic(expected = "false negative")]
fn publishing_the_spare_before_its_clearing_finishes_loses_inserts() {
    insert_while_clearing_and_rotating(|f| with(Twin::PublishWhenClaimed, || f.rotate()));
}

/// Two threads insert one new item while the main thread rotates `rotations` times; exactly
/// one of them must be told it is new.
fn racing_inserts(generations: u32, rotations: u32, twin: Twin) {
    loom::model(move || {
        let f = tiny(generations);
        let racers: Vec<_> = (0..2)
            .map(|_| {
                let f = Arc::clone(&f);
                thread::spawn(move || with(twin, || f.insert("x")))
            })
            .collect();
        for _ in 0..rotations {
            f.rotate();
        }
        let new = racers
            .into_iter()
            .map(|h| usize::from(h.join().unwrap()))
            .sum::<usize>();
        assert_eq!(new, 1, "{new} racing inserts of one new item told new");
        assert!(f.contains("x"));
    });
}

#[test]
fn racing_inserts_across_a_rotation_have_exactly_one_new() {
    racing_inserts(2, 1, Twin::Correct);
}

#[test]
fn racing_inserts_across_two_rotations_have_exactly_one_new() {
    racing_inserts(3, 2, Twin::Correct);
}

/// 8 generations: blocks of 9 words, not a power of two (slots by division, the block across a
/// line boundary in most blocks).
#[test]
fn racing_inserts_in_packed_blocks_have_exactly_one_new() {
    racing_inserts(8, 1, Twin::Correct);
}

#[test]
#[should_panic(expected = "told new")]
fn an_insert_in_packed_blocks_that_ignores_a_rotation_is_not_exactly_once() {
    racing_inserts(8, 1, Twin::IgnoreRotation);
}

#[test]
#[should_panic(expected = "told new")]
fn an_insert_that_ignores_a_rotation_is_not_exactly_once() {
    racing_inserts(2, 1, Twin::IgnoreRotation);
}

#[test]
#[should_panic(expected = "told new")]
fn an_insert_that_skips_the_generations_current_meanwhile_is_not_exactly_once() {
    racing_inserts(3, 2, Twin::SkipBecameCurrent);
}
