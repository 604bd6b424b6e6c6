"""The echo stage for Grain pipelines (echo_experiments.grain): exact fresh counts, every copy where the factor
says, each copy its own random draw downstream, and an iterator restored exactly, from its state and through
Orbax, at e = 1, 1.5, 2 and 4, per element and per batch."""

from collections import Counter

import grain
import numpy as np
import orbax.checkpoint as ocp
import pytest
from grain.experimental import assert_equal_output_after_checkpoint

from echo_experiments.grain import FreshCounter, echo, window_size, with_read_ids

N, BATCH = 48, 4
FACTORS = (1.0, 1.5, 2.0, 4.0)


def records(n: int = N) -> grain.MapDataset:
    return grain.MapDataset.range(n).map(lambda i: {"image": np.full((2, 2), i, np.uint8)})


def per_element(factor: float, seed: int = 0, n: int = N) -> grain.IterDataset:
    """Echo before augmentation: copies shuffled apart in windows, then a random draw each."""
    ds = echo(with_read_ids(records(n)), factor, seed=seed, window=window_size(factor, BATCH))
    return ds.random_map(lambda x, rng: {**x, "draw": rng.random()}, seed=seed + 1)


def per_batch(factor: float, seed: int = 0, n: int = N) -> grain.IterDataset:
    return echo(with_read_ids(records(n)).batch(BATCH), factor, seed=seed)


def read_ids(elements) -> list[int]:
    return [int(i) for x in elements for i in np.ravel(x["read_id"])]


@pytest.mark.parametrize("factor", FACTORS)
@pytest.mark.parametrize("build", [per_element, per_batch])
def test_every_read_is_fresh_once_and_delivered_floor_or_ceil_of_e_times(build, factor):
    elements = list(build(factor))
    delivered = Counter(read_ids(elements))
    assert sorted(delivered) == list(range(N))  # every read arrives, none is invented
    assert set(delivered.values()) <= {int(factor), int(np.ceil(factor))}
    fresh = FreshCounter()
    counts = [fresh.update(x["read_id"]) for x in elements]
    assert fresh.count == N and sum(counts) == N
    if factor == int(factor):
        assert set(delivered.values()) == {int(factor)}
    else:  # some reads (or batches) get their extra copy and some not, the same ones for the same seed
        assert 0 < sum(v == 2 for v in delivered.values()) < N
        assert Counter(read_ids(build(factor))) == delivered
        assert Counter(read_ids(build(factor, seed=9))) != delivered


def test_each_copy_gets_its_own_draw_after_the_stage_and_copies_are_shuffled_apart():
    elements = list(per_element(2.0))
    draws = {}
    for x in elements:
        draws.setdefault(int(x["read_id"]), []).append(x["draw"])
    assert all(len(set(d)) == 2 for d in draws.values())
    positions = {}
    for place, i in enumerate(read_ids(elements)):
        positions.setdefault(i, []).append(place)
    assert sum(b - a == 1 for a, b in positions.values()) < N / 4  # unshuffled, every pair would be adjacent


@pytest.mark.parametrize("factor", FACTORS)
@pytest.mark.parametrize("build", [per_element, per_batch])
def test_the_iterator_restored_at_every_state_gives_the_same_rest(build, factor):
    assert_equal_output_after_checkpoint(build(factor, n=16))  # restores at each of its states: quadratic


def test_an_iterator_saved_through_orbax_resumes_where_it_was(tmp_path):
    whole = list(per_element(1.5))
    iterator = iter(per_element(1.5))
    first = [next(iterator) for _ in range(17)]
    with ocp.CheckpointManager(tmp_path, item_handlers={"input": grain.checkpoint.CheckpointHandler()}) as manager:
        manager.save(17, args=ocp.args.Composite(input=grain.checkpoint.CheckpointSave(iterator)))
        manager.wait_until_finished()
        resumed = iter(per_element(1.5))
        manager.restore(17, args=ocp.args.Composite(input=grain.checkpoint.CheckpointRestore(resumed)))
    rest = list(resumed)
    np.testing.assert_equal(first + rest, whole)


def test_what_the_stage_cannot_echo_is_refused_saying_what_to_do():
    with pytest.raises(ValueError, match="factor=0.5 is not allowed: a real number >= 1 and <= 1000"):
        echo(with_read_ids(records()), 0.5)
    with pytest.raises(ValueError, match="echo needs elements with a read_id"):
        list(echo(records(), 2.0))
    with pytest.raises(TypeError, match="through grain.DataLoader a transform after a FlatMapTransform gets "
                                        "rng=None, so echo with the dataset API"):
        echo(grain.DataLoader(data_source=[1, 2], sampler=grain.samplers.IndexSampler(2, num_epochs=1)), 2.0)
    with pytest.raises(TypeError, match="with_read_ids takes a dataset of dicts"):
        list(with_read_ids(grain.MapDataset.range(3)))


@pytest.mark.parametrize("kwargs, line", [
    ({"factor": 1e9}, "factor=1000000000 is not allowed: a real number >= 1 and <= 1000"),
    ({"factor": "2"}, "factor='2' is not allowed: a real number >= 1 and <= 1000"),
    ({"factor": True}, "factor=True is not allowed: a real number >= 1 and <= 1000"),
    ({"window": -5}, "window=-5 is not allowed: null or an integer >= 0 (elements per shuffled window)"),
    ({"seed": 1.5}, "seed=1.5 is not allowed: an integer in [0, 2147483647]"),
])
def test_the_grain_stage_refuses_what_the_command_line_refuses_in_one_line(kwargs, line):
    """A negative window emptied the stream and a factor of 1e9 built a billion-element list: refused at the call."""
    import grain

    from echo_experiments.core.schema import ConfigError
    from echo_experiments.grain import echo, window_size, with_read_ids

    ds = with_read_ids(grain.MapDataset.range(10).map(lambda i: {"x": np.int64(i)}))
    args = {"factor": 2.0, **kwargs}
    with pytest.raises(ConfigError) as refused:
        echo(ds, args.pop("factor"), **args)
    assert str(refused.value) == line
    with pytest.raises(ConfigError, match=r"^batch_size=0 is not allowed: an integer >= 1"):
        window_size(2.0, 0)


def test_a_grain_state_restores_only_into_a_stage_of_its_factor_seed_and_window():
    import grain

    from echo_experiments.grain import echo, with_read_ids

    ds = with_read_ids(grain.MapDataset.range(100).map(lambda i: {"x": np.int64(i)}))
    saved = iter(echo(ds, 2.0, seed=0, window=8))
    for _ in range(5):
        next(saved)
    state = saved.get_state()
    for other, line in (((3.0, 0, 8), "echo factor=2.0, this pipeline has factor=3.0"),
                        ((2.0, 1, 8), "echo seed=0, this pipeline has seed=1"),
                        ((2.0, 0, 16), "echo window=8, this pipeline has window=16")):
        with pytest.raises(ValueError, match=f"^the iterator state was saved with {line}"):
            iter(echo(ds, other[0], seed=other[1], window=other[2])).set_state(state)
    same = iter(echo(ds, 2.0, seed=0, window=8))
    same.set_state(state)
    assert [next(same)["read_id"] for _ in range(5)] == [next(saved)["read_id"] for _ in range(5)]
