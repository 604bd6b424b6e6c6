"""A stop signal in a sweep whose jobs run in worker processes (Hydra's joblib launcher): every running job stops
at its next step boundary with a checkpoint, as a single run does, before the command ends.

Left to joblib, the command's process ends at the signal, and joblib kills its workers (SIGKILL) as it unwinds;
a worker that a signal ends makes joblib kill the others too. The running jobs would then lose what they trained
since their last periodic checkpoint. So:

- **the command** (:class:`Waiting`) takes the first stop signal, passes SIGTERM on to its workers, lets no
  further job start, and waits for the running ones, at most ``GRACE_S``; a second Ctrl-C, or the grace spent,
  ends it at once (:class:`SweepStopped`), as a second Ctrl-C ends a single run;
- **each worker** holds a stop signal from the moment joblib starts it (:func:`hold`, its initializer), so a
  worker between jobs is not ended by it; a job stops as a single run does (at a step boundary with a
  checkpoint, or while starting with nothing to save) and returns instead of ending the worker, and once a
  worker is stopped, the jobs handed to it do not start (:func:`stopped`).
"""

import _thread
import contextlib
import functools
import os
import signal
import threading
import warnings
from typing import Any, Iterator, Optional

import psutil

from echo_experiments.core.private_api import loky_backend
from echo_experiments.core.signals import Signals, stop_if_signalled_at_startup

# The longest the command waits for its running jobs after a stop signal: a step and a checkpoint take seconds,
# compiling (a job stopped while starting ends when compiling ends) a minute or two on a CPU.
GRACE_S = 300.0
# The start of the warning joblib gives when it replaces a worker that ended itself while jobs wait.
WORKER_REPLACED = "A worker stopped while some jobs were given to the executor"
JOBLIB_LAUNCHER = "hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher"

_worker: dict[str, Optional[int]] = {}  # this process is a worker ("signum": the stop it received, or None)


def hold() -> None:
    """joblib's initializer of each worker: a stop signal is kept (:func:`stopped`), not the end of the worker."""
    _worker["signum"] = None
    _hold_signals()


def _hold_signals() -> None:
    for s in Signals.caught():
        signal.signal(s, lambda signum, frame: job_stopped(signum))


def in_worker() -> bool:
    return "signum" in _worker


def stopped() -> Optional[int]:
    """The stop signal this worker received (None: none, or not a worker)."""
    return _worker.get("signum")


def job_stopped(signum: int) -> None:
    """This worker received ``signum``, or a job of it stopped on it: the jobs handed to it later do not start
    (the first signal names the stop)."""
    if _worker.get("signum") is None:
        _worker["signum"] = signum


@contextlib.contextmanager
def between_jobs() -> Iterator[None]:
    """Around a job in a worker: the job takes the stop signals as a single run does; after it, the worker holds
    them again."""
    try:
        yield
    finally:
        _hold_signals()


def runs_in_workers(launcher: Optional[str], n_jobs: Any) -> bool:
    """Whether a sweep's jobs run in worker processes: Hydra's joblib launcher with more than one job at a time
    (with one, joblib runs them in the command's process)."""
    from joblib import effective_n_jobs

    return launcher == JOBLIB_LAUNCHER and effective_n_jobs(-1 if n_jobs is None else int(n_jobs)) > 1


@contextlib.contextmanager
def workers_hold_signals() -> Iterator[None]:
    """joblib's pool, for the jobs Hydra's joblib launcher hands out here, starts each worker with :func:`hold`
    (the launcher asks for its backend by name, so the name is given the same backend with the initializer), and
    replaces a worker after a job without warning of a memory leak."""
    from joblib import register_parallel_backend

    register_parallel_backend("loky", functools.partial(loky_backend(), initializer=hold))
    try:
        with warnings.catch_warnings():
            # joblib replaces a worker whose memory grew by 300 MB over a job, as the language model's jobs often
            # do (JAX's and TensorFlow's caches): that costs a process start, not the leak its warning suspects.
            warnings.filterwarnings("ignore", message=WORKER_REPLACED, category=UserWarning)
            yield
    finally:
        register_parallel_backend("loky", loky_backend())


class SweepStopped(BaseException):
    """The command ended at once after a stop signal (a second Ctrl-C, or GRACE_S spent): the running jobs were
    killed. A BaseException, like KeyboardInterrupt, so that Hydra does not report it as a job's failure."""

    def __init__(self, signum: int, why: str):
        self.signum = signum
        super().__init__(f"stopped by {signal.Signals(signum).name} ({why}): the jobs still running were killed, "
                         "and resume from their last checkpoint: run the same command to finish the sweep")


class Waiting:
    """In the command, while its jobs run in workers: the first stop signal is passed on to them as SIGTERM (the
    workers of a Ctrl-C in a terminal have it already; held, a second one changes nothing) and waited out."""

    def __init__(self) -> None:
        self.received: Optional[int] = None
        self.grace_spent = False
        self.timer: Optional[threading.Timer] = None

    def __enter__(self) -> "Waiting":
        stop_if_signalled_at_startup()  # one the start-up kept until now: no job has started
        self.previous = {s: signal.signal(s, self._handle) for s in Signals.caught()}
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        if self.received is not None:
            if self.grace_spent:
                raise SweepStopped(self.received, f"its jobs did not stop within {GRACE_S:.0f} s")
            if signum == signal.SIGINT:
                raise SweepStopped(self.received, "a second Ctrl-C")
            return
        self.received = signum
        # An error the stop causes comes back to the command instead of Hydra printing it (see ended_by_error).
        os.environ["HYDRA_FULL_ERROR"] = "1"
        for child in psutil.Process().children():
            with contextlib.suppress(psutil.Error):
                child.send_signal(signal.SIGTERM)
        self.timer = threading.Timer(GRACE_S, self._grace_spent)
        self.timer.daemon = True
        self.timer.start()

    def _grace_spent(self) -> None:
        self.grace_spent = True
        _thread.interrupt_main(self.received)  # the handler, in the main thread, with a signal it takes

    def __exit__(self, *exc: Any) -> None:
        if self.timer is not None:
            self.timer.cancel()
        for s, handler in self.previous.items():
            signal.signal(s, handler)

    def ended_by_error(self) -> SweepStopped:
        """What ended the sweep when an error came after the stop: a worker that joblib had just started (it
        replaces one after each job that grew its memory) is ended by the signal before it can hold it, and joblib
        then kills the others."""
        return SweepStopped(self.received, "a worker starting when it came was ended by it, and joblib killed the rest")

    def message(self) -> str:
        return (f"stopped by {signal.Signals(self.received).name}: each running job stopped at a step boundary with "
                "its checkpoint, and no further job started; run the same command to finish the sweep")
