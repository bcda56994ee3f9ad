//! The flags that several subcommands take, each defined once: its value, range and default.
//!
//! A value out of range is refused while the command line is parsed: clap's error, naming the
//! flag, with status 2, before any work. [`Sizing`] (`--capacity`, `--fpr`, `--memory`) is
//! flattened into `seen dedup` and `seen size`, which size a filter the same way; `seen bench`
//! sizes its structures for the keys it inserts unless told, so it takes `--capacity` and
//! `--fpr` on their own, with the same value parsers. `--threads` is one count in `seen
//! dedup` and a list of counts in `seen bench`, each count in [`threads`]'s range;
//! `--remember-probability` is [`probability`] everywhere.

use clap::Args;
use clap::builder::{RangedU64ValueParser, TypedValueParser};

use crate::units::parse_size;

/// `--capacity`'s default in `seen dedup` and `seen size`.
pub(crate) const DEFAULT_CAPACITY: u64 = 10_000_000;

/// `--fpr`'s default.
pub(crate) const DEFAULT_FPR: f64 = 1e-4;

/// `--remember-probability`'s default.
pub(crate) const DEFAULT_REMEMBER_PROBABILITY: f64 = 0.9;

/// The most threads `--threads` takes.
pub(crate) const MAX_THREADS: u32 = 1024;

/// How a filter is sized: for a number of keys at a false-positive rate, or by its memory.
#[derive(Args, Clone)]
pub(crate) struct Sizing {
    /// Distinct keys the filter is sized for (with --window, each period's new keys; a growing
    /// filter's first layer).
    #[arg(long, default_value_t = DEFAULT_CAPACITY, value_name = "N", value_parser = capacity)]
    pub(crate) capacity: u64,
    /// The false-positive rate at capacity, strictly between 0 and 1: the probability that a
    /// key never seen is taken for one seen (a new record dropped), over the whole window with
    /// --window, however much a growing filter grows.
    #[arg(long, default_value_t = DEFAULT_FPR, value_name = "P", value_parser = probability,
          allow_negative_numbers = true)]
    pub(crate) fpr: f64,
    /// Size by memory instead of --capacity: a fixed-size filter of at most SIZE, for the most
    /// keys it holds at --fpr (with --window, each period's). `256MiB`, `1GiB`, `500MB`; K, M, G
    /// are binary, KB, MB, GB decimal. Past them it drops more new records than --fpr says (`seen
    /// dedup` warns when).
    #[arg(long, value_name = "SIZE", value_parser = parse_size, conflicts_with = "capacity")]
    pub(crate) memory: Option<u64>,
}

/// `--capacity`'s values: a count of keys from 1.
pub(crate) fn capacity(text: &str) -> Result<u64, String> {
    match text.trim().parse::<u64>() {
        Ok(0) => Err("a count of keys of at least 1, got 0".to_owned()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!(
            "not a whole number from 1 to {}: {text:?}",
            u64::MAX
        )),
    }
}

/// `--threads`' values (each of a list): a count from 1 to [`MAX_THREADS`].
pub(crate) fn threads() -> impl TypedValueParser<Value = u32> {
    RangedU64ValueParser::<u32>::new().range(1..=u64::from(MAX_THREADS))
}

/// `--fpr`'s and `--remember-probability`'s values: a probability strictly between 0 and 1.
pub(crate) fn probability(text: &str) -> Result<f64, String> {
    let p: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("not a number: {text:?}"))?;
    if p > 0.0 && p < 1.0 {
        Ok(p)
    } else {
        Err(format!("a probability strictly between 0 and 1, got {p}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probabilities_are_strictly_between_0_and_1() {
        assert_eq!(probability("1e-4"), Ok(1e-4));
        assert_eq!(probability("0.9"), Ok(0.9));
        for bad in ["0", "1", "-0.5", "1.5", "NaN", "inf", "", "lots"] {
            assert!(probability(bad).is_err(), "{bad}");
        }
        assert_eq!(
            probability("1"),
            Err("a probability strictly between 0 and 1, got 1".to_string())
        );
    }
}
