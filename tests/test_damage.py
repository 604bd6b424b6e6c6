"""What an unlucky user meets on a shared cluster: damaged data and run files, a full disk, signals from the first
instant, odd paths, keys added with +, buffers larger than the machine. Each ends in one line, the right exit
status and no traceback, and loses nothing already done."""

import errno
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import FAST, compose_config, metric_rows, signal_at_evaluation, train

from echo_experiments.cli.plan import check_command_line
from echo_experiments.core.rundir import DiskFull, RunDir
from echo_experiments.core.schema import ConfigError
from echo_experiments.core.signals import Interrupted
from echo_experiments.data import sources

# 320 steps of 32 with a checkpoint every 64 and an evaluation every 32 steps, trained past the target.
LONG = [*FAST, "trainer.stop_at_target=false", "trainer.max_fresh_examples=10240", "trainer.checkpoint_every_steps=64"]


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "echo_experiments", *args]


def one_line(proc: subprocess.CompletedProcess, code: int, starts: str) -> str:
    """The error line of a finished command, checked: its status, no traceback, and how the line begins."""
    assert proc.returncode == code, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and errors[0].startswith(f"error: {starts}"), proc.stderr[-3000:]
    return errors[0]


def killed_at(run_dir: Path, rows: int) -> list[int]:
    """Run LONG in another process, SIGKILL it once it has written ``rows`` metric rows, and return the steps of
    the complete checkpoints it left (a save in flight when it died is not one)."""
    proc = subprocess.Popen(command(*LONG, f"hydra.run.dir={run_dir}"), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        if (run_dir / "metrics.jsonl").exists() and len((run_dir / "metrics.jsonl").read_text().splitlines()) >= rows:
            break
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    assert not (run_dir / "summary.json").exists()
    return sorted(int(p.name) for p in (run_dir / "checkpoints").iterdir() if p.name.isdigit())


def garble(folder: Path) -> None:
    for path in folder.rglob("*"):
        if path.is_file():
            path.write_bytes(b"\0garbage" * 16)


# About 19 s of CPU (a command killed, then resumed): `make test-all` runs it; the test below keeps damaged
# checkpoints in `make test`.
@pytest.mark.slow
def test_a_damaged_newest_checkpoint_falls_back_to_the_one_before(tmp_path):
    train(compose_config(*LONG), tmp_path / "whole")
    steps = killed_at(tmp_path / "cut", rows=7)
    assert len(steps) >= 2  # the newest two complete ones (and an older one not yet deleted when it died)
    garble(tmp_path / "cut" / "checkpoints" / str(steps[-1]))
    record = train(compose_config(*LONG), tmp_path / "cut")
    assert record.steps == 320 and metric_rows(tmp_path / "cut") == metric_rows(tmp_path / "whole")


def test_when_no_checkpoint_can_be_read_the_line_says_how_to_start_over(tmp_path):
    """A run that left checkpoints and no summary (killed: the test above kills one), all of them damaged."""
    train(compose_config(*LONG), tmp_path)
    (tmp_path / "summary.json").unlink()
    steps = [p for p in (tmp_path / "checkpoints").iterdir() if p.name.isdigit()]
    assert steps
    for step in steps:
        garble(step)
    with pytest.raises(ConfigError, match=r"no checkpoint in \S+ can be read .*: add trainer.restart=true"):
        train(compose_config(*LONG), tmp_path)


def test_a_checkpoint_folder_this_program_did_not_write_is_refused_and_kept(tmp_path):
    (tmp_path / "checkpoints" / "1000").mkdir(parents=True)
    (tmp_path / "checkpoints" / "1000" / "thesis.txt").write_text("someone's")  # taken for damage and deleted once
    with pytest.raises(ConfigError) as refused:
        train(compose_config(*FAST, "trainer.max_steps=20", "trainer.checkpoint_every_steps=5"), tmp_path)
    assert str(refused.value) == (f"{tmp_path / 'checkpoints' / '1000'} is not a checkpoint this program wrote (it "
                                  "lacks state, loop, input): move it out of the run directory, or choose another "
                                  "hydra.run.dir")
    assert (tmp_path / "checkpoints" / "1000" / "thesis.txt").read_text() == "someone's"


@pytest.mark.slow  # three runs, about 14 s of CPU (the one-line message is the next test's): `make test-all` runs it
def test_a_full_disk_stops_the_run_keeps_its_checkpoint_and_the_rerun_resumes(tmp_path, monkeypatch):
    train(compose_config(*LONG), tmp_path / "whole")
    cut = tmp_path / "cut"
    original = RunDir.append_metrics

    def disk_fills_at_the_eighth_row(self, row):
        if row["step"] == 256:
            raise OSError(errno.ENOSPC, "No space left on device", str(self.path / "metrics.jsonl"))
        original(self, row)
    monkeypatch.setattr(RunDir, "append_metrics", disk_fills_at_the_eighth_row)
    with pytest.raises(DiskFull, match=r"no space left on the device of \S+ .*free space and run the same command"):
        train(compose_config(*LONG), cut)
    assert not (cut / "summary.json").exists()  # no failed record: nothing can be written, and nothing failed
    monkeypatch.setattr(RunDir, "append_metrics", original)
    train(compose_config(*LONG), cut)
    assert metric_rows(cut) == metric_rows(tmp_path / "whole")


@pytest.fixture
def small_disk(tmp_path):
    """A file system of 40 MiB at tmp_path/disk, filled but for what a test asks (a tmpfs: needs root)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=40m", "tmpfs", str(disk)], capture_output=True).returncode:
        pytest.skip("mounting a small file system needs root")

    def leave_free(kib: int) -> None:
        fd = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT)
        try:
            while True:
                os.write(fd, bytes(1 << 16))
        except OSError:
            pass
        finally:
            os.close(fd)
        os.truncate(disk / "filler", os.path.getsize(disk / "filler") - kib * 1024)
    yield disk, leave_free
    subprocess.run(["umount", "-l", str(disk)], check=True)


def test_a_truly_full_disk_is_one_line_before_the_run_and_during_a_checkpoint(small_disk):
    disk, leave_free = small_disk
    args = [*LONG, f"hydra.run.dir={disk / 'run'}", "trainer.checkpoint_every_steps=10"]
    leave_free(64)  # Hydra's own files would not fit: said before it writes them
    one_line(subprocess.run(command(*args), capture_output=True, text=True, timeout=300), 2,
             f"hydra.run.dir={disk / 'run'} cannot be used (1 MiB cannot be written in {disk}: No space left")
    os.remove(disk / "filler")
    leave_free(1500)  # the first checkpoint (about 1.2 MB) fits, the second does not
    proc = subprocess.run(command(*args), capture_output=True, text=True, timeout=300)
    one_line(proc, 3, f"no space left on the device of {disk / 'run'}: the run keeps its last complete checkpoint "
                      "(the unfinished save is deleted); free space and run the same command to resume")
    assert "No space left" not in proc.stderr  # Orbax's and absl's tracebacks of it are left out
    assert sorted(p.name for p in (disk / "run" / "checkpoints").iterdir()) == ["10"]  # nothing partial left


def test_sighup_checkpoints_and_stops_like_sigterm(tmp_path, monkeypatch):
    """In this process; how the command line ends on such a stop is test_robustness's SIGTERM test."""
    signal_at_evaluation(monkeypatch, 3, signal.SIGHUP)
    with pytest.raises(Interrupted) as stopped:
        train(compose_config(*LONG), tmp_path)
    assert stopped.value.signum == signal.SIGHUP
    assert re.fullmatch(r"stopped by SIGHUP at step 96 \(3072 fresh examples\); its checkpoint is in \S+: run the "
                        r"same command to resume", str(stopped.value))
    assert any((tmp_path / "checkpoints").iterdir()) and not (tmp_path / "summary.json").exists()


@pytest.mark.parametrize("signum,after_s", [(signal.SIGINT, 1.0), (signal.SIGTERM, 9.0)])
def test_a_signal_while_starting_is_one_line(tmp_path, signum, after_s):
    """Early (importing, composing) and later (the timing facts, on slow storage that makes them last)."""
    proc = subprocess.Popen(command(*FAST, "storage=emulated", "storage.latency_ms=20", "trainer.profile_batches=40",
                                    f"hydra.run.dir={tmp_path}"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    time.sleep(after_s)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=120)
    one_line(subprocess.CompletedProcess([], proc.returncode, "", err), 128 + signum,
             f"stopped by {signal.Signals(signum).name} while starting")


def test_a_start_up_signal_is_kept_through_a_library_call_and_stops_the_run_before_it_compiles(tmp_path, monkeypatch,
                                                                                             caplog):
    """Raised where it lands, a start-up signal once came back from TensorFlow as an error of its own (a
    ValueError about its iterators), and raised inside an extension module's import it crashed the process.
    Kept, it lets the library call finish, then stops the run at the next safe point, before anything is
    compiled: no summary that would call it failed, and the run says what it keeps, as any stopped run does."""
    from echo_experiments.core import signals as stops
    from echo_experiments.training import trainer

    built, compiled = [], []
    build, compile_step = trainer.stream.build, trainer.Trainer._compile

    def interrupted_build(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)
        built.append(True)  # the library call goes on
        return build(*args, **kwargs)

    monkeypatch.setattr(trainer.stream, "build", interrupted_build)
    monkeypatch.setattr(trainer.Trainer, "_compile", lambda *a: compiled.append(True) or compile_step(*a))
    handlers = {s: signal.getsignal(s) for s in stops.Signals.SIGNALS}
    stops.stop_at_startup()
    try:
        with pytest.raises(stops.StartupInterrupted) as stopped:
            train(compose_config(*FAST), tmp_path)
    finally:
        stops._at_startup.clear()
        for s, handler in handlers.items():
            signal.signal(s, handler)
    assert stopped.value.signum == signal.SIGINT and built and not compiled
    assert not (tmp_path / "summary.json").exists()
    assert f"interrupted: {tmp_path} keeps its metrics and checkpoints and has no summary.json" in caplog.text


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


@pytest.mark.slow  # about 23 s: `make test-all` runs it
def test_a_dispatcher_without_workers_ends_the_run_within_the_timeout_timing_facts_included(tmp_path):
    port = _free_port()
    dispatcher = subprocess.Popen([sys.executable, "-m", "echo_experiments.service", "dispatcher", "--port",
                                   str(port)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert dispatcher.stdout.readline().startswith("dispatcher at")
        began = time.time()
        proc = subprocess.run(command(*FAST, f"data.service=grpc://localhost:{port}", "data.timeout_s=5",
                                      "trainer.profile_batches=20", f"hydra.run.dir={tmp_path}"),
                              capture_output=True, text=True, timeout=300)
        one_line(proc, 3, "no batch from the tf.data service")
        assert time.time() - began < 120
    finally:
        dispatcher.terminate()
        dispatcher.wait(timeout=30)


def test_damaged_data_files_are_one_line(tmp_path, data_dir):
    copy = tmp_path / "data"
    shutil.copytree(Path(data_dir) / "synthetic_images", copy / "synthetic_images")
    shards = sorted((copy / "synthetic_images").rglob("*train.tfrecord*"))
    shards[0].write_bytes(shards[0].read_bytes()[:1000])  # truncated mid-record
    proc = subprocess.run(command(*FAST, f"data.dir={copy}", f"hydra.run.dir={tmp_path / 'run'}"),
                          capture_output=True, text=True, timeout=300)
    one_line(proc, 3, "the input pipeline failed reading from")
    # Metadata of another version: DataMissing, which the command line ends with exit 2 (data.dir=/proc below).
    info = next((copy / "synthetic_images").rglob("dataset_info.json"))
    info.write_text(info.read_text().replace('"version": "1.0.0"', '"version": "9.9.9"'))
    with pytest.raises(sources.DataMissing, match=rf"^synthetic_images in {re.escape(str(copy))} cannot be read "):
        sources.load("synthetic_images", "train", copy)


def test_a_damaged_evaluation_file_is_one_line_naming_the_split(tmp_path, data_dir):
    copy = tmp_path / "data"
    shutil.copytree(Path(data_dir) / "synthetic_images", copy / "synthetic_images")
    shard = sorted((copy / "synthetic_images").rglob("*test.tfrecord*"))[0]
    shard.write_bytes(shard.read_bytes()[:1000])  # truncated mid-record
    proc = subprocess.run(command(*FAST, f"data.dir={copy}", "trainer.max_steps=40",
                                  f"hydra.run.dir={tmp_path / 'run'}"), capture_output=True, text=True, timeout=300)
    line = one_line(proc, 2, f"synthetic_images's test split in {copy} cannot be read (DataLossError: ")
    assert line.endswith(f"delete the data set's folder in {copy} and run again to rebuild it (the offline data "
                         f"sets), or prepare it again with `tfds build synthetic_images --data_dir={copy}`")


@pytest.mark.parametrize("args,code,starts", [
    (["hydra.run.dir=/proc/run"], 2, "hydra.run.dir=/proc/run cannot be used (nothing can be made in /proc"),
    ([f"hydra.run.dir=/tmp/{'x' * 300}"], 2, "hydra.run.dir=/tmp/xxx"),
    (["data.dir=/proc"], 2, "synthetic_images is not prepared in /proc, which cannot be written"),
])
def test_paths_and_buffers_the_run_cannot_use_are_one_line(tmp_path, args, code, starts):
    run_dir = [] if any(a.startswith("hydra.run.dir") for a in args) else [f"hydra.run.dir={tmp_path}"]
    proc = subprocess.run(command(*FAST, *args, *run_dir), capture_output=True, text=True, timeout=300)
    one_line(proc, code, starts)


def test_a_shuffle_buffer_larger_than_the_machine_is_refused_before_it_fills(tmp_path):
    """A ConfigError (one line and exit 2 on the command line, as test_config_errors shows), raised while the
    stream is built, before a record is read."""
    with pytest.raises(ConfigError, match=r"^workload.shuffle_buffer=10000000 would hold about [\d.]+ GiB \(\d+ bytes "
                                          r"an element\) and this machine has [\d.]+ GiB available: at most \d+ here"):
        train(compose_config(*FAST, "workload=fashion_mnist", "workload.shuffle_buffer=10000000"), tmp_path)


@pytest.mark.parametrize("argv,message", [
    (["+foo=1"], "foo is not a key: the config has workload, echo"),
    (["+trainer.foo=1"], "trainer.foo is not a key: trainer has max_fresh_examples"),
    (["+workload.model.foo=1"], "workload.model.foo is not a key: workload.model has arch, depth, width"),
    (["workload.task=.relative:X"], "workload.task=.relative:X is not allowed"),
])
def test_keys_added_with_plus_and_relative_tasks_are_refused(argv, message):
    assert check_command_line(argv).startswith(message)


def test_a_damaged_run_file_in_a_run_directory_is_one_line(tmp_path):
    """From the command line; which run files are checked, and how, is tests/unit/core/test_rundir.py's."""
    RunDir(tmp_path).start(compose_config(*FAST))
    (tmp_path / "summary.json").write_text("[]")
    proc = subprocess.run(command(*FAST, f"hydra.run.dir={tmp_path}"), capture_output=True, text=True, timeout=300)
    line = one_line(proc, 2, f"{tmp_path / 'summary.json'} is damaged")
    assert "trainer.restart=true" in line


def test_a_signal_while_the_shuffle_buffer_fills_is_one_line_at_once(tmp_path):
    """The first batch waits for the shuffle buffers to fill (here 10,000 records read through slow storage): a
    signal then ends the run within a second or two, not once they are full."""
    proc = subprocess.Popen(command(*FAST, "storage=emulated", "storage.latency_ms=5",
                                    "workload.shuffle_buffer=10000", f"hydra.run.dir={tmp_path}"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while not (tmp_path / "config.yaml").exists() and time.time() < deadline:
        time.sleep(0.2)
    time.sleep(6)  # compiled, reading: 10,000 reads of 5 ms take about 50 s
    proc.send_signal(signal.SIGINT)
    began = time.time()
    _, err = proc.communicate(timeout=120)
    one_line(subprocess.CompletedProcess([], proc.returncode, "", err), 130, "stopped by SIGINT while starting")
    assert time.time() - began < 15
