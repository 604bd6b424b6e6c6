"""`python -m echo_experiments.compare`: one command that answers "does echoing help my training?"."""

import json
import re
import subprocess
import sys

from conftest import FAST


def test_compare_profiles_then_runs_both_to_the_target_and_its_table_matches_their_records(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "echo_experiments.compare", *FAST, "storage=emulated",
                           "storage.latency_ms=0.5", "trainer.profile_batches=5", "--factor", "2",
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert out.startswith("advice: ")
    base = json.loads((tmp_path / "baseline" / "summary.json").read_text())
    echoed = json.loads((tmp_path / "echo_factor=2" / "summary.json").read_text())
    assert (base["echo_factor"], echoed["echo_factor"], echoed["placement"]) == (1.0, 2.0, "before_augmentation")
    assert base["status"] == echoed["status"] == "reached_target"
    rows = {m.group(1): m.groups()[1:] for m in re.finditer(r"^\| (baseline|e=2 at \w+) \| ([\d,]+) \| ([\d,.]+) \|",
                                                                out, re.M)}
    assert rows["baseline"] == (f"{base['fresh_examples_to_target']:,}", f"{base['seconds_to_target']:,.1f}")
    assert rows["e=2 at before_augmentation"] == (f"{echoed['fresh_examples_to_target']:,}",
                                                   f"{echoed['seconds_to_target']:,.1f}")
    speedup = re.search(r"speedup \(baseline seconds / echoed seconds\): ([\d.]+); predicted from R = ([\d.]+)", out)
    assert float(speedup.group(1)) == round(base["seconds_to_target"] / echoed["seconds_to_target"], 2)
    ratio = base["upstream_s_per_batch"] / base["downstream_s_per_step"]
    assert abs(float(speedup.group(2)) - ratio) < 0.5 * ratio  # profiled in its own run, beside these two
    assert "the machine was" in out and (tmp_path / "compare.md").read_text().count("| baseline |") == 1


def test_compare_refuses_to_be_told_the_echo_factor_as_an_override():
    proc = subprocess.run([sys.executable, "-m", "echo_experiments.compare", *FAST, "echo.factor=2"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        "error: echo.factor and echo= are set by compare (the baseline, then --factor): leave them out"]
