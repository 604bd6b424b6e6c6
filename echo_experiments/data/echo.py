"""The echo stage, and exact counting of fresh examples.

Echoing repeats each element of a tf.data stage e times (Choi et al. 2019, the paper's own
``flat_map(lambda t: Dataset.from_tensors(t).repeat(e))``), generalised to a real factor: an element is
repeated floor(e) times, plus once more with probability e - floor(e), drawn from a stateless RNG keyed on
the seed and the element's position, so a run is reproducible.

Fresh examples are counted downstream, not inferred: every example carries the ``read_id`` the source gave
it (its position in the stream of reads), and :class:`FreshCounter` counts the distinct ids that reached a
train step. Non-integer factors, shuffles and read-ahead cannot make that count wrong.
"""

import math

import tensorflow as tf

# Examples of a fixed shape are echoed this many at a time (one tf.repeat instead of a dataset per example).
CHUNK = 64


def echo(ds: tf.data.Dataset, factor: float, seed: int, chunk: int = CHUNK) -> tf.data.Dataset:
    """Repeat each element floor(factor) times, plus once more with probability factor - floor(factor).

    Copies follow their original at once, in the same order either way the stage is built. Fixed-shape
    elements are echoed ``chunk`` at a time (a dataset per small element costs ~10x more: python -m
    echo_experiments.benchmark), so the stage holds back up to ``chunk`` upstream elements before it hands on
    the first copy. Whole batches take ``chunk=1``, one dataset per batch: chunks of 64 batches would make an
    input-bound trainer wait for 64 fresh batches and then race through their copies.
    """
    if factor < 1:
        raise ValueError(f"echo factor must be >= 1, got {factor}")
    whole = math.floor(factor)
    extra = factor - whole
    if chunk > 1 and _fixed_shape(ds):
        return _echo_chunks(ds, whole, extra, seed, chunk)
    if extra == 0:
        return ds.flat_map(lambda x: tf.data.Dataset.from_tensors(x).repeat(whole))

    def copies(i: tf.Tensor) -> tf.Tensor:
        u = tf.random.stateless_uniform([], seed=tf.stack([tf.constant(seed, tf.int64), i]))
        return whole + tf.cast(u < extra, tf.int64)

    return ds.enumerate().flat_map(lambda i, x: tf.data.Dataset.from_tensors(x).repeat(copies(i)))


def _fixed_shape(ds: tf.data.Dataset) -> bool:
    return all(spec.shape.is_fully_defined() for spec in tf.nest.flatten(ds.element_spec))


def _echo_chunks(ds: tf.data.Dataset, whole: int, extra: float, seed: int, chunk: int) -> tf.data.Dataset:
    """The vectorised echo: repeat the rows of a chunk of elements, then split it again."""

    def repeat(i: tf.Tensor, elements):
        n = tf.shape(tf.nest.flatten(elements)[0])[0]
        copies = tf.fill([n], tf.constant(whole, tf.int32))
        if extra:
            u = tf.random.stateless_uniform([n], seed=tf.stack([tf.constant(seed, tf.int64), i]))
            copies += tf.cast(u < extra, tf.int32)
        return tf.nest.map_structure(lambda x: tf.repeat(x, copies, axis=0), elements)

    return ds.batch(chunk).enumerate().map(repeat).unbatch()
