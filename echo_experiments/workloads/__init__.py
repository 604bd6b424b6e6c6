"""Task registry: a workload config's ``task`` names the class that implements it."""

import importlib
from typing import Any

from echo_experiments.config import ConfigError
from echo_experiments.workloads.base import Target, Workload

TASKS = {
    "image_classification": "echo_experiments.workloads.image_classification:ImageClassification",
    "language_model": "echo_experiments.workloads.language_model:LanguageModel",
    "detection": "echo_experiments.workloads.detection:Detection",
}

__all__ = ["TASKS", "Target", "Workload", "check_config", "make", "task_class", "task_placements"]


def task_class(task: str) -> type[Workload]:
    if task not in TASKS:
        raise ConfigError("workload.task", task, "one of " + ", ".join(TASKS))
    module, name = TASKS[task].split(":")
    return getattr(importlib.import_module(module), name)


def task_placements(task: str) -> tuple[str, ...]:
    return task_class(task).placements


def make(cfg: Any, data_dir) -> Workload:
    """The workload a ``workload`` config describes, with its data opened (DataMissing if absent)."""
    return task_class(cfg.task)(cfg, data_dir)


def check_config(cfg: Any) -> None:
    """Raise ConfigError for the first value of a composed config that is not allowed."""
    from echo_experiments.config import validate

    cls = task_class(cfg.workload.task)
    validate(cfg, cls.placements)
    cls.check(cfg.workload)
