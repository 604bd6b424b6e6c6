"""Stop signals, from the process's first instant to its end: what a run does with SIGINT (Ctrl-C), SIGTERM (what
SLURM sends before a time limit) and SIGHUP (a closed terminal or SSH connection).

- **while starting** (composing, loading, compiling, the timing facts): the process ends with one line
  (:class:`StartupInterrupted`, :func:`stop_at_startup`); there is nothing yet to save. While Hydra composes, a
  first signal is held and raised once it is done (:func:`hold_startup_signals`).
- **while training**: :class:`Signals` receives them, and the loop stops at the next step boundary, where it can
  checkpoint (:class:`Interrupted`); a second Ctrl-C interrupts at once.
- a signal the parent ignores stays ignored.

No TensorFlow or JAX here: the command takes the signals over before it imports them (``__main__``). A sweep's
worker processes hold them between jobs (cli/worker_stops.py).
"""

import signal
import sys
import threading
from pathlib import Path
from typing import Any, Optional

_at_startup: dict[str, int] = {}  # the signal the start-up handler received, until Signals takes it over
_held: dict[str, int] = {}  # set while a first start-up signal is kept rather than raised


class Signals:
    """While the loop runs, SIGINT and SIGTERM are received here instead of ending the process."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    @classmethod
    def caught(cls) -> list[int]:
        """The stop signals this process takes: one its parent set to be ignored stays ignored (``nohup``
        ignores SIGHUP so that a run outlives its terminal)."""
        return [s for s in cls.SIGNALS if signal.getsignal(s) is not signal.SIG_IGN]

    def __enter__(self) -> "Signals":
        self.received: Optional[int] = _at_startup.pop("signum", None)  # a start-up raise that was dropped
        self.previous = {}
        if threading.current_thread() is threading.main_thread():  # Python allows handlers only there
            self.previous = {s: signal.signal(s, self._handle) for s in self.caught()}
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        if self.received is not None and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.received = self.received or signum  # the first names the stop (a sweep's SIGTERM may follow a Ctrl-C)

    def __exit__(self, *exc: Any) -> None:
        for s, handler in self.previous.items():
            signal.signal(s, handler)


class Interrupted(Exception):
    """The run stopped on a signal at a step boundary; str() is the one line shown to the user."""

    def __init__(self, signum: int, step: int, fresh: int, run_path: Path, saved: bool):
        self.signum = signum
        where = (f"its checkpoint is in {run_path / 'checkpoints'}: run the same command to resume" if saved else
                 "no checkpoint was written (trainer.checkpoint_every_seconds and _steps are 0): a rerun starts over")
        super().__init__(f"stopped by {signal.Signals(signum).name} at step {step} ({fresh} fresh examples); {where}")


class StartupInterrupted(BaseException):
    """A signal before training began (a BaseException, like KeyboardInterrupt: no handler of failures may
    record it as the run's failure); str() is the one line shown to the user."""

    def __init__(self, signum: int):
        self.signum = signum
        super().__init__(f"stopped by {signal.Signals(signum).name} while starting, before this attempt trained: "
                         "the run directory keeps what it had; run the same command to go on")


def hold_startup_signals() -> None:
    """Until :func:`release_startup_signals`, a first stop signal is kept, not raised: raised while Hydra
    composes a config, it leaves OmegaConf half-updated, and the error OmegaConf raises then is printed by Hydra
    as a traceback. Composing and making the run's folder take a moment, and a second signal ends it at once."""
    _held["on"] = 1


def release_startup_signals() -> None:
    """End :func:`hold_startup_signals`, raising the start-up stop if a signal came while it held (nothing where
    none held: a sweep's later jobs, a worker's jobs)."""
    if _held.pop("on", None):
        stop_if_signalled_at_startup()


def stop_if_signalled_at_startup() -> None:
    """Raise the start-up stop if a stop signal came while starting (until the loop's Signals takes it over). A
    library that the start-up handler's exception crosses may turn it into an error of its own (TensorFlow,
    tracing a dataset function, raises a ValueError of its iterators; OmegaConf, interrupted while Hydra composes,
    an AttributeError that Hydra prints and exits 1 on), so an error is asked this before it is taken for a
    failure: the signal is what ended the start-up."""
    if (signum := _at_startup.get("signum")) is not None:
        raise StartupInterrupted(signum) from None


def _caused_by_start_up_stop(error: Optional[BaseException]) -> bool:
    """Whether ``error`` is the start-up handler's exception or one it caused: raised where C code called back
    into Python (TensorFlow's nest, flattening in an iterator's __del__), it comes back as a SystemError whose
    cause is the StartupInterrupted."""
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, StartupInterrupted):
            return True
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return False


def stop_at_startup() -> None:
    """From here until the training loop takes them over, a stop signal ends the process at once with one
    line (StartupInterrupted) instead of a traceback (SIGINT) or a silent exit (SIGTERM, SIGHUP)."""
    if threading.current_thread() is not threading.main_thread():
        return

    def handle(signum: int, frame: Any) -> None:
        # Python runs a handler between any two bytecodes, inside a garbage-collection callback or a __del__
        # too, where what it raises is dropped; kept here, the signal still ends the start-up at the trainer's
        # next start-up check, once Signals has taken it over.
        held = _held.get("on") and "signum" not in _at_startup  # a second signal ends it at once
        _at_startup["signum"] = signum
        if not held:
            raise StartupInterrupted(signum)

    shown = sys.unraisablehook

    def quiet(unraisable: Any) -> None:  # a dropped StartupInterrupted is kept, not an error to print
        if not _caused_by_start_up_stop(unraisable.exc_value):
            shown(unraisable)

    quiet.keeps_start_up_stop = True
    if not getattr(shown, "keeps_start_up_stop", False):  # set once, though a sweep's worker starts many jobs
        sys.unraisablehook = quiet
    for s in Signals.caught():
        signal.signal(s, handle)
