//! The reader: the inputs, in order, cut into chunks of whole records.

use std::fs::File;
use std::io::{self, Read};
use std::path::PathBuf;

use super::CHUNK;
use super::work::Work;

/// Reads the inputs in chunks of whole records.
pub(super) struct Reader {
    pub(super) inputs: Vec<Option<PathBuf>>,
    /// The input being read, and its reader.
    pub(super) at: usize,
    pub(super) open: Option<Box<dyn Read + Send>>,
    /// The bytes read past the last whole record.
    pub(super) carry: Vec<u8>,
    pub(super) terminator: u8,
    pub(super) seq: u64,
    pub(super) done: bool,
}

impl Reader {
    pub(super) fn new(inputs: Vec<Option<PathBuf>>, terminator: u8) -> Self {
        Self {
            inputs,
            at: 0,
            open: None,
            carry: Vec::new(),
            terminator,
            seq: 0,
            done: false,
        }
    }

    /// The next chunk (in `spare`'s buffers), or `None` after the last. A chunk with `failed`
    /// set is the last.
    pub(super) fn next(&mut self, mut spare: Work) -> Option<Work> {
        if self.done {
            return None;
        }
        spare.bytes.clear();
        spare.failed = None;
        spare.bytes.append(&mut self.carry);
        // `spare.bytes[..clean]` holds no terminator (the carry is what followed the last
        // one): a long record is searched once, not again after every read.
        let mut clean = spare.bytes.len();
        while self.at < self.inputs.len() {
            let input = self.at;
            if self.open.is_none() {
                match &self.inputs[input] {
                    None => self.open = Some(Box::new(io::stdin())),
                    Some(path) => match File::open(path) {
                        Ok(file) => self.open = Some(Box::new(file)),
                        Err(e) => return Some(self.fail(spare, e)),
                    },
                }
            }
            let reader = self.open.as_mut().expect("opened above");
            loop {
                let len = spare.bytes.len();
                // At most a chunk at a time: the buffer is zeroed before each read, and a
                // pipe gives 64 KiB a read, so more would cost more than the read.
                let want = CHUNK;
                // A record without an end (`seen dedup < /dev/zero`) grows the buffer until
                // the memory runs out: an error that names it.
                if crate::oom::fallible(|| spare.bytes.try_reserve(want)).is_err() {
                    let why = io::Error::new(
                        io::ErrorKind::OutOfMemory,
                        if len >= 4 * CHUNK {
                            format!(
                                "out of memory: a record of more than {len} bytes (no \
                                 terminator in them)"
                            )
                        } else {
                            "out of memory: no room for the next bytes of input".to_string()
                        },
                    );
                    // The records before it are whole; the partial one is dropped (its
                    // memory with it).
                    let whole = memchr::memrchr(self.terminator, &spare.bytes).map_or(0, |i| i + 1);
                    spare.bytes.truncate(whole);
                    spare.bytes.shrink_to_fit();
                    return Some(self.fail(spare, why));
                }
                spare.bytes.resize(len + want, 0);
                let read = reader.read(&mut spare.bytes[len..]);
                spare.bytes.truncate(len + *read.as_ref().unwrap_or(&0));
                let n = match read {
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Some(self.fail(spare, e)),
                };
                if n == 0 {
                    // The end of this input (its last record may lack a terminator).
                    self.open = None;
                    self.at += 1;
                    if spare.bytes.is_empty() {
                        break;
                    }
                    return Some(self.chunk(spare, input));
                }
                // A full chunk, or a short read (a pipe that has nothing more yet): pass on
                // the whole records read so far, keep the rest.
                if spare.bytes.len() >= CHUNK || n < want {
                    match memchr::memrchr(self.terminator, &spare.bytes[clean..]) {
                        Some(i) => {
                            let last = clean + i;
                            self.carry.extend_from_slice(&spare.bytes[last + 1..]);
                            spare.bytes.truncate(last + 1);
                            return Some(self.chunk(spare, input));
                        }
                        None => clean = spare.bytes.len(),
                    }
                }
            }
        }
        self.done = true;
        None
    }

    pub(super) fn chunk(&mut self, mut work: Work, input: usize) -> Work {
        work.seq = self.seq;
        work.input = input;
        self.seq += 1;
        work
    }

    /// A chunk that reports `e` after the records read before it.
    pub(super) fn fail(&mut self, mut work: Work, e: io::Error) -> Work {
        work.failed = Some(e.to_string());
        self.done = true;
        let input = self.at;
        self.chunk(work, input)
    }
}
