//! `WindowedBloomFilter`'s loaders (`read_from`, `read_from_trusting_hasher`, `import_chunks`,
//! `Deserialize`) fed any bytes, and the same bytes with their checksums repaired: see
//! [`seen_fuzz::check_file`] for the property. Corpus: the golden files of `tests/data/`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    seen_fuzz::check_loader::<seen::WindowedBloomFilter>(data);
});
