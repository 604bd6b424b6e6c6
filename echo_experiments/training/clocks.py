"""A run's clocks in one object, and what each of the summary's times counts.

- ``elapsed_s``: everything from the loop's start (the first batch's wait included: ``startup_s``, the
  shuffle buffer filling), compilation and the timing facts before it left out;
- ``eval_time_s`` and ``checkpoint_time_s``: the time spent evaluating and checkpointing;
- ``wall_time_s``: the input pipeline and the steps, ``elapsed_s`` less evaluations and checkpoints
  (AlgoPerf's rule);
- ``seconds_to_target``: ``elapsed_s`` at the start of the evaluation that met the target, less checkpoints.
  Earlier evaluations count: they fall on the same fresh-example cadence in every condition, and leaving them
  out would credit input-bound runs with the reading tf.data goes on doing while evaluation runs.
  Checkpoints do not: they fall on a step cadence, which would charge echoing (more steps per fresh example);
- ``other_cpu_s``: CPU seconds the rest of the machine used meanwhile (timing.OtherWork).

The state is saved with every checkpoint, so a resumed run goes on counting where it stopped.
"""

import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator, Optional

from echo_experiments.training.timing import OtherWork


@dataclass
class ClockState:
    elapsed_s: float = 0.0
    eval_s: float = 0.0
    checkpoint_s: float = 0.0
    startup_s: Optional[float] = None  # seconds until the first batch
    other_cpu_s: float = 0.0


class Clocks:
    def __init__(self, state: Optional[ClockState] = None):
        self.state = state or ClockState()
        self._start = time.perf_counter() - self.state.elapsed_s
        self._other = OtherWork(self.state.other_cpu_s)
        self._last_save = time.perf_counter()

    def elapsed(self) -> float:
        return time.perf_counter() - self._start

    def first_batch(self) -> None:
        """Call at each batch: the first one ends the start-up (the shuffle buffer is full)."""
        if self.state.startup_s is None:
            self.state.startup_s = self.elapsed()

    def training(self, elapsed: Optional[float] = None) -> float:
        """``wall_time_s`` at ``elapsed`` (now by default)."""
        elapsed = self.elapsed() if elapsed is None else elapsed
        return elapsed - self.state.eval_s - self.state.checkpoint_s

    def to_target(self, elapsed: float) -> float:
        return elapsed - self.state.checkpoint_s

    @contextmanager
    def evaluating(self) -> Iterator[float]:
        """Times an evaluation; yields the elapsed seconds at its start."""
        began = time.perf_counter()
        try:
            yield began - self._start
        finally:
            self.state.eval_s += time.perf_counter() - began

    @contextmanager
    def checkpointing(self) -> Iterator[ClockState]:
        """Times a checkpoint; yields the clocks' state at its start, which the checkpoint saves."""
        self._last_save = began = time.perf_counter()
        self.state.elapsed_s, self.state.other_cpu_s = began - self._start, self._other.seconds()
        try:
            yield self.state
        finally:
            self.state.checkpoint_s += time.perf_counter() - began

    def since_save(self) -> float:
        return time.perf_counter() - self._last_save

    def checkpoint_due(self, t: Any, step: int, stopping: bool) -> bool:
        """Whether a checkpoint is due after ``step``: every trainer.checkpoint_every_steps steps, every
        trainer.checkpoint_every_seconds of training, and when a signal stops the run (``t``: the TrainerSpec)."""
        by_steps = t.checkpoint_every_steps and step % t.checkpoint_every_steps == 0
        by_time = t.checkpoint_every_seconds and self.since_save() >= t.checkpoint_every_seconds
        return bool(by_steps or by_time or stopping)

    def stop(self) -> float:
        """The elapsed seconds at the end; the other work up to now is recorded."""
        self.state.other_cpu_s = self._other.seconds()
        return self.elapsed()

    @property
    def other_cores(self) -> float:
        elapsed = self.elapsed()
        return self.state.other_cpu_s / elapsed if elapsed > 0 else 0.0
