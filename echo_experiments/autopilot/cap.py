"""A cap the autopilot chooses for itself (``echo.cap=trend`` or ``paired``): the two designs of docs/protocol.md
("A cap the autopilot chooses: the pilot"), each moving the cap by held-out progress measured over windows of steps.

The fixed cap (``echo.cap=fixed``) is a factor chosen by hand: where copies are worth little a high one costs
time, where they pay a low one leaves time unsaved. Here the cap follows held-out progress instead. One in
HOLD_OUT_EVERY fresh batches is withheld, never trained on, until SLICE_BATCHES of them make the slice; from then,
every WINDOW_STEPS steps the loop measures the model's mean loss on the slice and hands it, with the window's
seconds of training, to the rule's ``update``. The safety bound is ``echo.max_factor``. A single step's estimate
failed its pilot because momentum spreads a copy's effect over many steps (docs/your-model.md): a window of steps
is the lesson. The stall gate is unchanged: a copy is still made only while no fresh batch is ready and the step in
flight is done.

- :class:`TrendCap`, after DUTD (Dorka et al., ICLR 2023): the slice's loss window over window; lower by more than
  RAISE, the cap is multiplied by STEP; higher by more than LOWER, divided by STEP. It failed its pilot: the loss
  falls while fresh data arrives, whatever the copies are worth (results/run-cap_pilot).
- :class:`PairedCap`: windows copy at the cap and at half of it, A B B A, and the cap moves toward the side whose
  slice loss fell more per second, so that the fresh data's progress is on both sides of the comparison.
"""

import math
from typing import Any, Optional

HOLD_OUT_EVERY = 50
SLICE_BATCHES = 4
WINDOW_STEPS = 40
RAISE, LOWER, STEP = 0.03, 0.07, 1.3
START = 2.0  # the cap before any window has been measured
BLOCK = (True, False, False, True)  # Paired spans: each window of a block at the cap (True) or at half of it


class CapRule:
    """The cap, between 1 and ``bound``, and the held-out slice it is moved by. ``saved``: its :meth:`state` from a
    checkpoint (the slice, a few batches of arrays, is not kept: it is taken anew, and the first window after a
    resume only measures). ``SPANS``: whether copies are also held to :meth:`copying` over each window (examples
    trained per fresh one since it began), as well as per batch or example."""

    SPANS = False

    def __init__(self, bound: float, saved: Optional[dict[str, Any]] = None):
        if not bound >= 1:
            raise ValueError(f"the cap's bound is {bound!r}: a number >= 1 (echo.max_factor)")
        saved = saved or {}
        self.bound = float(bound)
        self.cap = min(float(saved.get("cap", START)), self.bound)
        self.windows = int(saved.get("windows", 0))  # windows measured
        self.previous: Optional[float] = None  # the slice's loss at the last window
        self.slice: list[Any] = []

    def holds_out(self, fresh_index: int) -> bool:
        """Whether fresh batch ``fresh_index`` (0, 1, ...) goes to the slice instead of the loop."""
        return len(self.slice) < SLICE_BATCHES and fresh_index % HOLD_OUT_EVERY == HOLD_OUT_EVERY - 1

    def hold(self, batch: Any) -> None:
        self.slice.append(batch)

    def due(self, step: int) -> bool:
        """Whether the slice's loss is to be measured after ``step`` steps: every WINDOW_STEPS once it is full."""
        return len(self.slice) == SLICE_BATCHES and step > 0 and step % WINDOW_STEPS == 0

    def copying(self) -> float:
        """The factor copies are held to in the window now beginning."""
        return self.cap

    def lower(self) -> None:
        self.cap = max(1.0, self.cap / STEP)

    def raise_(self) -> None:
        self.cap = min(self.bound, self.cap * STEP)

    def update(self, loss: float, seconds: float) -> float:
        """The cap after a window whose slice loss at its end is ``loss``, its seconds of training ``seconds``."""
        raise NotImplementedError

    def state(self) -> dict[str, Any]:
        return {"cap": self.cap, "windows": self.windows}


class TrendCap(CapRule):
    """Trend: the slice's loss against the window before's (``seconds`` unused)."""

    def update(self, loss: float, seconds: float = math.nan) -> float:
        previous, self.previous = self.previous, loss
        self.windows += 1
        if not math.isfinite(loss):
            self.lower()
        elif previous is not None and math.isfinite(previous) and previous > 0:
            change = (loss - previous) / previous
            if change < -RAISE:
                self.raise_()
            elif change > LOWER:
                self.lower()
        return self.cap


class PairedCap(CapRule):
    """Paired spans: blocks of windows at the cap and at half of it (BLOCK); after each block the cap is
    multiplied by STEP if the windows at the cap lowered the slice's loss faster per second of training than those
    at half, else divided by it."""

    SPANS = True

    def __init__(self, bound: float, saved: Optional[dict[str, Any]] = None):
        super().__init__(bound, saved)
        self._start_block(None)

    def copying(self) -> float:
        at_cap = self.position is None or BLOCK[self.position]
        return self.cap if at_cap else max(1.0, self.cap / 2)

    def update(self, loss: float, seconds: float) -> float:
        previous, self.previous = self.previous, loss
        self.windows += 1
        if not math.isfinite(loss):
            self.lower()
            self._start_block(None)
        elif self.position is None:  # the loss the block starts from (at the start, after a resume or a non-finite one)
            self._start_block(0)
        else:
            fallen = self.progress[BLOCK[self.position]]
            fallen[0] += previous - loss
            fallen[1] += seconds
            if self.position + 1 < len(BLOCK):
                self.position += 1
            else:
                if self._rate(True) > self._rate(False):
                    self.raise_()
                else:
                    self.lower()
                self._start_block(0)
        return self.cap

    def _rate(self, at_cap: bool) -> float:
        """The slice's loss fallen per second of training in the block's windows on one side."""
        fallen, seconds = self.progress[at_cap]
        return fallen / seconds if seconds > 0 else -math.inf

    def _start_block(self, position: Optional[int]) -> None:
        self.position = position  # the window of the block now running; None: measuring the loss it starts from
        self.progress = {True: [0.0, 0.0], False: [0.0, 0.0]}  # per side: [loss fallen, seconds]


RULES = {"trend": TrendCap, "paired": PairedCap}


def cap_rule(name: str, bound: float, saved: Optional[dict[str, Any]] = None) -> Optional[CapRule]:
    """The rule ``echo.cap`` names (None: ``fixed``, the cap is the bound)."""
    return RULES[name](bound, saved) if name in RULES else None
