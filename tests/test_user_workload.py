"""A user's own workload (task: module:Class) from a folder outside the package, its YAML found through
hydra.searchpath: the shipped example (examples/) end to end, and a class that breaks the contract."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from echo_experiments.cli.plan import check_command_line

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SEARCH = "hydra.searchpath=[file://conf]"


def test_the_example_workload_runs_from_its_own_folder_and_the_reporter_reads_it(tmp_path, data_dir):
    mine = tmp_path / "mine"
    shutil.copytree(EXAMPLES, mine, ignore=shutil.ignore_patterns("__pycache__", "multirun", "runs"))
    command = [sys.executable, "-m", "echo_experiments", SEARCH, "workload=fashion_mlp", "echo.factor=2",
               "trainer.max_fresh_examples=3200", "trainer.eval_every_fresh_examples=1600",
               "workload.eval_examples=2000", "workload.shuffle_buffer=2000", "workload.target.value=0.5",
               "trainer.profile_batches=0", "trainer.progress=false", "hydra.run.dir=runs/one"]
    proc = subprocess.run(command, cwd=mine, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads((mine / "runs/one/summary.json").read_text())
    assert (summary["workload"], summary["placement"], summary["echo_factor"]) == (
        "fashion_mlp", "before_augmentation", 2.0)
    assert summary["status"] == "reached_target" and (mine / "runs/one/tb").is_dir()
    report = subprocess.run([sys.executable, "-m", "echo_experiments.report", "runs", "--out", "report"], cwd=mine,
                            capture_output=True, text=True, timeout=300)
    assert report.returncode == 0, report.stderr[-2000:]
    table = pd.read_csv(mine / "report/fresh_examples_to_target.csv")
    assert table[["workload", "placement", "n_trials_reached"]].values.tolist() == [
        ["fashion_mlp", "before_augmentation", 1]]


def test_a_class_that_breaks_the_contract_gets_one_line_naming_what_it_lacks(tmp_path, monkeypatch):
    (tmp_path / "half_done.py").write_text(
        "from fashion_mlp import FashionMLPConfig\n"
        "from echo_experiments.workloads import Workload\n\n\n"
        "class HalfDone(Workload):\n"
        "    config_class = FashionMLPConfig\n\n"
        "    def decode(self, record):\n"
        "        return record\n")
    monkeypatch.syspath_prepend(str(EXAMPLES))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(EXAMPLES)
    error = check_command_line([SEARCH, "workload=fashion_mlp", "workload.task=half_done:HalfDone"])
    assert error == ("workload.task=half_done:HalfDone: HalfDone lacks eval_examples, eval_metrics, eval_outputs, "
                     "init, loss, augment or augment_chunk (its config_class says augments=True) (see the Workload "
                     "contract in echo_experiments/workloads/base.py)")
    assert check_command_line([SEARCH, "workload=fashion_mlp", "workload.task=fashion_mlp:MLP"]).endswith(
        "its config_class must be a subclass of echo_experiments.workloads.CustomWorkloadConfig that declares "
        "metrics")
    assert check_command_line([SEARCH, "workload=fashion_mlp", "workload.task=no_such_module:Thing"]).startswith(
        "workload.task=no_such_module:Thing is not allowed: one of image_classification, language_model, detection, "
        "or module:Class")
    assert check_command_line([SEARCH, "workload=fashion_mlp"]) is None


BROKEN = """from fashion_mlp import FashionMLP


class DropsReadIds(FashionMLP):
    def decode(self, record):
        return {"image": super().decode(record)["image"], "label": record["label"]}


class Undecoded(FashionMLP):
    def decode(self, record):
        return {**record}
"""


def _user_run(tmp_path, *args):
    mine = tmp_path / "mine"
    shutil.copytree(EXAMPLES, mine, ignore=shutil.ignore_patterns("__pycache__", "multirun", "runs"))
    (mine / "broken.py").write_text(BROKEN)
    return subprocess.run([sys.executable, "-m", "echo_experiments", *args, "trainer.max_steps=2",
                           "trainer.profile_batches=0", "trainer.progress=false", "workload.shuffle_buffer=64",
                           "hydra.run.dir=runs/one"], cwd=mine, capture_output=True, text=True, timeout=300)


def one_error_line(proc) -> str:
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, proc.stderr[-2000:]
    return lines[0]


def test_mistakes_in_a_users_config_are_found_before_any_job_runs(tmp_path, monkeypatch):
    typo = tmp_path / "typo"
    (typo / "workload").mkdir(parents=True)
    text = (EXAMPLES / "conf" / "workload" / "fashion_mlp.yaml").read_text()
    (typo / "workload" / "typo_mlp.yaml").write_text(text.replace("  options:", "  optionz:"))
    monkeypatch.syspath_prepend(str(EXAMPLES))
    monkeypatch.chdir(EXAMPLES)
    assert check_command_line([f"hydra.searchpath=[file://{typo}]", "workload=typo_mlp"]).endswith(
        "options (in workload/typo_mlp.yaml)")
    assert "hydra.searchpath=[file://conf]" in check_command_line(["workload=fashion_mlp"])
    assert "is its folder on PYTHONPATH" in check_command_line([SEARCH, "workload=fashion_mlp",
                                                                "workload.task=nowhere:Thing"])


@pytest.mark.slow  # about 23 s: `make test-all` runs it
def test_a_decode_that_breaks_the_contract_ends_the_run_with_one_line_naming_what_to_fix(tmp_path):
    dropped = one_error_line(_user_run(tmp_path / "c", SEARCH, "workload=fashion_mlp",
                                       "workload.task=broken:DropsReadIds"))
    assert dropped.startswith("error: DropsReadIds.decode must return every example with its read_id")
    undecoded = one_error_line(_user_run(tmp_path / "d", SEARCH, "workload=fashion_mlp",
                                         "workload.task=broken:Undecoded"))
    assert undecoded.startswith("error: Undecoded.decode hands on image as string")


def test_a_loss_that_fails_ends_the_run_with_one_line_holding_the_users_line(tmp_path, data_dir):
    (tmp_path / "bad_loss.py").write_text(
        "from fashion_mlp import FashionMLP\n\n\n"
        "class BadLoss(FashionMLP):\n"
        "    def loss(self, params, model_state, batch, rng):\n"
        "        return batch['pixels'].mean(), model_state\n")
    proc = subprocess.run([sys.executable, "-m", "echo_experiments", SEARCH, "workload=fashion_mlp",
                           "workload.task=bad_loss:BadLoss", "trainer.max_steps=2", "trainer.profile_batches=0",
                           "workload.shuffle_buffer=100", f"hydra.run.dir={tmp_path / 'run'}"],
                          capture_output=True, text=True, timeout=300, cwd=EXAMPLES,
                          env={**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{EXAMPLES}"})
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines()[-1] == (
        f"error: workload.task=bad_loss:BadLoss fails: KeyError: 'pixels' (at {tmp_path / 'bad_loss.py'}:6, in loss: "
        "return batch['pixels'].mean(), model_state)")
