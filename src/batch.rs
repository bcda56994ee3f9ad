//! What every batch operation (`insert_many`, `contains_many`, ...) shares: hashing items in
//! groups, so that a structure can compute a group's slots, touch them all (their cache misses
//! overlap), then answer item by item.

use crate::hash::Hash128;

/// Items per group: enough misses in flight to fill the processor's miss buffers (10 to 16 on
/// current x86 and Arm cores), few enough that the group's state stays in registers and L1.
pub(crate) const GROUP: usize = 16;

/// Tables below this size take the plain loop: mostly in the caches (and in the TLB's reach),
/// they have few misses to overlap, and grouping cost 1.3-2x a loop of single calls at 1M items
/// (a 1.5 MB filter), while it saves 1.2-1.7x at 10M and 100M ([measured](crate::docs::benchmarks)).
/// The same size as [`crate::os::HUGE_PAGE_MIN_BYTES`], and for the same reason.
pub(crate) const GROUP_MIN_BYTES: u64 = crate::os::HUGE_PAGE_MIN_BYTES as u64;

/// Reserves room in `out` for the results of an iterator with this `size_hint`, as a hint only:
/// a `size_hint` may be wrong (the iterator contract lets only memory safety rely on it), and a
/// lower bound far past what the iterator yields must neither panic (`usize::MAX`: capacity
/// overflow) nor abort the process (a failed allocation). If the reservation fails, the pushes
/// grow the vector as they go.
#[inline]
pub(crate) fn reserve_results(out: &mut Vec<bool>, size_hint: (usize, Option<usize>)) {
    let _ = out.try_reserve(size_hint.0);
}

/// The frame of every public batch method: reserves room for `hashes`' results (a hint, see
/// [`reserve_results`]), lets `run` append one result per hash to `out`, and returns how many
/// of the appended results are `true`.
#[inline]
pub(crate) fn append_results<I: Iterator<Item = Hash128>>(
    out: &mut Vec<bool>,
    hashes: I,
    run: impl FnOnce(I, &mut Vec<bool>),
) -> usize {
    let done: Result<usize, core::convert::Infallible> =
        try_append_results(out, hashes, |hashes, out| {
            run(hashes, out);
            Ok(())
        });
    let Ok(count) = done;
    count
}

/// [`append_results`] for a batch that can fail: `run`'s error is returned, and the results it
/// appended before failing stay in `out`.
#[inline]
pub(crate) fn try_append_results<I: Iterator<Item = Hash128>, E>(
    out: &mut Vec<bool>,
    hashes: I,
    run: impl FnOnce(I, &mut Vec<bool>) -> Result<(), E>,
) -> Result<usize, E> {
    reserve_results(out, hashes.size_hint());
    let start = out.len();
    run(hashes, out)?;
    Ok(out[start..].iter().filter(|&&result| result).count())
}

/// Runs `f` on the hashes in groups of [`GROUP`] (the last may be shorter, never empty).
#[inline]
pub(crate) fn for_each_group(hashes: impl Iterator<Item = Hash128>, mut f: impl FnMut(&[Hash128])) {
    let done: Result<(), core::convert::Infallible> = try_for_each_group(hashes, |group| {
        f(group);
        Ok(())
    });
    let Ok(()) = done;
}

/// [`for_each_group`] that stops at the first `Err` of `f` and returns it (the group that
/// failed, and the hashes pulled into it, are not handed to `f` again; no later group is
/// pulled from `hashes`).
#[inline]
pub(crate) fn try_for_each_group<E>(
    mut hashes: impl Iterator<Item = Hash128>,
    mut f: impl FnMut(&[Hash128]) -> Result<(), E>,
) -> Result<(), E> {
    let mut group = [Hash128 { h1: 0, h2: 0 }; GROUP];
    loop {
        let mut len = 0;
        for (slot, hash) in group.iter_mut().zip(&mut hashes) {
            *slot = hash;
            len += 1;
        }
        if len == 0 {
            return Ok(());
        }
        f(&group[..len])?;
        if len < GROUP {
            return Ok(());
        }
    }
}

#[cfg(all(test, not(seen_loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_failing_group_stops_the_batch_and_pulls_no_further_group() {
        let mut pulled = 0;
        let hashes = (0..100u64).map(|i| {
            pulled += 1;
            Hash128 { h1: i, h2: i }
        });
        let mut handed = Vec::new();
        let result = try_for_each_group(hashes, |g| {
            handed.push(g[0].h1);
            if g[0].h1 == GROUP as u64 {
                Err(g.len())
            } else {
                Ok(())
            }
        });
        assert_eq!(result, Err(GROUP));
        assert_eq!(handed, [0, GROUP as u64]);
        assert_eq!(pulled, 2 * GROUP);
    }

    #[test]
    fn groups_cover_every_hash_once_in_order() {
        for len in [0usize, 1, 15, 16, 17, 32, 33, 100] {
            let hashes = (0..len as u64).map(|i| Hash128 { h1: i, h2: !i });
            let mut seen = Vec::new();
            let mut sizes = Vec::new();
            for_each_group(hashes, |g| {
                sizes.push(g.len());
                seen.extend(g.iter().map(|h| h.h1));
            });
            assert_eq!(seen, (0..len as u64).collect::<Vec<_>>());
            assert!(sizes.iter().all(|&s| (1..=GROUP).contains(&s)), "{sizes:?}");
            assert_eq!(sizes.len(), len.div_ceil(GROUP));
        }
    }
}
