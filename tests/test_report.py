"""The reporter on run directories with known numbers: every column of both tables, and what it skips."""

import ast
import json
import math

import pandas as pd
import pytest

from echo_experiments.core.rundir import RunDir, write_atomic
from echo_experiments.report.__main__ import main

TARGET = {"metric": "accuracy", "value": 0.8, "mode": "max"}


def make_run(root, name, *, workload="w", placement="none", factor=1.0, batch=64, shuffle=0, study=0, trial=0,
             status="reached_target", fresh=None, seconds=None, steps=None, best=0.85, target=TARGET, other_cores=0.0,
             **extra):
    run = RunDir(root / name)
    reached = status == "reached_target"
    run.append_metrics({"step": 1, "fresh_examples": 100, "wall_time_s": 1.0, "accuracy": 0.5})
    run.append_metrics({"step": 2, "fresh_examples": fresh or 2000, "wall_time_s": 2.0, "accuracy": best})
    write_atomic(run.path / "summary.json", json.dumps({
        "workload": workload, "placement": placement, "echo_factor": factor, "batch_size": batch,
        "shuffle_buffer": shuffle, "seed": 0, "study": study, "trial": trial,
        "tuning_seed": 0 if study is not None else None,
        "status": status, "steps": steps or 10, "fresh_examples": fresh or 2000, "wall_time_s": 9.0, "target": target,
        "fresh_examples_to_target": fresh if reached else None, "steps_to_target": steps if reached else None,
        "seconds_to_target": seconds if reached else None, "final_metrics": {},
        **({} if other_cores is None else {"other_cores": other_cores}), **extra}))
    return run.path


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    runs = tmp_path_factory.mktemp("runs")
    # Baseline: study 0's best is 800 fresh (a diverged trial is only infeasible); study 1's is 1200.
    make_run(runs, "b0a", trial=0, fresh=1000, seconds=10.0, steps=16)
    make_run(runs, "b0b", trial=1, fresh=800, seconds=12.0, steps=13)
    make_run(runs, "b0c", trial=2, status="diverged")
    make_run(runs, "b1a", study=1, trial=0, status="not_reached")
    make_run(runs, "b1b", study=1, trial=1, fresh=1200, seconds=8.0, steps=19)
    # Echo before augmentation at e=2: a tie in study 0 (500 each), study 1 never reaches, study 2 reaches at 700.
    e2 = dict(placement="before_augmentation", factor=2.0)
    make_run(runs, "e0a", **e2, trial=0, fresh=500, seconds=6.0, steps=20, best=0.81)
    make_run(runs, "e0b", **e2, trial=1, fresh=500, seconds=7.0, steps=16, best=0.83)
    make_run(runs, "e1a", **e2, study=1, trial=0, status="not_reached", best=0.7)
    make_run(runs, "e1b", **e2, study=1, trial=1, status="diverged", best=0.1)
    make_run(runs, "e1c", **e2, study=1, trial=2, status="pruned", best=0.75)
    make_run(runs, "e2a", **e2, study=2, trial=0, fresh=700, seconds=5.0, steps=22)
    # Batch echoing outside any study (a one-trial study), with an echo shuffle.
    make_run(runs, "batch", placement="after_batching", factor=2.0, shuffle=4, study=None, trial=None,
             fresh=900, seconds=9.0, steps=28)
    # e=4 never reaches the target; workload v has no baseline.
    make_run(runs, "e4", placement="before_augmentation", factor=4.0, status="not_reached")
    make_run(runs, "v", workload="v", placement="after_batching", factor=2.0, batch=32, fresh=300, seconds=3.0,
             steps=19, upstream_s_per_batch=0.5, downstream_s_per_step=0.1)
    # Directories that must be listed and skipped.
    (runs / "interrupted").mkdir()
    (runs / "interrupted" / "config.yaml").write_text("seed: 0\n")
    (runs / "broken").mkdir()
    (runs / "broken" / "summary.json").write_text("{not json")
    (runs / "partial").mkdir()
    (runs / "partial" / "summary.json").write_text(json.dumps({"workload": "w", "status": "not_reached"}))
    make_run(runs, "liar", fresh=None, seconds=None)  # says reached_target but has no count
    make_run(runs, "other_target", fresh=10, seconds=1.0, steps=1, target={**TARGET, "value": 0.5})
    out = tmp_path_factory.mktemp("report")
    assert main([str(runs), "--out", str(out)]) == 0
    return out


def table(out, name):
    """A table of runs with no autopilot, by condition: its autopilot columns are checked to say so and left out."""
    t = pd.read_csv(out / name)
    assert not t["echo_auto"].any() and (t["echo_max_factor"] == t["echo_factor"]).all()
    assert (t["echo_cap_rule"] == "fixed").all()
    return (t.drop(columns=["echo_auto", "echo_max_factor", "echo_cap_rule"])
            .set_index(["workload", "placement", "echo_factor", "batch_size", "shuffle_buffer"]))


def test_fresh_examples_to_target_table(report):
    t = table(report, "fresh_examples_to_target.csv")
    counts = ["n_studies", "n_studies_reached", "n_trials", "n_trials_reached", "n_trials_pruned"]
    assert list(t.columns) == [*counts, "median", "min", "max", "fresh_ratio", "effective_echo_factor", "off_factor"]
    assert len(t) == 5
    base = t.loc[("w", "none", 1.0, 64, 0)]
    assert base.tolist()[:9] == [2, 2, 5, 3, 0, 1000.0, 800.0, 1200.0, 1.0]
    # Examples trained per fresh example at the target: 16, 13 and 19 steps of 64 for 1000, 800 and 1200.
    assert base["effective_echo_factor"] == pytest.approx(16 * 64 / 1000) and not base["off_factor"]
    e2 = t.loc[("w", "before_augmentation", 2.0, 64, 0)]
    # Study 1 never reached (one trial not reached, one diverged, one pruned): 2 of 3 studies, 3 of 6 trials.
    assert e2[[*counts, "median", "min"]].tolist() == [3, 2, 6, 3, 1, 700.0, 500.0]
    assert math.isinf(e2["max"])  # a study that never reached is not counted as zero
    assert e2["fresh_ratio"] == pytest.approx(700 / 1000)  # this condition over the baseline: below 1, fewer
    assert e2["effective_echo_factor"] == pytest.approx(16 * 64 / 500) and not e2["off_factor"]
    batch = t.loc[("w", "after_batching", 2.0, 64, 4)]
    assert batch.tolist()[:9] == [1, 1, 1, 1, 0, 900.0, 900.0, 900.0, pytest.approx(900 / 1000)]
    assert batch["effective_echo_factor"] == pytest.approx(28 * 64 / 900) and not batch["off_factor"]
    never = t.loc[("w", "before_augmentation", 4.0, 64, 0)]
    assert never[counts].tolist() == [1, 0, 1, 0, 0]
    assert all(math.isinf(never[c]) for c in ("median", "min", "max", "fresh_ratio"))
    no_baseline = t.loc[("v", "after_batching", 2.0, 32, 0)]
    assert no_baseline[["median", "min", "max"]].tolist() == [300.0, 300.0, 300.0]
    assert math.isnan(no_baseline["fresh_ratio"])


def test_speedups_table(report):
    t = table(report, "speedups.csv")
    assert list(t.columns) == ["n_studies", "n_studies_reached", "n_studies_timed", "n_runs_shared",
                               "n_runs_unmeasured", "median_seconds", "min_seconds", "max_seconds", "speedup",
                               "speedup_min", "speedup_max", "pace", "R", "ideal_speedup", "efficiency", "store",
                               "model_seconds", "model_speedup", "model_speedup_min", "model_speedup_max"]
    base = t.loc[("w", "none", 1.0, 64, 0)]
    # Per study, the seconds of the best trial by fresh examples: study 0 -> b0b's 12 s (b0a was faster, 10 s,
    # but needed more fresh examples), study 1 -> 8 s.
    assert base[["median_seconds", "min_seconds", "max_seconds", "speedup"]].tolist() == [10.0, 8.0, 12.0, 1.0]
    # Speedups are per-study pairs: each study's baseline over the same study's seconds.
    assert base[["speedup_min", "speedup_max"]].tolist() == [1.0, 1.0]
    e2 = t.loc[("w", "before_augmentation", 2.0, 64, 0)]
    # The tie at 500 fresh examples goes to e0b (fewer steps): 7 s, though e0a took 6 s.
    assert e2[["n_studies", "n_studies_reached", "n_studies_timed"]].tolist() == [3, 2, 2]
    assert e2[["median_seconds", "min_seconds"]].tolist() == [7.0, 5.0] and math.isinf(e2["max_seconds"])
    # Study 0: 12 s over 7 s; study 1 never reached the target: no speedup at all there, never a negative one;
    # study 2 has no baseline to pair with.
    assert e2["speedup"] == pytest.approx(12.0 / 7.0 / 2)
    assert e2[["speedup_min", "speedup_max"]].tolist() == [0.0, pytest.approx(12.0 / 7.0)]
    assert (t[["n_runs_shared", "n_runs_unmeasured"]] == 0).all().all()
    assert "Runs that shared the machine" not in (report / "report.md").read_text()
    assert math.isnan(e2["R"]) and math.isnan(e2["ideal_speedup"])  # no timing facts in these runs
    assert math.isnan(e2["model_speedup"])  # nor a model: it takes the runs' profiled times
    v = t.loc[("v", "after_batching", 2.0, 32, 0)]
    assert math.isnan(v["speedup"]) and math.isnan(v["R"])  # R is measured on the baseline, which v lacks


def test_ideal_speedup_is_min_of_e_and_r_and_never_below_one(tmp_path):
    timing = {"u": dict(upstream_s_per_batch=0.3, downstream_s_per_step=0.1),  # input-bound: R = 3
              "x": dict(upstream_s_per_batch=0.05, downstream_s_per_step=0.1)}  # step-bound: R = 0.5
    for workload, facts in timing.items():
        make_run(tmp_path / "runs", f"{workload}1", workload=workload, fresh=1000, seconds=30.0, steps=10, **facts)
        for e in (2.0, 4.0):
            make_run(tmp_path / "runs", f"{workload}{e:g}", workload=workload, placement="before_augmentation",
                     factor=e, fresh=600, seconds=12.0, steps=20, **facts)
    assert main([str(tmp_path / "runs"), "--out", str(tmp_path / "out")]) == 0
    t = table(tmp_path / "out", "speedups.csv")
    assert t.loc[("u", "before_augmentation", 2.0, 64, 0), ["R", "ideal_speedup", "speedup"]].tolist() == [
        pytest.approx(3.0), pytest.approx(2.0), pytest.approx(2.5)]
    assert t.loc[("u", "before_augmentation", 4.0, 64, 0), "ideal_speedup"] == pytest.approx(3.0)
    assert t.loc[("x", "before_augmentation", 4.0, 64, 0), ["R", "ideal_speedup"]].tolist() == [
        pytest.approx(0.5), 1.0]


def test_the_autopilot_is_a_condition_of_its_own_columns_and_never_the_baseline(tmp_path):
    """An autopilot run records echo_factor 1 (it has no echo stage) and its cap in echo_max_factor: its row keeps
    both, with its placement and echo_auto, so that neither column means two things; it is compared with the
    baseline, never taken for it, and it is a fixed factor's condition at no cap."""
    facts = dict(upstream_s_per_batch=0.4, downstream_s_per_step=0.1)  # R = 4
    for study in range(3):
        make_run(tmp_path / "runs", f"b{study}", study=study, fresh=1000, seconds=40.0, steps=16, **facts)
        make_run(tmp_path / "runs", f"f{study}", study=study, placement="after_batching", factor=4.0, fresh=900,
                 seconds=20.0, steps=56, **facts)
        make_run(tmp_path / "runs", f"a{study}", study=study, placement="after_batching", factor=1.0, fresh=800,
                 seconds=16.0, steps=40, echo_auto=True, echo_max_factor=4.0, **facts)
        make_run(tmp_path / "runs", f"p{study}", study=study, placement="after_batching", factor=1.0, fresh=600,
                 seconds=12.0, steps=40, echo_auto=True, echo_max_factor=4.0, echo_cap_rule="paired", **facts)
        made_before = make_run(tmp_path / "runs", f"t{study}", study=study, placement="after_batching", factor=1.0,
                               fresh=700, seconds=14.0, steps=40, echo_auto=True, echo_max_factor=4.0, **facts)
        (made_before / "config.yaml").write_text("echo:\n  cap: trend\n")  # a record before echo_cap_rule
    assert main([str(tmp_path / "runs"), "--out", str(tmp_path / "out")]) == 0
    fresh = pd.read_csv(tmp_path / "out" / "fresh_examples_to_target.csv")
    shown = {(r.placement, r.echo_factor, r.echo_auto, r.echo_max_factor): r
             for r in fresh.itertuples() if r.echo_cap_rule == "fixed"}
    assert set(shown) == {("none", 1.0, False, 1.0), ("after_batching", 4.0, False, 4.0),
                          ("after_batching", 1.0, True, 4.0)}
    assert shown[("after_batching", 1.0, True, 4.0)].fresh_ratio == pytest.approx(0.8)
    paired = fresh[fresh["echo_cap_rule"] == "paired"]  # a cap moved by a rule: another condition, never pooled
    assert len(paired) == 1 and paired["median"].item() == 600 and paired["fresh_ratio"].item() == pytest.approx(0.6)
    assert fresh.loc[fresh["echo_cap_rule"] == "trend", "median"].tolist() == [700]  # read from its config
    assert shown[("none", 1.0, False, 1.0)].fresh_ratio == pytest.approx(1.0)  # the baseline is the baseline alone
    assert not shown[("after_batching", 1.0, True, 4.0)].off_factor  # what it chose is its result
    speed = pd.read_csv(tmp_path / "out" / "speedups.csv").set_index(["placement", "echo_auto", "echo_cap_rule"])
    assert speed.loc[("after_batching", True, "paired"), "speedup"] == pytest.approx(40 / 12)
    speed = speed.xs("fixed", level="echo_cap_rule")
    assert speed.loc[("after_batching", True), ["speedup", "ideal_speedup"]].tolist() == [
        pytest.approx(2.5), pytest.approx(4.0)]  # its ideal at its cap: min(4, R)
    assert speed.loc[("after_batching", False), "speedup"] == pytest.approx(2.0)


def test_runs_that_shared_the_machine_are_left_out_of_the_speedups_and_named(tmp_path):
    timing = dict(upstream_s_per_batch=0.6, downstream_s_per_step=0.1)  # R = 6 when measured alone
    # The baseline's one trial, tuned beside another job (faster in this made-up case, its R off), then timed
    # again alone, as python -m paper.retime does: the same trial, counted once.
    make_run(tmp_path / "runs", "base", fresh=900, seconds=30.0, steps=9, other_cores=1.1,
             upstream_s_per_batch=0.9, downstream_s_per_step=0.1, wall_time_s=27.0)
    make_run(tmp_path / "runs", "timed/base", fresh=900, seconds=40.0, steps=9, other_cores=0.02, **timing,
             wall_time_s=36.0)
    for study, seconds in enumerate((10.0, 16.0, 20.0)):
        make_run(tmp_path / "runs", f"e5_{study}", placement="before_augmentation", factor=5.0, study=study,
                 fresh=400, seconds=seconds, steps=20, other_cores=0.0, **timing, wall_time_s=2 * seconds)
    assert main([str(tmp_path / "runs"), "--out", str(tmp_path / "out")]) == 0
    t = table(tmp_path / "out", "speedups.csv")
    base = t.loc[("w", "none", 1.0, 64, 0)]
    assert base[["n_studies_timed", "n_runs_shared", "median_seconds", "R"]].tolist() == [1, 1, 40.0,
                                                                                         pytest.approx(6.0)]
    e5 = t.loc[("w", "before_augmentation", 5.0, 64, 0)]
    # Only study 0 has a baseline to pair with: 40 s over 10 s.
    assert e5[["n_studies", "n_runs_shared", "speedup", "speedup_min", "speedup_max", "ideal_speedup"]].tolist() \
        == [3, 0, pytest.approx(4.0), pytest.approx(4.0), pytest.approx(4.0), pytest.approx(5.0)]
    assert e5["efficiency"] == pytest.approx(0.8)
    # Seconds per fresh example: e=5's runs 0.05, 0.08 and 0.1 (median 0.08) over the baseline's run alone (0.04;
    # the shared run's 0.03 is no timing).
    assert (base["pace"], e5["pace"]) == (pytest.approx(1.0), pytest.approx(2.0))
    assert table(tmp_path / "out", "fresh_examples_to_target.csv").loc[("w", "none", 1.0, 64, 0), "n_trials"] == 1
    text = (tmp_path / "out" / "report.md").read_text()
    assert "Runs that shared the machine (1)" in text and "| base | 1.1 |" in text
    # Asked for, the shared run's seconds count too (the trial's two runs: 30 s shared, 40 s alone), marked.
    assert main([str(tmp_path / "runs"), "--out", str(tmp_path / "shared"), "--include-shared"]) == 0
    assert table(tmp_path / "shared", "speedups.csv").loc[("w", "none", 1.0, 64, 0), "median_seconds"] == 35.0
    assert "Shared timings included" in (tmp_path / "shared" / "report.md").read_text()


def on_store(path, latency_ms):
    """A run's config naming its store: local where latency_ms is 0, else the emulated store at that latency."""
    kind = "emulated" if latency_ms else "local"
    (path / "config.yaml").write_text(f"storage: {{kind: {kind}, latency_ms: {latency_ms}, parallel_reads: 4, "
                                      "read_unit: example}\n")
    return path


def test_a_timing_belongs_to_its_store_and_the_speedup_is_read_on_the_timed_reruns_store(tmp_path):
    # The baseline's trial, tuned alone on local storage (10 s, R 0.3), timed again alone on the 90 ms store (40 s,
    # R 6); e=4 tuned alone on local storage too (8 s) and timed on the 90 ms store (12 s). Pooled, the baseline's
    # seconds would be the median of 10 and 40 (25 s) and the speedup 25 / 10 = 2.5 (e=4's 8 s and 12 s pooled);
    # on the timed store alone it is 40 / 12.
    local = dict(upstream_s_per_batch=0.03, downstream_s_per_step=0.1)
    slow = dict(upstream_s_per_batch=0.6, downstream_s_per_step=0.1)
    runs = tmp_path / "runs"
    on_store(make_run(runs, "base", fresh=900, seconds=10.0, steps=9, wall_time_s=10.0, **local), 0)
    on_store(make_run(runs, "timed/base", fresh=900, seconds=40.0, steps=9, wall_time_s=40.0, **slow), 90)
    e4 = dict(placement="before_augmentation", factor=4.0, fresh=600, steps=24)
    on_store(make_run(runs, "e4", seconds=8.0, wall_time_s=8.0, **e4, **local), 0)
    on_store(make_run(runs, "timed/e4", seconds=12.0, wall_time_s=12.0, **e4, **slow), 90)
    assert main([str(runs), "--out", str(tmp_path / "out")]) == 0
    t = table(tmp_path / "out", "speedups.csv")
    e4_row, base = t.loc[("w", "before_augmentation", 4.0, 64, 0)], t.loc[("w", "none", 1.0, 64, 0)]
    assert (base["median_seconds"], e4_row["median_seconds"]) == (40.0, 12.0)
    assert e4_row["speedup"] == pytest.approx(40 / 12) and e4_row["R"] == pytest.approx(6.0)
    assert e4_row["pace"] == pytest.approx((12 / 600) / (40 / 900))
    assert e4_row["store"] == "emulated: 90 ms per example, 4 at a time"
    trials = pd.read_csv(tmp_path / "out" / "trials.csv").set_index("path")
    assert trials.loc["base", "store"] == "local" and trials.loc["timed/base", "store"].startswith("emulated: 90 ms")


def test_a_timed_rerun_that_trained_otherwise_is_no_timing_of_its_trial(tmp_path):
    timing = dict(upstream_s_per_batch=0.6, downstream_s_per_step=0.1, other_cores=0.0)
    make_run(tmp_path / "runs", "base", fresh=900, seconds=30.0, steps=9, **{**timing, "other_cores": 1.1})
    make_run(tmp_path / "runs", "timed/base", fresh=1000, seconds=40.0, steps=10, **timing)  # another stream
    make_run(tmp_path / "runs", "e2", placement="before_augmentation", factor=2.0, fresh=500, seconds=20.0,
             steps=10, **timing)
    assert main([str(tmp_path / "runs"), "--out", str(tmp_path / "out")]) == 0
    base = table(tmp_path / "out", "speedups.csv").loc[("w", "none", 1.0, 64, 0)]
    assert base["n_studies_timed"] == 0 and math.isnan(base["median_seconds"])


def test_a_study_whose_best_trial_shared_the_machine_is_untimed(tmp_path):
    """Another trial of the study that ran alone does not stand in for its best (it is slower per study), and
    a run that recorded nothing about other work is no timing (older sweeps ran two jobs at a time)."""
    make_run(tmp_path / "runs", "best_shared", trial=0, fresh=700, seconds=70.0, steps=7, other_cores=1.0)
    make_run(tmp_path / "runs", "other_alone", trial=1, status="pruned", other_cores=0.0)
    make_run(tmp_path / "runs", "other_alone_reached", trial=2, fresh=800, seconds=50.0, steps=8, other_cores=0.0)
    make_run(tmp_path / "runs", "old", study=1, fresh=900, seconds=20.0, steps=9, other_cores=None)
    assert main([str(tmp_path / "runs"), "--out", str(tmp_path / "out")]) == 0
    base = table(tmp_path / "out", "speedups.csv").loc[("w", "none", 1.0, 64, 0)]
    assert base[["n_studies", "n_studies_reached", "n_studies_timed", "n_runs_shared", "n_runs_unmeasured"]
                ].tolist() == [2, 2, 0, 1, 1]
    assert base[["median_seconds", "speedup"]].isna().all()  # untimed, never "not reached" and never 50 s
    assert table(tmp_path / "out", "fresh_examples_to_target.csv").loc[("w", "none", 1.0, 64, 0), "median"] == 800


def test_best_trials_and_ties(report):
    curves = pd.read_csv(report / "curves.csv")
    chosen = curves.groupby(["placement", "echo_factor"])["best_path"].first()
    # The e=2 tie at 500 fresh examples goes to the trial with fewer steps to target (e0b: 16 < 20).
    assert chosen[("before_augmentation", 2.0)].endswith("e0b")
    assert chosen[("none", 1.0)].endswith("b0b")


def test_final_performance_is_the_best_metric_per_study(report):
    t = table(report, "final_performance.csv")
    e2 = t.loc[("w", "before_augmentation", 2.0, 64, 0)]
    # study 0: max(0.81, 0.83); study 1: max(0.7, 0.1, 0.75); study 2: 0.85.
    assert e2[["metric", "n_studies", "median", "min", "max"]].tolist() == ["accuracy", 3, 0.83, 0.75, 0.85]


def test_runs_that_cannot_be_counted_are_listed_with_the_reason(report):
    rows = pd.read_csv(report / "skipped.csv")
    # Paths are relative to the reporter's input, so a committed skipped.csv names no machine's folders.
    assert not any(p.startswith("/") for p in rows.path)
    skipped = dict(zip((p.rsplit("/", 1)[-1] for p in rows.path), rows.reason))
    assert skipped["interrupted"] == "no summary.json (an interrupted run)"
    assert skipped["broken"].startswith("summary.json is not JSON")
    assert skipped["partial"].startswith("summary.json: lacks placement, echo_factor")
    assert skipped["liar"] == "summary.json: status reached_target without fresh_examples_to_target"
    assert skipped["other_target"].startswith("its target accuracy>=0.5 differs from the other w runs' accuracy>=0.8")
    assert len(skipped) == 5
    text = (report / "report.md").read_text()
    assert "## Skipped run directories" in text and "no summary.json (an interrupted run)" in text


def test_report_has_figures_and_tables(report):
    names = {p.name for p in (report / "figures").iterdir()}
    for fig in ("fresh_examples_at_e2", "fresh_examples_vs_echo_factor", "best_trial_curves"):
        assert {f"{fig}.png", f"{fig}.svg"} <= names
    text = (report / "report.md").read_text()
    # The table is split to fit a screen, each part led by the condition.
    assert "| w | before_augmentation | 2 | 64 | 0 | False | 2 | fixed | 3 | 2 | 6 |" in text
    assert "| w | before_augmentation | 2 | 64 | 0 | False | 2 | fixed | 3 | 1 | 700 |" in text
    assert "| w | before_augmentation | 2 | 64 | 0 | False | 2 | fixed | 500 | not reached | 0.7 |" in text
    assert "| w | before_augmentation | 2 | 64 | 0 | False | 2 | fixed | 2.05 | False |" in text
    assert "![best_trial_curves](figures/best_trial_curves.png)" in text


def test_conditions_with_fewer_than_three_studies_are_not_yet_results(report):
    partial = table(report, "unfinished.csv")
    # The baseline has studies 0 and 1, e=4 and batch echoing one run each; e=2 before augmentation has 3.
    assert partial.loc[("w", "none", 1, 64, 0), "reason"] == "2 of the 3 studies the protocol asks for"
    assert ("w", "before_augmentation", 2, 64, 0) not in partial.index
    assert len(partial) == 4  # the baseline, e=4, batch echoing and workload v's only run
    assert "**Not yet results** (4 conditions; unfinished.csv)" in (report / "report.md").read_text()


def test_a_figure_showing_conditions_that_are_not_yet_results_says_so_at_its_foot(report):
    from echo_experiments.report import figures

    named = {"fresh": "fresh_examples_to_target", "speed": "speedups", "curves": "curves", "best_of_k": "best_of_k"}
    read = {key: pd.read_csv(report / f"{name}.csv") for key, name in named.items()}
    partial = pd.read_csv(report / "unfinished.csv")
    def marks(drawn):
        return {name: [t.get_text() for t in fig.texts if t.get_text().startswith("not yet")]
                for name, fig in drawn.items()}

    # Of the five conditions, only e=2 before augmentation has its 3 studies.
    got = marks(figures.draw_all(read, unfinished=partial))
    assert got["fresh_examples_at_e2"] == ["not yet results: 4 of the 5 conditions of the table drawn\nhere (too "
                                           "few studies or trials; unfinished.csv)"]
    assert len(got) > 1 and all(len(mark) == 1 for mark in got.values())  # the baseline is in every one
    finished = figures.draw_all(read, unfinished=partial.iloc[:0])
    assert not any(marks(finished).values())


def test_a_study_missing_trials_of_its_search_is_not_yet_a_result_until_they_finish(tmp_path):
    def trial(study, t):
        path = make_run(tmp_path / "runs", f"s{study}t{t}", study=study, trial=t, fresh=1000 + 100 * t, steps=10)
        (path / "config.yaml").write_text("tuning: {studies: 3, trials: 2}\n")  # each study draws 2 trials

    for study, t in [(0, 0), (0, 1), (1, 0), (1, 1), (2, 1)]:
        trial(study, t)
    out = tmp_path / "out"
    assert main([str(tmp_path / "runs"), "--out", str(out)]) == 0
    partial = table(out, "unfinished.csv")
    assert partial.loc[("w", "none", 1, 64, 0), ["n_studies", "n_studies_complete", "reason"]].tolist() == [
        3, 2, "study 2 has 1 of its 2 trials"]
    trial(2, 0)  # the sweep finishes
    assert main([str(tmp_path / "runs"), "--out", str(out)]) == 0
    assert pd.read_csv(out / "unfinished.csv").empty
    assert "Every condition here has at least 3 studies and all those its sweep plans, each with all the trials" \
        in (out / "report.md").read_text()


def test_a_sweep_with_studies_still_to_come_is_not_yet_a_result_until_it_has_them_all(tmp_path):
    def study(s):
        path = make_run(tmp_path / "runs", f"s{s}", study=s, trial=0, fresh=1000 + 100 * s, steps=10)
        (path / "config.yaml").write_text("tuning: {studies: 4, trials: 1}\n")  # the sweep plans 4 studies

    out = tmp_path / "out"
    for s in range(3):
        study(s)
        assert main([str(tmp_path / "runs"), "--out", str(out)]) == 0
        partial = table(out, "unfinished.csv")
        # below the protocol's 3 too, the count still to reach is the sweep's 4
        assert partial.loc[("w", "none", 1, 64, 0), ["n_studies", "n_studies_complete", "reason"]].tolist() == [
            s + 1, s + 1, f"{s + 1} of the 4 studies its sweep plans"]
    study(3)
    assert main([str(tmp_path / "runs"), "--out", str(out)]) == 0
    assert pd.read_csv(out / "unfinished.csv").empty


def test_a_figure_these_runs_do_not_make_is_not_left_from_an_earlier_report(tmp_path):
    make_run(tmp_path / "runs", "base", fresh=1000, seconds=30.0, steps=10)
    make_run(tmp_path / "runs", "e2", placement="before_augmentation", factor=2.0, fresh=600, seconds=12.0, steps=20)
    (tmp_path / "out" / "figures").mkdir(parents=True)
    for name in ("fresh_examples_vs_batch_size.png", "fresh_examples_vs_batch_size.svg", "mine.png"):
        (tmp_path / "out" / "figures" / name).write_text("from an earlier report")
    assert main([str(tmp_path / "runs"), "--out", str(tmp_path / "out")]) == 0
    names = {p.name for p in (tmp_path / "out" / "figures").iterdir()}
    assert "fresh_examples_at_e2.png" in names and "mine.png" in names  # not one of the report's: kept
    assert not {"fresh_examples_vs_batch_size.png", "fresh_examples_vs_batch_size.svg"} & names


def test_no_complete_run_is_an_error(tmp_path, capsys):
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "metrics.jsonl").write_text("")
    assert main([str(tmp_path), "--out", str(tmp_path / "out")]) == 2
    assert "error: no complete run directory" in capsys.readouterr().err


def test_notebook_redraws_every_figure_from_the_csvs(report, monkeypatch):
    import nbformat
    from nbclient import NotebookClient

    monkeypatch.setenv("ECHO_REPORT_DIR", str(report))
    notebook = nbformat.read("notebooks/figures.ipynb", as_version=4)
    client = NotebookClient(notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": "notebooks"}})
    client.execute()
    last = notebook.cells[-1].outputs
    names = [o for o in last if o.get("output_type") == "execute_result"][0]["data"]["text/plain"]
    drawn = sorted(p.stem for p in (report / "figures").glob("*.png"))
    assert ast.literal_eval(names) == drawn
    assert sum(1 for o in last if "image/png" in o.get("data", {})) == len(drawn)


def test_a_figure_that_cannot_be_drawn_is_left_out_with_a_note(tmp_path, capsys):
    """The batch-size figure's log axis over runs of which none reached the target (a real sweep crashed
    the reporter with "Data cannot be log-scaled")."""
    for batch in (64, 128):
        for factor, placement in ((1.0, "none"), (2.0, "after_batching")):
            make_run(tmp_path / "runs", f"{batch}-{factor}", placement=placement, factor=factor, batch=batch,
                     status="not_reached")
    assert main([str(tmp_path / "runs"), "--out", str(tmp_path / "report")]) == 0
    err = capsys.readouterr().err
    for name, why in (("fresh_examples_vs_batch_size", "Data cannot be log-scaled"),
                      ("fresh_examples_at_e2", "no condition reached the target at echo factor 2 or without echoing")):
        note = f"{name} not drawn: {why}"  # an empty figure would say nothing: the note says what is missing
        assert note in err and note in (tmp_path / "report" / "report.md").read_text()
        assert not (tmp_path / "report" / "figures" / f"{name}.png").exists()


def _series(fig):
    """{label: number of points} of a figure's error-bar series and labelled plain lines."""
    ax = fig.axes[0]
    lines = {line.get_label(): len(line.get_xdata()) for line in ax.get_lines() if not line.get_label().startswith("_")}
    return {**lines, **{c.get_label(): len(c.lines[0].get_xdata()) for c in ax.containers}}


def test_a_default_echo_shuffle_that_grows_with_e_and_the_batch_does_not_break_a_line():
    from echo_experiments.report import figures

    rows = []
    for batch in (16, 32, 64):
        rows.append(dict(workload="lm", placement="none", echo_factor=1.0, batch_size=batch, shuffle_buffer=0,
                         median=1000.0, min=900.0, max=1100.0))
        for e in (2.0, 4.0, 8.0):  # the default rule: 10 x ceil(e) x batch examples
            for placement, shuffle in (("before_batching", int(10 * e * batch)), ("after_batching", 0)):
                rows.append(dict(workload="lm", placement=placement, echo_factor=e, batch_size=batch,
                                 shuffle_buffer=shuffle, median=1000.0 / e, min=900.0 / e, max=1100.0 / e))
    table = pd.DataFrame(rows)
    at_32 = table[table["batch_size"] == 32]
    lines = _series(figures.factor_sweep(at_32))
    # One line per placement through the baseline and the three factors (and the baseline / e line).
    assert lines == {"example echoing": 4, "batch echoing": 4, "baseline / e": 4}
    at_e2 = table[table["echo_factor"] <= 2]
    lines = _series(figures.batch_size_sweep(at_e2))
    assert lines == {"baseline": 3, "example echoing, e=2": 3, "batch echoing, e=2": 3}
    # Placements with their own default buffers are no shuffle sweep; a buffer swept for one placement is.
    assert figures.shuffle_sweep(at_32) is None
    # A swept buffer is a line of its own.
    swept = pd.concat([at_32, at_32[at_32["placement"] == "before_batching"].assign(shuffle_buffer=0)])
    labels = set(_series(figures.factor_sweep(swept)))
    assert {"example echoing", "example echoing (shuffle 640)", "example echoing (shuffle 1280)"} <= labels
    ax = figures.shuffle_sweep(swept).axes[0]
    # Every size run is a tick, and both ends' points lie inside the frame, not on it.
    assert list(ax.get_xticks()) == [0, 640, 1280, 2560]
    low, high = ax.get_xlim()
    assert low < 0 and high > 2560
    assert "baseline min-max" in [p.get_label() for p in ax.patches]


def test_a_placement_whose_median_study_did_not_reach_the_target_is_still_drawn():
    from echo_experiments.report import figures

    inf = float("inf")
    # The baseline reached in one study of two (median not reached); e=2 reached in both.
    table = pd.DataFrame([dict(workload="w", placement="none", echo_factor=1.0, batch_size=128, shuffle_buffer=0,
                               median=inf, min=204800.0, max=inf),
                          dict(workload="w", placement="after_batching", echo_factor=2.0, batch_size=128,
                               shuffle_buffer=0, median=217600.0, min=217600.0, max=230400.0)])
    ax = figures.placement_bars(table).axes[0]
    assert [bar.get_height() for bar in ax.patches] == [0, 217600.0]
    assert [t.get_text() for t in ax.texts] == ["not reached"]
