"""Where the time goes: upstream (input pipeline) vs downstream (train step), their ratio R, and the echo
factor it suggests. ``python -m echo_experiments.profile [overrides]`` prints them for a config.

- upstream_s_per_batch: seconds per batch of the real input pipeline (storage included, no echoing),
  pulled with nothing downstream;
- downstream_s_per_step: seconds per train step of the real model on one cached batch;
- R = upstream / downstream: with e <= R the extra steps of echoing cost no time (the paper's model:
  time per upstream step = max(t_upstream, e * t_downstream));
- accelerator_idle_fraction: of a normal run's time after its first batch (once the shuffle buffer is
  full; ``startup_s`` is the time before it), the part spent neither in train steps nor in evaluation:
  1 - (steps * downstream_s_per_step + eval_time_s) / (elapsed_s - startup_s).

Every run measures the first two before it trains and writes all of them into its summary.json.
"""

import gc
import sys
import time
from dataclasses import asdict, dataclass
from types import SimpleNamespace
from typing import Any, Callable, Iterator, Optional

import jax
import numpy as np


@dataclass(frozen=True)
class Timing:
    upstream_s_per_batch: float
    downstream_s_per_step: float

    @property
    def ratio(self) -> float:
        return self.upstream_s_per_batch / self.downstream_s_per_step

    def recommended_echo_factor(self) -> float:
        """The largest e <= R (two decimals), at least 1: the most echoing that is still free."""
        return max(1.0, float(np.floor(self.ratio * 100) / 100))

    def idle_fraction(self, steps: int, elapsed_s: float, busy_s: float = 0.0) -> float:
        """Of ``elapsed_s``, the share neither in train steps nor in other accelerator work (``busy_s``)."""
        if elapsed_s <= 0:
            return 0.0
        return float(min(1.0, max(0.0, 1 - (steps * self.downstream_s_per_step + busy_s) / elapsed_s)))

    def as_dict(self) -> dict[str, float]:
        return {**asdict(self), "upstream_downstream_ratio": self.ratio,
                "recommended_echo_factor": self.recommended_echo_factor()}


def upstream_s_per_batch(batches: Iterator[Any], n: int, warmup: int = 2, min_seconds: float = 2.0) -> float:
    """Mean seconds per batch of an input stream after ``warmup`` batches (the shuffle buffer fills), over at
    least ``n`` batches and ``min_seconds``: packing text delivers thousands of sequences in a burst, and
    batches that piled up in prefetch buffers must not pass for the pipeline's rate."""
    for _ in range(warmup):
        next(batches)
    began = time.perf_counter()
    count = 0
    while count < n or time.perf_counter() - began < min_seconds:
        next(batches)
        count += 1
    return (time.perf_counter() - began) / count


def downstream_s_per_step(step: Callable, state: Any, batch: Any, n: int, warmup: int = 2, blocks: int = 5) -> float:
    """Seconds per train step on one cached batch: the median over ``blocks`` blocks of ``n`` steps (step
    times on a shared CPU vary by 10-20% from block to block). The step donates its state: a copy is used."""
    state = jax.tree.map(lambda x: x.copy(), state)
    for _ in range(warmup):
        state, loss = step(state, batch)
    jax.block_until_ready(loss)
    times = []
    for _ in range(blocks):
        began = time.perf_counter()
        for _ in range(n):
            state, loss = step(state, batch)
        jax.block_until_ready(loss)
        times.append((time.perf_counter() - began) / n)
    return float(np.median(times))


def measure(workload: Any, feed: Any, cfg: Any, step: Callable, state: Any, n: int) -> Timing:
    """Both rates for a run's config: the pipeline (fed by ``feed``) without echoing, and the compiled step."""
    plain = SimpleNamespace(placement="none", factor=1.0, shuffle_buffer=0)
    stream = workload.train_batches(plain, cfg.seed, feed).as_numpy_iterator()
    up = upstream_s_per_batch(stream, n)
    batch = next(stream)
    batch.pop("read_id")
    del stream  # stops the pipeline's threads, which would otherwise share the cores with the timed steps
    gc.collect()
    return Timing(up, downstream_s_per_step(step, state, batch, n))


def main(argv: Optional[list[str]] = None) -> int:
    """Profile a config: a short normal run with its timing facts, printed with the recommendation."""
    import tempfile

    from echo_experiments.__main__ import fail
    from echo_experiments.config import ConfigError
    from echo_experiments.data.sources import DataMissing
    from echo_experiments.preflight import check_command_line, compose_all
    from echo_experiments.train import run

    argv = list(sys.argv[1:] if argv is None else argv)
    given = {a.split("=", 1)[0] for a in argv}
    defaults = {"trainer.max_steps": 200, "trainer.stop_at_target": "false", "trainer.progress": "false"}
    overrides = [f"{k}={v}" for k, v in defaults.items() if k not in given] + argv
    error = check_command_line(overrides)
    if error:
        fail(error)
    cfg = next(iter(compose_all(overrides, multirun=False)))
    with tempfile.TemporaryDirectory(prefix="echo_profile_") as out:
        try:
            summary = run(cfg, out)
        except (ConfigError, DataMissing) as e:
            fail(str(e))
    timing = Timing(summary["upstream_s_per_batch"], summary["downstream_s_per_step"])
    print(f"upstream    {timing.upstream_s_per_batch:.4f} s per batch (input pipeline alone, no echoing)")
    print(f"downstream  {timing.downstream_s_per_step:.4f} s per step (train step on a cached batch)")
    print(f"R           {timing.ratio:.2f}")
    print(f"idle        {summary['accelerator_idle_fraction']:.2f} of a {summary['steps']}-step run's training "
          f"time was not spent in train steps (after {summary['startup_s']:.1f} s to the first batch)")
    print(f"recommended echo factor: {timing.recommended_echo_factor():g} (the largest e <= R)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
