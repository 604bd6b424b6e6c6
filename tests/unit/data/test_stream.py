"""The training pipeline on real Fashion-MNIST records: exact counts, and where the copies land."""

from collections import Counter

import numpy as np
import pytest
from conftest import assert_each_read_delivered, compose_config, echoed_batches, fresh_and_delivered

from echo_experiments.workloads import make

N = 64  # real examples per epoch in these tests
B = 8
EXAMPLE_POINTS = ["before_augmentation", "after_augmentation", "before_batching"]
PLACEMENTS = ["none", *EXAMPLE_POINTS, "after_batching"]


@pytest.fixture(scope="module")
def workload(data_dir):
    return make(compose_config().workload, data_dir)


def batches(workload, placement, factor, shuffle=0, batch_size=B, seed=0):
    """One epoch of N real examples through the pipeline, as a list of NumPy batches."""
    return echoed_batches(workload, workload.train_source.encoded(seed).take(N), placement, factor, shuffle=shuffle,
                          batch_size=batch_size, shuffle_buffer=N, seed=seed)


@pytest.mark.parametrize("placement", PLACEMENTS)
def test_factor_one_is_the_plain_pipeline(workload, placement):
    plain = batches(workload, "none", 1)
    same = batches(workload, placement, 1, shuffle=16)  # no echo stage, so no echo shuffle either
    assert len(same) == len(plain) == N // B
    for a, b in zip(plain, same):
        for key in ("image", "label", "read_id"):
            np.testing.assert_array_equal(a[key], b[key])


@pytest.mark.parametrize("placement", PLACEMENTS[1:])
@pytest.mark.parametrize("factor", [1, 2, 3])
def test_integer_factors_deliver_exactly_factor_times_the_fresh_examples(workload, placement, factor):
    out = batches(workload, placement, factor)
    assert_each_read_delivered(out, N, factor)
    assert len(out) == factor * N // B


@pytest.mark.parametrize("placement", EXAMPLE_POINTS)
def test_example_echo_at_one_and_a_half(workload, placement):
    out = batches(workload, placement, 1.5, batch_size=1)  # batch 1: no partial batch is dropped
    fresh, delivered = fresh_and_delivered(out)
    copies = Counter(int(b["read_id"][0]) for b in out)
    assert fresh == N == len(copies)
    assert set(copies.values()) == {1, 2}
    assert delivered == sum(copies.values())
    assert 1.2 * N < delivered < 1.8 * N


def test_batch_echo_at_one_and_a_half(workload):
    out = batches(workload, "after_batching", 1.5)
    fresh, delivered = fresh_and_delivered(out)
    copies = Counter(tuple(b["read_id"]) for b in out)
    assert fresh == N
    assert len(copies) == N // B and set(copies.values()) == {1, 2}
    assert delivered == B * sum(copies.values())


def _copy_pairs(out):
    """Items in delivery order; with factor 2 and no echo shuffle, copies sit at positions 2k, 2k+1."""
    images = np.concatenate([b["image"] for b in out])
    ids = np.concatenate([b["read_id"] for b in out])
    assert np.array_equal(ids[0::2], ids[1::2])
    return images[0::2], images[1::2]


def test_echo_before_augmentation_augments_each_copy_afresh(workload):
    first, second = _copy_pairs(batches(workload, "before_augmentation", 2))
    differ = [not np.array_equal(a, b) for a, b in zip(first, second)]
    # 25 crop offsets x 2 flips: a pair matches by chance about 1 time in 50.
    assert sum(differ) >= N - 6


@pytest.mark.parametrize("placement", ["after_augmentation", "before_batching"])
def test_echo_after_augmentation_repeats_identical_copies(workload, placement):
    first, second = _copy_pairs(batches(workload, placement, 2))
    np.testing.assert_array_equal(first, second)


def test_batch_echo_repeats_whole_batches_back_to_back(workload):
    out = batches(workload, "after_batching", 2)
    for a, b in zip(out[0::2], out[1::2]):
        for key in ("image", "label", "read_id"):
            np.testing.assert_array_equal(a[key], b[key])
    assert not np.array_equal(out[0]["read_id"], out[2]["read_id"])


def test_batch_echo_shuffle_separates_the_copies(workload):
    out = batches(workload, "after_batching", 2, shuffle=N // B)
    keys = [tuple(b["read_id"]) for b in out]
    assert Counter(keys) == {k: 2 for k in set(keys)} and len(set(keys)) == N // B
    assert any(a != b for a, b in zip(keys[0::2], keys[1::2]))


def test_example_echo_shuffle_spreads_copies_across_batches(workload):
    plain = batches(workload, "after_augmentation", 2)
    shuffled = batches(workload, "after_augmentation", 2, shuffle=N)
    dups = lambda out: sum(B - len(set(b["read_id"].tolist())) for b in out)  # noqa: E731
    assert dups(plain) == N  # every batch holds 4 examples twice
    assert dups(shuffled) < N // 2
    assert fresh_and_delivered(shuffled) == (N, 2 * N)


def test_the_default_echo_shuffle_spreads_copies_and_zero_keeps_them_adjacent(workload):
    dups = lambda out: sum(B - len(set(b["read_id"].tolist())) for b in out)  # noqa: E731
    adjacent = batches(workload, "after_augmentation", 2, shuffle=0)
    default = batches(workload, "after_augmentation", 2, shuffle=None)  # 10 x 2 x 8 = 160 examples
    assert dups(adjacent) == N  # unshuffled, every example meets its copy in its batch: a batch of B/e
    _copy_pairs(adjacent)  # copies at positions 2k, 2k+1
    assert dups(default) < N // 4  # e-1 copies x B/S: about 4 of 64 here
    assert fresh_and_delivered(default) == (N, 2 * N)


def test_pipeline_is_reproducible_for_a_seed(workload):
    a = batches(workload, "before_augmentation", 1.5, shuffle=16, seed=5)
    b = batches(workload, "before_augmentation", 1.5, shuffle=16, seed=5)
    c = batches(workload, "before_augmentation", 1.5, shuffle=16, seed=6)
    assert all(np.array_equal(x["image"], y["image"]) for x, y in zip(a, b)) and len(a) == len(b)
    assert not all(np.array_equal(x["read_id"], y["read_id"]) for x, y in zip(a, c))
