"""The autopilot by what a copy is worth (echo.min_worth), on a workload built so that the worth is known
(tests/worth_workload/linear_teacher.py): where one step fits its batch a copy teaches nothing new and the
autopilot stops copying; where a step barely changes its batch a copy is worth a fresh example and it copies up to
its cap. Fresh counts stay exact either way."""

import json
from pathlib import Path

import pytest
from conftest import FAST, compose_config, metric_rows, signal_at_evaluation

from echo_experiments.training import worth
from echo_experiments.training.trainer import Interrupted, run

HERE = Path(__file__).resolve().parent / "worth_workload"
# 256 fresh batches of 32 read at 0.5 ms a record (16 ms a batch) against a step of about a millisecond: the
# clock alone would copy at every chance, to the cap of 3.
AUTO = [*FAST, f"hydra.searchpath=[file://{HERE / 'conf'}]", "workload=linear_teacher", "echo=after_batching",
        "echo.factor=auto", "echo.max_factor=3", "echo.min_worth=0.5", "trainer.copy_worth_every=4",
        "storage=emulated", "storage.latency_ms=0.5", "trainer.stop_at_target=false"]


@pytest.fixture
def teacher(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(HERE))
    import linear_teacher

    linear_teacher.write_data(tmp_path)
    # The candidate the gate reads: the pilots' choice where they made one (docs/protocol.md).
    monkeypatch.setattr(worth, "CHOSEN", worth.CHOSEN or "alignment")
    return f"workload.dataset=npz:{tmp_path}"


def _autopilot_run(teacher, out, learning_rate, extra=()):
    record = run(compose_config(*AUTO, teacher, f"optimizer.learning_rate={learning_rate}", *extra), out)
    rows = metric_rows(out)
    assert record.fresh_examples == 8192  # exact: counted from read ids, whatever was copied
    assert record.steps == 8192 // 32 + record.echo_copied_batches
    return record, rows


def test_where_a_copy_teaches_nothing_new_the_autopilot_stops_copying(teacher, tmp_path):
    record, rows = _autopilot_run(teacher, tmp_path / "run", learning_rate=30)
    estimates = [row[f"copy_worth_{worth.CHOSEN}"] for row in rows]
    assert rows[0]["delivered_per_fresh"] > 2.5  # no estimate yet: the clock's copies, to the cap
    assert estimates[0] < 0.5  # one step fits its batch: its copy is worth almost nothing
    later = [row["delivered_per_fresh"] for row in rows[1:]]
    # From then on one chance in PROBE_EVERY: copies all but stop (the median: one evaluation of a loaded machine
    # can see a different clock).
    assert sorted(later)[len(later) // 2] < 1.2, (later, estimates)
    # Below the cap's midpoint: the first evaluation's copies at the cap, then probes (under a loaded CI machine the
    # gate was seen reopening for an evaluation, 1.53).
    assert record.effective_echo_factor < 2, (later, estimates)


def test_where_a_copy_is_worth_a_fresh_example_the_autopilot_copies_up_to_its_cap(teacher, tmp_path):
    record, rows = _autopilot_run(teacher, tmp_path / "run", learning_rate=0.05)
    estimates = [row[f"copy_worth_{worth.CHOSEN}"] for row in rows]
    assert min(estimates) > 0.5, estimates  # a step barely changes its batch: a copy is the fresh batch again
    delivered = sorted(row["delivered_per_fresh"] for row in rows)
    assert delivered[len(delivered) // 2] > 2.5, delivered
    assert 2.5 < record.effective_echo_factor <= 3


def test_a_gated_run_resumed_keeps_its_gate_and_its_replay_trains_as_it_did(teacher, tmp_path, monkeypatch):
    checkpointed = "trainer.checkpoint_every_steps=100000"  # a checkpoint on the signal only
    undo = signal_at_evaluation(monkeypatch, 3)
    with pytest.raises(Interrupted):
        run(compose_config(*AUTO, teacher, "optimizer.learning_rate=30", checkpointed), tmp_path / "recorded")
    undo()
    record, rows = _autopilot_run(teacher, tmp_path / "recorded", learning_rate=30, extra=(checkpointed,))
    decisions = json.loads((tmp_path / "recorded" / "echo_decisions.json").read_text())["decisions"]
    assert "r" in {kind for kind, _ in decisions}  # it resumed
    resumed = [row["delivered_per_fresh"] for row in rows[3:]]
    # The gate closed before the interruption and its state is in the checkpoint: the resumed run does not copy
    # again at every chance until its estimate has been measured anew.
    assert sorted(resumed)[len(resumed) // 2] < 1.2, resumed
    replayed = run(compose_config(*AUTO, teacher, "optimizer.learning_rate=30", "storage.latency_ms=0",
                                  checkpointed, f"echo.replay={tmp_path / 'recorded'}"), tmp_path / "replayed")
    assert metric_rows(tmp_path / "replayed") == rows  # step for step, the resumption and its gate included
    assert (replayed.steps, replayed.echo_copied_batches) == (record.steps, record.echo_copied_batches)
