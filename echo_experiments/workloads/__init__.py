"""Workloads: the contract (base.py), one module per task with its schema beside it, and the registry.

A user's own task needs only this module: ``from echo_experiments.workloads import CustomWorkloadConfig, Target,
Workload`` is the whole contract (docs/your-model.md). ``Workload`` and :func:`make` load TensorFlow and JAX;
the registry and ``CustomWorkloadConfig`` do not, so the command line can validate configs without them.
"""

from typing import Any

__all__ = ["CustomWorkloadConfig", "Target", "Workload", "make"]


def make(cfg: Any, data_dir: Any, compute_dtype: Any = None) -> Any:
    """The workload a (validated) ``workload`` config describes, with its data opened (DataMissing if absent)."""
    import jax.numpy as jnp

    from echo_experiments.workloads.registry import task_class

    return task_class(cfg.task)(cfg, data_dir, jnp.float32 if compute_dtype is None else compute_dtype)


def __getattr__(name: str) -> Any:
    if name == "CustomWorkloadConfig":
        from echo_experiments.core.config import CustomWorkloadConfig

        return CustomWorkloadConfig
    if name in ("Target", "Workload"):
        from echo_experiments.workloads import base

        return getattr(base, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
