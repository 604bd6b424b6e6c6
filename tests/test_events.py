"""TensorBoard event files (events.py), read back with TensorBoard's own event reader."""

import json

import pytest
from conftest import FAST, compose_config, train
from tensorboard.backend.event_processing.event_accumulator import TENSORS, EventAccumulator
from tensorboard.plugins.hparams import plugin_data_pb2
from tensorboard.util import tensor_util

from echo_experiments.training.events import Events

# e=2 before augmentation, 4 evaluations of 1,024 fresh examples (64 steps each at batch 32); no echo shuffle,
# so the counts are exact.
SHORT = [*FAST, "echo.factor=2", "echo.shuffle_buffer=0", "trainer.max_fresh_examples=4096",
         "trainer.stop_at_target=false"]


def events(run_dir):
    reader = EventAccumulator(str(run_dir / "tb"), size_guidance={TENSORS: 0})
    reader.Reload()
    return reader


def curve(reader, tag):
    return [(e.step, float(tensor_util.make_ndarray(e.tensor_proto))) for e in reader.Tensors(tag)]


def same(got, expected):
    """Same steps exactly, values to float32 precision (the event files hold float32)."""
    return [s for s, _ in got] == [s for s, _ in expected] and [v for _, v in got] == pytest.approx(
        [v for _, v in expected], rel=1e-6)


def rows(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_a_run_logs_its_curves_on_steps_and_on_fresh_examples_and_its_hparams(tmp_path):
    train(compose_config(*SHORT), tmp_path)
    reader, kept = events(tmp_path), rows(tmp_path)
    assert [r["fresh_examples"] for r in kept] == [1024, 2048, 3072, 4096]
    assert same(curve(reader, "eval/accuracy"), [(r["step"], r["accuracy"]) for r in kept])
    assert same(curve(reader, "by_fresh/eval/accuracy"), [(r["fresh_examples"], r["accuracy"]) for r in kept])
    assert same(curve(reader, "by_fresh/train/loss"), [(r["fresh_examples"], r["train_loss"]) for r in kept])
    assert same(curve(reader, "train/learning_rate"), [(r["step"], 0.1) for r in kept])
    # Echoing at e=2 trains on each fresh example twice once the echo stage is in steady state.
    assert [v for _, v in curve(reader, "train/effective_echo_factor")] == pytest.approx([2.0] * 4)
    assert "train/delivered_per_fresh" not in reader.Tags()[TENSORS]  # the autopilot's, per evaluation
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["status"] == "reached_target"  # accuracy 0.85 by 2,048 fresh examples; it trains on
    assert curve(reader, "outcome/reached_target") == [(summary["steps"], 1.0)]
    assert curve(reader, "outcome/fresh_examples_to_target") == [(summary["steps"],
                                                                  summary["fresh_examples_to_target"])]
    assert {"time/elapsed_s", "time/wall_time_s", "outcome/elapsed_s"} <= set(reader.Tags()[TENSORS])
    # The HParams dashboard's session: the condition and the searched metaparameters.
    (content,) = reader.PluginTagToContent("hparams").values()
    start = plugin_data_pb2.HParamsPluginData.FromString(content).session_start_info
    assert start.hparams["echo_factor"].number_value == 2.0
    assert start.hparams["placement"].string_value == "before_augmentation"
    assert start.hparams["optimizer.learning_rate"].number_value == pytest.approx(0.1)


def test_a_resumed_run_continues_the_same_curves_without_a_point_twice(tmp_path, monkeypatch):
    """Interrupted at its third evaluation (its checkpoint is from the second), then run again."""
    calls = {"n": 0}
    original = Events.row

    def interrupted_at_the_third(self, row):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        original(self, row)

    cfg = compose_config(*SHORT, "trainer.checkpoint_every_steps=64")
    monkeypatch.setattr(Events, "row", interrupted_at_the_third)
    with pytest.raises(KeyboardInterrupt):
        train(cfg, tmp_path)
    assert len(curve(events(tmp_path), "eval/accuracy")) == 2
    monkeypatch.setattr(Events, "row", original)
    train(cfg, tmp_path)
    reader, kept = events(tmp_path), rows(tmp_path)
    steps = [s for s, _ in curve(reader, "eval/accuracy")]
    assert steps == [r["step"] for r in kept] == [64, 128, 192, 256]
    assert [s for s, _ in curve(reader, "by_fresh/eval/accuracy")] == [1024, 2048, 3072, 4096]


def test_tensorboard_false_writes_no_event_files(tmp_path):
    train(compose_config(*SHORT, "trainer.max_fresh_examples=1024", "trainer.tensorboard=false"), tmp_path)
    assert (tmp_path / "summary.json").exists() and not (tmp_path / "tb").exists()


def test_a_metric_beyond_float32_is_left_out_and_the_row_is_still_written(tmp_path):
    # A diverging LM's first evaluation (a batch-128 trial's, from a sweep): its perplexity, exp(568), is a
    # float64 that tf.summary's float32 cannot hold; writing it failed the whole run.
    row = {"step": 25, "fresh_examples": 3200, "examples_trained": 3200, "train_loss": 11.86, "learning_rate": 0.652,
           "loss": 568.021, "accuracy": 0.0964, "perplexity": 4.879806216248654e+246}
    writer = Events(tmp_path, {"echo_factor": 1.0})
    writer.row(row)
    writer.close()
    reader = events(tmp_path)
    assert same(curve(reader, "eval/loss"), [(25, 568.021)])
    assert same(curve(reader, "by_fresh/eval/accuracy"), [(3200, 0.0964)])
    assert "eval/perplexity" not in reader.Tags()[TENSORS]
