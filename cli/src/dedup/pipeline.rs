//! The two ways a run moves its chunks: everything on one thread, or a reader thread, workers
//! that prepare and decide, and the calling thread writing in order.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use super::CHUNK;
use super::filter::Filter;
use super::key::Keyer;
use super::output::Cut;
use super::reader::Reader;
use super::sequencer::{Sequencer, Stop, lock};
use super::shard::{Shard, decide_in_shards};
use super::signals::{INTERRUPTED, interrupted};
use super::work::Work;
use crate::Failure;

/// Everything on the calling thread: read, prepare, decide, write.
pub(super) fn one_thread(
    mut reader: Reader,
    keyer: &Keyer,
    filter: &Filter,
    shards: &[Mutex<Shard>],
    sequencer: &Mutex<Sequencer>,
    terminator: u8,
) -> Result<(), Stop> {
    let mut spare = Work::default();
    while let Some(mut work) = reader.next(spare) {
        work.prepare(keyer, filter, terminator, 1);
        // The sequencer is held from the decisions to the write: a signal's thread that ends
        // the run between them would find a chunk decided and not written.
        let mut s = lock(sequencer);
        if s.finished {
            // Interrupted, and ended by the signal's thread.
            return Ok(());
        }
        if INTERRUPTED.load(Ordering::SeqCst) {
            // Ended here, before another chunk is decided (the signal's thread ends a run that
            // waits for input).
            interrupted(&mut s);
        }
        let written = Cut {
            chunk: s.out.written_chunks(),
            record: 0,
        };
        let mut shard = shards[0].lock().unwrap_or_else(PoisonError::into_inner);
        let decided = shard.decide(filter, &work, 0, 1, written);
        drop(shard);
        let _ = work.decided[0].set(decided);
        s.consume(&work)?;
        failpoint!("chunk");
        // A short chunk: the input trickles in (a pipe, a terminal), and the next read may
        // wait: let the output out first.
        if work.bytes.len() < CHUNK / 2 {
            s.flush()?;
        }
        spare = work;
    }
    Ok(())
}

/// Starts a thread of the pipeline; a system that cannot give one (out of memory, a limit on
/// threads) is the run's failure, one line, not a panic.
pub(super) fn spawn(f: impl FnOnce() + Send + 'static) -> Result<(), Stop> {
    std::thread::Builder::new().spawn(f).map(drop).map_err(|e| {
        Stop::Input(Failure(format!(
            "cannot start a thread: {e} (try --threads 1)"
        )))
    })
}

/// Chunks read but not yet written, and whether the reader may add more.
#[derive(Default)]
pub(super) struct Intake {
    pub(super) read: u64,
    pub(super) closed: bool,
}

/// A reader thread, `threads` workers that prepare chunks and decide them in their shards,
/// and the calling thread, which writes them in order. The threads are not joined: after a
/// failure the reader may be blocked on a read that never ends, and the process exits
/// without it.
pub(super) fn pipeline(
    mut reader: Reader,
    keyer: Keyer,
    filter: Arc<Filter>,
    shards: Arc<[Mutex<Shard>]>,
    sequencer: &Mutex<Sequencer>,
    terminator: u8,
    threads: usize,
) -> Result<(), Stop> {
    use crossbeam_channel::{RecvTimeoutError, bounded, unbounded};
    let written = Arc::clone(&lock(sequencer).written);
    // The chunks in flight, read but not yet written: their buffers circulate, so the
    // reader waits when the writer falls behind.
    let in_flight = 4 * threads;
    let (to_workers, for_workers) = unbounded::<Work>();
    let (to_writer, for_writer) = unbounded::<Arc<Work>>();
    let (recycle, recycled) = bounded::<Work>(in_flight);
    for _ in 0..in_flight {
        let _ = recycle.send(Work::default());
    }
    let intake = Arc::new(Mutex::new(Intake::default()));
    let reader_intake = Arc::clone(&intake);
    spawn(move || {
        while let Ok(spare) = recycled.recv() {
            let Some(work) = reader.next(spare) else {
                break;
            };
            let mut intake = reader_intake.lock().unwrap_or_else(PoisonError::into_inner);
            if intake.closed {
                break;
            }
            intake.read += 1;
            drop(intake);
            if to_workers.send(work).is_err() {
                break;
            }
        }
    })?;
    let keyer = Arc::new(keyer);
    for _ in 0..threads {
        let (input, output) = (for_workers.clone(), to_writer.clone());
        let (keyer, filter, shards, written) = (
            Arc::clone(&keyer),
            Arc::clone(&filter),
            Arc::clone(&shards),
            Arc::clone(&written),
        );
        spawn(move || {
            for mut work in input {
                work.prepare(&keyer, &filter, terminator, shards.len());
                decide_in_shards(Arc::new(work), &shards, &filter, &written, |done| {
                    let _ = output.send(done);
                });
            }
        })?;
    }
    drop((for_workers, to_writer));
    let mut pending: BTreeMap<u64, Arc<Work>> = BTreeMap::new();
    let mut next = 0u64;
    // Once interrupted: the number of chunks read, all of which are written before the end.
    let mut last: Option<u64> = None;
    // A failed run reads no more.
    let stop = |why: Stop| {
        intake.lock().unwrap_or_else(PoisonError::into_inner).closed = true;
        why
    };
    loop {
        while let Some(work) = pending.remove(&next) {
            next += 1;
            lock(sequencer).consume(&work).map_err(stop)?;
            // The buffers go back to the reader (a fresh set if a worker still holds these).
            let _ = recycle.try_send(Arc::try_unwrap(work).unwrap_or_default());
        }
        if INTERRUPTED.load(Ordering::SeqCst) && last.is_none() {
            let mut intake = intake.lock().unwrap_or_else(PoisonError::into_inner);
            intake.closed = true;
            last = Some(intake.read);
        }
        if last.is_some_and(|last| next >= last) {
            interrupted(&mut lock(sequencer));
        }
        // Nothing ready: let the output out before waiting (for a stream such as
        // `tail -f log | seen dedup`).
        let work = match for_writer.try_recv() {
            Ok(work) => Ok(work),
            Err(_) => {
                lock(sequencer).flush().map_err(stop)?;
                for_writer.recv_timeout(Duration::from_millis(100))
            }
        };
        match work {
            Ok(work) => {
                pending.insert(work.seq, work);
            }
            Err(RecvTimeoutError::Timeout) => lock(sequencer).draw(),
            Err(RecvTimeoutError::Disconnected) => return Ok(()),
        }
    }
}
