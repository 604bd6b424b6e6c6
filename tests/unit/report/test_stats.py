"""The reporter's statistics: censored outcomes, paired ratios, the Turnbull median, best of k, the rules."""

import math

import numpy as np
import pandas as pd
import pytest

from echo_experiments.report import stats
from echo_experiments.report.verdicts.claims import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED, judge

INF = math.inf


def trials(*outcomes, study="study:0:0"):
    """Trials 0, 1, ... of one study: (status, fresh examples to target or at the stop)."""
    return pd.DataFrame([{"study_key": study, "trial": i, "status": s,
                          "fresh_examples_to_target": n if s == "reached_target" else None,
                          "fresh_examples": n if n is not None else 1000} for i, (s, n) in enumerate(outcomes)])


def test_each_status_enters_as_the_interval_it_knows():
    bounds = stats.outcome_bounds(trials(("reached_target", 100), ("pruned", 150), ("not_reached", 1000),
                                         ("diverged", None)))
    assert list(zip(bounds["lo"], bounds["hi"])) == [(100, 100), (150, INF), (INF, INF), (INF, INF)]


def test_a_pair_is_an_interval_of_ratios_and_a_draw_neither_reached_is_left_out():
    a = stats.outcome_bounds(trials(("reached_target", 50), ("reached_target", 300), ("pruned", 200),
                                    ("diverged", None), ("reached_target", 80)))
    b = stats.outcome_bounds(trials(("reached_target", 100), ("pruned", 150), ("reached_target", 100),
                                    ("not_reached", 1000), ("diverged", None)))
    pairs = stats.Pairs.of(a, b)
    assert pairs.neither == 1 and len(pairs) == 4
    assert list(pairs.low) == [0.5, 0.0, 2.0, 0.0] and list(pairs.high) == [0.5, 2.0, INF, 0.0]
    effect = stats.paired_effect(pairs, resamples=50)
    assert (effect["n_fewer"], effect["n_more"], effect["n_same"], effect["n_open"]) == (2, 1, 0, 1)


def test_the_censored_median_is_the_plain_median_without_censoring_and_uses_the_censored_draws():
    exact = np.array([0.5, 0.8, 0.9, 1.2, 2.0])
    assert stats.censored_median(exact, exact) == (0.9, 0.9)
    # Three draws known to be above 1 pull the median above 1, though none is known exactly.
    low = np.array([0.5, 0.8, 1.5, 1.6, 1.7])
    high = np.array([0.5, 0.8, INF, INF, INF])
    lower, upper = stats.censored_median(low, high)
    assert lower >= 1.5


def test_turnbull_puts_the_mass_of_a_censored_value_above_its_bound():
    left, right, p = stats.turnbull(np.array([1.0, 2.0, 3.0]), np.array([1.0, INF, 3.0]))
    assert list(zip(left, right)) == [(1.0, 1.0), (3.0, 3.0)] and p.tolist() == pytest.approx([1 / 3, 2 / 3])


def test_the_bootstrap_is_fixed_by_its_seed_and_resamples_studies_then_draws():
    a = pd.concat([stats.outcome_bounds(trials(*[("reached_target", 100 + 10 * i + s) for i in range(4)],
                                               study=f"study:0:{s}")) for s in range(3)])
    b = pd.concat([stats.outcome_bounds(trials(*[("reached_target", 150 + 7 * i) for i in range(4)],
                                               study=f"study:0:{s}")) for s in range(3)])
    pairs = stats.Pairs.of(a, b)
    first, again = stats.bootstrap(pairs, 200), stats.bootstrap(pairs, 200)
    assert (first[0] == again[0]).all() and first[0].min() >= pairs.low.min() and first[1].max() <= pairs.high.max()


def test_best_of_k_is_the_median_of_the_fewest_among_k_draws():
    curve = stats.best_of_k(np.array([1.0, 2.0, 3.0, INF]), [1, 2, 3], resamples=50)
    assert curve["median_best"].tolist() == [2.0, 2.0, 1.0]


def effect(**values):
    return {"n_draws": 12, "evaluations": 5.0, "resolution": 50.0, "tolerance": 0.01, **values}


@pytest.mark.parametrize("numbers,verdict,reason", [
    (effect(ci_low=0.5, ci_high=0.9), REPRODUCED, "below 1"),
    (effect(ci_low=0.5, ci_high=0.9, evaluations=1.5), INCONCLUSIVE, "under 2 evaluations"),
    (effect(ci_low=0.95, ci_high=1.2), NOT_REPRODUCED, "excludes a saving of 10%"),
    (effect(ci_low=0.95, ci_high=1.2, resolution=12.0), INCONCLUSIVE, "at least 40 needed"),
    (effect(ci_low=0.7, ci_high=1.1), INCONCLUSIVE, "about 48 draws"),
    (effect(ci_low=0.5, ci_high=0.9, n_draws=4), INCONCLUSIVE, "too few draws: 4"),
    (effect(ci_low=0.5, ci_high=0.9, off_factor="x trained 1.5"), INCONCLUSIVE, "confounded: x trained 1.5"),
    (effect(ci_low=0.5, ci_high=0.9, unfinished="study 2 has 3 of its 6 trials"), INCONCLUSIVE, "not yet a result"),
])
def test_the_fewer_rules(numbers, verdict, reason):
    got, why = judge("fewer", numbers)
    assert got == verdict and reason in why


def test_the_speedup_and_no_loss_rules():
    assert judge("faster", effect(ci_low=1.3, ci_high=2.5))[0] == REPRODUCED
    assert judge("faster", effect(ci_low=1.3, ci_high=2.5), paper=3.25)[0] == NOT_REPRODUCED
    assert judge("faster", effect(ci_low=1.3, ci_high=3.5), paper=3.25)[0] == REPRODUCED
    assert judge("no_loss", effect(ci_low=-0.005, ci_high=0.02))[0] == REPRODUCED
    assert judge("no_loss", effect(ci_low=-0.05, ci_high=-0.02))[0] == NOT_REPRODUCED
    assert judge("no_loss", effect(ci_low=-0.05, ci_high=0.02))[0] == INCONCLUSIVE
