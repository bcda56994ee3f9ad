//! The command's record keying (`cli/src/dedup/key.rs`: `Keyer::of`), under every kind of
//! key and time the command's flags can ask for, on any record.
//!
//! The input: a byte choosing the key (`-f N`, `--json-key PATH` or the whole record), the
//! time (none, `--time-field N`, or `--time-field PATH` with `--json-key`) and
//! `--missing-key`; a byte for `N`; the delimiter; a line holding the JSON paths (the key's,
//! then a tab, then the time's); then the record.
//!
//! Properties: no panic; the whole record is its own key; field `N` is the `N`-th run between
//! delimiters (or, missing, an error with `--missing-key error` and no key with `print`).
#![no_main]

use libfuzzer_sys::fuzz_target;

// Compiled from the command's own source: see `cli_time.rs` for why.
#[allow(dead_code)]
#[path = "../../cli/src/dedup/key.rs"]
mod key;

use key::{Key, Keyer, Missing};

/// A dotted path as the command splits `--json-key` and `--time-field`.
fn path(text: &str) -> Vec<String> {
    text.split('.').map(str::to_string).collect()
}

fuzz_target!(|data: &[u8]| {
    let [choice, n, delimiter, rest @ ..] = data else {
        return;
    };
    let (paths, record) = match rest.iter().position(|&b| b == b'\n') {
        Some(at) => (&rest[..at], &rest[at + 1..]),
        None => (&b""[..], rest),
    };
    let paths = String::from_utf8_lossy(paths);
    let (key_path, time_path) = paths.split_once('\t').unwrap_or((&paths, "t"));
    // `-f` and `--time-field N` take 1 and up (clap and the command refuse 0).
    let n = u64::from(*n).max(1);
    let key = match choice & 3 {
        0 => Key::Field(n),
        1 => Key::Json(path(key_path)),
        _ => Key::Whole,
    };
    // A time path only with a JSON key, as the command has it.
    let time = match (choice >> 2 & 3, &key) {
        (0, _) => None,
        (_, Key::Json(_)) => Some(Key::Json(path(time_path))),
        (1, _) => Some(Key::Field(u64::from(choice >> 4).max(1))),
        _ => Some(Key::Field(n)),
    };
    let missing = if choice & 0x80 == 0 {
        Missing::Error
    } else {
        Missing::Print
    };
    let keyer = Keyer {
        key,
        time,
        delimiter: *delimiter,
        missing,
    };
    let result = keyer.of(record);
    match (&keyer.key, &result) {
        (Key::Whole, Ok((key, _))) => assert_eq!(key.as_deref(), Some(record)),
        (Key::Field(n), Ok((key, _))) => {
            let field = record.split(|&b| b == *delimiter).nth(*n as usize - 1);
            assert_eq!(key.as_deref(), field);
            assert!(field.is_some() || missing == Missing::Print);
        }
        (Key::Field(n), Err(e)) if missing == Missing::Error && !e.contains("time") => {
            assert!(
                record
                    .split(|&b| b == *delimiter)
                    .nth(*n as usize - 1)
                    .is_none()
            );
        }
        _ => {}
    }
});
