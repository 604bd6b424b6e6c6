"""What the loop trains on, behind one interface: the batches as they come, or with ``echo.factor=auto`` the
autopilot over them (autopilot/pilot.py, the object a user's own loop gets too).

Either way the loop asks the same things: the next batch (given the step in flight), what to do after a step,
to settle before a checkpoint, the state a checkpoint keeps, an evaluation's extra fields, the record's, and to
finish and close.
"""

import math
from pathlib import Path
from typing import Any, Callable, Optional

import jax

from echo_experiments.autopilot import decisions
from echo_experiments.autopilot.cap import cap_rule
from echo_experiments.autopilot.copies import BatchCopies, ExampleCopies
from echo_experiments.autopilot.pilot import Autopilot
from echo_experiments.core.placement import EchoSpec
from echo_experiments.core.specs import PipelineSpec
from echo_experiments.data import stream
from echo_experiments.training.waits import Batches


class Plain:
    """The batches as they come."""

    def __init__(self, batches: Batches):
        self.batches = batches

    def next(self, between: Callable[[], None] = lambda: None, running: Any = None) -> dict:
        return self.batches.next(between)

    def after_step(self, step: int, state: Any) -> None:
        """Step ``step`` is done (dispatched), leaving the train state ``state``."""

    def settle(self) -> None:
        """Nothing is read ahead between calls: the iterator is idle, ready to be saved."""

    def state(self) -> dict[str, Any]:
        return {}

    def at_evaluation(self, trained: int, fresh: int) -> dict[str, Any]:
        """The evaluation row's fields of the input, for ``trained`` examples on ``fresh`` since the last."""
        return {}

    def record(self) -> dict[str, Any]:
        return {}

    def finish(self, run_dir: Optional[Path]) -> None:
        """The run is over; ``run_dir`` is where it writes (None: another process writes it)."""

    def close(self) -> None:
        self.batches.close()


class Autopiloted(Plain):
    """The autopilot over the batches: copies in the input's gaps, its decisions recorded."""

    def __init__(self, pilot: Autopilot, echo: EchoSpec, batch_size: int, slice_loss: Callable[[Any, list], float],
                 clock: Callable[[], float]):
        self.pilot, self.echo, self.batch_size, self.slice_loss, self.clock = pilot, echo, batch_size, slice_loss, clock
        self.window_began = math.nan  # seconds of training as the moving cap's window began (none yet: nan)

    def next(self, between: Callable[[], None] = lambda: None, running: Any = None) -> dict:
        return self.pilot.next(between, running)

    def after_step(self, step: int, state: Any) -> None:
        """With a moving cap, at the end of each window the held-out slice's loss and the window's seconds of
        training (the step finished, the slice's measuring left out) move the cap (cap.py)."""
        rule = self.pilot.cap_rule
        if rule is not None and rule.due(step):
            jax.block_until_ready(state)
            ended = self.clock()
            rule.update(self.slice_loss(state, rule.slice), ended - self.window_began)
            self.window_began = self.clock()
            self.pilot.hold_to(rule.copying(), rule.SPANS)

    def settle(self) -> None:
        self.pilot.settle()

    def state(self) -> dict[str, Any]:
        return self.pilot.state()

    def at_evaluation(self, trained: int, fresh: int) -> dict[str, Any]:
        rule = self.pilot.cap_rule
        cap = {"echo_cap": rule.cap} if rule is not None else {}  # the cap it chose
        return {"delivered_per_fresh": trained / max(1, fresh), **cap}  # the factor it chose since the last one

    def record(self) -> dict[str, Any]:
        return {"echo_copied_batches": self.pilot.copies}

    def finish(self, run_dir: Optional[Path]) -> None:
        if run_dir is not None:
            decisions.write(run_dir, self.echo, self.batch_size, self.pilot.decisions)

    def close(self) -> None:
        self.pilot.close()


def copies_for(echo: EchoSpec, seed: int) -> BatchCopies | ExampleCopies:
    """What the autopilot's copies hold at ``echo``'s placement, capped at ``echo.max_factor``: whole batches after
    batching, else examples."""
    cap = echo.max_factor
    return BatchCopies(cap) if echo.placement.echoes_batches else ExampleCopies(cap, seed)


def trainer_inputs(batches: Batches, pipeline: PipelineSpec, workload: Any, saved: dict,
                   replay: Optional[decisions.Replay], slice_loss: Callable[[Any, list], float],
                   clock: Callable[[], float]) -> Plain:
    """The trainer's input: ``batches`` as they come, or with echo.factor=auto the autopilot over them, going on
    from ``saved`` (its state in a checkpoint; empty: from the start). ``slice_loss(state, batches)``: the model's
    mean loss on batches it never trains on, which a moving cap follows (echo.cap=trend or paired), with ``clock()``
    the seconds of training so far."""
    if not pipeline.echo.auto:
        return Plain(batches)
    echo = pipeline.echo
    rule = cap_rule(echo.cap, echo.max_factor, saved.get("cap_rule"))
    pilot = Autopilot(batches, copies_for(echo, pipeline.seed), saved, stream.augment_batches(workload, pipeline),
                      replay, cap_rule=rule)
    return Autopiloted(pilot, echo, pipeline.batch_size, slice_loss, clock)
