//! Items and counts the tests share: `prefix-0..n` as strings, and how many of them a filter
//! calls new or holds.

#![allow(dead_code)]

use seen_redis::{Error, SharedBloomFilter};

pub(crate) fn keys(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

pub(crate) fn count_new(filter: &SharedBloomFilter, items: &[String]) -> Result<usize, Error> {
    filter.insert_many(items.iter().map(String::as_str), &mut Vec::new())
}

pub(crate) fn count_hits(filter: &SharedBloomFilter, items: &[String]) -> Result<usize, Error> {
    filter.contains_many(items.iter().map(String::as_str), &mut Vec::new())
}
