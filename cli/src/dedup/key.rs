//! Which part of a record is its key and its time, and how a time is read.

/// Which part of a record is its key, and where its time is.
pub(super) struct Keyer {
    pub(super) key: Key,
    pub(super) time: Option<Key>,
    pub(super) delimiter: u8,
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
    /// The key of `record` (its terminator removed), and its time in nanoseconds since the
    /// Unix epoch if there is a time field.
    pub(super) fn of<'r>(&self, record: &'r [u8]) -> Result<(Part<'r>, Option<u64>), String> {
        use std::borrow::Cow;
        let field = |n: u64| -> &'r [u8] {
            record
                .split(|&b| b == self.delimiter)
                .nth(n as usize - 1)
                .unwrap_or(&[])
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
            Key::Whole => Cow::Borrowed(record),
            Key::Field(n) => Cow::Borrowed(field(*n)),
            Key::Json(path) => match at(path) {
                None => Cow::Borrowed(&[][..]),
                Some(serde_json::Value::String(s)) => Cow::Owned(s.clone().into_bytes()),
                Some(other) => Cow::Owned(other.to_string().into_bytes()),
            },
        };
        let time = match &self.time {
            None => None,
            Some(Key::Field(n)) => Some(parse_time(field(*n))?),
            Some(Key::Json(path)) => Some(match at(path) {
                None => return Err(format!("no time at {}", path.join("."))),
                Some(serde_json::Value::String(s)) => parse_time(s.as_bytes())?,
                // Its text as written (`1.7e9` too): Unix seconds.
                Some(serde_json::Value::Number(n)) => match n.as_u64() {
                    Some(secs) => parse_time(secs.to_string().as_bytes())?,
                    None => match n.as_f64() {
                        Some(secs) if (0.0..18_446_744_073.0).contains(&secs) => {
                            (secs * 1e9) as u64
                        }
                        _ => return Err(format!("not a time: {n}")),
                    },
                },
                Some(other) => return Err(format!("not a time: {other}")),
            }),
            Some(Key::Whole) => Some(parse_time(record)?),
        };
        Ok((key, time))
    }
}

/// A time: Unix seconds (`1700000000`, `1700000000.25`) or RFC 3339 (`2026-11-22T09:30:00Z`,
/// `2026-11-22 09:30:00+01:00`, `2026-11-22`), as nanoseconds since the Unix epoch.
pub(super) fn parse_time(text: &[u8]) -> Result<u64, String> {
    let text = std::str::from_utf8(text)
        .map_err(|_| "the time field is not UTF-8".to_string())?
        .trim();
    let bad = || format!("not a time: {text:?} (Unix seconds or RFC 3339)");
    let range = || format!("time {text:?} is out of range (1970-01-01 to 2554-07-21 UTC)");
    if text.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        let (whole, frac) = text.split_once('.').unwrap_or((text, ""));
        let secs: u64 = whole.parse().map_err(|_| bad())?;
        return nanos(secs, frac).ok_or_else(range);
    }
    // YYYY-MM-DD, then optionally [T ]HH:MM:SS[.frac](Z|±HH:MM).
    let num = |s: &str| -> Option<u64> {
        s.bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| s.parse().ok())?
    };
    let date = text.get(..10).ok_or_else(bad)?;
    let (y, m, d) = match date.split('-').collect::<Vec<_>>()[..] {
        [y, m, d] if y.len() == 4 && m.len() == 2 && d.len() == 2 => (num(y), num(m), num(d)),
        _ => return Err(bad()),
    };
    let (Some(y), Some(m), Some(d)) = (y, m, d) else {
        return Err(bad());
    };
    // A local date before 1970 may be after the epoch in UTC (1969-12-31T23:00:00-02:00):
    // the range is checked on the instant.
    if !(1..=12).contains(&m) || d < 1 || d > days_in_month(y, m) {
        return Err(bad());
    }
    let days = days_since_epoch(y, m, d);
    let rest = &text[10..];
    if rest.is_empty() {
        return u64::try_from(days * 86_400)
            .ok()
            .and_then(|s| nanos(s, ""))
            .ok_or_else(range);
    }
    let rest = rest.strip_prefix(['T', 't', ' ']).ok_or_else(bad)?;
    let (clock, zone) = match rest.find(['Z', 'z', '+', '-']) {
        Some(i) => rest.split_at(i),
        None => return Err(bad()),
    };
    let (hms, frac) = clock.split_once('.').unwrap_or((clock, ""));
    let (h, mi, s) = match hms.split(':').collect::<Vec<_>>()[..] {
        [h, mi, s] if h.len() == 2 && mi.len() == 2 && s.len() == 2 => (num(h), num(mi), num(s)),
        _ => return Err(bad()),
    };
    let (Some(h), Some(mi), Some(s)) = (h, mi, s) else {
        return Err(bad());
    };
    if h > 23 || mi > 59 || s > 60 {
        return Err(bad());
    }
    let offset: i64 = match zone {
        "Z" | "z" => 0,
        _ => {
            let (sign, hm) = zone.split_at(1);
            let (Some(oh), Some(om)) = (
                hm.get(..2).and_then(num),
                hm.get(2..).and_then(|r| r.strip_prefix(':')).and_then(num),
            ) else {
                return Err(bad());
            };
            if hm.len() != 5 || oh > 23 || om > 59 {
                return Err(bad());
            }
            let o = (oh * 3600 + om * 60) as i64;
            if sign == "+" { o } else { -o }
        }
    };
    let local = days * 86_400 + (h * 3600 + mi * 60 + s) as i64;
    let secs = u64::try_from(local - offset).map_err(|_| range())?;
    nanos(secs, frac).ok_or_else(range)
}

/// `secs` and a decimal fraction (`"25"` for .25) as nanoseconds.
pub(super) fn nanos(secs: u64, frac: &str) -> Option<u64> {
    if frac.len() > 9 && !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let digits = &frac[..frac.len().min(9)];
    let part: u64 = if digits.is_empty() {
        0
    } else {
        digits.parse::<u64>().ok()? * 10u64.pow(9 - digits.len() as u32)
    };
    secs.checked_mul(1_000_000_000)?.checked_add(part)
}

pub(super) fn is_leap(y: u64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

pub(super) fn days_in_month(y: u64, m: u64) -> u64 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to the date (negative before it; a year of 4 digits).
pub(super) fn days_since_epoch(y: u64, m: u64, d: u64) -> i64 {
    let year_days = |y: u64| if is_leap(y) { 366 } else { 365 };
    let years: i64 = if y >= 1970 {
        (1970..y).map(year_days).sum()
    } else {
        -(y..1970).map(year_days).sum::<i64>()
    };
    let months: u64 = (1..m).map(|m| days_in_month(y, m)).sum();
    years + (months + d - 1) as i64
}
