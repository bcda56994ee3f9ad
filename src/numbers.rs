//! How the crate writes numbers for people, in `BloomInfo`'s line and in error messages: sizes,
//! rates and the parameters a caller gave. One notation per number, never a percentage in
//! scientific notation.

use core::fmt;

/// A size in B, KiB, MiB, GiB or TiB, 3 significant digits.
pub(crate) struct Bytes(pub(crate) u64);

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
        let mut value = self.0 as f64;
        let mut unit = 0;
        // Rounded as printed (1,048,575 B is 1.00 MiB, not 1024 KiB).
        while value >= 1023.995 && unit + 1 < UNITS.len() {
            value /= 1024.0;
            unit += 1;
        }
        match unit {
            0 => write!(f, "{} B", self.0),
            _ if value >= 100.0 => write!(f, "{value:.0} {}", UNITS[unit]),
            _ if value >= 10.0 => write!(f, "{value:.1} {}", UNITS[unit]),
            _ => write!(f, "{value:.2} {}", UNITS[unit]),
        }
    }
}

/// A rate or probability with 2 significant digits: as a percentage in plain decimals (`1%`,
/// `0.21%`, `0.0018%`), or as a plain number (`0.01`, `0.0021`, `1.8e-5`: decimals down to
/// 1e-4, then scientific notation). For a number the crate computed; [`Given`] writes the
/// caller's own.
pub(crate) struct Rate {
    value: f64,
    percent: bool,
}

impl Rate {
    /// The smallest rate worth a percentage: `0.0001%`. Below it, a line writes its rates as
    /// plain numbers.
    pub(crate) const PERCENT_FROM: f64 = 1e-6;

    /// `value` as a percentage if `percent`, else as a plain number.
    pub(crate) fn new(value: f64, percent: bool) -> Self {
        Self { value, percent }
    }

    /// `value` as a plain number.
    pub(crate) fn plain(value: f64) -> Self {
        Self::new(value, false)
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = self.value;
        if p == 0.0 {
            return f.write_str(if self.percent { "0%" } else { "0" });
        }
        if self.percent {
            return write!(f, "{}%", Decimal(p * 100.0));
        }
        if p >= 1e-4 || !p.is_finite() {
            return write!(f, "{}", Decimal(p));
        }
        // Scientific notation with 2 significant digits, without a trailing `.0`.
        f.write_str(&format!("{p:.1e}").replace(".0e", "e"))
    }
}

/// A positive number in plain decimals with 2 significant digits, without trailing zeros:
/// `12`, `0.21`, `0.0018`.
struct Decimal(f64);

impl fmt::Display for Decimal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let x = self.0;
        if !x.is_finite() {
            return write!(f, "{x}");
        }
        // The decimal exponent after rounding to 2 significant digits (9.96 is 1.0e1).
        let exponent = format!("{x:.1e}")
            .split_once('e')
            .and_then(|(_, e)| e.parse::<i32>().ok())
            .unwrap_or(0);
        let digits = (1 - exponent).max(0) as usize;
        let text = format!("{x:.digits$}");
        if text.contains('.') {
            f.write_str(text.trim_end_matches('0').trim_end_matches('.'))
        } else {
            f.write_str(&text)
        }
    }
}

/// A number the caller gave, every digit of it: `0.01`, `0.8`, and `1e-7` rather than
/// `0.0000001` (scientific notation below 1e-4, where decimals get long).
pub(crate) struct Given(pub(crate) f64);

impl fmt::Display for Given {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let x = self.0;
        if x != 0.0 && x.abs() < 1e-4 {
            write!(f, "{x:e}")
        } else {
            write!(f, "{x}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_rates_read_well() {
        let cases = [
            (0, "0 B"),
            (1023, "1023 B"),
            (1024, "1.00 KiB"),
            (12_345, "12.1 KiB"),
            (200 << 20, "200 MiB"),
            (3 << 40, "3.00 TiB"),
        ];
        for (bytes, text) in cases {
            assert_eq!(Bytes(bytes).to_string(), text);
        }
        let cases = [
            (0.0, "0%", "0"),
            (0.01, "1%", "0.01"),
            (0.0021, "0.21%", "0.0021"),
            (0.1234, "12%", "0.12"),
            (1.0, "100%", "1"),
            (0.000_34, "0.034%", "0.00034"),
            (0.099_96, "10%", "0.1"),
            (1.8e-5, "0.0018%", "1.8e-5"),
            (1e-6, "0.0001%", "1e-6"),
            (1e-7, "0.00001%", "1e-7"),
            (3.4e-7, "0.000034%", "3.4e-7"),
            (1.999_999_999_999_999_4e-8, "0.000002%", "2e-8"),
        ];
        for (rate, percent, plain) in cases {
            assert_eq!(Rate::new(rate, true).to_string(), percent, "{rate}");
            assert_eq!(Rate::plain(rate).to_string(), plain, "{rate}");
        }
        for (given, text) in [
            (0.01, "0.01"),
            (1e-7, "1e-7"),
            (0.8, "0.8"),
            (1.5e-5, "1.5e-5"),
        ] {
            assert_eq!(Given(given).to_string(), text);
        }
    }
}
