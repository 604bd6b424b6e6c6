"""What ends a run, as one list the training loop asks (trainer.py): the budget after every step, then after
every evaluation divergence, the target and pruning, in that order; signals at every step boundary.

- **budget**: ``trainer.max_fresh_examples`` (or a ``trainer.max_steps`` cap) spent: one last evaluation, then
  stop; the status stays what the evaluations made it (``not_reached`` unless the target was met).
- **divergence**: a non-finite training loss or metric: ``diverged``, stop.
- **target**: the workload's target met for the first time: ``reached_target``, with the fresh examples, steps
  and seconds to it; stop unless ``trainer.stop_at_target=false``.
- **pruning** (a trial of a study): its fresh examples reached its study's best (times ``tuning.prune_margin``)
  without the target: it can no longer be the study's best, so ``pruned``, stop (never counted as reached).
- **signals**: a stop signal received by :class:`~echo_experiments.core.signals.Signals` stops the loop at the
  next step boundary, where it can checkpoint (core/signals.py says which signals, and what they do before the
  loop).
"""

import logging
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from echo_experiments.core.record import Target
from echo_experiments.core.signals import Signals

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
        bad = [k for k, v in ev.metrics.items() if not math.isfinite(v)]
        if math.isfinite(ev.train_loss):  # the training did not blow up: say where the non-finite value came from
            log.warning("diverged at step %d: the evaluation's %s %s not finite while the train loss is %.4g (an "
                        "evaluation label beyond the model's classes, or a metric divided by zero, gives this)",
                        ev.step, ", ".join(bad), "is" if len(bad) == 1 else "are", ev.train_loss)
        else:
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
        log.info("reached %s at step %d with %d fresh examples", self.target.described(), ev.step, ev.fresh)
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
