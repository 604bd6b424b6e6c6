"""The profiler's arithmetic and command."""

import os
import re
import signal
import subprocess
import sys
import time

import jax
import pytest
from conftest import FAST, compose_config

from echo_experiments.core.specs import RunSpec
from echo_experiments.data import stream
from echo_experiments.data.storage import Store
from echo_experiments.profile import measure_loader, store_hint
from echo_experiments.training import optim
from echo_experiments.training.step import initial_state, make_train_step
from echo_experiments.training.timing import OtherWork, Timing
from echo_experiments.workloads import make


def test_ratio_and_recommended_factor():
    t = Timing(upstream_s_per_batch=0.25, downstream_s_per_step=0.05)
    assert t.ratio == pytest.approx(5.0)
    assert t.recommended_echo_factor() == 5.0
    assert Timing(0.1234, 0.05).recommended_echo_factor() == 2.46  # the largest e <= R = 2.468
    assert Timing(0.01, 0.05).recommended_echo_factor() == 1.0  # not input-bound: no echoing


def test_idle_fraction_is_the_time_not_spent_in_steps():
    t = Timing(0.25, 0.05)
    assert t.idle_fraction(steps=100, elapsed_s=25.0) == pytest.approx(0.8)
    assert t.idle_fraction(steps=100, elapsed_s=25.0, busy_s=5.0) == pytest.approx(0.6)  # evaluation is busy
    assert t.idle_fraction(steps=100, elapsed_s=4.0) == 0.0  # clamped: steps ran faster than on a cached batch
    assert t.as_dict()["upstream_downstream_ratio"] == pytest.approx(5.0)


def test_other_work_counts_another_process_cpu_time():
    other = OtherWork(carried_s=2.0)
    # One CPU-second however busy the machine is (process_time, not wall time).
    spinner = subprocess.Popen([sys.executable, "-c", "import time\nwhile time.process_time() < 1.0: pass"])
    os.waitid(os.P_PID, spinner.pid, os.WEXITED | os.WNOWAIT)  # exited, not yet reaped: not this process's child time
    used = other.seconds() - 2.0
    spinner.wait()
    # The spinner's second, and the interpreter's start-up, counted in 10 ms ticks; more if tests run beside it.
    assert used >= 0.95


def test_profile_command_prints_the_timing_facts():
    proc = subprocess.run([sys.executable, "-m", "echo_experiments.profile", *FAST, "trainer.max_steps=40",
                           "trainer.profile_batches=5", "workload.shuffle_buffer=256"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    for label in ("upstream ", "downstream ", "R ", "idle ", "recommended echo factor: ", "predicted   speedup"):
        assert label in out
    assert "40-step run" in out and "advice: " in out
    # The users' words beside R: the share of step time waiting for input, and XProf's class of it.
    assert re.search(r"^R +[0-9.]+: [0-9]+% of step time waiting for input \((not|moderately|highly) input-bound\) "
                     r"without echoing$", out, re.M), out


def test_the_wait_share_and_its_class_stand_beside_r_on_a_slow_and_a_fast_input():
    from echo_experiments.training.timing import report_lines

    slow, fast = Timing(0.5, 0.1), Timing(0.01, 0.04)
    assert "R           5.00: 80% of step time waiting for input (highly input-bound) without echoing" in \
        report_lines(slow, "")
    assert "R           0.25: 0% of step time waiting for input (not input-bound) without echoing" in \
        report_lines(fast, "")
    assert (slow.as_dict()["input_wait_share"], slow.as_dict()["input_bound"]) == (pytest.approx(0.8),
                                                                                   "highly input-bound")
    assert (fast.as_dict()["input_wait_share"], fast.as_dict()["input_bound"]) == (0.0, "not input-bound")


@pytest.mark.slow  # about 40 s: `make test-all` runs it
def test_measure_loader_and_the_profiler_give_the_same_R_for_the_built_in_stream(data_dir):
    """Two measurements of one stream and step: the profiler's, in its own run, and measure_loader's, on the stream
    and step built here as the trainer builds them. A slow store (each read waits 4 ms) sets the upstream time."""
    overrides = [*FAST, "storage=emulated", "storage.latency_ms=4", "trainer.profile_batches=20",
                 "trainer.max_steps=30", "workload.shuffle_buffer=256"]
    proc = subprocess.run([sys.executable, "-m", "echo_experiments.profile", *overrides],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    profiled = float(re.search(r"^R +([0-9.]+):", proc.stdout, re.M).group(1))
    cfg = compose_config(*overrides)
    workload, spec = make(cfg.workload, data_dir), RunSpec.from_config(cfg)
    tx, rate = optim.optimizer(spec.optimizer), jax.numpy.float32(0.01)
    state, step = initial_state(workload, tx, cfg.seed, None), jax.jit(make_train_step(workload, tx))
    with Store(spec.storage, workload.train_source) as store:
        batches = stream.build(workload, spec.pipeline.without_echo(), store=store).as_numpy_iterator()
        timing, _ = measure_loader(batches, lambda batch: step(state, {k: v for k, v in batch.items()
                                                                      if k != "read_id"}, rate)[1], show=None)
    # The store's waits set the upstream time, on a loaded machine too: within a factor of 2 (echoed batches would
    # halve it). The synthetic step takes milliseconds, and beside the suite's other workers it varied 2x between
    # the two measurements, so R is held within a factor of 4 (a factor of the batch size would be 32).
    up = float(re.search(r"^upstream +([0-9.]+) s", proc.stdout, re.M).group(1))
    assert 0.5 < timing.upstream_s_per_batch / up < 2, (timing, up)
    assert 0.25 < timing.ratio / profiled < 4, (timing, profiled)


def test_a_signal_while_profiling_is_one_line(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "echo_experiments.profile", *FAST, "storage=emulated",
                             "storage.latency_ms=20", "trainer.profile_batches=5"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "TMPDIR": str(tmp_path)})
    deadline = time.time() + 120
    while not any(tmp_path.glob("echo_profile_*")) and proc.poll() is None and time.time() < deadline:
        time.sleep(0.2)  # the temporary run folder: the command has begun its run
    assert proc.poll() is None, proc.stderr.read()[-3000:]
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGINT and "Traceback" not in err, err[-3000:]
    assert [line for line in err.splitlines() if line.startswith("error: ")] == [
        "error: stopped by SIGINT; nothing is kept (the profile runs in a temporary folder): run it again"]


def test_the_advice_says_what_to_do_and_when_the_machine_was_busy():
    assert Timing(0.01, 0.04).advice(0.0).startswith("advice: not input-bound (R = 0.25 < 1)")
    text = Timing(0.5, 0.1).advice(0.01)
    assert text.startswith("advice: input-bound by R = 5.00: try echo.factor=5 ") and "warning" not in text
    assert "python -m echo_experiments.compare" in text
    assert "warning: other processes kept 1.30 cores busy" in Timing(0.5, 0.1).advice(1.3)


def test_a_store_of_records_that_never_makes_a_step_wait_is_pointed_to_a_store_of_examples():
    records = compose_config("storage=emulated").storage
    hint = store_hint(records, Timing(0.001, 0.1), 7.2)
    assert hint.startswith("note: R < 1 on an emulated store of records (7.2 s to the first batch)")
    assert hint.endswith("storage.read_unit=example puts one on every example")
    assert store_hint(records, Timing(0.6, 0.1), 7.2) is None  # the store paces the steps
    examples = compose_config("storage=emulated", "storage.read_unit=example").storage
    assert store_hint(examples, Timing(0.001, 0.1), 7.2) is None
    assert store_hint(compose_config().storage, Timing(0.001, 0.1), 7.2) is None  # local files


def test_the_advice_offers_the_autopilot_where_the_input_bounds_the_run_and_reads_no_committed_table():
    """The advice rests on what was measured: it names the autopilot and where its evidence is written, and
    the same words whether or not a checkout's results/ sits beside the package (an installed wheel has none)."""
    text = Timing(0.5, 0.1).advice(0.0)
    assert "(or echo.factor=auto, which copies only while the step would wait: the README's table 'The autopilot' " \
        "says how it fared against fixed factors)" in text
    assert "autopilot" not in Timing(0.01, 0.04).advice(0.0)
