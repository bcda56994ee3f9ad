//! Rotation and clearing: the side work of inserts (counting, clearing a chunk of the spare,
//! reading the clock), the spare's clearing in claimed chunks, and the rotation that publishes
//! the cleared spare as the new current generation.

use super::{LAST_GENERATION, Rotation, WindowedBloomFilter};
use crate::clock::{Clock, as_nanos};
use crate::hash::ItemHasher;
use crate::sync::Ordering::{AcqRel, Acquire, Relaxed, Release, SeqCst};

/// Why a rotation did not happen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum NotRotated {
    /// Another thread holds the rotation lock (it is rotating or saving).
    Busy,
    /// The spare is not clear yet and this caller may not clear it all.
    SpareDirty,
    /// The current generation is the last a file holds, [`LAST_GENERATION`].
    LastGeneration,
}

impl<H: ItemHasher, C: Clock> WindowedBloomFilter<H, C> {
    #[cold]
    #[inline(never)]
    pub(super) fn side_work(&self, count_tick: bool, clear_tick: bool, clock_tick: bool) {
        let rotated = match self.rotation {
            Rotation::AfterInserts(n) if count_tick => {
                let step = 1u64 << self.sample_shift;
                let counted = self.counted.fetch_add(step, Relaxed).saturating_add(step);
                // Spread the spare's clearing over the generation's count ticks, so that it
                // is clear when the count is reached however small the count is against the
                // filter (one chunk per tick would leave a large spare dirty).
                let ticks = (n >> self.sample_shift).max(1);
                for _ in 0..self.chunks.div_ceil(ticks) {
                    if !self.clear_chunk() {
                        break;
                    }
                }
                if counted >= n {
                    self.try_rotate(false).map(|_| 1)
                } else {
                    Ok(0)
                }
            }
            Rotation::Every(_) | Rotation::EveryAligned(_) if clock_tick => {
                self.rotate_if_due(as_nanos(self.clock.now()), false)
            }
            _ => Ok(0),
        };
        if rotated == Err(NotRotated::SpareDirty) || clear_tick {
            self.clear_chunk();
        }
    }

    /// Claims and clears one chunk of the spare; `false` when every chunk is claimed.
    pub(super) fn clear_chunk(&self) -> bool {
        if self.clear_claim.load(Relaxed) & 0xffff_ffff >= self.chunks {
            return false;
        }
        // Acquire: the claim word was reset by the rotation that retired this slot, after it
        // published the new epoch: the slot is no longer live.
        let claim = self.clear_claim.fetch_add(1, AcqRel);
        let (slot, chunk) = ((claim >> 32) as usize, claim & 0xffff_ffff);
        if chunk >= self.chunks {
            return false;
        }
        let blocks = self.sizing.blocks();
        let end = ((chunk + 1) * self.chunk_blocks).min(blocks);
        for block in chunk * self.chunk_blocks..end {
            self.bits
                .word(block as usize * self.stride + slot)
                .store(0, Relaxed);
        }
        // Release: a rotation that sees every chunk finished (Acquire) sees these stores, and
        // so does every insert that reads the epoch it then publishes.
        self.clear_done.fetch_add(1, AcqRel);
        true
    }

    /// Whether the spare of generation `epoch` (slot `epoch + 1`) is all clear.
    pub(super) fn spare_ready(&self, epoch: u64) -> bool {
        self.clear_done.load(Acquire) == (self.slot(epoch + 1) as u64) << 32 | self.chunks
    }

    /// Clears what is left of the spare of generation `epoch`, without the rotation lock:
    /// claims chunks until none is left, then waits for chunks other threads claimed (a few
    /// stores each) to be finished. Returns early if the generation moves on meanwhile.
    pub(super) fn clear_spare(&self, epoch: u64) {
        while !self.spare_ready(epoch) {
            if !self.clear_chunk() {
                if self.epoch.load(Acquire) != epoch {
                    return;
                }
                crate::sync::spin_hint();
            }
        }
    }

    /// Starts generation `epoch + 1` if `epoch` is still current and its spare is clear; the
    /// caller holds the rotation lock. The lock is held for O(1): the clearing happens before it
    /// is taken, so a rotator descheduled while clearing keeps no one from rotating.
    pub(super) fn publish_if_ready(&self, epoch: u64) -> Result<u64, NotRotated> {
        if self.epoch.load(Relaxed) != epoch {
            // Another thread rotated since the caller looked: that rotation stands for this one.
            return Err(NotRotated::Busy);
        }
        if epoch >= LAST_GENERATION {
            return Err(NotRotated::LastGeneration);
        }
        // The twin publishes once every chunk is claimed, finished or not.
        let claimed = twin!(PublishWhenClaimed)
            && self.clear_claim.load(Acquire) & 0xffff_ffff >= self.chunks;
        if !(self.spare_ready(epoch) || claimed) {
            return Err(NotRotated::SpareDirty);
        }
        Ok(self.publish(epoch + 1))
    }

    /// A rotation now: clears the spare first if `force` (without the lock), else only onto a
    /// clear spare; then only tries the rotation lock (a holder makes it `Busy`). Returns the
    /// new generation's number.
    pub(super) fn try_rotate(&self, force: bool) -> Result<u64, NotRotated> {
        let epoch = self.epoch.load(Acquire);
        if force {
            self.clear_spare(epoch);
        }
        let Some(_guard) = self.rotating.try_lock() else {
            return Err(NotRotated::Busy);
        };
        self.publish_if_ready(epoch)
    }

    /// Time mode: rotates if `now` has passed the rotation time; returns how many rotations it
    /// did. `force` catches up every period missed (up to `G`: after that the window holds
    /// nothing older anyway), clearing spares as needed; otherwise one rotation at most, and
    /// only onto a clear spare. Either way the next rotation is then due a period after `now`
    /// (or at the first boundary after it, aligned): rotations never come closer than a period
    /// apart unless periods were missed, and a late one does not shorten the next generation.
    pub(super) fn rotate_if_due(&self, now: u64, force: bool) -> Result<u64, NotRotated> {
        let period = match self.rotation {
            Rotation::Every(p) | Rotation::EveryAligned(p) => as_nanos(p),
            _ => return Ok(0),
        };
        let due = self.next_due.load(Relaxed);
        // `u64::MAX`: the next rotation would be past the year 2554: never.
        if due == u64::MAX || now < due {
            return Ok(0);
        }
        if force {
            self.clear_spare(self.epoch.load(Acquire));
        }
        let Some(_guard) = self.rotating.try_lock() else {
            return Err(NotRotated::Busy);
        };
        let due = self.next_due.load(Relaxed);
        if due == u64::MAX || now < due {
            return Ok(0);
        }
        let missed = (now - due) / period + 1;
        let todo = if force {
            missed.min(u64::from(self.sizing.generations))
        } else {
            1
        };
        let mut rotations = 0;
        while rotations < todo {
            let epoch = self.epoch.load(Relaxed);
            if force {
                // Under the lock, so that two catching-up calls do not both rotate: only when
                // more than one period was missed (the first spare was cleared above).
                self.clear_spare(epoch);
            }
            match self.publish_if_ready(epoch) {
                Ok(_) => rotations += 1,
                Err(e) if rotations == 0 => return Err(e),
                Err(_) => break,
            }
        }
        self.next_due.store(self.first_due(now), Relaxed);
        Ok(rotations)
    }

    /// Makes generation `next` current (its slot is clear) and opens the clearing of the new
    /// spare, the slot of the generation `next` retires. The epoch is stored first: a thread
    /// can claim a chunk of the new spare only after it is out of every lookup.
    pub(super) fn publish(&self, next: u64) -> u64 {
        self.epoch.store(next, SeqCst);
        self.counted.store(0, Relaxed);
        let spare = (self.slot(next + 1) as u64) << 32;
        self.clear_done.store(spare, Release);
        self.clear_claim.store(spare, Release);
        next
    }

    /// Starts a new generation now, whatever the rotation mode: the oldest generation is
    /// forgotten. Returns the new generation's number, or `None` if another thread rotated
    /// after this call began (its rotation then stands for this one) or the filter is at
    /// generation 2^63 - 1, the last (see [Rotation and clearing](Self#rotation-and-clearing)).
    ///
    /// O(1) when the spare is already clear (after [`maintain`](Self::maintain), or once
    /// inserts have cleared it); otherwise this call clears what is left of it first, a
    /// `1/G`-th of the filter at most. It may wait: for a chunk another thread is clearing
    /// (32 stores once that thread runs), and for a save in progress to finish. Never blocks
    /// inserts or lookups.
    ///
    /// # Examples
    ///
    /// ```
    /// let f = seen::WindowedBloomFilter::builder(1000).periods(1).rotate_manually().build()?;
    /// f.insert("a");
    /// assert_eq!(f.rotate(), Some(1));
    /// assert!(f.contains("a")); // one period back: still in the window
    /// f.rotate();
    /// assert!(!f.contains("a")); // two: forgotten
    /// # Ok::<(), seen::Error>(())
    /// ```
    pub fn rotate(&self) -> Option<u64> {
        self.rotate_waiting()
    }

    /// [`rotate`](Self::rotate): clears the spare, then waits for the rotation lock (a save
    /// holds it for the save's length), so that a rotation asked for is not lost.
    pub(super) fn rotate_waiting(&self) -> Option<u64> {
        let epoch = self.epoch.load(Acquire);
        loop {
            if twin!(PublishWhenClaimed) {
                while self.clear_chunk() {}
            } else {
                self.clear_spare(epoch);
            }
            failpoint!("windowed.rotate.lock");
            let _guard = self.rotating.lock();
            match self.publish_if_ready(epoch) {
                Ok(next) => return Some(next),
                // Another thread rotated since this call began (that rotation stands for
                // it), or this is the last generation.
                Err(NotRotated::Busy | NotRotated::LastGeneration) => return None,
                Err(NotRotated::SpareDirty) => {}
            }
        }
    }

    /// The periodic upkeep a service calls from its own timer (the filter starts no thread):
    /// rotates if the clock has passed a rotation time (once per period missed, up to
    /// `periods + 1`, so a filter idle for longer than the window forgets it all), or if the
    /// count is reached,
    /// then clears the spare, so that the next rotation is O(1) on whichever thread does it.
    /// Returns the number of rotations done.
    ///
    /// Cost: O(size / G) when it clears a spare, O(1) otherwise. Never blocks inserts or
    /// lookups; a rotation by another thread meanwhile stands for its own.
    pub fn maintain(&self) -> u64 {
        let rotations = match self.rotation {
            Rotation::Every(_) | Rotation::EveryAligned(_) => {
                self.rotate_if_due(as_nanos(self.clock.now()), true)
            }
            Rotation::AfterInserts(n) if self.counted.load(Relaxed) >= n => {
                self.try_rotate(true).map(|_| 1)
            }
            _ => Ok(0),
        };
        while self.clear_chunk() {}
        rotations.unwrap_or(0)
    }
}
