"""R for any loader (echo_experiments.profile.measure_loader): a loader and a step of known speeds give the R, the
recommendation and the idle share the profiler's model says, in the profiler's own lines."""

import time

import jax.numpy as jnp

from echo_experiments.profile import measure_loader


def slow_loader(seconds: float):
    """A Python generator of batches, each ``seconds`` in the making (a slow store, a decode)."""
    while True:
        time.sleep(seconds)
        yield {"x": jnp.ones((8, 8))}


def test_a_loader_four_times_slower_than_its_step_measures_r_about_4_and_idles_three_quarters():
    said = []

    def step(batch):
        time.sleep(0.005)
        return batch["x"].sum()  # a JAX result, waited for
    timing, idle = measure_loader(slow_loader(0.02), step, n=20, show=said.append)
    assert 3.0 < timing.ratio < 5.0, timing
    assert 3.0 <= timing.recommended_echo_factor() <= 5.0
    assert 0.6 < idle < 0.85
    lines = "\n".join(said).splitlines()
    assert [line.split()[0] for line in lines[:4]] == ["upstream", "downstream", "R", "idle"]
    assert lines[4].startswith("recommended echo factor: ") and "advice: input-bound by R = " in lines[6]


def test_a_step_slower_than_its_loader_is_not_input_bound():
    def step(batch):
        time.sleep(0.01)
        return batch["x"]
    timing, idle = measure_loader(slow_loader(0.001), step, n=10, show=None)
    assert timing.ratio < 1 and timing.recommended_echo_factor() == 1.0 and idle < 0.3
