"""Fresh examples counted from read ids: the distinct ids that reached a train step (docs/protocol.md, Units).

No TensorFlow here: the tf.data and Grain stages, the trainer and the autopilot for a user's own loop count with
the same counter."""

import numpy as np


class FreshCounter:
    """Counts the distinct read ids seen so far. A read id is a non-negative integer: negative, fractional and
    non-numeric ids are refused (numpy would read -1 as the last position and truncate 2.7 to 2)."""

    def __init__(self) -> None:
        self._seen = np.zeros(1 << 16, dtype=bool)
        self.count = 0

    @property
    def seen(self) -> np.ndarray:
        """The read ids seen so far, as a mask indexed by id (for checkpoints)."""
        return self._seen

    @classmethod
    def from_seen(cls, seen: np.ndarray) -> "FreshCounter":
        counter = cls()
        counter._seen = np.asarray(seen, dtype=bool).copy()
        counter.count = int(counter._seen.sum())
        return counter

    def update(self, read_ids) -> int:
        """Mark a batch's read ids as seen; return how many of them were fresh. ValueError naming the first id that
        is not a non-negative integer."""
        ids = read_ids_of(read_ids)
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


def read_ids_of(read_ids) -> np.ndarray:
    """``read_ids`` as a flat int64 array; ValueError naming the first that is not a non-negative integer."""
    raw = np.asarray(read_ids)
    if raw.dtype == bool or not (np.issubdtype(raw.dtype, np.integer) or np.issubdtype(raw.dtype, np.floating)):
        raise ValueError(f"read ids must be non-negative integers, got {raw.dtype} values ({_first(raw)!r})")
    flat = raw.ravel()
    if np.issubdtype(raw.dtype, np.floating):
        bad = ~np.isfinite(flat) | (flat != np.floor(flat))
        if bad.any():
            raise ValueError(f"read ids must be non-negative integers, got {flat[bad][0].item()!r}")
    ids = flat.astype(np.int64)
    if ids.size and ids.min() < 0:
        raise ValueError(f"read ids must be non-negative integers, got {int(ids.min())}")
    return ids


def _first(raw: np.ndarray):
    return raw.ravel()[0].item() if raw.size else None
