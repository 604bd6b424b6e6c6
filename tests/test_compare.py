"""`python -m echo_experiments.compare`: one command that answers "does echoing help my training?"."""

import json
import re
import signal
import subprocess
import sys

import pytest
from conftest import FAST


# About 48 s: compare's answers are the unit tier's (tests/unit/test_compare_answers.py). `make test-all` runs it.
@pytest.mark.slow
def test_compare_profiles_then_runs_both_to_the_target_and_its_table_matches_their_records(tmp_path):
    # Evaluations every 128 fresh examples: the baseline reaches its target in about 18, enough to measure.
    proc = subprocess.run([sys.executable, "-m", "echo_experiments.compare", *FAST, "storage=emulated",
                           "storage.latency_ms=0.5", "trainer.profile_batches=5",
                           "trainer.eval_every_fresh_examples=128", "--factor", "2", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert out.startswith("profiling: ") and "\nadvice: " in out
    records = {name: json.loads((tmp_path / name / "summary.json").read_text())
               for name in ("baseline", "echo_factor=2", "echo_factor=auto")}
    base, echoed, auto = records.values()
    assert (base["echo_factor"], echoed["echo_factor"], echoed["placement"]) == (1.0, 2.0, "before_augmentation")
    assert (auto["echo_auto"], auto["placement"]) == (True, "before_augmentation")  # where the echoed run echoed
    assert base["status"] == echoed["status"] == auto["status"] == "reached_target"
    rows = {m.group(1): m.group(2).split(" | ") for m in re.finditer(r"^\| (baseline|e=2 at \w+|auto at \w+) [^|]*\| "
                                                                     r"(.*) \|$", out, re.M)}
    for name, r in (("baseline", base), ("e=2 at before_augmentation", echoed), ("auto at before_augmentation", auto)):
        assert rows[name][:2] == [f"{r['fresh_examples_to_target']:,}", f"{r['seconds_to_target']:,.1f}"]
        assert rows[name][4] == f"{r['effective_echo_factor']:,.2f}"
        assert rows[name][7] == f"{r['upstream_downstream_ratio']:,.2f}"  # the R each run measured
        assert rows[name][8] == f"{r['input_slowdown']:,.2f}"  # what its steps and copies cost the input
    for name, r in (("e=2 at before_augmentation", echoed), ("auto at before_augmentation", auto)):
        assert rows[name][2] == f"{base['seconds_to_target'] / r['seconds_to_target']:,.2f}"
        ratio = base["upstream_s_per_batch"] / base["downstream_s_per_step"]
        predicted = max(1, min(r["effective_echo_factor"], ratio))
        assert abs(float(rows[name][3]) - predicted) < 0.5 * predicted  # R profiled in its own run, beside these
    e = echoed["effective_echo_factor"]
    worth = (base["fresh_examples_to_target"] / echoed["fresh_examples_to_target"] - 1) / (e - 1)
    assert rows["e=2 at before_augmentation"][5] == f"{worth:,.2f}"
    assert "the machine was" in out and (tmp_path / "compare.md").read_text().count("| baseline |") == 1
    last = out.strip().splitlines()[-1]
    assert re.match(r"(fresh examples: .*; seconds: (echoing saved \d+% of the seconds to target here: |no gain "
                    r"here: |cannot tell: )|cannot tell: )", last), last
    assert (tmp_path / "compare.md").read_text().strip().endswith(last)


# The answer's words are tested from records in tests/unit/test_compare_answers.py (a baseline at its first
# evaluations); this end-to-end run adds that no echoed run starts: `make test-all` runs it (about 14 s of CPU).
@pytest.mark.slow
def test_a_baseline_that_reaches_its_target_at_the_first_evaluation_gets_no_speedup(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "echo_experiments.compare", *FAST, "trainer.profile_batches=5",
                           "trainer.eval_every_fresh_examples=2048", "workload.target.value=0.5", "--out",
                           str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 2, proc.stderr[-3000:]
    base = json.loads((tmp_path / "baseline" / "summary.json").read_text())
    assert base["fresh_examples_to_target"] == 2048  # the first evaluation
    assert proc.stderr.strip().splitlines()[-1] == (
        "error: cannot tell: the baseline reached the target at evaluation 1 (2,048 fresh examples, one evaluation "
        "every 2,048), too early for the comparison to measure anything; evaluate at least 10 times before the "
        "target (trainer.eval_every_fresh_examples=204) or set a harder workload.target.value")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["baseline", "compare.md"]  # no echoed run
    assert "| baseline |" in (tmp_path / "compare.md").read_text() and "speedup" not in proc.stdout.split("|")[-1]


@pytest.mark.slow  # about 23 s: `make test-all` runs it
def test_a_signal_during_compare_is_one_line_that_says_how_to_go_on(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "echo_experiments.compare", *FAST, "storage=emulated",
                             "storage.latency_ms=0.5", "trainer.profile_batches=5", "--out", str(tmp_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # one pipe, read
    for line in proc.stdout:  # bounded by the run: compare ends at the latest when its three runs have
        if line.startswith("training the baseline"):
            proc.send_signal(signal.SIGTERM)
            break
    err, _ = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    expected = (rf"error: stopped by SIGTERM; the runs so far are in {re.escape(str(tmp_path))}: "
                r"add --factor [\d.]+ to the same command to go on from there")
    assert len(errors) == 1 and re.fullmatch(expected, errors[0]), err[-3000:]


def test_compare_refuses_to_be_told_the_echo_factor_as_an_override(capsys):
    from echo_experiments.compare import main

    with pytest.raises(SystemExit) as refused:
        main([*FAST, "echo.factor=2"])
    assert refused.value.code == 2 and capsys.readouterr().err.strip().splitlines() == [
        "error: echo.factor, echo.placement and echo= are set by compare (the baseline, --factor, the autopilot): "
        "leave them out"]


def test_where_the_autopilot_cannot_echo_at_the_echoed_runs_placement_compare_runs_it_after_batching(tmp_path, capsys):
    from echo_experiments.compare import autopilot

    # Random crops resized to 12 pixels: augmented one example at a time, which the autopilot cannot do there.
    overrides = [*FAST, "workload.augment.image_size=12", "trainer.max_fresh_examples=1024"]
    placement, record = autopilot(overrides, "before_augmentation", tmp_path / "auto")
    assert (placement, record.placement, record.echo_auto, record.fresh_examples) == (
        "after_batching", "after_batching", True, 1024)
    assert "the autopilot cannot echo at before_augmentation here (echo.placement=before_augmentation with " \
           "echo.factor=auto augments whole batches, with the workload's augment_chunk" in capsys.readouterr().out
