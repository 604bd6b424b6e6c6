"""archive and restore: a sweep's complete runs into results/ and back, nothing else."""

import json

import pytest

from echo_experiments.core.record import RunRecord, Target
from echo_experiments.core.rundir import RunDir
from paper.archive import archive, restore


def write_run(folder, status="reached_target", with_checkpoint=False):
    run = RunDir(folder)
    (folder / "config.yaml").write_text("seed: 0\n")
    run.append_metrics({"step": 1, "fresh_examples": 32})
    run.write_summary(RunRecord(
        workload="w", placement="none", echo_factor=1.0, batch_size=32, shuffle_buffer=0, seed=0, study=0, trial=0,
        status=status, steps=1, fresh_examples=32, wall_time_s=1.0, target=Target("accuracy", 0.5),
        fresh_examples_to_target=32 if status == "reached_target" else None, steps_to_target=None,
        seconds_to_target=None, error="boom" if status == "failed" else None))
    if with_checkpoint:
        (folder / "checkpoints" / "1").mkdir(parents=True)


def test_archive_copies_complete_runs_only_and_restore_brings_them_back(tmp_path):
    sweep = tmp_path / "multirun" / "preset" / "wl"
    write_run(sweep / "a", with_checkpoint=True)
    write_run(sweep / "timed" / "a")
    write_run(sweep / "b", status="failed")
    (sweep / "c").mkdir()
    (sweep / "c" / "metrics.jsonl").write_text("")  # interrupted: no record
    (sweep / "d").mkdir()
    (sweep / "d" / "summary.json").write_text("{")  # damaged
    results = tmp_path / "results"
    message = archive(sweep, results)
    runs = results / "preset" / "wl" / "runs"
    assert message.splitlines()[0] == f"2 complete runs -> {runs}"
    assert "b (failed" in message and "d (summary.json is not JSON" in message
    assert sorted(p.relative_to(runs).as_posix() for p in runs.rglob("*") if p.is_file()) == [
        "a/config.yaml", "a/metrics.jsonl", "a/summary.json",
        "timed/a/config.yaml", "timed/a/metrics.jsonl", "timed/a/summary.json"]
    fresh = tmp_path / "elsewhere" / "preset" / "wl"
    write_run(fresh / "a", status="not_reached")  # a job already there is left alone
    assert restore(fresh, results) == f"1 committed runs -> {fresh}"
    assert json.loads((fresh / "a" / "summary.json").read_text())["status"] == "not_reached"
    assert (fresh / "timed" / "a" / "summary.json").exists()


def test_an_interrupted_archive_or_restore_leaves_no_record_and_the_next_one_finishes_it(tmp_path, monkeypatch):
    import shutil

    sweep, results = tmp_path / "multirun" / "preset" / "wl", tmp_path / "results"
    write_run(sweep / "a")
    copy = shutil.copy2

    def killed_at_the_record(source, destination, **kwargs):
        if source.name == "summary.json":  # killed with the record half-copied
            destination.write_text(source.read_text()[:10])
            raise KeyboardInterrupt
        return copy(source, destination, **kwargs)

    runs, fresh = results / "preset" / "wl" / "runs", tmp_path / "elsewhere" / "preset" / "wl"
    commands = ((lambda: archive(sweep, results), runs / "a"), (lambda: restore(fresh, results), fresh / "a"))
    for command, into in commands:
        monkeypatch.setattr(shutil, "copy2", killed_at_the_record)
        with pytest.raises(KeyboardInterrupt):
            command()
        assert sorted(p.name for p in into.iterdir()) == [".summary.json.part", "config.yaml", "metrics.jsonl"]
        monkeypatch.setattr(shutil, "copy2", copy)
        assert command().startswith("1 ")
        assert (into / "summary.json").read_text() == (sweep / "a" / "summary.json").read_text()


def test_archive_copies_no_link_and_no_run_without_metrics_and_restore_writes_through_no_link(tmp_path):
    sweep = tmp_path / "multirun" / "preset" / "wl"
    write_run(sweep / "good")
    secret = tmp_path / "secret.txt"
    secret.write_text("password\n")
    write_run(sweep / "linked")
    (sweep / "linked" / "config.yaml").unlink()
    (sweep / "linked" / "config.yaml").symlink_to(secret)  # would be committed as the run's config
    write_run(sweep / "bare")
    (sweep / "bare" / "metrics.jsonl").unlink()
    elsewhere = tmp_path / "elsewhere"
    write_run(elsewhere / "job")
    (sweep / "pointer").symlink_to(elsewhere / "job", target_is_directory=True)  # a job folder that is a link
    results = tmp_path / "results"
    message = archive(sweep, results)
    runs = results / "preset" / "wl" / "runs"
    assert message.splitlines()[0] == f"1 complete runs -> {runs}"
    assert "linked (config.yaml is a link, not files a run writes)" in message
    assert "bare (no metrics.jsonl" in message
    assert sorted(p.name for p in runs.iterdir()) == ["good"]
    assert "password" not in "".join(p.read_text() for p in runs.rglob("*") if p.is_file())

    fresh = tmp_path / "again" / "preset" / "wl"
    fresh.mkdir(parents=True)
    (fresh / "good").symlink_to(elsewhere / "job", target_is_directory=True)  # restoring would write into it
    before = sorted(p.name for p in (elsewhere / "job").iterdir())
    said = restore(fresh, results)
    assert said.splitlines()[0] == f"0 committed runs -> {fresh}" and "goes through the link" in said
    assert sorted(p.name for p in (elsewhere / "job").iterdir()) == before


def test_the_store_the_timed_runs_were_timed_on_travels_with_them(tmp_path):
    sweep = tmp_path / "multirun" / "preset" / "wl"
    write_run(sweep / "timed" / "a")
    (sweep / "timed" / "store.json").write_text('["storage=emulated"]\n')
    archive(sweep, tmp_path / "results")
    runs = tmp_path / "results" / "preset" / "wl" / "runs"
    assert (runs / "timed" / "store.json").read_text() == '["storage=emulated"]\n'
    fresh = tmp_path / "elsewhere" / "preset" / "wl"
    restore(fresh, tmp_path / "results")
    assert json.loads((fresh / "timed" / "store.json").read_text()) == ["storage=emulated"]


def test_archive_leaves_out_a_run_it_may_not_read_and_restore_a_committed_record_that_is_not_one(tmp_path,
                                                                                                 monkeypatch):
    """An unreadable config.yaml was a PermissionError traceback in archive; a committed summary.json of random
    bytes was restored as a complete job (its sweep would then skip the job for ever)."""
    sweep, results = tmp_path / "multirun" / "preset" / "wl", tmp_path / "results"
    write_run(sweep / "a")
    write_run(sweep / "b")
    real = __import__("os").access  # the suite runs as root, which reads any file: the refusal is the one to fake
    monkeypatch.setattr("paper.archive.os.access", lambda path, mode: real(path, mode) and "/a/" not in str(path))
    said = archive(sweep, results).splitlines()
    assert said == [f"1 complete runs -> {results / 'preset' / 'wl' / 'runs'}", "1 runs left out:",
                    "  a (config.yaml, metrics.jsonl, summary.json cannot be read by this user (permission): give it "
                    "read access and archive again)"]
    (results / "preset" / "wl" / "runs" / "b" / "summary.json").write_bytes(bytes(range(256)))
    fresh = tmp_path / "again" / "preset" / "wl"
    said = restore(fresh, results)
    assert said.splitlines()[0] == f"0 committed runs -> {fresh}" and not (fresh / "b").exists()
