//! The output, and how far it got: which records the system accepted.
//!
//! A record's key enters the structure (and so the `--state` file) only once its record is
//! written, so a run cut short (a reader that went away, a signal) saves exactly the keys of
//! the records written. For that the output is written here, not through a `BufWriter`: the
//! bytes go to a duplicate of the standard output's descriptor (no line buffering between),
//! and each run of records remembers where it starts, so a write that fails part way says
//! which record it stopped in.

use std::collections::VecDeque;
use std::io::{self, Write};

/// Bytes gathered before they are written.
const BUFFER: usize = 1 << 17;

/// Chunks a run may wait in the buffer: the keys of the records after it wait to be
/// committed, so a buffer that fills slowly (mostly duplicates) is written at least this often.
const MAX_AGE: u64 = 8;

/// A place in the input: the records before it (of earlier chunks, and of chunk `chunk`
/// before `record`) are done.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Cut {
    pub(super) chunk: u64,
    pub(super) record: usize,
}

/// Consecutive records of one chunk, back to back in the buffer.
struct Run {
    /// Where the run starts in the whole output.
    start: u64,
    chunk: u64,
    /// Its first record's index in the chunk.
    first: usize,
}

pub(super) struct Output {
    sink: Box<dyn Write + Send>,
    buf: Vec<u8>,
    /// The output's bytes before `buf[0]`, all accepted by the system.
    written: u64,
    runs: VecDeque<Run>,
    /// Where the records handed over end: past the last chunk handed over whole, or within a
    /// chunk cut short by a failure ([`part_done`](Self::part_done)).
    done: Cut,
    terminator: u8,
    /// Set by a failed write: where the output stops, and why.
    failed: Option<(Cut, io::ErrorKind, String)>,
}

impl Output {
    pub(super) fn stdout(terminator: u8) -> io::Result<Self> {
        Ok(Self {
            sink: sink()?,
            buf: Vec::with_capacity(BUFFER + 4096),
            written: 0,
            runs: VecDeque::new(),
            done: Cut::default(),
            terminator,
            failed: None,
        })
    }

    /// Adds records `first..` of chunk `chunk`: `bytes` holds them with the terminators
    /// between them, and a terminator is added.
    pub(super) fn run(&mut self, chunk: u64, first: usize, bytes: &[u8]) -> io::Result<()> {
        self.runs.push_back(Run {
            start: self.written + self.buf.len() as u64,
            chunk,
            first,
        });
        self.buf.extend_from_slice(bytes);
        self.buf.push(self.terminator);
        if self.buf.len() >= BUFFER {
            self.flush()?;
        }
        Ok(())
    }

    /// Text that is no record (`--count`'s lines): written whole or not at all.
    pub(super) fn text(&mut self, text: &str) -> io::Result<()> {
        self.buf.extend_from_slice(text.as_bytes());
        self.flush()
    }

    /// Chunk `chunk` has been handed over whole.
    pub(super) fn chunk_done(&mut self, chunk: u64) -> io::Result<()> {
        self.done = Cut {
            chunk: chunk + 1,
            record: 0,
        };
        if self
            .runs
            .front()
            .is_some_and(|r| r.chunk + MAX_AGE <= chunk)
        {
            self.flush()?;
        }
        Ok(())
    }

    /// The records of chunk `chunk` before `record` have been handed over, and no more will be
    /// (the run fails at `record`).
    pub(super) fn part_done(&mut self, chunk: u64, record: usize) {
        self.done = Cut { chunk, record };
    }

    /// Writes the buffer. On failure the output stops for good at the record the failure
    /// cut ([`cut`](Self::cut)).
    pub(super) fn flush(&mut self) -> io::Result<()> {
        if let Some((_, kind, why)) = &self.failed {
            return Err(io::Error::new(*kind, why.clone()));
        }
        let mut at = 0;
        while at < self.buf.len() {
            match self.sink.write(&self.buf[at..]) {
                Ok(0) => {
                    return Err(self.fail(at, io::ErrorKind::WriteZero.into()));
                }
                Ok(n) => at += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.fail(at, e)),
            }
        }
        self.written += self.buf.len() as u64;
        self.buf.clear();
        self.runs.clear();
        Ok(())
    }

    /// Records where a write failed after `at` bytes of the buffer were accepted.
    fn fail(&mut self, at: usize, e: io::Error) -> io::Error {
        let end = self.written + at as u64;
        let cut = match self.runs.iter().rposition(|r| r.start <= end) {
            // The records of the run whose terminators were accepted are written.
            Some(i) => {
                let run = &self.runs[i];
                let from = (run.start - self.written) as usize;
                let whole = memchr::memchr_iter(self.terminator, &self.buf[from..at]).count();
                Cut {
                    chunk: run.chunk,
                    record: run.first + whole,
                }
            }
            None => self.unbuffered(),
        };
        self.failed = Some((cut, e.kind(), e.to_string()));
        e
    }

    /// The place before which every record is written: the first record still in the
    /// buffer, else the end of the records handed over.
    fn unbuffered(&self) -> Cut {
        self.runs.front().map_or(self.done, |r| Cut {
            chunk: r.chunk,
            record: r.first,
        })
    }

    /// Where the output got: every record before the cut is written (its bytes accepted by
    /// the system, or it was not to be printed), none after it.
    pub(super) fn cut(&self) -> Cut {
        self.failed
            .as_ref()
            .map_or_else(|| self.unbuffered(), |(cut, ..)| *cut)
    }

    /// The chunks whose records are all written.
    pub(super) fn written_chunks(&self) -> u64 {
        self.cut().chunk
    }

    /// Whether a write failed because the reader went away.
    pub(super) fn broken_pipe(&self) -> bool {
        self.failed
            .as_ref()
            .is_some_and(|(_, kind, _)| *kind == io::ErrorKind::BrokenPipe)
    }
}

/// The standard output without its line buffer: a duplicate of its descriptor, so that what
/// `write` accepted is what the system accepted.
#[cfg(unix)]
fn sink() -> io::Result<Box<dyn Write + Send>> {
    use std::os::fd::AsFd;
    let fd = io::stdout().as_fd().try_clone_to_owned()?;
    Ok(Box::new(std::fs::File::from(fd)))
}

#[cfg(not(unix))]
fn sink() -> io::Result<Box<dyn Write + Send>> {
    Ok(Box::new(io::stdout()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sink that accepts `limit` bytes, then fails with a broken pipe.
    struct Limited {
        taken: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
        limit: usize,
        step: usize,
    }

    impl Write for Limited {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            let mut taken = self.taken.lock().unwrap();
            let room = self.limit - taken.len();
            if room == 0 {
                return Err(io::ErrorKind::BrokenPipe.into());
            }
            let n = buf.len().min(room).min(self.step);
            taken.extend_from_slice(&buf[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn output(limit: usize, step: usize) -> (Output, std::sync::Arc<std::sync::Mutex<Vec<u8>>>) {
        let taken = std::sync::Arc::default();
        let out = Output {
            sink: Box::new(Limited {
                taken: std::sync::Arc::clone(&taken),
                limit,
                step,
            }),
            buf: Vec::new(),
            written: 0,
            runs: VecDeque::new(),
            done: Cut::default(),
            terminator: b'\n',
            failed: None,
        };
        (out, taken)
    }

    /// For every place the writes can stop: the cut names the first record not written
    /// whole, whatever the sizes of the writes.
    #[test]
    fn the_cut_is_the_first_record_not_written_whole() {
        // Chunk 0: records 0..3 printed ("a", "bb", "ccc"), record 3 dropped, record 4 ("dd")
        // printed; chunk 1: records 0 and 1 dropped, 2 ("e") printed.
        let total = "a\nbb\nccc\ndd\ne\n".len();
        for step in [1, 2, 3, 64] {
            for limit in 0..=total {
                let (mut out, taken) = output(limit, step);
                let _ = out.run(0, 0, b"a\nbb\nccc");
                let _ = out.run(0, 4, b"dd");
                let _ = out.chunk_done(0);
                let _ = out.run(1, 2, b"e");
                let _ = out.chunk_done(1);
                let flushed = out.flush();
                let written = taken.lock().unwrap().len();
                assert_eq!(written, limit);
                let expect = match limit {
                    l if l == total => Cut {
                        chunk: 2,
                        record: 0,
                    },
                    0..=1 => Cut {
                        chunk: 0,
                        record: 0,
                    },
                    2..=4 => Cut {
                        chunk: 0,
                        record: 1,
                    },
                    5..=8 => Cut {
                        chunk: 0,
                        record: 2,
                    },
                    // Record 3 is dropped: a cut before the next printed one says as much.
                    9..=11 => Cut {
                        chunk: 0,
                        record: 4,
                    },
                    12..=13 => Cut {
                        chunk: 1,
                        record: 2,
                    },
                    _ => unreachable!(),
                };
                assert_eq!(out.cut(), expect, "limit {limit}, step {step}");
                assert_eq!(flushed.is_err(), limit < total);
                assert_eq!(out.broken_pipe(), limit < total);
            }
        }
    }

    #[test]
    fn nothing_buffered_means_every_chunk_handed_over_is_written() {
        let (mut out, _) = output(1000, 1000);
        out.chunk_done(0).unwrap();
        out.chunk_done(1).unwrap();
        assert_eq!(
            out.cut(),
            Cut {
                chunk: 2,
                record: 0
            }
        );
        out.run(2, 5, b"x").unwrap();
        assert_eq!(
            out.cut(),
            Cut {
                chunk: 2,
                record: 5
            }
        );
        out.flush().unwrap();
        out.chunk_done(2).unwrap();
        assert_eq!(out.written_chunks(), 3);
    }

    /// A run that waits in the buffer while later chunks hold only duplicates is written
    /// after at most MAX_AGE chunks, so the keys after it do not wait forever.
    #[test]
    fn an_old_run_is_written_within_a_few_chunks() {
        let (mut out, taken) = output(1000, 1000);
        out.run(0, 0, b"x").unwrap();
        out.chunk_done(0).unwrap();
        for chunk in 1..MAX_AGE {
            out.chunk_done(chunk).unwrap();
            assert!(taken.lock().unwrap().is_empty());
        }
        out.chunk_done(MAX_AGE).unwrap();
        assert_eq!(&taken.lock().unwrap()[..], b"x\n");
    }
}
