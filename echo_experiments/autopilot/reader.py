"""Reading a loader on a thread of its own, every wait bounded, and telling when the step in flight is done.

The autopilot reads one batch ahead of the loop; the loop waits only for what it must. A wait is counted in the
process's own running time, slice by slice: a pause of the process (SIGSTOP, Ctrl-Z, a suspended machine) does
not count against the loader. The reading thread is a daemon: a loader stuck inside its own ``next`` can hold no
process open, and a loop that ends closes the thread at once otherwise.
"""

import concurrent.futures
import queue
import threading
import time
from typing import Any, Callable, Iterator, Optional


class LoaderError(RuntimeError):
    """The loader raised, or gave nothing within the timeout; str() is the one line to show."""


class LoaderEnded(Exception):
    """The loader has no more batches."""


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


class Worker:
    """One daemon thread that runs what is submitted to it, in order, each call's outcome in a Future."""

    def __init__(self, name: str):
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._work, name=name, daemon=True)
        self._thread.start()

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            fn, future = job
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn())
                except BaseException as e:  # handed to the waiting caller, which decides what it means
                    future.set_exception(e)

    def submit(self, fn: Callable[[], Any]) -> concurrent.futures.Future:
        future: concurrent.futures.Future = concurrent.futures.Future()
        self._jobs.put((fn, future))
        return future

    def close(self, wait_s: Optional[float]) -> None:
        """End the thread after what it runs now (``wait_s``: how long to wait for that; None: not at all)."""
        self._jobs.put(None)
        if wait_s is not None:
            self._thread.join(wait_s)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()


class Reader:
    """The next batch of ``iterator``, read on a thread of its own and waited for at most ``timeout_s``: a loader
    that stops answering, raises or ends says so in one line (LoaderError, LoaderEnded) instead of a silent wait.
    ``name``: the loader in words, for those lines. Subclasses turn a batch as read into what the loop takes
    (:meth:`convert`) and a loader's own errors into their lines (:meth:`failed`)."""

    def __init__(self, iterator: Iterator[Any], timeout_s: float, name: str):
        self.iterator, self.timeout_s, self.name = iterator, timeout_s, name
        self._worker = Worker(f"reader of {name}"[:60])
        self._stuck = False  # a call ran past the timeout: its thread may never return

    def convert(self, batch: Any) -> Any:
        return batch

    def _next(self) -> Any:
        try:
            return self.convert(next(self.iterator))
        except StopIteration:
            raise LoaderEnded(self.name) from None

    def next(self, between: Callable[[], None] = lambda: None, running: Any = None) -> Any:
        """The next batch; ``between`` is called every second of the wait (it may raise to end it). ``running``
        (the step in flight) is for the autopilot, which decides by it; a plain reader waits either way."""
        return self.result(self.submit_next(), between)

    def submit_next(self, then: Callable[[Any], Any] = lambda batch: batch) -> concurrent.futures.Future:
        """Start reading the next batch on the reading thread, ``then`` applied to it there; :meth:`result` waits
        for it."""
        return self._worker.submit(lambda: then(self._next()))

    def call(self, fn: Callable[[], Any], between: Callable[[], None] = lambda: None) -> Any:
        """``fn()`` (a call into the loader) on the reading thread, within the timeout."""
        return self.result(self._worker.submit(fn), between)

    def result(self, future: concurrent.futures.Future, between: Callable[[], None] = lambda: None) -> Any:
        """What a call submitted to the reading thread returned, within the timeout."""
        try:
            return result_within(future, self.timeout_s, between=between)
        except concurrent.futures.TimeoutError:
            self._stuck = True
            raise self.timed_out() from None
        except LoaderEnded:
            raise
        except Exception as e:
            said = self.failed(e)
            if said is e:
                raise
            raise said from e

    def timed_out(self) -> Exception:
        return LoaderError(f"no batch from {self.name} within {self.timeout_s:g} s: is it still producing? (the "
                           "wait is bounded by timeout_s)")

    def failed(self, error: Exception) -> Exception:
        said = str(error).strip().splitlines()
        return LoaderError(f"{self.name} raised {type(error).__name__}" + (f": {said[0][:300]}" if said else ""))

    def settle(self) -> None:
        """Nothing is read ahead between calls: the iterator is idle, ready to be saved."""

    def close(self) -> None:
        """End the reading thread (at once where a read is stuck past the timeout: it is a daemon)."""
        self._worker.close(None if self._stuck else 5.0)


def step_done(handle: Any) -> bool:
    """Whether the step in flight is done: a JAX array's ``is_ready()``, a CUDA event's ``query()``, a future's
    ``done()``, or a callable's answer; None (no step in flight) is done."""
    if handle is None:
        return True
    for name in ("is_ready", "query", "done"):
        method = getattr(handle, name, None)
        if callable(method):
            return bool(method())
    return bool(handle())


def wait_for_step(handle: Any, given_up: Callable[[], bool] = lambda: False, poll_s: float = 0.0005) -> None:
    """Block until the step in flight is done: ``block_until_ready()``, ``synchronize()`` or ``result()`` where it
    has one, else asking :func:`step_done` every ``poll_s`` until it is done or ``given_up()`` (the wait no longer
    matters: a fresh batch came, or the loop closed)."""
    for name in ("block_until_ready", "synchronize", "result"):
        method = getattr(handle, name, None)
        if callable(method):
            method()
            return
    while not (step_done(handle) or given_up()):
        time.sleep(poll_s)


def is_step_handle(handle: Any) -> bool:
    """What :func:`step_done` can ask."""
    return handle is None or callable(handle) or any(callable(getattr(handle, n, None))
                                                     for n in ("is_ready", "query", "done"))
