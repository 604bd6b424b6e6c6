"""The three private APIs of other libraries this package uses, each behind one small function; no other module
imports them. tests/unit/core/test_private_api.py fails when an upgrade moves one, before a run needs it.

- Hydra's own command-line parser (``hydra._internal.utils.get_args_parser``, the one ``@hydra.main`` uses): the
  command line is read exactly as Hydra will read it, so every job can be composed and checked before any runs.
- The barrier of JAX's distributed runtime (``jax._src.distributed.global_state.client.wait_at_barrier``):
  the CPU collectives (gloo) give a peer 30 s to join the first collective, which one process's compilation
  can exceed on a loaded machine; the runtime's barrier waits as long as we allow (JAX's own multi-process
  tests use it; jax.experimental.multihost_utils.sync_global_devices has no timeout).
- joblib's loky backend class (``joblib._parallel_backends.LokyBackend``): Hydra's joblib launcher asks for the
  backend by name, so the only way to give its workers an initializer (worker_stops.py) is to register, under that
  name, the same class with one more argument.
"""

import argparse


def hydra_args_parser() -> argparse.ArgumentParser:
    """The parser ``@hydra.main`` reads the command line with (overrides, ``-m``, ``--cfg``, ``--help``...)."""
    from hydra._internal.utils import get_args_parser

    return get_args_parser()


def wait_at_barrier(name: str, timeout_s: float) -> None:
    """Wait until every process of a multi-process run reaches the barrier ``name``, at most ``timeout_s``."""
    from jax._src import distributed

    distributed.global_state.client.wait_at_barrier(name, timeout_in_ms=int(timeout_s * 1000))


def loky_backend() -> type:
    """joblib's backend for worker processes, which takes its pool's ``initializer`` as a keyword."""
    from joblib._parallel_backends import LokyBackend

    return LokyBackend
