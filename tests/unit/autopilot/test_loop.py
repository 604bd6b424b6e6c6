"""Echo on stall in a loop of one's own (EchoOnStall): copies only while the step in flight is done and the loader
has nothing ready, never past the cap, fresh examples counted exactly, state saved and restored mid-stream with the
same fresh batches and, replayed, the same decisions; a loader that raises, hangs or ends says so in one line, and
no thread outlives the loop. Its arguments are checked as the command line checks its keys."""

import collections
import threading
import time

import numpy as np
import pytest

from echo_experiments.autopilot import EchoOnStall, LoaderError
from echo_experiments.core.schema import ConfigError

SIZE = 4


def batch(i: int) -> dict:
    return {"x": np.arange(SIZE) + SIZE * i, "read_id": np.arange(SIZE) + SIZE * i}


class Slow:
    """A loader of ``n`` batches, each ``seconds`` to read; with ``get_state``/``set_state`` as Grain's iterators."""

    def __init__(self, n: int, seconds: float = 0.0):
        self.n, self.seconds, self.i = n, seconds, 0

    def __iter__(self):
        return self

    def __next__(self):
        if self.i >= self.n:
            raise StopIteration
        time.sleep(self.seconds)
        self.i += 1
        return batch(self.i - 1)

    def get_state(self):
        return {"i": self.i}

    def set_state(self, state):
        self.i = state["i"]


class StepFor:
    """A step in flight that takes ``seconds`` from its dispatch."""

    def __init__(self, seconds: float):
        self.done_at = time.monotonic() + seconds

    def is_ready(self) -> bool:
        return time.monotonic() >= self.done_at


def train(loop: EchoOnStall, step_s: float, limit: int = 10_000) -> list[dict]:
    got = []
    for b in loop:
        got.append(b)
        loop.step_in_flight(StepFor(step_s))
        if len(got) >= limit:
            break
    return got


@pytest.fixture(autouse=True)
def no_thread_left_behind():
    before = set(threading.enumerate())
    yield
    deadline = time.monotonic() + 5
    while set(threading.enumerate()) - before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert set(threading.enumerate()) - before == set()


def test_on_a_slow_loader_it_copies_up_to_its_cap_and_counts_fresh_examples_exactly():
    with EchoOnStall(Slow(20, seconds=0.03), max_factor=3, read_ids="read_id") as loop:
        got = train(loop, step_s=0.005)
    trained = collections.Counter(int(i) for b in got for i in b["read_id"])
    assert max(trained.values()) <= 3 and set(trained) == set(range(20 * SIZE))  # never past the cap, none lost
    summary = loop.summary()
    assert summary.fresh_examples == 20 * SIZE and summary.fresh_batches == 20
    assert summary.examples_trained == len(got) * SIZE and summary.copied_batches == len(got) - 20
    assert 2.0 <= summary.examples_per_fresh <= 3.0  # R about 6 against a cap of 3: it copies at most chances


def test_on_an_always_ready_loader_it_copies_almost_nothing():
    with EchoOnStall(Slow(150), max_factor=4) as loop:
        train(loop, step_s=0.01)  # the reading thread's next batch is ready long before the step is done
    summary = loop.summary()
    assert summary.fresh_examples == 150 * SIZE  # no read ids: every example of a fresh batch
    assert summary.examples_per_fresh < 1.02, summary


def test_no_copy_while_the_step_in_flight_runs():
    with EchoOnStall(Slow(6, seconds=0.05), max_factor=8) as loop:
        kinds = []
        for _ in loop:
            loop.step_in_flight(lambda: False)  # a step that never ends: the loader is always faster
            kinds.append(loop.decisions[-1][0])
    assert set(kinds) == {"f"} and loop.summary().copied_batches == 0


def test_example_copies_keep_the_loaders_structure_and_never_pass_the_cap():
    def tuples():
        for i in range(40):
            time.sleep(0.01)
            yield (np.arange(SIZE) + SIZE * i, {"y": (np.arange(SIZE) + SIZE * i) * 10})
    with EchoOnStall(tuples(), max_factor=2, copies="examples") as loop:
        got = train(loop, step_s=0.0)
    assert all(isinstance(b, tuple) and (b[1]["y"] == b[0] * 10).all() for b in got)  # examples kept whole
    trained = collections.Counter(int(i) for b in got for i in b[0])
    assert max(trained.values()) <= 2 and loop.summary().copied_batches > 0


def test_a_state_saved_mid_stream_restores_the_same_fresh_batches_and_a_replay_the_same_decisions():
    loader = Slow(30, seconds=0.02)
    loop = EchoOnStall(loader, max_factor=3, read_ids="read_id")
    first = train(loop, step_s=0.005, limit=25)
    saved = loop.state()
    loop.close()
    restored = EchoOnStall(Slow(30, seconds=0.0), max_factor=3, read_ids="read_id", state=saved)
    rest = train(restored, step_s=0.005)
    restored.close()
    fresh = [int(b["read_id"][0]) // SIZE for b, kind in zip(first + rest, _kinds(restored.decisions)) if kind == "f"]
    assert fresh == list(range(30))  # the batch read ahead at the save was read again, none lost or repeated
    assert restored.summary().fresh_examples == 30 * SIZE
    again = EchoOnStall(Slow(30, seconds=0.0), max_factor=3, read_ids="read_id", replay=restored.decisions)
    replayed = train(again, step_s=0.0)
    again.close()
    # The same decisions on a loader of another speed (past them the clock decides: it may copy before it sees the
    # loader's end).
    assert "".join(_kinds(again.decisions)).startswith("".join(_kinds(restored.decisions)))
    assert [b["read_id"].tolist() for b in replayed[:len(first + rest)]] == [b["read_id"].tolist()
                                                                            for b in first + rest]


def _kinds(runs: list) -> list[str]:
    return [kind for kind, count in runs for _ in range(count) if kind in "fc"]


def test_a_loader_that_raises_hangs_or_ends_says_so_in_one_line():
    def raising():
        yield batch(0)
        raise OSError("disk gone\nsecond line")
    with EchoOnStall(raising(), max_factor=1, name="the test loader") as loop:  # no copy: it waits for the loader
        next(loop)
        with pytest.raises(LoaderError) as raised:
            next(loop)
    assert str(raised.value) == "the test loader raised OSError: disk gone"

    stop = threading.Event()

    def hanging():
        yield batch(0)
        stop.wait(30)  # a loader that stops answering
        yield batch(1)
    loop = EchoOnStall(hanging(), max_factor=1, timeout_s=0.3, name="the test loader")
    next(loop)
    with pytest.raises(LoaderError, match=r"^no batch from the test loader within 0.3 s"):
        next(loop)
    loop.close()
    stop.set()  # its reading thread is a daemon, freed here so the fixture sees it end

    with EchoOnStall(iter([batch(0)]), max_factor=1) as loop:
        assert [b["x"].tolist() for b in loop] == [[0, 1, 2, 3]]  # the loader's end is the loop's
    with EchoOnStall(iter([batch(0)]), max_factor=3) as loop:  # it may copy until it sees the end, within the cap
        assert 1 <= len([b["x"].tolist() == [0, 1, 2, 3] for b in loop]) <= 3


@pytest.mark.parametrize("kwargs, line", [
    ({"max_factor": 1e9}, "max_factor=1000000000 is not allowed: a real number >= 1 and <= 1000"),
    ({"max_factor": "2"}, "max_factor='2' is not allowed: a real number >= 1 and <= 1000"),
    ({"max_factor": True}, "max_factor=True is not allowed: a real number >= 1 and <= 1000"),
    ({"max_factor": 0.5}, "max_factor=0.5 is not allowed: a real number >= 1 and <= 1000"),
    ({"copies": "rows"}, "copies='rows' is not allowed: batches or examples"),
    ({"timeout_s": -1}, "timeout_s=-1 is not allowed: a real number > 0 (seconds)"),
    ({"seed": 1.5}, "seed=1.5 is not allowed: an integer in [0, 2147483647]"),
    ({"seed": -1}, "seed=-1 is not allowed: an integer in [0, 2147483647]"),
    ({"read_ids": ""}, "read_ids='' is not allowed: null or the key of each batch's read ids"),
])
def test_bad_arguments_end_in_one_line_naming_the_argument(kwargs, line):
    with pytest.raises(ConfigError) as raised:
        EchoOnStall([batch(0)], **kwargs)
    assert str(raised.value) == line


def test_a_state_restores_only_into_a_loop_of_its_settings():
    loop = EchoOnStall(Slow(5), max_factor=2, seed=0)
    next(loop)
    saved = loop.state()
    loop.close()
    with pytest.raises(ValueError, match=r"^state was saved with max_factor=2.0, this loop has max_factor=3.0"):
        EchoOnStall(Slow(5), max_factor=3, seed=0, state=saved)
    with pytest.raises(ValueError, match=r"^state was saved with seed=0, this loop has seed=1"):
        EchoOnStall(Slow(5), max_factor=2, seed=1, state=saved)
    with pytest.raises(ValueError, match=r"^state holds the loader's own state, and this loader cannot take one"):
        EchoOnStall(iter([batch(0)]), max_factor=2, seed=0, state=saved)
    with pytest.raises(TypeError, match=r"^batches must be iterable"):
        EchoOnStall(3)
    with EchoOnStall([batch(0)]) as loop, pytest.raises(TypeError, match=r"^step_in_flight takes a JAX array"):
        loop.step_in_flight(0.5)


def test_read_ids_need_dict_batches_and_ids_that_are_non_negative_integers():
    with EchoOnStall([(np.arange(4),)], read_ids="read_id") as loop:
        with pytest.raises(ValueError, match=r"^read_ids='read_id': the loader's batches are not dicts holding it"):
            next(loop)
    with EchoOnStall([{"read_id": np.array([-1, 2])}], read_ids="read_id") as loop:
        with pytest.raises(ValueError, match=r"^read ids must be non-negative integers, got -1"):
            next(loop)
