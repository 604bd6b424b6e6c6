"""What each comparison is measured on (evidence.py), on trees of runs whose answers are known."""

import pytest
from test_report import make_run

from echo_experiments.report.collect import collect
from paper.verdicts import evidence
from paper.verdicts.claims import BASELINE, Comparison, Condition

E2 = Condition("after_batching", 2.0)


def _trials(root, cadence=100):
    trials = collect([root])[0]
    return trials.assign(eval_every_fresh_examples=float(cadence))


def test_an_effect_is_counted_in_evaluations_on_the_grid(tmp_path):
    """The echoed run's count at its 10th evaluation holds the ids of the batch that crossed it (1,004 for 1,000):
    against the reference's 12th evaluation the effect is 2 evaluations, not 1.99."""
    for trial in range(5):
        make_run(tmp_path, f"b{trial}", trial=trial, fresh=1200, steps=20)
        make_run(tmp_path, f"e{trial}", trial=trial, placement="after_batching", factor=2.0, fresh=1004, steps=31)
    # These runs hold one evaluation each (make_run): read as exact counts, as they were before 2026-12-07.
    numbers = evidence.fewer(_trials(tmp_path), Comparison("x", "fewer", E2), censored=False)
    assert numbers["low"] == pytest.approx(1004 / 1200) and numbers["resolution"] == 12.0
    assert numbers["evaluations"] == 2.0


def test_an_interactions_resolution_is_the_coarsest_of_its_four_conditions(tmp_path):
    counts = {("after_batching", 2.0, 128): 600, ("none", 1.0, 128): 1000, ("after_batching", 2.0, 16): 400,
              ("none", 1.0, 16): 2000}
    for trial in range(5):
        for (placement, factor, batch), fresh in counts.items():
            make_run(tmp_path, f"{placement}{batch}-{trial}", trial=trial, placement=placement, factor=factor,
                     batch=batch, fresh=fresh, steps=int(fresh * factor // batch))
    comparison = Comparison("x", "interaction", Condition("after_batching", 2.0, 128), Condition("none", 1.0, 128),
                            Condition("after_batching", 2.0, 16), Condition("none", 1.0, 16))
    numbers = evidence.fewer(_trials(tmp_path), comparison, censored=False)  # one evaluation each: exact counts
    assert numbers["low"] == pytest.approx((600 / 1000) / (400 / 2000))
    assert numbers["resolution"] == 4.0  # 400 fresh examples at one evaluation every 100; not the 10 of 1,000


def test_the_machines_of_a_speedup_include_its_timed_reruns(tmp_path):
    """A study's seconds come from its best trials timed again alone: a rerun on another CPU model than its study's
    tuning runs makes the study a comparison of machines."""
    for study in range(5):
        make_run(tmp_path, f"b{study}", study=study, fresh=1000, seconds=10.0, steps=16, machine={"cpu": "model X"})
        make_run(tmp_path, f"e{study}", study=study, placement="after_batching", factor=2.0, fresh=1000, seconds=6.0,
                 steps=31, machine={"cpu": "model X"})
    make_run(tmp_path / "timed", "e0", study=0, placement="after_batching", factor=2.0, fresh=1000, seconds=6.0,
             steps=31, machine={"cpu": "model Y"})
    numbers = evidence.faster(_trials(tmp_path), Comparison("x", "faster", E2))
    assert numbers["machines"] == "study:0:0: 2"
    assert (numbers["ci_low"], numbers["ci_high"]) == pytest.approx((10 / 6, 10 / 6))


def test_runs_that_name_no_cpu_model_are_counted(tmp_path):
    for trial in range(3):
        make_run(tmp_path, f"b{trial}", trial=trial, fresh=1200, steps=20)
        make_run(tmp_path, f"e{trial}", trial=trial, placement="after_batching", factor=2.0, fresh=1000, steps=31,
                 machine={"cpu": "model X"})
    trials = _trials(tmp_path)
    chosen = [evidence.select(trials, c) for c in (E2, BASELINE)]
    assert evidence.flags(trials, chosen, [E2, BASELINE])["n_unrecorded"] == 3


def test_a_condition_never_pools_autopilots_whose_caps_were_set_by_other_rules(tmp_path):
    auto = dict(placement="after_batching", factor=1.0, echo_auto=True, echo_max_factor=8.0, steps=30)
    make_run(tmp_path, "fixed", fresh=800, **auto)
    make_run(tmp_path, "paired", fresh=500, echo_cap_rule="paired", **auto)
    trials = _trials(tmp_path)
    chosen = evidence.select(trials, Condition("after_batching", 8.0, auto=True))
    assert chosen["fresh_examples_to_target"].tolist() == [800]
    chosen = evidence.select(trials, Condition("after_batching", 8.0, auto=True, cap_rule="paired"))
    assert chosen["fresh_examples_to_target"].tolist() == [500]
