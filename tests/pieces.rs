//! `import_chunks` of pieces that are not in order: the error says what the pieces show.

mod common;

use seen::{
    AtomicBloomFilter, Corruption, Error, GrowingBloomFilter, OverwriteMap, WindowedBloomFilter,
};

/// The pieces that `write` hands the sink it is given (at least 4 of them).
fn pieces(write: impl FnOnce(&mut Vec<Vec<u8>>) -> Result<u64, Error>) -> Vec<Vec<u8>> {
    let mut pieces = Vec::new();
    write(&mut pieces).unwrap();
    assert!(pieces.len() >= 4, "{} pieces", pieces.len());
    pieces
}

/// Every reordering that puts another piece first, and a missing first piece, is
/// `NotTheFirstPiece`, whose message says the pieces are out of order or the first is missing;
/// in order, the pieces load; other damage keeps its own error. (Before, each of the first was
/// "not a file of the seen crate (wrong magic number)".)
#[test]
fn a_first_piece_that_does_not_start_the_file_says_so() {
    let filter = AtomicBloomFilter::with_capacity(10_000, 0.01).unwrap();
    filter.insert_counting_new(&common::keys(241, 1_000));
    for max in [5, 100, 4096] {
        let in_order = pieces(|out| filter.export_chunks(max, into(out)));
        assert!(AtomicBloomFilter::import_chunks(&in_order).is_ok());
        let n = in_order.len();
        let mut reversed = in_order.clone();
        reversed.reverse();
        let mut rotated = in_order.clone();
        rotated.rotate_left(1);
        let mut swapped = in_order.clone();
        swapped.swap(0, 1);
        let mut last_first = in_order.clone();
        last_first.swap(0, n - 1);
        let missing = in_order[1..].to_vec();
        let mut empty_then_second = vec![Vec::new()];
        empty_then_second.extend_from_slice(&in_order[1..]);
        for (what, pieces) in [
            ("reversed", reversed),
            ("rotated", rotated),
            ("first two swapped", swapped),
            ("first and last swapped", last_first),
            ("first missing", missing),
            ("an empty piece, then the second", empty_then_second),
        ] {
            let err = AtomicBloomFilter::import_chunks(&pieces).unwrap_err();
            assert_eq!(
                err,
                Error::Corrupt(Corruption::NotTheFirstPiece),
                "{what}, pieces of {max}"
            );
            let message = err.to_string();
            assert!(
                message.contains("out of order") && message.contains("missing"),
                "{message}"
            );
        }
    }
    // What is not a file of the crate at all, in pieces whose first begins as a file begins,
    // is still not one; a whole file of another kind is the wrong structure; pieces out of
    // order after a right first piece fail a checksum.
    let png = b"\x89PNG\r\n\x1a\n and then an image".to_vec();
    let bytes_apart: Vec<Vec<u8>> = png.iter().map(|&b| vec![b]).collect();
    assert_eq!(
        AtomicBloomFilter::import_chunks(&bytes_apart).unwrap_err(),
        Error::Corrupt(Corruption::NotASeenFile)
    );
    let map = OverwriteMap::with_buckets(100).unwrap();
    let mut whole = Vec::new();
    map.write_to(&mut whole).unwrap();
    assert!(matches!(
        AtomicBloomFilter::import_chunks([&whole]),
        Err(Error::WrongStructure { .. })
    ));
    let mut pieces = pieces(|out| filter.export_chunks(1000, into(out)));
    pieces.swap(1, 2);
    assert!(matches!(
        AtomicBloomFilter::import_chunks(&pieces),
        Err(Error::Corrupt(Corruption::ChunkChecksum { .. }))
    ));
}

/// A sink that keeps each piece in `out`.
fn into(out: &mut Vec<Vec<u8>>) -> impl FnMut(&[u8]) -> std::io::Result<()> + '_ {
    move |piece| {
        out.push(piece.to_vec());
        Ok(())
    }
}

/// The pieces that `export` hands its sink, the first two swapped.
fn swapped(export: impl FnOnce(&mut Vec<Vec<u8>>) -> Result<u64, Error>) -> Vec<Vec<u8>> {
    let mut out = pieces(export);
    out.swap(0, 1);
    out
}

/// Every structure's `import_chunks` (and `import_chunks_with_hasher`) says it.
#[test]
fn every_structure_says_so() {
    let keys = common::keys(242, 500);
    let map = OverwriteMap::with_buckets(1_000).unwrap();
    keys.iter().for_each(|k| _ = map.insert(k));
    let pieces = swapped(|out| map.export_chunks(100, into(out)));
    assert_eq!(
        OverwriteMap::import_chunks(&pieces).unwrap_err(),
        Error::Corrupt(Corruption::NotTheFirstPiece)
    );
    let window = WindowedBloomFilter::builder(1_000).build().unwrap();
    keys.iter().for_each(|k| _ = window.insert(k));
    let pieces = swapped(|out| window.export_chunks(100, into(out)));
    assert_eq!(
        WindowedBloomFilter::import_chunks(&pieces).unwrap_err(),
        Error::Corrupt(Corruption::NotTheFirstPiece)
    );
    let growing = GrowingBloomFilter::with_capacity(1_000, 0.01).unwrap();
    keys.iter().for_each(|k| _ = growing.insert(k).unwrap());
    let pieces = swapped(|out| growing.export_chunks(100, into(out)));
    assert_eq!(
        GrowingBloomFilter::import_chunks_with_hasher(&pieces, seen::hash::StableHasher::new())
            .unwrap_err(),
        Error::Corrupt(Corruption::NotTheFirstPiece)
    );
}
