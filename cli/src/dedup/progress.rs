//! The progress bar's line and the counts it shows, in at most 80 columns.

use std::time::Duration;

/// A count estimated from a rate: whole, 0 when below one half.
pub(super) fn round_count(x: f64) -> String {
    if x < 0.5 {
        "0".to_string()
    } else if x < 10.0 {
        format!("{x:.1}")
    } else {
        format!("{:.0}", x)
    }
}

/// A count in at most six characters: `999`, `12.3k`, `4.6M`, `789.0G`, `18.4E`.
pub(super) fn short_count(n: u64) -> String {
    const UNITS: [&str; 7] = ["", "k", "M", "G", "T", "P", "E"];
    let (mut x, mut unit) = (n as f64, 0);
    // Below 999.95, so that one decimal never rounds up to four digits.
    while x >= 999.95 && unit < UNITS.len() - 1 {
        x /= 1000.0;
        unit += 1;
    }
    if unit == 0 {
        n.to_string()
    } else {
        format!("{x:.1}{}", UNITS[unit])
    }
}

/// The progress bar's message: records, duplicates, records per second, and the time left.
pub(super) fn progress_message(
    records: u64,
    duplicates: u64,
    per_second: f64,
    left: Option<Duration>,
) -> String {
    let mut message = format!(
        "{} rec {} dup {}/s",
        short_count(records),
        short_count(duplicates),
        short_count(per_second as u64)
    );
    if let Some(left) = left {
        let s = left.as_secs();
        let left = match s {
            0..60 => format!("{s}s"),
            60..3_600 => format!("{}m", s / 60),
            3_600..86_400 => format!("{}h", s / 3_600),
            _ => format!("{}d", (s / 86_400).min(999)),
        };
        message.push_str(&format!(" {left} left"));
    }
    message
}

/// The progress bar's templates: at most 80 columns, whatever the sizes and counts.
pub(super) const PROGRESS_FILES: &str = "{bar:14} {bytes}/{total_bytes} {msg}";
pub(super) const PROGRESS_STREAM: &str = "{spinner} {bytes} {bytes_per_sec} {msg}";

#[cfg(test)]
mod tests {
    use super::*;

    /// The progress line fits an 80-column terminal with the widest sizes, counts, rates and
    /// times left (drawn on a wider one, so that nothing is cut to fit).
    #[test]
    fn the_progress_line_fits_80_columns() {
        use indicatif::{InMemoryTerm, ProgressBar, ProgressDrawTarget, ProgressStyle};
        let widest = [999_999_999_999, 999_999_999_999];
        for (template, total) in [
            (PROGRESS_FILES, Some(1023 << 30)),
            (PROGRESS_FILES, Some(u64::MAX)),
            (PROGRESS_STREAM, None),
        ] {
            let term = InMemoryTerm::new(3, 400);
            let target = ProgressDrawTarget::term_like(Box::new(term.clone()));
            let bar = ProgressBar::with_draw_target(total, target)
                .with_style(ProgressStyle::with_template(template).unwrap());
            bar.set_position(total.map_or(1023 << 30, |t| t / 2 + 1) | 0x3ff_0000_0000);
            let left = total.map(|_| Duration::from_secs(999 * 86_400));
            bar.set_message(progress_message(widest[0], widest[1], 999.9e9, left));
            bar.tick();
            let drawn = term.contents();
            assert!(drawn.contains("left") || total.is_none(), "{drawn:?}");
            for line in drawn.lines() {
                let width = line.trim_end().chars().count();
                assert!(width <= 80, "{width} columns: {line:?}");
            }
            assert!(drawn.contains("rec"), "nothing drawn: {drawn:?}");
        }
    }

    #[test]
    fn counts_take_at_most_six_characters() {
        for n in [
            0,
            999,
            1_000,
            999_949,
            999_999,
            1_000_000,
            999_999_999_999,
            u64::MAX,
        ] {
            assert!(short_count(n).len() <= 6, "{n}: {}", short_count(n));
        }
        assert_eq!(short_count(12_345), "12.3k");
        assert_eq!(round_count(0.2), "0");
        assert_eq!(round_count(3.26), "3.3");
        assert_eq!(round_count(1234.4), "1234");
    }
}
