"""The echo stage for Grain's dataset API (``echo_experiments.grain`` is its public face), with the same rules as
the tf.data stage (data/echo.py): an element is repeated floor(e) times, plus once more with probability
e - floor(e), and fresh examples are counted downstream by their read ids (FreshCounter).

Grain restores a flat map by reading the element again and running the transform again, so the extra copy's
coin is drawn from the element's read id and the seed, never from a generator that advances as it runs: the
restored iterator makes the same copies. The stage is a ``FlatMapIterDataset``: echoing a ``MapDataset`` by
index (``ds[i // e]``) would read and decode the element again for every copy, which is the work echoing saves.
"""

import math
from typing import Any, Optional, Sequence

import grain
import numpy as np
from grain.experimental import FlatMapIterDataset, FlatMapTransform, WindowShuffleIterDataset

from echo_experiments.core.config import echo_arguments
from echo_experiments.core.schema import argument, integer, optional

READ_ID = "read_id"


def with_read_ids(ds: grain.MapDataset | grain.IterDataset) -> grain.MapDataset | grain.IterDataset:
    """``ds`` (dicts) with each element's ``read_id``, its position in the stream of reads."""
    if not isinstance(ds, (grain.MapDataset, grain.IterDataset)):
        raise TypeError(f"with_read_ids takes a grain.MapDataset or grain.IterDataset, not {type(ds).__name__}")

    def add(index: int, element: Any) -> dict:
        if not isinstance(element, dict):
            raise TypeError(f"with_read_ids takes a dataset of dicts (feature name -> array), not of "
                            f"{type(element).__name__}")
        return {**element, READ_ID: np.int64(index)}
    return ds.map_with_index(add)


class Copies(FlatMapTransform):
    """One element as its echoes: floor(e) copies, one more where the coin of (read id, seed) falls under
    e - floor(e). A whole batch's coin is its first read id's."""

    def __init__(self, factor: float, seed: int):
        if not (isinstance(factor, (int, float)) and math.isfinite(factor) and factor >= 1):
            raise ValueError(f"echo factor must be a real number >= 1, got {factor!r}")
        self.whole, self.extra, self.seed = math.floor(factor), factor - math.floor(factor), int(seed)
        self.max_fan_out = math.ceil(factor)

    def copies(self, read_id: int) -> int:
        if not self.extra:
            return self.whole
        return self.whole + int(np.random.default_rng([self.seed, read_id]).random() < self.extra)

    def flat_map(self, element: dict) -> Sequence[dict]:
        if not isinstance(element, dict) or READ_ID not in element:
            raise ValueError("echo needs elements with a read_id (with_read_ids, where the data is read), so that "
                             "fresh examples can be counted")
        first = int(np.asarray(element[READ_ID]).ravel()[0])
        return [dict(element) for _ in range(self.copies(first))]  # a dict each: a stage may change its own


def echo(ds: grain.MapDataset | grain.IterDataset, factor: float, *, seed: int = 0,
         window: Optional[int] = None) -> grain.IterDataset:
    """Each element of ``ds`` ``factor`` times (see Copies), then shuffled in windows of ``window`` elements
    (None or 0: not shuffled). A ``MapDataset`` is turned into an iterator first, so that every element is read
    and decoded once. The elements may be examples or whole batches."""
    echo_arguments(factor, seed)
    argument("window", window, "null or an integer >= 0 (elements per shuffled window)", optional(integer(0)))
    if isinstance(ds, grain.MapDataset):
        ds = ds.to_iter_dataset()
    if not isinstance(ds, grain.IterDataset):
        raise TypeError(
            f"echo takes a grain.MapDataset or grain.IterDataset, not {type(ds).__name__}: through grain.DataLoader "
            "a transform after a FlatMapTransform gets rng=None, so echo with the dataset API "
            "(docs/your-model.md#grain)")
    out = FlatMapIterDataset(ds, Copies(float(factor), seed))
    out = WindowShuffleIterDataset(out, window_size=int(window), seed=seed) if window else out
    return Stamped(out, {"factor": float(factor), "seed": seed, "window": window or 0})


class Stamped(grain.IterDataset):
    """The echo stage's output, its iterator's state stamped with the stage's factor, seed and window, so that a
    state restores only into a stage of the same settings (one line naming the first that differs)."""

    def __init__(self, parent: grain.IterDataset, settings: dict):
        super().__init__(parent)
        self.settings = settings

    def __iter__(self) -> grain.DatasetIterator:
        return _StampedIterator(self._parent.__iter__(), self.settings)


class _StampedIterator(grain.DatasetIterator):
    def __init__(self, parent: grain.DatasetIterator, settings: dict):
        super().__init__(parent)
        self.settings = settings

    def __next__(self) -> Any:
        return next(self._parent)

    def get_state(self) -> dict:
        return {"echo": dict(self.settings), "stage": self._parent.get_state()}

    def set_state(self, state: dict) -> None:
        saved = state.get("echo") if isinstance(state, dict) else None
        if saved is None:
            raise ValueError("this iterator state was not saved from an echo stage of echo_experiments.grain: "
                             "restore it into the pipeline it was saved from")
        for name, value in self.settings.items():
            if saved.get(name) != value:
                raise ValueError(f"the iterator state was saved with echo {name}={saved.get(name)!r}, this pipeline "
                                 f"has {name}={value!r}: restore it into a pipeline of the same echo settings")
        self._parent.set_state(state["stage"])
