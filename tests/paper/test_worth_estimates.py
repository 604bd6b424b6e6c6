"""The copy-worth estimate against the measured worth (paper/worth/worth_estimates.py): each pilot run beside its
condition's sweep, and the pilot's rule choosing among the candidates as docs/protocol.md wrote it."""

import math

import pandas as pd
import pytest
from test_report import make_run

from paper.worth import worth_estimates

MEASURED = pd.DataFrame([
    {"folder": "placements_e2_fine_cpu/fashion_mnist", "workload": "fashion_mnist", "placement": "after_batching",
     "echo_factor": 2.0, "batch_size": 64, "worth": 0.02, "worth_min": -0.07, "worth_max": 0.12},
    {"folder": "lm_fine_cpu/transformer_pydocs", "workload": "transformer_pydocs",
     "placement": "before_batching", "echo_factor": 2.0, "batch_size": 32, "worth": 0.9, "worth_min": 0.6,
     "worth_max": 1.1},
    {"folder": "autopilot_cpu/fashion_mnist", "workload": "fashion_mnist", "placement": "after_batching",
     "echo_factor": 2.0, "batch_size": 64, "worth": 0.08, "worth_min": 0.0, "worth_max": 0.3}])


def _pilot(tmp_path, rows, pilot="run-copy_worth_pilot"):
    for workload, placement, batch, copy_worth in rows:
        make_run(tmp_path / pilot / workload / "runs", f"{placement}-e2", workload=workload,
                 placement=placement, factor=2.0, batch=batch, study=None, fresh=1000, seconds=5.0, steps=20,
                 copy_worth=copy_worth)
    return worth_estimates.estimates(tmp_path, MEASURED)


def test_each_run_stands_beside_the_sweep_its_draw_came_from(tmp_path):
    table = _pilot(tmp_path, [
        ("fashion_mnist", "after_batching", 64, {"alignment": 0.1, "loss_ratio": 0.5, "noise": 0.3,
                                                 "copy_share": 0.5}),
        ("transformer_pydocs", "before_batching", 32, {"alignment": 0.7, "loss_ratio": None, "noise": 0.2,
                                                       "copy_share": 0.5})])
    fashion = table[table["workload"] == "fashion_mnist"].iloc[0]
    assert fashion["measured_in"] == "placements_e2_fine_cpu/fashion_mnist"  # not autopilot_cpu's 0.08
    assert (fashion["measured_worth"], fashion["measured_min"], fashion["alignment"]) == (0.02, -0.07, 0.1)
    assert list(table["run"]) == ["after_batching-e2", "before_batching-e2"]
    choice = worth_estimates.choice(table).set_index("candidate")
    assert choice.loc["alignment", "orders_as_measured"] and choice.loc["alignment", "chosen"]
    assert choice.loc["alignment", "mean_abs_difference"] == pytest.approx((0.08 + 0.2) / 2)
    assert not choice.loc["noise", "orders_as_measured"]  # 0.3 over 0.2: the wrong way round
    assert not choice.loc["loss_ratio", "orders_as_measured"]  # undefined for one condition: it orders nothing
    assert choice["chosen"].sum() == 1 and "loss_drop" not in choice.index  # the first pilot's three alone


def test_no_candidate_is_chosen_when_none_orders_the_conditions(tmp_path):
    table = _pilot(tmp_path, [
        ("fashion_mnist", "after_batching", 64, {"alignment": 0.5, "noise": 0.3}),
        ("transformer_pydocs", "before_batching", 32, {"alignment": 0.5, "noise": 0.1})])
    choice = worth_estimates.choice(table)
    assert not choice["orders_as_measured"].any() and not choice["chosen"].any()  # a tie orders nothing


def test_a_condition_no_sweep_measured_has_no_measured_worth(tmp_path):
    table = _pilot(tmp_path, [("fashion_mnist", "before_augmentation", 64, {"alignment": 0.2})])
    assert table.iloc[0]["measured_in"] == "placements_e2_fine_cpu/fashion_mnist"
    assert math.isnan(table.iloc[0]["measured_worth"])


def test_the_second_pilot_chooses_only_a_candidate_within_every_measured_range(tmp_path):
    table = _pilot(tmp_path, [
        ("fashion_mnist", "after_batching", 64, {"alignment": 0.15, "loss_ratio": 0.1, "noise": 0.1,
                                                 "loss_drop": 0.05}),
        ("transformer_pydocs", "before_batching", 32, {"alignment": 0.9, "loss_ratio": 0.2, "noise": 0.2,
                                                       "loss_drop": 0.65})], pilot="run-copy_worth_pilot2")
    choice = worth_estimates.choice(table).set_index("candidate")
    assert list(choice["pilot"].unique()) == ["run-copy_worth_pilot2"]
    # The alignment orders them and is nearer on average (0.065 against 0.14), but 0.15 is outside [-0.07, 0.12].
    assert choice.loc["alignment", "mean_abs_difference"] < choice.loc["loss_drop", "mean_abs_difference"]
    assert choice.loc["alignment", "orders_as_measured"] and not choice.loc["alignment", "within_measured_range"]
    assert choice.loc["loss_drop", "within_measured_range"] and choice.loc["loss_drop", "chosen"]
    assert choice["chosen"].sum() == 1
