"""Where the echo stage goes and what it does: :class:`Placement` and :class:`EchoSpec`, the one echo type.

No TensorFlow here: the command line checks placements before anything heavy loads. The transform itself
is in echo.py, and stream.py puts it at the point a placement names.
"""

import enum
import math
from dataclasses import dataclass
from typing import Any, Optional


class Placement(enum.Enum):
    """One name per echo point of the paper (data/stream.py draws the pipeline)."""

    NONE = "none"
    BEFORE_AUGMENTATION = "before_augmentation"
    AFTER_AUGMENTATION = "after_augmentation"
    BEFORE_BATCHING = "before_batching"  # the same point as after_augmentation; the name for pipelines without one
    AFTER_BATCHING = "after_batching"

    @property
    def point(self) -> Optional[str]:
        """E1 (before augmentation), E2 (after augmentation = before batching), E3 (after batching)."""
        return {"before_augmentation": "E1", "after_augmentation": "E2", "before_batching": "E2",
                "after_batching": "E3"}.get(self.value)

    @property
    def label(self) -> str:
        """Its name in a figure's legend."""
        return _NAMES[self][0]

    @property
    def short(self) -> str:
        """Its name in a table's cell, where several conditions share one."""
        return _NAMES[self][1]

    @property
    def echoes_batches(self) -> bool:
        return self is Placement.AFTER_BATCHING

    @classmethod
    def for_pipeline(cls, augments: bool) -> tuple["Placement", ...]:
        """The placements a pipeline has: without augmentation there is no before/after augmentation."""
        if augments:
            return tuple(cls)
        return (cls.NONE, cls.BEFORE_BATCHING, cls.AFTER_BATCHING)


# What a reader calls each placement: in a figure's legend, and in a table's cell.
_NAMES = {Placement.NONE: ("baseline", "baseline"),
          Placement.BEFORE_AUGMENTATION: ("example, before aug.", "before aug."),
          Placement.AFTER_AUGMENTATION: ("example, after aug.", "after aug."),
          Placement.BEFORE_BATCHING: ("example echoing", "example"),
          Placement.AFTER_BATCHING: ("batch echoing", "batch")}
PLACEMENTS = tuple(p.value for p in Placement)
# echo.factor's value for the autopilot (autopilot.py): the factor follows the input while training.
AUTO = "auto"
# How the autopilot's cap is set: the user's echo.max_factor, or moved within it by held-out progress
# (autopilot/cap.py).
CAP_RULES = ("fixed", "trend", "paired")
# The default shuffle after example echoing holds this many batches of copies (EchoSpec.shuffle_size).
ECHO_SHUFFLE_BATCHES = 10


def echo_shuffle_size(factor: float, batch_size: int) -> int:
    """The default shuffle after example echoing, in examples: ten batches of copies (EchoSpec.shuffle_size says
    why), for the tf.data stage and the Grain one alike."""
    return ECHO_SHUFFLE_BATCHES * math.ceil(factor) * int(batch_size)


@dataclass(frozen=True)
class EchoSpec:
    """An echo stage as configured: ``placement``, ``factor`` and ``shuffle_buffer`` (None: the default rule).
    With ``auto`` the autopilot echoes in the trainer instead of a stage (so ``factor`` is 1), no example trained
    more than ``max_factor`` (echo.max_factor) times."""

    placement: Placement = Placement.NONE
    factor: float = 1.0
    shuffle_buffer: Optional[int] = None
    auto: bool = False
    replay: Optional[str] = None  # with auto: a run whose decisions to make again (decisions.py)
    max_factor: Optional[float] = None  # with auto: its cap (with a moving cap, its bound); None without it
    cap: str = "fixed"  # with auto: how its cap is set, one of CAP_RULES

    @classmethod
    def from_config(cls, echo: Any) -> "EchoSpec":
        """From an ``echo`` config section (placement, factor or auto with max_factor, shuffle_buffer)."""
        buffer = None if echo.shuffle_buffer is None else int(echo.shuffle_buffer)
        if echo.factor == AUTO:
            return cls(Placement(echo.placement), 1.0, buffer, True, echo.get("replay"),
                       float(echo.get("max_factor", 1.0)), echo.get("cap", "fixed"))
        return cls(Placement(echo.placement), float(echo.factor), buffer)

    @property
    def stage(self) -> Placement:
        """The echo stage the pipeline gets: none at factor 1, whatever the placement (so no echo shuffle), and
        none with the autopilot, which echoes in the trainer."""
        return self.placement if self.factor != 1 and not self.auto else Placement.NONE

    @property
    def augments_in_trainer(self) -> bool:
        """The autopilot before augmentation: the stream hands on batches as read, and the autopilot augments
        each batch as it delivers it, a copy anew (autopilot.py)."""
        return self.auto and self.placement is Placement.BEFORE_AUGMENTATION

    @property
    def label(self) -> Any:
        """The factor as a run records it: the number, or ``auto``."""
        return AUTO if self.auto else self.factor

    def shuffle_size(self, batch_size: int) -> int:
        """The size of the shuffle right after the echo stage: as configured, else the default rule.

        After example echoing the e copies of an example leave the echo stage one after another; unshuffled
        they land in one batch, and with a mean loss and batch statistics that copies do not change, that
        step is the baseline's step at batch B/e, not echoing. A uniform shuffle buffer of S elements sends
        two copies into the same batch with probability about B/S, so the default S = 10 x ceil(e) x B (ten
        batches of copies) leaves an example about (e-1)/(10e) < 10% chance of meeting a copy of itself in
        its batch. Batch echoing repeats whole batches, as in the paper, unshuffled by default."""
        stage = self.stage
        if stage is Placement.NONE:
            return 0
        if self.shuffle_buffer is not None:
            return self.shuffle_buffer
        if stage.echoes_batches:
            return 0
        return echo_shuffle_size(self.factor, batch_size)


NO_ECHO = EchoSpec()
