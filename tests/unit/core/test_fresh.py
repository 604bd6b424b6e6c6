"""Fresh examples counted from read ids: each distinct id once, the mask growing as ids do, and ids that are
not non-negative integers refused in one line (numpy would read -1 as the last position, 2.7 as 2)."""

import numpy as np
import pytest

from echo_experiments.core.fresh import FreshCounter


def test_fresh_counter_counts_distinct_ids_once():
    counter = FreshCounter()
    assert counter.update(np.array([0, 1, 1, 2])) == 3
    assert counter.update(np.array([2, 3, 3])) == 1
    assert counter.update(np.array([], dtype=np.int64)) == 0
    assert counter.count == 4


def test_fresh_counter_grows_past_its_initial_size():
    counter = FreshCounter()
    big = np.array([5, 1_000_000, 70_000, 1_000_000])
    assert counter.update(big) == 3
    assert counter.update(np.array([70_000, 4])) == 1
    assert counter.count == 4


@pytest.mark.parametrize("ids, line", [
    ([-1, -2], "read ids must be non-negative integers, got -2"),
    ([1.5, 2.0], "read ids must be non-negative integers, got 1.5"),
    (["a", "b"], "read ids must be non-negative integers, got <U1 values ('a')"),
    ([True, False], "read ids must be non-negative integers, got bool values (True)"),
    ([np.nan], "read ids must be non-negative integers, got nan"),
])
def test_ids_that_are_not_non_negative_integers_are_refused_and_nothing_is_counted(ids, line):
    counter = FreshCounter()
    with pytest.raises(ValueError) as raised:
        counter.update(ids)
    assert str(raised.value) == line and counter.count == 0


def test_whole_floats_count_as_their_integers():
    counter = FreshCounter()
    assert counter.update(np.array([3.0, 4.0, 3.0])) == 2 and counter.count == 2
