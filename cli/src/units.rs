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
