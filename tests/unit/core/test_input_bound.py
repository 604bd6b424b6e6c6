"""The users' words for how input-bound a training is: the share of step time spent waiting for input without
echoing (1 - 1/R) and XProf's class of it (not below 5%, moderately from 5%, highly from 20%)."""

import math

import pytest

from echo_experiments.core.input_bound import in_words, wait_share, xprof_class


@pytest.mark.parametrize("ratio, share, label", [
    (0.3, 0.0, "not input-bound"), (1.0, 0.0, "not input-bound"), (1.04, 1 - 1 / 1.04, "not input-bound"),
    (1.06, 1 - 1 / 1.06, "moderately input-bound"), (1.25, 0.2, "highly input-bound"),
    (6.0, 5 / 6, "highly input-bound")])
def test_the_share_waiting_and_its_class_follow_r(ratio, share, label):
    assert wait_share(ratio) == pytest.approx(share) and xprof_class(wait_share(ratio)) == label


def test_an_unmeasured_r_is_said_to_be_unmeasured():
    assert wait_share(None) is None and wait_share(math.nan) is None and xprof_class(None) is None
    assert in_words(None) == "waiting for input: not measured"
    assert in_words(0.18) == "18% of step time waiting for input (moderately input-bound)"
