"""What the autopilot's copies hold: whole batches after batching, examples drawn from a pool before it.

A batch here is a dict of arrays whose first axis is the batch (the trainer's batches, and a user's after the
loop's wrapper has flattened them); a whole-batch copy hands on the batch as it was read, whatever it holds.
"""

import collections
import math
from typing import Any, Optional

import numpy as np

from echo_experiments.core.placement import echo_shuffle_size

# The recent fresh batches a whole-batch copy is drawn from (after batching, where a fixed factor repeats a batch
# back to back): copies of one batch spread over a few steps.
RECENT = 4
# The example copies' pool keeps at most this many times its depth of copies, the oldest examples' leaving first.
POOL_BOUND = 2
Batch = dict[Any, np.ndarray]


def batch_size(batch: Batch) -> int:
    """The examples in a batch: its first array's length."""
    return len(next(iter(batch.values())))


class BatchCopies:
    """Copies of whole batches (after batching): the least-copied of the recent ones, the newest among equals."""

    def __init__(self, max_factor: float, recent: int = RECENT):
        self.max_factor = max_factor
        self.recent: collections.deque[list] = collections.deque(maxlen=recent)  # [batch, copies made of it]

    def add(self, batch: Any) -> None:
        self.recent.append([batch, 0])

    def candidate(self) -> Optional[list]:
        """The batch to copy next if one more copy keeps it within ``max_factor`` trainings; None if none does."""
        open_items = [item for item in self.recent if item[1] + 2 <= self.max_factor]
        if not open_items:
            return None
        fewest = min(copies for _, copies in open_items)
        return next(item for item in reversed(open_items) if item[1] == fewest)

    def take(self, item: list, index: int) -> Any:
        """The copy: a dict of its own where the batch is one (the loop may pop from what it is given)."""
        item[1] += 1
        return dict(item[0]) if isinstance(item[0], dict) else item[0]

    def clear(self) -> None:
        self.recent.clear()


class ExampleCopies:
    """Copies of examples (before batching), drawn as an echo shuffle draws a fixed factor's: each fresh example
    brings floor(max_factor) - 1 copies into a pool, and a copy batch is as many distinct examples drawn at
    random, each in proportion to its copies still in the pool, once the pool holds ``depth`` copies (None: as
    many as a fixed factor's echo shuffle at the cap holds examples, placement.echo_shuffle_size). An example's
    copies so land at random among later steps and other batches' examples, never beside themselves. Taken at
    once instead (the least-copied of the newest batches), a copy at the input's pace is the newest batch again,
    and worth what a batch echo's is (docs/protocol.md, A6). The pool keeps at most POOL_BOUND x depth copies, the
    oldest examples' leaving first: copies that a fast enough input made unneeded."""

    def __init__(self, max_factor: float, seed: int, depth: Optional[int] = None):
        self.max_factor, self.seed, self._depth = max_factor, seed, depth
        self.batches: collections.deque[Batch] = collections.deque()
        self.left: collections.deque[np.ndarray] = collections.deque()  # copies each example may still make
        self.in_pool = 0  # the sum of ``left``

    @property
    def per_example(self) -> int:
        """The copies a fresh example brings into the pool at the cap now (a cap that moves: autopilot/cap.py)."""
        return max(math.floor(self.max_factor) - 1, 0)

    @property
    def depth(self) -> int:
        size = len(self.left[-1]) if self.left else 0
        return echo_shuffle_size(self.max_factor, size) if self._depth is None else self._depth

    def add(self, batch: Batch) -> None:
        self.batches.append(batch)
        self.left.append(np.full(batch_size(batch), self.per_example, np.int64))
        self.in_pool += int(self.left[-1].sum())
        while len(self.left) > 1 and self.in_pool > POOL_BOUND * self.depth:
            self._drop_oldest()

    def candidate(self) -> Optional[np.ndarray]:
        """The examples (positions in the pool) that can take one more copy within ``max_factor`` trainings; None
        while the pool holds fewer than ``depth`` copies or fewer than a batch of examples."""
        if not self.left or self.in_pool < max(self.depth, 1):
            return None
        open_items = np.flatnonzero(np.concatenate(self.left))
        return open_items if len(open_items) >= len(self.left[-1]) else None

    def take(self, open_items: np.ndarray, index: int) -> Batch:
        """The ``index``-th copy batch, drawn from ``open_items`` by the seed and ``index`` alone, so what a copy
        holds follows from the decisions before it."""
        left = np.concatenate(self.left)[open_items]
        chosen = np.random.default_rng((self.seed, index)).choice(
            open_items, size=len(self.left[-1]), replace=False, p=left / left.sum())
        starts = np.cumsum([0] + [len(counts) for counts in self.left])
        where = np.searchsorted(starts, chosen, side="right") - 1
        picked = list(zip(where, chosen - starts[where]))
        for batch, position in picked:
            self.left[batch][position] -= 1
        self.in_pool -= len(picked)
        copy = {key: np.stack([self.batches[b][key][p] for b, p in picked]) for key in self.batches[-1]}
        while self.left and not self.left[0].any():  # spent: nothing more to copy from the oldest batch
            self._drop_oldest()
        return copy

    def _drop_oldest(self) -> None:
        self.batches.popleft()
        self.in_pool -= int(self.left.popleft().sum())

    def clear(self) -> None:
        self.batches.clear()
        self.left.clear()
        self.in_pool = 0
