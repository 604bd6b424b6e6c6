"""The autopilot's decisions (echo.factor=auto): fresh when the input has a batch ready, a copy only while the
step in flight is done and the input is not, never past the cap; copies of whole batches after batching, of
examples mixed across batches before it, augmented anew before augmentation."""

import collections
import concurrent.futures
import threading
import time

import numpy as np
import pytest

from echo_experiments.core.schema import ConfigError
from echo_experiments.data.storage import latency_at
from echo_experiments.training.autopilot import PROBE_EVERY, Autopilot, BatchCopies, ExampleCopies, WorthGate
from echo_experiments.training.decisions import Decisions, Replay
from echo_experiments.training.waits import Batches


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
        return {"read_id": _Tensor(np.arange(10) + 10 * self.i)}


class _Tensor:
    def __init__(self, value):
        self.value = value

    def numpy(self):
        return self.value


def pilot(max_factor=4.0):
    gate = Gate()
    return gate, Autopilot(Batches(gate, timeout_s=10, source="a test input"), BatchCopies(max_factor))


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


def test_a_latency_schedule_takes_its_spans_in_turn_and_repeats():
    schedule = [[3, 10.0], [2, 1.0]]
    assert [latency_at(i, 5.0, schedule) for i in range(7)] == [10, 10, 10, 1, 1, 10, 10]
    assert latency_at(12345, 5.0, None) == 5.0


class Timed:
    """An input that takes ``seconds`` to read each batch (a real wait, as slow storage is)."""

    def __init__(self, seconds: float):
        self.seconds, self.i = seconds, -1

    def __iter__(self):
        return self

    def __next__(self):
        time.sleep(self.seconds)
        self.i += 1
        return {"read_id": _Tensor(np.arange(10) + 10 * self.i)}


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
    auto = Autopilot(Batches(Timed(read_s), timeout_s=10, source="a test input"), BatchCopies(max_factor))
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


def test_example_copies_are_drawn_from_the_pool_mixed_never_beside_themselves_and_never_past_the_cap():
    pool = ExampleCopies(max_factor=3.0, seed=0, depth=20)
    for i in range(2):
        pool.add({"read_id": np.arange(10) + 10 * i, "x": np.arange(10) + 10 * i})
    trained = collections.Counter(range(20))  # each fresh example once
    batches = []
    while (chosen := pool.candidate()) is not None:
        batch = pool.take(chosen, len(batches) + 1)
        assert len(batch["read_id"]) == 10 and len(set(batch["read_id"])) == 10  # no example beside itself
        assert (batch["x"] == batch["read_id"]).all()  # every key of an example taken together
        trained.update(batch["read_id"].tolist())
        batches.append(batch)
    # 40 copies in the pool, drawn while it holds its depth of 20: three batches, none past the cap of 3
    assert len(batches) == 3 and sum(trained.values()) == 50 and max(trained.values()) <= 3
    assert all(0 < (b["read_id"] < 10).sum() < 10 for b in batches)  # copies mix both batches


def test_no_copy_is_made_until_the_pool_holds_a_fixed_factors_echo_shuffle_of_copies():
    pool = ExampleCopies(max_factor=2.0, seed=0)  # one copy an example; depth 10 x 2 x 10 = 200 copies
    for i in range(19):
        pool.add({"read_id": np.arange(10) + 10 * i})
    assert pool.depth == 200 and pool.candidate() is None
    pool.add({"read_id": np.arange(10) + 190})
    assert pool.candidate() is not None


def _copy_gaps_at_the_inputs_pace(max_factor: float, batch_size: int, fresh: int) -> tuple[list[int], float]:
    """Steps between an example's fresh step and each of its copies, where the input is slow enough that the
    autopilot copies at every chance (a fresh batch, then copies while the pool allows), and the factor it
    echoed at."""
    pool, step, trained_at, gaps, copies = ExampleCopies(max_factor, seed=1), 0, {}, [], 0
    for i in range(fresh):
        ids = np.arange(batch_size) + batch_size * i
        pool.add({"read_id": ids})
        trained_at.update({int(k): step for k in ids})
        step += 1
        for _ in range(int(max_factor) - 1):
            if (chosen := pool.candidate()) is None:
                break
            copies += 1
            gaps += [step - trained_at[int(k)] for k in pool.take(chosen, copies)["read_id"]]
            step += 1
    return gaps, 1 + copies / fresh


def test_at_the_cap_its_copies_are_spread_at_least_as_far_as_a_fixed_factors_echo_shuffle_spreads_them():
    import tensorflow as tf

    from echo_experiments.core.placement import echo_shuffle_size
    from echo_experiments.data.echo import echo

    batch_size, fresh = 32, 400
    ds = echo(tf.data.Dataset.range(batch_size * fresh), 2.0, seed=0)
    ds = ds.shuffle(echo_shuffle_size(2.0, batch_size), seed=0).batch(batch_size)
    seen, fixed_gaps = {}, []
    for step, batch in enumerate(ds.as_numpy_iterator()):
        for k in batch.tolist():
            fixed_gaps += [step - seen[k]] if k in seen else []
            seen.setdefault(k, step)
    gaps, factor = _copy_gaps_at_the_inputs_pace(2.0, batch_size, fresh)
    # Drawn from the newest batches, every copy came a step after its fresh batch (the median gap was 1).
    assert np.median(gaps) >= np.median(fixed_gaps) >= 5
    assert factor >= 1.9  # and it still echoes at its cap: the pool's first fill costs 20 of 400 fresh batches


def test_before_augmentation_each_batch_is_augmented_as_delivered_a_copy_anew():
    keys = []

    def augment(batch, key):
        keys.append(key)
        return {**batch, "x": batch["read_id"] * 100 + key}

    gate = Gate()
    batches = Batches(gate, timeout_s=10, source="a test input")
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
    return Autopilot(Batches(gate, timeout_s=10, source="a test input"), BatchCopies(max_factor), replay=plan)


def test_decisions_are_kept_as_runs_and_a_resumed_replay_goes_on_after_the_batches_it_trained():
    decisions = Decisions()
    for kind in "ffccfrcf":
        decisions.add(kind)
    assert decisions.runs == [["f", 2], ["c", 2], ["f", 1], ["r", 1], ["c", 1], ["f", 1]]
    plan = Replay(Decisions(decisions.runs), "a recorded run")
    plan.seek(5)  # five batches trained: the resumption recorded after them is still to make
    assert [plan.next() for _ in range(4)] == ["r", "c", "f", None]


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


def test_what_an_example_copy_holds_follows_from_its_index_not_from_how_often_the_pool_was_asked():
    def pool():
        p = ExampleCopies(max_factor=4.0, seed=3, depth=1)
        for i in range(3):
            p.add({"read_id": np.arange(10) + 10 * i})
        return p
    asked_often, asked_once = pool(), pool()
    for _ in range(5):
        asked_often.candidate()  # the clock asks at every gap, and takes a fresh batch if it comes first
    first = asked_often.take(asked_often.candidate(), 1)["read_id"]
    assert (first == asked_once.take(asked_once.candidate(), 1)["read_id"]).all()
    assert not (first == pool().take(pool().candidate(), 2)["read_id"]).all()  # another index, another draw


def test_the_worth_gate_closes_below_its_least_worth_and_still_takes_one_chance_in_probe_every():
    gate = WorthGate(0.25)
    assert gate.open and gate.allows()  # no estimate yet: copies are made, and measured
    gate.observe(0.1, 60.0)
    assert not gate.open
    taken = [gate.allows() for _ in range(3 * PROBE_EVERY)]
    assert sum(taken) == 3 and taken[PROBE_EVERY - 1]  # one chance in PROBE_EVERY, for the estimate to go on
    gate.observe(None, 1.0)  # an evaluation with too few copies to tell: the estimate stands
    assert (gate.estimate, gate.weight) == (0.1, 60.0)
    gate.observe(0.9, 1.0)  # one probing copy does not overturn sixty: (30 x 0.1 + 0.9) / 31
    assert gate.estimate == pytest.approx(3.9 / 31) and not gate.open
    for _ in range(6):  # copies that have become worth it, measured evaluation after evaluation
        gate.observe(0.9, 2.0)
    assert gate.open and all(gate.allows() for _ in range(5))
    again = WorthGate(0.25, gate.state())  # as a checkpoint keeps it
    assert (again.estimate, again.weight, again.refused, again.open) == (gate.estimate, gate.weight, 3 * PROBE_EVERY,
                                                                         True)
    never = WorthGate(0.0)
    never.observe(-1.0, 50.0)
    assert never.open  # min_worth 0: copy whenever the step would wait, whatever the estimate


def test_while_copies_are_not_worth_their_cost_the_autopilot_waits_for_the_input():
    gate, auto = Gate(), None
    auto = Autopilot(Batches(gate, timeout_s=10, source="a test input"), BatchCopies(8.0), min_worth=0.5)
    gate.opened.release()
    auto.next()
    assert ids(auto.next(running=Step(True))) == 0 and auto.copies == 1  # no estimate yet: it copies
    auto.gate.observe(0.1, 30.0)  # an evaluation says a copy is worth 0.1 of a fresh example
    result = concurrent.futures.ThreadPoolExecutor(1).submit(lambda: auto.next(running=Step(True)))
    with pytest.raises(concurrent.futures.TimeoutError):
        result.result(timeout=0.3)  # the step is done and nothing is ready, but a copy is not worth it
    gate.opened.release()
    assert ids(result.result(timeout=5)) == 1 and auto.copies == 1
    auto.gate.observe(0.9, 60.0)  # (15 x 0.1 + 60 x 0.9) / 75 = 0.74
    assert ids(auto.next(running=Step(True))) == 1 and auto.copies == 2  # worth it again: a copy
    saved = auto.state()
    assert (saved["worth_estimate"], saved["worth_weight"], saved["worth_refused"]) == (pytest.approx(0.74), 75, 1)
    gate.opened.release()
    auto.close()
