"""The training input pipeline with its echo points, and the evaluation pipeline.

    records ─► read id ─► decode ─► shuffle ─►(E1)─► augment ─►(E2)─► batch ─►(E3)─► prefetch
                                           before        after augmentation   after
                                           augmentation  = before batching    batching

A workload supplies the stages (:class:`Stages`); the echo config chooses at most one echo point, each
followed by its optional shuffle buffer. With factor 1 (or placement none) no echo stage and no echo
shuffle are inserted, so the baseline is exactly the plain pipeline. With a tf.data service
(``data.service``), every stage before the echo point runs on the service's workers.
"""

import zlib
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional

import numpy as np
import tensorflow as tf

from echo_experiments.data.echo import CHUNK, echo

AUTOTUNE = tf.data.AUTOTUNE

# Which echo point each placement names.
POINT = {
    "before_augmentation": "E1",
    "after_augmentation": "E2",
    "before_batching": "E2",
    "after_batching": "E3",
}

Example = dict[str, tf.Tensor]
# Examples augmented together by a workload's augment_chunk.
AUGMENT_CHUNK = 64


@dataclass(frozen=True)
class Stages:
    """The workload's part of the pipeline.

    ``augment`` maps (example, stateless seed of shape [2]) to an example. ``augment_chunk`` does the
    same for a chunk of equally shaped examples at once (each augmented independently), which costs far
    less host time per example; a workload gives one of them, or neither when it has no augmentation.
    """

    decode: Callable[[Example], Example]
    augment: Optional[Callable[[Example, tf.Tensor], Example]] = None
    augment_chunk: Optional[Callable[[Example, tf.Tensor], Example]] = None


def stage_seed(seed: int, stage: str) -> int:
    """An independent, reproducible seed for one random stage of the pipeline."""
    return int(np.random.SeedSequence([seed, zlib.crc32(stage.encode())]).generate_state(1)[0])


@dataclass(frozen=True)
class Host:
    """Which share of the input this process reads: shard ``index`` of ``count``."""

    index: int = 0
    count: int = 1


@dataclass(frozen=True)
class Feed:
    """Where a run's training records come from."""

    # One epoch of records as read through the configured storage; None: the workload's own source.
    records: Optional[tf.data.Dataset] = None
    host: Host = Host()
    # A tf.data service (grpc://host:port) that runs the stages up to the shuffle on its workers.
    service: Optional[str] = None


def train_pipeline(records: tf.data.Dataset, stages: Stages, *, batch_size: int, shuffle_buffer: int,
                   echo_cfg: Any, seed: int, epochs: Optional[int] = None, host: Host = Host(),
                   service: Optional[str] = None) -> tf.data.Dataset:
    """Training batches, each with the ``read_id`` of every example in it; endless unless ``epochs`` is set.

    ``records`` is one epoch of source records; it is re-read (and may reorder its files) every epoch.
    ``echo_cfg`` has ``placement``, ``factor`` and ``shuffle_buffer``. With several hosts, each reads every
    ``host.count``-th record and makes batches of ``batch_size / host.count``; read ids stay unique across
    hosts. With a ``service``, every stage upstream of the echo point runs on the service's workers.
    """
    local_batch = batch_size // host.count
    if host.count > 1:
        records = records.shard(host.count, host.index)
    ds = records.repeat(epochs).enumerate().map(_plain(lambda i, r: {**r, "read_id": i * host.count + host.index}))
    ds = ds.map(_plain(stages.decode), num_parallel_calls=AUTOTUNE)
    ds = ds.shuffle(shuffle_buffer, seed=stage_seed(seed, "shuffle"))
    hand_over = _service_point(echo_cfg) if service else None
    ds = _from_service(ds, service, host, local_batch) if hand_over == "E1" else ds
    ds = _echo_point(ds, "E1", echo_cfg, seed)
    # Seeds are keyed on the position after E1, so the copies of an example echoed there augment differently.
    augment_seed = tf.constant(stage_seed(seed, "augment"), tf.int64)
    if stages.augment_chunk is not None:
        augment = _plain(stages.augment_chunk)
        ds = (ds.batch(AUGMENT_CHUNK).enumerate()
              .map(lambda i, x: augment(x, tf.stack([augment_seed, i])), num_parallel_calls=AUTOTUNE).unbatch())
    elif stages.augment is not None:
        augment = _plain(stages.augment)
        ds = ds.enumerate().map(lambda i, x: augment(x, tf.stack([augment_seed, i])), num_parallel_calls=AUTOTUNE)
    ds = _from_service(ds, service, host, local_batch) if hand_over == "E2" else ds
    ds = _echo_point(ds, "E2", echo_cfg, seed)
    ds = ds.batch(local_batch, drop_remainder=True)
    ds = _from_service(ds, service, host, local_batch, batched=True) if hand_over == "E3" else ds
    ds = _echo_point(ds, "E3", echo_cfg, seed)
    return ds.prefetch(AUTOTUNE).with_options(_options())


def _service_point(echo_cfg: Any) -> str:
    """Where a tf.data service hands the stream over: right before the echo stage (after batching when
    there is none), so the workers do all the reading, decoding and augmenting that echoing saves."""
    return POINT.get(echo_cfg.placement, "E3") if echo_cfg.factor != 1 else "E3"


def _from_service(ds: tf.data.Dataset, service: str, host: Host, local_batch: int,
                  batched: bool = False) -> tf.data.Dataset:
    """``ds`` run on the service's workers (each its own copy, ``parallel_epochs``), read back here.

    Every element a worker sends is a read of its own, so read ids are given here, in arrival order: the
    count of fresh examples stays exact however many workers there are."""
    ds = ds.apply(tf.data.experimental.service.distribute(processing_mode="parallel_epochs", service=service))
    if batched:
        rows = tf.range(local_batch, dtype=tf.int64)
        return ds.enumerate().map(lambda i, b: {**b, "read_id": (i * local_batch + rows) * host.count + host.index})
    return ds.enumerate().map(lambda i, x: {**x, "read_id": i * host.count + host.index})


def _options() -> tf.data.Options:
    options = tf.data.Options()
    # Parallelism comes from the stages' parallel calls; one thread per op keeps the pipeline from
    # spreading over every core at once and stalling the train step's own threads (as flax's examples do).
    options.threading.max_intra_op_parallelism = 1
    # Storage's Python calls hold no state the iterator must save: checkpoints may ignore them.
    options.experimental_external_state_policy = tf.data.experimental.ExternalStatePolicy.IGNORE
    return options


def _plain(fn: Callable) -> Callable:
    """Trace a stage as written: stages branch only on Python values, so autograph has nothing to convert."""
    return tf.autograph.experimental.do_not_convert(fn)


def _echo_point(ds: tf.data.Dataset, point: str, echo_cfg: Any, seed: int) -> tf.data.Dataset:
    if echo_cfg.factor == 1 or POINT.get(echo_cfg.placement) != point:
        return ds
    # A batch is already a chunk of examples: echo batches one at a time (see echo()).
    ds = echo(ds, float(echo_cfg.factor), stage_seed(seed, "echo"), chunk=1 if point == "E3" else CHUNK)
    if echo_cfg.shuffle_buffer > 0:
        ds = ds.shuffle(echo_cfg.shuffle_buffer, seed=stage_seed(seed, "echo_shuffle"))
    return ds


def eval_pipeline(examples: tf.data.Dataset, preprocess: Callable[[Example], Example], *, batch_size: int,
                  limit: Optional[int] = None) -> tf.data.Dataset:
    """Evaluation batches in a fixed order; the last may be short (see :func:`padded`)."""
    if limit is not None:
        examples = examples.take(limit)
    return examples.map(_plain(preprocess), num_parallel_calls=AUTOTUNE).batch(batch_size).prefetch(AUTOTUNE)


# Evaluation sets up to this size (decoded) stay in memory between evaluations.
EVAL_CACHE_BYTES = 1 << 30


def cached_if_small(batches: tf.data.Dataset, examples: Optional[int], bytes_per_example: int) -> tf.data.Dataset:
    """Keep evaluation batches after the first pass when the whole set fits in EVAL_CACHE_BYTES."""
    if examples and examples * bytes_per_example <= EVAL_CACHE_BYTES:
        return batches.cache()
    return batches


def padded(batches: tf.data.Dataset, batch_size: int) -> Iterator[dict[str, np.ndarray]]:
    """NumPy batches padded to ``batch_size`` with a ``mask`` (1 = real example), so eval compiles once."""
    for batch in batches.as_numpy_iterator():
        n = len(next(iter(batch.values())))
        out = {k: np.concatenate([v, np.zeros((batch_size - n,) + v.shape[1:], v.dtype)]) for k, v in batch.items()}
        out["mask"] = (np.arange(batch_size) < n).astype(np.float32)
        yield out
