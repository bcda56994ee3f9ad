//! Helpers of the tests that save, load and damage files.

use seen::clock::Clock;
use seen::hash::ItemHasher;
use seen::hash::StableHasher;
use seen::{AtomicBloomFilter, Layout, WindowedBloomFilter};
use std::path::{Path, PathBuf};

pub(crate) fn bloom(capacity: u64, fpr: f64, layout: Layout) -> AtomicBloomFilter {
    AtomicBloomFilter::builder(capacity)
        .fpr(fpr)
        .layout(layout)
        .build()
        .unwrap()
}

pub(crate) fn bytes_of(filter: &AtomicBloomFilter<impl ItemHasher>) -> Vec<u8> {
    let mut out = Vec::new();
    filter.write_to(&mut out).unwrap();
    out
}

/// A directory of this test's own, emptied.
pub(crate) fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("seen-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

pub(crate) fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// The header's fields as a test can rewrite them, re-signed with a valid checksum: a file made
/// to pass the checksum must still be refused for what it says.
pub(crate) fn resign(file: &mut [u8]) {
    let len = u32::from_le_bytes(file[12..16].try_into().unwrap()) as usize;
    let sum = xxhash_rust::xxh3::xxh3_64(&file[..len - 8]);
    file[len - 8..len].copy_from_slice(&sum.to_le_bytes());
}

pub(crate) fn put_u64(file: &mut [u8], at: usize, value: u64) {
    file[at..at + 8].copy_from_slice(&value.to_le_bytes());
    resign(file);
}

pub(crate) fn window_bytes<C: Clock>(filter: &WindowedBloomFilter<StableHasher, C>) -> Vec<u8> {
    let mut out = Vec::new();
    filter.write_to(&mut out).unwrap();
    out
}
