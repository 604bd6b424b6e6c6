"""R for any loader (echo_experiments.profile.measure_loader): a loader and a step of known speeds give the R, the
recommendation and the idle share the profiler's model says, in the profiler's own lines."""

import time

import jax.numpy as jnp
import numpy as np

from echo_experiments.profile import measure_loader


def slow_loader(seconds: float):
    """A Python generator of batches, each ``seconds`` in the making (a slow store, a decode): the sleep alone, so
    that on a loaded machine its time is not also a device array's making (each a JAX dispatch, which took 37 ms
    a batch beside two training jobs and the suite's other workers)."""
    batch = {"x": np.ones((8, 8), np.float32)}
    while True:
        time.sleep(seconds)
        yield batch


def test_a_loader_four_times_slower_than_its_step_measures_r_about_4_and_idles_three_quarters():
    said = []

    # Sleeps of 200 and 50 ms, the step's result a JAX array made beforehand (waited for, and ready): a loaded
    # machine adds the same milliseconds to either sleep's wake-up, and a new JAX dispatch a step would add more
    # (sleeps of 100 and 25 ms beside a sweep and the suite's other workers measured R = 2.1, the step 50 ms).
    result = jnp.zeros(())

    def step(batch):
        time.sleep(0.05)
        return result
    timing, idle = measure_loader(slow_loader(0.2), step, n=10, show=said.append)
    assert 3.0 < timing.ratio < 5.0, timing
    assert 3.0 <= timing.recommended_echo_factor() <= 5.0
    assert 0.6 < idle < 0.85, idle
    lines = "\n".join(said).splitlines()
    assert [line.split()[0] for line in lines[:4]] == ["upstream", "downstream", "R", "idle"]
    assert lines[4].startswith("recommended echo factor: ") and "advice: input-bound by R = " in lines[6]


def test_a_step_slower_than_its_loader_is_not_input_bound():
    # Idle about 0.05 by design; above 0.3 only if the 20 fed steps take 0.75 s longer in all than measured.
    # (Steps of 50 ms, 10 of them, allowed 0.2 s: beside a sweep and the suite's other workers it measured 0.44.)
    def step(batch):
        time.sleep(0.1)
        return jnp.asarray(batch["x"])
    timing, idle = measure_loader(slow_loader(0.005), step, n=20, show=None)
    assert timing.ratio < 1 and timing.recommended_echo_factor() == 1.0 and idle < 0.3, (timing, idle)
