"""A stop signal in a sweep whose jobs run in worker processes (worker_stops.py), in this process: the command
waits for its jobs, a worker holds the signal between jobs."""

import os
import signal
import subprocess
import sys
import time

import pytest

from echo_experiments.cli import worker_stops
from echo_experiments.cli.plan import plan
from echo_experiments.cli.worker_stops import JOBLIB_LAUNCHER, SweepStopped, Waiting, runs_in_workers
from echo_experiments.core.signals import Signals


@pytest.fixture
def handlers(monkeypatch):
    """The process's signal handlers as they were, and this process not a worker, after the test."""
    previous = {s: signal.getsignal(s) for s in Signals.SIGNALS}
    monkeypatch.setattr(worker_stops, "_worker", {})
    yield
    for s, handler in previous.items():
        signal.signal(s, handler)


def _child():
    """A process of this one's that a SIGTERM ends (as a worker's job stops on it)."""
    return subprocess.Popen([sys.executable, "-c", "import time; print('up', flush=True); time.sleep(60)"],
                            stdout=subprocess.PIPE, text=True)


def test_the_command_passes_the_first_stop_on_to_its_workers_and_waits(handlers):
    child = _child()
    assert child.stdout.readline().strip() == "up"
    with Waiting() as waiting:
        os.kill(os.getpid(), signal.SIGINT)  # no KeyboardInterrupt: the command waits for its jobs
        assert waiting.received == signal.SIGINT
        assert child.wait(timeout=30) == -signal.SIGTERM
        os.kill(os.getpid(), signal.SIGTERM)  # another SIGTERM (a group's, or SLURM's) changes nothing
        with pytest.raises(SweepStopped) as stopped:  # a second Ctrl-C does not wait
            os.kill(os.getpid(), signal.SIGINT)
    assert stopped.value.signum == signal.SIGINT
    assert str(stopped.value) == ("stopped by SIGINT (a second Ctrl-C): the jobs still running were killed, and resume "
                                  "from their last checkpoint: run the same command to finish the sweep")
    assert waiting.message() == ("stopped by SIGINT: each running job stopped at a step boundary with its "
                                 "checkpoint, and no further job started; run the same command to finish the sweep")


def test_the_command_waits_for_its_jobs_only_as_long_as_the_grace(handlers, monkeypatch):
    monkeypatch.setattr(worker_stops, "GRACE_S", 0.3)
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(SweepStopped, match=r"^stopped by SIGTERM \(its jobs did not stop within 0 s\)"):
        with Waiting():
            os.kill(os.getpid(), signal.SIGTERM)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                time.sleep(0.01)
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_worker_holds_a_stop_between_jobs_and_then_starts_none(handlers):
    assert not worker_stops.in_worker() and worker_stops.stopped() is None
    worker_stops.hold()  # joblib's initializer
    assert worker_stops.in_worker() and worker_stops.stopped() is None
    os.kill(os.getpid(), signal.SIGTERM)  # this process lives on
    os.kill(os.getpid(), signal.SIGINT)
    assert worker_stops.stopped() == signal.SIGTERM  # the first names the stop


def test_a_job_stopped_in_a_worker_stops_the_worker(handlers):
    worker_stops.hold()
    with worker_stops.between_jobs():
        signal.signal(signal.SIGTERM, signal.default_int_handler)  # the job's own handlers
        worker_stops.job_stopped(signal.SIGTERM)
    assert worker_stops.stopped() == signal.SIGTERM
    os.kill(os.getpid(), signal.SIGINT)  # held again after the job, not a KeyboardInterrupt


def test_only_the_joblib_launcher_with_more_than_one_job_at_a_time_runs_jobs_in_workers():
    assert runs_in_workers(JOBLIB_LAUNCHER, 2)
    assert runs_in_workers(JOBLIB_LAUNCHER, None) == (os.cpu_count() > 1)  # None: joblib's -1, every core
    assert not runs_in_workers(JOBLIB_LAUNCHER, 1)  # joblib runs one at a time in the command's process
    assert not runs_in_workers("hydra._internal.core_plugins.basic_launcher.BasicLauncher", None)
    common = ["-m", "workload=synthetic", "echo.factor=1,2"]
    assert plan([*common, "hydra/launcher=joblib", "hydra.launcher.n_jobs=2"]).workers
    assert not plan([*common, "hydra/launcher=joblib", "hydra.launcher.n_jobs=1"]).workers
    assert not plan(common).workers and not plan(["workload=synthetic"]).workers


_kept = []


def _grow_memory(megabytes: int) -> int:
    """A job that leaves its worker ``megabytes`` larger, as a training job leaves JAX's and TensorFlow's caches."""
    _kept.append(b"\x01" * (megabytes << 20))  # written, so the worker's resident memory grows
    time.sleep(1.2)  # joblib checks a worker's memory after a job, at most once a second, from its second job
    return os.getpid()


def test_workers_replaced_after_jobs_that_grow_their_memory_give_no_warning(handlers, recwarn):
    from joblib import Parallel, delayed
    from joblib.externals.loky import get_reusable_executor

    try:
        with worker_stops.workers_hold_signals():
            pids = Parallel(n_jobs=2, backend="loky")(delayed(_grow_memory)(350) for _ in range(6))
    finally:
        get_reusable_executor().shutdown(wait=True)  # no idle worker left holding its memory for the next tests
    assert len(set(pids)) > 2  # joblib replaced workers after their jobs
    assert not [w for w in recwarn if worker_stops.WORKER_REPLACED in str(w.message)]
