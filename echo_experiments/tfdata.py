"""The echo stage for your own tf.data pipeline and trainer, with fresh examples counted exactly.

    import tensorflow as tf
    from echo_experiments.tfdata import FreshCounter, echo, with_read_ids

    ds = with_read_ids(records.repeat())               # each read a dict with its read_id: after repeat
    ds = ds.map(decode).shuffle(10_000)                # your upstream stages (they keep "read_id")
    ds = echo(ds, factor=2.0, shuffle_buffer=1280)     # each element e times, then shuffled so copies spread
    ds = ds.map(augment).batch(64)                     # your downstream stages
    fresh = FreshCounter()
    for batch in ds:                                   # your training loop
        fresh.update(batch.pop("read_id").numpy())     # fresh.count: the distinct examples trained on
        train_step(batch)

Put ``with_read_ids`` where the data is read, after ``repeat``: every read is then fresh work of the input, a
second epoch's reads included, and gets an id of its own (``with_read_ids(records).repeat(3)`` would give a
re-read its first read's id, and count 10 fresh examples in 30 reads). Put the echo stage where your input is slow
to make: before augmentation (copies augmented apart), after it, or after
batching (``echo(ds.batch(64), factor, batched=True)``; the read ids are then a vector per batch). The stage is
the one this project's experiments use (data/echo.py); schedules and budgets meant to compare echoed and plain
runs should count ``fresh.count``, not steps.
"""

from typing import Optional

import tensorflow as tf

from echo_experiments.core.config import echo_arguments
from echo_experiments.core.fresh import FreshCounter
from echo_experiments.core.schema import argument, boolean, integer, optional
from echo_experiments.data.echo import CHUNK
from echo_experiments.data.echo import echo as _echo

__all__ = ["FreshCounter", "echo", "with_read_ids"]


def with_read_ids(records: tf.data.Dataset) -> tf.data.Dataset:
    """``records`` (dicts) each with ``read_id``, its position in the stream of reads."""
    if not isinstance(records.element_spec, dict):
        raise TypeError("with_read_ids takes a dataset of dicts (feature name -> tensor)")
    return records.enumerate().map(lambda i, x: {**x, "read_id": i})


def echo(ds: tf.data.Dataset, factor: float, *, seed: int = 0, shuffle_buffer: Optional[int] = None,
         batched: bool = False) -> tf.data.Dataset:
    """Each element of ``ds`` repeated ``factor`` times (floor(e), plus once more with probability e - floor(e),
    reproducible for ``seed``), then shuffled by ``shuffle_buffer`` elements (None or 0: not shuffled; after
    example echoing a buffer of about 10 x ceil(e) x batch size keeps copies out of one batch). ``batched``:
    the elements are whole batches (repeated one at a time, so a slow input is never waited on for more)."""
    echo_arguments(factor, seed)
    argument("shuffle_buffer", shuffle_buffer, "null or an integer >= 0 (elements)", optional(integer(0)))
    argument("batched", batched, "true or false", boolean)
    if "read_id" not in (ds.element_spec if isinstance(ds.element_spec, dict) else {}):
        raise ValueError("echo needs elements with a read_id (with_read_ids, where the data is read), so that fresh "
                         "examples can be counted")
    out = _echo(ds, float(factor), seed, chunk=1 if batched else CHUNK)
    return out.shuffle(shuffle_buffer, seed=seed) if shuffle_buffer else out
