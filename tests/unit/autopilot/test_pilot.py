"""The autopilot's decisions (echo.factor=auto): fresh when the input has a batch ready, a copy only while the
step in flight is done and the input is not, never past the cap; copies of whole batches after batching, of
examples mixed across batches before it, augmented anew before augmentation."""

import concurrent.futures
import threading
import time

import numpy as np
import pytest

from echo_experiments.autopilot.copies import BatchCopies, ExampleCopies
from echo_experiments.autopilot.decisions import Decisions, Replay
from echo_experiments.autopilot.pilot import Autopilot
from echo_experiments.autopilot.reader import Reader
from echo_experiments.core.schema import ConfigError


class Step:
    """A step in flight, done when the test says so."""

    def __init__(self, done: bool):
        self.done = threading.Event()
        if done:
            self.done.set()

    def is_ready(self) -> bool:
        return self.done.is_set()

    def block_until_ready(self) -> "Step":
        assert self.done.wait(timeout=10)
        return self


class Gate:
    """An input that hands on batch i only once the test opens it (ids 10 i .. 10 i + 9)."""

    def __init__(self):
        self.opened = threading.Semaphore(0)
        self.i = -1

    def __iter__(self):
        return self

    def __next__(self):
        assert self.opened.acquire(timeout=10)
        self.i += 1
        return {"read_id": np.arange(10) + 10 * self.i}


def pilot(max_factor=4.0):
    gate = Gate()
    return gate, Autopilot(Reader(gate, 10, "a test input"), BatchCopies(max_factor))


def ids(batch):
    return int(batch["read_id"][0]) // 10


def test_a_ready_batch_is_always_taken_fresh():
    gate, auto = pilot()
    for _ in range(5):
        gate.opened.release()
    got = []
    for _ in range(3):
        auto.settle()  # the next batch has arrived: ready
        got.append(ids(auto.next(running=Step(True))))
    assert got == [0, 1, 2] and auto.copies == 0
    auto.close()


def test_a_copy_only_once_the_step_in_flight_is_done_and_no_fresh_batch_is_ready():
    gate, auto = pilot()
    gate.opened.release()
    assert ids(auto.next()) == 0  # nothing to copy yet: it waits for the first fresh batch
    assert ids(auto.next(running=Step(True))) == 0  # the input has nothing, the accelerator would wait: a copy
    assert (auto.fresh_items, auto.copies) == (1, 1)
    step = Step(False)
    result = concurrent.futures.ThreadPoolExecutor(1).submit(lambda: auto.next(running=step))
    with pytest.raises(concurrent.futures.TimeoutError):
        result.result(timeout=0.2)  # the step still runs: no copy, it waits for the input or the step
    gate.opened.release()
    assert ids(result.result(timeout=5)) == 1  # the fresh batch came first
    assert auto.effective_echo_factor == 1.5
    step.done.set()
    step = Step(False)
    result = concurrent.futures.ThreadPoolExecutor(1).submit(lambda: auto.next(running=step))
    with pytest.raises(concurrent.futures.TimeoutError):
        result.result(timeout=0.2)
    step.done.set()  # the step ends before the input has batch 2: a copy of the batch copied least (1)
    assert ids(result.result(timeout=5)) == 1 and auto.copies == 2
    gate.opened.release()
    auto.close()


def test_copies_never_pass_the_cap_and_go_to_the_batch_copied_least():
    gate, auto = pilot(max_factor=2.0)
    gate.opened.release()
    auto.next()
    gate.opened.release()
    auto.settle()
    auto.next(running=Step(True))  # batch 1 fresh (ready)
    copies = [ids(auto.next(running=Step(True))) for _ in range(2)]
    assert sorted(copies) == [0, 1]  # the least-copied first, newest among equals
    assert copies[0] == 1
    result = concurrent.futures.ThreadPoolExecutor(1).submit(lambda: auto.next(running=Step(True)))
    with pytest.raises(concurrent.futures.TimeoutError):
        result.result(timeout=0.2)  # 4 delivered for 2 fresh: at the cap of 2 it waits for the input
    gate.opened.release()
    assert ids(result.result(timeout=5)) == 2
    assert auto.effective_echo_factor == 5 / 3
    gate.opened.release()
    auto.close()


def test_the_caller_may_keep_what_it_pops_from_a_copy():
    gate, auto = pilot()
    gate.opened.release()
    first = auto.next()
    first.pop("read_id")
    copy = auto.next(running=Step(True))
    assert "read_id" in copy
    gate.opened.release()
    auto.close()


class Timed:
    """An input that takes ``seconds`` to read each batch (a real wait, as slow storage is)."""

    def __init__(self, seconds: float):
        self.seconds, self.i = seconds, -1

    def __iter__(self):
        return self

    def __next__(self):
        time.sleep(self.seconds)
        self.i += 1
        return {"read_id": np.arange(10) + 10 * self.i}


class StepFor:
    """A step in flight that takes ``seconds`` from its dispatch."""

    def __init__(self, seconds: float):
        self.done_at = time.monotonic() + seconds

    def is_ready(self) -> bool:
        return time.monotonic() >= self.done_at

    def block_until_ready(self) -> "StepFor":
        time.sleep(max(0.0, self.done_at - time.monotonic()))
        return self


def factor_chosen(read_s: float, step_s: float, fresh: int, max_factor: float = 8.0) -> float:
    """Train with an input of ``read_s`` a batch and steps of ``step_s`` until ``fresh`` fresh batches: the
    batches trained per fresh batch."""
    auto = Autopilot(Reader(Timed(read_s), 10, "a test input"), BatchCopies(max_factor))
    running = None
    while auto.fresh_items < fresh:
        auto.next(running=running)
        running = StepFor(step_s)
    auto.close()
    return auto.effective_echo_factor


def test_with_an_input_faster_than_the_step_it_echoes_almost_nothing():
    assert factor_chosen(read_s=0.0, step_s=0.01, fresh=60) < 1.1


def test_with_an_input_slowed_to_three_steps_a_batch_it_echoes_about_three():
    assert 2.4 <= factor_chosen(read_s=0.06, step_s=0.02, fresh=25) <= 3.3


def test_before_augmentation_each_batch_is_augmented_as_delivered_a_copy_anew():
    keys = []

    def augment(batch, key):
        keys.append(key)
        return {**batch, "x": batch["read_id"] * 100 + key}

    gate = Gate()
    batches = Reader(gate, 10, "a test input")
    auto = Autopilot(batches, ExampleCopies(4.0, seed=0, depth=1), augment=augment)
    gate.opened.release()
    fresh = auto.next()
    copy = auto.next(running=Step(True))
    assert (fresh["x"] == np.arange(10) * 100).all()  # fresh batch 0: key 0, augmented on the reading thread
    assert sorted(copy["read_id"]) == list(range(10)) and (copy["x"] == copy["read_id"] * 100 - 1).all()
    assert keys[:2] == [0, -1]  # the copy augmented from the batch as read, with a key of its own
    gate.opened.release()
    auto.settle()
    assert (auto.next(running=Step(True))["x"] == np.arange(10, 20) * 100 + 1).all()  # fresh batch 1: key 1
    assert keys == [0, -1, 1]
    gate.opened.release()
    auto.close()


def replaying(kinds, max_factor=4.0, batches_ready=6):
    gate = Gate()
    for _ in range(batches_ready):
        gate.opened.release()
    plan = Replay(Decisions([[k, 1] for k in kinds]), "a recorded run")
    return Autopilot(Reader(gate, 10, "a test input"), BatchCopies(max_factor), replay=plan)


def test_a_replay_makes_the_recorded_decisions_whatever_the_input_then_follows_the_clock():
    auto = replaying("fccf")
    got = []
    for _ in range(5):
        auto.settle()  # a fresh batch is always ready: the clock would copy nothing
        got.append(ids(auto.next(running=Step(True))))
    assert got == [0, 0, 0, 1, 2] and auto.copies == 2  # two copies as recorded, then fresh by the clock
    assert auto.decisions.runs == [["f", 1], ["c", 2], ["f", 2]]
    auto.close()


def test_a_replayed_resumption_drops_the_batch_read_ahead_and_starts_the_copies_over():
    auto = replaying("frf", max_factor=2.0)
    assert ids(auto.next()) == 0
    assert ids(auto.next(running=Step(True))) == 2  # batch 1 was read ahead when the recorded run saved
    assert auto.pool.candidate() is not None and len(auto.pool.recent) == 1  # only batch 2 to copy now
    assert auto.decisions.runs == [["f", 1], ["r", 1], ["f", 1]]
    auto.close()


def test_a_record_that_copies_where_nothing_can_be_copied_is_refused():
    auto = replaying("c")
    with pytest.raises(ConfigError, match="echo.replay=a recorded run: its decision 1 copies where nothing recent "
                                          "can be copied"):
        auto.next()
    auto.close()


def test_with_a_moving_cap_one_fresh_batch_in_fifty_is_held_out_never_handed_on_nor_counted():
    from echo_experiments.autopilot.cap import HOLD_OUT_EVERY, SLICE_BATCHES, START, TrendCap

    bounded = Autopilot(Reader(iter([]), 10, "a test input"), BatchCopies(8.0), cap_rule=TrendCap(8.0))
    assert bounded.pool.max_factor == START  # the pool copies within the cap the rule has, not within its bound
    bounded.close()
    trend = TrendCap(1.0)  # a bound of 1: no copy, so every batch handed on is fresh
    reader = Reader(iter([{"read_id": np.arange(10) + 10 * i} for i in range(260)]), 10, "a test input")
    loop = Autopilot(reader, BatchCopies(8.0), cap_rule=trend)
    handed = [ids(loop.next()) for _ in range(260 - SLICE_BATCHES)]
    held = [HOLD_OUT_EVERY * k - 1 for k in range(1, SLICE_BATCHES + 1)]  # batches 49, 99, 149 and 199 of the input
    assert [ids(b) for b in trend.slice] == held and not set(held) & set(handed)
    assert handed == [i for i in range(260) if i not in held] and loop.fresh_items == 260 - SLICE_BATCHES
    assert loop.state()["cap_rule"] == {"cap": 1.0, "windows": 0} and loop.copies == 0
    loop.close()


def test_a_span_holds_copies_to_its_factor_per_fresh_batch_whatever_the_pool_still_holds():
    """Paired spans' half windows: copies pooled at a higher cap are not drawn past the span's factor."""
    from echo_experiments.autopilot.cap import PairedCap

    gate = Gate()
    auto = Autopilot(Reader(gate, 10, "a test input"), ExampleCopies(8.0, seed=0, depth=1),
                     cap_rule=PairedCap(8.0, {"cap": 8.0}))
    for _ in range(2):
        gate.opened.release()
        auto.settle()
        auto.next(running=Step(True))
    auto.hold_to(2.0, over_span=True)  # the pool holds 2 x 6 copies; the span allows one per fresh batch from here
    assert auto.pool.max_factor == 2.0 and auto.pool.candidate() is not None
    result = concurrent.futures.ThreadPoolExecutor(1).submit(lambda: auto.next(running=Step(True)))
    with pytest.raises(concurrent.futures.TimeoutError):
        result.result(timeout=0.2)  # no fresh batch in the span yet: no copy, it waits for the input
    gate.opened.release()
    assert ids(result.result(timeout=5)) == 2
    assert "read_id" in auto.next(running=Step(True)) and auto.copies == 1  # one copy for the one fresh batch
    result = concurrent.futures.ThreadPoolExecutor(1).submit(lambda: auto.next(running=Step(True)))
    with pytest.raises(concurrent.futures.TimeoutError):
        result.result(timeout=0.2)  # 2 handed on for 1 fresh: the span's factor, it waits
    gate.opened.release()
    assert ids(result.result(timeout=5)) == 3 and (auto.fresh_items, auto.copies) == (4, 1)
    auto.close()
