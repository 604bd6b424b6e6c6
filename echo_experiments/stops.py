"""What ends a run, as one list the training loop asks (train.py): the budget after every step, then after
every evaluation divergence, the target and pruning, in that order; signals at every step boundary.

- **budget**: ``trainer.max_fresh_examples`` (or a ``trainer.max_steps`` cap) spent: one last evaluation, then
  stop; the status stays what the evaluations made it (``not_reached`` unless the target was met).
- **divergence**: a non-finite training loss or metric: ``diverged``, stop.
- **target**: the workload's target met for the first time: ``reached_target``, with the fresh examples, steps
  and seconds to it; stop unless ``trainer.stop_at_target=false``.
- **pruning** (a trial of a study): its fresh examples reached its study's best (times ``tuning.prune_margin``)
  without the target: it can no longer be the study's best, so ``pruned``, stop (never counted as reached).
- **signals**: SIGINT (Ctrl-C), SIGTERM (what SLURM sends before a time limit) and SIGHUP (a closed terminal or
  SSH connection) stop the loop at the next step boundary, where it can checkpoint; a second Ctrl-C interrupts
  at once. Before the loop (composing, loading, compiling, the timing facts) they end the process with one line
  (:class:`StartupInterrupted`): there is nothing yet to save. A signal the parent ignores stays ignored.
"""

import logging
import math
import signal
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from echo_experiments.record import Target

log = logging.getLogger(__name__)


@dataclass
class Outcome:
    """Where the run stands; saved with every checkpoint, so a resumed run keeps its target bookkeeping."""

    status: str = "not_reached"
    to_target: Optional[dict[str, Any]] = None  # fresh examples, steps, examples trained and seconds to target
    stop: bool = False


@dataclass(frozen=True)
class Evaluation:
    """One evaluation, as the rules see it."""

    step: int
    fresh: int
    examples_trained: int
    seconds_to_target: float  # the run's seconds up to this evaluation, checkpoints left out
    train_loss: float
    metrics: dict[str, float] = field(default_factory=dict)


class Budget:
    def __init__(self, max_fresh_examples: Optional[int], max_steps: Optional[int]):
        self.max_fresh_examples, self.max_steps = max_fresh_examples, max_steps

    def spent(self, step: int, fresh: int) -> bool:
        return ((self.max_fresh_examples is not None and fresh >= self.max_fresh_examples)
                or (self.max_steps is not None and step >= self.max_steps))


class Divergence:
    def decide(self, ev: Evaluation, outcome: Outcome) -> Optional[bool]:
        if all(math.isfinite(v) for v in (ev.train_loss, *ev.metrics.values())):
            return None
        outcome.status = "diverged"
        log.warning("diverged at step %d (train loss %s)", ev.step, ev.train_loss)
        return True


class TargetReached:
    def __init__(self, target: Target, stop_at_target: bool):
        self.target, self.stop_at_target = target, stop_at_target

    def decide(self, ev: Evaluation, outcome: Outcome) -> Optional[bool]:
        if outcome.to_target is not None or not self.target.reached(ev.metrics):
            return None
        outcome.status = "reached_target"
        outcome.to_target = {"fresh_examples_to_target": ev.fresh, "steps_to_target": ev.step,
                             "examples_trained_to_target": ev.examples_trained,
                             "seconds_to_target": ev.seconds_to_target}
        log.info("reached %s %s %s at step %d with %d fresh examples", self.target.metric,
                 ">=" if self.target.mode == "max" else "<=", self.target.value, ev.step, ev.fresh)
        return self.stop_at_target


class Pruning:
    """``study_best``: the fewest fresh examples to target among the study's finished trials so far (None: none)."""

    def __init__(self, study_best: Callable[[], Optional[int]], margin: float = 1.0):
        self.study_best, self.margin = study_best, margin

    def decide(self, ev: Evaluation, outcome: Outcome) -> Optional[bool]:
        if outcome.to_target is not None:
            return None
        best = self.study_best()
        # It could reach the target only past the study's best (times the margin, which keeps more draws
        # informative for the paired comparison at the price of the fresh examples trained past the best).
        if best is None or ev.fresh < best * self.margin:
            return None
        outcome.status = "pruned"
        log.info("pruned at %d fresh examples: this study's best trial reached the target with %d", ev.fresh, best)
        return True


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


class Stops:
    """The list the loop asks: ``budget`` after each step, ``rules`` (in order) after each evaluation, the first
    rule that decides ends the asking; ``signals`` at each step boundary."""

    def __init__(self, budget: Budget, rules: list[Any], signals: Signals):
        self.budget, self.rules, self.signals = budget, rules, signals

    def budget_spent(self, step: int, fresh: int) -> bool:
        return self.budget.spent(step, fresh)

    def after_evaluation(self, ev: Evaluation, outcome: Outcome) -> None:
        for rule in self.rules:
            decided = rule.decide(ev, outcome)
            if decided is not None:
                outcome.stop = outcome.stop or decided
                return

    @property
    def signalled(self) -> Optional[int]:
        return self.signals.received
