"""Data parallelism with JAX's sharding: one mesh axis ``data`` over every device of every process.

The global batch (``workload.batch_size``) is split over the devices; parameters and optimizer state are
replicated, so a step on several devices computes what one device would (up to the order of float sums).
With several processes (``trainer.distributed=true``, after ``jax.distributed.initialize()``, which reads
SLURM, Open MPI or TPU settings), each process reads its own shard of the input, echoes it on its own, and
the fresh-example counts are summed across processes.
"""

import logging
import os
import socket
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import jax
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

from echo_experiments.core.private_api import wait_at_barrier
from echo_experiments.core.schema import ConfigError
from echo_experiments.core.specs import ParallelSpec
from echo_experiments.data.stream import Host


@dataclass(frozen=True)
class Parallel:
    mesh: jax.sharding.Mesh
    host: Host

    @property
    def batch(self) -> NamedSharding:
        return NamedSharding(self.mesh, PartitionSpec("data"))

    @property
    def replicated(self) -> NamedSharding:
        return NamedSharding(self.mesh, PartitionSpec())

    @property
    def devices(self) -> int:
        return self.mesh.size

    @property
    def writes_run_dir(self) -> bool:
        """Of several processes, the first alone writes the run directory (and holds its lock)."""
        return self.host.index == 0

    def put_batch(self, local_batch: dict[str, np.ndarray]) -> dict[str, jax.Array]:
        """A global batch sharded over the devices, from this process's part of it."""
        if self.host.count == 1:
            return jax.device_put(local_batch, self.batch)
        return {k: jax.make_array_from_process_local_data(self.batch, v) for k, v in local_batch.items()}

    def put_scalar(self, value: int) -> jax.Array:
        """An int32 scalar replicated on every device (the same value on every process)."""
        return jax.device_put(np.int32(value), self.replicated)

    def barrier(self, name: str, timeout_s: float) -> None:
        """Wait until every process gets here (at most ``timeout_s``; see private_api.wait_at_barrier)."""
        if self.host.count > 1:
            wait_at_barrier(name, timeout_s)

    def total(self, count: int) -> int:
        """A per-process count summed over the processes."""
        if self.host.count == 1:
            return count
        from jax.experimental import multihost_utils

        return int(np.sum(multihost_utils.process_allgather(np.asarray(count, np.int64))))


log = logging.getLogger(__name__)
_initialized = False
# JAX's own start-up timeout runs this much longer than the watchdog's, so the watchdog's line comes first.
WATCHDOG_LEAD_S = 30


def _check_resolves(address: Optional[str]) -> None:
    """ConfigError for a coordinator whose host name does not resolve: JAX would wait the whole timeout for it
    and then abort the process with a native stack."""
    if address is None:
        return
    host = address.rpartition(":")[0].strip("[]")
    try:
        socket.getaddrinfo(host, None)
    except (socket.gaierror, UnicodeError) as e:
        raise ConfigError("trainer.coordinator_address", address, "", (
            f"trainer.coordinator_address={address}: {host} does not resolve ({e}): give process 0's host name or "
            "address")) from None


def _initialize_within(spec: ParallelSpec) -> None:
    """jax.distributed.initialize, bounded by trainer.distributed_timeout_s. Where its peers or its coordinator
    never answer, JAX aborts the process with a native stack (exit 134) after its own timeout, which Python cannot
    catch: a watchdog ends the process first, with one line and the lost peer's exit status (4). Without a
    coordinator given or found (SLURM, Open MPI, a TPU slice), JAX's ValueError becomes the line naming the key."""
    started = threading.Event()

    def watchdog() -> None:
        if not started.wait(spec.timeout_s):
            print(f"error: the processes of this run did not all meet within trainer.distributed_timeout_s="
                  f"{spec.timeout_s} s (coordinator {spec.coordinator_address or 'found from the environment'}): "
                  "start every process with the same trainer.coordinator_address and trainer.num_processes, process "
                  "0 first", file=sys.stderr, flush=True)
            os._exit(4)

    threading.Thread(target=watchdog, name="distributed-start", daemon=True).start()
    try:
        jax.distributed.initialize(spec.coordinator_address, spec.num_processes, spec.process_id,
                                   initialization_timeout=spec.timeout_s + WATCHDOG_LEAD_S,
                                   heartbeat_timeout_seconds=spec.timeout_s, coordinator_bind_address=spec.bind_address)
    except ValueError as e:  # nothing to start from: no coordinator given, none in the environment
        said = str(e).strip().splitlines()[0].rstrip(".")
        raise ConfigError("trainer.coordinator_address", None, "", (
            f"trainer.distributed=true: {said}: give trainer.coordinator_address, trainer.num_processes and "
            "trainer.process_id, or start the processes under SLURM, Open MPI or on a TPU slice")) from None
    finally:
        started.set()


def setup(spec: ParallelSpec, batch_size: int) -> Parallel:
    """The mesh a run trains on; initialises the multi-process runtime first when asked to."""
    global _initialized
    if spec.distributed and not _initialized:
        _check_resolves(spec.coordinator_address)
        # CPU devices of several processes exchange arrays through gloo (TCP); GPUs and TPUs ignore this.
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        if spec.process_id in (0, None):
            log.info("the coordinator listens on %s, unauthenticated (trainer.coordinator_bind_address)",
                     spec.bind_address or "every interface, as JAX chooses")
        _initialize_within(spec)
        _initialized = True
    try:
        devices = jax.devices() if spec.data_parallel else jax.local_devices()[:1]
    except RuntimeError as e:  # JAX_PLATFORMS names a backend this machine has not (a TPU, CUDA without a GPU)
        said = str(e).strip().splitlines()[0][:200]
        raise ConfigError("JAX_PLATFORMS", os.environ.get("JAX_PLATFORMS", ""), "", (
            f"JAX cannot start its backend here ({said}): unset JAX_PLATFORMS, or set it to one this machine has "
            "(cpu; cuda where a GPU and the [cuda] extra are installed)")) from None
    if batch_size % len(devices):
        raise ConfigError("workload.batch_size", batch_size,
                          f"a multiple of the {len(devices)} devices it is split over (or trainer.data_parallel=false)")
    mesh = jax.make_mesh((len(devices),), ("data",), axis_types=(jax.sharding.AxisType.Auto,), devices=devices)
    return Parallel(mesh, Host(jax.process_index(), jax.process_count()))


def use_compilation_cache(directory: Optional[str]) -> None:
    """JAX's persistent compilation cache in ``directory`` (None: off), for every program: on a CPU even the
    small ones take a second to compile, and a sweep's trials and a test session compile the same ones."""
    if directory:
        jax.config.update("jax_compilation_cache_dir", str(Path(directory).expanduser()))
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
