"""What the training loop carries from step to step besides the clocks and the outcome: a checkpoint saves all
three as one flat mapping, and a resumed run starts from it."""

from dataclasses import asdict, dataclass, field, fields
from typing import Any, Optional

from echo_experiments.training.clocks import ClockState
from echo_experiments.training.stops import Outcome


@dataclass
class LoopState:
    """What the loop carries from step to step besides the clocks and the outcome (all three are saved with
    every checkpoint, as one flat mapping)."""

    step: int = 0
    next_eval: int = 0  # the fresh-example count at which the next evaluation falls
    metrics: dict[str, float] = field(default_factory=dict)  # the last evaluation's
    train_loss: Optional[float] = None
    pending_losses: list[float] = field(default_factory=list)  # train losses since the last evaluation
    trained_at_eval: int = 0  # examples trained at the last evaluation (the autopilot's factor between two)
    fresh_at_eval: int = 0
    wall_at_eval: Optional[float] = None  # wall_time_s at the last evaluation (None: none yet; input_slowdown)
    autopilot: dict[str, Any] = field(default_factory=dict)  # its counts and decisions so far (autopilot.py)
    copy_worth: dict[str, Any] = field(default_factory=dict)  # the estimate's counters and steps (worth.py)
    started_on: str = ""  # the CPU model of the run's first step (machine.py): it resumes on that model only

    @staticmethod
    def save(loop: "LoopState", outcome: Outcome, clocks: ClockState) -> dict[str, Any]:
        return {**asdict(loop), **asdict(outcome), **asdict(clocks)}

    @staticmethod
    def restore(saved: dict[str, Any]) -> tuple["LoopState", Outcome, ClockState]:
        return tuple(kind(**{f.name: saved[f.name] for f in fields(kind) if f.name in saved})
                     for kind in (LoopState, Outcome, ClockState))
