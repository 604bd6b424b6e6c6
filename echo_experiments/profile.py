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
from typing import Any, Callable, Iterator, Optional

import jax

from echo_experiments.cli.compose import compose_all, profile_overrides
from echo_experiments.cli.exits import fail, one_line_on_signal
from echo_experiments.cli.plan import check_command_line
from echo_experiments.core.schema import ConfigError
from echo_experiments.data.sources import DataMissing
from echo_experiments.training.timing import OtherWork, Timing, report_lines, seconds_per_call, upstream_s_per_batch
from echo_experiments.training.trainer import run


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
    with one_line_on_signal(lambda: "nothing is kept (the profile runs in a temporary folder): run it again"), \
            tempfile.TemporaryDirectory(prefix="echo_profile_") as out:
        try:
            summary = run(cfg, out)
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


def measure_loader(batches: Iterator[Any], step: Callable[[Any], Any], n: int = 20,
                   show: Optional[Callable[[str], Any]] = print) -> tuple[Timing, float]:
    """How input-bound a loader and a step are, as the profiler measures its own stream: upstream seconds per batch
    of ``batches`` alone (after 2 batches, over at least ``n`` and 2 s), seconds per ``step(batch)`` on one cached
    batch (a JAX result waited for; the step must not change what later calls compute, or pass a closure that
    keeps its state), and the idle share of ``n`` steps fed by the loader. Returns (Timing, idle share); ``show``
    gets the profiler's lines and its advice (None: nothing shown)."""
    up = upstream_s_per_batch(batches, n)
    batch = next(batches)
    timing = Timing(up, seconds_per_call(lambda: step(batch), n))
    others, began = OtherWork(), time.perf_counter()
    for _ in range(n):
        out = step(next(batches))
    jax.block_until_ready(out)
    elapsed = time.perf_counter() - began
    idle = timing.idle_fraction(n, elapsed)
    if show:
        show("\n".join(report_lines(timing, f"{idle:.2f} of {n} steps fed by the loader was spent waiting for it")))
        show(timing.advice(others.seconds() / max(elapsed, 1e-9)))
    return timing, idle


if __name__ == "__main__":
    sys.exit(main())
