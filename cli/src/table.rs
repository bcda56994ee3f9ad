//! Plain-text tables for `seen size` and `seen bench`, the number formats they print, and
//! the printing.

use std::fmt;
use std::io::{self, Write};

use crate::Failure;

/// Rows of cells under a header, printed with every column as wide as its widest cell: the
/// first column left-aligned (names) unless [`numbers_only`](Self::numbers_only), the others
/// right-aligned (numbers).
pub(crate) struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
    first_left: bool,
}

impl Table {
    pub(crate) fn new(header: &[&str]) -> Self {
        Self {
            header: header.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
            first_left: true,
        }
    }

    /// The first column right-aligned too: a table of numbers only.
    pub(crate) fn numbers_only(mut self) -> Self {
        self.first_left = false;
        self
    }

    pub(crate) fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }
}

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let columns = self.header.len();
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (width, cell) in widths.iter_mut().zip(row) {
                *width = (*width).max(cell.chars().count());
            }
        }
        for row in std::iter::once(&self.header).chain(&self.rows) {
            let mut line = String::new();
            for (i, cell) in row.iter().enumerate().take(columns) {
                let width = widths[i];
                let gap = if i == 0 { "" } else { "  " };
                if i == 0 && self.first_left {
                    line.push_str(&format!("{cell:<width$}"));
                } else {
                    line.push_str(&format!("{gap}{cell:>width$}"));
                }
            }
            writeln!(f, "{}", line.trim_end())?;
        }
        Ok(())
    }
}

/// Writes `text` to standard output. A reader that stopped reading (`| head`) is not a
/// failure; any other write error is.
pub(crate) fn print(text: &str) -> Result<(), Failure> {
    let mut out = io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => {
            Err(Failure(format!("cannot write the output: {e}")))
        }
        _ => Ok(()),
    }
}

/// `n` with a comma between groups of three digits: `10,000,000` (indicatif's `HumanCount`).
pub(crate) fn grouped(n: u64) -> String {
    indicatif::HumanCount(n).to_string()
}

/// A size in B, KiB, MiB, GiB, TiB or PiB with 3 significant digits: `54.7 MiB`, `300 MiB`.
/// Not indicatif's `BinaryBytes`, which prints two decimals whatever the size (`54.69 MiB`,
/// `300.00 MiB`): the tables give every figure to 3 significant digits (see [`rate`]).
pub(crate) fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1023.5 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    match unit {
        0 => format!("{bytes} B"),
        _ if value >= 99.95 => format!("{value:.0} {}", UNITS[unit]),
        _ if value >= 9.995 => format!("{value:.1} {}", UNITS[unit]),
        _ => format!("{value:.2} {}", UNITS[unit]),
    }
}

/// A number as the user would write it: `0.0001`, but `1e-30` where the decimal form is long.
pub(crate) fn given(x: f64) -> String {
    let plain = x.to_string();
    if plain.len() > 10 {
        format!("{x:e}")
    } else {
        plain
    }
}

/// A rate or probability in 3 significant digits, in scientific notation: `9.70e-5`; `0` for 0.
pub(crate) fn rate(p: f64) -> String {
    if p == 0.0 {
        "0".to_string()
    } else {
        format!("{p:.2e}")
    }
}

/// A probability as a percentage in plain decimals with 3 significant digits: `19.0%`,
/// `1.99%`, `0.100%`; `0%` for 0.
pub(crate) fn percent(p: f64) -> String {
    let v = p * 100.0;
    if v == 0.0 || !v.is_finite() {
        return format!("{v}%");
    }
    // The exponent after rounding to 3 significant digits (9.9999 is 1.00e1).
    let exponent = format!("{v:.2e}")
        .split_once('e')
        .and_then(|(_, e)| e.parse::<i32>().ok())
        .unwrap_or(0);
    let digits = (2 - exponent).max(0) as usize;
    format!("{v:.digits$}%")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_well() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1_000), "1,000");
        assert_eq!(grouped(10_000_000), "10,000,000");
        assert_eq!(grouped(u64::MAX), "18,446,744,073,709,551,615");
        assert_eq!(human_bytes(1023), "1023 B");
        assert_eq!(human_bytes(1024), "1.00 KiB");
        assert_eq!(human_bytes(57_344_000), "54.7 MiB");
        assert_eq!(human_bytes(300 << 20), "300 MiB");
        assert_eq!(rate(9.7e-5), "9.70e-5");
        assert_eq!(rate(0.0), "0");
        assert_eq!(given(1e-4), "0.0001");
        assert_eq!(given(1e-30), "1e-30");
        assert_eq!(percent(0.19), "19.0%");
        assert_eq!(percent(0.099_999_9), "10.0%");
        assert_eq!(percent(0.0199), "1.99%");
        assert_eq!(percent(0.001), "0.100%");
        assert_eq!(percent(0.75), "75.0%");
        assert_eq!(percent(0.0), "0%");
    }

    #[test]
    fn columns_align() {
        let mut t = Table::new(&["name", "n"]);
        t.row(vec!["a".into(), "1".into()]);
        t.row(vec!["long name".into(), "1,000".into()]);
        assert_eq!(
            t.to_string(),
            "name           n\na              1\nlong name  1,000\n"
        );
    }
}
