"""Echo on stall measured side by side in one run, each run alone: the Grain example (examples/grain_fashion.py)
on a slow source (each record's read made to take --read-us, chosen so that R is about 6 here, R recorded), seconds
to a stated test accuracy for no echoing, fixed e = 2 and 4 (the Grain echo stage) and echo on stall (EchoOnStall,
cap 4: no example trained more often than the largest fixed factor allows), --seeds each, with each run's
data-loading share of its wall time and seconds per fresh example; then the wrapper's own cost per ``next()`` on a
loader that is always ready, against the bare iterator. Writes a Markdown table (--out) with the command.

    python examples/echo_on_stall_table.py --out results/echo_on_stall.md

Nothing else should run meanwhile: every number here is seconds.
"""

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import grain_fashion
import numpy as np

from echo_experiments.autopilot import EchoOnStall
from echo_experiments.core.machine import describe
from echo_experiments.profile import measure_loader

# Fresh examples between evaluations: the resolution of every seconds-to-target here.
EVAL_EVERY = 3000
CONDITIONS = [("no echoing", ["--factor", "1"]), ("e = 2", ["--factor", "2"]), ("e = 4", ["--factor", "4"]),
              ("echo on stall, cap 4", ["--auto", "4"])]


def profile(read_us: float, workers: int, hidden: int, batch: int = 128) -> float:
    """R of the example's pipeline without echoing at ``read_us`` per record against its step (measure_loader)."""
    import jax
    import jax.numpy as jnp
    import optax

    model, tx = grain_fashion.MLP(hidden), optax.inject_hyperparams(optax.sgd)(learning_rate=0.05, momentum=0.9)
    params = model.init(jax.random.PRNGKey(0), jnp.zeros((1, 28, 28)))["params"]
    state = {"params": params, "opt_state": tx.init(params)}
    train_step, _ = grain_fashion.make_steps(model, tx)
    batches = ({k: v for k, v in b.items() if k != "read_id"}
               for b in grain_fashion.batches(1.0, batch, 0, read_us / 1e6, workers=workers))
    timing, _ = measure_loader(batches, lambda b: train_step(state, b, np.float32(0.05))[1], n=20, show=None)
    return timing.ratio


def calibrate(target_r: float, workers: int, hidden: int, low: float = 4000.0, high: float = 12000.0
              ) -> tuple[float, float]:
    """The per-record read time that makes R about ``target_r``, from the line through two probes (Grain reads
    records on several threads, so below a few ms a record's read hides behind the pipeline's other work and R
    does not grow with it; above, it grows about linearly), and the R measured there."""
    r_low, r_high = profile(low, workers, hidden), profile(high, workers, hidden)
    read_us = max(0.0, low + (high - low) * (target_r - r_low) / max(r_high - r_low, 1e-9))
    return read_us, profile(read_us, workers, hidden)


def seconds_to(rows: list[dict], accuracy: float) -> float:
    """Training seconds at the first evaluation that reached ``accuracy`` (inf where none did)."""
    return next((r["train_s"] for r in rows if r["accuracy"] >= accuracy), float("inf"))


def one_run(extra: list[str], seed: int, read_us: float, fresh: int, accuracy: float, workers: int,
            hidden: int) -> dict:
    with tempfile.TemporaryDirectory() as out:
        args = grain_fashion.parse(["--out", out, "--seed", str(seed), "--read-us", f"{read_us:.1f}",
                                    "--fresh-examples", str(fresh), "--eval-every", str(EVAL_EVERY),
                                    "--checkpoint-every", str(10**9), "--workers", str(workers),
                                    "--hidden", str(hidden), *extra])
        grain_fashion.train(args)
        rows = [json.loads(line) for line in (Path(out) / "metrics.jsonl").read_text().splitlines()]
    reached = next((r for r in rows if r["accuracy"] >= accuracy), rows[-1])
    return {"seconds": seconds_to(rows, accuracy), "wait": reached["input_wait_share"],
            "per_fresh": reached["train_s"] / reached["fresh_examples"], "fresh": reached["fresh_examples"],
            "per_fresh_example": reached["examples"] / reached["fresh_examples"],
            "best": max(r["accuracy"] for r in rows)}


def overhead(n: int = 20_000) -> tuple[float, float, float]:
    """Microseconds per next() of a bare iterator over ready batches, of EchoOnStall at a cap of 1, and at 4."""
    items = [{"x": np.zeros(4)}] * n

    def timed(make) -> float:
        it = make()
        began = time.perf_counter()
        for _ in range(n):
            next(it)
        spent = time.perf_counter() - began
        getattr(it, "close", lambda: None)()
        return spent / n * 1e6
    return (timed(lambda: iter(items)), timed(lambda: EchoOnStall(items, max_factor=1)),
            timed(lambda: EchoOnStall(items, max_factor=4)))


def parse(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--r", type=float, default=6.0, help="the R the slow source is made for")
    p.add_argument("--accuracy", type=float, default=0.80, help="the stated test accuracy")
    p.add_argument("--fresh-examples", type=int, default=60_000)
    p.add_argument("--workers", type=int, default=1, help="processes that run the pipeline (0: the loop's thread)")
    p.add_argument("--hidden", type=int, default=4096,
                   help="the MLP's width: a step slow enough that R starts below --r")
    args = p.parse_args(argv)
    if args.seeds < 1 or not args.r > 1 or not 0 < args.accuracy < 1 or args.fresh_examples < EVAL_EVERY:
        p.error(f"--seeds must be >= 1, --r > 1, --accuracy between 0 and 1 and --fresh-examples >= {EVAL_EVERY}")
    if args.workers < 0 or args.hidden < 1:
        p.error("--workers must be >= 0 and --hidden >= 1")
    return args


def main(argv=None) -> int:
    args = parse(argv)
    read_us, r = calibrate(args.r, args.workers, args.hidden)
    rows = []
    for name, extra in CONDITIONS:
        for seed in range(args.seeds):
            result = one_run(extra, seed, read_us, args.fresh_examples, args.accuracy, args.workers, args.hidden)
            rows.append({"condition": name, "seed": seed, **result})
            print(name, seed, result, flush=True)
    bare, capped, auto = overhead()
    given = " ".join(sys.argv[1:] if argv is None else argv)
    lines = [f"Measured with `python examples/echo_on_stall_table.py {given}`"
             f" on {describe()['cpu']}, {describe()['cores']} cores, nothing else running; the MLP {args.hidden} wide,"
             f" the pipeline in {args.workers} worker process(es) (Grain's mp_prefetch); each record's read made to"
             f" take {read_us:.0f} us, R = {r:.1f} (the example's pipeline without echoing against its step,"
             f" measure_loader). Seconds of training to test accuracy {args.accuracy:g} (evaluations every"
             f" {EVAL_EVERY:,} fresh examples, within {args.fresh_examples:,}); every run reads through EchoOnStall,"
             " the fixed factors at a"
             " cap of 1 (the same read-ahead thread, no copy).", "",
             "| condition | seconds to target, per seed | median | data-loading share of wall time | seconds per "
             "fresh example (ms) | examples trained per fresh one | best accuracy |", "|---|---|---|---|---|---|---|"]
    for name, _ in CONDITIONS:
        mine = [r for r in rows if r["condition"] == name]
        seconds = [r["seconds"] for r in mine]
        lines.append(f"| {name} | {', '.join(f'{s:.1f}' for s in seconds)} | {statistics.median(seconds):.1f} | "
                     f"{statistics.median(r['wait'] for r in mine):.0%} | "
                     f"{statistics.median(r['per_fresh'] for r in mine) * 1e3:.2f} | "
                     f"{statistics.median(r['per_fresh_example'] for r in mine):.2f} | "
                     f"{statistics.median(r['best'] for r in mine):.3f} |")
    lines += ["", f"The wrapper's own cost per `next()` on a loader always ready ({20_000:,} batches): bare iterator "
              f"{bare:.2f} us, EchoOnStall at a cap of 1 {capped:.1f} us, at a cap of 4 {auto:.1f} us (its reading "
              "thread hands each batch over)."]
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
