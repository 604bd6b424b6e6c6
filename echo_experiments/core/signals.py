"""Stop signals, from the process's first instant to its end: what a run does with SIGINT (Ctrl-C), SIGTERM (what
SLURM sends before a time limit) and SIGHUP (a closed terminal or SSH connection).

- **while starting** (importing, composing, loading, compiling, the timing facts): the first signal is kept
  (:func:`stop_at_startup`), and the start-up ends with one line (:class:`StartupInterrupted`) at its next safe
  point (:func:`stop_if_signalled_at_startup`): there is nothing yet to save. A start-up that reaches no safe point
  within STARTUP_DEADLINE_S (stuck composing a config, importing a module that blocks, compiling for minutes) ends
  there with the same line. It is never raised where it lands:
  raised inside the import of an extension module (JAX's, under TensorFlow's) it crashed the process, inside
  Hydra's composing it left OmegaConf half-updated, inside TensorFlow's C++ callbacks it came back as another
  error. A second signal ends the process at once, with the same line.
- **while training**: :class:`Signals` receives them, and the loop stops at the next step boundary, where it can
  checkpoint (:class:`Interrupted`); a second Ctrl-C interrupts at once.
- a signal the parent ignores stays ignored.

No TensorFlow or JAX here: the command takes the signals over before it imports them (``__main__``). A sweep's
worker processes hold them between jobs (cli/worker_stops.py).
"""

import os
import signal
import threading
from pathlib import Path
from typing import Any, Optional

from echo_experiments.core.rundir import CHECKPOINTS

# The signal the start-up handler received, until Signals takes it over; "trained" once the loop gave them back.
_at_startup: dict[str, int] = {}
# How long a kept start-up signal waits for a safe point before it ends the process where it is (os._exit: nothing
# is raised into the code it stops, and a start-up has nothing to save yet).
STARTUP_DEADLINE_S = 10.0
_deadline: dict[str, threading.Timer] = {}


def _cancel_deadline() -> None:
    """The kept signal has reached a safe point, or the loop took it over: no deadline now."""
    timer = _deadline.pop("timer", None)
    if timer is not None:
        timer.cancel()


class Signals:
    """While the loop runs, SIGINT and SIGTERM are received here instead of ending the process."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    @classmethod
    def caught(cls) -> list[int]:
        """The stop signals this process takes: one its parent set to be ignored stays ignored (``nohup``
        ignores SIGHUP so that a run outlives its terminal)."""
        return [s for s in cls.SIGNALS if signal.getsignal(s) is not signal.SIG_IGN]

    def __enter__(self) -> "Signals":
        self.received: Optional[int] = _at_startup.pop("signum", None)  # one kept while starting
        _cancel_deadline()
        self.previous = {}
        if threading.current_thread() is threading.main_thread():  # Python allows handlers only there
            self.previous = {s: signal.signal(s, self._handle) for s in self.caught()}
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        if self.received is not None and signum == signal.SIGINT:  # a second Ctrl-C: at once, where it lands
            # Raised, it would land anywhere (a lock of Orbax's save threads) and print their tracebacks as the
            # interpreter shuts down; what the run keeps is already on disk (a checkpoint is complete or ignored).
            os.write(2, b"error: stopped at once by a second SIGINT: the run directory keeps its metrics and its last "
                        b"complete checkpoint; run the same command to resume\n")
            os._exit(128 + signum)
        self.received = self.received or signum  # the first names the stop (a sweep's SIGTERM may follow a Ctrl-C)

    def __exit__(self, *exc: Any) -> None:
        for s, handler in self.previous.items():
            signal.signal(s, handler)
        _at_startup["trained"] = 1  # a signal from here on comes as the run ends, not while it starts


class Interrupted(Exception):
    """The run stopped on a signal at a step boundary; str() is the one line shown to the user."""

    def __init__(self, signum: int, step: int, fresh: int, run_path: Path, saved: bool):
        self.signum = signum
        where = (f"its checkpoint is in {run_path / CHECKPOINTS}: run the same command to resume" if saved else
                 "no checkpoint was written (trainer.checkpoint_every_seconds and _steps are 0): a rerun starts over")
        super().__init__(f"stopped by {signal.Signals(signum).name} at step {step} ({fresh} fresh examples); {where}")


class StartupInterrupted(BaseException):
    """A signal before training began (a BaseException, like KeyboardInterrupt: no handler of failures may
    record it as the run's failure); str() is the one line shown to the user."""

    def __init__(self, signum: int):
        self.signum = signum
        name = signal.Signals(signum).name
        super().__init__(
            f"stopped by {name} as the run ended, after its training loop: its record and metrics are written; the "
            "same command reports it" if _at_startup.get("trained") else
            f"stopped by {name} while starting, before this attempt trained: the run directory keeps what it had; "
            "run the same command to go on")


def stop_if_signalled_at_startup() -> None:
    """A safe point of the start-up: raise the start-up stop if a stop signal came (until the loop's Signals takes
    it over). Also asked of an error before it is taken for a failure: the signal is what ended the start-up."""
    if (signum := _at_startup.get("signum")) is not None:
        _cancel_deadline()
        raise StartupInterrupted(signum) from None


def _end_now(signum: int) -> None:
    """A second stop signal while starting: the one line, then the process ends where it is (no exception is
    raised into whatever code it interrupted, no finalizer runs)."""
    os.write(2, f"error: {StartupInterrupted(signum)}\n".encode())
    os._exit(128 + signum)


def stop_at_startup() -> None:
    """From here until the training loop takes them over, a first stop signal is kept and ends the start-up at its
    next safe point, with one line (StartupInterrupted) instead of a traceback (SIGINT) or a silent exit (SIGTERM,
    SIGHUP); a second one ends the process at once."""
    _at_startup.pop("trained", None)  # a new start (a sweep's worker runs one job after another)
    if threading.current_thread() is not threading.main_thread():
        return

    def handle(signum: int, frame: Any) -> None:
        if "signum" in _at_startup:
            _end_now(signum)
        _at_startup["signum"] = signum
        timer = threading.Timer(STARTUP_DEADLINE_S, _end_now, args=(signum,))
        timer.daemon = True
        _deadline["timer"] = timer
        timer.start()

    for s in Signals.caught():
        signal.signal(s, handle)
