"""SSD (Liu et al. 2016), a single-stage detector, in Flax and JAX.

A ResNet backbone gives feature maps at several scales; at every location of each map sit default boxes
(anchors) of a few scales and aspect ratios, and two 3x3 convolutions predict, per anchor, box offsets and
class scores (class 0 is background). Training matches anchors to ground-truth boxes by IoU, encodes the
matched boxes as offsets, and mines hard negatives; evaluation decodes the offsets back into boxes (NMS
and mAP are the workload's).

Boxes are (ymin, xmin, ymax, xmax) in [0, 1] (TFDS's convention); anchors are (cy, cx, h, w).
"""

import math
from typing import Any, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from echo_experiments.models.resnet import BasicBlock

VARIANCES = (0.1, 0.2)  # SSD's scaling of centre and size offsets


def anchors(feature_sizes: Sequence[int], min_scale: float = 0.2, max_scale: float = 0.9,
            aspect_ratios: Sequence[float] = (1.0, 2.0, 0.5)) -> np.ndarray:
    """Default boxes [A, 4] as (cy, cx, h, w): per level k, scale s_k from min to max (SSD's spacing), one box
    per aspect ratio plus a square of scale sqrt(s_k s_k+1), at every cell centre."""
    levels = len(feature_sizes)
    scales = [min_scale + (max_scale - min_scale) * k / max(levels - 1, 1) for k in range(levels)] + [1.0]
    out = []
    for k, size in enumerate(feature_sizes):
        shapes = [(scales[k] / math.sqrt(r), scales[k] * math.sqrt(r)) for r in aspect_ratios]
        shapes.append((math.sqrt(scales[k] * scales[k + 1]),) * 2)
        centres = (np.arange(size) + 0.5) / size
        for cy in centres:
            for cx in centres:
                out += [(cy, cx, h, w) for h, w in shapes]
    return np.asarray(out, np.float32)


def per_location(aspect_ratios: Sequence[float] = (1.0, 2.0, 0.5)) -> int:
    return len(aspect_ratios) + 1


def to_corners(cyxhw: jnp.ndarray) -> jnp.ndarray:
    cy, cx, h, w = jnp.moveaxis(cyxhw, -1, 0)
    return jnp.stack([cy - h / 2, cx - w / 2, cy + h / 2, cx + w / 2], axis=-1)


def iou(a: jnp.ndarray, b: jnp.ndarray) -> jnp.ndarray:
    """Intersection over union of corner boxes a [N, 4] and b [M, 4]: [N, M]."""
    top_left = jnp.maximum(a[:, None, :2], b[None, :, :2])
    bottom_right = jnp.minimum(a[:, None, 2:], b[None, :, 2:])
    inter = jnp.prod(jnp.clip(bottom_right - top_left, 0), axis=-1)
    area = lambda x: jnp.prod(jnp.clip(x[:, 2:] - x[:, :2], 0), axis=-1)  # noqa: E731
    return inter / jnp.maximum(area(a)[:, None] + area(b)[None, :] - inter, 1e-9)


def encode(boxes: jnp.ndarray, default: jnp.ndarray) -> jnp.ndarray:
    """Corner boxes [A, 4] as offsets from their default boxes [A, 4] (cy, cx, h, w)."""
    h, w = boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1]
    cy, cx = boxes[:, 0] + h / 2, boxes[:, 1] + w / 2
    return jnp.stack([(cy - default[:, 0]) / default[:, 2] / VARIANCES[0],
                      (cx - default[:, 1]) / default[:, 3] / VARIANCES[0],
                      jnp.log(jnp.maximum(h, 1e-6) / default[:, 2]) / VARIANCES[1],
                      jnp.log(jnp.maximum(w, 1e-6) / default[:, 3]) / VARIANCES[1]], axis=-1)


def decode(offsets: jnp.ndarray, default: jnp.ndarray) -> jnp.ndarray:
    """The inverse of :func:`encode`: offsets [..., A, 4] to corner boxes."""
    cy = default[:, 0] + offsets[..., 0] * VARIANCES[0] * default[:, 2]
    cx = default[:, 1] + offsets[..., 1] * VARIANCES[0] * default[:, 3]
    h = default[:, 2] * jnp.exp(offsets[..., 2] * VARIANCES[1])
    w = default[:, 3] * jnp.exp(offsets[..., 3] * VARIANCES[1])
    return jnp.stack([cy - h / 2, cx - w / 2, cy + h / 2, cx + w / 2], axis=-1)


def match(boxes: jnp.ndarray, valid: jnp.ndarray, default: jnp.ndarray, threshold: float = 0.5):
    """Assign ground-truth boxes [G, 4] (``valid`` [G]) to default boxes [A, 4].

    Returns (index of the assigned ground-truth box [A], positive [A]): an anchor is positive when its IoU
    with some box is at least ``threshold``, and every valid box also gets an anchor of its own, the best
    one no earlier box took, whatever the IoU.
    """
    overlaps = jnp.where(valid[None, :], iou(to_corners(default), boxes), -1.0)
    assigned = jnp.argmax(overlaps, axis=1)
    positive = jnp.max(overlaps, axis=1) >= threshold

    def force(g, carry):
        assigned, positive, taken = carry
        a = jnp.argmax(jnp.where(taken, -2.0, overlaps[:, g]))
        keep = valid[g]
        return (assigned.at[a].set(jnp.where(keep, g, assigned[a])), positive.at[a].set(positive[a] | keep),
                taken.at[a].set(taken[a] | keep))

    taken = jnp.zeros(default.shape[0], bool)
    assigned, positive, _ = jax.lax.fori_loop(0, boxes.shape[0], force, (assigned, positive, taken))
    return assigned, positive


def loss(box_pred: jnp.ndarray, class_logits: jnp.ndarray, boxes: jnp.ndarray, labels: jnp.ndarray,
         valid: jnp.ndarray, default: jnp.ndarray, negatives_per_positive: int = 3) -> jnp.ndarray:
    """SSD's loss for a batch: smooth L1 on positive anchors' offsets plus cross entropy on positives and the
    hardest negatives (3 per positive), divided by the number of positives."""

    def one(box_pred, class_logits, boxes, labels, valid):
        assigned, positive = match(boxes, valid, default)
        targets = encode(boxes[assigned], default)
        loc = jnp.sum(jnp.where(positive[:, None], _smooth_l1(box_pred - targets), 0.0))
        classes = jnp.where(positive, labels[assigned] + 1, 0)
        ce = -jnp.take_along_axis(jax.nn.log_softmax(class_logits), classes[:, None], axis=1)[:, 0]
        negative_ce = jnp.where(positive, -jnp.inf, ce)
        rank = jnp.argsort(jnp.argsort(-negative_ce))
        hard = (rank < negatives_per_positive * jnp.sum(positive)) & ~positive
        return loc + jnp.sum(jnp.where(positive | hard, ce, 0.0)), jnp.sum(positive)

    total, positives = jax.vmap(one)(box_pred, class_logits, boxes, labels, valid)
    return jnp.sum(total) / jnp.maximum(jnp.sum(positives), 1)


def _smooth_l1(x: jnp.ndarray) -> jnp.ndarray:
    a = jnp.abs(x)
    return jnp.where(a < 1, 0.5 * x * x, a - 0.5)


class SSD(nn.Module):
    """A ResNet of ``stage_sizes`` basic blocks (width doubling per stage, stride 2 each), whose last
    ``levels`` stage outputs carry the heads."""

    num_classes: int  # foreground classes; logits have one more (background)
    stage_sizes: Sequence[int] = (1, 1, 1, 1)
    width: int = 16
    levels: int = 3
    stem_stride: int = 2

    @nn.compact
    def __call__(self, x: jnp.ndarray, train: bool = False) -> tuple[jnp.ndarray, jnp.ndarray]:
        """Box offsets [B, A, 4] and class logits [B, A, num_classes + 1]."""
        x = nn.Conv(self.width, (3, 3), self.stem_stride, use_bias=False)(x)
        x = nn.relu(nn.BatchNorm(use_running_average=not train, momentum=0.9, epsilon=1e-5)(x))
        maps = []
        for stage, blocks in enumerate(self.stage_sizes):
            width = self.width * 2 ** min(stage, 3)
            for block in range(blocks):
                x = BasicBlock(width, 2 if block == 0 else 1)(x, train)
            maps.append(x)
        k = per_location()
        boxes, logits = [], []
        for level, fmap in enumerate(maps[-self.levels:]):
            b = nn.Conv(k * 4, (3, 3), name=f"box_head_{level}")(fmap)
            c = nn.Conv(k * (self.num_classes + 1), (3, 3), name=f"class_head_{level}")(fmap)
            boxes.append(b.reshape(b.shape[0], -1, 4))
            logits.append(c.reshape(c.shape[0], -1, self.num_classes + 1))
        return jnp.concatenate(boxes, axis=1), jnp.concatenate(logits, axis=1)

    def feature_sizes(self, image_size: int) -> list[int]:
        """Side of each head's feature map for square inputs of ``image_size`` (SAME padding)."""
        size = math.ceil(image_size / self.stem_stride)
        sizes = []
        for _ in self.stage_sizes:
            size = math.ceil(size / 2)
            sizes.append(size)
        return sizes[-self.levels:]


def build(model_cfg: Any, num_classes: int) -> SSD:
    """The detector a workload's ``model`` config (workloads/detection_schema.py, validated) describes."""
    return SSD(num_classes=num_classes, stage_sizes=tuple(model_cfg.stage_sizes), width=model_cfg.width,
               levels=model_cfg.levels, stem_stride=model_cfg.stem_stride)
