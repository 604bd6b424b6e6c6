"""A figure per autopilot check: the factor the autopilot chose between evaluations, its cap, its store beneath."""

import json
from pathlib import Path

import numpy as np
import yaml

from paper.verdicts import check_figures
from paper.verdicts.autopilot_checks import CHECKS
from paper.verdicts.folders import results_trials

ROOT = Path(__file__).resolve().parents[2]


def test_the_factor_between_evaluations_and_the_stores_latency_at_each_count(tmp_path):
    rows = [{"step": 1, "fresh_examples": 100, "examples_trained": 100},
            {"step": 2, "fresh_examples": 200, "examples_trained": 350},
            {"step": 3, "fresh_examples": 200, "examples_trained": 450}]  # no fresh example between: no factor
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    series = check_figures.factors(tmp_path)
    assert series["fresh_examples"].tolist() == [100, 200, 200]
    assert series["factor"].tolist()[:2] == [1.0, 2.5] and np.isnan(series["factor"].iloc[2])
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"storage": {
        "kind": "emulated", "latency_ms": 5.0, "latency_schedule": [[10, 20.0], [10, 0.0]]}}))
    assert check_figures.latencies(tmp_path, np.array([0, 9, 10, 25])).tolist() == [20.0, 20.0, 0.0, 20.0]
    # the reads run the shuffle buffer ahead of training: at 0 fresh examples the input is at read 4
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"workload": {"shuffle_buffer": 4}, "storage": {
        "kind": "emulated", "latency_ms": 5.0, "latency_schedule": [[10, 20.0], [10, 0.0]]}}))
    assert check_figures.latencies(tmp_path, np.array([0, 5, 6, 16])).tolist() == [20.0, 20.0, 0.0, 20.0]
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"storage": {"kind": "local", "latency_ms": 5.0}}))
    assert check_figures.latencies(tmp_path, np.array([0, 10])).tolist() == [0.0, 0.0]


def test_a_checks_figure_shows_each_studys_best_autopilot_trial_and_its_cap_on_the_committed_runs():
    check = next(c for c in CHECKS if c.id == "A1")
    trials = results_trials(ROOT / "results", [check.folder])[check.folder]
    chosen = check_figures.best_runs(trials, ROOT / "results" / check.folder / "runs", check)
    assert [study for study, _ in chosen] == ["0", "1", "2"]
    fig = check_figures.figure(check, trials, ROOT / "results" / check.folder / "runs", (5.0, 7.0))
    top, bottom = fig.axes
    assert [line.get_label() for line in top.get_lines()] == ["study 0", "study 1", "study 2", "cap 8"]
    assert top.get_lines()[-1].get_ydata()[0] == 8.0
    assert "A1: " in top.get_title() and "R 5.0-7.0" in top.get_title()
    assert bottom.get_ylabel() == "store latency per\nread under way (ms)"
