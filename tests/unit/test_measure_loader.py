"""R for any loader (echo_experiments.profile.measure_loader): a loader and a step of known speeds give the R, the
recommendation and the idle share the profiler's model says, in the profiler's own lines."""

import itertools
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


def test_an_echoing_loader_is_timed_as_its_echo_stage_and_said_so():
    """A loader whose batches repeat read ids (an echo stage's copies, a window filling then emptying) delivers
    copies fast: its time is the stage's, not its input's, and the lines say which was timed."""
    def echoing():
        i = 0
        while True:
            time.sleep(0.02)
            ids = np.arange(4) + 4 * i
            for _ in range(3):  # each batch three times: copies cost nothing upstream
                yield {"x": np.ones((4, 2), np.float32), "read_id": ids}
            i += 1
    said = []
    measure_loader(echoing(), lambda batch: jnp.zeros(()), n=6, show=said.append)
    assert "(the loader's echo stage delivering, not its input: " in said[0] and "repeated read ids" in said[0]
    plain = []
    measure_loader(({"x": np.ones(2), "read_id": np.arange(2) + 2 * i} for i in itertools.count()),
                   lambda batch: jnp.zeros(()), n=6, show=plain.append)
    assert "(the loader alone: no batch repeated a read id)" in plain[0]


def test_the_recommendation_stays_within_what_a_copy_is_worth():
    from echo_experiments.training.timing import MAX_ADVISED, Timing, report_lines

    far = Timing(2.0, 0.01)  # R = 200: a generator with nothing downstream
    assert far.recommended_echo_factor() == MAX_ADVISED == 8.0
    line = [x for x in report_lines(far, "") if x.startswith("recommended")][0]
    assert line.startswith("recommended echo factor: 8 (the largest e <= R, at most 8; not R: past e=8 a further copy "
                           "was worth under a fifth of a fresh example")
    assert Timing(0.5, 0.1).recommended_echo_factor() == 5.0 and Timing(0.5, 0.1).bound() == ""


def test_a_loader_that_hangs_ends_or_is_no_loader_and_a_bad_count_are_each_one_line():
    import pytest

    from echo_experiments.autopilot import LoaderError
    from echo_experiments.core.schema import ConfigError

    step = lambda batch: jnp.zeros(())  # noqa: E731
    for n, line in ((0, "n=0 is not allowed: an integer from 1 to 1000"),
                    (-3, "n=-3 is not allowed: an integer from 1 to 1000"),
                    (10**9, "n=1000000000 is not allowed: an integer from 1 to 1000")):
        with pytest.raises(ConfigError) as refused:
            measure_loader(iter([]), step, n=n)
        assert str(refused.value) == line
    with pytest.raises(ValueError, match=r"^the loader list ended after 0 batches: measure_loader needs at least 23"):
        measure_loader([], step, show=None)  # an empty list: no bare StopIteration, and a list is taken as iterable
    with pytest.raises(TypeError, match=r"^batches must be iterable"):
        measure_loader(5, step)

    def stops_answering():
        yield {"x": np.ones(2)}
        time.sleep(30)
        yield {"x": np.ones(2)}
    with pytest.raises(LoaderError, match=r"^no batch from the loader generator within 0.5 s"):
        measure_loader(stops_answering(), step, n=2, show=None, timeout_s=0.5)
