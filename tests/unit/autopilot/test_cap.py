"""The cap the autopilot chooses (echo.cap=trend or paired): a slice of fresh batches held out, and the cap
moved window over window by the slice's loss, within 1 and the safety bound."""

import math

import pytest

from echo_experiments.autopilot.cap import (
    HOLD_OUT_EVERY,
    SLICE_BATCHES,
    START,
    STEP,
    WINDOW_STEPS,
    PairedCap,
    TrendCap,
    cap_rule,
)


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


def test_paired_spans_copy_at_the_cap_then_half_then_half_then_the_cap_and_move_toward_the_faster_side():
    paired = PairedCap(32.0)
    assert paired.copying() == START  # before the first measure: at the cap
    paired.update(2.0, math.nan)  # the first window only measures
    sides = []
    for loss, seconds in [(1.6, 10.0), (1.5, 20.0), (1.4, 20.0), (1.2, 10.0)]:  # at the cap: 0.6 in 20 s; half 0.2/40
        sides.append(paired.copying())
        paired.update(loss, seconds)
    assert sides == [START, START / 2, START / 2, START] and paired.cap == pytest.approx(START * STEP)
    for loss, seconds in [(1.19, 10.0), (1.0, 10.0), (0.8, 10.0), (0.79, 10.0)]:  # at half: 0.4 in 20 s, faster
        paired.update(loss, seconds)
    assert paired.cap == pytest.approx(START) and paired.windows == 9


def test_paired_spans_favour_neither_side_of_a_loss_that_falls_ever_more_slowly():
    """A B B A: where the copies change nothing (equal seconds) and the loss falls on a parabola, the two sides
    fall alike and the cap is not raised, where A B A B would raise it at every block."""
    paired = PairedCap(32.0, {"cap": 8.0})
    for window in range(1 + 4 * 5):
        paired.update((40 - window) ** 2 / 1024, 10.0)  # exact in binary: the two sides tie exactly
    assert paired.cap == pytest.approx(8.0 / STEP ** 5)
    low = PairedCap(32.0, {"cap": 1.2})
    low.update(1.0, math.nan)
    low.update(0.9, 10.0)
    assert low.copying() == 1.0  # half the cap, at least 1


def test_paired_spans_start_the_block_over_after_a_loss_that_is_not_finite_or_a_resume():
    paired = PairedCap(8.0, {"cap": 4.0})
    for loss in [2.0, 1.5, 1.4]:
        paired.update(loss, 10.0)
    assert paired.copying() == 2.0  # in the block's second window, at half
    paired.update(math.nan, 10.0)
    assert paired.cap == pytest.approx(4.0 / STEP) and paired.copying() == paired.cap and paired.position is None
    resumed = PairedCap(8.0, paired.state())
    assert resumed.cap == paired.cap and resumed.windows == 4 and resumed.position is None
    resumed.update(1.0, math.nan)  # after a resume the first window only measures
    assert resumed.position == 0 and resumed.cap == paired.cap
    assert isinstance(cap_rule("paired", 8.0), PairedCap) and isinstance(cap_rule("trend", 8.0), TrendCap)
    assert cap_rule("fixed", 8.0) is None
