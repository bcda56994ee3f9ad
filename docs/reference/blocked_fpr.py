#!/usr/bin/env python3
"""High-precision reference values for the blocked false-positive model of src/sizing/blocked.rs.

The crate computes the expected false-positive rate of a blocked filter (B bits per block, k
positions per item drawn uniformly with replacement, a Poisson(lambda) number of items in the
query's block) with an occupancy chain: positive terms only, in f64. This script computes the
same quantity by an independent route, the inclusion-exclusion closed form, in exact rational
coefficients and 120-digit arithmetic, where its cancellation (up to ~50 digits here) is harmless:

    F(j)         = sum_d P(query draws d distinct positions)
                        * sum_{i=0..d} (-1)^i C(d, i) (1 - i/B)^(j k)
    rate(lambda) = sum_j Poisson(j; lambda) F(j)
                 = sum_d P(d) sum_i (-1)^i C(d, i) exp(-lambda (1 - (1 - i/B)^k))

(the Poisson generating function sums the series over j in closed form: no truncation).
P(d) = B (B-1) ... (B-d+1) S2(k, d) / B^k, with S2 the Stirling numbers of the second kind.

For each (layout, k, target p) below, it finds the load lambda where rate(lambda) = p, rounds
lambda to 6 significant digits, and prints a Rust table row (layout, k, lambda, rate(lambda)),
the rate as the f64 nearest to it. The rows are pinned in `src/sizing/blocked/tests.rs`
(`REFERENCE`); the k are those the sizing picks (or would pick, below a layout's limit).

Regenerate with:

    pip install mpmath
    python3 docs/reference/blocked_fpr.py > /tmp/rows.rs

and paste the rows into `REFERENCE`. The script checks every value against a second
computation at 200 digits and stops if they disagree beyond 1e-40 (relative).
"""

from fractions import Fraction
from math import comb

import mpmath as mp

POINTS = [
    # (layout, block bits B, k, target p)
    ("Word", 64, 1, "0.5"),
    ("Word", 64, 3, "1e-1"),
    ("Word", 64, 5, "1e-2"),
    ("Word", 64, 7, "1e-3"),
    ("Word", 64, 9, "1e-4"),
    ("Word", 64, 12, "1e-6"),
    ("Word", 64, 14, "1e-8"),
    ("Word", 64, 17, "1e-10"),
    ("Word", 64, 19, "1e-12"),
    ("Word", 64, 23, "1e-15"),
    ("Word", 64, 28, "1e-20"),
    ("Word", 64, 32, "1e-25"),
    ("Word", 64, 32, "1e-30"),
    ("Word", 64, 1, "1e-3"),
    ("Line", 512, 1, "0.5"),
    ("Line", 512, 3, "1e-1"),
    ("Line", 512, 6, "1e-2"),
    ("Line", 512, 9, "1e-3"),
    ("Line", 512, 12, "1e-4"),
    ("Line", 512, 16, "1e-6"),
    ("Line", 512, 20, "1e-8"),
    ("Line", 512, 24, "1e-10"),
    ("Line", 512, 27, "1e-12"),
    ("Line", 512, 31, "1e-15"),
    ("Line", 512, 39, "1e-20"),
    ("Line", 512, 46, "1e-25"),
    ("Line", 512, 53, "1e-30"),
    ("Line", 512, 64, "1e-3"),
]


def stirling2_row(k):
    """S2(k, d) for d = 0..k."""
    row = [1] + [0] * k
    for n in range(1, k + 1):
        new = [0] * (k + 1)
        for d in range(1, n + 1):
            new[d] = d * row[d] + row[d - 1]
        row = new
    return row


def coefficients(b, k):
    """Exact (c_i, r_i) with rate(lambda) = sum_i c_i exp(-lambda (1 - r_i))."""
    s2 = stirling2_row(k)
    distinct = []
    for d in range(k + 1):
        falling = 1
        for i in range(d):
            falling *= b - i
        distinct.append(Fraction(falling * s2[d], b**k))
    assert sum(distinct) == 1
    coeff = [Fraction(0)] * (k + 1)
    for d, p in enumerate(distinct):
        for i in range(d + 1):
            coeff[i] += (-1) ** i * comb(d, i) * p
    ratios = [Fraction(b - i, b) ** k for i in range(k + 1)]
    return coeff, ratios


def rate(coeff, ratios, lam):
    total = mp.mpf(0)
    for c, r in zip(coeff, ratios):
        if c:
            total += mp.mpf(c.numerator) / c.denominator * mp.exp(
                -lam * (1 - mp.mpf(r.numerator) / r.denominator)
            )
    return total


def load_for(coeff, ratios, target):
    """lambda with rate(lambda) = target, by bisection on log(lambda)."""
    lo, hi = mp.mpf("1e-40"), mp.mpf(600)
    for _ in range(300):
        mid = mp.sqrt(lo * hi)
        if rate(coeff, ratios, mid) <= target:
            lo = mid
        else:
            hi = mid
    return lo


def main():
    for layout, b, k, p in POINTS:
        coeff, ratios = coefficients(b, k)
        mp.mp.dps = 120
        lam = load_for(coeff, ratios, mp.mpf(p))
        # 6 significant digits, then the f64 nearest to them: the value Rust reads.
        lam_f64 = float(mp.nstr(lam, 6))
        lam_text = repr(lam_f64)
        value = rate(coeff, ratios, mp.mpf(lam_f64))
        mp.mp.dps = 200
        check = rate(coeff, ratios, mp.mpf(lam_f64))
        assert abs(check - value) <= abs(value) * mp.mpf("1e-40"), (layout, k, p)
        mp.mp.dps = 120
        # The shortest decimal that reads back as the f64 nearest to the value.
        value_text = repr(float(value))
        print(f"    (Layout::{layout}, {k}, {lam_text}, {value_text}), // p = {p}")


if __name__ == "__main__":
    main()
