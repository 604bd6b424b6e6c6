"""Failures a user can cause: signals, a busy or failed run directory, files others must read."""

import json
import os
import re
import signal
import stat
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import FAST, compose_config, metric_rows, signal_at_evaluation, train

from echo_experiments.core.record import RunRecord
from echo_experiments.core.rundir import RunDir, RunDirInUse
from echo_experiments.training.trainer import Interrupted

ROOT = Path(__file__).resolve().parents[1]
# 320 steps of 32, an evaluation every 32 steps (10 rows), trained past the target.
LONG = [*FAST, "trainer.stop_at_target=false", "trainer.checkpoint_every_steps=1000",
        "trainer.max_fresh_examples=10240"]


def test_sigint_stops_at_a_step_boundary_with_a_checkpoint_and_the_rerun_ends_as_if_uninterrupted(
        tmp_path, monkeypatch):
    train(compose_config(*LONG), tmp_path / "whole")
    undo = signal_at_evaluation(monkeypatch, 5)
    cut = tmp_path / "cut"
    with pytest.raises(Interrupted) as stopped:
        train(compose_config(*LONG), cut)
    assert stopped.value.signum == signal.SIGINT
    assert re.fullmatch(r"stopped by SIGINT at step 160 \(5120 fresh examples\); its checkpoint is in \S+: run the "
                        r"same command to resume", str(stopped.value))
    assert not (cut / "summary.json").exists() and len(metric_rows(cut)) == 5
    undo()
    train(compose_config(*LONG), cut)
    assert metric_rows(cut) == metric_rows(tmp_path / "whole") and len(metric_rows(cut)) == 10


def test_sigterm_ends_the_command_with_one_line_and_status_143(tmp_path):
    command = [sys.executable, "-m", "echo_experiments", *LONG, "trainer.max_fresh_examples=10000000",
               f"hydra.run.dir={tmp_path}"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 300
    while not (tmp_path / "metrics.jsonl").exists() and time.time() < deadline:  # training has begun
        time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in err
    assert re.fullmatch(r"error: stopped by SIGTERM at step \d+ \(\d+ fresh examples\); its checkpoint is in "
                        r"\S+: run the same command to resume", errors[0])
    assert (tmp_path / "checkpoints").is_dir()


@pytest.mark.slow  # about 27 s: `make test-all` runs it
def test_a_second_ctrl_c_during_a_checkpoint_save_ends_at_once_with_one_line_and_the_rerun_resumes(tmp_path):
    """The first SIGINT stops the loop at its next step, which saves a checkpoint; the second lands in that step or
    save (Orbax's threads and locks), where raising KeyboardInterrupt printed their tracebacks as the process ended.
    The save it cut short is not a checkpoint: the rerun goes on from the last complete one, or starts over. A 1 ms
    read of each record (32 ms a step) keeps the run training for a second after its first evaluation: unslowed, it
    could end before the signals came, and a signal in the interpreter's shutdown kills it silently."""
    command = [sys.executable, "-m", "echo_experiments", *LONG, "trainer.max_fresh_examples=2048",
               "storage=emulated", "storage.latency_ms=1", f"hydra.run.dir={tmp_path}"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 300
    while not (tmp_path / "metrics.jsonl").exists():  # training has begun
        assert time.time() < deadline and proc.poll() is None
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGINT and "Traceback" not in err, err[-3000:]
    assert len([line for line in err.splitlines() if line.startswith("error:")]) == 1, err[-3000:]
    again = subprocess.run(command, capture_output=True, text=True, timeout=600)  # from the last complete checkpoint
    assert again.returncode == 0, again.stderr[-2000:]
    assert [row["step"] for row in metric_rows(tmp_path)] == [32, 64]  # each evaluation once, none lost


# About 22 s of CPU (two commands): `make test-all` runs it. Faster tests keep its parts in `make test`: the
# in-process SIGINT test above resumes as if uninterrupted, tests/unit/core/test_config.py names a run by its
# overrides, tests/unit/core/test_rundir.py resumes a run of the same config.
@pytest.mark.slow
def test_the_same_command_line_again_resumes_an_interrupted_run_and_ends_as_if_uninterrupted(tmp_path):
    """No hydra.run.dir: the run's directory is named by its overrides (runs/<workload>/<overrides>), so the
    command a user typed, typed again after a Ctrl-C, finds the run it interrupted and says it resumes it."""
    command = [sys.executable, "-m", "echo_experiments", *LONG]
    (tmp_path / "cut").mkdir()
    # The uninterrupted run to compare with, in this process (one command's start-up less): the same config
    # trains alike in any process on this machine.
    run_dir = tmp_path / "whole"
    train(compose_config(*LONG), run_dir)
    proc = subprocess.Popen(command, cwd=tmp_path / "cut", stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 300
    while not (made := list((tmp_path / "cut" / "runs" / "synthetic").glob("*/metrics.jsonl"))) or len(
            metric_rows(made[0].parent)) < 3:
        assert time.time() < deadline and proc.poll() is None
        time.sleep(0.2)
    [cut] = [m.parent for m in made]
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGINT and "run the same command to resume" in err
    again = subprocess.run(command, cwd=tmp_path / "cut", capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-2000:]
    assert f"{cut.relative_to(tmp_path / 'cut')} holds an interrupted run of this config: resuming it" in again.stdout
    assert metric_rows(cut) == metric_rows(run_dir) and len(metric_rows(cut)) == 10
    assert json.loads((cut / "summary.json").read_text())["steps"] == json.loads(
        (run_dir / "summary.json").read_text())["steps"]


def test_a_second_process_in_a_busy_run_directory_is_refused_naming_the_holder(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from echo_experiments.core.rundir import RunDir; held = RunDir(sys.argv[1]).hold(); "
        "print('held', flush=True); time.sleep(600)"), str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(RunDirInUse, match=rf"{tmp_path} is in use by process {holder.pid} on \S+ since .*: "
                                              "wait for it to end, or choose another hydra.run.dir"):
            train(compose_config(*FAST), tmp_path)
    finally:
        holder.kill()
        holder.wait()
    # The kernel released the killed holder's lock: the lock file it left behind does not block.
    assert (tmp_path / ".lock").exists()
    assert train(compose_config(*FAST), tmp_path).status == "reached_target"


def test_a_run_with_its_stderr_closed_trains_to_its_end(tmp_path):
    """``2>&-`` (a daemon, a detached job): Python starts with sys.stderr None, which the progress bar's check
    of a terminal took for a failure."""
    shown = [*(a for a in FAST if not a.startswith("trainer.progress=")), "trainer.progress=true"]  # the bar asks
    proc = subprocess.run([sys.executable, "-m", "echo_experiments", *shown, "trainer.max_steps=4",
                           f"hydra.run.dir={tmp_path}"], stdout=subprocess.PIPE, text=True, timeout=300,
                          preexec_fn=lambda: os.close(2))
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert json.loads((tmp_path / "summary.json").read_text())["steps"] == 4


# About 66 s: resuming is in the fast tier's interrupted-run and SIGINT tests. `make test-all` runs it.
@pytest.mark.slow
def test_a_failed_run_resumes_on_rerun_and_restart_starts_over(tmp_path, monkeypatch):
    from echo_experiments.workloads.base import Workload

    original, calls = Workload.evaluate, {"n": 0}

    def fails_at_the_third_evaluation(self, params, model_state):
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("disk on fire")
        return original(self, params, model_state)

    monkeypatch.setattr(Workload, "evaluate", fails_at_the_third_evaluation)
    cfg = compose_config(*LONG, "trainer.checkpoint_every_steps=32")
    with pytest.raises(RuntimeError):
        train(cfg, tmp_path)
    failed = json.loads((tmp_path / "summary.json").read_text())
    assert (failed["status"], failed["error"]) == ("failed", "RuntimeError: disk on fire")
    monkeypatch.setattr(Workload, "evaluate", original)
    resumed = train(cfg, tmp_path)  # from the checkpoint at step 64, not from scratch
    assert resumed.status == "reached_target" and len(metric_rows(tmp_path)) == 10
    first = (tmp_path / "summary.json").stat().st_mtime_ns
    assert train(cfg, tmp_path) == resumed and (tmp_path / "summary.json").stat().st_mtime_ns == first  # complete
    again = train(compose_config(*LONG, "trainer.checkpoint_every_steps=32", "trainer.restart=true"), tmp_path)
    assert (tmp_path / "summary.json").stat().st_mtime_ns != first
    assert again.fresh_examples_to_target == resumed.fresh_examples_to_target


def test_run_files_are_readable_by_the_group_like_any_other_output(tmp_path):
    previous = os.umask(0o027)
    try:
        train(compose_config(*FAST), tmp_path)
    finally:
        os.umask(previous)
    for name in ("config.yaml", "metrics.jsonl", "summary.json"):
        mode = stat.S_IMODE((tmp_path / name).stat().st_mode)
        assert mode == 0o640, (name, oct(mode))


def test_no_committed_result_holds_an_absolute_path():
    absolute = re.compile(r"(?<![\w.:/])/(?:home|root|tmp|work|usr|Users|mnt|var|opt)/")
    found = [str(p.relative_to(ROOT)) for p in (ROOT / "results").rglob("*")
             if p.is_file() and p.suffix in {".csv", ".md", ".json", ".jsonl", ".yaml", ".svg"}
             and absolute.search(p.read_text(errors="replace"))]
    assert found == []


# results/README.md's rule: <source>[-<variant>]/<workload>, the source a preset of conf/experiment/ (its sweep as
# the preset runs it) or run / compare (runs of python -m echo_experiments or .compare without a preset), the
# variant what was changed, the workload one of conf/workload/.
FOLDER = re.compile(r"(?P<source>[a-z0-9_]+)(?:-(?P<variant>[a-z0-9_]+))?/(?P<workload>[a-z0-9_]+)")


def test_every_result_folder_is_named_by_the_rule():
    presets = {p.stem for p in (ROOT / "conf" / "experiment").glob("*.yaml")}
    workloads = {p.stem for p in (ROOT / "conf" / "workload").glob("*.yaml")}
    wrong = []
    results = ROOT / "results"
    for folder in sorted(p.relative_to(results).as_posix() for p in results.glob("*/*") if p.is_dir()):
        m = FOLDER.fullmatch(folder)
        if not m or m["workload"] not in workloads or not (
                m["source"] in presets or (m["source"] in ("run", "compare") and m["variant"])):
            wrong.append(folder)
    assert wrong == []
    assert FOLDER.fullmatch("autopilot_cpu_drift/fashion_mnist")["source"] not in presets  # as it was named before


def _make(*args):
    return subprocess.run(["make", "-s", "--no-print-directory", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)


def test_restore_puts_a_committed_sweep_back_once_and_refuses_a_missing_one(tmp_path):
    committed = ROOT / "results" / "placements_e2_cpu" / "fashion_mnist" / "runs"
    sweep = tmp_path / "placements_e2_cpu" / "fashion_mnist"
    first = _make("restore", f"SWEEP={sweep}")
    assert first.returncode == 0, first.stderr
    runs = sorted(p.name for p in committed.iterdir())
    assert first.stdout.strip() == f"{len(runs)} committed runs -> {sweep}"
    assert sorted(p.name for p in sweep.iterdir()) == runs
    for name in ("config.yaml", "metrics.jsonl", "summary.json"):
        assert (sweep / runs[0] / name).read_bytes() == (committed / runs[0] / name).read_bytes()
    # A job folder that is already there (a finished run, or an interrupted one with checkpoints) is left alone.
    assert _make("restore", f"SWEEP={sweep}").stdout.strip() == f"0 committed runs -> {sweep}"

    missing = _make("restore", f"SWEEP={tmp_path}/no_preset/no_workload")
    assert missing.returncode == 2
    assert missing.stderr.splitlines()[0] == "error: no committed runs in results/no_preset/no_workload/runs"
    for target in ("restore", "archive"):
        usage = _make(target)
        assert usage.returncode == 2
        assert usage.stdout.strip() == f"usage: make {target} SWEEP=multirun/<preset>/<workload>"


def test_archive_and_restore_carry_the_timed_runs_of_a_sweep_and_only_complete_runs(tmp_path):
    """retime writes each study's timed best trial into the sweep's timed/ folder: archived and restored with
    the jobs, in the same place."""
    sweep = tmp_path / "multirun" / "wall_clock_cpu" / "w"
    record = RunRecord.read(next((ROOT / "results" / "wall_clock_cpu").rglob("summary.json")))
    for job in ("e=1,trial=0", "e=2,trial=1", "timed/e=2,trial=1"):
        RunDir(sweep / job).write_summary(record)
        for name in ("config.yaml", "metrics.jsonl"):
            (sweep / job / name).write_text(f"{job} {name}\n")
    (sweep / "e=2,trial=1" / "echo_decisions.json").write_text("an autopilot's decisions\n")  # replayable
    (sweep / "e=2,trial=0").mkdir()  # interrupted: no summary.json
    (sweep / "e=2,trial=0" / "config.yaml").write_text("seed: 0\n")
    # Failed: no outcome; the sweep's command resumes it from its checkpoint.
    RunDir(sweep / "e=1,trial=1").write_summary(replace(record, status="failed", error="ValueError: x"))
    results = tmp_path / "results"
    archived = _make("archive", f"SWEEP={sweep}", f"RESULTS={results}")
    committed = results / "wall_clock_cpu" / "w" / "runs"
    assert archived.stdout.strip().splitlines() == [
        f"3 complete runs -> {committed}", "1 runs left out:", "  e=1,trial=1 (failed: its command resumes it)"], \
        archived.stderr

    def files(root):
        return {p.relative_to(root).as_posix(): p.read_text() for p in root.rglob("*") if p.is_file()}

    left_out = ("e=2,trial=0/", "e=1,trial=1/")
    assert files(committed) == {k: v for k, v in files(sweep).items() if not k.startswith(left_out)}
    again = tmp_path / "again" / "wall_clock_cpu" / "w"
    restored = _make("restore", f"SWEEP={again}", f"RESULTS={results}")
    assert restored.stdout.strip() == f"3 committed runs -> {again}", restored.stderr
    assert files(again) == files(committed)


@pytest.mark.parametrize("command,args", [
    ("report", ["{tmp}/no_such_folder", "--out", "{tmp}/report"]),
    ("report", ["{tmp}", "--out", "{tmp}/a_file"]),
    ("report", ["{tmp}/empty", "--out", "{tmp}/report"]),
    ("benchmark", ["--steps", "1"]),
    ("benchmark", ["--repeats", "0"]),
    ("benchmark", ["--repeats", "-1"]),
    ("benchmark", ["--batches", "x"]),
    ("benchmark", ["--out", "{tmp}"]),
    ("benchmark", ["--out", "{tmp}/no_such_folder/bench.md"]),
    ("benchmark", ["echo.factor=0"]),
    ("profile", ["trainer.profile_batches=0"]),
    ("profile", ["echo.placement=sideways"]),
    ("retime", ["{tmp}", "--timeout-min", "-1"]),
    ("service", ["dispatcher", "--port", "70000"]),
    ("service", ["dispatcher", "--port", "-1"]),
    ("service", ["worker", "--dispatcher", "127.0.0.1:1", "--timeout-s", "1"]),
])
def test_side_commands_refuse_bad_arguments_before_any_work(tmp_path, capsys, command, args):
    import importlib

    (tmp_path / "a_file").write_text("")
    (tmp_path / "empty").mkdir()
    before = sorted(tmp_path.rglob("*"))
    main = importlib.import_module({"report": "echo_experiments.report.__main__", "retime": "paper.retime"}.get(
        command, f"echo_experiments.{command}")).main
    try:
        status = main([a.format(tmp=tmp_path) for a in args])
    except SystemExit as e:
        status = e.code
    err = capsys.readouterr().err
    assert status == 2
    assert [line for line in err.splitlines() if "error" in line.lower()] and "Traceback" not in err
    assert sorted(tmp_path.rglob("*")) == before  # nothing written


def test_profile_help_is_help(capsys):
    from echo_experiments.profile import main

    assert main(["--help"]) == 0 and "usage: python -m echo_experiments.profile" in capsys.readouterr().out


def test_a_corrupt_dataset_info_is_one_line_saying_how_to_rebuild(tmp_path, data_dir):
    import shutil

    from echo_experiments.data import sources

    shutil.copytree(data_dir / "debian_fashion_mnist", tmp_path / "debian_fashion_mnist")
    next((tmp_path / "debian_fashion_mnist").rglob("dataset_info.json")).write_text("{broken")
    with pytest.raises(sources.DataMissing) as missing:
        sources.load("fashion_mnist", "train", tmp_path)
    assert str(missing.value).startswith(f"fashion_mnist in {tmp_path} cannot be read (ParseError: ")
    assert str(missing.value).endswith("delete the data set's folder in " + str(tmp_path) + " and run again to "
                                       "rebuild it (the offline data sets), or prepare it again with `tfds build "
                                       f"fashion_mnist --data_dir={tmp_path}`") and "\n" not in str(missing.value)


# About 15 s of CPU (a server and a command): `make test-all` runs it; test_storage.py's unreachable store keeps
# the one line of a store that does not answer in `make test`.
@pytest.mark.slow
def test_a_record_server_that_goes_away_ends_the_run_with_one_line(tmp_path, data_dir):
    server = subprocess.Popen([sys.executable, "-m", "echo_experiments.data.storage", "serve", "synthetic_images",
                               "train", str(data_dir)], stdout=subprocess.PIPE, text=True)
    try:
        url = server.stdout.readline().strip()
        command = [sys.executable, "-m", "echo_experiments", *LONG, "storage=http", f"storage.url={url}",
                   "trainer.max_fresh_examples=10000000", "data.timeout_s=30",
                   f"hydra.run.dir={tmp_path}"]
        run_ = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 300
        while not (tmp_path / "metrics.jsonl").exists() and time.time() < deadline:  # training has begun
            time.sleep(0.5)
        server.kill()
        _, err = run_.communicate(timeout=120)
    finally:
        server.kill()
        server.wait()
    assert run_.returncode == 3, err[-2000:]
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert errors == [f"error: the input pipeline failed reading from the record server at {url}: "
                      "ConnectionRefusedError: [Errno 111] Connection refused; the run keeps its last checkpoint: "
                      "run the same command to resume once it answers"]
    assert "Traceback" not in err


# A child that waits up to 1 s of its running time for a result its producer thread sets after 0.5 s of running
# time (ten sleeps of 0.05 s: a pause inside one ends it, as it ends a slice of the wait).
WAITER = """
import concurrent.futures, sys, threading, time
from echo_experiments.autopilot.reader import result_within
future = concurrent.futures.Future()
threading.Thread(target=lambda: ([time.sleep(0.05) for _ in range(10)], future.set_result("batch")),
                 daemon=True).start()
print("waiting", flush=True)
try:
    print(result_within(future, timeout_s=1.0, slice_s=0.1))
except concurrent.futures.TimeoutError:
    print("timed out")
"""


def test_time_a_run_spent_stopped_does_not_count_toward_the_input_timeout():
    """data.timeout_s counts the process's running time: stopped for 3 s in the middle of the wait (SIGSTOP, as
    a paused sweep or Ctrl-Z), it still gets the batch that takes half its timeout (one wait of 1 s would
    time out on waking)."""
    child = subprocess.Popen([sys.executable, "-c", WAITER], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "waiting"
    time.sleep(0.2)
    child.send_signal(signal.SIGSTOP)
    time.sleep(3)
    child.send_signal(signal.SIGCONT)
    out, _ = child.communicate(timeout=60)
    assert out.strip() == "batch"



def test_a_start_up_stuck_where_no_safe_point_comes_still_ends_on_sigterm_within_its_deadline():
    """A start-up signal is kept for the next safe point; a composition or an import that never reaches one (a YAML
    alias bomb, a module that blocks) held the process after `timeout`'s one SIGTERM. The kept signal now has a
    deadline: the one line, and the signal's exit status."""
    stuck = ("import time\nfrom echo_experiments.core import signals\nsignals.STARTUP_DEADLINE_S = 1.0\n"
             "signals.stop_at_startup()\nprint('ready', flush=True)\ntime.sleep(120)\n")
    proc = subprocess.Popen([sys.executable, "-c", stuck], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    began = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM and time.monotonic() - began < 30
    assert err.strip().splitlines() == ["error: stopped by SIGTERM while starting, before this attempt trained: the "
                                        "run directory keeps what it had; run the same command to go on"]
