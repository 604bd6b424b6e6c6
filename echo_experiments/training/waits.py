"""Bounded waits on what is outside the process, and the one-line errors that end a run when one runs out.

Every wait on the input (the tf.data service, the record server, the storage, a data file) is bounded by
``data.timeout_s`` of the process's own running time: a pause of the process (SIGSTOP, Ctrl-Z, a suspended
machine) does not count against the input, so a paused sweep resumes instead of ending its jobs.
"""

import concurrent.futures
from typing import Any, Callable, Iterator, Optional

import numpy as np
import tensorflow as tf

from echo_experiments.data import files
from echo_experiments.data.sources import Source, cause, example_refused


class InputLost(Exception):
    """The input pipeline's source stopped answering (nothing within data.timeout_s) or failed (a record server
    gone, a truncated file); str() is the one line shown to the user."""

    def __init__(self, what: str):
        super().__init__(f"{what}; the run keeps its last checkpoint: run the same command to resume once it answers")


class PeerLost(Exception):
    """Another process of a multi-process run stopped answering; str() is the one line shown to the user."""


def input_source(cfg: Any) -> str:
    """What a run's input pipeline waits on, in words, for a timeout's message."""
    if cfg.data.service:
        return (f"the tf.data service at {cfg.data.service} (are its dispatcher and workers running? "
                "python -m echo_experiments.service)")
    if cfg.storage.kind == "http":
        return f"the record server at {cfg.storage.url or 'the loopback record server'}"
    own = files.parse(cfg.workload.dataset)
    return f"the input pipeline reading {own[1] if own else cfg.data.dir or 'the TFDS data directory'}"


def result_within(future: concurrent.futures.Future, timeout_s: float, slice_s: float = 1.0,
                  between: Callable[[], None] = lambda: None) -> Any:
    """``future.result()``, waiting at most ``timeout_s`` seconds of this process's own running time.

    The wait goes in slices, each counted as what it asked for: a process stopped in the middle of one counts
    one slice, not the pause (one wait of ``timeout_s`` would blame the input for it). ``between`` is called
    after each slice (it may raise to end the wait). concurrent.futures.TimeoutError once the slices add up to
    ``timeout_s``."""
    waited = 0.0
    while True:
        between()
        step = min(slice_s, timeout_s - waited)
        try:
            return future.result(timeout=step)
        except concurrent.futures.TimeoutError:
            waited += step
            if waited >= timeout_s:
                raise


class Batches:
    """The next batch of a tf.data iterator, waiting at most ``timeout_s``: a lost service worker or a record server
    that stopped answering ends the run with one line (InputLost) instead of a silent wait. The wait runs on a
    helper thread, since a blocked tf.data call cannot be interrupted; the handoff costs microseconds a step."""

    def __init__(self, iterator: Optional[Iterator[Any]], timeout_s: float, source: str,
                 data: Optional[Source] = None):
        """``source``: what the input waits on, in words; ``data``: the split it reads, which names the example a
        stage refuses."""
        self.iterator, self.timeout_s, self.source, self.data = iterator, timeout_s, source, data
        self._waiter = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="next_batch")
        self._stuck = False  # a call ran past the timeout: its thread may never return

    def next(self, between: Callable[[], None] = lambda: None, running: Any = None) -> dict[str, np.ndarray]:
        """The next batch; ``between`` is called every second of the wait (it may raise to end it). ``running``
        (the step in flight) is for the autopilot's stand-in (autopilot.py), which decides by it."""
        return self.result(self.submit_next(), between)

    def submit_next(self, then: Callable[[dict[str, np.ndarray]], Any] = lambda batch: batch
                    ) -> concurrent.futures.Future:
        """Start reading the next batch on the helper thread, ``then`` applied to it there; :meth:`result` waits
        for it."""
        return self._waiter.submit(lambda: then({k: v.numpy() for k, v in next(self.iterator).items()}))

    def call(self, fn: Callable[[], Any], between: Callable[[], None] = lambda: None) -> Any:
        """``fn()`` (a call into the input pipeline) on the helper thread, within the timeout."""
        return self.result(self._waiter.submit(fn), between)

    def result(self, future: concurrent.futures.Future, between: Callable[[], None] = lambda: None) -> Any:
        """What a call submitted to the helper thread returned, within the timeout."""
        try:
            return result_within(future, self.timeout_s, between=between)
        except tf.errors.InvalidArgumentError as e:  # a stage that cannot take an example: rerunning cannot help
            raise example_refused(self.data, e) from None
        except tf.errors.OpError as e:  # raised by a stage: a read that failed for good
            raise InputLost(f"the input pipeline failed reading from {self.source}: {cause(e)}") from None
        except concurrent.futures.TimeoutError:
            self._stuck = True
            self._waiter.shutdown(wait=False)
            raise InputLost(f"no batch from {self.source} within data.timeout_s={self.timeout_s:g} s") from None

    def settle(self) -> None:
        """Nothing is read ahead between calls: the iterator is idle, ready to be saved."""

    def close(self) -> None:
        self._waiter.shutdown(wait=not self._stuck)
