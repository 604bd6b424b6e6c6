"""The benchmark command runs and writes its tables (its numbers go to the README, not into assertions)."""

import subprocess
import sys

import pytest
from conftest import FAST


@pytest.mark.slow  # about 30 s of measuring; its arguments are checked in test_robustness.py (`make test-all` runs it)
def test_benchmark_writes_its_three_tables(tmp_path):
    out = tmp_path / "bench.md"
    proc = subprocess.run([sys.executable, "-m", "echo_experiments.benchmark", "--repeats", "1", "--batches", "2",
                           "--steps", "10", "--out", str(out), *FAST, "workload.shuffle_buffer=64"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    text = out.read_text()
    assert "## Echo stage: items/s delivered, nothing downstream" in text
    for placement in ("before_augmentation", "after_augmentation", "after_batching"):
        assert text.count(f"| {placement} |") == 4  # e=2 and e=4, on both storages
    assert "## The echo stage alone: its cost per delivered item" in text
    assert text.count("| examples | echo stage |") == text.count("| examples | flat_map idiom |") == 2
    assert text.count("| batches | echo stage |") == 2 and "| batches | flat_map idiom |" not in text
    assert "## The Grain echo stage alone: its cost per delivered item" in text
    assert text.count("| examples | ") == 7 and text.count("| batches | ") == 5  # tf.data's 4 and 2, Grain's 3 each
    assert "| bare jitted loop |" in text and "| trainer (fit) |" in text
    assert "| trainer (fit), echo.factor=auto after batching |" in text


@pytest.mark.slow  # about 31 s: `make test-all` runs it
def test_the_trial_table_alone_times_the_step_and_an_evaluation_at_each_eval_batch_size(tmp_path):
    out = tmp_path / "trial.md"
    proc = subprocess.run([sys.executable, "-m", "echo_experiments.benchmark", "--tables", "trial", "--repeats", "1",
                           "--out", str(out), *FAST, "workload.eval_examples=256", "workload.eval_batch_size=64"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    text = out.read_text()
    assert text.count("## ") == 1 and "## A trial's seconds: the train step and one evaluation" in text
    rows = [line.strip("| ").split(" | ") for line in text.splitlines() if line.startswith("| ")]
    assert [r[0] for r in rows[1:]] == ["32", "64", "128"]  # the config's and the two set beside it, in order
    assert all(0 < float(r[3]) < 1 for r in rows[1:])  # an evaluation's share of the time between two
