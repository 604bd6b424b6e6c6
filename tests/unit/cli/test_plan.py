"""The sweep plan: jobs counted as Hydra runs them, conditions that repeat another's runs, progress."""

import json

import pytest
from conftest import compose_config
from omegaconf import OmegaConf

from echo_experiments.cli import plan as sweep_plan
from echo_experiments.cli.compose import compose_all
from echo_experiments.cli.plan import SweepPlan, check_command_line, plan, progress, run_key, time_left
from echo_experiments.core.schema import ConfigError


def test_a_sweep_of_placements_at_factor_one_makes_its_baseline_once():
    one = compose_config("workload=synthetic", "echo=before_augmentation", "echo.factor=1")
    other = compose_config("workload=synthetic", "echo=after_batching", "echo.factor=1", "echo.shuffle_buffer=8")
    echoed = compose_config("workload=synthetic", "echo=after_batching", "echo.factor=2")
    assert run_key(one) == run_key(other) != run_key(echoed)
    sweep_plan = plan(["-m", "workload=synthetic", "echo=before_augmentation,after_batching", "echo.factor=1,2"])
    assert sweep_plan.jobs == 3 and len(sweep_plan.repeats) == 1
    assert sweep_plan.sweep_dir.startswith("multirun/")
    # The autopilot echoes at every placement: only the baseline repeats.
    autopilot = plan(["-m", "workload=synthetic", "echo=before_augmentation,after_batching", "echo.factor=1,auto"])
    assert autopilot.jobs == 3 and len(autopilot.repeats) == 1


def test_one_run_is_a_plan_of_one_job_without_a_sweep_folder_and_help_runs_none():
    one = plan(["workload=synthetic"])
    assert (one.jobs, one.repeats, one.sweep_dir) == (1, [], None)
    assert plan(["--help"]) is None and plan(["--cfg", "job"]).jobs == 0  # prints a config, runs nothing
    with pytest.raises(ConfigError, match="--cfg job prints one job's config: leave out -m"):
        plan(["--cfg", "job", "-m", "echo.factor=1,2"])


def test_every_job_is_checked_before_any_runs():
    assert check_command_line(["-m", "workload=synthetic", "echo.factor=2,0.5"]) == (
        "echo.factor=0.5 is not allowed: a real number >= 1 and <= 1000, or auto")


def test_each_jobs_config_is_the_one_hydra_composes_for_it_and_a_bad_trial_value_is_named():
    # Two conditions x 2 studies x 2 trials: each trial but a condition's first is its config with the two
    # tuning keys set, not composed again; it must equal the composed one key for key.
    swept = ["workload=synthetic", "tuning=study", "tuning.studies=2", "tuning.trials=2", "echo.factor=1,2"]
    jobs = list(compose_all(["echo.factor=1,2", "tuning=study", "tuning.studies=2", "tuning.trials=2",
                             "workload=synthetic"], multirun=True))
    assert len(jobs) == 8
    for cfg in jobs:
        own = [*swept[:-1], f"echo.factor={cfg.echo.factor:g}", f"tuning.study={cfg.tuning.study}",
               f"tuning.trial={cfg.tuning.trial}"]
        assert OmegaConf.to_container(cfg) == OmegaConf.to_container(compose_config(*own))
    assert sorted((c.echo.factor, c.tuning.study, c.tuning.trial) for c in jobs) == [
        (f, s, t) for f in (1.0, 2.0) for s in (0, 1) for t in (0, 1)]
    assert check_command_line(["-m", "workload=synthetic", "echo.factor=1,2", "tuning.study=0,1",
                               "tuning.trial=0,x"]).startswith("tuning.trial=x is not allowed")


def test_time_left_counts_a_resumed_job_by_the_share_of_it_this_command_trained():
    # 2 of 48 done, one of them resumed at 90%: the command did 0.1 + 0.3 = 0.4 of a job's work in 600 s.
    assert time_left(48, [0.1, 0.3], 600.0) == pytest.approx(46 * 1500)
    assert time_left(48, [0.0, 1.0], 600.0) == pytest.approx(46 * 600)  # one kept from before, one run whole
    assert time_left(48, [0.0, 0.0], 5.0) is None  # only kept jobs: no pace yet


def test_each_job_adds_its_line_and_reports_the_commands_progress(tmp_path, monkeypatch):
    current = SweepPlan(jobs=3, started=1000.0)
    monkeypatch.setenv(sweep_plan.PLAN_VARIABLE, str(current.save(tmp_path)))
    monkeypatch.setattr(sweep_plan.time, "time", lambda: 1000.0 + 600)
    assert json.loads((tmp_path / ".sweep-1000.000000.json").read_text())["jobs"] == 3
    first = progress(tmp_path / "job0", done=False, attempt_s=1.0, elapsed_s=50.0)
    assert first.endswith("1 of 3 jobs complete (1 kept from an earlier run); time left known once a job has run")
    second = progress(tmp_path / "job1", done=True, attempt_s=300.0, elapsed_s=300.0)
    assert second.endswith("2 of 3 jobs complete (1 kept from an earlier run); about 10 min left")
    monkeypatch.delenv(sweep_plan.PLAN_VARIABLE)
    assert progress(tmp_path / "job2", done=True, attempt_s=1.0, elapsed_s=1.0) is None  # not in a sweep
