"""Echo on stall in a plain Python training loop: a generator that is slow to make each batch (as a slow store or
decoder is), a JAX step, and EchoOnStall between them, which hands the loop copies of recent batches while the
step would otherwise wait, never training a batch more than --cap times.

    python examples/plain_loop.py              # the autopilot, cap 4
    python examples/plain_loop.py --cap 1      # the same loop with no copy: it waits for every batch
"""

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

from echo_experiments.autopilot import EchoOnStall


def slow_batches(n: int, read_s: float, seed: int = 0):
    """``n`` batches of a noisy linear problem, each ``read_s`` seconds to make."""
    rng, w = np.random.default_rng(seed), np.arange(1.0, 9.0)
    for _ in range(n):
        time.sleep(read_s)
        x = rng.normal(size=(64, 8)).astype(np.float32)
        yield {"x": x, "y": (x @ w + rng.normal(scale=0.1, size=64)).astype(np.float32)}


@jax.jit
def step(w, batch):
    loss, grad = jax.value_and_grad(lambda w: jnp.mean((batch["x"] @ w - batch["y"]) ** 2))(w)
    return w - 0.01 * grad, loss


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cap", type=float, default=4.0, help="the most times a batch is trained (1: no copies)")
    p.add_argument("--batches", type=int, default=200, help="fresh batches to read")
    p.add_argument("--read-ms", type=float, default=5.0, help="milliseconds to make each batch")
    args = p.parse_args(argv)
    w, began = jnp.zeros(8), time.perf_counter()
    with EchoOnStall(slow_batches(args.batches, args.read_ms / 1000), max_factor=args.cap) as loop:
        for batch in loop:
            w, loss = step(w, batch)
            loop.step_in_flight(loss)  # copies wait until this step is done
        print(f"{loop.summary()}; loss {float(loss):.4f} after {time.perf_counter() - began:.1f} s")


if __name__ == "__main__":
    main()
