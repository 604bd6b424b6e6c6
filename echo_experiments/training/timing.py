"""Where the time goes: upstream (input pipeline) vs downstream (train step), their ratio R, and the echo
factor it suggests (``python -m echo_experiments.profile [overrides]`` prints them for a config).

- upstream_s_per_batch: seconds per batch of the real input pipeline (storage included, no echoing),
  pulled with nothing downstream;
- downstream_s_per_step: seconds per train step of the real model on one cached batch;
- R = upstream / downstream: with e <= R the extra steps of echoing cost no time (the paper's model:
  time per upstream step = max(t_upstream, e * t_downstream));
- accelerator_idle_fraction: of a normal run's time after its first batch (once the shuffle buffer is
  full; ``startup_s`` is the time before it), the part spent neither in train steps nor in evaluation:
  1 - (steps * downstream_s_per_step + eval_time_s) / (elapsed_s - startup_s);
- other_cores: the mean number of cores that other processes kept busy while the run trained (OtherWork). A
  timed run that shared the machine measured the other work too (docs/protocol.md: such runs do not count).
- input_slowdown: per evaluation, the seconds of training per fresh batch since the evaluation before over
  upstream_s_per_batch (input_slowdown below); the record's is its median. Where the input bounds the run it is
  what its steps, copies included, cost the input on this host: 1 where they cost it nothing (an accelerator
  host), 1.1 where they take a tenth; where the steps bound it, it is their time instead.

Every run measures the first two before it trains and writes all of them into its summary.json. JAX and the
input pipeline are imported by the functions that measure: :class:`Timing` and its words need neither, so the
commands' --help and the comparison's table answer without them.
"""

import gc
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, Iterator, Optional

import numpy as np
import psutil

from echo_experiments.core.input_bound import in_words, wait_share, xprof_class
from echo_experiments.core.machine import SHARED_CORES
from echo_experiments.core.specs import PipelineSpec

# The most echoing advised, whatever R: past 8 a further copy was worth under a fifth of a fresh example wherever
# this project measured it, and most where copies pay most (the language model's example echoing, whose k-th copy
# fits exp(-k / 4.65): the 8th is worth 0.18, the 16th 0.03; docs/your-model.md, "What a copy is worth"). At R
# beyond it, the input is the bottleneck by far more than copies can make up for.
MAX_ADVISED = 8.0


@dataclass(frozen=True)
class Timing:
    upstream_s_per_batch: float
    downstream_s_per_step: float

    @property
    def ratio(self) -> float:
        return self.upstream_s_per_batch / self.downstream_s_per_step

    def recommended_echo_factor(self) -> float:
        """The largest e <= R (two decimals), at least 1 and at most MAX_ADVISED: the most echoing that is still
        free, within what a copy is worth."""
        return min(MAX_ADVISED, max(1.0, float(np.floor(self.ratio * 100) / 100)))

    def bound(self) -> str:
        """Why the recommendation is below R, where it is (else nothing)."""
        if self.ratio <= MAX_ADVISED:
            return ""
        return (f"; not R: past e={MAX_ADVISED:g} a further copy was worth under a fifth of a fresh example wherever "
                "it was measured (docs/your-model.md, 'What a copy is worth'), and at this R the input needs a "
                "faster source more than copies")

    def predicted_speedup(self, factor: float) -> float:
        """Seconds to target without echoing over with it at ``factor``, if every echoed example were worth a
        fresh one (the paper's model): max(1, min(e, R)). The measured fresh-example ratio says how much less."""
        return max(1.0, min(factor, self.ratio))

    def advice(self, other_cores: Optional[float] = None, busy: float = SHARED_CORES) -> str:
        """What to do with the numbers, in words; a warning when other processes kept more than ``busy`` cores
        busy while they were measured (R moves with the machine's load). The advice rests on what was measured
        here; the autopilot's evidence against fixed factors is the project's README table, not read here."""
        if self.ratio < 1:
            text = (f"advice: not input-bound (R = {self.ratio:.2f} < 1): the step, not the input, is the "
                    "bottleneck, so echoing will not save time")
        else:
            text = (f"advice: input-bound by R = {self.ratio:.2f}: try echo.factor={self.recommended_echo_factor():g}"
                    " (or echo.factor=auto, which copies only while the step would wait: the README's table 'The "
                    "autopilot' says how it fared against fixed factors) and compare seconds (and fresh examples) "
                    "to target with the baseline on the same fresh-example schedule (python -m "
                    "echo_experiments.compare does; docs/your-model.md)")
        if other_cores is not None and other_cores > busy:
            text += (f"\nwarning: other processes kept {other_cores:.2f} cores busy while this measured: R moves "
                     "with the machine's load; measure again when it is idle")
        return text

    def idle_fraction(self, steps: int, elapsed_s: float, busy_s: float = 0.0) -> float:
        """Of ``elapsed_s``, the share neither in train steps nor in other accelerator work (``busy_s``)."""
        if elapsed_s <= 0:
            return 0.0
        return float(min(1.0, max(0.0, 1 - (steps * self.downstream_s_per_step + busy_s) / elapsed_s)))

    def input_slowdown(self, wall_s: float, fresh_batches: float) -> Optional[float]:
        """Seconds of training per fresh batch over the input's alone (None over no fresh batch)."""
        return wall_s / fresh_batches / self.upstream_s_per_batch if fresh_batches > 0 else None

    @property
    def wait_share(self) -> Optional[float]:
        """The share of a step's wall time spent waiting for input without echoing (core/input_bound.py)."""
        return wait_share(self.ratio)

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "upstream_downstream_ratio": self.ratio,
                "recommended_echo_factor": self.recommended_echo_factor(), "input_wait_share": self.wait_share,
                "input_bound": xprof_class(self.wait_share)}


class OtherWork:
    """CPU seconds the rest of the machine used since this was made: the machine's busy CPU time (psutil, all but
    idle and I/O wait; steal included, a hypervisor's other guests slow a run as much) less this process's own
    (its threads and the children it has reaped). ``carried_s`` is what an earlier part of a resumed run used."""

    def __init__(self, carried_s: float = 0.0):
        self.carried_s = carried_s
        self._began = self._sample()

    @staticmethod
    def _sample() -> tuple[float, float]:
        machine = psutil.cpu_times()
        fields = machine._asdict()
        # On Linux guest time is already inside user and nice time: counting it again would invent work.
        busy = sum(fields.values()) - sum(fields.get(k, 0.0) for k in ("idle", "iowait", "guest", "guest_nice"))
        own = psutil.Process().cpu_times()
        return busy, own.user + own.system + own.children_user + own.children_system

    def seconds(self) -> float:
        busy, own = self._sample()
        # Clipped at 0: the machine's counters tick in 10 ms steps, this process's in finer ones.
        return self.carried_s + max(0.0, (busy - self._began[0]) - (own - self._began[1]))


def upstream_s_per_batch(batches: Iterator[Any], n: int, warmup: int = 2, min_seconds: float = 2.0,
                         pull: Callable[[Callable[[], Any]], Any] = lambda fn: fn()) -> float:
    """Mean seconds per batch of an input stream after ``warmup`` batches (the shuffle buffer fills), over at
    least ``n`` batches and ``min_seconds``: packing text delivers thousands of sequences in a burst, and
    batches that piled up in prefetch buffers must not pass for the pipeline's rate. ``pull`` makes each call
    into the stream (the trainer's bounds it by data.timeout_s)."""
    for _ in range(warmup):
        pull(batches.__next__)
    began = time.perf_counter()
    count = 0
    while count < n or time.perf_counter() - began < min_seconds:
        pull(batches.__next__)
        count += 1
    return (time.perf_counter() - began) / count


def seconds_per_call(call: Callable[[], Any], n: int, warmup: int = 2, blocks: int = 5) -> float:
    """Seconds per ``call()``, waited for (JAX's asynchronous results included): the median over ``blocks``
    blocks of ``n`` calls (step times on a shared CPU vary by 10-20% from block to block)."""
    import jax

    for _ in range(warmup):
        jax.block_until_ready(call())
    times = []
    for _ in range(blocks):
        began = time.perf_counter()
        for _ in range(n - 1):
            call()
        jax.block_until_ready(call())
        times.append((time.perf_counter() - began) / n)
    return float(np.median(times))


def downstream_s_per_step(step: Callable, state: Any, batch: Any, n: int, warmup: int = 2, blocks: int = 5) -> float:
    """Seconds per train step on one cached batch (seconds_per_call). The step donates its state: a copy is used,
    and each step takes the state the last one returned."""
    import jax

    held = [jax.tree.map(lambda x: x.copy(), state)]

    def one_step():
        held[0], loss = step(held[0], batch)
        return loss
    return seconds_per_call(one_step, n, warmup, blocks)


def report_lines(timing: Timing, idle: str, upstream: str = "input pipeline alone, no echoing") -> list[str]:
    """What the profiler prints for a stream and a step: the two rates (``upstream``: what the first one timed),
    R, the idle share (``idle``, in words), the recommended factor and the speedup the paper's model predicts at it."""
    e = timing.recommended_echo_factor()
    return [f"upstream    {timing.upstream_s_per_batch:.4f} s per batch ({upstream})",
            f"downstream  {timing.downstream_s_per_step:.4f} s per step (train step on a cached batch)",
            f"R           {timing.ratio:.2f}: {in_words(timing.wait_share)} without echoing",
            f"idle        {idle}",
            f"recommended echo factor: {e:g} (the largest e <= R, at most {MAX_ADVISED:g}{timing.bound()})",
            f"predicted   speedup over no echoing at e={e:g}: {timing.predicted_speedup(e):.2f}, if every echoed "
            "example were worth a fresh one (python -m echo_experiments.compare measures it)"]


def measure(workload: Any, pipeline: PipelineSpec, store: Any, host: Any, step: Callable, state: Any,
            n: int, pull: Callable[[Callable[[], Any]], Any] = lambda fn: fn()) -> Timing:
    """Both rates for a run: its pipeline through ``store`` without echoing, and the compiled step; ``pull``
    makes each call into the pipeline (see upstream_s_per_batch)."""
    from echo_experiments.data import stream

    batches = stream.build(workload, pipeline.without_echo(), store=store, host=host).as_numpy_iterator()
    up = upstream_s_per_batch(batches, n, pull=pull)
    batch = pull(batches.__next__)
    batch.pop("read_id")
    del batches  # stops the pipeline's threads, which would otherwise share the cores with the timed steps
    gc.collect()
    return Timing(up, downstream_s_per_step(step, state, batch, n))

