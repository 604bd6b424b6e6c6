"""``python -m echo_experiments.profile [overrides]``: where a config's time goes, and the echo factor that
would reclaim it. A short normal run (200 steps unless told otherwise) measures the timing facts
(timing.py) and prints them with the recommendation.

For any other loader (a Grain or tf.data pipeline of your own, a PyTorch DataLoader, a generator) and any step
function, :func:`measure_loader` measures the same facts in your process and prints the same lines::

    from echo_experiments.profile import measure_loader
    timing, idle = measure_loader(iter(loader), lambda batch: train_step(state, batch)[1])
"""

import sys
import tempfile
import time
from typing import Any, Callable, Iterable, Iterator, Optional

import numpy as np

from echo_experiments.autopilot.reader import LoaderEnded, Reader
from echo_experiments.cli.compose import compose_all, profile_overrides
from echo_experiments.cli.exits import fail, one_line_on_signal
from echo_experiments.cli.plan import check_command_line
from echo_experiments.core.config import MAX_PROFILE_BATCHES
from echo_experiments.core.schema import ConfigError, argument, integer, real
from echo_experiments.training.timing import OtherWork, Timing, report_lines, seconds_per_call, upstream_s_per_batch


def main(argv: Optional[list[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if {"-h", "--help"} & set(argv):
        print(f"usage: python -m echo_experiments.profile [overrides]\n\n{__doc__}")
        return 0
    overrides = profile_overrides(argv)
    error = check_command_line(overrides)
    if error:
        fail(error)
    cfg = next(iter(compose_all(overrides, multirun=False)))
    if not cfg.trainer.profile_batches:  # the timing facts are what this command prints
        fail(f"trainer.profile_batches={cfg.trainer.profile_batches} is not allowed here: an integer >= 1 "
             "(the batches the profiler times)")
    from echo_experiments.data.sources import DataMissing  # TensorFlow and JAX: after the command line is checked
    from echo_experiments.training.trainer import run
    from echo_experiments.workloads.run_check import check_run

    with one_line_on_signal(lambda: "nothing is kept (the profile runs in a temporary folder): run it again"), \
            tempfile.TemporaryDirectory(prefix="echo_profile_") as out:
        try:
            summary = run(check_run(cfg), out)
        except (ConfigError, DataMissing) as e:
            fail(str(e))
    timing = Timing(summary.upstream_s_per_batch, summary.downstream_s_per_step)
    idle = (f"{summary.accelerator_idle_fraction:.2f} of a {summary.steps}-step run's training time was not spent in "
            f"train steps (after {summary.startup_s:.1f} s to the first batch)")
    print("\n".join(report_lines(timing, idle)))
    print(timing.advice(summary.other_cores))
    hint = store_hint(cfg.storage, timing, summary.startup_s)
    if hint:
        print(hint)
    return 0


def store_hint(storage: Any, timing: Timing, startup_s: float) -> Optional[str]:
    """A line where an emulated store of records left the input faster than the step: a workload that makes many
    examples of each record and buffers records ahead (the language model packs documents into sequences behind
    a document shuffle buffer) waits for such a store before its first batch, never beside a step. None
    elsewhere."""
    if storage.kind != "emulated" or storage.read_unit != "record" or timing.ratio >= 1:
        return None
    return (f"note: R < 1 on an emulated store of records ({startup_s:.1f} s to the first batch): where a workload "
            "makes many examples of each record and reads records ahead (the language model's documents), the "
            "store's waits come before the first batch; storage.read_unit=example puts one on every example")


def measure_loader(batches: Iterable[Any], step: Callable[[Any], Any], n: int = 20,
                   show: Optional[Callable[[str], Any]] = print, timeout_s: float = 600.0) -> tuple[Timing, float]:
    """How input-bound a loader and a step are, as the profiler measures its own stream: upstream seconds per batch
    of ``batches`` alone (after 2 batches, over at least ``n`` and 2 s), seconds per ``step(batch)`` on one cached
    batch (a JAX result waited for; the step must not change what later calls compute, or pass a closure that
    keeps its state), and the idle share of ``n`` steps fed by the loader. Returns (Timing, idle share); ``show``
    gets the profiler's lines and its advice (None: nothing shown). Every pull from the loader waits at most
    ``timeout_s`` (one line naming the loader); a loader that ends too soon, or a bad argument, is one line too."""
    argument("n", n, f"an integer from 1 to {MAX_PROFILE_BATCHES}", integer(1, MAX_PROFILE_BATCHES))
    argument("timeout_s", timeout_s, "a real number > 0 (seconds)", real(0, low_open=True))
    try:
        seen = Echoes(iter(batches))
    except TypeError:
        raise TypeError(f"batches must be iterable (a loader, a dataset, a generator), not "
                        f"{type(batches).__name__}") from None
    reader = Reader(seen, timeout_s, f"the loader {type(batches).__name__}")
    try:
        return _measured(reader, seen, step, n, show)
    except LoaderEnded:
        raise ValueError(f"the loader {type(batches).__name__} ended after {seen.pulled} batches: measure_loader "
                         f"needs at least {n + 3} and 2 s of them (n={n})") from None
    finally:
        reader.close()


def _measured(reader: Reader, seen: "Echoes", step: Callable[[Any], Any], n: int,
              show: Optional[Callable[[str], Any]]) -> tuple[Timing, float]:
    up = upstream_s_per_batch(seen, n, pull=reader.call)
    batch = reader.call(seen.__next__)
    timing = Timing(up, seconds_per_call(lambda: step(batch), n))
    others, began = OtherWork(), time.perf_counter()
    for _ in range(n):
        out = step(reader.call(seen.__next__))
    import jax

    jax.block_until_ready(out)
    elapsed = time.perf_counter() - began
    idle = timing.idle_fraction(n, elapsed)
    if show:
        show("\n".join(report_lines(timing, f"{idle:.2f} of {n} steps fed by the loader was spent waiting for it",
                                     seen.what_was_timed())))
        show(timing.advice(others.seconds() / max(elapsed, 1e-9)))
    return timing, idle


class Echoes:
    """A loader passed through while its batches are timed, noting the read ids it has handed on: a loader that
    echoes (its batches repeat ids) is timed as the echo stage delivers, copies included, not as its input reads."""

    def __init__(self, batches: Iterator[Any]):
        self.batches, self.seen, self.total, self.repeating, self.pulled = batches, set(), 0, 0, 0

    def __iter__(self) -> "Echoes":
        return self

    def __next__(self) -> Any:
        try:
            batch = next(self.batches)
        except StopIteration:
            raise LoaderEnded() from None
        self.pulled += 1
        ids = batch.get("read_id") if isinstance(batch, dict) else None
        if ids is not None:
            ids = [int(i) for i in np.asarray(ids).ravel()]
            self.total += 1
            self.repeating += any(i in self.seen for i in ids)
            self.seen.update(ids)
        return batch

    def what_was_timed(self) -> str:
        if not self.total:
            return "the loader as it delivers, its read ids unknown: echoed batches would count as fresh"
        if not self.repeating:
            return "the loader alone: no batch repeated a read id"
        return (f"the loader's echo stage delivering, not its input: {self.repeating} of {self.total} timed batches "
                "repeated read ids; time the loader without its echo stage for R")


if __name__ == "__main__":
    sys.exit(main())
