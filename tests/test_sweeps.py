"""Sweeps through Hydra multirun: tuning studies, launchers, and finishing an interrupted sweep."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import FAST, compose_config, metric_rows, train
from omegaconf import OmegaConf

from echo_experiments.cli.plan import check_command_line, plan, time_left
from echo_experiments.core.schema import ConfigError
from echo_experiments.workloads.trials import trial_values

# Each job: 20 steps of a narrow network, never reaching its target.
TINY = [*FAST, "trainer.max_steps=20", "trainer.eval_every_fresh_examples=640", "workload.target.value=0.99"]


def command(sweep_dir, *args):
    return [sys.executable, "-m", "echo_experiments", "-m", *TINY, f"hydra.sweep.dir={sweep_dir}", *args]


def summaries(sweep_dir):
    return {p.parent.name: json.loads(p.read_text()) for p in sweep_dir.glob("*/summary.json")}


# About 54 s: the values are the unit tier's (tests/unit/training/test_tuning.py). `make test-all` runs it.
@pytest.mark.slow
def test_tuning_study_runs_each_trial_with_its_quasi_random_values(tmp_path):
    proc = subprocess.run(command(tmp_path, "tuning=study", "tuning.studies=2", "tuning.trials=2"),
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = summaries(tmp_path)
    assert sorted((s["study"], s["trial"]) for s in found.values()) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    space = compose_config("workload=synthetic").workload.search_space
    seeds = set()
    for name, summary in found.items():
        stored = yaml.safe_load((tmp_path / name / "config.yaml").read_text())
        expected = trial_values(space, summary["study"], summary["trial"])
        assert set(expected) == {"optimizer.learning_rate", "optimizer.momentum"}
        assert stored["optimizer"]["learning_rate"] == pytest.approx(expected["optimizer.learning_rate"])
        assert stored["optimizer"]["momentum"] == pytest.approx(expected["optimizer.momentum"])
        seeds.add(summary["seed"])
    assert len(seeds) == 4  # every trial trains from its own seed


# About 19 s of CPU (two sweeps): `make test-all` runs it; tests/unit/core/test_rundir.py keeps a complete run
# left alone and an unfinished one resumed, and the test below the pace of a resumed sweep, in `make test`.
@pytest.mark.slow
def test_a_killed_sweep_finishes_on_rerun_without_redoing_complete_trials(tmp_path):
    args = command(tmp_path, "echo.factor=1,1.5,2", "echo.placement=before_batching")
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 600
    while not summaries(tmp_path) and time.time() < deadline and proc.poll() is None:
        time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    first = summaries(tmp_path)
    assert 1 <= len(first) < 3, "the sweep should have been killed part-way"
    stamps = {name: (tmp_path / name / "summary.json").stat().st_mtime_ns for name in first}

    rerun = subprocess.run(args, capture_output=True, text=True, timeout=900)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    after = summaries(tmp_path)
    assert sorted(s["echo_factor"] for s in after.values()) == [1.0, 1.5, 2.0]
    for name in first:  # complete trials were not run again
        assert (tmp_path / name / "summary.json").stat().st_mtime_ns == stamps[name]
        assert after[name] == first[name]
    assert (rerun.stdout + rerun.stderr).count("not run again") == len(first)
    # One progress line per job of this command; the pace comes from the jobs it ran, not the ones it kept.
    lines = (rerun.stdout + rerun.stderr).splitlines()
    progress = [line.split(": ", 1)[1] for line in lines if "jobs complete" in line]
    assert progress[0] == "1 of 3 jobs complete (1 kept from an earlier run); time left known once a job has run"
    assert progress[-1] == f"3 of 3 jobs complete ({len(first)} kept from an earlier run); about 0 min left"
    for name in after:  # the interrupted trial was redone from the start: one row per evaluation
        steps = [json.loads(r)["step"] for r in (tmp_path / name / "metrics.jsonl").read_text().splitlines()]
        assert steps == sorted(set(steps)) and steps[-1] == after[name]["steps"]


def test_time_left_counts_a_resumed_job_by_the_share_of_it_this_command_trained():
    # Ten minutes after a restart, two jobs resumed from checkpoints are done, having trained 10% and 30% of
    # their time here: 0.4 jobs' work in 600 s leaves 46 jobs at 1,500 s each, not at 300 s.
    assert time_left(48, [0.1, 0.3], 600.0) == pytest.approx(46 * 1500)
    assert time_left(48, [0.0, 1.0], 600.0) == pytest.approx(46 * 600)  # one kept from before, one run whole
    assert time_left(48, [0.0, 0.0], 5.0) is None  # only kept jobs: no pace yet


def test_a_complete_run_directory_is_not_reused_for_another_config(tmp_path):
    train(compose_config(*TINY, "trainer.max_steps=2"), tmp_path)
    with pytest.raises(ConfigError, match="already holds a run with another config .*trainer.max_steps"):
        train(compose_config(*TINY, "trainer.max_steps=3"), tmp_path)


def test_a_key_added_to_the_schema_after_a_run_does_not_make_it_another_config(tmp_path):
    first = train(compose_config(*TINY, "trainer.max_steps=2"), tmp_path)
    stored = OmegaConf.load(tmp_path / "config.yaml")
    del stored.trainer["precision"]  # as a run directory written before the key existed
    OmegaConf.save(stored, tmp_path / "config.yaml")
    assert train(compose_config(*TINY, "trainer.max_steps=2"), tmp_path) == first
    with pytest.raises(ConfigError, match="differs at trainer.max_steps"):
        train(compose_config(*TINY, "trainer.max_steps=3"), tmp_path)


def test_a_new_checkpoint_cadence_does_not_make_a_run_another_config(tmp_path):
    # A preset that began checkpointing every 300 s after some of its runs were made keeps them (fixed_budget_cpu).
    first = train(compose_config(*TINY, "trainer.max_steps=2"), tmp_path)
    again = compose_config(*TINY, "trainer.max_steps=2", "trainer.checkpoint_every_seconds=300",
                           "trainer.checkpoint_every_steps=1")
    assert train(again, tmp_path) == first
    with pytest.raises(ConfigError, match="differs at trainer.max_steps"):
        train(compose_config(*TINY, "trainer.max_steps=3", "trainer.checkpoint_every_seconds=300"), tmp_path)


# submitit's local launcher is the same job code as joblib's in other processes: `make test-all` runs it.
@pytest.mark.parametrize("launcher", [["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"],
                                      pytest.param(["hydra/launcher=local", "hydra.launcher.timeout_min=10"],
                                                   marks=pytest.mark.slow)],
                         ids=["joblib", "submitit_local"])
def test_sweeps_run_under_parallel_launchers(tmp_path, launcher):
    # Four jobs, three runs: at factor 1 both placements are the baseline, made once (in whichever process).
    proc = subprocess.run(command(tmp_path, *launcher, "echo=before_batching,after_batching", "echo.factor=1,2"),
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = summaries(tmp_path)
    assert sorted((s["placement"], s["echo_factor"]) for s in found.values()) == [
        ("after_batching", 2.0), ("before_batching", 2.0), ("none", 1.0)]
    assert all(s["status"] == "not_reached" and s["steps"] == 20 for s in found.values())
    # submitit's jobs log into their own files under the sweep folder, joblib's into the command's output.
    log = proc.stdout + proc.stderr + "".join(p.read_text() for p in sorted(tmp_path.rglob("*_log.*")))
    assert log.count("not run: the same run as another job of this sweep") == 1
    assert "3 of 3 jobs complete" in log
    jobs = [line for line in log.splitlines() if "][echo_experiments" in line]  # the jobs' lines, each tagged
    assert jobs and all(re.search(r"\]\[INFO\] - \[job \d+\] ", line) for line in jobs), jobs[:5]
    firsts = {m.group(1): m.group(2) for m in re.finditer(r"\[job (\d+)\] synthetic on synthetic_images, to "
                                                          r"accuracy >= [\d.]+ -> (\S+)", log)}
    assert len(firsts) == 3  # each job's first line says which folder its number is


@pytest.mark.slow  # about 22 s: `make test-all` runs it
def test_a_signal_to_a_sweep_of_parallel_jobs_checkpoints_each_running_job_and_starts_no_other(tmp_path):
    # Three jobs, two at a time, far from their end when the SIGTERM comes and with no periodic checkpoint.
    args = [sys.executable, "-m", "echo_experiments", "-m", *FAST, "trainer.stop_at_target=false",
            "trainer.checkpoint_every_steps=1000000", "trainer.max_fresh_examples=100000000",
            f"hydra.sweep.dir={tmp_path}", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2",
            "echo.placement=before_batching", "echo.factor=1,2,3"]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    deadline = time.time() + 600
    while len(list(tmp_path.glob("*/metrics.jsonl"))) < 2 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGTERM)  # as a terminal's Ctrl-C or SLURM reaches the whole group
    _, err = proc.communicate(timeout=300)  # its end: its workers, which hold the pipe too, have ended
    assert proc.returncode == 128 + signal.SIGTERM and "Traceback" not in err, err[-3000:]
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert errors[-1] == ("error: stopped by SIGTERM: each running job stopped at a step boundary with its "
                          "checkpoint, and no further job started; run the same command to finish the sweep")
    stopped = {}
    for line in errors[:-1]:
        job = re.fullmatch(r"error: stopped by SIGTERM at step (\d+) \(\d+ fresh examples\); its checkpoint is in "
                           r"(\S+)/checkpoints: run the same command to resume", line)
        stopped[Path(job[2]).name] = int(job[1])
    assert len(stopped) == 2
    for name, step in stopped.items():  # each checkpointed at the step it stopped at, no later than the signal
        assert [p.name for p in (tmp_path / name / "checkpoints").iterdir()] == [str(step)]
        assert len(metric_rows(tmp_path / name)) >= 1
    assert not [p for p in tmp_path.glob("*/metrics.jsonl") if p.parent.name not in stopped]


@pytest.mark.parametrize("launcher,nodes", [("slurm", 1), ("slurm_multinode", 2)])
def test_cluster_launchers_compose_to_submitit_slurm(launcher, nodes):
    from hydra import compose, initialize_config_module

    with initialize_config_module(version_base="1.3", config_module="echo_experiments.conf"):
        cfg = compose("config", overrides=[f"hydra/launcher={launcher}", "hydra.launcher.gpus_per_node=4"],
                      return_hydra_config=True)
    assert cfg.hydra.launcher._target_ == "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher"
    assert (cfg.hydra.launcher.nodes, cfg.hydra.launcher.gpus_per_node) == (nodes, 4)


PRESETS = sorted(p.stem for p in (Path(__file__).parents[1] / "conf" / "experiment").glob("*.yaml"))


def test_a_sweep_counts_the_jobs_hydra_will_run():
    # Two trials per study instead of the preset's six: each job is composed and checked, at 0.2 s a job.
    trials = "tuning.trials=2"
    jobs = [plan(["-m", "experiment=placements_e2_cpu", trials]).jobs,
            plan(["-m", "experiment=placements_e2_cpu", trials, "tuning.study=1"]).jobs,
            plan(["-m", "experiment=placements_e2_cpu", trials, "echo=none,after_batching"]).jobs]
    assert jobs == [4 * 3 * 2, 4 * 2, 2 * 3 * 2]


def test_a_condition_that_repeats_anothers_runs_is_not_counted():
    # Baseline, example and batch echoing x 4 echo shuffle buffers: the baseline has no echo stage, so its
    # four buffers are one condition (run_key): 12 conditions, 3 repeated. 3 x 11 trials: past
    # MAX_COMBINATIONS, where every condition is still composed (each trial once).
    sweep = plan(["-m", "experiment=lm_shuffle_buffer_sweep_cpu", "tuning.trials=11"])
    assert len(sweep.repeats) == 3 and sweep.jobs == (12 - 3) * 3 * 11


@pytest.mark.parametrize("preset", PRESETS)
def test_every_preset_sweeps_only_valid_jobs(preset):
    # One trial of one study: the swept conditions are what a preset adds.
    assert check_command_line(["-m", f"experiment={preset}", "tuning.studies=1", "tuning.trials=1"]) is None


@pytest.mark.slow  # about 40 s: `make test-all` runs it
def test_pruning_never_changes_a_studys_best_and_the_report_counts_pruned_trials(tmp_path):
    """One study of three real trials, run with pruning and without: the best trial is the same, the pruned
    trials stopped at or past the best's fresh examples, and the reporter counts them."""
    from echo_experiments.report.__main__ import main as report

    study = [*FAST, "tuning.study=0", "tuning.seed=3", "workload.target.value=0.9",
             "trainer.max_fresh_examples=12800"]
    outcome = {}
    for prune in ("true", "false"):
        for trial in range(3):
            train(compose_config(*study, f"tuning.trial={trial}", f"tuning.prune={prune}"),
                tmp_path / prune / f"trial={trial}")
        outcome[prune] = {p.parent.name: json.loads(p.read_text()) for p in (tmp_path / prune).glob("*/summary.json")}
    best = {k: min(s["fresh_examples_to_target"] for s in v.values() if s["status"] == "reached_target")
            for k, v in outcome.items()}
    assert best["true"] == best["false"]
    pruned = [s for s in outcome["true"].values() if s["status"] == "pruned"]
    assert pruned, "this study should prune at least one trial"
    assert all(s["fresh_examples"] >= best["true"] and s["fresh_examples_to_target"] is None for s in pruned)
    assert not any(s["status"] == "pruned" for s in outcome["false"].values())
    for name, s in outcome["true"].items():  # a pruned trial's unpruned twin never beat the best
        twin = outcome["false"][name]
        if s["status"] == "pruned":
            assert twin["status"] != "reached_target" or twin["fresh_examples_to_target"] >= best["true"]
        else:
            assert (s["status"], s["fresh_examples_to_target"]) == (twin["status"], twin["fresh_examples_to_target"])
    assert report([str(tmp_path / "true"), "--out", str(tmp_path / "report")]) == 0
    table = pd.read_csv(tmp_path / "report" / "fresh_examples_to_target.csv")
    assert table[["n_studies", "n_trials", "n_trials_pruned", "median"]].values.tolist() == [
        [1, 3, len(pruned), best["true"]]]
    # `tensorboard --logdir <sweep dir>`: one run per trial, each with its HParams session and its curves on
    # steps and on fresh examples, and its outcome as the HParams table's metric.
    from tensorboard.backend.event_processing.plugin_event_multiplexer import EventMultiplexer
    from tensorboard.plugins.hparams import plugin_data_pb2

    mux = EventMultiplexer().AddRunsFromDirectory(str(tmp_path / "true"))
    mux.Reload()
    sessions = mux.PluginRunToTagToContent("hparams")
    assert sorted(Path(r).parts[0] for r in sessions) == sorted(outcome["true"])
    for run_name, tags in sessions.items():
        start = plugin_data_pb2.HParamsPluginData.FromString(next(iter(tags.values()))).session_start_info
        trial = outcome["true"][Path(run_name).parts[0]]
        assert start.hparams["trial"].number_value == trial["trial"]
        assert {"eval/accuracy", "by_fresh/eval/accuracy", "outcome/reached_target"} <= set(
            mux.GetAccumulator(run_name).Tags()["tensors"])


@pytest.mark.slow  # about 30 s (a sweep, then its timed runs): `make test-all` runs it
def test_retime_runs_each_studys_best_trial_again_alone_and_the_report_counts_it_once(tmp_path, capsys):
    """A tuned study of two real trials; retime reruns its best trial from the job's own overrides into
    timed/, where it reaches the target with the same fresh examples; a second call times nothing; the
    reporter counts the trial once."""
    from echo_experiments.report.__main__ import main as report
    from paper.retime import main as retime

    sweep = tmp_path / "sweep"
    study = [*FAST, "tuning.study=0", "tuning.trial=0,1", "tuning.seed=3", "workload.target.value=0.9",
             "trainer.max_fresh_examples=12800"]
    subprocess.run([sys.executable, "-m", "echo_experiments", "-m", *study, f"hydra.sweep.dir={sweep}"], check=True)
    tuned = summaries(sweep)
    best = min((s["fresh_examples_to_target"], name) for name, s in tuned.items() if s["status"] == "reached_target")
    assert retime([str(sweep)]) == 0
    timed = {p.parent.name: json.loads(p.read_text()) for p in (sweep / "timed").glob("*/summary.json")}
    assert list(timed) == [best[1]]
    assert timed[best[1]]["fresh_examples_to_target"] == best[0]
    assert yaml.safe_load((sweep / "timed" / best[1] / "config.yaml").read_text()) == \
        yaml.safe_load((sweep / best[1] / "config.yaml").read_text())
    assert f"its tuning run: {best[0]}" in capsys.readouterr().out
    assert retime([str(sweep)]) == 0
    assert "1 timed already, 0 to time" in capsys.readouterr().out
    # A timing that shared the machine is made again only when asked.
    path = sweep / "timed" / best[1] / "summary.json"
    path.write_text(json.dumps({**timed[best[1]], "other_cores": 1.0}))
    assert retime([str(sweep), "--list"]) == 0 and "0 to time" in capsys.readouterr().out
    assert retime([str(sweep), "--redo-shared", "--list"]) == 0 and "1 to time" in capsys.readouterr().out
    # So is one that recorded nothing of other work: the reporter does not count it as alone either.
    path.write_text(json.dumps({k: v for k, v in timed[best[1]].items() if k != "other_cores"}))
    assert retime([str(sweep), "--redo-shared", "--list"]) == 0 and "1 to time" in capsys.readouterr().out
    # A second timing of a trial timed alone (as it is on an idle machine): the same training, into timed/<job>,again.
    path.write_text(json.dumps({**timed[best[1]], "other_cores": 0.0}))
    assert retime([str(sweep), "--again"]) == 0
    again = json.loads((sweep / "timed" / f"{best[1]},again" / "summary.json").read_text())
    assert again["fresh_examples_to_target"] == best[0]
    assert report([str(sweep), "--out", str(tmp_path / "report")]) == 0
    table = pd.read_csv(tmp_path / "report" / "fresh_examples_to_target.csv")
    assert table[["n_studies", "n_trials", "median"]].values.tolist() == [[1, 2, best[0]]]
    assert len(pd.read_csv(tmp_path / "report" / "trials.csv")) == 4


def test_retime_refuses_a_folder_without_runs_in_one_line(tmp_path, capsys):
    from paper.retime import main as retime

    assert retime([str(tmp_path / "missing")]) == 2
    assert capsys.readouterr().err == f"error: no such sweep folder: {tmp_path / 'missing'}\n"
    assert retime([str(tmp_path)]) == 2
    assert "nothing to time" in capsys.readouterr().err


def test_retime_times_on_another_store_only_and_keeps_a_folder_to_one_store(tmp_path, capsys):
    from paper.retime import main as retime

    # Anything but the store would change what the timed run trains, not only when its batches arrive.
    assert retime([str(tmp_path), "--store", "echo.factor=3"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --store echo.factor=3: only the store may change in a timed run") and \
        err.count("\n") == 1
    assert retime([str(tmp_path), "--store", "storage"]) == 2  # no value: no override
    capsys.readouterr()
    # A folder timed on one store is not timed on another, nor (runs of an earlier retime) on a store at all.
    (tmp_path / "timed" / "job").mkdir(parents=True)
    (tmp_path / "timed" / "job" / "summary.json").write_text("{}")
    assert retime([str(tmp_path), "--store", "storage=emulated"]) == 2
    assert capsys.readouterr().err == (f"error: {tmp_path / 'timed'} holds runs timed with no --store: give the "
                                       "same, or move timed/ away to time them on another store\n")
    (tmp_path / "timed" / "store.json").write_text('["storage=emulated", "storage.latency_ms=40"]')
    assert retime([str(tmp_path)]) == 2
    assert "holds runs timed with --store storage=emulated --store storage.latency_ms=40: give" in \
        capsys.readouterr().err
    (tmp_path / "timed" / "store.json").write_text("[")
    assert retime([str(tmp_path)]) == 2 and "store.json is unreadable" in capsys.readouterr().err


def test_retime_leaves_out_the_conditions_excluded_and_times_again_on_request(capsys):
    from paper.retime import main as retime

    # The committed wall-clock sweep: 5 factors x 5 studies of best trials, every one timed already.
    runs = str(Path(__file__).parents[1] / "results" / "wall_clock_5_studies_cpu" / "fashion_mnist" / "runs")
    assert retime([runs, "--list"]) == 0 and capsys.readouterr().out.startswith(f"25 best trials in {runs}; 25 timed")
    assert retime([runs, "--list", "--exclude", "echo.factor=5", "--exclude", "echo.factor=4"]) == 0
    assert capsys.readouterr().out.startswith(f"15 best trials in {runs}; 15 timed")
    # A second timing of each trial timed alone once, for the timing band: none made yet.
    assert retime([runs, "--list", "--again", "--exclude", "echo.factor=5"]) == 0
    assert capsys.readouterr().out.startswith(f"20 best trials in {runs}; 0 timed twice already, 20 to time")
    assert retime([runs, "--list", "--exclude", "echo.factor="]) == 2
    assert "has a trial that reached its target outside --exclude: nothing to time" in capsys.readouterr().err
