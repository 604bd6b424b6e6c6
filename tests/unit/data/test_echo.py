import numpy as np
import pytest
import tensorflow as tf

from echo_experiments.data.echo import echo


def items(ds):
    return [int(x) for x in ds.as_numpy_iterator()]


@pytest.mark.parametrize("factor", [1, 2, 3])
def test_integer_factor_repeats_each_element_in_place(factor):
    got = items(echo(tf.data.Dataset.range(5), factor, seed=0))
    assert got == [i for i in range(5) for _ in range(factor)]


def test_dict_elements_are_echoed_whole():
    ds = tf.data.Dataset.from_tensor_slices({"x": [10, 20], "read_id": [0, 1]})
    got = [(int(d["x"]), int(d["read_id"])) for d in echo(ds, 2, seed=0).as_numpy_iterator()]
    assert got == [(10, 0), (10, 0), (20, 1), (20, 1)]


def test_fractional_factor_repeats_floor_or_ceil_times_and_averages_to_the_factor():
    n = 4000
    got = np.array(items(echo(tf.data.Dataset.range(n), 1.5, seed=7)))
    ids, counts = np.unique(got, return_counts=True)
    assert ids.tolist() == list(range(n))  # every element at least once, in order
    assert set(counts.tolist()) == {1, 2}
    assert np.all(np.diff(got) >= 0)  # copies stay together
    # Binomial(4000, 0.5) extra copies: 6 standard deviations is about +-190.
    assert abs(counts.sum() - 1.5 * n) < 190


@pytest.mark.parametrize("factor", [2.25, 3.75])
def test_other_fractions_average_to_the_factor(factor):
    n = 4000
    counts = np.unique(items(echo(tf.data.Dataset.range(n), factor, seed=1)), return_counts=True)[1]
    assert set(counts.tolist()) == {int(factor), int(factor) + 1}
    assert abs(counts.mean() - factor) < 0.05


def test_fractional_echo_is_reproducible_for_a_seed_and_differs_across_seeds():
    a = items(echo(tf.data.Dataset.range(500), 1.5, seed=3))
    b = items(echo(tf.data.Dataset.range(500), 1.5, seed=3))
    c = items(echo(tf.data.Dataset.range(500), 1.5, seed=4))
    assert a == b
    assert a != c


def _readable_once(limit):
    """Batches of 4; reading the one at position ``limit`` fails, so a test sees how far echo read ahead."""

    def batch(i):
        with tf.control_dependencies([tf.debugging.assert_less(i, tf.constant(limit, tf.int64))]):
            return tf.fill([4], i)

    return tf.data.Dataset.range(8).map(batch)


@pytest.mark.parametrize("factor", [2, 1.5])
def test_batches_echoed_one_at_a_time_hand_on_copies_before_reading_on(factor):
    it = echo(_readable_once(1), factor, seed=0, chunk=1).as_numpy_iterator()
    np.testing.assert_array_equal(next(it), [0, 0, 0, 0])
    if factor == 2:
        np.testing.assert_array_equal(next(it), [0, 0, 0, 0])
    with pytest.raises(tf.errors.InvalidArgumentError):
        list(it)


def test_the_default_chunk_holds_back_up_to_a_chunk_of_elements():
    with pytest.raises(tf.errors.InvalidArgumentError):
        next(echo(_readable_once(1), 2, seed=0).as_numpy_iterator())


def test_factor_below_one_is_refused():
    with pytest.raises(ValueError, match=">= 1"):
        echo(tf.data.Dataset.range(3), 0.5, seed=0)
