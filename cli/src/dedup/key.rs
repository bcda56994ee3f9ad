//! Which part of a record is its key and its time, and how a time is read.

/// Which part of a record is its key, and where its time is.
pub(super) struct Keyer {
    pub(super) key: Key,
    pub(super) time: Option<Key>,
    pub(super) delimiter: u8,
    /// What a record without a key is.
    pub(super) missing: Missing,
}

/// What a record without a key is (`--missing-key`): never given a key that it would share
/// with the other records without one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Missing {
    /// An error, with the record's line number.
    Error,
    /// Printed as it is, never deduplicated.
    Print,
}

/// A part of a record.
pub(super) enum Key {
    Whole,
    Field(u64),
    Json(Vec<String>),
}

/// A record's key (or time) as extracted: borrowed from the record where it can be.
pub(super) type Part<'r> = std::borrow::Cow<'r, [u8]>;

impl Keyer {
    /// The key of `record` (its terminator removed; `None` for a record without one, with
    /// `--missing-key print`), and its time in nanoseconds since the Unix epoch if there is a
    /// time field.
    pub(super) fn of<'r>(
        &self,
        record: &'r [u8],
    ) -> Result<(Option<Part<'r>>, Option<u64>), String> {
        use std::borrow::Cow;
        let field = |n: u64| -> Option<&'r [u8]> {
            record
                .split(|&b| b == self.delimiter)
                .nth(usize::try_from(n - 1).ok()?)
        };
        let json: Option<serde_json::Value> = match (&self.key, &self.time) {
            (Key::Json(_), _) | (_, Some(Key::Json(_))) => Some(
                serde_json::from_slice(record).map_err(|e| format!("not a JSON record: {e}"))?,
            ),
            _ => None,
        };
        let at = |path: &[String]| {
            let mut at = json.as_ref()?;
            for part in path {
                at = match at {
                    // An array's element by its index (`items.0.sku`).
                    serde_json::Value::Array(items) => items.get(part.parse::<usize>().ok()?)?,
                    _ => at.get(part)?,
                };
            }
            Some(at)
        };
        let key = match &self.key {
            Key::Whole => Ok(Cow::Borrowed(record)),
            Key::Field(n) => field(*n).map(Cow::Borrowed).ok_or_else(|| {
                let fields = record.split(|&b| b == self.delimiter).count();
                format!(
                    "no field {n} (the record has {fields}, split by {:?})",
                    char::from(self.delimiter)
                )
            }),
            Key::Json(path) => match at(path) {
                None | Some(serde_json::Value::Null) => Err(format!(
                    "no key at {}{}",
                    path.join("."),
                    match &json {
                        Some(serde_json::Value::Object(_)) | None => String::new(),
                        Some(other) => format!(" (the record is {}, not an object)", kind(other)),
                    }
                )),
                Some(serde_json::Value::String(s)) => Ok(Cow::Owned(s.clone().into_bytes())),
                Some(other) => Ok(Cow::Owned(other.to_string().into_bytes())),
            },
        };
        let key = match (key, self.missing) {
            (Ok(key), _) => Some(key),
            (Err(_), Missing::Print) => None,
            (Err(why), Missing::Error) => {
                return Err(format!(
                    "{why}; --missing-key print passes such records through"
                ));
            }
        };
        let time = match &self.time {
            None => None,
            Some(Key::Field(n)) => Some(parse_time(
                field(*n).ok_or_else(|| format!("no time: no field {n}"))?,
            )?),
            Some(Key::Json(path)) => Some(match at(path) {
                None => return Err(format!("no time at {}", path.join("."))),
                Some(serde_json::Value::String(s)) => parse_time(s.as_bytes())?,
                // Its text as written (`arbitrary_precision`; `1.7e9` too), read as a string
                // of that text is: Unix seconds, cut to the nanosecond (never rounded through
                // an `f64`, which would put `…799.999999999999` in the next second).
                Some(serde_json::Value::Number(n)) => parse_time(n.to_string().as_bytes())?,
                Some(other) => return Err(format!("not a time: {other}")),
            }),
            Some(Key::Whole) => Some(parse_time(record)?),
        };
        Ok((key, time))
    }
}

/// What a JSON value is, for messages.
fn kind(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

/// A time: Unix seconds (`1700000000`, `1700000000.25`) or RFC 3339 (`2026-11-22T09:30:00Z`,
/// `2026-11-22 09:30:00+01:00`, `2026-11-22` for its midnight UTC), as nanoseconds since the
/// Unix epoch, from 1970 to 2554 (what a `u64` of nanoseconds holds). A leap second (`:60`)
/// counts as the second before it (`:59`), as jiff reads it.
pub(super) fn parse_time(text: &[u8]) -> Result<u64, String> {
    let text = std::str::from_utf8(text)
        .map_err(|_| "the time field is not UTF-8".to_string())?
        .trim();
    let bad = || format!("not a time: {text:?} (Unix seconds or RFC 3339)");
    let range = || format!("time {text:?} is out of range (1970-01-01 to 2554-07-21 UTC)");
    if let Some(nanos) = decimal_seconds(text) {
        return nanos.ok_or_else(range);
    }
    // A date alone is its midnight UTC; anything else needs its offset (`Z` or `+01:00`). A
    // local date before 1970 may be after the epoch in UTC (1969-12-31T23:00:00-02:00): the
    // range is checked on the instant.
    // RFC 3339 allows any number of fraction digits, jiff nine: the rest is below a nanosecond.
    let text = match text.split_once('.') {
        Some((head, tail)) if tail.bytes().take_while(u8::is_ascii_digit).count() > 9 => {
            let digits = tail.bytes().take_while(u8::is_ascii_digit).count();
            std::borrow::Cow::Owned(format!("{head}.{}{}", &tail[..9], &tail[digits..]))
        }
        _ => std::borrow::Cow::Borrowed(text),
    };
    let instant = match text.parse::<jiff::Timestamp>() {
        Ok(instant) => instant,
        Err(_) if text.len() == 10 => {
            let date: jiff::civil::Date = text.parse().map_err(|_| bad())?;
            jiff::tz::Offset::UTC
                .to_timestamp(date.to_datetime(jiff::civil::Time::midnight()))
                .map_err(|_| range())?
        }
        // A valid date far outside the range (jiff's timestamps end in 9999): out of range,
        // not "not a time".
        Err(_) => match text
            .get(..10)
            .and_then(|d| d.parse::<jiff::civil::Date>().ok())
        {
            Some(date) if !(1969..=2555).contains(&date.year()) => return Err(range()),
            _ => return Err(bad()),
        },
    };
    u64::try_from(instant.as_nanosecond()).map_err(|_| range())
}

/// Unix seconds written as a decimal number, `DIGITS[.DIGITS][(e|E)[+|-]DIGITS]` (`1700000000`,
/// `1700000000.25`, `1.7e9`: JSON's numbers, without a sign), as nanoseconds cut (not rounded)
/// from the text exactly: `None` if the text is not such a number, `Some(None)` if it is past
/// what a `u64` of nanoseconds holds.
pub(super) fn decimal_seconds(text: &str) -> Option<Option<u64>> {
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    let (mantissa, exponent) = match text.find(['e', 'E']) {
        Some(at) => (&text[..at], Some(&text[at + 1..])),
        None => (text, None),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if whole.is_empty() || !digits(whole) || !digits(fraction) {
        return None;
    }
    let exponent: i64 = match exponent {
        None => 0,
        Some(e) => {
            let magnitude = e.strip_prefix(['+', '-']).unwrap_or(e);
            if magnitude.is_empty() || !digits(magnitude) {
                return None;
            }
            // Past any time in either direction: held at a size that stays so.
            let magnitude = magnitude.parse::<i64>().unwrap_or(i64::MAX).min(1 << 40);
            if e.starts_with('-') {
                -magnitude
            } else {
                magnitude
            }
        }
    };
    // The number is `all` (its digits, without the point) times 10^(exponent - fraction's
    // digits): in nanoseconds, times 10^shift.
    let all = format!("{whole}{fraction}");
    let significant = all.trim_start_matches('0');
    let shift = exponent - fraction.len() as i64 + 9;
    let kept = if shift >= 0 {
        // u64::MAX has 20 digits.
        if significant.len() as i64 + shift > 20 {
            return Some(None);
        }
        format!("{significant}{}", "0".repeat(shift as usize))
    } else {
        let cut = significant
            .len()
            .saturating_sub(shift.unsigned_abs() as usize);
        significant[..cut].to_string()
    };
    if kept.is_empty() {
        return Some(Some(0));
    }
    if kept.len() > 20 {
        return Some(None);
    }
    Some(kept.parse::<u64>().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    #[test]
    fn times_in_unix_seconds_and_rfc_3339() {
        assert_eq!(parse_time(b"1700000000"), Ok(1_700_000_000 * S));
        assert_eq!(parse_time(b"1700000000.25"), Ok(1_700_000_000 * S + S / 4));
        assert_eq!(parse_time(b"2026-11-22"), Ok(1_795_305_600 * S));
        assert_eq!(
            parse_time(b"2026-11-22T09:30:00Z"),
            Ok((1_795_305_600 + 34_200) * S)
        );
        // Offsets: the same instant written three ways; `t`, `z` and a space as RFC 3339 allows.
        for text in [
            "2026-11-22T10:30:00+01:00",
            "2026-11-22 04:00:00-05:30",
            "2026-11-22t09:30:00z",
        ] {
            assert_eq!(
                parse_time(text.as_bytes()),
                Ok((1_795_305_600 + 34_200) * S),
                "{text}"
            );
        }
        assert_eq!(
            parse_time(b"2026-11-22T09:30:00.5Z"),
            Ok((1_795_305_600 + 34_200) * S + S / 2)
        );
        // The local date is 1969, the instant 1970.
        assert_eq!(parse_time(b"1969-12-31T23:00:00-02:00"), Ok(3_600 * S));
        assert_eq!(parse_time(b"1970-01-01T00:00:00Z"), Ok(0));
    }

    /// RFC 3339 puts no bound on the fraction's digits: those past the nanosecond are dropped,
    /// as in Unix seconds.
    #[test]
    fn fractions_of_any_length() {
        let at = (1_795_305_600 + 34_200) * S + 123_456_789;
        assert_eq!(parse_time(b"2026-11-22T09:30:00.1234567891234Z"), Ok(at));
        assert_eq!(
            parse_time(b"2026-11-22T10:30:00.123456789999+01:00"),
            Ok(at)
        );
        assert_eq!(parse_time(b"1795339800.1234567891234"), Ok(at));
    }

    /// A JSON number time is read from its text, as the same text in a string is: cut (not
    /// rounded through an `f64`) to the nanosecond, so both fall on the same side of a period's
    /// end (`…799.999999999999` is not the next second, or the next day).
    #[test]
    fn a_json_number_time_is_the_same_text_in_a_string() {
        let keyer = Keyer {
            key: Key::Json(vec!["k".into()]),
            time: Some(Key::Json(vec!["t".into()])),
            delimiter: b'\t',
            missing: Missing::Error,
        };
        // The time, or the kind of error (serde_json writes an exponent back as `e+30`).
        let time = |json: String| {
            keyer.of(json.as_bytes()).map(|(_, t)| t).map_err(|e| {
                if e.contains("out of range") {
                    "out of range".to_string()
                } else {
                    e
                }
            })
        };
        for text in [
            "1483228799.999999999999",
            "1483228799.9999999995",
            "1483228799.9999999999",
            "1700000000",
            "1700000000.25",
            "1.7e9",
            "1.7E+9",
            "17e8",
            "1700000000123e-3",
            "0.5",
            "0",
            "1e-9",
            "1e-10",
            "18446744073.709551615",
            "18446744073.709551616",
            "1e30",
            "-1",
        ] {
            let number = time(format!(r#"{{"k":1,"t":{text}}}"#));
            let string = time(format!(r#"{{"k":1,"t":"{text}"}}"#));
            assert_eq!(number, string, "{text}");
        }
        let at = |text: &str| time(format!(r#"{{"k":1,"t":{text}}}"#));
        assert_eq!(
            at("1483228799.999999999999"),
            Ok(Some(1_483_228_799 * S + S - 1))
        );
        assert_eq!(at("1.7e9"), Ok(Some(1_700_000_000 * S)));
        assert_eq!(
            at("1700000000123e-3"),
            Ok(Some(1_700_000_000 * S + 123_000_000))
        );
        assert_eq!(at("1e-10"), Ok(Some(0)));
        assert_eq!(at("18446744073.709551615"), Ok(Some(u64::MAX)));
        for text in ["18446744073.709551616", "1e30", "1e999999999999999999999"] {
            assert_eq!(at(text), Err("out of range".to_string()), "{text}");
        }
        assert!(at("-1").unwrap_err().starts_with("not a time"));
    }

    /// A leap second is taken as jiff takes it: the second before (an RFC 3339 time is valid
    /// with `:60`, and a record's time only moves the window's clock).
    #[test]
    fn a_leap_second_is_the_second_before_it() {
        assert_eq!(
            parse_time(b"2016-12-31T23:59:60Z"),
            parse_time(b"2016-12-31T23:59:59Z")
        );
        assert_eq!(parse_time(b"2016-12-31T23:59:59Z"), Ok(1_483_228_799 * S));
    }

    /// Far dates: the last day a `u64` of nanoseconds holds is a time, the next is out of range,
    /// and so are dates before 1970 and past jiff's year 9999.
    #[test]
    fn far_dates_are_in_range_or_say_so() {
        assert_eq!(parse_time(b"2554-07-21"), Ok(18_446_659_200 * S));
        assert_eq!(parse_time(b"2554-07-21T23:34:33.709551615Z"), Ok(u64::MAX));
        for text in [
            "2554-07-21T23:34:34Z",
            "2554-07-22",
            "9999-12-31",
            "9999-12-31T23:59:59Z",
            "0000-01-01T00:00:00Z",
            "1969-12-31",
        ] {
            let err = parse_time(text.as_bytes()).unwrap_err();
            assert!(err.contains("out of range"), "{text}: {err}");
        }
    }

    #[test]
    fn what_is_not_a_time_says_so() {
        for text in [
            "",
            "yesterday",
            "2026-11-22T09:30:00",
            "2026-13-01",
            "2026-02-30",
            "2026-11-22T24:00:00Z",
            "2026-11-22T09:61:00Z",
            "10000-01-01",
            "-1",
        ] {
            let err = parse_time(text.as_bytes()).unwrap_err();
            assert!(err.starts_with("not a time"), "{text}: {err}");
        }
    }
}
