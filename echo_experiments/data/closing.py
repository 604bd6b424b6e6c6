"""A finished run's input pipeline, closed on a thread of its own.

Destroying a tf.data iterator joins its autotuning thread, which sleeps between optimisations for a period that
grows to a minute. The cancellation that should wake it can come too early: its wake-up runs before the iterator
counts as cancelled, and the thread then sleeps out the rest of its period. A finished run's process could
therefore sit for up to a minute after its summary.json was written, silently, before a sweep's next job
began. The run's files are complete by then, so the iterator goes to a thread that drops it while the process
goes on; a process that ends waits for that thread first (at most :data:`EXIT_WAIT_S`), and says why.
"""

import atexit
import logging
import sys
import threading
import time
from typing import Any

log = logging.getLogger(__name__)

# How long the closing thread waits for the run's other owners of the iterator (a checkpointer that cached it)
# to let go, so that it drops the last reference and the destructor runs there, not on the main thread.
HANDOFF_S = 10.0
# How long a process that ends waits for its input pipelines to close: the autotuner's longest sleep and margin.
EXIT_WAIT_S = 90.0
# A close shorter than this is not worth a line.
SAY_AFTER_S = 2.0

_closing: list[threading.Thread] = []


def close_later(holder: list[Any], what: str) -> threading.Thread:
    """Drop the iterator in ``holder`` (a one-element list, emptied here, so that the caller keeps no reference to
    it) on a thread of its own. ``what`` names the run for the log line of a slow close."""
    thread = threading.Thread(target=_drop, args=([holder.pop()], what), name="close_input", daemon=True)
    _closing[:] = [*pending(), thread]
    thread.start()
    return thread


def _drop(box: list[Any], what: str) -> None:
    iterator = box.pop()
    deadline = time.monotonic() + HANDOFF_S
    while sys.getrefcount(iterator) > 2 and time.monotonic() < deadline:  # 2: this name and the call's argument
        time.sleep(0.05)
    began = time.perf_counter()
    del iterator
    took = time.perf_counter() - began
    if took > SAY_AFTER_S:
        log.info("closed the input pipeline of %s in %.1f s (tf.data's autotuning thread), beside the next work",
                 what, took)


def pending() -> list[threading.Thread]:
    """The closing threads still running."""
    return [t for t in _closing if t.is_alive()]


def wait_closed(timeout_s: float = EXIT_WAIT_S) -> bool:
    """Wait for the input pipelines still closing, at most ``timeout_s``; True when none is left. Called when the
    process ends; a signal ends the wait (the runs' files are written)."""
    left = pending()
    if not left:
        return True
    log.info("closing the input pipeline (tf.data's autotuning thread can take up to a minute to stop; every "
             "run's files are written)")
    deadline = time.monotonic() + timeout_s
    try:
        for thread in left:
            thread.join(max(0.0, deadline - time.monotonic()))
    except BaseException:  # noqa: BLE001 - a Ctrl-C or stop signal while the process ends: end it now
        return False
    return not pending()


atexit.register(wait_closed)
