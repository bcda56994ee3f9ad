//! What the fuzz targets share: the loader targets' property, written once for every file kind
//! ([`check_loader`]), and the checksum repair that lets the fuzzer's mutations reach past the
//! checksums ([`repair_checksums`]).

use std::io::Read;
use std::path::Path;

use seen::hash::StableHasher;
use seen::{
    AtomicBloomFilter, Error, ExactOverwriteMap, GrowingBloomFilter, OverwriteMap,
    SemiConcurrentBloomFilter, WindowedBloomFilter,
};
use xxhash_rust::xxh3::{xxh3_64, xxh3_64_with_seed};

/// A kind of file and the structure that loads it: every entry point that takes a file's
/// bytes, and what a loaded structure must survive.
pub trait Loader: Sized + std::fmt::Debug {
    /// `read_from`.
    fn read_from(input: impl Read) -> Result<Self, Error>;
    /// `read_from_trusting_hasher` with the default hasher at `seed`.
    fn read_trusting(input: impl Read, seed: u64) -> Result<Self, Error>;
    /// `import_chunks`.
    fn import_chunks(pieces: Vec<&[u8]>) -> Result<Self, Error>;
    /// `load` of a file.
    fn load(path: &Path) -> Result<Self, Error>;
    /// `Deserialize` (the `serde` feature) from a byte string, or from a sequence of bytes.
    fn deserialize(bytes: &[u8], as_sequence: bool) -> Result<Self, serde::de::value::Error>;
    /// `write_to`.
    fn write_to(&self, out: &mut Vec<u8>) -> Result<(), Error>;
    /// Lookups and inserts (and the structure's own maintenance), none of which may panic.
    fn exercise(&self);
    /// Whether `write_to` of what `file` loaded writes `file` back byte for byte, as the
    /// format promises for files this crate writes: the default chunk size, and for a
    /// semi-concurrent filter no pending hash (a load folds them into the bits).
    fn saves_as_read(file: &[u8]) -> bool {
        chunk_bytes(file) == Some(1 << 20)
    }
}

/// The header's chunk size, if the file has a header.
fn chunk_bytes(file: &[u8]) -> Option<u32> {
    Some(u32::from_le_bytes(file.get(80..84)?.try_into().ok()?))
}

fn u64_at(file: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(file.get(at..at + 8)?.try_into().ok()?))
}

macro_rules! loader {
    ($type:ty, |$s:ident| $exercise:block $(, saves_as_read: $saves:expr)?) => {
        impl Loader for $type {
            fn read_from(input: impl Read) -> Result<Self, Error> {
                <$type>::read_from(input)
            }
            fn read_trusting(input: impl Read, seed: u64) -> Result<Self, Error> {
                <$type>::read_from_trusting_hasher(input, StableHasher::with_seed(seed))
            }
            fn import_chunks(pieces: Vec<&[u8]>) -> Result<Self, Error> {
                <$type>::import_chunks(pieces)
            }
            fn load(path: &Path) -> Result<Self, Error> {
                <$type>::load(path)
            }
            fn deserialize(
                bytes: &[u8],
                as_sequence: bool,
            ) -> Result<Self, serde::de::value::Error> {
                use serde::Deserialize;
                use serde::de::value::{BytesDeserializer, SeqDeserializer};
                if as_sequence {
                    <$type as Deserialize>::deserialize(SeqDeserializer::new(bytes.iter().copied()))
                } else {
                    <$type as Deserialize>::deserialize(BytesDeserializer::new(bytes))
                }
            }
            fn write_to(&self, out: &mut Vec<u8>) -> Result<(), Error> {
                <$type>::write_to(self, out)
            }
            fn exercise(&self) {
                let $s = self;
                $exercise
            }
            $(
                fn saves_as_read(file: &[u8]) -> bool {
                    $saves(file)
                }
            )?
        }
    };
}

loader!(AtomicBloomFilter, |f| {
    f.contains(&1u64);
    f.insert(&2u64);
    assert!(f.contains(&2u64), "an inserted item is found");
});

loader!(SemiConcurrentBloomFilter, |f| {
    f.contains(&1u64);
    f.insert(&2u64);
    f.compact();
    assert!(f.contains(&2u64), "an inserted item is found");
}, saves_as_read: |file: &[u8]| {
    // A load folds the pending hashes (the header's records) into the bits.
    chunk_bytes(file) == Some(1 << 20) && u64_at(file, 64) == Some(0)
});

loader!(WindowedBloomFilter, |f| {
    f.maintain();
    f.contains(&1u64);
    f.insert(&2u64);
    assert!(f.contains(&2u64), "an inserted item is found");
    f.rotate();
    f.insert(&3u64);
});

/// A growing filter's insert of a new item may grow it by its schedule's next layer, an
/// allocation the schedule decides, not the file: inserted only when that layer is small
/// (the file's own layers are what the input delivered).
const GROWTH_BUDGET: u64 = 8 << 20;

loader!(GrowingBloomFilter, |f| {
    f.contains(&1u64);
    let next = u32::try_from(f.layers())
        .ok()
        .and_then(|i| f.sizing().layer(i).ok());
    if next.is_some_and(|layer| layer.bits / 8 <= GROWTH_BUDGET) {
        if let Ok(true | false) = f.insert(&2u64) {
            assert!(f.contains(&2u64), "an inserted item is found");
        }
    } else {
        f.insert(&1u64).ok();
    }
});

loader!(OverwriteMap, |m| {
    m.contains(&1u64);
    m.insert(&2u64);
    m.forget(&1u64);
});

loader!(ExactOverwriteMap, |m| {
    m.contains(b"a");
    assert!(m.insert(b"b") || m.contains(b"b"));
    assert!(m.contains(b"b"), "an inserted key is found");
    m.forget(b"a");
});

/// Sets the header's checksum and each payload chunk's checksum that `file` has room for to
/// what they should be, so that a mutation of a field reaches the checks behind the
/// checksums; `None` if nothing changed (or there is no header to repair).
pub fn repair_checksums(file: &[u8]) -> Option<Vec<u8>> {
    let header = u32::from_le_bytes(file.get(12..16)?.try_into().ok()?) as usize;
    if header < 96 || header % 8 != 0 || header > file.len() {
        return None;
    }
    let mut fixed = file.to_vec();
    let sum = xxh3_64(&fixed[..header - 8]);
    fixed[header - 8..header].copy_from_slice(&sum.to_le_bytes());
    let payload = u64_at(file, 56)?;
    let chunk = u64::from(chunk_bytes(file)?);
    if (64..=1 << 30).contains(&chunk) && chunk % 8 == 0 {
        let (mut at, mut done, mut index) = (header, 0u64, 0u64);
        while done < payload {
            let len = (payload - done).min(chunk) as usize;
            let Some(end) = at.checked_add(len).filter(|end| end + 8 <= fixed.len()) else {
                break;
            };
            let sum = xxh3_64_with_seed(&fixed[at..end], index);
            fixed[end..end + 8].copy_from_slice(&sum.to_le_bytes());
            (at, done, index) = (end + 8, done + len as u64, index + 1);
        }
    }
    (fixed != file).then_some(fixed)
}

/// The loader targets' property, for the file `data` and its checksum-repaired twin:
/// [`check_file`] of each.
pub fn check_loader<T: Loader>(data: &[u8]) {
    check_file::<T>(data);
    if let Some(repaired) = repair_checksums(data) {
        check_file::<T>(&repaired);
    }
}

/// Every entry point that takes the bytes of a file (`read_from`, `load` of them in a
/// temporary file, `import_chunks`, `Deserialize`, `read_from_trusting_hasher`): none panics
/// (nor hangs, nor allocates far beyond the input: libFuzzer's `-malloc_limit_mb` and
/// `-rss_limit_mb`); they agree on whether `file` is one whole file; and a structure that
/// loads works (a lookup, an insert) and saves to a file that loads back and saves to the
/// same bytes (to `file` itself where the format promises that: [`Loader::saves_as_read`]).
pub fn check_file<T: Loader>(file: &[u8]) {
    let mut input = file;
    let loaded = T::read_from(&mut input);
    // Exactly one file: nothing after it.
    let whole = loaded.is_ok() && input.is_empty();

    // The other entry points accept exactly the whole files `read_from` accepts.
    let pieces: Vec<&[u8]> = file.chunks(1 + file.len() % 61).collect();
    let imported = T::import_chunks(pieces);
    assert_eq!(imported.is_ok(), whole, "import_chunks: {imported:?}");
    // `load` knows the file's length, so it checks it first and allocates the structure at
    // once: another path than a stream's. One file per process, written over each time.
    let path = std::env::temp_dir().join(format!("seen-fuzz-{}.seen", std::process::id()));
    std::fs::write(&path, file).expect("a temporary file");
    let from_file = T::load(&path);
    assert_eq!(from_file.is_ok(), whole, "load: {:?}", from_file.err());
    for as_sequence in [false, true] {
        if as_sequence && file.len() > 4096 {
            continue; // slow, and the same bytes as above
        }
        let deserialized = T::deserialize(file, as_sequence);
        assert_eq!(
            deserialized.is_ok(),
            whole,
            "serde: {:?}",
            deserialized.err()
        );
    }
    // The trusting load takes any hasher name (the retired one too) with the file's seed:
    // tried where `read_from` refused (it would load what `read_from` loads, at the same cost).
    let seed = u64_at(file, 72).unwrap_or(0);
    let Ok(structure) = loaded.or_else(|_| T::read_trusting(file, seed)) else {
        return;
    };
    let mut saved = Vec::new();
    structure.write_to(&mut saved).expect("a save to memory");
    if whole && T::saves_as_read(file) {
        assert!(
            saved == file,
            "saved differently from the file it was loaded from"
        );
    }
    structure.exercise();
    let again = T::read_from(&saved[..])
        .or_else(|_| T::read_trusting(&saved[..], seed))
        .expect("a saved structure loads");
    let mut resaved = Vec::new();
    again.write_to(&mut resaved).expect("a save to memory");
    assert!(resaved == saved, "a saved structure saves to other bytes");
}

/// A redis target's input: the structure's parameters, the operations to run, the items, and
/// the server's replies.
///
/// `[params] [flags] [n] [n operations] [m] [m items] [RESP values...]`: `n` and `m` are 1
/// to 4 (the low two bits, plus one); an item is a byte, hashed by the structure's hasher; bit
/// 0 of the flags asks the server to fit each request's replies to its commands
/// ([`seen_redis::fuzzing::server`]); each RESP value answers one request, in order.
#[derive(Debug)]
pub struct Session<'a> {
    /// Chooses the structure's size and shape.
    pub params: u8,
    /// Whether each request's replies are fitted to its commands.
    pub fit: bool,
    /// The operations, in order: each target says what a byte means.
    pub ops: &'a [u8],
    /// The items of every operation.
    pub items: &'a [u8],
    /// The server's replies.
    pub resp: &'a [u8],
}

impl<'a> Session<'a> {
    /// `data` cut as above; `None` if it is too short.
    pub fn parse(data: &'a [u8]) -> Option<Self> {
        let [params, flags, n, rest @ ..] = data else {
            return None;
        };
        let ops_len = usize::from(n & 3) + 1;
        let ops = rest.get(..ops_len)?;
        let (&m, rest) = rest[ops_len..].split_first()?;
        let items_len = usize::from(m & 3) + 1;
        let items = rest.get(..items_len)?;
        Some(Self {
            params: *params,
            fit: flags & 1 == 1,
            ops,
            items,
            resp: &rest[items_len..],
        })
    }
}

/// `result`'s answer, after checking that every reply it was read from is well formed: a
/// malformed reply must be an error, never an answer. With `SEEN_FUZZ_DEBUG` set, prints each
/// outcome (to see how far an input gets).
pub fn answered<T, E: std::fmt::Debug>(
    server: &seen_redis::Server,
    result: Result<T, E>,
) -> Option<T> {
    let judged = seen_redis::fuzzing::well_formed(server);
    if std::env::var_os("SEEN_FUZZ_DEBUG").is_some() {
        match &result {
            Ok(_) => eprintln!("answered ({judged:?})"),
            Err(e) => eprintln!("error: {e:?}"),
        }
    }
    let answer = result.ok()?;
    if let Err(why) = judged {
        panic!("an answer from a malformed reply: {why}");
    }
    Some(answer)
}
