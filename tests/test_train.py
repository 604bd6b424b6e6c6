"""The trainer on the synthetic workload: target detection, exact fresh counts, divergence, determinism."""

import json
import math
import subprocess
import sys
import threading
import weakref

import pytest
import yaml
from conftest import FAST, compose_config, train

from echo_experiments.core.rundir import RunDir
from echo_experiments.core.specs import ScheduleSpec
from echo_experiments.data import closing

SUMMARY_KEYS = {"workload", "placement", "echo_factor", "batch_size", "shuffle_buffer", "seed", "study", "trial",
                "status", "steps", "fresh_examples", "wall_time_s", "target", "fresh_examples_to_target",
                "steps_to_target", "seconds_to_target", "final_metrics"}


def trained(tmp_path, *overrides):
    summary = train(compose_config(*FAST, *overrides), tmp_path).to_json()
    return summary, list(RunDir(tmp_path).metrics())


def test_run_stops_at_its_target_and_records_fresh_examples_to_target(tmp_path):
    summary, rows = trained(tmp_path, "workload.target.value=0.8")
    assert summary["status"] == "reached_target"
    first = next(r for r in rows if r["accuracy"] >= 0.8)
    assert first is rows[-1]  # it stopped at the first evaluation that met the target
    assert all(r["accuracy"] < 0.8 for r in rows[:-1])
    assert summary["fresh_examples_to_target"] == first["fresh_examples"] == summary["fresh_examples"]
    assert summary["steps_to_target"] == first["step"] == summary["steps"] < 600
    assert summary["seconds_to_target"] == first["elapsed_s"]
    assert summary["target"] == {"metric": "accuracy", "value": 0.8, "mode": "max"}
    assert SUMMARY_KEYS <= set(summary)
    assert json.loads((tmp_path / "summary.json").read_text()) == summary
    assert yaml.safe_load((tmp_path / "config.yaml").read_text())["workload"]["target"]["value"] == 0.8
    # Evaluations fall on the fresh-example cadence: each row is the first step past a multiple of 1024.
    assert [r["fresh_examples"] for r in rows] == [1024 * (i + 1) for i in range(len(rows))]


@pytest.mark.parametrize("echo,fresh_after", [
    # Example echoing, factor 2, no echo shuffle: copies are adjacent, so a batch of 32 holds 16 fresh examples.
    (["echo=before_augmentation", "echo.shuffle_buffer=0"], lambda step: 16 * step),
    # Batch echoing, factor 2: a fresh batch of 32 every other step.
    (["echo=after_batching"], lambda step: 32 * math.ceil(step / 2)),
])
def test_echoed_runs_count_fresh_examples_exactly(tmp_path, echo, fresh_after):
    summary, rows = trained(tmp_path, *echo, "trainer.max_steps=50", "trainer.eval_every_fresh_examples=320",
                          "workload.target.value=0.99")
    assert summary["status"] == "not_reached" and summary["fresh_examples_to_target"] is None
    assert summary["echo_factor"] == 2.0 and summary["steps"] == 50
    assert summary["fresh_examples"] == fresh_after(50)
    assert summary["examples_trained"] == 50 * 32
    for r in rows:
        assert r["fresh_examples"] == fresh_after(r["step"])


@pytest.mark.parametrize("factor", [1, 2, 4])
def test_every_factor_gets_the_schedule_budget_and_evaluations_at_the_same_fresh_counts(tmp_path, monkeypatch,
                                                                                          factor):
    from echo_experiments.training import optim, parallel

    positions = []
    put = parallel.Parallel.put_scalar
    monkeypatch.setattr(parallel.Parallel, "put_scalar", lambda self, v: (positions.append(v), put(self, v))[1])
    args = ["echo=before_augmentation", f"echo.factor={factor}", "echo.shuffle_buffer=0",
            "optimizer.schedule=linear_decay", "optimizer.final_fraction=0.1", "optimizer.warmup_fresh_examples=512",
            "trainer.max_fresh_examples=4096", "workload.target.value=0.999"]
    summary, rows = trained(tmp_path, *args)
    fresh_per_step = 32 // factor
    # The schedule's position is the fresh examples trained on before each step, not the step count.
    assert positions == [fresh_per_step * k for k in range(summary["steps"])]
    # The budget and the evaluations fall on the same fresh counts for every factor: e times the steps.
    assert summary["fresh_examples"] == 4096 and summary["steps"] == 4096 // fresh_per_step
    assert [r["fresh_examples"] for r in rows] == [1024, 2048, 3072, 4096]
    # The rate each row reports is the schedule's at the position of that row's last step.
    cfg = compose_config(*FAST, *args)
    schedule = optim.schedule(ScheduleSpec.from_config(cfg.optimizer, cfg.trainer))
    assert schedule.unit == "fresh_examples"
    for r in rows:
        assert r["learning_rate"] == pytest.approx(float(schedule(r["fresh_examples"] - fresh_per_step)), rel=1e-6)
    # So at a given fresh count every factor has the same rate: warmup over 512, decay to 0.01 at 4096.
    assert float(schedule(256)) == pytest.approx(0.05) and float(schedule(512 + 4096)) == pytest.approx(0.01)


def test_a_diverging_run_stops_cleanly_and_says_so(tmp_path):
    summary, rows = trained(tmp_path, "optimizer.learning_rate=1e6", "workload.target.value=0.99")
    assert summary["status"] == "diverged"
    assert summary["steps"] < 600 and summary["fresh_examples_to_target"] is None
    assert rows and rows[-1]["train_loss"] is None  # NaN is written as null


def test_the_same_seed_gives_the_same_run(tmp_path):
    args = ["echo=before_augmentation", "echo.factor=1.5", "echo.shuffle_buffer=256", "trainer.max_steps=60",
            "trainer.eval_every_fresh_examples=320", "workload.target.value=0.99"]
    strip = lambda rows: [{k: v for k, v in r.items() if not k.endswith("_s")} for r in rows]  # noqa: E731
    _, a = trained(tmp_path / "a", *args)
    _, b = trained(tmp_path / "b", *args)
    _, c = trained(tmp_path / "c", *args, "seed=1")
    assert strip(a) == strip(b) and len(a) >= 2
    assert strip(a) != strip(c)


@pytest.mark.parametrize("saves", [[], ["trainer.checkpoint_every_steps=20"]])
def test_a_finished_run_closes_its_input_pipeline_beside_the_caller(tmp_path, monkeypatch, saves):
    """The iterator's destructor (which can wait a minute on tf.data's autotuning thread) runs on the closing
    thread, after the summary is written, even when a checkpointer cached the iterator (data/closing.py)."""
    closed_on, hand_off = [], closing.close_later

    def watched(holder, what):
        weakref.finalize(holder[0], lambda: closed_on.append(threading.current_thread().name))
        assert (tmp_path / "summary.json").exists()
        return hand_off(holder, what)

    monkeypatch.setattr(closing, "close_later", watched)
    trained(tmp_path, "trainer.max_steps=40", *saves)
    assert closing.wait_closed(timeout_s=60)
    assert closed_on == ["close_input"]


def test_command_line_run_on_real_data_writes_the_run_directory(tmp_path):
    """The one end-to-end run of the default workload on real Fashion-MNIST (a narrow, short version)."""
    proc = subprocess.run([sys.executable, "-m", "echo_experiments", "workload.model.width=4",
                           "workload.eval_examples=2000", "workload.shuffle_buffer=2000", "optimizer.schedule=constant",
                           "trainer.eval_every_fresh_examples=2048", "trainer.max_steps=400", "trainer.progress=false",
                           "trainer.profile_batches=0", "workload.target.value=0.5", f"hydra.run.dir={tmp_path}"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["status"] == "reached_target" and summary["workload"] == "fashion_mnist"
    assert summary["placement"] == "none" and summary["echo_factor"] == 1.0
    assert (tmp_path / "metrics.jsonl").read_text().count("\n") >= 1
    assert "reached_target" in proc.stderr + proc.stdout


def test_the_trainer_takes_a_checked_spec_and_refuses_a_raw_config(tmp_path):
    """The raw config stops at the front door (workloads/run_check.py): handed to the trainer, it is refused before
    anything is written, with the door named."""
    from echo_experiments.training.trainer import run

    with pytest.raises(TypeError, match=r"takes a RunSpec, not a DictConfig: .*run_check\.check_run\(cfg\)"):
        run(compose_config(*FAST), tmp_path / "run")
    assert not (tmp_path / "run").exists()
