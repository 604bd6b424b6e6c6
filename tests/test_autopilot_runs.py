"""echo.factor=auto end to end: the autopilot copies batches (or, before augmentation, examples) while the input is
slow, never past its cap, counts fresh examples exactly, logs the factor it chose per evaluation, and a resumed
run goes on from its counts; a replay of a run's recorded decisions trains as that run did."""

import json
import re

import pytest
from conftest import FAST, compose_config, metric_rows, signal_at_evaluation, train

from echo_experiments.core.schema import ConfigError
from echo_experiments.training.trainer import Interrupted

# 320 fresh batches of 32 read at 0.5 ms a record (16 ms a batch): the synthetic step is faster, so it copies.
SLOW = [*FAST, "echo.placement=after_batching", "echo.factor=auto", "echo.max_factor=3", "storage=emulated",
        "storage.latency_ms=0.5", "trainer.stop_at_target=false", "trainer.max_fresh_examples=10240",
        "trainer.checkpoint_every_steps=100000"]


def _check_counts(out, record):
    rows = metric_rows(out)
    assert record.echo_auto and record.placement == "after_batching"
    assert (record.echo_factor, record.echo_max_factor) == (1, 3)  # no echo stage; the cap, echo.max_factor
    assert record.fresh_examples == 10240  # exact: counted from read ids
    assert record.steps == record.fresh_examples // 32 + record.echo_copied_batches  # a step: fresh or a copy
    assert record.echo_copied_batches > 0 and 1 < record.effective_echo_factor <= 3  # it echoed, within the cap
    assert all(row["delivered_per_fresh"] >= 1 and row["examples_trained"] <= 3 * row["fresh_examples"] for row in rows)
    trained = sum(r["delivered_per_fresh"] * (r["fresh_examples"] - p) for r, p in
                  zip(rows, [0] + [r["fresh_examples"] for r in rows]))
    assert round(trained) == record.examples_trained  # per-evaluation factors add up to the run's
    return rows


def test_the_autopilot_copies_while_the_input_is_slow_within_its_cap(tmp_path, caplog):
    with caplog.at_level("INFO", logger="echo_experiments.training.trainer"):
        record = train(compose_config(*SLOW), tmp_path)
    rows = _check_counts(tmp_path, record)
    steps = [r.getMessage() for r in caplog.records if r.getMessage().startswith("step ")]
    assert [re.search(r"  echo (\d+\.\d\d)  ", line).group(1) for line in steps] == [
        f"{row['delivered_per_fresh']:.2f}" for row in rows]  # each evaluation's line says the factor it chose


def test_a_resumed_autopilot_run_goes_on_from_its_checkpointed_counts(tmp_path, monkeypatch):
    undo = signal_at_evaluation(monkeypatch, 3)
    with pytest.raises(Interrupted):
        train(compose_config(*SLOW), tmp_path)
    before = metric_rows(tmp_path)
    undo()
    record = train(compose_config(*SLOW), tmp_path)
    rows = _check_counts(tmp_path, record)
    assert rows[:3] == before and len(rows) == 10


def test_before_augmentation_the_autopilot_copies_examples_augmented_anew_with_exact_counts(tmp_path):
    overrides = [o.replace("echo.placement=after_batching", "echo.placement=before_augmentation") for o in SLOW]
    overrides += ["trainer.max_fresh_examples=5120"]
    record = train(compose_config(*overrides), tmp_path)
    rows = metric_rows(tmp_path)
    assert record.echo_auto and record.placement == "before_augmentation" and record.fresh_examples == 5120
    assert record.steps == 5120 // 32 + record.echo_copied_batches and 1 < record.effective_echo_factor <= 3
    assert all(row["examples_trained"] <= 3 * row["fresh_examples"] for row in rows)


def test_before_augmentation_without_copies_the_autopilot_trains_the_baselines_batches(data_dir):
    from echo_experiments.core.specs import PipelineSpec
    from echo_experiments.data import stream
    from echo_experiments.workloads import make

    base, auto = compose_config(), compose_config("echo.factor=auto")  # batches of 64: one augmentation chunk each
    workload = make(base.workload, data_dir)
    spec = PipelineSpec.from_config(auto)
    plain, as_read = (stream.build(workload, s).take(5).as_numpy_iterator()
                      for s in (PipelineSpec.from_config(base), spec))
    augment = stream.augment_batches(workload, spec)
    for key, (expected, read) in enumerate(zip(plain, as_read)):
        delivered = augment(read, key)  # the key the autopilot gives the key-th fresh batch
        assert (delivered["read_id"] == expected["read_id"]).all() and (delivered["image"] == expected["image"]).all()
        assert not (read["image"] == expected["image"]).all()  # read, not yet augmented


def test_before_augmentation_the_autopilot_needs_examples_of_one_shape(data_dir):
    from echo_experiments.core.schema import ConfigError
    from echo_experiments.core.specs import PipelineSpec
    from echo_experiments.data import stream
    from echo_experiments.workloads import make

    cfg = compose_config("echo.factor=auto")
    workload = make(cfg.workload, data_dir)
    stream.build(workload, PipelineSpec.from_config(cfg))  # fashion_mnist: one stored shape, augmented in chunks
    workload.augments_in_chunks = False  # as ImageNet's or the detection task's examples, one at a time
    with pytest.raises(ConfigError, match="echo.factor=auto augments whole batches, with the workload's augment_chunk, "
                                          "and ImageClassification augments one example at a time .augment.: give it "
                                          "augment_chunk .*, or use after_augmentation or after_batching"):
        stream.build(workload, PipelineSpec.from_config(cfg))


@pytest.mark.slow  # three runs, about 12 s of CPU: `make test-all` runs it
def test_a_replay_trains_as_the_recorded_run_did_its_resumption_included_on_an_input_that_never_waits(
        tmp_path, monkeypatch):
    recorded = [o.replace("after_batching", "after_augmentation") for o in SLOW] + ["trainer.max_fresh_examples=3072"]
    undo = signal_at_evaluation(monkeypatch, 2)
    with pytest.raises(Interrupted):
        train(compose_config(*recorded), tmp_path / "recorded")
    undo()
    original = train(compose_config(*recorded), tmp_path / "recorded")
    decisions = json.loads((tmp_path / "recorded" / "echo_decisions.json").read_text())
    assert decisions["max_factor"] == 3 and decisions["placement"] == "after_augmentation"
    assert {"f", "c", "r"} == {kind for kind, _ in decisions["decisions"]}  # copies, and the resumption
    assert sum(n for kind, n in decisions["decisions"] if kind != "r") == original.steps
    replayed = train(compose_config(*recorded, "storage.latency_ms=0", f"echo.replay={tmp_path / 'recorded'}"),
                   tmp_path / "replayed")
    assert metric_rows(tmp_path / "replayed") == metric_rows(tmp_path / "recorded")  # step for step
    assert (replayed.steps, replayed.echo_copied_batches) == (original.steps, original.echo_copied_batches)
    assert json.loads((tmp_path / "replayed" / "echo_decisions.json").read_text()) == decisions


def test_a_replay_of_a_missing_or_mismatched_record_is_refused_before_training(tmp_path):
    with pytest.raises(ConfigError, match=f"echo.replay={tmp_path}: {tmp_path / 'echo_decisions.json'} does not "
                                          "exist: give the directory of a run made with echo.factor=auto"):
        train(compose_config(*SLOW, f"echo.replay={tmp_path}"), tmp_path / "run")
    (tmp_path / "echo_decisions.json").write_text("{")  # damaged: cut short
    with pytest.raises(ConfigError, match=f"echo.replay={tmp_path}: {tmp_path / 'echo_decisions.json'} cannot be "
                                          "read as a record of decisions .JSONDecodeError.: give the directory of a "
                                          "run "
                                          "made with echo.factor=auto"):
        train(compose_config(*SLOW, f"echo.replay={tmp_path}"), tmp_path / "run")
    (tmp_path / "echo_decisions.json").write_text(json.dumps(
        {"placement": "after_batching", "max_factor": 4.0, "batch_size": 32, "decisions": [["f", 3]]}))
    with pytest.raises(ConfigError, match="the recorded run has echo.max_factor=4.0, this run 3.0: replay it with "
                                          "the recorded run's echo.max_factor"):
        train(compose_config(*SLOW, f"echo.replay={tmp_path}"), tmp_path / "run")


# The paired rule trains as the trend rule does, only its update differs (tests/unit/autopilot/test_cap.py): its
# run, about 12 s of CPU, is `make test-all`'s.
@pytest.mark.parametrize("rule", ["trend", pytest.param("paired", marks=pytest.mark.slow)])
def test_a_moving_cap_moves_within_its_bound_by_the_held_out_slices_loss(rule, tmp_path, monkeypatch):
    """echo.cap=trend or paired: four fresh batches (one in 50) held out, neither trained on nor counted; from then
    every 40 steps the slice's loss and the window's seconds of training move the cap within 1 and
    echo.max_factor, and each evaluation row says the cap it had."""
    from echo_experiments.autopilot.cap import RULES, START

    measured, update = [], RULES[rule].update
    monkeypatch.setattr(RULES[rule], "update",
                        lambda self, loss, seconds: measured.append((loss, seconds)) or update(self, loss, seconds))
    record = train(compose_config(*SLOW, f"echo.cap={rule}", "echo.max_factor=8"), tmp_path)
    rows = metric_rows(tmp_path)
    assert record.fresh_examples == 10240  # exact: the slice is read but never counted
    assert record.steps == record.fresh_examples // 32 + record.echo_copied_batches and record.echo_max_factor == 8
    assert len(measured) > 2 and all(0 < loss < 10 for loss, _ in measured)  # the slice's mean loss, window by window
    assert all(0 < seconds < 60 for _, seconds in measured[1:])  # seconds of training since the window began
    assert rows[0]["echo_cap"] == START and all(1 <= row["echo_cap"] <= 8 for row in rows)
    assert all(row["examples_trained"] <= 8 * row["fresh_examples"] for row in rows)


@pytest.mark.parametrize("overrides", [["echo.factor=2", "echo.placement=after_batching"],
                                       ["echo.factor=auto", "echo.placement=after_batching", "echo.replay=runs/x"]])
def test_the_trend_rule_is_the_autopilots_and_no_replays(overrides):
    from echo_experiments.workloads.run_check import check_run

    with pytest.raises(ConfigError, match=r"echo\.cap=trend is not allowed: fixed unless echo\.factor=auto"):
        check_run(compose_config(*FAST, *overrides, "echo.cap=trend"))

