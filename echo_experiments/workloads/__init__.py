"""Task registry: a workload config's ``task`` names the class that implements it, a built-in one or a user's
``module:Class`` (README, "Measuring echoing on your own model")."""

import importlib
import inspect
from pathlib import Path
from typing import Any

import jax.numpy as jnp

from echo_experiments.config import ConfigError, task_schema
from echo_experiments.workloads.base import Target, Workload

TASKS = {
    "image_classification": "echo_experiments.workloads.image_classification:ImageClassification",
    "language_model": "echo_experiments.workloads.language_model:LanguageModel",
    "detection": "echo_experiments.workloads.detection:Detection",
}

__all__ = ["TASKS", "Target", "Workload", "make", "task_class"]


def task_class(task: str) -> type[Workload]:
    """The class of a task, checked against the contract in base.py. Raises ConfigError naming what it lacks."""
    schema = task_schema(task)  # a user's class is imported (and its config_class checked) there
    module, name = TASKS.get(task, task).split(":")
    cls = getattr(importlib.import_module(module), name)
    if not (inspect.isclass(cls) and issubclass(cls, Workload)):
        raise ConfigError("workload.task", task, "module:Class naming a subclass of "
                          "echo_experiments.workloads.Workload")
    lacks = sorted(cls.__abstractmethods__)
    if schema.augments and cls.augment is Workload.augment and cls.augment_chunk is Workload.augment_chunk:
        lacks.append("augment or augment_chunk (its config_class says augments=True)")
    if lacks:
        raise ConfigError("workload.task", task, f"a complete Workload: {name} lacks {', '.join(lacks)}",
                          f"workload.task={task}: {name} lacks {', '.join(lacks)} (see the Workload contract in "
                          "echo_experiments/workloads/base.py)")
    return cls


def make(cfg: Any, data_dir: Path, compute_dtype: Any = jnp.float32) -> Workload:
    """The workload a (validated) ``workload`` config describes, with its data opened (DataMissing if absent)."""
    return task_class(cfg.task)(cfg, data_dir, compute_dtype)
