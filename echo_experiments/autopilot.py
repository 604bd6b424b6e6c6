"""The echo autopilot (``echo.factor=auto``): the echo factor follows the input while training.

A fixed factor is chosen before training, for one ratio R of upstream to downstream time; R moves during a
run (shared storage, the network, other work on the host). The autopilot decides at every step instead:

- when the input has a fresh batch ready, the trainer gets it;
- when it has none and the step in flight is done (the accelerator would now wait), the trainer gets a batch
  of copies of recent fresh data, the least-copied;
- nothing trained more than ``max_factor`` times (its copies included): past that the trainer waits.

So the accelerator is idle only where the cap says so, and no copy is made that the input could have
replaced. The schedule, budget and evaluations are in fresh examples and fresh examples are counted from read
ids, so a factor that changes from step to step leaves all of them exact. The decisions follow the clock:
two runs of one config train on the same fresh examples in the same order but copy different ones, so a rerun
is not step-for-step identical (the counts of fresh batches and copies are recorded).

The decisions are made in the trainer, which sees both the input and the accelerator; what a copy holds
depends on the placement:

- after batching (E3): a whole recent batch, unshuffled, as in batch echoing (:class:`BatchCopies`);
- before batching (E2, after augmentation): examples of the recent batches, mixed across them
  (:class:`ExampleCopies`), which is what the shuffle after example echoing is for;
- before augmentation (E1): the same, from the batches as read, each batch augmented as it is delivered, a
  copy anew (the stream leaves the augmentation to the autopilot: data/stream.py).
"""

import collections
import concurrent.futures
from typing import Any, Callable, Optional

import numpy as np

from echo_experiments.data.placement import EchoSpec
from echo_experiments.waits import Batches

# The recent fresh batches a copy is drawn from: copies of one batch spread over a few steps.
RECENT = 4
Batch = dict[str, np.ndarray]


class BatchCopies:
    """Copies of whole batches (after batching): the least-copied of the recent ones, the newest among equals."""

    def __init__(self, max_factor: float, recent: int = RECENT):
        self.max_factor = max_factor
        self.recent: collections.deque[list] = collections.deque(maxlen=recent)  # [batch, copies made of it]

    def add(self, batch: Batch) -> None:
        self.recent.append([batch, 0])

    def candidate(self) -> Optional[list]:
        """The batch to copy next if one more copy keeps it within ``max_factor`` trainings; None if none does."""
        open_items = [item for item in self.recent if item[1] + 2 <= self.max_factor]
        if not open_items:
            return None
        fewest = min(copies for _, copies in open_items)
        return next(item for item in reversed(open_items) if item[1] == fewest)

    def take(self, item: list) -> Batch:
        item[1] += 1
        return dict(item[0])


class ExampleCopies:
    """Copies of examples (before batching): a batch of the least-copied examples of the recent batches, in a
    random order among equals, so an example's copies land among other batches' examples, never beside
    themselves."""

    def __init__(self, max_factor: float, seed: int, recent: int = RECENT):
        self.max_factor = max_factor
        self.batches: collections.deque[Batch] = collections.deque(maxlen=recent)
        self.counts: collections.deque[np.ndarray] = collections.deque(maxlen=recent)  # copies made of each example
        self.rng = np.random.default_rng(seed)

    def add(self, batch: Batch) -> None:
        self.batches.append(batch)
        self.counts.append(np.zeros(len(batch["read_id"]), np.int64))

    def candidate(self) -> Optional[np.ndarray]:
        """Which examples (positions among the recent batches') the next copy batch holds; None if fewer than a
        batch can take one more copy within ``max_factor`` trainings."""
        if not self.batches:
            return None
        counts = np.concatenate(self.counts)
        open_items = np.flatnonzero(counts + 2 <= self.max_factor)
        size = len(self.counts[-1])
        if len(open_items) < size:
            return None
        order = np.lexsort((self.rng.random(len(open_items)), counts[open_items]))
        return open_items[order[:size]]

    def take(self, chosen: np.ndarray) -> Batch:
        start = 0
        for counts in self.counts:
            mine = chosen[(chosen >= start) & (chosen < start + len(counts))] - start
            counts[mine] += 1
            start += len(counts)
        return {key: np.concatenate([batch[key] for batch in self.batches])[chosen] for key in self.batches[0]}


class Autopilot:
    """Batches from ``batches`` (one read always in flight), with copies from ``copies`` in the input's gaps:
    see the module. ``augment(batch, key)``, where given, augments every batch as it is delivered (a fresh one
    on the reading thread, keyed by its fresh index; a copy keyed by its copy index, negated)."""

    def __init__(self, batches: Batches, copies: BatchCopies | ExampleCopies, fresh_items: int = 0,
                 copies_made: int = 0, augment: Optional[Callable[[Batch, int], Batch]] = None):
        self.batches, self.pool, self.augment = batches, copies, augment
        self.fresh_items, self.copies = fresh_items, copies_made  # so far (a resumed run goes on from its checkpoint's)
        self._pending: Optional[concurrent.futures.Future] = None
        # Waits for the step in flight beside the read: no polling, which would take the GIL from the input.
        self._watch = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="autopilot_step")

    def next(self, between: Callable[[], None] = lambda: None, running: Any = None) -> Batch:
        """The next batch: fresh when one is ready, else a copy once ``running`` (the step in flight, a JAX
        array; None: none) is done, else the next fresh one when it comes. ``between`` as for Batches.next."""
        if self._pending is None:
            self._pending = self._read()
        candidate = None if self._pending.done() else self.pool.candidate()
        if candidate is not None and running is not None and not running.is_ready():
            # Both busy: whichever is done first decides.
            step_done = self._watch.submit(running.block_until_ready)
            concurrent.futures.wait([self._pending, step_done], timeout=self.batches.timeout_s,
                                    return_when=concurrent.futures.FIRST_COMPLETED)
            candidate = None if self._pending.done() else candidate
        if candidate is not None:
            self.copies += 1
            copy = self.pool.take(candidate)
            return self.augment(copy, -self.copies) if self.augment else copy
        read, batch = self.batches.result(self._pending, between)
        self.fresh_items += 1
        self._pending = self._read()
        self.pool.add(read)
        return dict(batch)

    def _read(self) -> concurrent.futures.Future:
        """The next fresh batch as read and as trained (augmented here where the autopilot augments, keyed by its
        index among the fresh batches: as the stream keys its chunks, so without copies the batches are the
        stream's own where a batch is one chunk)."""
        index, augment = self.fresh_items, self.augment
        return self.batches.submit_next(lambda read: (read, augment(read, index) if augment else read))

    @property
    def delivered_per_fresh(self) -> float:
        """Batches handed to the trainer per fresh batch, so far."""
        return (self.fresh_items + self.copies) / self.fresh_items if self.fresh_items else 1.0

    def settle(self) -> None:
        """Wait for the read in flight (within the timeout), so the iterator is idle and can be saved. The batch
        it read stays for the next step; after a resume from this save it is never trained (nor counted)."""
        if self._pending is not None:
            self.batches.result(self._pending)

    def close(self) -> None:
        self._watch.shutdown(wait=True)
        self.batches.close()


def copies_for(echo: EchoSpec, seed: int) -> BatchCopies | ExampleCopies:
    """What the autopilot's copies hold at ``echo``'s placement, capped at its factor (echo.max_factor): whole
    batches after batching, else examples."""
    return BatchCopies(echo.factor) if echo.placement.echoes_batches else ExampleCopies(echo.factor, seed)


def autopilot_counts(inputs: Any) -> tuple[int, int]:
    """The autopilot's fresh batches and copies so far; (0, 0) for plain batches."""
    return (inputs.fresh_items, inputs.copies) if isinstance(inputs, Autopilot) else (0, 0)
