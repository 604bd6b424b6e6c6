"""COCO mean average precision through pycocotools, the reference implementation (never hand-written).

Boxes arrive as normalised (ymin, xmin, ymax, xmax) and are scaled by one common ``size`` into COCO's
pixel (x, y, width, height): mAP@[.5:.95] and mAP@.5 over all areas depend only on IoUs, which any common
scale leaves unchanged.
"""

import contextlib
import io
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval


def _xywh(box: Sequence[float], size: float) -> list[float]:
    ymin, xmin, ymax, xmax = (float(v) * size for v in box)
    return [xmin, ymin, xmax - xmin, ymax - ymin]


@dataclass
class Detections:
    """Ground truth and detections of an evaluation, collected image by image."""

    num_classes: int
    size: float = 100.0
    images: list[dict] = field(default_factory=list)
    truth: list[dict] = field(default_factory=list)
    found: list[dict] = field(default_factory=list)

    def add(self, boxes: np.ndarray, labels: np.ndarray, detected_boxes: np.ndarray, detected_labels: np.ndarray,
            scores: np.ndarray) -> None:
        """One image: its ground truth (boxes [G, 4], labels [G]) and detections (boxes, labels, scores)."""
        image = len(self.images) + 1
        self.images.append({"id": image})
        for box, label in zip(boxes, labels):
            xywh = _xywh(box, self.size)
            self.truth.append({"id": len(self.truth) + 1, "image_id": image, "category_id": int(label) + 1,
                               "bbox": xywh, "area": xywh[2] * xywh[3], "iscrowd": 0})
        for box, label, score in zip(detected_boxes, detected_labels, scores):
            self.found.append({"image_id": image, "category_id": int(label) + 1, "bbox": _xywh(box, self.size),
                               "score": float(score)})

    def mean_ap(self) -> dict[str, float]:
        """{"map": mAP@[.5:.95], "map50": mAP@.5}; 0 when nothing was detected."""
        if not self.found or not self.truth:
            return {"map": 0.0, "map50": 0.0}
        with contextlib.redirect_stdout(io.StringIO()):  # pycocotools prints its progress and summary table
            truth = COCO()
            truth.dataset = {"images": self.images, "annotations": self.truth,
                             "categories": [{"id": c + 1} for c in range(self.num_classes)]}
            truth.createIndex()
            evaluation = COCOeval(truth, truth.loadRes(self.found), "bbox")
            evaluation.evaluate()
            evaluation.accumulate()
            evaluation.summarize()
        return {"map": max(0.0, float(evaluation.stats[0])), "map50": max(0.0, float(evaluation.stats[1]))}
