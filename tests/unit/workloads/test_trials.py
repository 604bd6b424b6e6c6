"""Quasi-random studies: the draws, their scales, and a trial's config."""

import math

import pytest
from conftest import compose_config

from echo_experiments.core.schema import ConfigError
from echo_experiments.core.search_space import scale, unit_position
from echo_experiments.workloads.trials import apply_trial, trial_values, unit_point


def test_a_trial_is_one_point_of_its_studys_sequence_the_same_every_time():
    assert (unit_point(3, 0, 4, 0, "halton") == unit_point(3, 0, 4, 0, "halton")).all()
    assert not (unit_point(3, 0, 4, 0, "halton") == unit_point(3, 1, 4, 0, "halton")).all()  # another study
    assert not (unit_point(3, 0, 4, 0, "halton") == unit_point(3, 0, 4, 1, "halton")).all()  # another seed
    points = [unit_point(2, 0, k, 0, "sobol") for k in range(8)]
    assert all(((0 <= p) & (p < 1)).all() for p in points) and len({tuple(p) for p in points}) == 8


@pytest.mark.parametrize("kind,low,high", [("linear", 0.0, 2.0), ("log", 0.01, 0.5), ("log_one_minus", 0.8, 0.99)])
def test_each_scale_maps_the_unit_interval_onto_its_range_and_back(kind, low, high):
    assert scale(0.0, low, high, kind) == pytest.approx(low)
    for u in (0.1, 0.5, 0.9):
        value = scale(u, low, high, kind)
        assert low < value < high and unit_position(value, low, high, kind) == pytest.approx(u)
    if kind == "log":  # the middle of a log range is the geometric mean
        assert scale(0.5, low, high, kind) == pytest.approx(math.sqrt(low * high))


def test_an_int_scale_covers_both_ends():
    assert {scale(u / 100, 1, 3, "int") for u in range(100)} == {1, 2, 3}


def test_a_trials_config_has_its_values_and_its_own_seed():
    cfg = compose_config("workload=synthetic", "tuning.study=1", "tuning.trial=2")
    trial = apply_trial(cfg)
    values = trial_values(list(cfg.workload.search_space), 1, 2)
    assert trial.optimizer.learning_rate == pytest.approx(values["optimizer.learning_rate"])
    assert trial.optimizer.momentum == pytest.approx(values["optimizer.momentum"])
    other = apply_trial(compose_config("workload=synthetic", "tuning.study=1", "tuning.trial=3"))
    assert trial.seed != other.seed and 0 <= trial.seed < 2**31
    assert apply_trial(compose_config("workload=synthetic")) is not None  # outside a study: unchanged


def test_a_trial_needs_both_keys_and_a_search_space():
    with pytest.raises(ConfigError, match="tuning.trial"):
        apply_trial(compose_config("workload=synthetic", "tuning.study=0"))
    with pytest.raises(ConfigError, match="workload.search_space"):
        apply_trial(compose_config("workload=synthetic", "tuning.study=0", "tuning.trial=0",
                                   "workload.search_space=[]"))
