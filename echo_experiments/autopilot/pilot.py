"""The echo autopilot: the echo factor follows the input while training, one object for the trainer
(``echo.factor=auto``) and for a user's own loop (loop.py).

A fixed factor is chosen before training, for one ratio R of upstream to downstream time; R moves during a
run (shared storage, the network, other work on the host). The autopilot decides at every step instead:

- when the input has a fresh batch ready, the loop gets it;
- when it has none and the step in flight is done (the accelerator would now wait), the loop gets a batch
  of copies of earlier fresh data (copies.py);
- nothing trained more than ``max_factor`` times (its copies included): past that the loop waits.

So the accelerator is idle only where the cap says so, and no copy is made that the input could have replaced.
The schedule, budget and evaluations count fresh examples (read ids), so a factor that changes from step to
step leaves all of them exact. The decisions follow the clock: two runs of one config train on the same fresh
examples in the same order but copy different ones. What a copy holds is fixed by the decisions before it
(ties are broken by a draw keyed by the copy's index), so a run that makes a recorded run's decisions again
(decisions.py) trains as it did.
"""

import concurrent.futures
import time
from typing import Any, Callable, Optional

from echo_experiments.autopilot.cap import CapRule
from echo_experiments.autopilot.copies import BatchCopies, ExampleCopies
from echo_experiments.autopilot.decisions import COPY, FRESH, RESTORED, RESUMED, STARTS_OVER, Decisions, Replay
from echo_experiments.autopilot.reader import Reader, Worker, step_done, wait_for_step

Augment = Callable[[Any, int], Any]


class Autopilot:
    """Batches from ``reader`` (one read always in flight), with copies from ``copies`` in the input's gaps: see
    the module. ``augment(batch, key)``, where given, augments every batch as it is delivered (a fresh one on the
    reading thread, keyed by its fresh index; a copy keyed by its copy index, negated). ``saved``: the state a
    checkpoint holds (:meth:`state`), to go on from (``dropped``: the batch read ahead at the save is lost, as
    the trainer's tf.data iterator is saved after it; else the loader reads it again); ``replay``: recorded
    decisions to make again; ``cap_rule``: the cap the autopilot moves itself (cap.py), whose slice of fresh
    batches is held out here, never handed on (nor counted among the fresh batches)."""

    def __init__(self, reader: Reader, copies: BatchCopies | ExampleCopies, saved: Optional[dict] = None,
                 augment: Optional[Augment] = None, replay: Optional[Replay] = None, dropped: bool = True,
                 cap_rule: Optional[CapRule] = None):
        saved = saved or {}
        self.reader, self.pool, self.augment, self.replay, self.cap_rule = reader, copies, augment, replay, cap_rule
        self.fresh_items, self.copies = saved.get("fresh_batches", 0), saved.get("copies", 0)
        self.decisions = Decisions(saved.get("decisions"))
        self._span: Optional[tuple[int, int, float]] = None  # (fresh batches, copies, factor) as a span began
        if cap_rule is not None:
            self.hold_to(cap_rule.copying(), cap_rule.SPANS)
        if saved:  # resumed: the copies start over (and the batch read ahead at the save is dropped, or read again)
            self.decisions.add(RESUMED if dropped else RESTORED)
        if replay is not None:
            replay.seek(self.fresh_items + self.copies)
        self.last = FRESH  # what the last batch handed on was
        self.input_wait_s = 0.0  # seconds the loop waited for a fresh batch with nothing to copy
        self.started: Optional[float] = None  # when the loop first asked
        self._pending: Optional[concurrent.futures.Future] = None
        # Waits for the step in flight beside the read: no polling, which would take the GIL from the input.
        self._watch = Worker("autopilot step watch")
        self._closed = False

    def next(self, between: Callable[[], None] = lambda: None, running: Any = None) -> Any:
        """The next batch: fresh when one is ready, else a copy once ``running`` (the step in flight: see
        reader.step_done; None: none) is done, else the next fresh one when it comes; or as the replayed record
        says. ``between`` as for Reader.next."""
        if self.started is None:
            self.started = time.perf_counter()
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
            self.last = COPY
            copy = self.pool.take(candidate, self.copies)
            return self.augment(copy, -self.copies) if self.augment else copy
        waiting = time.perf_counter()
        read, batch = self.reader.result(self._pending, between)
        while self.cap_rule is not None and self.cap_rule.holds_out(self.fresh_items + len(self.cap_rule.slice)):
            self.cap_rule.hold(batch)  # the slice, never trained on
            self._pending = self._read()
            read, batch = self.reader.result(self._pending, between)
        self.input_wait_s += time.perf_counter() - waiting
        self.fresh_items += 1
        self.decisions.add(FRESH)
        self.last = FRESH
        self._pending = self._read()
        self.pool.add(read)
        return dict(batch) if isinstance(batch, dict) else batch

    def _by_clock(self, running: Any) -> Any:
        """What to copy now (None: nothing, take the fresh batch): a candidate while no fresh batch is ready and
        the step in flight is done; while both are busy, whichever is done first decides."""
        candidate = None if self._pending.done() or not self._span_open() else self.pool.candidate()
        if candidate is not None and not step_done(running):
            pending = self._pending
            step_over = self._watch.submit(lambda: wait_for_step(running, lambda: pending.done() or self._closed))
            concurrent.futures.wait([self._pending, step_over], timeout=self.reader.timeout_s,
                                    return_when=concurrent.futures.FIRST_COMPLETED)
            candidate = None if self._pending.done() else candidate
        return candidate

    def hold_to(self, factor: float, over_span: bool = False) -> None:
        """From now, no batch or example trained more than ``factor`` times; with ``over_span``, also no more than
        ``factor`` batches handed on per fresh one from now until the next call (a moving cap's window, cap.py)."""
        self.pool.max_factor = factor
        self._span = (self.fresh_items, self.copies, factor) if over_span else None

    def _span_open(self) -> bool:
        """Whether one more copy keeps the span's batches per fresh one within its factor (no span: always)."""
        if self._span is None:
            return True
        fresh, copies, factor = self._span
        fresh = self.fresh_items - fresh
        return fresh + self.copies - copies + 1 <= factor * fresh

    def _planned(self, between: Callable[[], None]) -> Optional[str]:
        """The replayed record's next decision (None: the clock's), after the resumptions it records: each drops
        the batch read ahead and starts the copies over, as the recorded run's resumption did."""
        planned = self.replay.next() if self.replay is not None else None
        while planned in STARTS_OVER:
            if planned == RESUMED:
                self.reader.result(self._pending, between)
                self._pending = self._read()
            self.pool.clear()
            self.decisions.add(planned)
            planned = self.replay.next()
        return planned

    def _read(self) -> concurrent.futures.Future:
        """The next fresh batch as read and as trained (augmented here where the autopilot augments, keyed by its
        index among the fresh batches: as the stream keys its chunks, so without copies the batches are the
        stream's own where a batch is one chunk)."""
        index, augment = self.fresh_items, self.augment
        return self.reader.submit_next(lambda read: (read, augment(read, index) if augment else read))

    @property
    def effective_echo_factor(self) -> float:
        """Batches handed to the loop per fresh batch, so far (the record's effective_echo_factor)."""
        return (self.fresh_items + self.copies) / self.fresh_items if self.fresh_items else 1.0

    def state(self) -> dict[str, Any]:
        """What a checkpoint keeps of the autopilot: its counts and decisions so far."""
        return {"fresh_batches": self.fresh_items, "copies": self.copies, "decisions": self.decisions.runs,
                **({"cap_rule": self.cap_rule.state()} if self.cap_rule is not None else {})}

    def settle(self) -> Any:
        """Wait for the read in flight (within the timeout), so the iterator is idle and can be saved; what it read
        (None: nothing in flight). The batch stays for the next step; the trainer drops it after a resume from this
        save, never training nor counting it."""
        return self.reader.result(self._pending) if self._pending is not None else None

    def close(self) -> None:
        self._closed = True
        self._watch.close(5.0)
        self.reader.close()
