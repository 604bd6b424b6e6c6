"""A workload of your own, outside echo_experiments: a two-layer MLP on Fashion-MNIST.

It is found through ``workload.task: fashion_mlp:FashionMLP`` (this module must be importable: run from this
folder with ``python -m echo_experiments``, or put it on PYTHONPATH) and its YAML through
``hydra.searchpath=[file://conf]``. What a workload must provide is the contract in
echo_experiments/workloads/base.py; the runner checks it when a run starts.
"""

from dataclasses import dataclass
from typing import Any, ClassVar, Mapping

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax
import tensorflow as tf

from echo_experiments.workloads import CustomWorkloadConfig, Workload


@dataclass
class FashionMLPConfig(CustomWorkloadConfig):
    # What this workload declares: the metrics it evaluates (the target's metric is one of them), the data
    # sets it reads, and that it augments (so it has echo points before and after augmentation).
    metrics: ClassVar[tuple[str, ...]] = ("accuracy", "loss")
    datasets: ClassVar[tuple[str, ...]] = ("fashion_mnist",)
    augments: ClassVar[bool] = True


class MLP(nn.Module):
    hidden: int
    classes: int

    @nn.compact
    def __call__(self, x):
        x = x.reshape((x.shape[0], -1))
        x = nn.relu(nn.Dense(self.hidden)(x))
        return nn.Dense(self.classes)(x)


class FashionMLP(Workload):
    config_class = FashionMLPConfig

    def __init__(self, cfg: Any, data_dir, compute_dtype: Any = jnp.float32):
        super().__init__(cfg, data_dir, compute_dtype)  # opens cfg.dataset's train and eval splits
        self.model = MLP(hidden=int(cfg.options.hidden), classes=self.train_source.num_classes)
        self.shift = int(cfg.options.shift)  # plain values: tf.data traces the stage functions

    # The upstream stage (before the first echo point): decode the stored PNG.
    def decode(self, record: Mapping[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        image = tf.io.decode_png(record["image"], channels=1)
        image.set_shape((28, 28, 1))
        return {"image": image, "label": record["label"], "read_id": record["read_id"]}

    # Augmentation: a random shift of up to `shift` pixels, from the stateless seed the pipeline gives.
    def augment(self, example: Mapping[str, tf.Tensor], seed: tf.Tensor) -> dict[str, tf.Tensor]:
        pad = self.shift
        image = tf.pad(example["image"], [[pad, pad], [pad, pad], [0, 0]])
        return {**example, "image": tf.image.stateless_random_crop(image, (28, 28, 1), seed=seed)}

    def eval_examples(self) -> tf.data.Dataset:
        return self.eval_source.decoded().map(lambda x: {"image": x["image"], "label": x["label"]})

    def init(self, rng: jax.Array):
        return self.model.init(rng, jnp.zeros((1, 28, 28, 1)))["params"], {}

    def loss(self, params, model_state, batch, rng):
        logits = self.model.apply({"params": params}, batch["image"].astype(jnp.float32) / 255)
        return optax.softmax_cross_entropy_with_integer_labels(logits, batch["label"]).mean(), model_state

    def eval_outputs(self, params, model_state, batch):
        logits = self.model.apply({"params": params}, batch["image"].astype(jnp.float32) / 255)
        mask = batch["mask"]  # the last batch is padded
        losses = optax.softmax_cross_entropy_with_integer_labels(logits, batch["label"])
        return {"correct": jnp.sum((logits.argmax(-1) == batch["label"]) * mask),
                "loss": jnp.sum(losses * mask), "count": jnp.sum(mask)}

    def eval_metrics(self, totals) -> dict[str, float]:
        totals = jax.device_get(totals)
        return {"accuracy": float(totals["correct"] / totals["count"]), "loss": float(totals["loss"] / totals["count"])}
