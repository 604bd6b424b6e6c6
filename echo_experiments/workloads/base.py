"""What a workload is (AlgoPerf's shape): its data recipe, model, loss, evaluation and target.

A workload declares; it does not assemble. data/stream.py builds its training stream from the hooks below
(``examples``, ``decode``, ``augment``/``augment_chunk``), echo stage and shuffles included, and training/trainer.py
trains it; the evaluation loop and the loading of its sources are here, once. Nothing outside a workload
special-cases one.

The contract, for the built-in tasks and for a user's own class (``workload.task: module:Class``; checked
by workloads.task_class when a run starts, one line naming what is missing):

- ``config_class``: its config schema, which declares ``metrics`` (what ``eval_metrics`` returns; the
  target's metric is one of them), ``datasets`` (empty: any) and ``augments`` (whether the pipeline has an
  augmentation stage, and so echo points before and after it). A user's is a subclass of
  config.CustomWorkloadConfig; its own settings go under ``workload.options``.
- sources: ``workload.dataset`` and its splits, opened here (fashion_mnist, synthetic_images or any data
  set TFDS has prepared); ``examples`` may turn records into training examples (the LM packs documents).
- the upstream stage ``decode`` (everything before the first echo point), and ``augment`` or
  ``augment_chunk`` when ``augments``;
- the model and loss: ``init`` and ``loss``;
- evaluation: ``eval_examples``, ``eval_outputs`` and ``eval_metrics`` (``eval_accumulate`` sums by
  default); the target comes from ``workload.target``.
"""

import abc
import functools
from pathlib import Path
from typing import Any, ClassVar, Mapping, Optional

import jax
import jax.numpy as jnp
import numpy as np
import tensorflow as tf

from echo_experiments.core.config import WorkloadConfig
from echo_experiments.core.record import Target
from echo_experiments.core.schema import ConfigError
from echo_experiments.data import sources, stream

Example = dict[str, tf.Tensor]


class Workload(abc.ABC):
    """One task on one data set, configured by a ``workload`` config of the task's schema."""

    #: The schema of this task's ``workload`` config (its YAML starts from it: /workload_schema@workload). It
    #: declares the metrics ``evaluate`` returns, the data sets the task knows and whether it augments.
    config_class: ClassVar[type] = WorkloadConfig
    #: Whether ``augment_chunk`` (same-shape examples a chunk at a time) is used instead of ``augment``: where a
    #: class has only ``augment_chunk``, or says so.
    augments_in_chunks: bool = False

    def __init__(self, cfg: Any, data_dir: Path, compute_dtype: Any = jnp.float32):
        self.cfg = cfg
        self.data_dir = Path(data_dir)
        #: The dtype the model computes in (bfloat16 under mixed precision); inputs are cast to it.
        self.compute_dtype = compute_dtype
        self.target = Target(cfg.target.metric, float(cfg.target.value), cfg.target.mode)
        self.train_source = sources.load(cfg.dataset, cfg.train_split, self.data_dir)
        self.eval_source = sources.load(cfg.dataset, cfg.eval_split, self.data_dir)
        sources.check_splits(self.train_source, self.eval_source)
        for source, key in ((self.train_source, "workload.train_split"), (self.eval_source, "workload.eval_split")):
            if isinstance(source, sources.Source):  # a user's files check their own splits (check_splits)
                source.check_split(key)
        self._eval_step = jax.jit(self.eval_outputs)
        cls = type(self)
        if cls.augment is Workload.augment and cls.augment_chunk is not Workload.augment_chunk:
            self.augments_in_chunks = True

    @property
    def augments(self) -> bool:
        """Whether the pipeline has an augmentation stage (``augment`` or ``augment_chunk``)."""
        return self.config_class.augments

    # --- the data recipe (read by data/stream.py) -------------------------------------------------------

    def examples(self, records: tf.data.Dataset, seed: int) -> tf.data.Dataset:
        """One epoch of training examples from one epoch of records, before read ids are given (the LM packs
        documents into sequences here, so a sequence is an example). Most workloads: the records."""
        del seed
        return records

    @abc.abstractmethod
    def decode(self, example: Example) -> Example:
        """The upstream work before the first echo point (image decoding); keeps ``read_id``."""

    def augment(self, example: Example, seed: tf.Tensor) -> Example:
        """One example's random augmentation from a stateless seed of shape [2] (when ``augments``)."""
        raise NotImplementedError

    def augment_chunk(self, examples: Example, seed: tf.Tensor) -> Example:
        """``augment`` for a chunk of same-shape examples at once, each with its own draw."""
        raise NotImplementedError

    # --- model and loss -----------------------------------------------------------------------------------

    @abc.abstractmethod
    def init(self, rng: jax.Array) -> tuple[Any, Any]:
        """Initial (params, model_state); model_state holds non-trained variables such as batch statistics."""

    @abc.abstractmethod
    def loss(self, params: Any, model_state: Any, batch: Mapping[str, jax.Array],
             rng: jax.Array) -> tuple[jax.Array, Any]:
        """Mean training loss of a batch and the new model_state (traced inside the jitted train step)."""

    # --- evaluation -----------------------------------------------------------------------------------------

    @abc.abstractmethod
    def eval_examples(self) -> tf.data.Dataset:
        """The held-out examples, preprocessed for the model, one at a time in a fixed order."""

    @property
    def eval_count(self) -> Optional[int]:
        """How many held-out examples there are, when known (it decides whether they stay in memory)."""
        return self.eval_source.num_examples

    @abc.abstractmethod
    def eval_outputs(self, params: Any, model_state: Any, batch: Mapping[str, jax.Array]) -> Any:
        """What one padded evaluation batch contributes (jitted; ``batch['mask']`` marks real examples)."""

    def eval_accumulate(self, totals: Any, outputs: Any, batch: Mapping[str, Any]) -> Any:
        """Fold one batch's outputs into the running totals; by default they are sums."""
        del batch
        return outputs if totals is None else jax.tree.map(jnp.add, totals, outputs)

    @abc.abstractmethod
    def eval_metrics(self, totals: Any) -> dict[str, float]:
        """The metrics (``metrics``) from the totals of the whole held-out set, as eval_accumulate left them."""

    @functools.cached_property
    def eval_batches(self) -> tf.data.Dataset:
        return stream.eval_batches(self.eval_examples(), self.cfg.eval_batch_size, limit=self.cfg.eval_examples,
                                   count=self.eval_count)

    def evaluate(self, params: Any, model_state: Any) -> dict[str, float]:
        """Metrics on the held-out split; the target's metric among them."""
        totals = None
        try:
            for batch in stream.padded(self.eval_batches, self.cfg.eval_batch_size):
                totals = self.eval_accumulate(totals, self._eval_step(params, model_state, batch), batch)
        except tf.errors.DataLossError as e:  # a damaged file of the held-out split (truncated, corrupted)
            raise sources.unreadable(self.cfg.dataset, self.data_dir, e, f"'s {self.cfg.eval_split} split") from None
        except tf.errors.InvalidArgumentError as e:  # an example of it that a stage cannot take
            raise sources.example_refused(self.eval_source, e) from None
        return self._checked(self.eval_metrics(totals))

    def _checked(self, metrics: Any) -> dict[str, float]:
        """eval_metrics' result as the trainer takes it: a dict of numbers holding the target's metric
        (ConfigError naming the workload otherwise: a target it never reports could never be reached)."""
        name = type(self).__name__
        if not isinstance(metrics, Mapping):
            raise ConfigError("workload.task", name, "", f"{name}.eval_metrics must return a dict of metric names "
                              f"to numbers, not {type(metrics).__name__}")
        wrong = [f"{k} ({type(v).__name__})" for k, v in metrics.items()
                 if not isinstance(v, (int, float, np.number)) or isinstance(v, bool)]
        if wrong:
            raise ConfigError("workload.task", name, "", f"{name}.eval_metrics returned {', '.join(wrong)}: each "
                              "metric must be a number (float(...) of a device value)")
        if self.target.metric not in metrics:
            raise ConfigError("workload.target.metric", self.target.metric, "", (
                f"workload.target.metric={self.target.metric} is not among the metrics {name}.eval_metrics returns "
                f"({', '.join(metrics) or 'none'}): the run could never reach its target"))
        return dict(metrics)
