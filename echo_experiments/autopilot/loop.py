"""Echo on stall for a loop of your own: :class:`EchoOnStall` wraps any iterator of batches (autopilot/__init__.py
shows it in use) with the trainer's autopilot (pilot.py), checked at the call as the command line checks its keys.

Batches are handed on as the loader made them: a fresh one as read, a whole-batch copy as the batch it copies
(``copies="batches"``), an example copy (``copies="examples"``) with the structure of the loader's batches (dicts,
lists and tuples of arrays, nested) and NumPy arrays for leaves, its examples drawn from a pool of earlier ones.
"""

import dataclasses
import time
from typing import Any, Iterable, Optional

import numpy as np

from echo_experiments.autopilot.copies import BatchCopies, ExampleCopies
from echo_experiments.autopilot.decisions import FRESH, Decisions, Replay
from echo_experiments.autopilot.pilot import Autopilot
from echo_experiments.autopilot.reader import LoaderEnded, Reader, is_step_handle
from echo_experiments.core.config import MAX_FACTOR, MAX_SEED
from echo_experiments.core.fresh import FreshCounter
from echo_experiments.core.input_bound import in_words, xprof_class
from echo_experiments.core.schema import ConfigError, argument, integer, is_real, one_of, optional, real, text

STATE_VERSION = 1
# What a saved state must match in the loop it is restored into (a state of factor 2 continued under 3 would be
# neither run).
SETTINGS = ("max_factor", "copies", "seed", "read_ids")


@dataclasses.dataclass(frozen=True)
class Summary:
    """What the loop has trained so far: fresh examples (distinct read ids where ``read_ids`` names them, else
    the examples of the fresh batches), the batches and examples trained, and the share of its wall time it
    waited for the input with nothing to copy (the data-loading share echo on stall drives toward zero)."""

    fresh_examples: int
    fresh_batches: int
    copied_batches: int
    examples_trained: int
    input_wait_s: float
    wall_s: float

    @property
    def examples_per_fresh(self) -> float:
        return self.examples_trained / self.fresh_examples if self.fresh_examples else 1.0

    @property
    def input_wait_share(self) -> Optional[float]:
        return self.input_wait_s / self.wall_s if self.wall_s > 0 else None

    @property
    def input_bound(self) -> Optional[str]:
        """XProf's class of the wait share (core/input_bound.py)."""
        return xprof_class(self.input_wait_share)

    def __str__(self) -> str:
        return (f"{self.fresh_examples} fresh examples, {self.examples_trained} trained ({self.examples_per_fresh:.2f} "
                f"per fresh; {self.copied_batches} of {self.fresh_batches + self.copied_batches} batches copies); "
                f"{in_words(self.input_wait_share, 'the loop')} over {self.wall_s:.1f} s")


class _LoaderReader(Reader):
    """The user's loader: where it keeps a state (Grain's iterators: ``get_state``/``set_state``), the state before
    each read is kept, so that a save restores the batch read ahead instead of losing it; with example copies,
    each batch is flattened to its arrays on the reading thread."""

    def __init__(self, iterator: Any, timeout_s: float, name: str, stateful: bool, flatten: bool):
        super().__init__(iterator, timeout_s, name)
        self.stateful, self.flatten = stateful, flatten
        self.before: Any = None  # the loader's state before its last read
        self.template: Any = None  # the first batch: the structure example copies are rebuilt into

    def _next(self) -> Any:
        if self.stateful:
            self.before = self.iterator.get_state()
        return super()._next()

    def convert(self, batch: Any) -> Any:
        if not self.flatten:
            return batch
        if self.template is None:
            self.template = batch
        leaves = dict(_leaves(batch, ()))
        sizes = {len(v) if np.ndim(v) else None for v in leaves.values()}
        if not leaves or len(sizes) != 1 or None in sizes:
            raise ValueError("copies='examples' needs batches of arrays that share their first (batch) axis; "
                             "copies='batches' takes any batch")
        return leaves


class EchoOnStall:
    """Batches from ``batches`` (any iterable: a Grain DataLoader or IterDataset, tf.data's
    ``as_numpy_iterator()``, a PyTorch DataLoader, a generator), fresh when the loader has one ready, else a copy
    of earlier fresh data while the step in flight is done, no example trained more than ``max_factor`` times.

    - ``copies``: ``"batches"`` (whole recent batches, as batch echoing) or ``"examples"`` (examples drawn from a
      pool as deep as a fixed factor's echo shuffle at the cap, as the trainer's autopilot before batching).
    - ``read_ids``: the key of each dict batch's read ids (fresh examples counted as distinct ids); None: every
      example of a fresh batch is fresh.
    - ``timeout_s``: the longest wait for the loader, in seconds of this process's running time.
    - ``state``: what :meth:`state` returned, to go on from; ``replay``: decisions (``summary``'s
      :attr:`decisions`) to make again whatever the loader's speed.

    Tell it the step in flight after dispatching it: ``loop.step_in_flight(loss)`` (a JAX array, a CUDA event, a
    future, or a callable that says whether it is done). Without one, every step is taken to be done when the
    next batch is asked for (a loop that waits for each step, as PyTorch on a CPU does): under JAX's asynchronous
    dispatch that would copy while the accelerator is still busy.
    """

    def __init__(self, batches: Iterable[Any], *, max_factor: float = 4.0, copies: str = "batches",
                 read_ids: Optional[str] = None, timeout_s: float = 600.0, seed: int = 0, name: Optional[str] = None,
                 state: Optional[dict] = None, replay: Optional[list] = None):
        argument("max_factor", max_factor, f"a real number >= 1 and <= {MAX_FACTOR}", real(1, MAX_FACTOR))
        argument("copies", copies, "batches or examples", one_of("batches", "examples"))
        argument("read_ids", read_ids, "null or the key of each batch's read ids", optional(text))
        argument("timeout_s", timeout_s, "a real number > 0 (seconds)", real(0, low_open=True))
        argument("seed", seed, f"an integer in [0, {MAX_SEED}]", integer(0, MAX_SEED))
        argument("name", name, "null or the loader in words", optional(text))
        try:
            iterator = iter(batches)
        except TypeError:
            raise TypeError(f"batches must be iterable (a loader, a dataset, a generator), not "
                            f"{type(batches).__name__}") from None
        self.settings = {"max_factor": float(max_factor), "copies": copies, "seed": seed, "read_ids": read_ids}
        stateful = all(callable(getattr(iterator, m, None)) for m in ("get_state", "set_state"))
        saved = _checked_state(state, self.settings, stateful)
        if saved and saved["loader"] is not None:
            iterator.set_state(saved["loader"])
        self._reader = _LoaderReader(iterator, float(timeout_s), name or f"the loader {type(batches).__name__}",
                                     stateful, flatten=copies == "examples")
        pool = BatchCopies(max_factor) if copies == "batches" else ExampleCopies(max_factor, seed)
        self._pilot = Autopilot(self._reader, pool, saved["autopilot"] if saved else None,
                                self._rebuild if copies == "examples" else None, _replay(replay),
                                dropped=not (saved and saved["loader"] is not None))
        self._fresh = (FreshCounter.from_seen(np.unpackbits(saved["seen"]).astype(bool)) if saved and read_ids
                       else FreshCounter()) if read_ids else None
        self._fresh_examples = saved["fresh_examples"] if saved else 0
        self._trained = saved["examples_trained"] if saved else 0
        self._wall_before = saved["wall_s"] if saved else 0.0
        self._wait_before = saved["input_wait_s"] if saved else 0.0
        self._running: Any = None

    def __iter__(self) -> "EchoOnStall":
        return self

    def __next__(self) -> Any:
        try:
            batch = self._pilot.next(running=self._running)
        except LoaderEnded:
            raise StopIteration from None
        except ConfigError:  # a replay that does not fit this loop
            raise ValueError(f"replay: decision {len(self._pilot.decisions.kinds()) + 1} copies where nothing can be "
                             f"copied within max_factor={self.settings['max_factor']:g}: the decisions are not of "
                             "this loop's settings") from None
        self._count(batch)
        return batch

    def step_in_flight(self, handle: Any) -> None:
        """The step just dispatched on the last batch (see the class): copies wait until it is done."""
        if not is_step_handle(handle):
            raise TypeError(f"step_in_flight takes a JAX array, a CUDA event, a future or a callable, not "
                            f"{type(handle).__name__}")
        self._running = handle

    def _count(self, batch: Any) -> None:
        size = _size(batch)
        self._trained += size
        if self._pilot.last != FRESH:
            return
        if self._fresh is None:
            self._fresh_examples += size
            return
        if not isinstance(batch, dict) or self.settings["read_ids"] not in batch:
            raise ValueError(f"read_ids={self.settings['read_ids']!r}: the loader's batches are not dicts holding "
                             "it (give read_ids=None to count every example of a fresh batch)")
        self._fresh.update(batch[self.settings["read_ids"]])
        self._fresh_examples = self._fresh.count

    def _rebuild(self, leaves: dict, key: int) -> Any:
        """A flattened batch in the loader's structure (example copies; ``key`` as the autopilot's augment)."""
        return _rebuilt(self._reader.template, leaves, ())

    def summary(self) -> Summary:
        pilot = self._pilot
        wall = (time.perf_counter() - pilot.started) if pilot.started is not None else 0.0
        return Summary(self._fresh_examples, pilot.fresh_items, pilot.copies, self._trained,
                       self._wait_before + pilot.input_wait_s, self._wall_before + wall)

    @property
    def decisions(self) -> list:
        """Every decision so far, run-length coded: [["f", 3], ["c", 2], ...] (``replay`` takes it)."""
        return [list(run) for run in self._pilot.decisions.runs]

    def state(self) -> dict:
        """What to save with a checkpoint (Orbax takes it as a pytree beside Grain's iterator state): its counts,
        decisions and, where the loader keeps a state, the loader's before the batch read ahead, which a restore
        then reads again. Waits for that read (within ``timeout_s``)."""
        self._pilot.settle()
        summary = self.summary()
        seen = np.packbits(self._fresh.seen) if self._fresh is not None else None
        return {"version": STATE_VERSION, **self.settings, "autopilot": self._pilot.state(),
                "fresh_examples": self._fresh_examples, "examples_trained": self._trained, "seen": seen,
                "wall_s": summary.wall_s, "input_wait_s": summary.input_wait_s,
                "loader": self._reader.before if self._reader.stateful else None}

    def close(self) -> None:
        """End the reading thread (the loop is over)."""
        self._pilot.close()

    def __enter__(self) -> "EchoOnStall":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _checked_state(state: Optional[dict], settings: dict, stateful: bool) -> Optional[dict]:
    """``state`` if it is one of :meth:`EchoOnStall.state` and of these settings; one line saying which not."""
    if state is None:
        return None
    if not isinstance(state, dict) or state.get("version") != STATE_VERSION or "autopilot" not in state:
        raise ValueError("state must be what EchoOnStall.state() returned (a dict of its version "
                         f"{STATE_VERSION})")
    for key in SETTINGS:
        saved = state.get(key)
        if (saved != settings[key]) if not is_real(saved) else float(saved) != float(settings[key]):
            raise ValueError(f"state was saved with {key}={saved!r}, this loop has {key}={settings[key]!r}: "
                             "restore it into a loop of the same settings")
    if state.get("loader") is not None and not stateful:
        raise ValueError("state holds the loader's own state, and this loader cannot take one (no set_state): "
                         "give the kind of loader it was saved from")
    return state


def _replay(runs: Optional[list]) -> Optional[Replay]:
    if runs is None:
        return None
    try:
        return Replay(Decisions(runs), "the decisions given")
    except (TypeError, ValueError):
        raise ValueError("replay must be decisions as EchoOnStall.decisions gives them: [[kind, count], ...]") from None


def _leaves(tree: Any, path: tuple) -> Iterable[tuple[tuple, np.ndarray]]:
    if isinstance(tree, dict):
        for key in tree:
            yield from _leaves(tree[key], path + (key,))
    elif isinstance(tree, (list, tuple)):
        for i, item in enumerate(tree):
            yield from _leaves(item, path + (i,))
    else:
        yield path, np.asarray(tree)


def _rebuilt(template: Any, leaves: dict, path: tuple) -> Any:
    if isinstance(template, dict):
        return {key: _rebuilt(template[key], leaves, path + (key,)) for key in template}
    if isinstance(template, (list, tuple)):
        items = [_rebuilt(item, leaves, path + (i,)) for i, item in enumerate(template)]
        return type(template)(*items) if hasattr(template, "_fields") else type(template)(items)
    return leaves[path]


def _size(batch: Any) -> int:
    """The examples in a batch: its first leaf's length."""
    while isinstance(batch, (dict, list, tuple)):
        batch = next(iter(batch.values())) if isinstance(batch, dict) else batch[0]
    return len(batch)
