"""The training stream, built in one place from what a workload declares, and the evaluation batches.

    source ─► read cost ─► examples ─► read id ─► decode ─► shuffle ─►(E1)─► augment ─►(E2)─► batch ─►(E3)─► prefetch
    (TFDS)    (storage)    (task hook:                                before        after aug.    after
                            LM packing)                               augmentation  = before      batching
                                                                                    batching

:func:`build` reads top to bottom like the picture. The workload supplies its sources, its ``examples``
hook, ``decode`` and augmentation; everything about echoing (the echo stage at the one point
``echo.placement`` names, the shuffle after it), the shuffles, batching, read ids, hosts and the tf.data
service is added here and nowhere else. With factor 1 no echo stage and no echo shuffle are inserted, so
the baseline is exactly the plain pipeline. With the autopilot (``echo.factor=auto``) the trainer echoes
instead (autopilot.py); before augmentation the stream then leaves the augmentation to it. The trainer, the
profiler, the benchmark and the service all build their streams with it.
"""

import socket
import zlib
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional
from urllib.parse import urlparse

import numpy as np
import psutil
import tensorflow as tf

from echo_experiments.core import user_code
from echo_experiments.core.placement import EchoSpec
from echo_experiments.core.schema import ConfigError
from echo_experiments.core.specs import PipelineSpec
from echo_experiments.core.user_code import HOOKS_DOC
from echo_experiments.data.echo import CHUNK, echo

AUTOTUNE = tf.data.AUTOTUNE
Example = dict[str, tf.Tensor]
# Examples augmented together by a workload's augment_chunk.
AUGMENT_CHUNK = 64
# Evaluation sets up to this size (decoded) stay in memory between evaluations.
EVAL_CACHE_BYTES = 1 << 30


@dataclass(frozen=True)
class Host:
    """Which share of the input this process reads: shard ``index`` of ``count``."""

    index: int = 0
    count: int = 1


def stage_seed(seed: int, stage: str) -> int:
    """An independent, reproducible seed for one random stage of the pipeline."""
    return int(np.random.SeedSequence([seed, zlib.crc32(stage.encode())]).generate_state(1)[0])


def build(workload: Any, spec: PipelineSpec, *, store: Any = None, host: Host = Host(),
          records: Optional[tf.data.Dataset] = None, epochs: Optional[int] = None) -> tf.data.Dataset:
    """Training batches, each with the ``read_id`` of every example in it; endless unless ``epochs`` is set.

    Records come from ``records`` if given, else from ``store`` (the configured storage), else from the
    workload's train source; one epoch of them is re-read every epoch. A store that serves examples
    (``storage.read_unit=example``) charges its read cost on the examples hook's output instead. With
    several hosts each reads every ``host.count``-th example and makes batches of ``batch_size /
    host.count``; read ids stay unique across hosts. With a tf.data service every stage upstream of the echo
    point runs on its workers.
    """
    stage, seed = spec.echo.stage, spec.seed
    local_batch = spec.batch_size // host.count
    # A tf.data service takes the stream over right before the echo stage (after batching when there is none),
    # so its workers do all the reading, decoding and augmenting that echoing saves.
    hand_over = (stage.point or "E3") if spec.service else None

    def point(ds: tf.data.Dataset, name: str, batched: bool = False) -> tf.data.Dataset:
        if hand_over == name:
            ds = _from_service(ds, spec.service, host, local_batch, batched)
        if stage.point == name:
            ds = _echo(ds, spec.echo, spec.echo_shuffle, seed, chunk=1 if batched else CHUNK)
        return ds

    if records is None:
        records = store.records(seed) if store is not None else workload.train_source.encoded(seed)
    ds = workload.examples(records, seed)
    ds = store.examples(ds) if store is not None else ds
    if host.count > 1:
        ds = ds.shard(host.count, host.index)
    ds = ds.repeat(epochs).enumerate().map(_plain(lambda i, x: {**x, "read_id": i * host.count + host.index}))
    ds = _traced(lambda: ds.map(_plain(workload.decode), num_parallel_calls=AUTOTUNE), workload, "decode")
    _trainable(_kept_read_ids(ds, workload, "decode"), workload, "decode", shapes=False)
    ds = ds.shuffle(_bounded(ds, spec.shuffle_buffer, "workload.shuffle_buffer"), seed=stage_seed(seed, "shuffle"))
    ds = point(ds, "E1")
    if spec.echo.augments_in_trainer:
        _batches_as_read(workload)
    else:
        ds = _kept_read_ids(_traced(lambda: _augment(ds, workload, seed), workload, "augment"), workload, "augment")
    ds = point(ds, "E2")
    ds = ds.batch(local_batch, drop_remainder=True)
    ds = _trainable(point(ds, "E3", batched=True), workload, "batches")
    return ds.prefetch(AUTOTUNE).with_options(_options())


def augment_batches(workload: Any, spec: PipelineSpec) -> Optional[Callable[[dict, int], dict]]:
    """For the autopilot before augmentation (``spec.echo.augments_in_trainer``): the workload's augmentation of
    one batch of NumPy arrays, drawn from ``key`` (the autopilot's index of the batch); None where the stream
    augments (every other pipeline). :func:`build` has refused the workloads that cannot augment a batch as read."""
    if not (spec.echo.augments_in_trainer and workload.augments):
        return None
    augment_seed = stage_seed(spec.seed, "augment")
    fn = tf.function(_plain(workload.augment_chunk))

    def augment(batch: dict, key: int) -> dict:
        out = fn({k: tf.constant(v) for k, v in batch.items()}, tf.constant([augment_seed, key], tf.int64))
        return {k: v.numpy() for k, v in out.items()}

    return augment


def _batches_as_read(workload: Any) -> None:
    """The autopilot before augmentation batches examples as read, which takes examples of one shape, and
    augments whole batches (augment_chunk): ConfigError for a workload whose examples vary before augmentation."""
    if workload.augments and not workload.augments_in_chunks:
        raise ConfigError("echo.placement", "before_augmentation", "", (
            f"echo.placement=before_augmentation with echo.factor=auto augments whole batches, with the workload's "
            f"augment_chunk, and {type(workload).__name__} augments one example at a time (augment): give it "
            "augment_chunk (used where a workload has no augment, or sets augments_in_chunks = True), or use "
            "after_augmentation or after_batching"))


def _kept_read_ids(ds: tf.data.Dataset, workload: Any, stage: str) -> tf.data.Dataset:
    """``ds``, unless a workload's stage dropped the read ids that fresh examples are counted by: ConfigError."""
    if not isinstance(ds.element_spec, dict) or "read_id" not in ds.element_spec:
        name = type(workload).__name__
        raise ConfigError("workload.task", name, "", (
            f"{name}.{stage} must return every example with its read_id (it returned "
            f"{_keys(ds.element_spec)}): start its result from the example it was given, {{**example, ...}}"))
    return ds


def _trainable(ds: tf.data.Dataset, workload: Any, stage: str, shapes: bool = True) -> tf.data.Dataset:
    """``ds``, unless what ``stage`` hands on holds what a train step cannot take (text, or, in batches, a shape
    that varies): ConfigError naming the part, e.g. an image left undecoded."""
    for key, spec in ds.element_spec.items():
        if spec.dtype == tf.string or (shapes and not spec.shape[1:].is_fully_defined()):
            name = type(workload).__name__
            raise ConfigError("workload.task", name, "", (
                f"{name}.{stage} hands on {key} as {spec.dtype.name} of shape {spec.shape}: a train step takes "
                "numbers of a fixed shape; decode (or augment) it into one"))
    return ds


def _traced(build: Callable[[], tf.data.Dataset], workload: Any, stage: str) -> tf.data.Dataset:
    """``build()``, where tracing a workload's stage over its examples fails: ConfigError with the stage's error,
    its message in full and the user's own line."""
    try:
        return build()
    except Exception as e:  # anything the stage raises while it is traced is the stage's failure
        name = type(workload).__name__
        what = f"{name}.{stage} fails on its examples"
        line = user_code.failure(e, what) or f"{what}: {user_code.message(e)}"
        raise ConfigError("workload.task", name, "", f"{line}; what each hook receives: {HOOKS_DOC}") from None


def _keys(spec: Any) -> str:
    return ", ".join(spec) if isinstance(spec, dict) else type(spec).__name__


def _augment(ds: tf.data.Dataset, workload: Any, seed: int) -> tf.data.Dataset:
    """The workload's augmentation, each example with its own stateless seed.

    Seeds are keyed on the position after E1, so the copies of an example echoed there augment differently.
    A workload's ``augment_chunk`` (same-shape examples a chunk at a time, far less host time per example)
    is used where it has one."""
    if not workload.augments:
        return ds
    augment_seed = tf.constant(stage_seed(seed, "augment"), tf.int64)
    if workload.augments_in_chunks:
        fn = _plain(workload.augment_chunk)
        return (ds.batch(AUGMENT_CHUNK).enumerate()
                .map(lambda i, x: fn(x, tf.stack([augment_seed, i])), num_parallel_calls=AUTOTUNE).unbatch())
    fn = _plain(workload.augment)
    return ds.enumerate().map(lambda i, x: fn(x, tf.stack([augment_seed, i])), num_parallel_calls=AUTOTUNE)


def _echo(ds: tf.data.Dataset, spec: EchoSpec, shuffle_buffer: int, seed: int, chunk: int) -> tf.data.Dataset:
    # A batch is already a chunk of examples: batches are echoed one at a time (see echo()).
    ds = echo(ds, spec.factor, stage_seed(seed, "echo"), chunk=chunk)
    if shuffle_buffer > 0:
        ds = ds.shuffle(_bounded(ds, shuffle_buffer, "echo.shuffle_buffer"), seed=stage_seed(seed, "echo_shuffle"))
    return ds


# A shuffle buffer may hold at most this share of the memory available when the run starts.
MEMORY_SHARE = 0.5
# What tf.data keeps per element and component beyond its values (a tensor's header and the buffer's slot).
ELEMENT_OVERHEAD_BYTES = 256


def _bounded(ds: tf.data.Dataset, size: int, key: str) -> int:
    """``size``, unless a shuffle buffer of that many of ``ds``'s elements would take more than MEMORY_SHARE of
    the memory available now: then ConfigError naming ``key``, what it would take and what there is."""
    values = _bytes_per_example(ds.element_spec)
    if values is None:  # variable-sized elements: their size is known only as they come
        return size
    per_element = values + ELEMENT_OVERHEAD_BYTES * len(tf.nest.flatten(ds.element_spec))
    available = psutil.virtual_memory().available
    if size * per_element <= MEMORY_SHARE * available:
        return size
    most = int(MEMORY_SHARE * available // per_element)
    raise ConfigError(key, size, "", (
        f"{key}={size} would hold about {size * per_element / 2**30:.1f} GiB ({per_element} bytes an element) and "
        f"this machine has {available / 2**30:.1f} GiB available: at most {most} here"))


def check_service(address: str, timeout_s: float) -> None:
    """Raise ConfigError unless the tf.data service dispatcher at ``address`` accepts a connection within
    ``timeout_s`` (tf.data itself would wait for it without a word)."""
    parsed = urlparse(address)
    try:
        socket.create_connection((parsed.hostname, parsed.port), timeout=timeout_s).close()
    except (OSError, ValueError, TypeError) as e:
        raise ConfigError("data.service", address, "", (
            f"data.service={address} is unreachable ({e}; waited up to data.timeout_s={timeout_s:g} s): start its "
            f"dispatcher (python -m echo_experiments.service dispatcher --port {parsed.port}) or fix the address"
        )) from None


def _from_service(ds: tf.data.Dataset, service: str, host: Host, local_batch: int,
                  batched: bool) -> tf.data.Dataset:
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


# --- evaluation -------------------------------------------------------------------------------------------

def eval_batches(examples: tf.data.Dataset, batch_size: int, limit: Optional[int] = None,
                 count: Optional[int] = None) -> tf.data.Dataset:
    """Evaluation batches in a fixed order; the last may be short (see :func:`padded`).

    The batches are kept in memory after the first pass when the set is known to fit in EVAL_CACHE_BYTES:
    ``count`` examples (or ``limit``) of the element spec's fixed size."""
    if limit is not None:
        examples = examples.take(limit)
        count = limit if count is None else min(count, limit)
    size = _bytes_per_example(examples.element_spec)
    batches = examples.batch(batch_size)
    if count is not None and size is not None and count * size <= EVAL_CACHE_BYTES:
        batches = batches.cache()
    return batches.prefetch(AUTOTUNE)


def _bytes_per_example(spec: Any) -> Optional[int]:
    total = 0
    for s in tf.nest.flatten(spec):
        if not s.shape.is_fully_defined() or s.dtype == tf.string:
            return None
        total += s.shape.num_elements() * s.dtype.size
    return total


def padded(batches: tf.data.Dataset, batch_size: int) -> Iterator[dict[str, np.ndarray]]:
    """NumPy batches padded to ``batch_size`` with a ``mask`` (1 = real example), so eval compiles once."""
    for batch in batches.as_numpy_iterator():
        n = len(next(iter(batch.values())))
        out = {k: np.concatenate([v, np.zeros((batch_size - n,) + v.shape[1:], v.dtype)]) for k, v in batch.items()}
        out["mask"] = (np.arange(batch_size) < n).astype(np.float32)
        yield out
