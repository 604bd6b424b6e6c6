"""The measurements of ``python -m echo_experiments.benchmark`` (the command's docstring says what each table
holds): the echo stage's delivery and its own cost, the Grain stage's, the trainer's loop against a bare one, and a
trial's step and evaluation."""


import itertools
import tempfile
import time
from dataclasses import replace

import jax
import numpy as np
import pandas as pd
import tensorflow as tf
from omegaconf import OmegaConf

from echo_experiments.core.fresh import FreshCounter
from echo_experiments.core.placement import NO_ECHO, EchoSpec, Placement
from echo_experiments.core.rundir import RunDir
from echo_experiments.core.specs import PipelineSpec, RunSpec, StorageSpec
from echo_experiments.data import stream
from echo_experiments.data.echo import CHUNK, echo
from echo_experiments.data.sources import data_dir
from echo_experiments.data.storage import Store
from echo_experiments.training import optim, parallel, timing
from echo_experiments.training.step import initial_state, learning_rates, make_train_step
from echo_experiments.training.trainer import Trainer
from echo_experiments.workloads import make

POINTS = ("before_augmentation", "after_augmentation", "after_batching")
# The input-bound storage of the wall-clock experiment (experiment=wall_clock_cpu).
SLOW = {"kind": "emulated", "latency_ms": 10.0, "parallel_reads": 4}


def delivery(cfg, workload, store, placement: str, factor: float, batches: int) -> tuple[float, float]:
    """(delivered items/s, fresh items/s) of the pipeline alone in its steady state: after the shuffle
    buffer has filled and the batches that piled up in the prefetch buffers meanwhile are drained."""
    pipeline = replace(PipelineSpec.from_config(cfg), echo=EchoSpec(Placement(placement), factor, shuffle_buffer=0))
    delivered_batches = stream.build(workload, pipeline, store=store).as_numpy_iterator()
    for _ in range(max(10, batches // 3)):
        next(delivered_batches)
    counter = FreshCounter()
    began = time.perf_counter()
    delivered = 0
    for batch in itertools.islice(delivered_batches, batches):
        counter.update(batch["read_id"])
        delivered += len(batch["read_id"])
    seconds = time.perf_counter() - began
    return delivered / seconds, counter.count / seconds


def _cached_batches(cfg, workload, echo_spec: EchoSpec) -> dict[str, np.ndarray]:
    """The pipeline's first 32 batches, stacked: [32, batch, ...] per key."""
    pipeline = replace(PipelineSpec.from_config(cfg), echo=echo_spec)
    cached = list(itertools.islice(stream.build(workload, pipeline).as_numpy_iterator(), 32))
    return {k: np.stack([b[k] for b in cached]) for k in cached[0]}


def echo_table(cfg, workload, repeats: int, batches: int) -> pd.DataFrame:
    rows = []
    configured = StorageSpec.from_config(cfg.storage)
    for storage_name, storage in (("input-bound", replace(configured, **SLOW)),
                                  ("local", replace(configured, kind="local"))):
        with Store(storage, workload.train_source) as store:
            conditions = [("none", 1.0)] + [(p, e) for p in POINTS for e in (2.0, 4.0)]
            samples = {c: [] for c in conditions}
            for _ in range(repeats):  # interleaved, so drift in the machine's speed hits every condition alike
                for placement, factor in conditions:
                    samples[(placement, factor)].append(
                        delivery(cfg, workload, store, placement, factor, int(batches * factor)))
            plain = np.median([d for d, _ in samples[("none", 1.0)]])
            for (placement, factor), values in samples.items():
                delivered = float(np.median([d for d, _ in values]))
                rows.append({"storage": storage_name, "placement": placement, "echo_factor": factor,
                             "delivered_items_per_s": delivered,
                             "fresh_items_per_s": float(np.median([f for _, f in values])),
                             "efficiency": delivered / (factor * plain)})
    return pd.DataFrame(rows)


def _seconds_per_item(ds: tf.data.Dataset, elements: int, items_per_element: int) -> float:
    """Seconds per item to pull ``elements`` elements through ``ds`` inside tf.data. Single examples are
    counted in batches, as the pipeline batches them, so no per-element Python or reduce step is timed."""
    ds = ds.take(elements)
    if items_per_element == 1:
        ds = ds.batch(256)
    ds.reduce(np.int64(0), lambda n, _: n + 1)  # warm: threads, first allocations
    began = time.perf_counter()
    ds.reduce(np.int64(0), lambda n, _: n + 1)
    return (time.perf_counter() - began) / (elements * items_per_element)


def echo_stage_table(cfg, workload, repeats: int, plain_local_items_per_s: float) -> pd.DataFrame:
    """The echo stage's own cost per delivered item: delivering N items through the echo stage from memory
    minus delivering N items from memory without it, over N. Beside it the paper's one-dataset-per-element
    idiom (flat_map), which the chunked stage replaces."""
    stacked = _cached_batches(cfg, workload, NO_ECHO)
    batch_size = stacked["read_id"].shape[1]
    examples = {k: v.reshape((-1,) + v.shape[2:]) for k, v in stacked.items()}
    # What each echo point repeats: single examples (E1, E2) or whole batches (E3), chunked as the pipeline does.
    streams = {"examples": (examples, CHUNK, 1, 512 * batch_size), "batches": (stacked, 1, batch_size, 512)}
    rows = []
    for name, (arrays, chunk, per_element, elements) in streams.items():
        source = tf.data.Dataset.from_tensor_slices(arrays).cache().repeat()
        for factor in (2.0, 4.0):
            variants = [("echo stage", echo(source, factor, seed=cfg.seed, chunk=chunk))]
            if chunk > 1:  # batches are echoed with the idiom itself
                variants.append(("flat_map idiom", source.flat_map(
                    lambda x, e=int(factor): tf.data.Dataset.from_tensors(x).repeat(e))))
            for stage, echoed in variants:
                costs = [_seconds_per_item(echoed, elements, per_element)
                         - _seconds_per_item(source, elements, per_element) for _ in range(repeats)]
                cost = float(np.median(costs))
                rows.append({"echoed": name, "implementation": stage, "echo_factor": factor,
                             "echo_us_per_item": 1e6 * cost,
                             "plain_local_pipeline_us_per_item": 1e6 / plain_local_items_per_s,
                             "share": cost * plain_local_items_per_s})
    return pd.DataFrame(rows)


def runner_table(cfg, workload, repeats: int, steps: int) -> pd.DataFrame:
    cached = _cached_batches(cfg, workload, EchoSpec.from_config(cfg.echo))
    batches = tf.data.Dataset.from_tensor_slices(cached).repeat()
    run_cfg = OmegaConf.merge(cfg, {"trainer": {"max_steps": steps, "eval_every_fresh_examples": 10**12,
                                                "profile_batches": 0, "progress": False, "stop_at_target": False,
                                                "checkpoint_every_seconds": 0}})
    spec = RunSpec.from_config(run_cfg)
    # The autopilot over an input that is always ready (the local case): what deciding costs when it copies nothing.
    auto = RunSpec.from_config(OmegaConf.merge(run_cfg, {"echo": {"placement": "after_batching", "factor": "auto"}}))
    tx = optim.optimizer(spec.optimizer)
    # Compiled as the trainer compiles it, donated state included; the learning rate at the schedule's start.
    step = jax.jit(make_train_step(workload, tx, workload.compute_dtype), donate_argnums=0)
    at_start = learning_rates(optim.schedule(spec.schedule))(np.int32(0))
    runner, autopilot, bare = [], [], []
    for _ in range(repeats):
        for run_spec, rates in ((spec, runner), (auto, autopilot)):
            with tempfile.TemporaryDirectory() as out:
                mesh = parallel.setup(run_spec.parallel, run_spec.pipeline.batch_size)
                summary = Trainer(run_spec, workload, RunDir(out), mesh, batches).fit()
            rates.append(summary["steps"] / (summary["wall_time_s"] - summary["startup_s"]))
        state = initial_state(workload, tx, int(cfg.seed), None)  # anew each repeat: the step donates it
        stream = batches.as_numpy_iterator()
        first = next(stream)
        first.pop("read_id")
        state, loss = step(state, first, at_start)
        jax.block_until_ready(loss)
        began = time.perf_counter()
        for batch in itertools.islice(stream, steps - 1):
            batch.pop("read_id")
            state, loss = step(state, batch, at_start)
        jax.block_until_ready(loss)
        bare.append((steps - 1) / (time.perf_counter() - began))
    r, a, b = float(np.median(runner)), float(np.median(autopilot)), float(np.median(bare))
    return pd.DataFrame([{"loop": "bare jitted loop", "steps_per_s": b, "relative": 1.0},
                         {"loop": "trainer (fit)", "steps_per_s": r, "relative": r / b},
                         {"loop": "trainer (fit), echo.factor=auto after batching", "steps_per_s": a,
                          "relative": a / b}])


def _grain_seconds(ds, items: int, per_element: int) -> float:
    """Seconds to pull ``items`` items through a Grain dataset's iterator (after 64 warm elements)."""
    iterator = iter(ds)
    for _ in range(64):
        next(iterator)
    began = time.perf_counter()
    for _ in range(round(items / per_element)):
        next(iterator)
    return time.perf_counter() - began


def grain_table(cfg, workload, repeats: int, items: int = 16_384) -> pd.DataFrame:
    """The Grain echo stage's own cost per delivered item (echo_experiments.grain): delivering ``items`` decoded
    examples from memory through the stage, less delivering the items / e fresh ones it copies without it, over
    ``items`` (Grain's own cost per element upstream is far above the stage's, so taking ``items`` fresh ones off
    would hide the stage's cost); against the same Grain pipeline without echoing that reads the stored PNG records
    and decodes them (PIL), batched."""
    import io

    import grain
    from PIL import Image

    from echo_experiments.data import grain_echo

    def decode(record: dict) -> dict:
        return {**record, "image": np.asarray(Image.open(io.BytesIO(record["image"])))}
    stored = [{"image": r["image"], "label": r["label"]}
              for r in workload.train_source.encoded(cfg.seed).take(2048).as_numpy_iterator()]
    decoded = [decode(r) for r in stored]
    batch = cfg.workload.batch_size
    reading = grain_echo.with_read_ids(grain.MapDataset.source(stored).repeat().map(decode)).to_iter_dataset() \
        .batch(batch)
    pipeline_s = float(np.median([_grain_seconds(reading, items, batch) / items for _ in range(repeats)]))
    memory = grain_echo.with_read_ids(grain.MapDataset.source(decoded).repeat())
    streams = {"examples": (memory, 1), "batches": (memory.batch(batch), batch)}
    rows = []
    for name, (source, per_element) in streams.items():
        for factor in (1.5, 2.0, 4.0):
            echoed = grain_echo.echo(source, factor, seed=cfg.seed)
            plain = source.to_iter_dataset()
            costs = [(_grain_seconds(echoed, items, per_element) - _grain_seconds(plain, items / factor, per_element))
                     / items for _ in range(repeats)]
            cost = float(np.median(costs))
            rows.append({"echoed": name, "echo_factor": factor, "echo_us_per_item": 1e6 * cost,
                         "plain_grain_pipeline_us_per_item": 1e6 * pipeline_s, "share": cost / pipeline_s})
    return pd.DataFrame(rows)


def trial_table(cfg, workload, repeats: int) -> pd.DataFrame:
    spec = RunSpec.from_config(cfg)
    tx = optim.optimizer(spec.optimizer)
    step = jax.jit(make_train_step(workload, tx, workload.compute_dtype), donate_argnums=0)
    at_start = learning_rates(optim.schedule(spec.schedule))(np.int32(0))
    batch = {k: v[0] for k, v in _cached_batches(cfg, workload, NO_ECHO).items() if k != "read_id"}
    state = initial_state(workload, tx, int(cfg.seed), None)
    step_s = timing.downstream_s_per_step(lambda s, b: step(s, b, at_start), state, batch, 20, blocks=max(5, repeats))
    steps_between = cfg.trainer.eval_every_fresh_examples / cfg.workload.batch_size  # without echoing
    rows = []
    for size in sorted({int(cfg.workload.eval_batch_size), 32, 128}):
        sized = make(OmegaConf.merge(cfg.workload, {"eval_batch_size": size}), data_dir(cfg.data.dir),
                     workload.compute_dtype)
        # The first call compiles it and fills the evaluation cache; then the median of ``repeats``.
        eval_s = timing.seconds_per_call(lambda: sized.evaluate(state.params, state.model_state), 1, warmup=1,
                                         blocks=repeats)
        rows.append({"eval_batch_size": size, "train_step_s": step_s, "evaluation_s": eval_s,
                     "evaluation_share": eval_s / (eval_s + steps_between * step_s)})
    return pd.DataFrame(rows)


def measure(cfg, workload, args, order: tuple[str, ...]) -> list[tuple[str, pd.DataFrame]]:
    """The tables ``args.tables`` chooses, in ``order`` (the echo stage's own cost is set against the echo table's
    plain local pipeline, so it measures that table too), each with its name."""
    out = {}
    if {"echo", "stage"} & set(args.tables):
        out["echo"] = echo_table(cfg, workload, args.repeats, args.batches)
    if "stage" in args.tables:
        echo = out["echo"]
        plain_local = echo[(echo.storage == "local") & (echo.placement == "none")].delivered_items_per_s.iloc[0]
        out["stage"] = echo_stage_table(cfg, workload, args.repeats, plain_local)
    if "grain" in args.tables:
        out["grain"] = grain_table(cfg, workload, args.repeats)
    if "loop" in args.tables:
        out["loop"] = runner_table(cfg, workload, args.repeats, args.steps)
    if "trial" in args.tables:
        out["trial"] = trial_table(cfg, workload, args.repeats)
    return [(name, out[name]) for name in order if name in out and name in args.tables]
