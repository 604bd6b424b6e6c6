"""The README's findings line says what claims.csv and autopilot.csv say, and nothing else."""

import pandas as pd

from paper.verdicts.findings import findings


def test_the_line_counts_the_verdicts_names_the_largest_factors_speedup_and_the_checks():
    claims = pd.DataFrame([
        {"claim": "C1", "workload": "w", "comparison": "x", "short": "x", "verdict": "reproduced",
         "effect": 0.7, "ci_low": 0.6, "ci_high": 0.8},
        {"claim": "C3", "workload": "w", "comparison": "before_augmentation e=2 vs baseline", "short": "e=2",
         "verdict": "inconclusive", "effect": 1.2, "ci_low": 0.9, "ci_high": 1.5},
        {"claim": "C3", "workload": "w", "comparison": "before_augmentation e=5 vs baseline", "short": "e=5",
         "verdict": "reproduced", "effect": 1.704, "ci_low": 1.11, "ci_high": 2.33},
        {"claim": "C3", "workload": "w", "comparison": "before_augmentation e=5 vs baseline, reaching 3.25x",
         "short": "e=5 vs the paper's 3.25x", "verdict": "below", "effect": 1.704, "ci_low": 1.11,
         "ci_high": 2.33, "later": 1.53, "earlier": 1.92},
        {"claim": "C4", "workload": "w", "comparison": "y", "short": "batch e=8/4", "verdict": "ours: no saving",
         "effect": 1.05, "ci_low": 0.98, "ci_high": 1.18},
        # The last row, but a step of e, not a factor against no echoing: never the headline.
        {"claim": "C3", "workload": "w", "comparison": "before_augmentation e=5 vs before_augmentation e=4",
         "short": "e=5 over e=4", "verdict": "inconclusive", "effect": 1.05, "ci_low": 0.66, "ci_high": 1.73}])
    checks = pd.DataFrame({"check": ["A1", "A2", "A3", "A4"],
                           "verdict": ["met", "inconclusive", "not measured", "inconclusive"]})
    line = " ".join(findings(claims, checks).split())
    # The row against the paper's number and the finding of ours are counted apart from the paper's claims.
    assert "measured as 4 comparisons" in line and "**2 reproduced, 2 inconclusive, 0 not reproduced**" in line
    assert ("The wall-clock speedup at e=5 on `w` is 1.70x [1.11, 2.33] (reproduced); below the paper's 3.25x.") in line
    assert "Findings of ours, which the paper does not claim: batch e=8/4 on `w`: ours: no saving." in line
    # Each verdict named as it is: an inconclusive check is not one the autopilot failed.
    assert line.endswith("met 1 of its 4 checks (met: A1; inconclusive: A2, A4; not measured: A3).")
    assert max(len(row) for row in findings(claims, checks).splitlines()) <= 116


def test_a_workload_whose_seconds_are_not_timed_yet_is_said_to_be_so_not_given_a_number():
    claims = pd.DataFrame([
        {"claim": "C3", "workload": "lm", "comparison": "before_batching e=5 vs baseline", "short": "e=5",
         "verdict": "inconclusive", "effect": float("nan"), "ci_low": float("nan"), "ci_high": float("nan")}])
    line = " ".join(findings(claims, pd.DataFrame({"check": [], "verdict": []})).split())
    assert "The wall-clock speedup on `lm` is not measured yet." in line and "nan" not in line
