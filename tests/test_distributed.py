"""A real two-process run on this machine: jax.distributed over localhost with the CPU collectives (gloo)."""

import ipaddress
import json
import signal
import socket
import subprocess
import sys
import time

import psutil
import pytest
from conftest import FAST, env_with_xla_flags

# e=2 before augmentation, no echo shuffle, so fresh counts are exact; each process reads every other record.
COMMON = [*FAST, "echo.factor=2", "echo.shuffle_buffer=0", "trainer.stop_at_target=false",
          "trainer.distributed=true", "trainer.num_processes=2", "trainer.distributed_timeout_s=60"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def start(tmp_path, *args):
    """Processes 0 and 1; each one's stderr goes to a file (a pipe nobody reads until the end can fill up and
    stop a process mid-run, and its peer with it). Read them with ``stderr``."""
    port = free_port()
    # Process 1 compiles every program on every run (JAX's persistent cache is written and served by process
    # 0 only) and these runs are short: at XLA's backend optimisation level 0 a compile of the
    # synthetic workload takes about 7 CPU-s instead of 25, and the steps stay exact.
    env = env_with_xla_flags("--xla_backend_optimization_level=0")
    procs = []
    for i in (0, 1):
        with open(tmp_path / f"stderr{i}", "w") as err:
            procs.append(subprocess.Popen([sys.executable, "-m", "echo_experiments", *COMMON, *args,
                                           f"trainer.coordinator_address=localhost:{port}", f"trainer.process_id={i}",
                                           f"hydra.run.dir={tmp_path / str(i)}"], stdout=subprocess.DEVNULL,
                                          stderr=err, env=env))
    return procs


def listeners(procs, deadline_s: float = 300) -> set:
    """The (address, port) pairs the processes listen on, sampled every half second until they end."""
    seen, until = set(), time.time() + deadline_s
    while any(p.poll() is None for p in procs) and time.time() < until:
        for p in procs:
            try:
                seen |= {c.laddr for c in psutil.Process(p.pid).net_connections("tcp") if c.status == "LISTEN"}
            except psutil.Error:  # it ended between the poll and the look
                pass
        time.sleep(0.5)
    return seen


def stderr(tmp_path, i):
    return (tmp_path / f"stderr{i}").read_text()


def steps_and_fresh(run_dir):
    return [(r["step"], r["fresh_examples"]) for r in map(json.loads, (run_dir / "metrics.jsonl").open())]


@pytest.mark.slow  # about 33 s: `make test-all` runs it
def test_two_processes_count_the_fresh_examples_one_process_counts(tmp_path):
    procs = start(tmp_path, "trainer.max_fresh_examples=1024", "trainer.eval_every_fresh_examples=512")
    listening = listeners(procs)
    codes = [p.wait(timeout=300) for p in procs]
    # The coordinator (loopback for a local coordinator_address) and gloo's connections: none beyond loopback.
    assert listening and all(ipaddress.ip_address(ip.removeprefix("::ffff:")).is_loopback for ip, _ in listening), \
        listening
    assert codes == [0, 0], stderr(tmp_path, 0)[-2000:] + stderr(tmp_path, 1)[-2000:]
    # Process 0 writes the run directory; the global batch of 32 is 16 from each process. One process counts
    # the same: e=2 before augmentation, 16 fresh examples a step (test_train checks one process's counts).
    assert steps_and_fresh(tmp_path / "0") == [(32, 512), (64, 1024)]
    assert not (tmp_path / "1" / "metrics.jsonl").exists()
    summary = json.loads((tmp_path / "0" / "summary.json").read_text())
    assert (summary["devices"], summary["fresh_examples"], summary["steps"]) == (2, 1024, 64)


@pytest.mark.slow  # about 40 s (a heartbeat timeout of 20 s): `make test-all` runs it
def test_a_process_that_dies_ends_its_peer_with_one_line_within_the_timeout(tmp_path):
    procs = start(tmp_path, "trainer.max_fresh_examples=10000000", "trainer.distributed_timeout_s=20")
    deadline = time.time() + 300
    metrics = tmp_path / "0" / "metrics.jsonl"
    while not (metrics.exists() and metrics.read_text()) and time.time() < deadline:  # collectives are running
        time.sleep(0.5)
    procs[1].send_signal(signal.SIGKILL)
    lost = time.time()
    procs[0].wait(timeout=180)
    procs[1].wait()
    err = stderr(tmp_path, 0)
    assert time.time() - lost < 90, err[-3000:]  # no hang
    if procs[0].returncode == 4:  # our line: the lost peer surfaced as an error in a collective
        errors = [line for line in err.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and errors[0].startswith("error: process 0 of 2 lost its peers (")
        assert errors[0].endswith("check the other processes' logs; the run keeps its last checkpoint: run the same "
                                  "command on every process to resume")
    else:  # JAX's runtime saw the missed heartbeats first and ended the process itself, saying why
        assert procs[0].returncode == -signal.SIGABRT, err[-3000:]
        assert "This most likely indicates that another task died" in err


def test_a_coordinator_that_does_not_resolve_is_one_line_at_once(tmp_path):
    began = time.time()
    proc = subprocess.run([sys.executable, "-m", "echo_experiments", *COMMON, "trainer.process_id=1",
                           "trainer.coordinator_address=no-such-host.invalid:1234", f"hydra.run.dir={tmp_path}"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines()[-1].startswith(
        "error: trainer.coordinator_address=no-such-host.invalid:1234: no-such-host.invalid does not resolve (")
    assert time.time() - began < 50  # at once, not after the 60 s timeout and an abort


def test_a_coordinator_that_never_starts_is_one_line_and_exit_4_within_the_timeout(tmp_path):
    """Process 1 alone: JAX waited its whole timeout and aborted with a native stack (exit 134). A watchdog ends
    the process first, with the lost peer's status."""
    proc = subprocess.run([sys.executable, "-m", "echo_experiments", *COMMON, "trainer.process_id=1",
                           "trainer.distributed_timeout_s=3", f"trainer.coordinator_address=localhost:{free_port()}",
                           f"hydra.run.dir={tmp_path}"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 4 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines()[-1].startswith(
        "error: the processes of this run did not all meet within trainer.distributed_timeout_s=3 s (coordinator "
        "localhost:")


def test_distributed_without_a_coordinator_given_or_found_is_one_line(tmp_path):
    env = {k: v for k, v in __import__("os").environ.items()
           if not k.startswith(("SLURM_", "OMPI_", "PMI_", "TPU_", "MEGASCALE_"))}
    proc = subprocess.run([sys.executable, "-m", "echo_experiments", *FAST, "trainer.distributed=true",
                           f"hydra.run.dir={tmp_path}"], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("error: trainer.distributed=true: ") and line.endswith(
        "give trainer.coordinator_address, trainer.num_processes and trainer.process_id, or start the processes "
        "under SLURM, Open MPI or on a TPU slice")
