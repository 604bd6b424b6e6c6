"""Object detection: SSD on COCO, and offline on Fashion-MNIST items placed on canvases.

Pipeline recipe: decode the image (for the offline Fashion-MNIST canvases: compose a new canvas from the read
id) and pad its boxes to ``detection.max_boxes`` (with ``box_mask``);
augment with SSD's random crop (the crop must cover at least a drawn fraction of some box; boxes whose
centre leaves the crop are dropped, the others clipped), a horizontal flip and photometric distortion, then
resize to ``detection.image_size``. Echo points: before and after augmentation, and after batching.
Evaluation: NMS on the decoded boxes, then COCO mAP from pycocotools.
"""

from typing import Any, Mapping

import jax
import jax.numpy as jnp
import numpy as np
import tensorflow as tf

from echo_experiments.data import sources
from echo_experiments.models import ssd
from echo_experiments.workloads import mean_ap
from echo_experiments.workloads.base import Workload
from echo_experiments.workloads.detection_schema import DetectionConfig

# The fractions of some box a random crop must cover, drawn uniformly; 0 = keep the whole image (SSD's set).
MIN_COVERED = (0.0, 0.1, 0.3, 0.5, 0.7, 0.9)
NORMALIZATION = {"fashion_mnist_detection": ((0.5,), (0.25,)),
                 "coco/2017": ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))}


class Detection(Workload):
    config_class = DetectionConfig

    def __init__(self, cfg: Any, data_dir, compute_dtype: Any = jnp.float32):
        super().__init__(cfg, data_dir, compute_dtype)
        d = cfg.detection
        # Plain values: the stage functions are traced by tf.data and must not read the config object.
        self.image_size, self.max_boxes = int(d.image_size), int(d.max_boxes)
        self.score_threshold, self.max_detections = float(d.score_threshold), int(d.max_detections)
        self.random_crop = bool(cfg.augment.random_crop)
        self.flip = bool(cfg.augment.flip)
        self.photometric = bool(cfg.augment.photometric)
        features = self.train_source.builder.info.features
        self.num_classes = features["objects"]["label"].num_classes
        self.channels = features["image"].shape[-1]
        self.model = ssd.build(cfg.model, self.num_classes)
        self.anchors = jnp.asarray(ssd.anchors(self.model.feature_sizes(self.image_size)))
        mean, std = NORMALIZATION[cfg.dataset]
        self._mean, self._std = np.asarray(mean, np.float32) * 255, np.asarray(std, np.float32) * 255

    # --- input pipeline -------------------------------------------------------------------------------

    def _boxes(self, objects: Mapping[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        """Boxes and labels padded (or cut) to max_boxes, crowd regions left out."""
        keep = tf.ones_like(objects["label"], tf.bool)
        if "is_crowd" in objects:
            keep = tf.logical_not(objects["is_crowd"])
        boxes = tf.boolean_mask(objects["bbox"], keep)[: self.max_boxes]
        labels = tf.cast(tf.boolean_mask(objects["label"], keep)[: self.max_boxes], tf.int32)
        n = tf.shape(labels)[0]
        pad = self.max_boxes - n
        out = {"boxes": tf.pad(boxes, [[0, pad], [0, 0]]), "labels": tf.pad(labels, [[0, pad]]),
               "box_mask": tf.pad(tf.ones([n], tf.float32), [[0, pad]])}
        for value in out.values():  # fixed shapes, so batches stack and the step compiles once
            value.set_shape([self.max_boxes] + value.shape.as_list()[1:])
        return out

    def decode(self, record: Mapping[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        if isinstance(self.train_source, sources.CanvasStream):  # a new canvas per read, composed from its read id
            image, boxes, labels = tf.numpy_function(self.train_source.canvas, [record["read_id"]],
                                                     (tf.uint8, tf.float32, tf.int64), stateful=False)
            image.set_shape([self.train_source.builder.CANVAS, self.train_source.builder.CANVAS, self.channels])
            boxes.set_shape([None, 4])
            labels.set_shape([None])
            return {"image": image, **self._boxes({"bbox": boxes, "label": labels}), "read_id": record["read_id"]}
        image = tf.io.decode_image(record["image"], channels=self.channels, expand_animations=False)
        return {"image": image, **self._boxes(record["objects"]), "read_id": record["read_id"]}

    def augment(self, example: Mapping[str, tf.Tensor], seed: tf.Tensor) -> dict[str, tf.Tensor]:
        crop_seed, pick_seed, flip_seed, photo_seed = tf.unstack(tf.random.experimental.stateless_split(seed, 4))
        image, boxes, mask = example["image"], example["boxes"], example["box_mask"]
        if self.random_crop:
            image, boxes, mask = random_crop(image, boxes, mask, crop_seed, pick_seed)
        image = tf.image.resize(image, (self.image_size, self.image_size))
        if self.flip:
            image, boxes = flip(image, boxes, tf.random.stateless_uniform([], flip_seed) < 0.5)
        if self.photometric:
            image = photometric(image, photo_seed)
        return {**example, "image": self._to_input(image), "boxes": boxes * mask[:, None], "box_mask": mask}

    def _to_input(self, image: tf.Tensor) -> tf.Tensor:
        """A resized float image as the model's fixed-shape uint8 input."""
        image = tf.cast(tf.clip_by_value(tf.round(image), 0, 255), tf.uint8)
        image.set_shape([self.image_size, self.image_size, self.channels])
        return image

    def eval_examples(self) -> tf.data.Dataset:
        def example(record: Mapping[str, tf.Tensor]) -> dict[str, tf.Tensor]:
            image = tf.image.resize(record["image"], (self.image_size, self.image_size))
            return {"image": self._to_input(image), **self._boxes(record["objects"])}

        return self.eval_source.decoded().map(example, num_parallel_calls=tf.data.AUTOTUNE)

    # --- model, loss, evaluation ----------------------------------------------------------------------

    def init(self, rng: jax.Array) -> tuple[Any, Any]:
        shape = (1, self.image_size, self.image_size, self.channels)
        variables = self.model.init(rng, jnp.zeros(shape, jnp.float32), train=False)
        return variables["params"], {"batch_stats": variables["batch_stats"]}

    def _normalize(self, image: jax.Array) -> jax.Array:
        return ((image.astype(jnp.float32) - self._mean) / self._std).astype(self.compute_dtype)

    def loss(self, params, model_state, batch, rng):
        del rng
        (box_pred, logits), new_state = self.model.apply({"params": params, **model_state},
                                                         self._normalize(batch["image"]), train=True,
                                                         mutable=["batch_stats"])
        value = ssd.loss(box_pred.astype(jnp.float32), logits.astype(jnp.float32), batch["boxes"], batch["labels"],
                         batch["box_mask"] > 0, self.anchors)
        return value, new_state

    def eval_outputs(self, params, model_state, batch):
        box_pred, logits = self.model.apply({"params": params, **model_state}, self._normalize(batch["image"]),
                                            train=False)
        return jnp.clip(ssd.decode(box_pred, self.anchors), 0.0, 1.0), jax.nn.softmax(logits)[..., 1:]

    def eval_accumulate(self, found, outputs, batch):
        """Non-maximum suppression on the host, then the batch's detections into pycocotools' tally."""
        found = found or mean_ap.Detections(self.num_classes)
        boxes, scores = jax.device_get(outputs)
        nms = tf.image.combined_non_max_suppression(
            boxes[:, :, None, :], scores, max_output_size_per_class=self.max_detections,
            max_total_size=self.max_detections, iou_threshold=0.5, score_threshold=self.score_threshold)
        # To NumPy once per batch: slicing the eager tensors image by image costs more than the rest of the tally.
        valid, nms_boxes, classes, nms_scores = (x.numpy() for x in (nms.valid_detections, nms.nmsed_boxes,
                                                                    nms.nmsed_classes, nms.nmsed_scores))
        for i in np.flatnonzero(batch["mask"]):
            n, truth = int(valid[i]), batch["box_mask"][i] > 0
            found.add(batch["boxes"][i][truth], batch["labels"][i][truth], nms_boxes[i][:n], classes[i][:n],
                      nms_scores[i][:n])
        return found

    def eval_metrics(self, found) -> dict[str, float]:
        return found.mean_ap()


def random_crop(image: tf.Tensor, boxes: tf.Tensor, mask: tf.Tensor, seed: tf.Tensor, pick_seed: tf.Tensor):
    """SSD's crop: a random window (0.3-1 of the area, aspect 1/2-2) covering at least a drawn fraction of
    some box, or the whole image; boxes whose centre leaves the window are dropped, the rest clipped."""
    valid = tf.boolean_mask(boxes, mask > 0)
    pick = tf.random.stateless_uniform([], pick_seed, maxval=len(MIN_COVERED), dtype=tf.int32)
    covered = tf.gather(tf.constant(MIN_COVERED, tf.float32), pick)
    begin, size, window = tf.image.stateless_sample_distorted_bounding_box(
        tf.shape(image), valid[None], seed=seed, min_object_covered=covered, aspect_ratio_range=(0.5, 2.0),
        area_range=(0.3, 1.0), max_attempts=50, use_image_if_no_bounding_boxes=True)
    whole = tf.equal(pick, 0)
    shape = tf.shape(image)
    begin = tf.where(whole, tf.zeros_like(begin), begin)
    size = tf.where(whole, tf.stack([shape[0], shape[1], -1]), size)
    window = tf.where(whole, tf.constant([0.0, 0.0, 1.0, 1.0]), window[0, 0])
    image = tf.slice(image, begin, size)
    height, width = window[2] - window[0], window[3] - window[1]
    offset = tf.stack([window[0], window[1], window[0], window[1]])
    scale = tf.stack([height, width, height, width])
    centre = (boxes[:, :2] + boxes[:, 2:]) / 2
    inside = tf.reduce_all((centre > window[:2]) & (centre < window[2:]), axis=1)
    mask = mask * tf.cast(inside, tf.float32)
    boxes = tf.clip_by_value((boxes - offset) / scale, 0.0, 1.0)
    return image, boxes, mask


def flip(image: tf.Tensor, boxes: tf.Tensor, do: tf.Tensor):
    """Mirror the image left-right when ``do``; x becomes 1 - x in the boxes."""
    mirrored = tf.stack([boxes[:, 0], 1 - boxes[:, 3], boxes[:, 2], 1 - boxes[:, 1]], axis=1)
    return tf.where(do, tf.reverse(image, axis=[1]), image), tf.where(do, mirrored, boxes)


def photometric(image: tf.Tensor, seed: tf.Tensor) -> tf.Tensor:
    """Random brightness and contrast (and saturation for colour images), as SSD distorts photos."""
    s1, s2, s3 = tf.unstack(tf.random.experimental.stateless_split(seed, 3))
    image = tf.image.stateless_random_brightness(image, 32.0, s1)
    image = tf.image.stateless_random_contrast(image, 0.5, 1.5, s2)
    if image.shape[-1] == 3:
        image = tf.image.stateless_random_saturation(image, 0.5, 1.5, s3)
    return image
