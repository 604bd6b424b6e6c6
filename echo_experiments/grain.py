"""The echo stage for your own Grain pipeline (Grain's dataset API), with fresh examples counted exactly.

    import grain
    from echo_experiments.grain import FreshCounter, echo, window_size, with_read_ids

    ds = with_read_ids(grain.MapDataset.source(records).shuffle(seed=0).repeat())  # read ids after repeat
    ds = ds.map(decode)                                  # your upstream stages (they keep "read_id")
    ds = echo(ds, 2.0, seed=0, window=window_size(2.0, 64))  # each element e times, copies shuffled apart
    ds = ds.random_map(augment, seed=0).batch(64)        # your downstream stages: each copy its own draw
    fresh = FreshCounter()
    for batch in ds:                                     # your training loop
        fresh.update(batch.pop("read_id"))               # fresh.count: the distinct examples trained on
        train_step(batch)

Put ``with_read_ids`` where the data is read, after ``repeat``, as for tf.data. Put the echo stage after the
expensive stages: ``echo`` turns a ``MapDataset`` into an iterator there, so every element is read and decoded
once (echoing a MapDataset by index, ``ds[i // e]``, would decode it again for every copy). Before augmentation,
``random_map`` after the stage gives each copy its own random draw; after batching, ``echo(ds.batch(64), e)``
repeats whole batches. The iterator's ``get_state``/``set_state`` (and Grain's Orbax handler) restore it exactly:
the extra copy of a fractional factor is decided by the element's read id and the seed.

Use the dataset API, not ``grain.DataLoader``'s operations: there a transform after a ``FlatMapTransform`` is
called with ``rng=None``. ``grain.experimental.WindowShuffleIterDataset`` (the window) shuffles fixed windows, not
a sliding buffer like tf.data's shuffle: copies never leave their window. docs/your-model.md#grain says more.
"""

from echo_experiments.core.config import MAX_BATCH, echo_arguments
from echo_experiments.core.fresh import FreshCounter
from echo_experiments.core.placement import echo_shuffle_size
from echo_experiments.core.schema import argument, integer
from echo_experiments.data.grain_echo import Copies, echo, with_read_ids

__all__ = ["Copies", "FreshCounter", "echo", "window_size", "with_read_ids"]


def window_size(factor: float, batch_size: int) -> int:
    """The window that keeps an echoed example's copies out of one batch: 10 x ceil(e) x batch examples, the
    tf.data stage's echo shuffle (its arguments checked as the command line checks them)."""
    echo_arguments(factor, 0)
    argument("batch_size", batch_size, f"an integer >= 1 and <= {MAX_BATCH}", integer(1, MAX_BATCH))
    return echo_shuffle_size(factor, batch_size)
