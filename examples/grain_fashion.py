"""Data echoing in a training loop of your own: Flax + Optax on a Grain pipeline, Fashion-MNIST, echoed before
augmentation, with fresh examples counted and the learning-rate schedule and budget in fresh examples.

    python examples/grain_fashion.py --out runs/grain_fashion            # e = 2, 60,000 fresh examples
    python examples/grain_fashion.py --out runs/grain_fashion --factor 1  # the same without echoing
    python examples/grain_fashion.py --out runs/grain_auto --auto 4       # echo on stall, never past e = 4

It reads Debian's dataset-fashion-mnist (``make setup`` installs it). It checkpoints the model, the optimizer, the
Grain iterator and the fresh counter together with Orbax every ``--checkpoint-every`` steps; the same command
resumes from the newest checkpoint and trains exactly as if it had not stopped (tests/test_grain_example.py).
Evaluations are rows of metrics.jsonl in ``--out``. docs/your-model.md#grain gives the measured accuracy.

The pipeline, in the order a batch is made (``batches``): the records, shuffled each epoch, read ids where they are
read; your expensive upstream stages (here only scaling to [0, 1]); the echo stage, whose copies are shuffled apart
in windows; augmentation, a draw of its own for every copy; batching.

With ``--auto CAP`` there is no echo stage: the loop reads the batches through ``EchoOnStall`` (echo on stall,
echo_experiments.autopilot), which hands it copies of earlier examples, drawn from a pool, whenever the step in
flight is done and the loader has no batch ready, and the loop augments every batch it is given (each copy anew,
as before augmentation). Every run reads through it, the fixed factors at a cap of 1 (no copy: the same read-ahead
thread), so they differ in their copies alone. ``--read-us`` makes each record's read take that long (a slow store).
"""

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any, Optional

import flax.linen as nn
import grain
import jax
import jax.numpy as jnp
import numpy as np
import optax
import orbax.checkpoint as ocp
from absl import flags

from echo_experiments.autopilot import EchoOnStall
from echo_experiments.data.offline import FASHION_MNIST_DIR, read_idx
from echo_experiments.grain import FreshCounter, echo, window_size, with_read_ids


class Records:
    """A Grain data source: Fashion-MNIST's images (uint8, 28x28) and labels, one dict per index."""

    def __init__(self, prefix: str, read_s: float = 0.0):
        self.images = read_idx(FASHION_MNIST_DIR / f"{prefix}-images-idx3-ubyte.gz")
        self.labels = read_idx(FASHION_MNIST_DIR / f"{prefix}-labels-idx1-ubyte.gz").astype(np.int32)
        self.read_s = read_s  # what each read costs, as on a slow store

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> dict[str, np.ndarray]:
        if self.read_s:
            time.sleep(self.read_s)
        return {"image": self.images[index], "label": self.labels[index]}


def upstream(example: dict) -> dict:
    """The stages before the echo point: here scaling; in your pipeline the reading and decoding that are slow."""
    return {**example, "image": example["image"].astype(np.float32) / 255}


def augment(example: dict, rng: np.random.Generator) -> dict:
    """A random shift of up to 2 pixels and a random horizontal flip: each copy of an echoed example its own."""
    image = np.pad(example["image"], 2)
    dy, dx = rng.integers(0, 5, size=2)
    image = image[dy:dy + 28, dx:dx + 28]
    return {**example, "image": image[:, ::-1] if rng.random() < 0.5 else image}


def batches(factor: float, batch_size: int, seed: int, read_s: float = 0.0, auto: bool = False,
            workers: int = 0) -> grain.IterDataset:
    """The training stream: batches of ``batch_size`` examples, each fresh one echoed ``factor`` times; with
    ``auto``, neither echoed nor augmented (the loop's autopilot copies, and the loop augments: augment_batch).
    ``workers`` > 0: the pipeline runs in that many processes of its own (Grain's mp_prefetch), as a loader that
    must not hold the training loop's GIL does; 0: on the loop's reading thread."""
    ds = grain.MapDataset.source(Records("train", read_s)).shuffle(seed=seed).repeat()
    ds = with_read_ids(ds).map(upstream)  # read ids after repeat: a second epoch's reads are fresh again
    if auto:
        out = ds.to_iter_dataset().batch(batch_size, drop_remainder=True)
    else:
        ds = echo(ds, factor, seed=seed, window=window_size(factor, batch_size))
        out = ds.random_map(augment, seed=seed + 1).batch(batch_size, drop_remainder=True)
    if not workers:
        return out
    if not flags.FLAGS.is_parsed():  # Grain's workers read absl flags, which a script without absl.app never parses
        flags.FLAGS.mark_as_parsed()
    return out.mp_prefetch(grain.MultiprocessingOptions(num_workers=workers))


def augment_batch(batch: dict, rng: np.random.Generator) -> dict:
    """``augment`` for every example of a batch, in the loop (with --auto: a copy is augmented anew)."""
    images = np.pad(batch["image"], ((0, 0), (2, 2), (2, 2)))
    n = len(images)
    dy, dx = rng.integers(0, 5, size=(2, n))  # one shift and one flip per example, drawn at once
    rows = dy[:, None] + np.arange(28)
    cols = dx[:, None] + np.arange(28)
    cols = np.where(rng.random(n)[:, None] < 0.5, cols[:, ::-1], cols)
    return {**batch, "image": images[np.arange(n)[:, None, None], rows[:, :, None], cols[:, None, :]]}


class MLP(nn.Module):
    hidden: int = 256  # wider: a slower step, so less input-bound (a smaller R)

    @nn.compact
    def __call__(self, x):
        x = nn.relu(nn.Dense(self.hidden)(x.reshape((x.shape[0], -1))))
        return nn.Dense(10)(x)


def learning_rate(args: argparse.Namespace, fresh: int) -> float:
    """The schedule in fresh examples: linear warm-up over the first 5% of the budget, then cosine decay to 0."""
    warmup = 0.05 * args.fresh_examples
    if fresh < warmup:
        return args.learning_rate * fresh / warmup
    done = min(1.0, (fresh - warmup) / (args.fresh_examples - warmup))
    return args.learning_rate * 0.5 * (1 + math.cos(math.pi * done))


def make_steps(model: nn.Module, tx: optax.GradientTransformation):
    def train_step(state, batch, rate):
        def loss(params):
            logits = model.apply({"params": params}, batch["image"])
            return optax.softmax_cross_entropy_with_integer_labels(logits, batch["label"]).mean()
        value, grads = jax.value_and_grad(loss)(state["params"])
        opt_state = state["opt_state"]
        opt_state.hyperparams["learning_rate"] = rate
        updates, opt_state = tx.update(grads, opt_state, state["params"])
        return {"params": optax.apply_updates(state["params"], updates), "opt_state": opt_state}, value

    def correct(params, images, labels):
        return jnp.sum(model.apply({"params": params}, images).argmax(-1) == labels)
    return jax.jit(train_step), jax.jit(correct)


def accuracy(correct, params, test: Records, batch_size: int = 1000) -> float:
    images = test.images.astype(np.float32) / 255
    hits = sum(int(correct(params, images[i:i + batch_size], test.labels[i:i + batch_size]))
               for i in range(0, len(test), batch_size))
    return hits / len(test)


class Saved:
    """One checkpoint: the model and optimizer, the input (EchoOnStall's state: its counts and decisions, and the
    Grain iterator's own state before the batch it had read ahead), the read ids seen and the loop's counters."""

    def __init__(self, directory: Path):
        self.manager = ocp.CheckpointManager(
            directory.absolute() / "checkpoints", options=ocp.CheckpointManagerOptions(max_to_keep=2),
            item_handlers={"state": ocp.StandardCheckpointHandler(), "seen": ocp.StandardCheckpointHandler(),
                           "input": ocp.JsonCheckpointHandler(), "loop": ocp.JsonCheckpointHandler()})

    def save(self, step: int, state, reading: EchoOnStall, fresh: FreshCounter, loop: dict) -> None:
        self.manager.save(step, args=ocp.args.Composite(
            state=ocp.args.StandardSave(state), seen=ocp.args.StandardSave({"seen": fresh.seen}),
            input=ocp.args.JsonSave(reading.state()), loop=ocp.args.JsonSave(loop)))
        self.manager.wait_until_finished()

    def restore(self, state) -> Optional[tuple[Any, dict, FreshCounter, dict]]:
        step = self.manager.latest_step()
        if step is None:
            return None
        got = self.manager.restore(step, args=ocp.args.Composite(
            state=ocp.args.StandardRestore(state), seen=ocp.args.StandardRestore(),
            input=ocp.args.JsonRestore(), loop=ocp.args.JsonRestore()))
        return got.state, got.input, FreshCounter.from_seen(np.asarray(got.seen["seen"])), got.loop


class Metrics:
    """metrics.jsonl: a row per evaluation; rows after the step a run resumes from are dropped."""

    def __init__(self, directory: Path, resumed_at: int):
        self.path = directory / "metrics.jsonl"
        rows = [json.loads(line) for line in self.path.read_text().splitlines()] if self.path.exists() else []
        self.path.write_text("".join(json.dumps(r) + "\n" for r in rows if r["step"] <= resumed_at))

    def write(self, row: dict) -> None:
        with self.path.open("a") as f:
            f.write(json.dumps(row) + "\n")
        print(" ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items()), flush=True)


def train(args: argparse.Namespace) -> dict:
    """Train until ``args.fresh_examples`` fresh examples have been read; the last evaluation's row."""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    model, test = MLP(args.hidden), Records("t10k")
    tx = optax.inject_hyperparams(optax.sgd)(learning_rate=0.0, momentum=0.9)
    params = model.init(jax.random.PRNGKey(args.seed), jnp.zeros((1, 28, 28)))["params"]
    state = {"params": params, "opt_state": tx.init(params)}
    train_step, correct = make_steps(model, tx)
    saved = Saved(out)
    state, input_state, fresh, loop = saved.restore(state) or (
        state, None, FreshCounter(), {"step": 0, "next_eval": args.eval_every, "train_s": 0.0})
    # Every run reads through the autopilot: a fixed factor at a cap of 1 (the same read-ahead, no copy).
    reading = EchoOnStall(iter(batches(args.factor, args.batch_size, args.seed, args.read_us / 1e6, bool(args.auto),
                                       args.workers)),
                          max_factor=args.auto or 1.0, copies="examples" if args.auto else "batches", seed=args.seed,
                          name="the Grain pipeline", state=input_state)
    metrics, row, began = Metrics(out, loop["step"]), {}, time.perf_counter()
    while fresh.count < args.fresh_examples:
        if loop["step"] == args.stop_at_step:
            raise SystemExit(f"stopped at step {loop['step']} as --stop-at-step asked, without saving")
        batch = dict(next(reading))
        read_ids = batch.pop("read_id")
        if args.auto:  # no augmentation in the pipeline: each batch here, a copy anew
            batch = augment_batch(batch, np.random.default_rng((args.seed + 1, loop["step"])))
        rate = learning_rate(args, fresh.count)  # the schedule's position: fresh examples before this step
        fresh.update(read_ids)
        state, loss = train_step(state, batch, np.float32(rate))
        reading.step_in_flight(loss)
        loop["step"] += 1
        if fresh.count >= loop["next_eval"] or fresh.count >= args.fresh_examples:
            loop["next_eval"] += args.eval_every
            train_s = loop["train_s"] + time.perf_counter() - began  # training only: not the evaluation
            row = {"step": loop["step"], "fresh_examples": fresh.count, "examples": loop["step"] * args.batch_size,
                   "train_loss": float(loss), "accuracy": accuracy(correct, state["params"], test),
                   "train_s": train_s, "input_wait_share": reading.summary().input_wait_share}
            metrics.write(row)
            loop["train_s"], began = train_s, time.perf_counter()
        if loop["step"] % args.checkpoint_every == 0:
            saved.save(loop["step"], state, reading, fresh, loop)
    reading.close()
    saved.manager.close()
    return row


def parse(argv: Optional[list[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--out", required=True, help="the run's folder: metrics.jsonl and checkpoints/")
    p.add_argument("--factor", type=float, default=2.0, help="the echo factor e >= 1 (default 2)")
    p.add_argument("--fresh-examples", type=int, default=60_000, help="the budget, in fresh examples read")
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--learning-rate", type=float, default=0.1, help="the schedule's peak")
    p.add_argument("--eval-every", type=int, default=6_000, help="fresh examples between evaluations")
    p.add_argument("--checkpoint-every", type=int, default=100, help="steps between checkpoints")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--auto", type=float, default=None, metavar="CAP",
                   help="echo on stall (EchoOnStall) instead of --factor, no example trained more than CAP times")
    p.add_argument("--read-us", type=float, default=0.0, help="microseconds each record's read takes (a slow store)")
    p.add_argument("--hidden", type=int, default=256, help="the MLP's hidden width (a wider one steps slower)")
    p.add_argument("--workers", type=int, default=0,
                   help="processes that run the pipeline (Grain's mp_prefetch; 0: the loop's reading thread)")
    p.add_argument("--stop-at-step", type=int, default=None,
                   help="stop at this step without saving, as a killed run would (to try resuming)")
    args = p.parse_args(argv)
    if not args.factor >= 1 or args.fresh_examples < 1 or args.batch_size < 1 or args.checkpoint_every < 1:
        p.error("--factor must be >= 1, and --fresh-examples, --batch-size and --checkpoint-every >= 1")
    if args.auto is not None and not (args.auto >= 1 and args.factor == 2.0 and args.read_us >= 0):
        p.error("--auto CAP takes a cap >= 1 in place of --factor (leave --factor out)")
    if not args.read_us >= 0 or args.workers < 0 or args.hidden < 1:
        p.error("--read-us and --workers must be >= 0, --hidden >= 1")
    return args


def main() -> int:
    args = parse()
    if not FASHION_MNIST_DIR.is_dir():
        print(f"error: {FASHION_MNIST_DIR} is missing: install Debian's dataset-fashion-mnist (make setup)",
              file=sys.stderr)
        return 2
    try:
        train(args)
    except KeyboardInterrupt:  # the newest checkpoint stands; the same command resumes from it
        print(f"error: stopped; run the same command to resume from {args.out}/checkpoints", file=sys.stderr)
        return 130
    except OSError as e:
        print(f"error: {e.filename or args.out}: {e.strerror or e} (give --out a folder this user can write)",
              file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
