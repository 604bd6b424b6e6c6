"""What a copy was worth, in fresh examples, as the fixed-factor runs imply it: w = (1 / r - 1) / (e - 1)."""

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from paper.worth import copy_worth

ROOT = Path(__file__).resolve().parents[2]


def trial(placement, factor, study, trial_, fresh, batch=32, path="", trained_at=None):
    """A trial row; ``<placement>_auto`` is the autopilot at that placement, ``factor`` its cap."""
    reached, auto = fresh is not None, placement.endswith("_auto")
    return {"workload": "w", "placement": placement.removesuffix("_auto"), "echo_factor": 1.0 if auto else factor,
            "echo_auto": auto, "echo_max_factor": factor, "echo_cap_rule": "fixed", "batch_size": batch,
            "shuffle_buffer": 0, "effective_echo_factor": trained_at or factor,
            "study_key": f"s{study}", "trial": trial_, "status": "reached_target" if reached else "not_reached",
            "fresh_examples_to_target": fresh, "steps_to_target": fresh, "seconds_to_target": 1.0,
            "path": path or f"{placement},{factor},{study},{trial_},{batch}"}


def test_the_worth_of_a_copy_is_what_the_fresh_ratio_implies_study_by_study():
    rows = [trial("none", 1.0, s, t, f) for s, t, f in ((0, 0, 1000), (0, 1, 800), (1, 0, 1200), (2, 0, 900))]
    # Per study, its best trial: study 0's e=2 needs 500 of the baseline's 800 (a copy worth 0.6), study 1 600 of
    # 1,200 (worth 1), study 2 never reaches the target (worth -1: copies cost progress).
    rows += [trial("before_batching", 2.0, 0, 0, 500), trial("before_batching", 2.0, 0, 1, 700),
             trial("before_batching", 2.0, 1, 0, 600), trial("before_batching", 2.0, 2, 0, None)]
    rows += [trial("after_batching", 4.0, 0, 0, 800)]  # e=4 needs all of the baseline's: a copy worth nothing
    rows += [trial("after_batching_auto", 8.0, 0, 0, 400)]  # the autopilot's factor is a cap: not a fixed factor
    rows += [trial("before_batching", 2.0, 0, 0, 100, batch=64)]  # no baseline at batch 64
    rows += [trial("before_batching", 2.0, 1, 0, 50, path="timed/x")]  # a timed rerun is not a trial
    table = copy_worth.implied(pd.DataFrame(rows), "sweep/w").set_index(["placement", "echo_factor"])
    assert sorted(table.index) == [("after_batching", 4.0), ("before_batching", 2.0)]
    example = table.loc[("before_batching", 2.0)]
    assert example["n_studies"] == 3 and example["fresh_ratio"] == pytest.approx(0.625)  # median of 0.625, 0.5, inf
    assert example["worth"] == pytest.approx(0.6) and (example["worth_min"], example["worth_max"]) == (-1.0, 1.0)
    assert table.loc[("after_batching", 4.0), "worth"] == 0.0
    assert copy_worth.worth(0.25, 4.0) == 1.0 and math.isinf(copy_worth.worth(0.0, 2.0))


def test_the_committed_table_rederives_from_a_folders_fresh_examples_to_target():
    # The language model's echo-factor sweep: each condition's per-study ratio of study-best fresh sequences.
    folder = "lm_echo_factor_sweep_cpu/transformer_pydocs"
    trials = pd.read_csv(ROOT / "results" / folder / "trials.csv")
    reached = trials[trials["status"] == "reached_target"]
    best = reached.groupby(["placement", "echo_factor", "study"])["fresh_examples_to_target"].min()
    committed = pd.read_csv(ROOT / "results" / "copy_worth.csv").fillna({"also_in": ""})
    # A condition whose runs another folder holds too (its e = 2 is lm_batch_size_sweep_cpu's) is that row.
    ours = committed[(committed["folder"] == folder) | committed["also_in"].str.contains(folder, regex=False)]
    ours = ours[ours["batch_size"] == 32].set_index(["placement", "echo_factor"])
    for placement in ("before_batching", "after_batching"):
        for factor in (2.0, 4.0, 8.0):
            ratios = [best[placement, factor, s] / best["none", 1.0, s] for s in range(3)]
            rows = reached[(reached["placement"] == placement) & (reached["echo_factor"] == factor)]
            trained_at = rows["effective_echo_factor"].median()  # the factor its runs trained at
            expected = (1 / np.median(ratios) - 1) / (trained_at - 1)
            assert ours.loc[(placement, factor), "worth"] == pytest.approx(expected)
    # Example echoing's copies are worth most of a fresh sequence at e=2 and less as e grows; batch echoing's less.
    worth = ours["worth"]
    assert worth["before_batching", 2.0] > worth["before_batching", 4.0] > worth["before_batching", 8.0]
    assert worth["after_batching", 2.0] < worth["before_batching", 2.0]


def test_a_buffer_that_holds_the_factor_down_is_read_at_the_factor_trained_at():
    """A 1,024-batch buffer held batch echoing at 1.59 examples per fresh one: w from e = 1.59, not 2."""
    rows = [trial("none", 1.0, 0, 0, 1000), trial("after_batching", 2.0, 0, 0, 800, trained_at=1.59)]
    row = copy_worth.implied(pd.DataFrame(rows), "sweep/w").iloc[0]
    assert row["effective_factor"] == 1.59 and row["worth"] == pytest.approx((1000 / 800 - 1) / 0.59)


def test_the_same_runs_give_one_row_and_a_replaced_sweep_is_marked(tmp_path):
    rows = pd.DataFrame([trial("none", 1.0, 0, 0, 1000), trial("after_batching", 2.0, 0, 0, 800)])
    for folder in ("a/w", "a-drift/w", "b/w"):  # a-drift: the same configs on another store, the same counts
        (tmp_path / folder).mkdir(parents=True)
        frame = rows if folder != "b/w" else rows.assign(fresh_examples_to_target=[1000, 700])
        frame.to_csv(tmp_path / folder / "trials.csv", index=False)
    table = copy_worth.measure(tmp_path, {"a/w": "b/w"})
    assert table[["folder", "also_in", "superseded"]].values.tolist() == [["a/w", "a-drift/w", True],
                                                                         ["b/w", "", False]]
    assert "study_ratios" not in copy_worth.written(table)
