//! An at-least-once queue consumer that drops redelivered messages with an `OverwriteMap`.
//!
//! ```sh
//! cargo run --release --example at_least_once
//! ```
//!
//! The story: a queue (think NSQ, Kafka, SQS) delivers every message at least once. Some
//! messages come twice (a redelivery after a lost acknowledgement), always within `WINDOW`
//! deliveries of the first copy. Four consumer threads share one map, and handle each delivery
//! with a claim (see `handle` below):
//!
//! - `map.claim(&id)` is `None` for a message the map remembers: certainly seen, so acknowledge
//!   and drop it. Otherwise it is a guard that keeps the id remembered while the message is
//!   processed.
//! - Processing succeeds: `claim.commit()`, and the id stays remembered.
//! - Processing fails now and then: the `?` returns the error, which drops the claim, which
//!   forgets the id (only if the map still holds it); then the consumer requeues the message, so
//!   that the retry is not taken for a duplicate. A panic while processing would do the same.
//!
//! The map errs the safe way: it can forget a message (and let a duplicate through) but never
//! drops a message it has not seen. So at the end every message has been processed successfully
//! at least once, and the duplicates that got through are about what the sizing predicts:
//! each redelivery arrives within `WINDOW` insertions, where the map remembers with
//! probability at least `REMEMBER`.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::AtomicU32;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{Relaxed, SeqCst};

use seen::OverwriteMap;
use seen::hash::{ItemHasher, StableHasher};
use seen::sizing::overwrite_buckets;

const MESSAGES: u64 = 200_000;
const CONSUMERS: usize = 4;
/// Probability that the queue redelivers a message a second time.
const REDELIVERY: f64 = 0.2;
/// Probability that processing a delivery fails (its claim, dropped, forgets it; the consumer
/// requeues it).
const FAILURE: f64 = 0.05;
/// A redelivery comes at most this many deliveries after the first copy.
const WINDOW: u64 = 20_000;
/// How surely the map should still remember a message when its redelivery comes.
const REMEMBER: f64 = 0.99;

/// A deterministic pseudo-random stream, so that every run tells the same story: the crate's
/// stable hash of a counter, seeded.
struct Rng {
    hasher: StableHasher,
    counter: u64,
}

impl Rng {
    fn new(seed: u64) -> Self {
        Self {
            hasher: StableHasher::with_seed(seed),
            counter: 0,
        }
    }

    fn next(&mut self) -> u64 {
        self.counter += 1;
        self.hasher.hash_item(&self.counter).h1
    }

    fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
}

/// Processing a message failed; the message must be delivered again.
#[derive(Debug)]
struct ProcessingFailed;

/// What became of one delivery.
enum Handled {
    Processed,
    Duplicate,
}

/// Handles one delivery of message `id`: the pattern to copy.
///
/// On `Err`, the claim has already been dropped (by the `?`), so the id is forgotten before the
/// caller hands the message back to the queue: the redelivery gets through.
fn handle(
    map: &OverwriteMap,
    id: u64,
    process: impl FnOnce(u64) -> Result<(), ProcessingFailed>,
) -> Result<Handled, ProcessingFailed> {
    let Some(claim) = map.claim(&id) else {
        return Ok(Handled::Duplicate); // certainly seen: acknowledge, drop
    };
    process(id)?; // failed: `claim` is dropped here, which forgets `id`
    claim.commit(); // processed: keep `id` remembered
    Ok(Handled::Processed)
}

/// The queue: a precomputed delivery order (each message once, plus redeliveries placed within
/// `WINDOW` positions after the first copy), and the requeued retries, served first.
struct Queue {
    deliveries: Vec<u64>,
    next: AtomicU64,
    retries: Mutex<VecDeque<u64>>,
    in_flight: AtomicU64,
    redeliveries: u64,
}

impl Queue {
    fn new(rng: &mut Rng) -> Self {
        let mut slots: Vec<Vec<u64>> = vec![Vec::new(); (MESSAGES + WINDOW) as usize];
        let mut redeliveries = 0;
        for id in 0..MESSAGES {
            slots[id as usize].push(id);
            if rng.chance(REDELIVERY) {
                let later = id + 1 + rng.next() % (WINDOW / 2);
                slots[later as usize].push(id);
                redeliveries += 1;
            }
        }
        Self {
            deliveries: slots.into_iter().flatten().collect(),
            next: AtomicU64::new(0),
            retries: Mutex::new(VecDeque::new()),
            in_flight: AtomicU64::new(0),
            redeliveries,
        }
    }

    /// The next delivery, counted in flight until the consumer is done with it.
    fn pop(&self) -> Option<u64> {
        self.in_flight.fetch_add(1, SeqCst);
        let retry = self.retries.lock().unwrap().pop_front();
        let id = retry.or_else(|| {
            let at = self.next.fetch_add(1, Relaxed) as usize;
            self.deliveries.get(at).copied()
        });
        if id.is_none() {
            self.in_flight.fetch_sub(1, SeqCst);
        }
        id
    }

    /// No first deliveries left and no retries waiting.
    fn is_drained(&self) -> bool {
        self.retries.lock().unwrap().is_empty()
            && self.next.load(Relaxed) as usize >= self.deliveries.len()
    }

    fn requeue(&self, id: u64) {
        self.retries.lock().unwrap().push_back(id);
    }
}

fn main() -> Result<(), seen::Error> {
    let mut rng = Rng::new(42);
    let queue = Queue::new(&mut rng);
    // A redelivery is at most WINDOW / 2 queue positions late; retries and other consumers'
    // inserts can stretch that in insertions, so size for the full WINDOW.
    let buckets = overwrite_buckets(WINDOW, REMEMBER)?;
    let map = OverwriteMap::with_buckets(buckets)?;

    let successes: Vec<AtomicU32> = (0..MESSAGES).map(|_| AtomicU32::new(0)).collect();
    let dropped = AtomicU64::new(0);
    let failures = AtomicU64::new(0);

    std::thread::scope(|s| {
        for consumer in 0..CONSUMERS {
            let (queue, map, successes) = (&queue, &map, &successes);
            let (dropped, failures) = (&dropped, &failures);
            s.spawn(move || {
                let mut rng = Rng::new(1000 + consumer as u64);
                loop {
                    let Some(id) = queue.pop() else {
                        // Empty for now; a consumer still holding a message may requeue it.
                        if queue.in_flight.load(SeqCst) == 0 && queue.is_drained() {
                            break;
                        }
                        std::thread::yield_now();
                        continue;
                    };
                    let process = |id: u64| {
                        if rng.chance(FAILURE) {
                            return Err(ProcessingFailed);
                        }
                        successes[id as usize].fetch_add(1, Relaxed);
                        Ok(())
                    };
                    match handle(map, id, process) {
                        Ok(Handled::Processed) => {}
                        Ok(Handled::Duplicate) => {
                            dropped.fetch_add(1, Relaxed);
                        }
                        Err(ProcessingFailed) => {
                            // The claim is gone and the id forgotten: hand the message back.
                            failures.fetch_add(1, Relaxed);
                            queue.requeue(id);
                        }
                    }
                    queue.in_flight.fetch_sub(1, SeqCst);
                }
            });
        }
    });

    let processed_twice: u64 = successes
        .iter()
        .map(|n| u64::from(n.load(Relaxed).saturating_sub(1)))
        .sum();
    let never = successes.iter().filter(|n| n.load(Relaxed) == 0).count();
    // Each redelivery gets through only if the map forgot the first copy: probability at most
    // 1 - REMEMBER. Allow five standard deviations of that binomial above its mean.
    let mean = queue.redeliveries as f64 * (1.0 - REMEMBER);
    let bound = mean + 5.0 * mean.sqrt() + 5.0;

    println!("messages                      {MESSAGES}");
    println!("redeliveries by the queue     {}", queue.redeliveries);
    println!("processing failures (retried) {}", failures.load(Relaxed));
    println!("duplicates dropped            {}", dropped.load(Relaxed));
    println!("messages never processed      {never}");
    println!(
        "duplicates processed          {processed_twice} (sizing predicts at most {mean:.0} on \
         average; bound {bound:.0})"
    );
    println!(
        "map                           {buckets} buckets, {:.1} MiB",
        map.memory_bytes() as f64 / f64::from(1 << 20)
    );

    assert_eq!(
        never, 0,
        "a message was never processed: the map dropped a new message"
    );
    assert!(
        processed_twice as f64 <= bound,
        "{processed_twice} duplicates processed, more than the sizing allows ({bound:.0})"
    );
    Ok(())
}
