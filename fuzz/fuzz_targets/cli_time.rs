//! The command's time parsing (`cli/src/dedup/key.rs`): `parse_time` of any bytes, `decimal_seconds`
//! of any decimal number, and a JSON record's time given as a number and as a string.
//!
//! Properties: no panic; Unix seconds (digits, a point, digits) are exactly the seconds and the
//! first nine fraction digits, or out of range past `u64::MAX` ns; and a JSON number and the
//! same text as a JSON string are the same time (a number was rounded through an `f64`, so
//! `1483228799.999999999999` landed in the next day: this target finds that within seconds).
#![no_main]

use libfuzzer_sys::fuzz_target;

// The command is a binary with no library target, so its `key.rs` is compiled here as a module
// of this target, from the command's own source (no copy that could drift from it). The module
// is self-contained: it needs only clap's `ValueEnum` derive, serde_json with the command's
// `arbitrary_precision` feature and jiff, which fuzz/Cargo.toml names with the command's
// features. A library target in cli/ would make the command's internals an API, and the
// package something more than the `seen` binary, for the sake of the fuzzer.
#[allow(dead_code)]
#[path = "../../cli/src/dedup/key.rs"]
mod key;

use key::{Key, Keyer, Missing, decimal_seconds, parse_time};

const NS: u128 = 1_000_000_000;

/// Unix seconds as the documentation defines them, computed apart: the whole seconds and the
/// first nine digits of the fraction; `None` past `u64::MAX` nanoseconds.
fn unix_seconds(whole: &str, frac: &str) -> Option<u64> {
    let secs: u128 = whole.parse().ok()?;
    let mut part: u128 = 0;
    for digit in frac.bytes().chain(std::iter::repeat(b'0')).take(9) {
        part = part * 10 + u128::from(digit - b'0');
    }
    u64::try_from(secs.checked_mul(NS)?.checked_add(part)?).ok()
}

fn keyer_of_time() -> Keyer {
    Keyer {
        key: Key::Json(vec!["id".to_owned()]),
        time: Some(Key::Json(vec!["t".to_owned()])),
        delimiter: b'\t',
        missing: Missing::Print,
    }
}

fuzz_target!(|data: &[u8]| {
    let parsed = parse_time(data);
    let Ok(text) = std::str::from_utf8(data) else {
        assert!(
            parsed.is_err(),
            "bytes that are not UTF-8 are a time: {parsed:?}"
        );
        return;
    };
    let text = text.trim();

    // Unix seconds: the documented value, or an error.
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        let (whole, frac) = text.split_once('.').unwrap_or((text, ""));
        if !whole.is_empty() && !frac.contains('.') {
            let expected = unix_seconds(whole, frac);
            match (expected, &parsed) {
                (Some(ns), Ok(got)) => assert_eq!(*got, ns, "{text:?}"),
                // Past `u64::MAX` ns: out of range (seconds past `u64::MAX` are "not a time").
                (None, Err(e)) => assert!(
                    e.contains("out of range") || whole.parse::<u64>().is_err(),
                    "{text:?}: {e}"
                ),
                (expected, got) => panic!("{text:?}: expected {expected:?}, got {got:?}"),
            }
            // `decimal_seconds` directly, on the same text.
            assert_eq!(
                decimal_seconds(text),
                Some(expected),
                "decimal_seconds({text:?})"
            );
        }
    }

    // A JSON record's time: as a number, and as the same text in a string.
    if let Ok(number) = serde_json::from_str::<serde_json::Number>(text) {
        let keyer = keyer_of_time();
        let as_number = keyer
            .of(format!("{{\"t\":{number}}}").as_bytes())
            .map(|(_, t)| t);
        let as_string = keyer
            .of(format!("{{\"t\":\"{text}\"}}").as_bytes())
            .map(|(_, t)| t);
        if let (Ok(a), Ok(b)) = (&as_number, &as_string) {
            assert_eq!(a, b, "{text:?} as a JSON number and as a JSON string");
        }
    }
});
