"""A workload built so that what a copy is worth is known by design, for the autopilot's tests: a linear
softmax classifier of random images labelled by a random linear teacher.

Each image is 256 pixels of noise, so a batch's images are nearly orthogonal to one another and to every other
image. A step's change to a batch's logits is then its learning rate times about |x|^2 / B per example; with a
learning rate large enough that one step fits its batch (``options.fits_in_one_step``), the batch's loss is
about 0 after its step and a copy of it has almost no gradient: it teaches nothing new, while a fresh batch
still carries the teacher's direction. With a small learning rate a step barely changes its batch's loss, and a
copy's gradient is the fresh batch's own: a copy is worth about a fresh example.
"""

from dataclasses import dataclass
from typing import Any, ClassVar, Mapping

import jax
import jax.numpy as jnp
import numpy as np
import optax
import tensorflow as tf

from echo_experiments.workloads import CustomWorkloadConfig, Workload

SIDE, CLASSES = 16, 4


def write_data(folder, train: int = 8192, test: int = 1024, seed: int = 0) -> None:
    """train.npz and test.npz: uint8 noise images and their teacher's labels."""
    rng = np.random.default_rng(seed)
    teacher = rng.normal(size=(SIDE * SIDE, CLASSES))
    for split, n in (("train", train), ("test", test)):
        images = rng.integers(0, 256, size=(n, SIDE, SIDE, 1), dtype=np.uint8)
        labels = np.argmax(_features(images.reshape(n, -1)) @ teacher, axis=1).astype(np.int64)
        np.savez(folder / f"{split}.npz", image=images, label=labels)


def _features(images):
    return images.astype(np.float32) / 255 - 0.5


@dataclass
class LinearTeacherConfig(CustomWorkloadConfig):
    metrics: ClassVar[tuple[str, ...]] = ("accuracy", "loss")
    datasets: ClassVar[tuple[str, ...]] = ()
    augments: ClassVar[bool] = False


class LinearTeacher(Workload):
    config_class = LinearTeacherConfig

    def decode(self, record: Mapping[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        image = tf.io.decode_png(record["image"], channels=1)
        image.set_shape((SIDE, SIDE, 1))
        return {"image": image, "label": record["label"], "read_id": record["read_id"]}

    def eval_examples(self) -> tf.data.Dataset:
        return self.eval_source.decoded().map(lambda x: {"image": x["image"], "label": x["label"]})

    def init(self, rng: jax.Array):
        return {"kernel": jnp.zeros((SIDE * SIDE, CLASSES))}, {}

    def _logits(self, params, batch):
        x = batch["image"].reshape((batch["image"].shape[0], -1)).astype(jnp.float32) / 255 - 0.5
        return x @ params["kernel"]

    def loss(self, params, model_state, batch, rng):
        logits = self._logits(params, batch)
        return optax.softmax_cross_entropy_with_integer_labels(logits, batch["label"]).mean(), model_state

    def eval_outputs(self, params, model_state, batch):
        logits, mask = self._logits(params, batch), batch["mask"]
        losses = optax.softmax_cross_entropy_with_integer_labels(logits, batch["label"])
        return {"correct": jnp.sum((logits.argmax(-1) == batch["label"]) * mask),
                "loss": jnp.sum(losses * mask), "count": jnp.sum(mask)}

    def eval_metrics(self, totals: Any) -> dict[str, float]:
        totals = jax.device_get(totals)
        return {"accuracy": float(totals["correct"] / totals["count"]), "loss": float(totals["loss"] / totals["count"])}
