"""What a workload is: its data recipe, model, loss, evaluation and target (AlgoPerf's shape).

The trainer and the reporter only talk to this interface; nothing outside a workload special-cases one.
"""

import abc
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import jax
import jax.numpy as jnp
import tensorflow as tf

from echo_experiments.data.pipeline import Feed


@dataclass(frozen=True)
class Target:
    """The out-of-sample value a run must reach: ``metric`` at least (max) or at most (min) ``value``."""

    metric: str
    value: float
    mode: str = "max"

    def reached(self, metrics: Mapping[str, float]) -> bool:
        if self.metric not in metrics:
            return False
        got = metrics[self.metric]
        return got >= self.value if self.mode == "max" else got <= self.value

    def as_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "value": self.value, "mode": self.mode}


class Workload(abc.ABC):
    """One task on one data set, configured by a ``workload`` config."""

    #: The echo placements this workload's pipeline has a stage for.
    placements: tuple[str, ...] = ()

    def __init__(self, cfg: Any, data_dir: Path):
        self.cfg = cfg
        self.data_dir = data_dir
        self.target = Target(cfg.target.metric, float(cfg.target.value), cfg.target.mode)

    @classmethod
    @abc.abstractmethod
    def check(cls, cfg: Any) -> None:
        """Raise ConfigError for a task-specific value that is not allowed (without touching data)."""

    #: The dtype the model computes in (bfloat16 under mixed precision); inputs are cast to it.
    compute_dtype: Any = jnp.float32

    @abc.abstractmethod
    def train_batches(self, echo_cfg: Any, seed: int, feed: Feed = Feed()) -> tf.data.Dataset:
        """The endless training stream: batches of model inputs plus ``read_id``, from ``feed``."""

    @abc.abstractmethod
    def init(self, rng: jax.Array) -> tuple[Any, Any]:
        """Initial (params, model_state); model_state holds non-trained variables such as batch statistics."""

    @abc.abstractmethod
    def loss(self, params: Any, model_state: Any, batch: Mapping[str, jax.Array],
             rng: jax.Array) -> tuple[jax.Array, Any]:
        """Mean training loss of a batch and the new model_state (traced inside the jitted train step)."""

    @abc.abstractmethod
    def evaluate(self, params: Any, model_state: Any) -> dict[str, float]:
        """Metrics on the held-out split; the target's metric among them."""
