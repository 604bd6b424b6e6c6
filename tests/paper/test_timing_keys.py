"""A timing belongs to its store, and a check's timing band comes from compute-bound pairs outside its own runs: a
known-answer tree where pooling either way would change the verdict."""

import shutil

import pytest
from test_report import make_run, on_store

from paper.verdicts import autopilot_checks, timing_band
from paper.verdicts.claims import Condition

CPU = {"cpu": "CPU X"}
LOCAL = dict(upstream_s_per_batch=0.03, downstream_s_per_step=0.1, machine=CPU)  # R 0.3: bound by its compute
SLOW = dict(upstream_s_per_batch=0.6, downstream_s_per_step=0.1, machine=CPU)  # R 6: bound by the store's waits
E2 = Condition("after_batching", 2.0, label="e=2")
CHECK = autopilot_checks.Check("X", "no slower than e = 2", "check/w", "within", 1.0,
                               references=(E2,))
OTHER = autopilot_checks.Check("Y", "", "other/w", "echoes", 1.1)


def pair(runs, name, seconds, latency_ms, timing, **run):
    """One training timed twice alone on one store, as the autopilot on local storage trains as the baseline."""
    for i, s in enumerate(seconds):
        on_store(make_run(runs, f"{name}{i}", fresh=900, steps=9, seconds=s, wall_time_s=s, **timing, **run),
                 latency_ms)


def tree(results):
    runs = results / "check" / "w" / "runs"
    auto = dict(placement="after_batching", factor=8.0, echo_auto=True, echo_max_factor=8.0, fresh=500, steps=30)
    e2 = dict(placement="after_batching", factor=2.0, fresh=600, steps=19)
    for study in range(3):
        # The autopilot, tuned and timed alone on the 90 ms store: 22 s. e = 2, tuned alone on local storage (15 s)
        # and its study-best trial timed again alone on the 90 ms store (25 s). Pooled, e = 2's seconds would be
        # 20 s and the autopilot 1.1x slower; on the store both were timed on, 0.88 of e = 2's.
        on_store(make_run(runs, f"auto{study}", study=study, seconds=22.0, wall_time_s=22.0, **auto, **SLOW), 90)
        on_store(make_run(runs, f"e2_{study}", study=study, seconds=15.0, wall_time_s=15.0, **e2, **LOCAL), 0)
        on_store(make_run(runs, f"timed/e2_{study}", study=study, seconds=25.0, wall_time_s=25.0, **e2, **SLOW), 90)
    # In the check's own folder, one compute-bound training timed twice 1.5x apart: a band that must not judge it.
    pair(runs, "own", (10.0, 15.0), 0, LOCAL, study=7)
    other = results / "other" / "w" / "runs"
    pair(other, "compute", (10.0, 10.5), 0, LOCAL)  # compute-bound: the band, 1.05
    pair(other, "waits", (10.0, 13.0), 90, SLOW, trial=1)  # bound by the store's waits: no part of the band


def test_the_check_is_read_on_its_timed_store_with_a_band_from_other_runs(tmp_path):
    tree(tmp_path)
    rows = autopilot_checks.measure(tmp_path, [CHECK, OTHER]).set_index("check")
    x = rows.loc["X"]
    assert round(x["effect"], 3) == 0.88 and x["n_studies"] == 3
    assert x["band"] == 1.05 and x["band_from"] == "other/w"
    assert x["verdict"] == "met" and x["reason"].startswith("the median is at most 0.95, 1 x/ the timing band 1.050")
    assert x["input_ratio_min"] == pytest.approx(6.0)  # R of the runs on the timed store, not of the local tuning runs


def test_without_a_band_from_outside_its_own_runs_a_check_decides_nothing(tmp_path):
    tree(tmp_path)
    shutil.rmtree(tmp_path / "other")
    rows = autopilot_checks.measure(tmp_path, [CHECK]).set_index("check")
    assert rows.loc["X", "verdict"] == "inconclusive"
    assert rows.loc["X", "reason"].startswith("no timing band: no training bound by its compute was timed twice")


def test_a_folder_no_check_reads_gives_the_band_its_pairs_measure(tmp_path):
    """A folder made only to time compute-bound pairs (timing_band_cpu) is a band's source like any other."""
    tree(tmp_path)
    rows = autopilot_checks.measure(tmp_path, [CHECK]).set_index("check")  # other/w is no check's folder
    assert (rows.loc["X", "band"], rows.loc["X", "band_from"], rows.loc["X", "verdict"]) == (1.05, "other/w", "met")
    pair(tmp_path / "band" / "w" / "runs", "again", (10.0, 12.0), 0, LOCAL)
    rows = autopilot_checks.measure(tmp_path, [CHECK]).set_index("check")  # the widest pair of every folder
    assert (rows.loc["X", "band"], rows.loc["X", "band_from"]) == (1.2, "band/w, other/w")
    assert rows.loc["X", "verdict"] == "inconclusive"  # 0.88 lies within 1 x/ 1.2


def test_the_band_pairs_runs_of_one_store_bound_by_their_compute():
    import pandas as pd

    def runs(store, seconds, r):
        return pd.DataFrame({"study_key": "s", "trial": 0, "fresh_examples_to_target": 900.0, "steps_to_target": 9.0,
                             "effective_echo_factor": 1.0, "best_metric": 0.9, "store": store, "cpu": "CPU X",
                             "other_cores": 0.0, "status": "reached_target", "seconds_to_target": seconds,
                             "upstream_s_per_batch": r / 10, "downstream_s_per_step": 0.1})

    two_stores = pd.concat([runs("local", [10.0], 0.3), runs("emulated", [20.0], 0.3)])
    assert timing_band.timing_bands({"f": two_stores}) == {}
    assert timing_band.timing_bands({"f": runs("emulated", [10.0, 13.0], 6.0)}) == {}
    band = timing_band.timing_bands({"f": runs("local", [10.0, 12.0], 0.3)})
    assert band == {"CPU X": timing_band.Band(1.2, ("f",))}
