"""Beyond one device and one uninterrupted process: data parallelism, checkpoints that survive SIGKILL, a
tf.data service upstream, mixed precision."""

import json
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tensorflow as tf
from conftest import FAST, compose_config, env_with_xla_flags, metric_rows, train

from echo_experiments.cli.plan import check_command_line
from echo_experiments.core.fresh import FreshCounter
from echo_experiments.core.schema import ConfigError
from echo_experiments.core.specs import PipelineSpec, RunSpec
from echo_experiments.data import stream
from echo_experiments.training import optim, parallel
from echo_experiments.training.step import TrainState, learning_rates, make_train_step
from echo_experiments.workloads import make

# 60 steps of the synthetic workload with example echoing (16 fresh examples a step), never reaching the target.
SHORT = [*FAST, "echo=before_augmentation", "echo.shuffle_buffer=0", "trainer.max_steps=60",
         "trainer.eval_every_fresh_examples=320", "workload.target.value=0.99"]


def cli(run_dir, *args, devices=1, **popen):
    env = {**env_with_xla_flags(f"--xla_force_host_platform_device_count={devices}"), "JAX_PLATFORMS": "cpu"}
    command = [sys.executable, "-m", "echo_experiments", *SHORT, *args, f"hydra.run.dir={run_dir}"]
    if popen:
        return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **popen)
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.slow  # about 24 s: `make test-all` runs it
def test_two_devices_give_the_one_device_loss_curve(tmp_path):
    # 20 steps: float sums taken in another order across devices drift apart as training goes on, while a
    # batch statistic computed per device instead of over the global batch would show at once.
    args = ("trainer.max_steps=20", "trainer.eval_every_fresh_examples=160")
    train(compose_config(*SHORT, *args), tmp_path / "one")  # this process has one device
    two = cli(tmp_path / "two", *args, devices=2)
    assert two.returncode == 0, two.stderr[-3000:]
    s1 = json.loads((tmp_path / "one" / "summary.json").read_text())
    s2 = json.loads((tmp_path / "two" / "summary.json").read_text())
    assert (s1["devices"], s2["devices"]) == (1, 2)
    assert s1["fresh_examples"] == s2["fresh_examples"] == 20 * 16
    a, b = metric_rows(tmp_path / "one"), metric_rows(tmp_path / "two")
    assert [r["fresh_examples"] for r in a] == [r["fresh_examples"] for r in b] == [160, 320]
    for x, y in zip(a, b):
        # Losses are sums of thousands of terms: another summation order moves them by ~1e-6 relative.
        np.testing.assert_allclose([x["train_loss"], x["loss"]], [y["train_loss"], y["loss"]], rtol=1e-4)
        # Accuracy counts examples: one near the decision boundary may flip, so allow a few of the 512.
        assert abs(x["accuracy"] - y["accuracy"]) <= 3 / 512


@pytest.mark.slow  # make test kills and resumes a run on local storage (test_damage); this adds emulated storage
def test_a_killed_run_resumes_from_its_checkpoint_and_ends_as_if_uninterrupted(tmp_path, caplog):
    # Records read through emulated storage (2 ms each): 200 steps take seconds, time enough to kill the run.
    args = ("trainer.checkpoint_every_steps=40", "trainer.max_steps=200", "storage=emulated", "storage.latency_ms=2")
    train(compose_config(*SHORT, *args), tmp_path / "whole")
    proc = cli(tmp_path / "killed", *args, start_new_session=True)
    deadline = time.time() + 300
    saved = tmp_path / "killed" / "checkpoints"
    while time.time() < deadline and proc.poll() is None:
        if any(p.name.isdigit() and int(p.name) >= 40 for p in saved.glob("*")):
            break
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (tmp_path / "killed" / "summary.json").exists(), "the run finished before it could be killed"
    with caplog.at_level(logging.INFO, logger="echo_experiments.training.trainer"):  # the rerun need not be a process
        train(compose_config(*SHORT, *args), tmp_path / "killed")
    assert any(r.getMessage().startswith("resumed ") for r in caplog.records)
    a = json.loads((tmp_path / "whole" / "summary.json").read_text())
    b = json.loads((tmp_path / "killed" / "summary.json").read_text())
    assert (a["steps"], a["fresh_examples"]) == (b["steps"], b["fresh_examples"]) == (200, 200 * 16)
    assert metric_rows(tmp_path / "whole") == metric_rows(tmp_path / "killed")  # the same batches, losses and metrics


def test_saving_the_input_position_never_syncs_the_eager_executors(tmp_path, monkeypatch):
    """tf.train.Checkpoint.write would sync every eager executor while py_function calls run in the pipeline's
    threads; that sync once aborted a run (checkpoints.py), so saving the input's position skips it."""
    from etils import epath
    from tensorflow.python.eager import context

    from echo_experiments.training.checkpoints import SKIP_ASYNC_WAIT, InputHandler, InputRestore, InputSave

    def refuse():
        raise AssertionError("the input checkpoint synced the eager executors")

    monkeypatch.delenv(SKIP_ASYNC_WAIT, raising=False)
    monkeypatch.setattr(context.context(), "sync_executors", refuse)
    options = tf.data.Options()
    options.experimental_external_state_policy = tf.data.experimental.ExternalStatePolicy.IGNORE
    records = tf.data.Dataset.range(100).map(lambda x: tf.py_function(lambda v: v * 2, [x], tf.int64),
                                             num_parallel_calls=4).with_options(options)
    iterator = iter(records)
    assert [int(next(iterator)) for _ in range(3)] == [0, 2, 4]
    InputHandler().save(epath.Path(tmp_path), InputSave(iterator, np.ones(3, bool)))
    again = iter(records)
    seen = InputHandler().restore(epath.Path(tmp_path), InputRestore(again))
    assert seen.tolist() == [True] * 3 and int(next(again)) == 6


def _serving(server: subprocess.Popen, timeout_s: float = 180) -> str:
    """A server's first line (it prints one once it serves), waited for at most ``timeout_s``; else the server is
    ended and its stderr shown (a loaded machine starts Python, TensorFlow and gRPC slowly)."""
    ready, _, _ = select.select([server.stdout], [], [], timeout_s)
    line = server.stdout.readline() if ready else ""
    if not line:
        server.kill()
        server.wait(timeout=30)
        server.log.seek(0)
        raise AssertionError(f"{server.args[3]} gave no line within {timeout_s:g} s (exit {server.returncode}): "
                             f"{server.log.read()[-2000:]}")
    return line


def start_service():
    """A dispatcher and one worker on this machine, started as on other machines: (address, processes). The
    worker starts once the dispatcher serves, and waits for it as long as a loaded machine may need."""
    with socket.socket() as a, socket.socket() as b:
        a.bind(("localhost", 0)), b.bind(("localhost", 0))
        port, worker_port = a.getsockname()[1], b.getsockname()[1]
    servers = []
    for args in (["dispatcher", "--port", str(port)],
                 ["worker", "--dispatcher", f"localhost:{port}", "--port", str(worker_port), "--timeout-s", "120"]):
        log = tempfile.TemporaryFile("w+")  # a file, not a pipe: a server's logging never blocks on it
        servers.append(subprocess.Popen([sys.executable, "-m", "echo_experiments.service", *args],
                                        stdout=subprocess.PIPE, stderr=log, text=True))
        servers[-1].log = log
        _serving(servers[-1])
    return f"grpc://localhost:{port}", servers


@pytest.fixture(scope="module")
def loopback_service():
    address, servers = start_service()
    yield address
    # A worker's stop() waits for the tasks it still holds (seconds, up to half a minute on a loaded machine):
    # stop both at once, and kill what is still stopping rather than fail a test that has already passed.
    for server in servers:
        server.terminate()
    for server in servers:
        try:
            server.wait(timeout=5)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


@pytest.mark.parametrize("echo_args", [["echo=before_augmentation"], ["echo=after_augmentation"],
                                       ["echo=after_batching"], ["echo.factor=1"]])
def test_a_tf_data_service_delivers_the_local_stream_with_exact_fresh_counts(loopback_service, data_dir, echo_args):
    cfg = compose_config(*SHORT, *echo_args, f"data.service={loopback_service}", "trainer.checkpoint_every_seconds=0")
    workload = make(cfg.workload, data_dir)
    local_cfg = compose_config(*SHORT, *echo_args)
    local = stream.build(workload, PipelineSpec.from_config(local_cfg)).take(12).as_numpy_iterator()
    remote = stream.build(workload, PipelineSpec.from_config(cfg)).take(12).as_numpy_iterator()
    local_fresh, remote_fresh = FreshCounter(), FreshCounter()
    for a, b in zip(local, remote, strict=True):
        np.testing.assert_array_equal(a["image"], b["image"])
        np.testing.assert_array_equal(a["label"], b["label"])
        assert local_fresh.update(a["read_id"]) == remote_fresh.update(b["read_id"])
    factor = float(cfg.echo.factor)
    assert remote_fresh.count == 12 * 16 * (2 if factor == 1 else 1)  # batch 32 at factor 1, 16 fresh a step at 2


def test_training_through_a_loopback_tf_data_service_matches_the_local_run(loopback_service, tmp_path):
    summary = train(compose_config(*SHORT, f"data.service={loopback_service}", "trainer.checkpoint_every_seconds=0"),
                  tmp_path / "service")
    local_summary = train(compose_config(*SHORT, "trainer.checkpoint_every_seconds=0"), tmp_path / "local")
    assert summary.fresh_examples == local_summary.fresh_examples == 60 * 16
    assert metric_rows(tmp_path / "service") == metric_rows(tmp_path / "local")


@pytest.mark.slow  # about 25 s: `make test-all` runs it
def test_bfloat16_compute_keeps_float32_parameters(data_dir):
    cfg = compose_config(*SHORT)
    workload = make(cfg.workload, data_dir)
    spec = RunSpec.from_config(cfg)
    batch = next(stream.build(workload, spec.pipeline).as_numpy_iterator())
    batch.pop("read_id")
    tx, rate = optim.optimizer(spec.optimizer), learning_rates(optim.schedule(spec.schedule))(np.int32(0))
    params, model_state = workload.init(jax.random.PRNGKey(0))
    losses = {}
    for name, dtype in (("float32", jnp.float32), ("bfloat16", jnp.bfloat16)):
        workload.compute_dtype = dtype
        state = TrainState(jnp.zeros((), jnp.int32), params, model_state, tx.init(params), jax.random.PRNGKey(1))
        new, losses[name] = jax.jit(make_train_step(workload, tx, dtype))(state, batch, rate)
        assert all(x.dtype == jnp.float32 for x in jax.tree.leaves((new.params, new.model_state, new.opt_state))
                   if jnp.issubdtype(x.dtype, jnp.floating))
    workload.compute_dtype = jnp.float32
    assert float(losses["bfloat16"]) == pytest.approx(float(losses["float32"]), rel=0.05)


@pytest.mark.parametrize("argv,message", [
    (["trainer.precision=float16"],
     "trainer.precision=float16 is not allowed: one of float32, bfloat16 (bfloat16 compute, float32 parameters)"),
    (["trainer.checkpoint_every_steps=-1"],
     "trainer.checkpoint_every_steps=-1 is not allowed: an integer >= 0 (0 = not by step count)"),
    (["data.service=localhost:5000"],
     "data.service=localhost:5000 is not allowed: null or a tf.data service address grpc://host:port (port "
     "1-65535)"),
    (["data.service=grpc://localhost:5000"],
     "trainer.checkpoint_every_seconds=600 is not allowed: 0 with data.service (the service's workers hold the "
     "input's state, which no checkpoint can save)"),
    (["data.service=grpc://localhost:5000", "trainer.checkpoint_every_seconds=0", "storage=http"],
     "storage.kind=http is not allowed: local with data.service (the service reads the data)"),
])
def test_bad_scale_configs_give_one_line(argv, message):
    assert check_command_line(argv) == message


def test_a_batch_that_does_not_split_over_the_devices_is_refused(monkeypatch):
    """Two devices as JAX would list them with --xla_force_host_platform_device_count=2 (the test above runs so)."""
    two = jax.devices() * 2
    monkeypatch.setattr(parallel.jax, "devices", lambda: two)
    spec = RunSpec.from_config(compose_config(*FAST, "workload.batch_size=63")).parallel
    with pytest.raises(ConfigError) as refused:
        parallel.setup(spec, 63)
    assert str(refused.value) == ("workload.batch_size=63 is not allowed: a multiple of the 2 devices it is split over "
                                  "(or trainer.data_parallel=false)")


@pytest.mark.slow  # about 28 s (a worker killed, then the timeout): test_damage ends a dispatcher without workers
def test_a_lost_service_worker_ends_the_run_within_the_timeout_with_one_line(tmp_path):
    address, (dispatcher, worker) = start_service()
    try:
        command = [sys.executable, "-m", "echo_experiments", *SHORT, f"data.service={address}", "data.timeout_s=10",
                   "trainer.checkpoint_every_seconds=0", "trainer.max_steps=1000000", f"hydra.run.dir={tmp_path}"]
        run = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 300
        while not (tmp_path / "metrics.jsonl").exists() and time.time() < deadline:  # training has begun
            time.sleep(0.5)
        worker.kill()
        lost = time.time()
        _, err = run.communicate(timeout=120)
        assert run.returncode == 3 and time.time() - lost < 60, err[-2000:]
        errors = [line for line in err.splitlines() if line.startswith("error:")]
        assert errors == [f"error: no batch from the tf.data service at {address} (are its dispatcher and workers "
                          "running? python -m echo_experiments.service) within data.timeout_s=10 s; the run keeps "
                          "its last checkpoint: run the same command to resume once it answers"]
        assert "Traceback" not in err
    finally:
        for server in (dispatcher, worker):
            server.kill()
            server.wait()
