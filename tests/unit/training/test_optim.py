"""Learning-rate schedules in fresh examples (or steps): the spec from the config, and the rate at a position."""

import pytest
from conftest import compose_config

from echo_experiments.core.specs import FRESH_EXAMPLES, STEPS, ScheduleSpec
from echo_experiments.training import optim


def spec(*overrides):
    cfg = compose_config("workload=synthetic", *overrides)
    return ScheduleSpec.from_config(cfg.optimizer, cfg.trainer)


def test_a_linear_decay_without_a_length_decays_over_the_fresh_example_budget():
    s = spec("optimizer.schedule=linear_decay", "optimizer.learning_rate=0.1", "optimizer.final_fraction=0.1",
             "trainer.max_fresh_examples=1000")
    assert (s.unit, s.decay) == (FRESH_EXAMPLES, 1000)
    rate = optim.schedule(s)
    assert float(rate(0)) == pytest.approx(0.1) and float(rate(500)) == pytest.approx(0.055)
    assert float(rate(1000)) == pytest.approx(0.01) and float(rate(5000)) == pytest.approx(0.01)


def test_the_warmup_comes_first_and_decay_boundaries_count_from_its_end():
    s = spec("optimizer.schedule=piecewise_exponential", "optimizer.learning_rate=1.0", "optimizer.decay_factor=0.1",
             "optimizer.warmup_fresh_examples=100", "optimizer.decay_boundaries_fresh_examples=[200,400]")
    rate = optim.schedule(s)
    assert float(rate(50)) == pytest.approx(0.5)  # half way through the warmup
    assert float(rate(250)) == pytest.approx(1.0)  # 150 after the warmup: before the first boundary
    assert float(rate(350)) == pytest.approx(0.1) and float(rate(550)) == pytest.approx(0.01)


def test_any_step_key_puts_the_whole_schedule_in_steps_with_the_step_budget():
    s = spec("optimizer.schedule=linear_decay", "optimizer.warmup_steps=10", "trainer.max_steps=300")
    assert (s.unit, s.warmup, s.decay) == (STEPS, 10, 300)
    assert optim.schedule(s).unit == STEPS


def test_a_constant_schedule_is_constant():
    rate = optim.schedule(spec("optimizer.schedule=constant", "optimizer.learning_rate=0.3"))
    assert {round(float(rate(p)), 6) for p in (0, 10, 10**6)} == {0.3}
