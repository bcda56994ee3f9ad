//! Helpers shared by the integration tests. Each test file uses a part of them.
#![allow(dead_code)]

pub(crate) mod files;

use seen::DedupFilter;
use seen::hash::{ItemHasher, StableHasher};

/// A fixed-seed stream of distinct-looking 64-bit keys, so runs are reproducible: the crate's
/// stable hash of a counter (`h1` of `StableHasher::with_seed(seed).hash_item(&i)`). Keys of one
/// stream, and of streams with different seeds, collide with probability about 2^-64 per pair.
pub(crate) fn keys(seed: u64, n: usize) -> Vec<u64> {
    let hasher = StableHasher::with_seed(seed);
    (0..n as u64).map(|i| hasher.hash_item(&i).h1).collect()
}

/// splitmix64: a fixed-seed stream for tests that need raw 64-bit values (hash halves, keys)
/// rather than [`keys`]' hashed counter. A test file adds the shapes it needs (`impl Rng`).
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// A semi-concurrent filter at 0.1% with `insertions_before_compact` = `ibc`.
pub(crate) fn semi_filter(capacity: u64, ibc: usize) -> seen::SemiConcurrentBloomFilter {
    seen::SemiConcurrentBloomFilter::builder(capacity)
        .fpr(0.001)
        .insertions_before_compact(ibc)
        .build()
        .unwrap()
}

/// What two threads saw when they inserted the same keys, in the same order, into one filter.
#[derive(Debug, Default)]
pub(crate) struct SameKeyRace {
    /// `contains(k)` was `false` right after the same thread's `insert(k)` returned.
    pub(crate) false_negatives: usize,
    /// A second `insert(k)` on the same thread, right after the first, said "new".
    pub(crate) new_again: usize,
    /// Keys that neither thread was told were new.
    pub(crate) neither_new: usize,
    /// Keys that both threads were told were new.
    pub(crate) both_new: usize,
    /// How many times `maintain` ran: once per step of the writers.
    pub(crate) maintenances: usize,
}

/// Keys per step of [`same_key_race`]: the two writers meet at a barrier before each step.
pub(crate) const SAME_KEY_STEP: usize = 1024;

/// Two threads insert the same `keys` at once, in the same order; after each `insert(k)` the
/// same thread checks `contains(k)` and inserts `k` a second time (both must say "seen": the
/// insert happened before them, on this thread). The two meet at a barrier before every
/// [`SAME_KEY_STEP`] keys, so that however busy the machine they work on the same keys at the
/// same time (neither can finish before the other has started, nor run a step ahead); which
/// instructions interleave within a step is the scheduler's (the exact interleavings are the
/// loom models'). A third thread, when `maintain` is given, meets them too and calls it once a
/// step, racing the step's inserts (compactions and snapshots racing the writes): a number of
/// maintenances the test fixes, not the scheduler.
pub(crate) fn same_key_race<F: DedupFilter<u64> + Sync>(
    filter: &F,
    keys: &[u64],
    maintain: Option<&(dyn Fn() + Sync)>,
) -> SameKeyRace {
    let steps = keys.len().div_ceil(SAME_KEY_STEP);
    let step = std::sync::Barrier::new(2 + usize::from(maintain.is_some()));
    let run = || {
        let mut new = Vec::with_capacity(keys.len());
        let (mut false_negatives, mut new_again) = (0, 0);
        for chunk in keys.chunks(SAME_KEY_STEP) {
            step.wait();
            for k in chunk {
                new.push(filter.insert(k));
                false_negatives += usize::from(!filter.contains(k));
                new_again += usize::from(filter.insert(k));
            }
        }
        (new, false_negatives, new_again)
    };
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(run);
        let b = s.spawn(run);
        if let Some(maintain) = maintain {
            s.spawn(|| {
                for _ in 0..steps {
                    step.wait();
                    maintain();
                }
            });
        }
        (a.join().unwrap(), b.join().unwrap())
    });
    let mut race = SameKeyRace {
        false_negatives: a.1 + b.1,
        new_again: a.2 + b.2,
        maintenances: if maintain.is_some() { steps } else { 0 },
        ..SameKeyRace::default()
    };
    for (x, y) in a.0.iter().zip(&b.0) {
        race.neither_new += usize::from(!x && !y);
        race.both_new += usize::from(*x && *y);
    }
    race
}

/// A count that threads wait on without spinning (a mutex and a condition variable), so that
/// a waiter does not take the time slice of the thread it waits for on a busy machine: the
/// saves or unions done, which writers wait for before their last key.
pub(crate) struct Count {
    n: std::sync::Mutex<u64>,
    changed: std::sync::Condvar,
}

impl Count {
    pub(crate) const fn new() -> Self {
        Self {
            n: std::sync::Mutex::new(0),
            changed: std::sync::Condvar::new(),
        }
    }

    /// One more; returns the new count.
    pub(crate) fn add(&self) -> u64 {
        let mut n = self.n.lock().unwrap();
        *n += 1;
        self.changed.notify_all();
        *n
    }

    /// Waits until the count is at least `n`; a hang detector, not a timing: the deadline is
    /// minutes away.
    pub(crate) fn wait_for(&self, n: u64) {
        let guard = self.n.lock().unwrap();
        let (guard, wait) = self
            .changed
            .wait_timeout_while(guard, std::time::Duration::from_secs(300), |count| {
                *count < n
            })
            .unwrap();
        drop(guard);
        assert!(!wait.timed_out(), "waited 5 minutes for a count of {n}");
    }
}

/// An iterator that claims a lower bound it does not reach (the batch operations must treat
/// `size_hint` as a hint).
pub(crate) struct LyingSizeHint<I>(pub(crate) I, pub(crate) usize);

impl<I: Iterator> Iterator for LyingSizeHint<I> {
    type Item = I::Item;
    fn next(&mut self) -> Option<I::Item> {
        self.0.next()
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.1, None)
    }
}

/// Re-signs the payload of a file of one chunk after a test has rewritten it, so that only what
/// the test changed is wrong.
pub(crate) fn reseal(file: &mut [u8]) {
    let header = u32::from_le_bytes(file[12..16].try_into().unwrap()) as usize;
    let end = file.len() - 8;
    let sum = xxhash_rust::xxh3::xxh3_64_with_seed(&file[header..end], 0);
    file[end..].copy_from_slice(&sum.to_le_bytes());
}

/// Runs test `name` of the current test binary again in a child process whose address space
/// is capped at `cap_kib` KiB (`ulimit -v`), so that an allocation wrongly granted cannot take
/// the machine down and the result does not depend on its memory. Returns `true` in the child
/// (the caller then runs the test's body) and `false` in the parent, after the child passed.
pub(crate) fn in_capped_child(name: &str, cap_kib: u64) -> bool {
    const CHILD: &str = "SEEN_TEST_UNDER_ULIMIT";
    if std::env::var_os(CHILD).is_some() {
        return true;
    }
    let exe = std::env::current_exe().unwrap();
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -v {cap_kib} && exec \"$0\" --exact {name} --test-threads 1 --nocapture"
        ))
        .arg(exe)
        .env(CHILD, "1")
        .status()
        .unwrap();
    assert!(
        status.success(),
        "the capped child of {name} failed: {status}"
    );
    false
}
