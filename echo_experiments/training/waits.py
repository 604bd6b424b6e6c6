"""Bounded waits on what is outside the process, and the one-line errors that end a run when one runs out.

Every wait on the input (the tf.data service, the record server, the storage, a data file) is bounded by
``data.timeout_s`` of the process's own running time: a pause of the process (SIGSTOP, Ctrl-Z, a suspended
machine) does not count against the input, so a paused sweep resumes instead of ending its jobs.
"""

from typing import Any, Iterator, Optional

import numpy as np
import tensorflow as tf

from echo_experiments.autopilot.reader import Reader
from echo_experiments.core.specs import RunSpec
from echo_experiments.data import files
from echo_experiments.data.sources import Source, cause, example_refused


class InputLost(Exception):
    """The input pipeline's source stopped answering (nothing within data.timeout_s) or failed (a record server
    gone, a truncated file); str() is the one line shown to the user."""

    def __init__(self, what: str):
        super().__init__(f"{what}; the run keeps its last checkpoint: run the same command to resume once it answers")


class PeerLost(Exception):
    """Another process of a multi-process run stopped answering; str() is the one line shown to the user."""


def input_source(spec: RunSpec) -> str:
    """What a run's input pipeline waits on, in words, for a timeout's message."""
    if spec.pipeline.service:
        return (f"the tf.data service at {spec.pipeline.service} (are its dispatcher and workers running? "
                "python -m echo_experiments.service)")
    if spec.storage.kind == "http":
        return f"the record server at {spec.storage.url or 'the loopback record server'}"
    own = files.parse(spec.workload.dataset)
    return f"the input pipeline reading {own[1] if own else spec.data_dir or 'the TFDS data directory'}"


class Batches(Reader):
    """The next batch of a tf.data iterator, waiting at most ``timeout_s``: a lost service worker or a record server
    that stopped answering ends the run with one line (InputLost) instead of a silent wait. The wait runs on a
    thread of its own (reader.py), since a blocked tf.data call cannot be interrupted; the handoff costs
    microseconds a step."""

    def __init__(self, iterator: Optional[Iterator[Any]], timeout_s: float, source: str,
                 data: Optional[Source] = None):
        """``source``: what the input waits on, in words; ``data``: the split it reads, which names the example a
        stage refuses."""
        super().__init__(iterator, timeout_s, source)
        self.source, self.data = source, data

    def convert(self, batch: Any) -> dict[str, np.ndarray]:
        return {k: v.numpy() for k, v in batch.items()}

    def failed(self, error: Exception) -> Exception:
        if isinstance(error, tf.errors.InvalidArgumentError):  # a stage that cannot take an example: rerunning
            return example_refused(self.data, error)           # cannot help
        if isinstance(error, tf.errors.OpError):  # raised by a stage: a read that failed for good
            return InputLost(f"the input pipeline failed reading from {self.source}: {cause(error)}")
        return error

    def timed_out(self) -> Exception:
        return InputLost(f"no batch from {self.source} within data.timeout_s={self.timeout_s:g} s")
