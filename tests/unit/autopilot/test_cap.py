"""The cap the autopilot chooses (echo.cap=trend): a slice of fresh batches held out, and the cap moved window
over window by the slice's loss, within 1 and the safety bound."""

import math

import pytest

from echo_experiments.autopilot.cap import HOLD_OUT_EVERY, SLICE_BATCHES, START, STEP, WINDOW_STEPS, TrendCap


def test_one_fresh_batch_in_fifty_is_held_out_until_the_slice_is_full():
    trend = TrendCap(32)
    held = [i for i in range(HOLD_OUT_EVERY * (SLICE_BATCHES + 3)) if trend.holds_out(i) and trend.hold(i) is None]
    assert held == [HOLD_OUT_EVERY * k - 1 for k in range(1, SLICE_BATCHES + 1)] and trend.slice == held
    assert not trend.due(WINDOW_STEPS - 1) and trend.due(WINDOW_STEPS) and trend.due(3 * WINDOW_STEPS)
    assert not TrendCap(32).due(WINDOW_STEPS)  # no slice yet: nothing to measure


def test_the_cap_rises_while_held_out_loss_falls_and_falls_when_it_rises():
    trend = TrendCap(4.0)
    assert trend.update(2.0) == START  # the first window only measures
    assert trend.update(1.9) == pytest.approx(START * STEP)  # 5% lower: the copies hold nothing back
    assert trend.update(1.88) == pytest.approx(START * STEP)  # 1% lower: kept
    assert trend.update(1.95) == pytest.approx(START * STEP)  # 3.7% higher: within the band, kept
    assert trend.update(2.2) == pytest.approx(START)  # 13% higher: lowered
    for loss in (2.0, 1.8, 1.6, 1.4, 1.2):
        cap = trend.update(loss)
    assert cap == 4.0  # never past the safety bound
    for _ in range(10):
        trend.update(math.nan)  # a loss that is not finite lowers it
    assert trend.cap == 1.0 and trend.windows == 20


def test_a_resumed_cap_goes_on_from_its_state_and_takes_its_slice_anew():
    trend = TrendCap(8.0)
    trend.update(1.0)
    trend.update(0.5)
    resumed = TrendCap(8.0, trend.state())
    assert resumed.cap == pytest.approx(START * STEP) and resumed.windows == 2 and resumed.slice == []
    assert resumed.update(0.1) == pytest.approx(START * STEP)  # after a resume the first window only measures
    assert TrendCap(1.5, {"cap": 3.0}).cap == 1.5  # a smaller bound holds the saved cap too
    with pytest.raises(ValueError, match="echo.max_factor"):
        TrendCap(0.5)
