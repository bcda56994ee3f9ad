//! Saving under loom: a save that begins after an insert was published holds that insert, while
//! another thread inserts into the same filter (the guarantee of
//! [`AtomicBloomFilter::write_to`]), and the twin of a save cache that loses one.

use super::atomic_bloom::tiny;
use crate::{AtomicBloomFilter, Layout};
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::sync::{Arc, Mutex};
use loom::thread;

/// `save` writes the filter and loads it back; the model asserts on the loaded copy.
fn model(
    save: fn(&AtomicBloomFilter, &Saver) -> Vec<u8>,
    insert: fn(&AtomicBloomFilter, &Saver, &str),
) {
    for layout in [Layout::Word, Layout::Line] {
        loom::model(move || {
            let f = tiny(layout);
            let saver = Arc::new(Saver::default());
            let published = Arc::new(AtomicBool::new(false));
            let writer = {
                let (f, saver, published) = (f.clone(), saver.clone(), published.clone());
                thread::spawn(move || {
                    insert(&f, &saver, "a");
                    published.store(true, Ordering::Release);
                })
            };
            let racer = {
                let (f, saver) = (f.clone(), saver.clone());
                thread::spawn(move || insert(&f, &saver, "b"))
            };
            let early = save(&f, &saver);
            assert!(AtomicBloomFilter::read_from(&early[..]).is_ok());
            if published.load(Ordering::Acquire) {
                let file = save(&f, &saver);
                let loaded = AtomicBloomFilter::read_from(&file[..]).unwrap();
                assert!(
                    loaded.contains("a"),
                    "{layout:?}: a published insert is not in the save"
                );
            }
            writer.join().unwrap();
            racer.join().unwrap();
        });
    }
}

/// The state of the twin's save cache (unused by the real save).
#[derive(Default)]
struct Saver {
    dirty: AtomicBool,
    cache: Mutex<Vec<u8>>,
}

fn real_save(f: &AtomicBloomFilter, _: &Saver) -> Vec<u8> {
    let mut file = Vec::new();
    f.write_to(&mut file).unwrap();
    file
}

fn real_insert(f: &AtomicBloomFilter, _: &Saver, item: &str) {
    f.insert(item);
}

#[test]
fn a_save_holds_every_insert_published_before_it_began() {
    model(real_save, real_insert);
}

/// The twin: a save that re-reads the bits only when a dirty flag says something was inserted
/// since the last save. The insert raises the flag before it sets its bits, and the save lowers
/// it before it reads them, so a save can read the words before an insert's bits land and lower
/// the flag that insert raised; the next save, though it begins after the insert was published,
/// returns the stale copy.
fn caching_save(f: &AtomicBloomFilter, saver: &Saver) -> Vec<u8> {
    let mut cache = saver.cache.lock().unwrap();
    if saver.dirty.swap(false, Ordering::SeqCst) || cache.is_empty() {
        cache.clear();
        f.write_to(&mut *cache).unwrap();
    }
    cache.clone()
}

fn flag_first_insert(f: &AtomicBloomFilter, saver: &Saver, item: &str) {
    saver.dirty.store(true, Ordering::SeqCst);
    f.insert(item);
}

#[test]
#[should_panic(expected = "a published insert is not in the save")]
fn twin_a_save_cache_flagged_before_the_bits_loses_a_published_insert() {
    model(caching_save, flag_first_insert);
}
