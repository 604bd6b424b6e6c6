import json

import pytest

from echo_experiments.runs import RunDir, write_atomic


def test_summary_is_written_whole_and_nan_becomes_null(tmp_path):
    run = RunDir(tmp_path / "r")
    run.write_summary({"status": "diverged", "final_metrics": {"loss": float("nan")}})
    assert json.loads((tmp_path / "r" / "summary.json").read_text()) == {"status": "diverged",
                                                                        "final_metrics": {"loss": None}}
    assert [p.name for p in (tmp_path / "r").iterdir()] == ["summary.json"]  # no temp file left behind


def test_unknown_status_is_refused(tmp_path):
    with pytest.raises(ValueError, match="status must be one of"):
        RunDir(tmp_path).write_summary({"status": "done"})
    assert not (tmp_path / "summary.json").exists()


def test_metrics_rows_are_appended_and_read_back(tmp_path):
    run = RunDir(tmp_path)
    run.append_metrics({"step": 1, "accuracy": 0.5})
    run.append_metrics({"step": 2, "accuracy": float("inf")})
    assert list(run.metrics()) == [{"step": 1, "accuracy": 0.5}, {"step": 2, "accuracy": None}]


def test_atomic_write_replaces_content(tmp_path):
    write_atomic(tmp_path / "f.txt", "one")
    write_atomic(tmp_path / "f.txt", "two")
    assert (tmp_path / "f.txt").read_text() == "two"
