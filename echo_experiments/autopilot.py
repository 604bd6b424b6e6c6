"""The echo autopilot (``echo.factor=auto``): the echo factor follows the input while training.

A fixed factor is chosen before training, for one ratio R of upstream to downstream time; R moves during a
run (shared storage, the network, other work on the host). The autopilot decides at every step instead:

- when the input has a fresh item ready, the trainer gets it;
- when it has none and the step in flight is done (the accelerator would now wait), the trainer gets a copy
  of a recent fresh item, the one copied least;
- no item trained more than ``max_factor`` times (its copies included): past that the trainer waits.

So the accelerator is idle only where the cap says so, and no copy is made that the input could have
replaced. The schedule, budget and evaluations are in fresh examples and fresh examples are counted from read
ids, so a factor that changes from step to step leaves all of them exact. The decisions follow the clock:
two runs of one config train on the same fresh examples in the same order but copy different ones, so a rerun
is not step-for-step identical (the counts of fresh items and copies are recorded).

Here the item is a batch: the autopilot sits after batching (E3), where the trainer sees both the input and
the accelerator. Copies are whole batches, unshuffled, as in batch echoing.
"""

import collections
import concurrent.futures
from typing import Any, Callable, Optional

import numpy as np

from echo_experiments.waits import Batches

# The recent fresh items a copy is drawn from: copies of one batch spread over a few steps.
RECENT = 4


class Autopilot:
    """Batches from ``batches`` (one read always in flight), with copies in the input's gaps: see the module."""

    def __init__(self, batches: Batches, max_factor: float, fresh_items: int = 0, copies: int = 0,
                 recent: int = RECENT):
        self.batches, self.max_factor = batches, max_factor
        self.recent: collections.deque[list] = collections.deque(maxlen=recent)  # [batch, copies made of it]
        self.fresh_items, self.copies = fresh_items, copies  # so far (a resumed run goes on from its checkpoint's)
        self._pending: Optional[concurrent.futures.Future] = None
        # Waits for the step in flight beside the read: no polling, which would take the GIL from the input.
        self._watch = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="autopilot_step")

    def next(self, between: Callable[[], None] = lambda: None, running: Any = None) -> dict[str, np.ndarray]:
        """The next batch: fresh when one is ready, else a copy once ``running`` (the step in flight, a JAX
        array; None: none) is done, else the next fresh one when it comes. ``between`` as for Batches.next."""
        if self._pending is None:
            self._pending = self.batches.submit_next()
        candidate = None if self._pending.done() else self._copyable()
        if candidate is not None and running is not None and not running.is_ready():
            # Both busy: whichever is done first decides.
            step_done = self._watch.submit(running.block_until_ready)
            concurrent.futures.wait([self._pending, step_done], timeout=self.batches.timeout_s,
                                    return_when=concurrent.futures.FIRST_COMPLETED)
            candidate = None if self._pending.done() else candidate
        if candidate is not None:
            candidate[1] += 1
            self.copies += 1
            return dict(candidate[0])
        batch = self.batches.result(self._pending, between)
        self._pending = self.batches.submit_next()
        self.recent.append([batch, 0])
        self.fresh_items += 1
        return dict(batch)

    def _copyable(self) -> Optional[list]:
        """The recent item copied least (the newest of those) that one more copy keeps within ``max_factor``
        trainings; None if there is none."""
        open_items = [item for item in self.recent if item[1] + 2 <= self.max_factor]
        if not open_items:
            return None
        fewest = min(copies for _, copies in open_items)
        return next(item for item in reversed(open_items) if item[1] == fewest)

    @property
    def delivered_per_fresh(self) -> float:
        """Items handed to the trainer per fresh item, so far."""
        return (self.fresh_items + self.copies) / self.fresh_items if self.fresh_items else 1.0

    def settle(self) -> None:
        """Wait for the read in flight (within the timeout), so the iterator is idle and can be saved. The batch
        it read stays for the next step; after a resume from this save it is never trained (nor counted)."""
        if self._pending is not None:
            self.batches.result(self._pending)

    def close(self) -> None:
        self._watch.shutdown(wait=True)
        self.batches.close()


def autopilot_counts(inputs: Any) -> tuple[int, int]:
    """The autopilot's fresh batches and copies so far; (0, 0) for plain batches."""
    return (inputs.fresh_items, inputs.copies) if isinstance(inputs, Autopilot) else (0, 0)
