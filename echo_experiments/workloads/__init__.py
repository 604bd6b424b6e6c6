"""Task registry: a workload config's ``task`` names the class that implements it."""

import importlib
from pathlib import Path
from typing import Any

import jax.numpy as jnp

from echo_experiments.config import ConfigError
from echo_experiments.workloads.base import Target, Workload

TASKS = {
    "image_classification": "echo_experiments.workloads.image_classification:ImageClassification",
    "language_model": "echo_experiments.workloads.language_model:LanguageModel",
    "detection": "echo_experiments.workloads.detection:Detection",
}

__all__ = ["TASKS", "Target", "Workload", "make", "task_class"]


def task_class(task: str) -> type[Workload]:
    if task not in TASKS:
        raise ConfigError("workload.task", task, "one of " + ", ".join(TASKS))
    module, name = TASKS[task].split(":")
    return getattr(importlib.import_module(module), name)


def make(cfg: Any, data_dir: Path, compute_dtype: Any = jnp.float32) -> Workload:
    """The workload a (validated) ``workload`` config describes, with its data opened (DataMissing if absent)."""
    return task_class(cfg.task)(cfg, data_dir, compute_dtype)
