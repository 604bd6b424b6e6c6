"""The run record: what summary.json may hold, checked field by field, and the metric rows."""

import dataclasses
import json
import os

import pytest

from echo_experiments.core.record import SUMMARY_BYTES, RecordError, RunRecord, metric_rows

GOOD = {"workload": "w", "placement": "before_augmentation", "echo_factor": 2.0, "batch_size": 64,
        "shuffle_buffer": 1280, "seed": 3, "study": 0, "trial": 1, "tuning_seed": 0, "status": "reached_target",
        "steps": 100, "fresh_examples": 3200, "wall_time_s": 9.5, "target": {"metric": "accuracy", "value": 0.8,
                                                                              "mode": "max"},
        "fresh_examples_to_target": 3200, "steps_to_target": 100, "seconds_to_target": 9.9,
        "final_metrics": {"accuracy": 0.81, "train_loss": None}}


def test_a_version_1_record_reads_and_writes_back_as_version_2():
    record = RunRecord.from_json(GOOD)
    assert record.schema_version == 1 and record.reached and record.target.metric == "accuracy"
    assert RunRecord.from_json(record.to_json()) == record
    assert RunRecord.from_json({**GOOD, "schema_version": 2, "machine": {"cpu": "x"}}).machine == {"cpu": "x"}


def test_an_autopilot_record_before_version_3_reads_with_its_cap_in_echo_max_factor():
    """Version 2 held the autopilot's cap in echo_factor; read, it says what version 3 writes: echo_factor 1 (the
    autopilot has no echo stage), the cap in echo_max_factor. A fixed factor's record is read as it is."""
    old = {**GOOD, "schema_version": 2, "placement": "after_batching", "echo_factor": 8.0, "echo_auto": True}
    record = RunRecord.from_json(old)
    assert (record.echo_factor, record.echo_max_factor, record.echo_auto) == (1.0, 8.0, True)
    assert RunRecord.from_json(record.to_json()) == record  # read back once more, it is not moved again
    assert RunRecord.from_json({**old, "schema_version": 3, "echo_factor": 1.0, "echo_max_factor": 8.0}) == \
        dataclasses.replace(record, schema_version=3)
    fixed = RunRecord.from_json({**GOOD, "schema_version": 2})
    assert (fixed.echo_factor, fixed.echo_max_factor) == (2.0, None)


@pytest.mark.parametrize("version", [0, 4, 999, "2", True, 2.5])
def test_a_record_of_a_version_this_code_does_not_know_is_refused_with_its_number(version):
    with pytest.raises(RecordError, match=r"schema_version .+ is not one this code reads \(1 to 3\)"):
        RunRecord.from_json({**GOOD, "schema_version": version})


@pytest.mark.parametrize("change,reason", [
    ({"steps": [1, 2]}, "steps is [1, 2], not an integer"),
    ({"placement": 7}, "placement is 7, not a string"),
    ({"placement": "sideways"}, "placement 'sideways' is not one of"),
    ({"batch_size": None}, "batch_size is null, not an integer"),
    ({"echo_factor": "2"}, 'echo_factor is "2", not a finite number'),
    ({"seconds_to_target": "soon"}, 'seconds_to_target is "soon", not a finite number'),
    ({"target": {"metric": "accuracy", "value": "high", "mode": "max"}}, "target is"),
    ({"target": {"metric": "accuracy"}}, "target lacks metric, value, mode"),
    ({"status": "done"}, "status 'done' is not one of"),
    ({"fresh_examples_to_target": None}, "reached_target without fresh_examples_to_target"),
    ({"final_metrics": {"accuracy": "n/a"}}, "final_metrics is"),
    ({"study": True}, "study is true, not an integer"),
])
def test_a_wrong_field_is_named(change, reason):
    with pytest.raises(RecordError, match=reason.replace("[", r"\[").replace("]", r"\]")):
        RunRecord.from_json({**GOOD, **change})


def test_missing_fields_and_non_objects_are_named(tmp_path):
    with pytest.raises(RecordError, match="lacks steps, fresh_examples"):
        RunRecord.from_json({k: v for k, v in GOOD.items() if k not in ("steps", "fresh_examples")})
    with pytest.raises(RecordError, match="not a JSON object"):
        RunRecord.from_json([])
    (tmp_path / "summary.json").write_text('{"status": ')
    with pytest.raises(RecordError, match="summary.json is not JSON"):
        RunRecord.read(tmp_path / "summary.json")
    (tmp_path / "list.json").write_text("[]")
    with pytest.raises(RecordError, match="summary.json: not a JSON object"):
        RunRecord.read(tmp_path / "list.json")
    with pytest.raises(RecordError, match="no summary.json"):
        RunRecord.read(tmp_path / "nothing.json")


@pytest.mark.parametrize("line,reason", [
    ("[1, 2]", "line 2: not a JSON object"),
    ('{"step": "3", "fresh_examples": 10}', "line 2: step is \"3\", not an integer"),
    ('{"step": 3, "fresh_examples": 10, "accuracy": "soon"}', "line 2: accuracy is \"soon\", not a finite number"),
    ("{garbage", "line 2 is not JSON"),
])
def test_metric_rows_are_checked_line_by_line(tmp_path, line, reason):
    path = tmp_path / "metrics.jsonl"
    path.write_text(json.dumps({"step": 1, "fresh_examples": 5, "accuracy": None}) + "\n" + line + "\n")
    with pytest.raises(RecordError, match=reason):
        list(metric_rows(path))
    path.write_text(json.dumps({"step": 1, "fresh_examples": 5, "accuracy": 0.5}) + "\n\n")
    assert list(metric_rows(path)) == [{"step": 1, "fresh_examples": 5, "accuracy": 0.5}]


def _hostile(tmp_path, kind):
    """A summary.json that is not what a run writes."""
    path = tmp_path / "summary.json"
    if kind == "fifo":
        os.mkfifo(path)  # reading it would block until a writer came
    elif kind == "link":
        (tmp_path / "secret").write_text("{}")
        path.symlink_to(tmp_path / "secret")
    elif kind == "huge":
        path.write_bytes(b" " * (SUMMARY_BYTES + 1))
    elif kind == "latin1":
        path.write_bytes('{"workload": "caf\xe9"}'.encode("latin-1"))
    elif kind == "deep":
        path.write_text("[" * 200_000 + "]" * 200_000)
    return path


@pytest.mark.parametrize("kind,reason", [
    ("fifo", "summary.json is not a regular file, not a file a run writes"),
    ("link", "summary.json is a link, not a file a run writes"),
    ("huge", "summary.json is 1,048,577 bytes, more than a run writes (1,048,576 at most)"),
    ("latin1", "summary.json is not UTF-8 text (byte 17)"),
    ("deep", "summary.json is not a record (nested too deep to read)"),
])
def test_a_summary_that_no_run_wrote_is_refused_at_once_with_what_it_is(tmp_path, kind, reason):
    with pytest.raises(RecordError) as refused:
        RunRecord.read(_hostile(tmp_path, kind))
    assert str(refused.value) == reason


def test_metrics_that_are_a_fifo_or_nested_too_deep_are_named(tmp_path):
    os.mkfifo(tmp_path / "metrics.jsonl")
    with pytest.raises(RecordError, match="^metrics.jsonl is not a regular file"):
        list(metric_rows(tmp_path / "metrics.jsonl"))
    (tmp_path / "deep.jsonl").write_text("[" * 200_000 + "]" * 200_000 + "\n")
    with pytest.raises(RecordError, match="^metrics.jsonl line 1 is not JSON"):
        list(metric_rows(tmp_path / "deep.jsonl"))
