//! `seen sample`: generated input with a known share of duplicates, for trying the command
//! (the README's first command) and for benchmarks.

use std::io::{self, BufWriter, Write};

use clap::Args;

use crate::Failure;

#[derive(Args)]
pub(crate) struct Sample {
    /// The number of lines.
    #[arg(default_value_t = 1_000_000)]
    lines: u64,
    /// The probability that a line repeats an earlier key (uniformly chosen among the keys
    /// printed so far) rather than print a new one.
    #[arg(long, default_value_t = 0.2, value_name = "P")]
    duplicates: f64,
    /// The seed: the same seed prints the same lines.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

/// SplitMix64: a small, fast generator, good enough to pick keys.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A uniform value in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A uniform value in [0, n) (multiply-shift; n below 2^64).
    fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(n)) >> 64) as u64
    }
}

pub(crate) fn run(args: &Sample) -> Result<(), Failure> {
    if !(0.0..1.0).contains(&args.duplicates) {
        return Err(Failure(format!(
            "--duplicates must be at least 0 and below 1, got {}",
            args.duplicates
        )));
    }
    let mut rng = SplitMix(args.seed);
    let mut out = BufWriter::with_capacity(1 << 17, io::stdout().lock());
    let mut keys = 0u64;
    for _ in 0..args.lines {
        let key = if keys > 0 && rng.unit() < args.duplicates {
            rng.below(keys)
        } else {
            keys += 1;
            keys - 1
        };
        if let Err(e) = writeln!(out, "key-{key}") {
            return broken_pipe_or(e);
        }
    }
    out.flush().or_else(broken_pipe_or)
}

/// A reader that stopped reading (`seen sample | head`) ends the run quietly.
fn broken_pipe_or(e: io::Error) -> Result<(), Failure> {
    if e.kind() == io::ErrorKind::BrokenPipe {
        Ok(())
    } else {
        Err(Failure(format!("cannot write the output: {e}")))
    }
}
