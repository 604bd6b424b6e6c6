"""The data sets this machine builds itself, offline: Fashion-MNIST from Debian's files, the Python
documentation corpus, the detection canvases and a synthetic image set (sources.py opens them).
"""

import gzip
import os
import struct
import zlib
from pathlib import Path

import numpy as np
import tensorflow_datasets as tfds

FASHION_MNIST_DIR = Path(os.environ.get("ECHO_FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist"))
# Debian's python3-doc: the reStructuredText sources of the Python documentation, a real English corpus.
PYTHON_DOCS_DIR = Path(os.environ.get("ECHO_PYTHON_DOCS_DIR", "/usr/share/doc/python3/html/_sources"))
# Every tenth document (by a hash of its path) is held out for validation.
VALIDATION_EVERY = 10
FASHION_MNIST_CLASSES = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker",
                         "Bag", "Ankle boot"]


def read_idx(path: Path) -> np.ndarray:
    """An IDX array (the MNIST file format): magic 0,0,type,ndim; big-endian dims; then the data."""
    with gzip.open(path, "rb") as f:
        raw = f.read()
    if raw[:2] != b"\0\0" or raw[2] != 0x08:
        raise ValueError(f"{path}: not an unsigned-byte IDX file")
    ndim = raw[3]
    dims = struct.unpack(f">{ndim}I", raw[4:4 + 4 * ndim])
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * ndim).reshape(dims)


class DebianFashionMnist(tfds.core.GeneratorBasedBuilder):
    """Fashion-MNIST from Debian's dataset-fashion-mnist package, with TFDS fashion_mnist's features."""

    VERSION = tfds.core.Version("1.0.0")
    DATASET = "fashion_mnist"

    def _info(self) -> tfds.core.DatasetInfo:
        return tfds.core.DatasetInfo(
            builder=self,
            description="Fashion-MNIST (Xiao et al. 2017) read from " + str(FASHION_MNIST_DIR),
            features=tfds.features.FeaturesDict({
                "image": tfds.features.Image(shape=(28, 28, 1)),
                "label": tfds.features.ClassLabel(names=FASHION_MNIST_CLASSES),
            }),
            supervised_keys=("image", "label"),
            homepage="https://github.com/zalandoresearch/fashion-mnist",
        )

    def _split_generators(self, dl_manager):
        del dl_manager  # nothing to download: the files are on disk
        return {"train": self._generate_examples("train"), "test": self._generate_examples("t10k")}

    def _generate_examples(self, prefix: str):
        images = read_idx(FASHION_MNIST_DIR / f"{prefix}-images-idx3-ubyte.gz")
        labels = read_idx(FASHION_MNIST_DIR / f"{prefix}-labels-idx1-ubyte.gz")
        for i, (image, label) in enumerate(zip(images, labels)):
            yield i, {"image": image[..., None], "label": int(label)}


def python_docs_split(path: str) -> str:
    """The split a document belongs to, fixed by a hash of its path relative to the sources folder."""
    return "validation" if zlib.crc32(path.encode()) % VALIDATION_EVERY == 0 else "train"


class PythonDocs(tfds.core.GeneratorBasedBuilder):
    """The reStructuredText sources of the Python documentation (Debian's python3-doc), one example per
    document, split into train and validation by document."""

    VERSION = tfds.core.Version("1.0.0")
    DATASET = "python_docs"

    def _info(self) -> tfds.core.DatasetInfo:
        return tfds.core.DatasetInfo(
            builder=self,
            description="Python documentation sources read from " + str(PYTHON_DOCS_DIR),
            features=tfds.features.FeaturesDict({"text": tfds.features.Text(), "path": tfds.features.Text()}),
            homepage="https://docs.python.org/3/",
        )

    def _split_generators(self, dl_manager):
        del dl_manager  # nothing to download: the files are on disk
        return {split: self._generate_examples(split) for split in ("train", "validation")}

    def _generate_examples(self, split: str):
        for path in sorted(PYTHON_DOCS_DIR.rglob("*.rst.txt")):
            relative = str(path.relative_to(PYTHON_DOCS_DIR))
            if python_docs_split(relative) == split:
                yield relative, {"text": path.read_text(encoding="utf-8", errors="replace"), "path": relative}


class FashionMnistDetection(tfds.core.GeneratorBasedBuilder):
    """A detection set made from real Fashion-MNIST items: 1-4 items per 64x64 canvas, each scaled to
    14-40 pixels and placed where it overlaps no other; each box is the tight box of the item's nonzero
    pixels, so boxes and classes are exact. The test split is 2,000 fixed canvases of the test items; the
    train split is not stored: :class:`CanvasStream` composes a new canvas of the training items for every
    read (from its read id), so no canvas is ever read twice and composing it is real upstream work."""

    VERSION = tfds.core.Version("2.0.0")
    RELEASE_NOTES = {"2.0.0": "Training canvases are composed per read (CanvasStream), not stored."}
    DATASET = "fashion_mnist_detection"
    CANVAS = 64
    GENERATED_SPLIT = "train"
    SPLITS = {"test": ("t10k", 2_000, 1)}  # split: (items, canvases, seed)

    def _info(self) -> tfds.core.DatasetInfo:
        return tfds.core.DatasetInfo(
            builder=self,
            description="Fashion-MNIST items on 64x64 canvases, from " + str(FASHION_MNIST_DIR),
            features=tfds.features.FeaturesDict({
                "image": tfds.features.Image(shape=(self.CANVAS, self.CANVAS, 1)),
                "objects": tfds.features.Sequence({
                    "bbox": tfds.features.BBoxFeature(),
                    "label": tfds.features.ClassLabel(names=FASHION_MNIST_CLASSES),
                }),
            }),
        )

    def _split_generators(self, dl_manager):
        del dl_manager  # nothing to download: the items are on disk
        return {split: self._generate_examples(split) for split in self.SPLITS}

    def _generate_examples(self, split: str):
        prefix, count, seed = self.SPLITS[split]
        items = read_idx(FASHION_MNIST_DIR / f"{prefix}-images-idx3-ubyte.gz")
        labels = read_idx(FASHION_MNIST_DIR / f"{prefix}-labels-idx1-ubyte.gz")
        rng = np.random.default_rng(seed)
        for i in range(count):
            image, boxes, classes = compose_canvas(rng, items, labels, self.CANVAS)
            yield i, {"image": image[..., None],
                      "objects": {"bbox": [tfds.features.BBox(*b) for b in boxes], "label": classes}}


def compose_canvas(rng: np.random.Generator, items: np.ndarray, labels: np.ndarray, size: int):
    """One canvas: (uint8 image [size, size], boxes as normalised (ymin, xmin, ymax, xmax), labels)."""
    from PIL import Image

    canvas = np.zeros((size, size), np.uint8)
    taken = np.zeros((size, size), bool)
    boxes, classes = [], []
    for _ in range(int(rng.integers(1, 5))):
        for _attempt in range(20):
            k = int(rng.integers(len(items)))
            side = int(rng.integers(14, 41))
            item = np.asarray(Image.fromarray(items[k]).resize((side, side), Image.BILINEAR))
            rows, cols = np.flatnonzero(item.any(axis=1)), np.flatnonzero(item.any(axis=0))
            if rows.size == 0:
                continue
            item = item[rows[0]:rows[-1] + 1, cols[0]:cols[-1] + 1]  # the item's tight extent
            h, w = item.shape
            top, left = int(rng.integers(0, size - h + 1)), int(rng.integers(0, size - w + 1))
            if taken[max(0, top - 1):top + h + 1, max(0, left - 1):left + w + 1].any():
                continue  # keep a pixel of space: boxes never touch, so each box holds one item's pixels
            canvas[top:top + h, left:left + w] = item
            taken[top:top + h, left:left + w] = True
            boxes.append((top / size, left / size, (top + h) / size, (left + w) / size))
            classes.append(int(labels[k]))
            break
    return canvas, boxes, classes


class SyntheticImages(tfds.core.GeneratorBasedBuilder):
    """A small, learnable image task for fast tests and smoke runs: 8x8 grey images of 4 classes, each a
    fixed smooth random pattern of its class under heavy pixel noise (2,048 train, 512 test images).
    A ResNet-8 of width 4 climbs from chance to about 0.9 accuracy over a few hundred steps."""

    VERSION = tfds.core.Version("1.0.0")
    DATASET = "synthetic_images"
    SIZE, CLASSES = 8, 4
    SPLITS = {"train": (2048, 1), "test": (512, 2)}  # split: (images, seed)

    def _info(self) -> tfds.core.DatasetInfo:
        return tfds.core.DatasetInfo(
            builder=self,
            description="Synthetic 8x8 images: a smooth random pattern per class plus noise",
            features=tfds.features.FeaturesDict({
                "image": tfds.features.Image(shape=(self.SIZE, self.SIZE, 1)),
                "label": tfds.features.ClassLabel(num_classes=self.CLASSES),
            }),
            supervised_keys=("image", "label"),
        )

    def _split_generators(self, dl_manager):
        del dl_manager  # generated, nothing to download
        return {split: self._generate_examples(split) for split in self.SPLITS}

    def _generate_examples(self, split: str):
        count, seed = self.SPLITS[split]
        patterns = synthetic_patterns(self.CLASSES, self.SIZE)
        rng = np.random.default_rng(seed)
        for i in range(count):
            label = int(rng.integers(self.CLASSES))
            image = np.clip(128 + patterns[label] + rng.normal(0, 48, (self.SIZE, self.SIZE)), 0, 255)
            yield i, {"image": image.astype(np.uint8)[..., None], "label": label}


def synthetic_patterns(classes: int, size: int) -> np.ndarray:
    """One smooth pattern per class (random values blurred over 3x3), about +-24 grey levels."""
    raw = np.random.default_rng(0).normal(0, 1, (classes, size + 2, size + 2))
    smooth = sum(raw[:, i:i + size, j:j + size] for i in range(3) for j in range(3)) / 3
    return 24 * smooth / smooth.std()
