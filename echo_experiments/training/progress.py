"""Progress on a run's long work: a line at least every HEARTBEAT_S seconds while it starts, and the terminal's bar.

Compiling, profiling the input, filling the shuffle buffers, training to the first evaluation and evaluating take
minutes on 2 cores (the language model's first evaluation came after about 5), and a silent command looks stuck;
from the first evaluation on, each evaluation's line says how the run goes. The bar counts the budget's unit.
"""

import logging
import sys
import threading
import time
from typing import Any, Callable, Optional

from tqdm import tqdm

HEARTBEAT_S = 30.0


class Heartbeat:
    """Within its ``with`` block, logs ``still <what()>`` every ``every_s`` seconds, on a daemon thread of its own,
    while ``what()`` has something to say (None: the run's own lines have taken over)."""

    def __init__(self, log: logging.Logger, what: Callable[[], Optional[str]], every_s: float = HEARTBEAT_S):
        self.log, self.what, self.every_s = log, what, every_s
        self._began, self._stopped = time.monotonic(), threading.Event()
        self._thread = threading.Thread(target=self._beat, name="heartbeat", daemon=True)

    def __enter__(self) -> "Heartbeat":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stopped.set()
        self._thread.join(5.0)

    def _beat(self) -> None:
        while not self._stopped.wait(self.every_s):
            said = self.what()
            if said is not None:
                self.log.info("still %s (%.0f s since the run began)", said, time.monotonic() - self._began)


def bar(total_fresh: Optional[int], total_steps: Optional[int], count: int, step: int, shown: bool) -> tqdm:
    """Progress in the budget's unit: fresh examples unless only a step cap is given; on a terminal only."""
    try:
        terminal = sys.stderr.isatty()
    except (AttributeError, ValueError, OSError):  # closed: 2>&- leaves sys.stderr None
        terminal = False
    return tqdm(total=total_fresh or total_steps, initial=count if total_fresh else step,
                unit="fresh" if total_fresh else "step", leave=False, disable=not (shown and terminal))
