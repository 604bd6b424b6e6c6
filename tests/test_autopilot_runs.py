"""echo.factor=auto end to end: the autopilot copies batches while the input is slow, never past its cap, counts
fresh examples exactly, logs the factor it chose per evaluation, and a resumed run goes on from its counts."""

import pytest

from conftest import FAST, compose_config, ctrl_c_at_evaluation, metric_rows
from echo_experiments.train import Interrupted, run

# 320 fresh batches of 32 read at 0.5 ms a record (16 ms a batch): the synthetic step is faster, so it copies.
SLOW = [*FAST, "echo.placement=after_batching", "echo.factor=auto", "echo.max_factor=3", "storage=emulated",
        "storage.latency_ms=0.5", "trainer.stop_at_target=false", "trainer.max_fresh_examples=10240",
        "trainer.checkpoint_every_steps=100000", "trainer.profile_batches=0"]


def _check_counts(out, record):
    rows = metric_rows(out)
    assert record.echo_auto and record.placement == "after_batching" and record.echo_factor == 3
    assert record.fresh_examples == 10240  # exact: counted from read ids
    assert record.steps == record.fresh_examples // 32 + record.echo_copied_batches  # a step: fresh or a copy
    assert record.echo_copied_batches > 0 and 1 < record.effective_echo_factor <= 3  # it echoed, within the cap
    assert all(row["delivered_per_fresh"] >= 1 and row["examples_trained"] <= 3 * row["fresh_examples"] for row in rows)
    trained = sum(r["delivered_per_fresh"] * (r["fresh_examples"] - p) for r, p in
                  zip(rows, [0] + [r["fresh_examples"] for r in rows]))
    assert round(trained) == record.examples_trained  # per-evaluation factors add up to the run's
    return rows


def test_the_autopilot_copies_while_the_input_is_slow_within_its_cap(tmp_path):
    record = run(compose_config(*SLOW), tmp_path)
    _check_counts(tmp_path, record)


def test_a_resumed_autopilot_run_goes_on_from_its_checkpointed_counts(tmp_path, monkeypatch):
    undo = ctrl_c_at_evaluation(monkeypatch, 3)
    with pytest.raises(Interrupted):
        run(compose_config(*SLOW), tmp_path)
    before = metric_rows(tmp_path)
    undo()
    record = run(compose_config(*SLOW), tmp_path)
    rows = _check_counts(tmp_path, record)
    assert rows[:3] == before and len(rows) == 10


def test_the_autopilot_is_refused_where_the_trainer_cannot_see_the_input(tmp_path):
    from echo_experiments.schema import ConfigError
    with pytest.raises(ConfigError, match="echo.placement=before_batching is not allowed: after_batching with "
                                          "echo.factor=auto"):
        run(compose_config(*FAST, "echo.placement=before_batching", "echo.factor=auto"), tmp_path)
