"""The echo autopilot (``echo.factor=auto``): the echo factor follows the input while training.

A fixed factor is chosen before training, for one ratio R of upstream to downstream time; R moves during a
run (shared storage, the network, other work on the host). The autopilot decides at every step instead:

- when the input has a fresh batch ready, the trainer gets it;
- when it has none and the step in flight is done (the accelerator would now wait), the trainer gets a batch
  of copies of earlier fresh data (below);
- nothing trained more than ``max_factor`` times (its copies included): past that the trainer waits.

So the accelerator is idle only where the cap says so, and no copy is made that the input could have
replaced. With ``echo.min_worth`` above 0 a copy must also be worth its cost (:class:`WorthGate`): while the
copy-worth estimate (worth.py, each evaluation's) says a copy is worth less than that many fresh examples, the
autopilot makes one copy in PROBE_EVERY of the chances it would have taken, enough for the estimate to go on
measuring, and waits for the input at the others.

The schedule, budget and evaluations are in fresh examples and fresh examples are counted from read ids, so a
factor that changes from step to step leaves all of them exact. The decisions follow the clock: two runs of one
config train on the same fresh examples in the same order but copy different ones. What a copy holds is fixed by
the decisions before it (ties are broken by a draw keyed by the copy's index), so a run that makes a recorded
run's decisions again (``echo.replay``: decisions.py) trains as it did.

The decisions are made in the trainer, which sees both the input and the accelerator; what a copy holds
depends on the placement:

- after batching (E3): a whole recent batch, unshuffled, as in batch echoing (:class:`BatchCopies`);
- before batching (E2, after augmentation): examples drawn at random from a pool of earlier batches' examples,
  as deep as a fixed factor's echo shuffle at the cap (:class:`ExampleCopies`), so an example's copies are spread
  over later steps and mixed with other batches' examples, as that shuffle spreads a fixed factor's;
- before augmentation (E1): the same, from the batches as read, each batch augmented as it is delivered, a
  copy anew (the stream leaves the augmentation to the autopilot: data/stream.py).
"""

import collections
import concurrent.futures
import math
from typing import Any, Callable, Optional

import numpy as np

from echo_experiments.core.placement import EchoSpec, echo_shuffle_size
from echo_experiments.core.specs import PipelineSpec
from echo_experiments.data import stream
from echo_experiments.training import worth
from echo_experiments.training.decisions import COPY, FRESH, RESUMED, Decisions, Replay
from echo_experiments.training.waits import Batches

# The recent fresh batches a whole-batch copy is drawn from (after batching, where a fixed factor repeats a batch
# back to back): copies of one batch spread over a few steps.
RECENT = 4
# The example copies' pool keeps at most this many times its depth of copies, the oldest examples' leaving first.
POOL_BOUND = 2
# While the estimate says copies are not worth their cost, one chance in this many is still taken: the steps of
# copies the estimate needs to see whether they have become worth it (at R about 6, about 0.15 copies a fresh batch).
PROBE_EVERY = 32
# The weight an evaluation's estimate keeps at the next: the gate's estimate is the mean of the evaluations', each
# weighted by its steps of copies and halved at every evaluation after it, so that a few probing copies do not
# overturn what many copies measured, and the old measure still fades within a few evaluations.
WORTH_MEMORY = 0.5
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

    def take(self, item: list, index: int) -> Batch:
        item[1] += 1
        return dict(item[0])

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
        self.per_example = max(math.floor(max_factor) - 1, 0)
        self.batches: collections.deque[Batch] = collections.deque()
        self.left: collections.deque[np.ndarray] = collections.deque()  # copies each example may still make
        self.in_pool = 0  # the sum of ``left``

    @property
    def depth(self) -> int:
        batch_size = len(self.left[-1]) if self.left else 0
        return echo_shuffle_size(self.max_factor, batch_size) if self._depth is None else self._depth

    def add(self, batch: Batch) -> None:
        self.batches.append(batch)
        self.left.append(np.full(len(batch["read_id"]), self.per_example, np.int64))
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


class WorthGate:
    """Whether a copy the clock allows is made, by what a copy is estimated to be worth: always while no estimate
    has been made or where ``min_worth`` is 0; while the estimate (WORTH_MEMORY's mean) is below ``min_worth``, one
    chance in PROBE_EVERY. ``saved``: its state in a checkpoint (:meth:`state`)."""

    def __init__(self, min_worth: float, saved: Optional[dict] = None):
        saved = saved or {}
        self.min_worth = min_worth
        self.estimate: Optional[float] = saved.get("worth_estimate")
        self.weight: float = saved.get("worth_weight", 0.0)  # the steps of copies behind it, faded
        self.refused = saved.get("worth_refused", 0)  # chances passed up while closed

    @property
    def open(self) -> bool:
        return not self.min_worth or self.estimate is None or self.estimate >= self.min_worth

    def allows(self) -> bool:
        """Whether this chance to copy is taken."""
        if self.open:
            return True
        self.refused += 1
        return self.refused % PROBE_EVERY == 0

    def observe(self, estimate: Optional[float], copy_steps: float) -> None:
        """An evaluation's estimate and the steps of copies it rests on; None (too few copies to tell) leaves the
        estimate as it was."""
        if estimate is None or copy_steps <= 0:
            return
        kept = self.weight * WORTH_MEMORY
        self.weight = kept + copy_steps
        self.estimate = (kept * (self.estimate or 0.0) + copy_steps * float(estimate)) / self.weight

    def state(self) -> dict[str, Any]:
        return {"worth_estimate": self.estimate, "worth_weight": self.weight, "worth_refused": self.refused}


class Autopilot:
    """Batches from ``batches`` (one read always in flight), with copies from ``copies`` in the input's gaps:
    see the module. ``augment(batch, key)``, where given, augments every batch as it is delivered (a fresh one
    on the reading thread, keyed by its fresh index; a copy keyed by its copy index, negated). ``saved``: the
    state a checkpoint holds (:meth:`state`), to go on from; ``replay``: recorded decisions to make again."""

    def __init__(self, batches: Batches, copies: BatchCopies | ExampleCopies, saved: Optional[dict] = None,
                 augment: Optional[Callable[[Batch, int], Batch]] = None, replay: Optional[Replay] = None,
                 min_worth: float = 0.0):
        saved = saved or {}
        self.batches, self.pool, self.augment, self.replay = batches, copies, augment, replay
        self.gate = WorthGate(min_worth, saved)
        self.fresh_items, self.copies = saved.get("fresh_batches", 0), saved.get("copies", 0)
        self.decisions = Decisions(saved.get("decisions"))
        if saved:  # resumed: the batch read ahead at the save is dropped, and the copies start over
            self.decisions.add(RESUMED)
        if replay is not None:
            replay.seek(self.fresh_items + self.copies)
        self._pending: Optional[concurrent.futures.Future] = None
        # Waits for the step in flight beside the read: no polling, which would take the GIL from the input.
        self._watch = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="autopilot_step")

    def next(self, between: Callable[[], None] = lambda: None, running: Any = None) -> Batch:
        """The next batch: fresh when one is ready, else a copy once ``running`` (the step in flight, a JAX
        array; None: none) is done, else the next fresh one when it comes; or as the replayed record says.
        ``between`` as for Batches.next."""
        if self._pending is None:
            self._pending = self._read()
        planned = self._planned(between)
        if planned is None:
            candidate = self._by_clock(running)
        elif planned == COPY:
            candidate = self.pool.candidate()
            if candidate is None:
                raise self.replay.mismatch(self.fresh_items + self.copies)
        else:
            candidate = None
        if candidate is not None:
            self.copies += 1
            self.decisions.add(COPY)
            copy = self.pool.take(candidate, self.copies)
            return self.augment(copy, -self.copies) if self.augment else copy
        read, batch = self.batches.result(self._pending, between)
        self.fresh_items += 1
        self.decisions.add(FRESH)
        self._pending = self._read()
        self.pool.add(read)
        return dict(batch)

    def _by_clock(self, running: Any) -> Any:
        """What to copy now (None: nothing, take the fresh batch): a candidate while no fresh batch is ready and
        the step in flight is done; while both are busy, whichever is done first decides."""
        candidate = None if self._pending.done() else self.pool.candidate()
        if candidate is not None and running is not None and not running.is_ready():
            step_done = self._watch.submit(running.block_until_ready)
            concurrent.futures.wait([self._pending, step_done], timeout=self.batches.timeout_s,
                                    return_when=concurrent.futures.FIRST_COMPLETED)
            candidate = None if self._pending.done() else candidate
        return candidate if candidate is not None and self.gate.allows() else None

    def _planned(self, between: Callable[[], None]) -> Optional[str]:
        """The replayed record's next decision (None: the clock's), after the resumptions it records: each drops
        the batch read ahead and starts the copies over, as the recorded run's resumption did."""
        planned = self.replay.next() if self.replay is not None else None
        while planned == RESUMED:
            self.batches.result(self._pending, between)
            self.pool.clear()
            self.decisions.add(RESUMED)
            self._pending = self._read()
            planned = self.replay.next()
        return planned

    def _read(self) -> concurrent.futures.Future:
        """The next fresh batch as read and as trained (augmented here where the autopilot augments, keyed by its
        index among the fresh batches: as the stream keys its chunks, so without copies the batches are the
        stream's own where a batch is one chunk)."""
        index, augment = self.fresh_items, self.augment
        return self.batches.submit_next(lambda read: (read, augment(read, index) if augment else read))

    @property
    def effective_echo_factor(self) -> float:
        """Batches handed to the trainer per fresh batch, so far (the record's effective_echo_factor)."""
        return (self.fresh_items + self.copies) / self.fresh_items if self.fresh_items else 1.0

    def state(self) -> dict[str, Any]:
        """What a checkpoint keeps of the autopilot: its counts and decisions so far."""
        return {"fresh_batches": self.fresh_items, "copies": self.copies, "decisions": self.decisions.runs,
                **self.gate.state()}

    def settle(self) -> None:
        """Wait for the read in flight (within the timeout), so the iterator is idle and can be saved. The batch
        it read stays for the next step; after a resume from this save it is never trained (nor counted)."""
        if self._pending is not None:
            self.batches.result(self._pending)

    def close(self) -> None:
        self._watch.shutdown(wait=True)
        self.batches.close()


def copies_for(echo: EchoSpec, seed: int) -> BatchCopies | ExampleCopies:
    """What the autopilot's copies hold at ``echo``'s placement, capped at ``echo.max_factor``: whole batches after
    batching, else examples."""
    cap = echo.max_factor
    return BatchCopies(cap) if echo.placement.echoes_batches else ExampleCopies(cap, seed)


def trainer_inputs(batches: Batches, pipeline: PipelineSpec, workload: Any, saved: dict,
                   replay: Optional[Replay]) -> Batches | Autopilot:
    """The trainer's input: ``batches`` as they come, or with echo.factor=auto the autopilot over them, going on
    from ``saved`` (its state in a checkpoint; empty: from the start)."""
    if not pipeline.echo.auto:
        return batches
    return Autopilot(batches, copies_for(pipeline.echo, pipeline.seed), saved,
                     stream.augment_batches(workload, pipeline), replay, pipeline.echo.min_worth)


def autopilot_state(inputs: Any) -> dict[str, Any]:
    """The autopilot's state for a checkpoint; empty for plain batches."""
    return inputs.state() if isinstance(inputs, Autopilot) else {}


def observe_worth(inputs: Any, row: dict[str, Any]) -> None:
    """An evaluation's row to the autopilot's gate: the estimate the protocol's pilot chose (worth.CHOSEN)."""
    if isinstance(inputs, Autopilot) and worth.CHOSEN is not None:
        inputs.gate.observe(row.get(f"copy_worth_{worth.CHOSEN}"), row.get("copy_worth_copy_steps", 0.0))
