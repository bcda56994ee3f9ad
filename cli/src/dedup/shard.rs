//! The shards that decide: each decides its keys' records in input order, under its mutex, and
//! commits the keys of the records written (with `--state`) into the structure.

use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasherDefault;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use seen::hash::Hash128;

use super::exact::ExactSet;
use super::filter::{Filter, now};
use super::output::Cut;
use super::pending::{Entry, Pending, Spread};
use super::work::{Decided, Work};

/// A shard: decides its records chunk after chunk, in input order, under its mutex.
#[derive(Default)]
pub(super) struct Shard {
    /// The next chunk to decide, and the chunks prepared ahead of it.
    pub(super) next: u64,
    pub(super) ready: BTreeMap<u64, Arc<Work>>,
    /// The keys found new whose records are not written yet.
    pub(super) pending: Pending,
    /// The exact set's keys of this shard (their fingerprints).
    pub(super) exact: ExactSet,
    /// With --remember: the last pending key of each bucket that has one, and its tag (its
    /// record's place).
    pub(super) buckets: HashMap<u64, (Hash128, u64), BuildHasherDefault<Spread>>,
    /// With --time-field (one shard): the latest time seen, where the decisions are.
    pub(super) time: u64,
    /// The windowed filter's period last maintained (with --time-field: the period the
    /// commits have rotated it to, behind `time`'s).
    pub(super) period_index: u64,
    /// Whether keys wait to be committed until their records are written (with `--state`).
    pub(super) deferred: bool,
    /// With --time-field: how far ahead of the wall clock a record's time may be.
    pub(super) ahead: Ahead,
    /// This shard's records of the chunk being decided, and scratch space for lookups.
    pub(super) mine: Vec<usize>,
    pub(super) hits: Vec<bool>,
    pub(super) tags: Vec<u64>,
    /// A shared filter's batch: this shard's keys of the chunk being decided.
    pub(super) batch: Vec<Hash128>,
}

impl Shard {
    /// Decides the records of `work` that are this shard's (`s` of `shards`), in order, after
    /// committing the keys of the records written before `written`.
    pub(super) fn decide(
        &mut self,
        filter: &Filter,
        work: &Work,
        s: usize,
        shards: usize,
        written: Cut,
    ) -> Decided {
        // The exact set and the shared filter take no --state: they are never deferred.
        if !self.deferred || matches!(filter, Filter::Exact | Filter::Shared(_)) {
            return self.decide_at_once(filter, work, s, shards);
        }
        let mut decided = Decided::default();
        if let Err(why) = self.commit(filter, written) {
            decided.failed = Some((0, why));
            return decided;
        }
        let mut mine = std::mem::take(&mut self.mine);
        let mut hits = std::mem::take(&mut self.hits);
        let mut tags = std::mem::take(&mut self.tags);
        mine.clear();
        mine.extend((0..work.ends.len()).filter(|&i| work.shard(i, shards) == Some(s)));
        hits.clear();
        tags.clear();
        let hashes = mine.iter().map(|&i| work.hashes[i]);
        // A windowed filter's `G`: a pending key is found only while its tag is within
        // `G - 1` generations (or periods) of the record's. Other structures keep every key.
        let mut window: Option<u64> = None;
        match filter {
            // Decided at once (above).
            Filter::Exact | Filter::Shared(_) => {}
            Filter::Bloom(f) => {
                f.contains_many_hashes(hashes, &mut hits);
            }
            Filter::Remember(m) => {
                m.contains_many_hashes(hashes, &mut hits);
            }
            Filter::Growing(f) => {
                f.contains_many_hashes(hashes, &mut hits);
            }
            Filter::Windowed {
                filter,
                clock,
                period,
                from_records: false,
            } => {
                // The wall clock, read once a chunk: the filter rotates now. A key is tagged
                // with the generation it was found new in.
                let period = period.as_nanos() as u64;
                let wall = now().as_nanos() as u64;
                clock.set(Duration::from_nanos(wall));
                if wall / period != self.period_index {
                    self.period_index = wall / period;
                    filter.maintain();
                }
                let generation = filter.generation();
                window = Some(u64::from(filter.generations()));
                filter.contains_many_hashes(hashes, &mut hits);
                tags.resize(hits.len(), generation);
            }
            Filter::Windowed {
                filter,
                period,
                from_records: true,
                ..
            } => {
                // The records' times: the filter rotates as their keys are committed (in
                // [`commit`](Self::commit)), so a lookup asks for the generations that will
                // be live at the record's period, `self.period_index` being the filter's. A
                // key is tagged with its record's period.
                let period = period.as_nanos() as u64;
                let g = u64::from(filter.generations());
                let span = period.saturating_mul(g - 1);
                // A record dated past the wall clock by more than the tolerance: refused, or
                // held there (`--future`).
                let wall = now().as_nanos() as u64;
                let mut refused = None;
                for (at, &i) in mine.iter().enumerate() {
                    if self
                        .advance(work.times[i], wall, span, &mut decided)
                        .is_none()
                    {
                        decided.failed = Some((i, self.ahead.too_far(work.times[i], wall)));
                        refused = Some(at);
                        break;
                    }
                    let at_period = self.time / period;
                    let ahead = at_period.saturating_sub(self.period_index);
                    let since = (filter.generation() + ahead + 1).saturating_sub(g);
                    hits.push(filter.contains_hash_since(work.hashes[i], since));
                    tags.push(at_period);
                }
                if let Some(at) = refused {
                    mine.truncate(at);
                }
                window = Some(g);
            }
        }
        tags.resize(hits.len(), 0);
        let map = match filter {
            Filter::Remember(m) => Some(m),
            _ => None,
        };
        decided
            .new
            .extend(mine.iter().zip(&hits).zip(&tags).map(|((&i, &hit), &tag)| {
                let hash = work.hashes[i];
                let live = |pending: u64| window.is_none_or(|g| tag - pending < g);
                let new = match map {
                    // A bucket holds the last key that went there: a pending key has evicted
                    // the one the map holds in its bucket, so the decisions are those of a
                    // map that took every key at once, however late the commits come.
                    Some(m) => match self.buckets.get(&bucket(m, hash)) {
                        Some(&(last, place))
                            if self.pending.is_pending(place >> 32, place as u32 as usize) =>
                        {
                            last.h2.max(1) != hash.h2.max(1)
                        }
                        _ => !hit,
                    },
                    None => !hit && !self.pending.get(hash).is_some_and(live),
                };
                if new {
                    match map {
                        Some(m) => {
                            // The record's place as its tag: the bucket's entry is this one's.
                            let place = work.seq << 32 | i as u64;
                            self.pending.add(work.seq, i, hash, place);
                            self.buckets.insert(bucket(m, hash), (hash, place));
                        }
                        None => self.pending.add(work.seq, i, hash, tag),
                    }
                }
                new
            }));
        self.mine = mine;
        self.hits = hits;
        self.tags = tags;
        decided
    }

    /// [`decide`](Self::decide) without a `--state`: each key goes into the structure as it
    /// is decided (one access instead of a lookup now and an insert later), since no file
    /// will show which keys the structure holds.
    pub(super) fn decide_at_once(
        &mut self,
        filter: &Filter,
        work: &Work,
        s: usize,
        shards: usize,
    ) -> Decided {
        let mine = (0..work.ends.len()).filter(|&i| work.shard(i, shards) == Some(s));
        let mut decided = Decided::default();
        let new = &mut decided.new;
        match filter {
            Filter::Exact => {
                let mut mine = mine;
                // A growth the system refuses is the set's error, which names --exact.
                let exact = &mut self.exact;
                if let Err(e) = crate::oom::fallible(|| {
                    exact.insert_many(mine.clone().map(|i| work.hashes[i]), new)
                }) {
                    let i = mine
                        .nth(new.len())
                        .expect("the record that failed is this shard's");
                    decided.failed = Some((i, e.to_string()));
                }
            }
            Filter::Bloom(f) => {
                f.insert_many_hashes(mine.map(|i| work.hashes[i]), new);
            }
            Filter::Remember(m) => {
                m.insert_many_hashes(mine.map(|i| work.hashes[i]), new);
            }
            Filter::Shared(f) => match f.records_clock() {
                None => {
                    // One batch a chunk: two round trips for all of this shard's records. A
                    // failure decides none of them (whether the server inserted their keys is
                    // unknown).
                    let mut mine = mine;
                    let first = mine.next();
                    self.batch.clear();
                    self.batch
                        .extend(first.into_iter().chain(mine).map(|i| work.hashes[i]));
                    if let Some(first) = first
                        && let Err(why) = f.insert_many_hashes(&self.batch, new)
                    {
                        decided.failed = Some((first, why));
                    }
                }
                Some((clock, period, span)) => {
                    // --time-field (one shard): the records' times move the filter's clock,
                    // never back, as the local window's; one batch per run of records in one
                    // period (one a chunk but where a period ends), sent with the clock at
                    // its latest record's time.
                    let wall = now().as_nanos() as u64;
                    self.batch.clear();
                    // The batch's first record, and the time it is sent at.
                    let mut open: Option<(usize, u64)> = None;
                    let send = |batch: &mut Vec<Hash128>,
                                open: Option<(usize, u64)>,
                                decided: &mut Decided|
                     -> bool {
                        let Some((first, at)) = open else {
                            return true;
                        };
                        clock.set(Duration::from_nanos(at));
                        let sent = f.insert_many_hashes(batch, &mut decided.new);
                        batch.clear();
                        sent.map_err(|why| decided.failed = Some((first, why)))
                            .is_ok()
                    };
                    for i in mine {
                        if self
                            .advance(work.times[i], wall, span, &mut decided)
                            .is_none()
                        {
                            if send(&mut self.batch, open.take(), &mut decided) {
                                let why = self.ahead.too_far(work.times[i], wall);
                                // No later chunk sends keys of records not written.
                                f.fail(&why);
                                decided.failed = Some((i, why));
                            }
                            break;
                        }
                        if let Some((_, at)) = open
                            && at / period != self.time / period
                            && !send(&mut self.batch, open.take(), &mut decided)
                        {
                            break;
                        }
                        open = Some((open.map_or(i, |(first, _)| first), self.time));
                        self.batch.push(work.hashes[i]);
                    }
                    if decided.failed.is_none() {
                        send(&mut self.batch, open, &mut decided);
                    }
                }
            },
            Filter::Growing(f) => {
                // In groups: a group's blocks are read ahead, so their misses overlap; the
                // results are those of a loop of `insert_hash`, up to a growth that fails.
                let mut mine = mine;
                if let Err(e) = crate::oom::fallible(|| {
                    f.insert_many_hashes(mine.clone().map(|i| work.hashes[i]), new)
                }) {
                    let i = mine
                        .nth(new.len())
                        .expect("the record that failed is this shard's");
                    decided.failed = Some((i, format!("cannot insert: {e}")));
                }
            }
            Filter::Windowed {
                filter,
                clock,
                period,
                from_records,
            } => {
                let period = period.as_nanos() as u64;
                let span = period.saturating_mul(u64::from(filter.generations() - 1));
                let tick = |t: u64, shard: &mut Self| {
                    clock.set(Duration::from_nanos(t));
                    if t / period != shard.period_index {
                        shard.period_index = t / period;
                        filter.maintain();
                    }
                };
                let wall = now().as_nanos() as u64;
                if !*from_records {
                    tick(wall, self);
                }
                for i in mine {
                    if *from_records {
                        match self.advance(work.times[i], wall, span, &mut decided) {
                            None => {
                                decided.failed = Some((i, self.ahead.too_far(work.times[i], wall)));
                                break;
                            }
                            Some(true) => tick(self.time, self),
                            Some(false) => {}
                        }
                    }
                    decided.new.push(filter.insert_hash(work.hashes[i]));
                }
            }
        }
        decided
    }

    /// Moves the records' clock to `t`, never back: `Some(true)` when it moved on,
    /// `Some(false)` for a record older than the clock (counted late, and very late when older
    /// by more than `span`, the window). A time more than the tolerance after `wall` (the wall
    /// clock) is held at the tolerance with `--future clamp` (and counted), else refused
    /// (`None`): it would move the clock ahead of the present, whose keys the window would then
    /// forget early.
    pub(super) fn advance(
        &mut self,
        t: u64,
        wall: u64,
        span: u64,
        decided: &mut Decided,
    ) -> Option<bool> {
        let latest = wall.saturating_add(self.ahead.tolerance);
        let t = if t <= latest {
            t
        } else if self.ahead.clamp {
            decided.clamped += 1;
            latest
        } else {
            return None;
        };
        if t >= self.time {
            self.time = t;
            return Some(true);
        }
        decided.late += 1;
        decided.very_late += u64::from(self.time - t > span);
        Some(false)
    }

    /// Inserts into the structure the pending keys of the records before `cut`, in input
    /// order. A windowed filter on the records' times rotates to each key's period first; a
    /// key whose generation (or period) left the window meanwhile is not inserted.
    pub(super) fn commit(&mut self, filter: &Filter, cut: Cut) -> Result<(), String> {
        let period_index = &mut self.period_index;
        let scratch = &mut self.hits;
        self.pending.commit(cut, |run| {
            match filter {
                // Never pending: decided at once.
                Filter::Exact | Filter::Shared(_) => {}
                Filter::Bloom(f) => {
                    scratch.clear();
                    f.insert_many_hashes(run.iter().map(|e| e.hash), scratch);
                }
                Filter::Remember(m) => {
                    scratch.clear();
                    m.insert_many_hashes(run.iter().map(|e| e.hash), scratch);
                }
                Filter::Growing(f) => {
                    // Growing allocates a layer: a refusal is the filter's error, at the key
                    // after the last one with a result.
                    scratch.clear();
                    crate::oom::fallible(|| {
                        f.insert_many_hashes(run.iter().map(|e| e.hash), scratch)
                    })
                    .map_err(|why| (scratch.len(), format!("cannot insert: {why}")))?;
                }
                Filter::Windowed {
                    filter,
                    clock,
                    period,
                    from_records,
                } => {
                    let g = u64::from(filter.generations());
                    for &Entry { hash, tag, .. } in run {
                        if *from_records {
                            if tag > *period_index {
                                // The start of the key's period: the rotations up to it are
                                // due.
                                clock.set(Duration::from_nanos(
                                    tag.saturating_mul(period.as_nanos() as u64),
                                ));
                                filter.maintain();
                                *period_index = tag;
                            }
                            if *period_index - tag < g {
                                filter.insert_hash(hash);
                            }
                        } else if filter.generation() - tag < g {
                            filter.insert_hash(hash);
                        }
                    }
                }
            }
            Ok(())
        })?;
        // The buckets' entries of records committed: the map holds them (or later keys).
        if self.buckets.len() > 2 * self.pending.live() + 4096 {
            let pending = &self.pending;
            self.buckets.retain(|_, &mut (_, place)| {
                pending.is_pending(place >> 32, place as u32 as usize)
            });
        }
        Ok(())
    }
}

/// The overwrite map's bucket of a key (the map's own: the high half of `h1 × buckets`).
pub(super) fn bucket(map: &seen::OverwriteMap, hash: Hash128) -> u64 {
    ((u128::from(hash.h1) * map.buckets() as u128) >> 64) as u64
}

/// With `--time-field`: how far a record's time may run ahead of the wall clock
/// (`--future-tolerance`, in nanoseconds), and whether a record past that is held there
/// (`--future clamp`) rather than refused.
#[derive(Clone, Copy, Default)]
pub(super) struct Ahead {
    pub(super) tolerance: u64,
    pub(super) clamp: bool,
}

impl Ahead {
    /// Why a record dated `t` is refused, the wall clock at `wall`.
    pub(super) fn too_far(self, t: u64, wall: u64) -> String {
        let ahead = Duration::from_nanos(t.saturating_sub(wall));
        format!(
            "its time is {} after the wall clock, more than --future-tolerance {} (it would \
             move the window's clock ahead of the present, which the window would then forget \
             early): --future clamp decides such records at the wall clock plus the tolerance",
            crate::units::format_approximate(ahead),
            crate::units::format_duration(Duration::from_nanos(self.tolerance))
        )
    }
}

/// Set when the run is ending: the shards decide no more chunks (their keys could not be
/// committed).
pub(super) static STOPPING: AtomicBool = AtomicBool::new(false);

/// Hands a prepared chunk to every shard; each decides what is ready in order. Returns the
/// chunks this call completed (all shards decided), for the writer.
pub(super) fn decide_in_shards(
    work: Arc<Work>,
    shards: &[Mutex<Shard>],
    filter: &Filter,
    written: &AtomicU64,
    mut done: impl FnMut(Arc<Work>),
) {
    let n = shards.len();
    for (s, shard) in shards.iter().enumerate() {
        let mut shard = shard.lock().unwrap_or_else(PoisonError::into_inner);
        shard.ready.insert(work.seq, Arc::clone(&work));
        loop {
            if STOPPING.load(Ordering::SeqCst) {
                return;
            }
            let next = shard.next;
            let Some(ready) = shard.ready.remove(&next) else {
                break;
            };
            shard.next += 1;
            let cut = Cut {
                chunk: written.load(Ordering::Acquire),
                record: 0,
            };
            let decided = shard.decide(filter, &ready, s, n, cut);
            let _ = ready.decided[s].set(decided);
            if ready.undecided.fetch_sub(1, Ordering::AcqRel) == 1 {
                done(ready);
            }
        }
    }
}
