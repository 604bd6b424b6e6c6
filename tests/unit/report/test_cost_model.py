"""The paper's cost model beside a measured speedup: per study, F / B x max(upstream, e x downstream) of the best
trial, with the study's profiled times from its runs that had the machine to themselves."""

import math

import pandas as pd
import pytest

from echo_experiments.report import cost_model, tables


def run(placement, factor, study, trial, fresh, up=0.6, down=0.1, alone=True, timed=False):
    """A trial row; ``<placement>_auto`` is the autopilot at that placement, ``factor`` its cap."""
    auto = placement.endswith("_auto")
    return {"workload": "w", "placement": placement.removesuffix("_auto"), "echo_factor": 1.0 if auto else factor,
            "echo_auto": auto, "echo_max_factor": factor, "echo_cap_rule": "fixed", "batch_size": 10,
            "shuffle_buffer": 0, "study_key": f"s{study}", "trial": trial,
            "status": "reached_target" if fresh else "not_reached",
            "fresh_examples_to_target": fresh, "steps_to_target": fresh, "seconds_to_target": 50.0,
            "wall_time_s": 60.0, "fresh_examples": 1000, "upstream_s_per_batch": up, "downstream_s_per_step": down,
            "other_cores": 0.0 if alone else 1.0,
            "path": ("timed/" if timed else "") + f"{placement},{factor},{study},{trial}"}


def test_the_model_charges_each_fresh_batch_the_larger_of_the_input_and_its_e_steps():
    rows = [run("none", 1.0, 0, 0, 1000), run("none", 1.0, 0, 1, 800),
            run("before_batching", 4.0, 0, 0, 400), run("before_batching", 8.0, 0, 0, 200),
            # study 1's runs shared the machine but one: its times are that run's (up 0.5, down 0.25)
            run("none", 1.0, 1, 0, 900, up=9.0, down=9.0, alone=False),
            run("before_batching", 4.0, 1, 0, 600, up=7.0, alone=False),
            run("before_batching", 8.0, 1, 0, None, up=0.5, down=0.25)]
    trials = pd.DataFrame(rows)
    seconds = cost_model.model_seconds(trials).set_index(["echo_factor", "study_key"])["model_seconds"]
    # Study 0, R = 6: the baseline's best (800) costs 80 batches x 0.6 s; e=4 costs 40 x max(0.6, 0.4); e=8 is
    # bound by its steps, 20 x 0.8.
    assert seconds[(1.0, "s0")] == pytest.approx(48.0) and seconds[(4.0, "s0")] == pytest.approx(24.0)
    assert seconds[(8.0, "s0")] == pytest.approx(16.0)
    # Study 1, R = 2: the baseline 90 x 0.5, e=4 60 x 1.0; e=8 never reached its target.
    assert seconds[(1.0, "s1")] == pytest.approx(45.0) and seconds[(4.0, "s1")] == pytest.approx(60.0)
    assert math.isinf(seconds[(8.0, "s1")])
    speed = cost_model.with_model(tables.speedups(trials), trials).set_index("echo_factor")
    assert speed.loc[4.0, "model_speedup"] == pytest.approx((2.0 + 0.75) / 2)  # 48/24 and 45/60
    assert (speed.loc[4.0, "model_speedup_min"], speed.loc[4.0, "model_speedup_max"]) == pytest.approx((0.75, 2.0))
    assert speed.loc[8.0, "model_speedup"] == pytest.approx(1.5)  # 3.0 in study 0, 0 where it never reached
    assert speed.loc[4.0, "model_seconds"] == pytest.approx(42.0)


def test_a_study_with_no_profile_alone_and_the_autopilot_have_no_model():
    trials = pd.DataFrame([run("none", 1.0, 0, 0, 1000, alone=False), run("before_batching", 2.0, 0, 0, 600,
                                                                          alone=False),
                           run("none", 1.0, 1, 0, 1000), run("before_batching_auto", 8.0, 1, 0, 300)])
    # Another batch size's profile alone is another pipeline's and another step's: it stands in for none of these.
    trials = pd.concat([trials, pd.DataFrame([{**run("none", 1.0, 0, 1, 900), "batch_size": 20}])], ignore_index=True)
    seconds = cost_model.model_seconds(trials)
    seconds = seconds[seconds["batch_size"] == 10].set_index(["placement", "echo_auto", "study_key"])["model_seconds"]
    assert math.isnan(seconds[("before_batching", False, "s0")]) and math.isnan(seconds[("none", False, "s0")])
    assert math.isnan(seconds[("before_batching", True, "s1")])
    assert seconds[("none", False, "s1")] == pytest.approx(60.0)
    speed = cost_model.with_model(tables.speedups(trials), trials).set_index(["placement", "echo_auto"])
    assert math.isnan(speed.loc[("before_batching", False), "model_speedup"])
    assert math.isnan(speed.loc[("before_batching", True), "model_speedup"])
