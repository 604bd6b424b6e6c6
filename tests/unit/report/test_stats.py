"""The reporter's statistics: censored outcomes, paired ratios, the Turnbull median, best of k, the rules."""

import math

import numpy as np
import pandas as pd
import pytest

from echo_experiments.report import stats
from paper.verdicts.claims import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED, judge

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
    assert pairs.neither == 0 and pairs.diverged == (1, 1) and len(pairs) == 3
    assert list(pairs.low) == [0.5, 0.0, 2.0] and list(pairs.high) == [0.5, 2.0, INF]
    effect = stats.paired_effect(pairs, resamples=50)
    assert (effect["n_fewer"], effect["n_more"], effect["n_same"], effect["n_open"]) == (1, 1, 0, 1)
    assert (effect["n_diverged_a"], effect["n_diverged_b"]) == (1, 1)


def test_a_draw_says_something_only_where_one_side_reached_and_neither_diverged():
    """Pruned against pruned, pruned against never, never against pruned: neither reached, the ratio could be
    anything ([0, inf]), and the draw is left out, as never against never always was. A reference that diverged
    against a condition that reached is no saving (it was a ratio of 0): left out, and counted on its side."""
    a = stats.outcome_bounds(trials(("pruned", 200), ("pruned", 200), ("not_reached", 1000), ("not_reached", 1000),
                                    ("reached_target", 90), ("reached_target", 90)))
    b = stats.outcome_bounds(trials(("pruned", 300), ("not_reached", 1000), ("pruned", 300), ("not_reached", 1000),
                                    ("diverged", None), ("reached_target", 100)))
    pairs = stats.Pairs.of(a, b)
    assert (len(pairs), pairs.neither, pairs.diverged) == (1, 4, (0, 1))
    assert (pairs.low.tolist(), pairs.high.tolist()) == ([0.9], [0.9])


def test_an_interactions_draw_unbounded_both_ways_is_left_out():
    """C5's batch 128/16: a baseline not reached under a reached condition (a ratio of 0) over a pair known only
    to be at most 1 gives [0 / 1, 0 / 0] = [0, inf]: it says nothing of the interaction."""
    a = stats.outcome_bounds(trials(("reached_target", 50), ("reached_target", 60)))
    b = stats.outcome_bounds(trials(("not_reached", 1000), ("reached_target", 100)))
    c = stats.outcome_bounds(trials(("reached_target", 100), ("reached_target", 80)))
    d = stats.outcome_bounds(trials(("pruned", 100), ("reached_target", 100)))
    pairs = stats.Pairs.of(a, b).over(stats.Pairs.of(c, d))
    assert len(pairs) == 1 and pairs.neither == 1 and pairs.low.tolist() == pytest.approx([0.75])


def test_a_median_that_is_not_unique_is_the_range_of_medians():
    """Four draws, one censored: the estimate's distribution is exactly 1/2 from the second draw to the third,
    so every value from 0.5 to 0.6 is a median; EM's round-off must not pick one end."""
    low, high = np.array([0.3, 0.5, 0.6, 0.8]), np.array([0.3, 0.5, 0.6, INF])
    assert stats.censored_median(low, high) == pytest.approx((0.5, 0.6))
    exact = np.array([0.3, 0.5, 0.6, 0.8])
    assert stats.censored_median(exact, exact) == (0.5, 0.6)


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
    assert judge("faster", effect(ci_low=1.3, ci_high=2.5), paper=3.25)[0] == "below"  # the paper's number
    assert judge("faster", effect(ci_low=1.3, ci_high=3.5), paper=3.25)[0] == "consistent with"
    assert judge("faster", effect(ci_low=0.8, ci_high=1.05))[0] == NOT_REPRODUCED
    assert judge("no_loss", effect(ci_low=-0.005, ci_high=0.02))[0] == REPRODUCED
    assert judge("no_loss", effect(ci_low=-0.05, ci_high=-0.02))[0] == NOT_REPRODUCED
    assert judge("no_loss", effect(ci_low=-0.05, ci_high=0.02))[0] == INCONCLUSIVE


def test_a_speedup_is_refuted_only_at_a_fine_enough_cadence():
    """C3 at e=5: 14-20 evaluations to the baseline's target, where the Resolution rule asks 40 to refute. Against
    the paper's number the row says where its interval lies, whatever the cadence (its margin stands beside it)."""
    verdict, why = judge("faster", effect(ci_low=1.11, ci_high=2.33, resolution=14.0), paper=3.25)
    assert (verdict, why) == ("below", "the interval lies below the paper's 3.25x")
    assert judge("faster", effect(ci_low=0.8, ci_high=1.05, resolution=14.0))[0] == INCONCLUSIVE
    assert judge("faster", effect(ci_low=1.11, ci_high=2.33, resolution=14.0))[0] == REPRODUCED


def test_with_fewer_than_five_studies_every_study_must_point_the_claims_way():
    against = effect(ci_low=0.5, ci_high=0.9, n_studies=3, n_studies_against=1)
    verdict, why = judge("fewer", against)
    assert verdict == INCONCLUSIVE and why == "studies disagree: 1 of 3 studies' study-best ratios point the other way"
    verdict, why = judge("fewer", {**against, "n_studies": 5})
    assert verdict == REPRODUCED and why.endswith("; 1 of 5 studies' study-best ratios point the other way")
    assert judge("fewer", {**against, "n_studies_against": 0})[0] == REPRODUCED


def test_an_effect_of_exactly_two_evaluations_on_the_grid_reproduces():
    """C2 on the language model: the 10th evaluation against the reference's 12th is 2 evaluations, though the
    counts at them (32,004 and 38,400) make it 1.99875 off the grid."""
    assert judge("fewer", effect(ci_low=0.5, ci_high=0.83, evaluations=2.0))[0] == REPRODUCED


def test_a_median_of_five_studies_has_the_order_statistics_interval():
    """With 5 studies the median's 90% interval is [min, max] (coverage 1 - 2/32 = 0.94); with 9, the second
    smallest to the second largest (0.96; the third would be 0.82). It resamples nothing."""
    from paper.verdicts.evidence import median_interval

    assert median_interval(np.array([1.5, 0.98, 2.33, 1.11, 1.7])) == (0.98, 2.33)
    assert median_interval(np.arange(1.0, 10.0)) == (2.0, 8.0)
    assert all(map(math.isnan, median_interval(np.array([]))))


def test_a_reached_count_is_read_as_lying_after_the_evaluation_before_it():
    """docs/protocol.md, 2026-12-07: reached at an evaluation counting x, the evaluation before at p: [p + 1, x].
    One evaluation apart is still fewer; the same evaluation is not ordered; exact counts where asked."""
    rows = pd.DataFrame({"status": ["reached_target", "reached_target", "reached_target", "pruned"],
                         "fresh_examples_to_target": [640.0, 1280.0, 1280.0, math.nan],
                         "fresh_examples": [640, 1280, 1280, 1920],
                         "fresh_before_target": [0.0, 640.0, 640.0, math.nan]})
    bounds = stats.outcome_bounds(rows)
    assert bounds[["lo", "hi"]].values.tolist() == [[1, 640], [641, 1280], [641, 1280], [1920, math.inf]]
    exact = stats.outcome_bounds(rows, censored=False)
    assert exact[["lo", "hi"]].values.tolist()[:3] == [[640, 640], [1280, 1280], [1280, 1280]]
    keyed = bounds.assign(study_key="s", trial=[0, 0, 1, 1])
    a, b = keyed.iloc[[0, 2]], keyed.iloc[[1, 2]].assign(trial=[0, 1])
    effect = stats.paired_effect(stats.Pairs.of(a, b), resamples=200)
    assert (effect["n_fewer"], effect["n_open"]) == (1, 1)  # 640 against 1,280: fewer; 1,280 against 1,280: open
    exact = stats.paired_effect(stats.Pairs.of(*(stats.outcome_bounds(rows, censored=False).assign(
        study_key="s", trial=[0, 0, 1, 1]).iloc[i].assign(trial=[0, 1]) for i in ([0, 2], [1, 2]))), resamples=200)
    assert (exact["n_fewer"], exact["n_same"]) == (1, 1)  # read as exact counts the tie is a tie
