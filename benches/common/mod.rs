//! Helpers shared by the benches.

use std::time::{Duration, Instant};

/// Splits keys `first..first + count` into `threads` contiguous ranges, runs `run(lo, hi)` on
/// each (inline for one thread, on scoped threads otherwise), and returns the wall time.
pub(crate) fn timed_split(
    threads: u64,
    first: u64,
    count: u64,
    run: &(dyn Fn(u64, u64) + Sync),
) -> Duration {
    let start = Instant::now();
    if threads == 1 {
        run(first, first + count);
    } else {
        let per = count / threads;
        std::thread::scope(|s| {
            for t in 0..threads {
                let lo = first + t * per;
                let hi = if t == threads - 1 {
                    first + count
                } else {
                    lo + per
                };
                s.spawn(move || run(lo, hi));
            }
        });
    }
    start.elapsed()
}
