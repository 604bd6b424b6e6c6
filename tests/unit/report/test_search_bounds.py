"""Which best trials the search-bound check reads: each claim's own (the fewest fresh examples to target, and the
best metric for the fixed-budget comparison)."""

import pandas as pd

from echo_experiments.report.tables import BEST_METRIC, FEWEST_FRESH, search_bounds

CONDITION = {"workload": "w", "placement": "none", "echo_factor": 1.0, "batch_size": 32, "shuffle_buffer": 0,
             "echo_auto": False, "echo_max_factor": 1.0, "echo_cap_rule": "fixed"}


def trial(path, trial, fresh, metric):
    return {**CONDITION, "study_key": "study:0:0", "trial": trial, "path": path, "status": "reached_target",
            "fresh_examples_to_target": fresh, "steps_to_target": fresh // 32, "seconds_to_target": 1.0,
            "best_metric": metric, "target_mode": "max"}


def test_the_fastest_and_the_most_accurate_trial_are_each_checked_against_the_bounds():
    trials = pd.DataFrame([trial("a", 0, 1000, 0.90), trial("b", 1, 2000, 0.95)])
    search = pd.DataFrame([{"path": "a", "key": "lr", "value": 0.5, "low": 0.01, "high": 0.5, "scale": "log",
                            "position": 1.0},
                           {"path": "b", "key": "lr", "value": 0.07, "low": 0.01, "high": 0.5, "scale": "log",
                            "position": 0.5}])
    bounds = search_bounds(trials, search)
    assert dict(zip(bounds["best"], bounds["at_bound"])) == {FEWEST_FRESH: True, BEST_METRIC: False}
    assert dict(zip(bounds["best"], bounds["value"])) == {FEWEST_FRESH: 0.5, BEST_METRIC: 0.07}
