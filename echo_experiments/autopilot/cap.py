"""A cap the autopilot chooses for itself (``echo.cap=trend``): the Trend design of docs/protocol.md ("A cap the
autopilot chooses: the pilot"), after DUTD (Dorka et al., ICLR 2023), which moves reinforcement learning's
updates per datum by held-out loss measured window over window.

The fixed cap (``echo.cap=fixed``) is a factor chosen by hand: where copies are worth little a high one costs
time, where they pay a low one leaves time unsaved. Here the cap follows held-out progress instead. One in
HOLD_OUT_EVERY fresh batches is withheld, never trained on, until SLICE_BATCHES of them make the slice; from then,
every WINDOW_STEPS steps the loop measures the model's mean loss on the slice and hands it to :meth:`TrendCap.update`:
lower than the window before's by more than RAISE, the cap is multiplied by STEP (the copies are not holding
progress back); higher by more than LOWER, divided by STEP (at least 1); between, kept. The safety bound is
``echo.max_factor``. A single step's estimate failed its pilot because momentum spreads a copy's effect over many
steps (docs/your-model.md); a window of steps is the lesson. The stall gate is unchanged: a copy is still made
only while no fresh batch is ready and the step in flight is done.
"""

from typing import Any, Optional

import numpy as np

HOLD_OUT_EVERY = 50
SLICE_BATCHES = 4
WINDOW_STEPS = 40
RAISE, LOWER, STEP = 0.03, 0.07, 1.3
START = 2.0  # the cap before any window has been measured


class TrendCap:
    """The cap, between 1 and ``bound``, moved window by window by the held-out slice's loss. ``saved``: its
    :meth:`state` from a checkpoint (the slice, a few batches of arrays, is not kept: it is taken anew, and the
    first window after a resume only measures)."""

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

    def update(self, loss: float) -> float:
        """The cap after a window whose slice loss is ``loss`` (a loss that is not finite lowers it)."""
        previous, self.previous = self.previous, loss
        self.windows += 1
        if not np.isfinite(loss):
            self.cap = max(1.0, self.cap / STEP)
        elif previous is not None and np.isfinite(previous) and previous > 0:
            change = (loss - previous) / previous
            if change < -RAISE:
                self.cap = min(self.bound, self.cap * STEP)
            elif change > LOWER:
                self.cap = max(1.0, self.cap / STEP)
        return self.cap

    def state(self) -> dict[str, Any]:
        return {"cap": self.cap, "windows": self.windows}
