//! Quantities on the command line: sizes (`256MiB`) and durations (`8d`).

/// A size: a number and an optional unit (B; K, KiB, M, MiB, G, GiB, T, TiB binary; KB, MB, GB,
/// TB decimal).
pub(crate) fn parse_size(text: &str) -> Result<u64, String> {
    let digits = text.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let unit = &text[digits.len()..];
    let number: u64 = digits
        .trim()
        .parse()
        .map_err(|_| format!("not a size: {text:?} (try 256MiB)"))?;
    let scale: u64 = match unit {
        "" | "B" => 1,
        "K" | "KiB" => 1 << 10,
        "M" | "MiB" => 1 << 20,
        "G" | "GiB" => 1 << 30,
        "T" | "TiB" => 1 << 40,
        "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "TB" => 1_000_000_000_000,
        _ => return Err(format!("unknown unit {unit:?} in {text:?} (try 256MiB)")),
    };
    number
        .checked_mul(scale)
        .filter(|&b| b > 0)
        .ok_or_else(|| format!("not a size from 1 byte to 2^64: {text:?}"))
}

/// A size as it is written on the command line: in the largest binary unit that divides it
/// (`256MiB`, `4KiB`), else in bytes (`1000B`).
pub(crate) fn format_size(bytes: u64) -> String {
    for (shift, unit) in [(40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")] {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    format!("{bytes}B")
}

/// A duration: a whole number and a unit (`s`, `m`, `h`, `d`, `w`; `ms` for tests), for
/// example `8d` or `90m`.
pub(crate) fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let digits = text.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let unit = &text[digits.len()..];
    let number: u64 = digits
        .trim()
        .parse()
        .map_err(|_| format!("not a duration: {text:?} (try 8d, 12h or 90m)"))?;
    let millis: u64 = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" | "min" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        "w" => 7 * 86_400_000,
        "" => return Err(format!("no unit in {text:?} (try 8d, 12h or 90m)")),
        _ => {
            return Err(format!(
                "unknown unit {unit:?} in {text:?} (try 8d, 12h or 90m)"
            ));
        }
    };
    number
        .checked_mul(millis)
        .filter(|&ms| ms > 0)
        .map(std::time::Duration::from_millis)
        .ok_or_else(|| format!("not a duration above zero that fits: {text:?}"))
}

/// `8d`, `36h`, `90m`: the largest unit up to days that divides the duration (what
/// [`parse_duration`] reads; `63d`, not `9w`).
pub(crate) fn format_duration(d: std::time::Duration) -> String {
    let ms = d.as_millis();
    let units = [
        (86_400_000, "d"),
        (3_600_000, "h"),
        (60_000, "m"),
        (1_000, "s"),
    ];
    units
        .into_iter()
        .find(|&(unit, _)| ms.is_multiple_of(unit))
        .map_or(format!("{ms}ms"), |(unit, name)| {
            format!("{}{name}", ms / unit)
        })
}

/// `2.0d`, `3.5h`, `12.0m`, `45s`: about how long a duration is, in its largest unit (for
/// messages; not read back).
pub(crate) fn format_approximate(d: std::time::Duration) -> String {
    let secs = d.as_secs_f64();
    [(86_400.0, "d"), (3_600.0, "h"), (60.0, "m")]
        .into_iter()
        .find(|&(unit, _)| secs >= unit)
        .map_or(format!("{secs:.0}s"), |(unit, name)| {
            format!("{:.1}{name}", secs / unit)
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn sizes_are_written_as_they_are_parsed() {
        for text in ["256MiB", "4KiB", "1GiB", "3TiB", "1000B", "1500KiB"] {
            assert_eq!(format_size(parse_size(text).unwrap()), text);
        }
        assert_eq!(format_size(parse_size("1MB").unwrap()), "1000000B");
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("256MiB"), Ok(256 << 20));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert_eq!(parse_size("500MB"), Ok(500_000_000));
        assert_eq!(parse_size("4096"), Ok(4096));
        for bad in ["", "MiB", "0", "1 XB", "-1K", "99999999999TiB"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("8d"), Ok(Duration::from_secs(8 * 86_400)));
        assert_eq!(parse_duration("90m"), Ok(Duration::from_secs(5_400)));
        assert_eq!(parse_duration("1w"), Ok(Duration::from_secs(604_800)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        for bad in ["", "8", "d", "0d", "3y", "-1d", "99999999999999999w"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        // What `format_duration` writes, `parse_duration` reads back: days at most.
        for text in ["63d", "8d", "36h", "90m", "45s", "250ms"] {
            assert_eq!(format_duration(parse_duration(text).unwrap()), text);
        }
        assert_eq!(format_duration(parse_duration("2w").unwrap()), "14d");
    }
}
