"""Image classification: Fashion-MNIST, CIFAR-10 and ImageNet with ResNets (the paper's ResNet-32 and -50).

Pipeline recipe: decode the stored image; augment with pad-and-random-crop plus horizontal flip (small
images) or random-resized-crop plus flip (ImageNet). Batches stay uint8 on the host; normalisation runs on
the accelerator inside the jitted step.
"""

from typing import Any, Mapping

import jax
import jax.numpy as jnp
import numpy as np
import optax
import tensorflow as tf

from echo_experiments.models import resnet
from echo_experiments.workloads.base import Workload
from echo_experiments.workloads.image_classification_schema import ImageClassificationConfig

# Per-channel mean and standard deviation of the training images, in [0, 1] units.
NORMALIZATION = {
    "fashion_mnist": ((0.2860,), (0.3530,)),
    "cifar10": ((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)),
    "imagenet2012": ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),
    "synthetic_images": ((0.5,), (0.25,)),
}


class ImageClassification(Workload):
    config_class = ImageClassificationConfig

    def __init__(self, cfg: Any, data_dir, compute_dtype: Any = jnp.float32):
        super().__init__(cfg, data_dir, compute_dtype)
        self.num_classes = self.train_source.num_classes
        self.model = resnet.build(cfg.model, self.num_classes)
        stored = self.train_source.image_shape
        self.channels = stored[-1]
        self.stored_shape = stored if None not in stored else None
        # Plain values: the stage functions are traced by tf.data and must not read the config object.
        aug = cfg.augment
        self.image_size = aug.image_size
        self.crop_padding = int(aug.crop_padding)
        self.flip = bool(aug.flip)
        self.random_resized_crop = bool(aug.random_resized_crop)
        self.image_shape = (self.image_size, self.image_size, self.channels) if self.image_size else tuple(stored)
        # Images of one stored size are augmented a chunk at a time; ImageNet's vary, so one at a time.
        self.augments_in_chunks = self.stored_shape is not None and not self.image_size
        # Data of a user's own: each channel centred on the middle of its range.
        mean, std = NORMALIZATION.get(cfg.dataset, ((0.5,) * self.channels, (0.25,) * self.channels))
        self._mean = np.asarray(mean, np.float32) * 255
        self._std = np.asarray(std, np.float32) * 255

    # --- input pipeline -------------------------------------------------------------------------------

    def decode(self, record: Mapping[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        image = tf.io.decode_image(record["image"], channels=self.channels, expand_animations=False)
        # decode_image leaves even the channels unknown; a train step is compiled for a fixed shape.
        image.set_shape(self.stored_shape or (None, None, self.channels))
        return {"image": image, "label": record["label"], "read_id": record["read_id"]}

    def augment(self, example: Mapping[str, tf.Tensor], seed: tf.Tensor) -> dict[str, tf.Tensor]:
        crop_seed, flip_seed = tf.unstack(tf.random.experimental.stateless_split(seed, 2))
        image = example["image"]
        if self.random_resized_crop:
            image = _random_resized_crop(image, self.image_size, crop_seed)
        elif self.image_size:
            image = _center_crop(image, self.image_size)
        if self.crop_padding:
            pad = self.crop_padding
            image = tf.pad(image, [[pad, pad], [pad, pad], [0, 0]])
            image = tf.image.stateless_random_crop(image, self.image_shape, seed=crop_seed)
        if self.flip:
            image = tf.image.stateless_random_flip_left_right(image, seed=flip_seed)
        return {**example, "image": image}

    def augment_chunk(self, examples: Mapping[str, tf.Tensor], seed: tf.Tensor) -> dict[str, tf.Tensor]:
        """Pad-and-random-crop and flip for a chunk of same-size images, each with its own draw."""
        crop_seed, flip_seed = tf.unstack(tf.random.experimental.stateless_split(seed, 2))
        images = examples["image"]
        n = tf.shape(images)[0]
        height, width = self.stored_shape[0], self.stored_shape[1]
        if self.crop_padding:
            pad = self.crop_padding
            images = tf.pad(images, [[0, 0], [pad, pad], [pad, pad], [0, 0]])
            offsets = tf.random.stateless_uniform([n, 2], seed=crop_seed, minval=0, maxval=2 * pad + 1, dtype=tf.int32)
            rows = offsets[:, :1] + tf.range(height)[None, :]
            cols = offsets[:, 1:] + tf.range(width)[None, :]
            images = tf.gather(tf.gather(images, rows, axis=1, batch_dims=1), cols, axis=2, batch_dims=1)
        if self.flip:
            flip = tf.random.stateless_uniform([n], seed=flip_seed) < 0.5
            images = tf.where(flip[:, None, None, None], tf.reverse(images, axis=[2]), images)
        return {**examples, "image": images}

    def eval_examples(self) -> tf.data.Dataset:
        size = self.image_size
        preprocess = lambda x: {"image": _center_crop(x["image"], size) if size else x["image"],  # noqa: E731
                                "label": x["label"]}
        return self.eval_source.decoded().map(preprocess, num_parallel_calls=tf.data.AUTOTUNE)

    # --- model, loss, evaluation ----------------------------------------------------------------------

    def init(self, rng: jax.Array) -> tuple[Any, Any]:
        variables = self.model.init(rng, jnp.zeros((1,) + self.image_shape, jnp.float32), train=False)
        return variables["params"], {"batch_stats": variables["batch_stats"]}

    def _normalize(self, image: jax.Array) -> jax.Array:
        return ((image.astype(jnp.float32) - self._mean) / self._std).astype(self.compute_dtype)

    def loss(self, params, model_state, batch, rng):
        del rng  # the ResNets have no dropout
        logits, new_state = self.model.apply({"params": params, **model_state}, self._normalize(batch["image"]),
                                             train=True, mutable=["batch_stats"])
        labels = optax.smooth_labels(jax.nn.one_hot(batch["label"], self.num_classes), self.cfg.label_smoothing)
        return optax.softmax_cross_entropy(logits.astype(jnp.float32), labels).mean(), new_state

    def eval_outputs(self, params, model_state, batch):
        logits = self.model.apply({"params": params, **model_state}, self._normalize(batch["image"]), train=False)
        mask = batch["mask"]
        losses = optax.softmax_cross_entropy_with_integer_labels(logits, batch["label"])
        return {"correct": jnp.sum((jnp.argmax(logits, -1) == batch["label"]) * mask),
                "loss": jnp.sum(losses * mask), "count": jnp.sum(mask)}

    def eval_metrics(self, totals) -> dict[str, float]:
        totals = jax.device_get(totals)
        count = float(totals["count"])
        return {"accuracy": float(totals["correct"]) / count, "loss": float(totals["loss"]) / count}


def _center_crop(image: tf.Tensor, size: int) -> tf.Tensor:
    """Resize the shorter side to size / 0.875, then take the central size x size (the usual eval crop)."""
    shape = tf.cast(tf.shape(image)[:2], tf.float32)
    scale = (size / 0.875) / tf.reduce_min(shape)
    resized = tf.image.resize(image, tf.cast(tf.round(shape * scale), tf.int32))
    return _to_uint8(tf.image.resize_with_crop_or_pad(resized, size, size))


def _random_resized_crop(image: tf.Tensor, size: int, seed: tf.Tensor) -> tf.Tensor:
    """A random crop of 8%-100% of the area and 3/4-4/3 aspect ratio, resized to size x size."""
    begin, extent, _ = tf.image.stateless_sample_distorted_bounding_box(
        tf.shape(image), bounding_boxes=tf.constant([[[0.0, 0.0, 1.0, 1.0]]]), seed=seed,
        min_object_covered=0.1, aspect_ratio_range=(3 / 4, 4 / 3), area_range=(0.08, 1.0), max_attempts=10,
        use_image_if_no_bounding_boxes=True)
    crop = tf.slice(image, begin, extent)
    crop.set_shape([None, None, image.shape[-1]])  # a slice by tensors forgets the channels
    return _to_uint8(tf.image.resize(crop, (size, size)))


def _to_uint8(image: tf.Tensor) -> tf.Tensor:
    return tf.cast(tf.clip_by_value(tf.round(image), 0, 255), tf.uint8)
