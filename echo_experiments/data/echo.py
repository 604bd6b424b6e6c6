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

import numpy as np
import tensorflow as tf


def echo(ds: tf.data.Dataset, factor: float, seed: int) -> tf.data.Dataset:
    """Repeat each element floor(factor) times, plus once more with probability factor - floor(factor)."""
    if factor < 1:
        raise ValueError(f"echo factor must be >= 1, got {factor}")
    whole = math.floor(factor)
    extra = factor - whole
    if extra == 0:
        return ds.flat_map(lambda x: tf.data.Dataset.from_tensors(x).repeat(whole))

    def copies(i: tf.Tensor) -> tf.Tensor:
        u = tf.random.stateless_uniform([], seed=tf.stack([tf.constant(seed, tf.int64), i]))
        return whole + tf.cast(u < extra, tf.int64)

    return ds.enumerate().flat_map(lambda i, x: tf.data.Dataset.from_tensors(x).repeat(copies(i)))


class FreshCounter:
    """Counts the distinct read ids seen so far (read ids are non-negative integers)."""

    def __init__(self) -> None:
        self._seen = np.zeros(1 << 16, dtype=bool)
        self.count = 0

    def update(self, read_ids: np.ndarray) -> int:
        """Mark a batch's read ids as seen; return how many of them were fresh."""
        ids = np.asarray(read_ids, dtype=np.int64).ravel()
        if ids.size == 0:
            return 0
        needed = int(ids.max()) + 1
        if needed > self._seen.size:
            grown = np.zeros(max(needed, 2 * self._seen.size), dtype=bool)
            grown[: self._seen.size] = self._seen
            self._seen = grown
        new = np.unique(ids[~self._seen[ids]])
        self._seen[new] = True
        self.count += new.size
        return int(new.size)
