"""scripts/gpu_check.sh's CPU dry run: the commands a GPU runs, made small enough for 2 cores, end to end."""

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # about 2 minutes: ResNet-50 compiles and profiles on the CPU. `make test-all` runs it.
def test_the_dry_run_of_the_gpu_check_finishes_with_progress_and_an_answer_for_each_command(tmp_path):
    env = {**os.environ, "DRY_RUN": "1", "OUT": str(tmp_path), "PY": sys.executable}
    began = time.time()
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_check.sh")], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert time.time() - began < 600
    said = (tmp_path / "gpu_check.md").read_text()
    assert said.startswith("# GPU check on no GPU (a dry run)") and "(failed" not in said, said
    sections = said.split("## python -m echo_experiments.profile ")[1:]
    assert [s.split("\n")[0].split()[0] for s in sections] == ["workload=resnet50", "echo.factor=1"]
    assert all("R = " in s or "R =" in s for s in sections), said
    assert proc.stderr.count("running ") == 2  # the progress, one line for each command, then its log


def test_a_command_over_its_timeout_is_ended_with_its_children_and_said(tmp_path):
    mark = f"gpu-check-{tmp_path.name}"
    env = {**os.environ, "DRY_RUN": "1", "OUT": str(tmp_path), "PY": sys.executable, "TIMEOUT": "4", "MARK": mark}
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_check.sh")], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    said = (tmp_path / "gpu_check.md").read_text()
    assert said.count("(failed: exit 124, over 4 s)") == 2, said
    time.sleep(1)
    left = [p for p in psutil.process_iter() if _environ(p).get("MARK") == mark]
    assert left == []


def _environ(process) -> dict:
    try:
        return process.environ()
    except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess):
        return {}


@pytest.mark.parametrize("setting", ["TIMEOUT=abc", "STEPS=0", "BATCH=-3", "TIMEOUT=1.5"])
def test_a_bad_setting_is_one_line_and_exit_2_before_anything_runs(tmp_path, setting):
    name, _, value = setting.partition("=")
    env = {**os.environ, "DRY_RUN": "1", "OUT": str(tmp_path), "PY": sys.executable, name: value}
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_check.sh")], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        f"error: {name}={value} is not allowed: an integer >= 1"]
    assert not (tmp_path / "gpu_check.md").exists()
