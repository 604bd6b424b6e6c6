"""Data a user has as files, as sources like the TFDS ones (``workload.dataset=<kind>:<folder>``):

- ``npz:<folder>``: NumPy arrays, ``<folder>/<split>.npz`` holding ``image`` (N, H, W[, C], uint8) and
  ``label`` (N,) integer arrays;
- ``images:<folder>``: an image folder, ``<folder>/<split>/<class>/<file>`` (PNG, JPEG, BMP or GIF), the classes
  the train split's subfolders in sorted order;
- ``tfrecord:<folder>``: TFRecord files ``<folder>/<split>*.tfrecord*`` of ``tf.train.Example`` records, with
  ``<folder>/features.json`` describing them: ``{"features": {"image": "string", "label": "int64"}}`` (an
  encoded image and its class), and optionally ``"image_shape": [H, W, C]`` and ``"num_classes": K``.

Training records carry the image encoded (PNG for arrays), as TFDS's do, so decoding stays a stage of the
pipeline upstream of every echo point, and every kind goes through the same read ids, storage emulation, record
server, sharding and checkpointed iterator as the built-in data sets. Evaluation reads them decoded.
"""

import json
from pathlib import Path
from typing import Optional

import numpy as np
import tensorflow as tf

KINDS = ("npz", "images", "tfrecord")
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif")


class FileMissing(RuntimeError):
    """A file source that is not there or not readable; str() says what to put where."""


def parse(dataset: str) -> Optional[tuple[str, Path]]:
    """(kind, folder) of a ``<kind>:<folder>`` data set name, or None for a TFDS name."""
    kind, sep, folder = dataset.partition(":")
    return (kind, Path(folder).expanduser()) if sep and kind in KINDS else None


class FileSource:
    """One split of a file data set; the interface of sources.Source (name, split, encoded, decoded,
    num_examples, num_classes, image_shape, data_dir)."""

    def __init__(self, name: str, folder: Path, split: str):
        self.name, self.folder, self.split = name, folder, split
        if not folder.is_dir():
            raise FileMissing(f"{name}: no folder {folder}")

    @property
    def data_dir(self) -> str:
        return str(self.folder)

    def decoded(self) -> tf.data.Dataset:
        channels = self.image_shape[-1] if self.image_shape else 0

        def decode(record):
            image = tf.io.decode_image(record["image"], channels=channels or 0, expand_animations=False)
            image.set_shape(self.image_shape or (None, None, None))
            return {**record, "image": image}
        return self.encoded(seed=0).map(decode, num_parallel_calls=tf.data.AUTOTUNE)


class NpzSource(FileSource):
    def __init__(self, name: str, folder: Path, split: str):
        super().__init__(name, folder, split)
        path = folder / f"{split}.npz"
        try:
            with np.load(path) as arrays:
                image, label = arrays["image"], arrays["label"]
        except (OSError, KeyError, ValueError) as e:
            raise FileMissing(f"{name}: {path} is not a .npz with arrays image and label ({e})") from None
        self.image = image[..., None] if image.ndim == 3 else image
        self.label = label.astype(np.int64)
        if self.image.dtype != np.uint8 or len(self.image) != len(self.label):
            raise FileMissing(f"{name}: {path} needs uint8 images and one label per image")
        self._classes = int(self.label.max()) + 1 if len(self.label) else 0

    num_examples = property(lambda self: len(self.label))
    num_classes = property(lambda self: self._classes)
    image_shape = property(lambda self: tuple(self.image.shape[1:]))

    def encoded(self, seed: int) -> tf.data.Dataset:
        del seed  # one file: the pipeline's shuffle orders it
        ds = tf.data.Dataset.from_tensor_slices({"image": self.image, "label": self.label})
        return ds.map(lambda r: {**r, "image": tf.io.encode_png(r["image"])}, num_parallel_calls=tf.data.AUTOTUNE)

    def decoded(self) -> tf.data.Dataset:
        return tf.data.Dataset.from_tensor_slices({"image": self.image, "label": self.label})


class ImageFolderSource(FileSource):
    def __init__(self, name: str, folder: Path, split: str, classes_from: str = "train"):
        super().__init__(name, folder, split)
        classes = sorted(p.name for p in (folder / classes_from).iterdir() if p.is_dir()) \
            if (folder / classes_from).is_dir() else []
        files = [(str(f), i) for i, c in enumerate(classes) for f in sorted((folder / split / c).glob("*"))
                 if f.suffix.lower() in IMAGE_SUFFIXES]
        if not files:
            raise FileMissing(f"{name}: no images in {folder / split}/<class>/ (classes from {folder / classes_from})")
        self.files, self.labels = [f for f, _ in files], np.array([i for _, i in files], np.int64)
        self._classes = len(classes)
        from PIL import Image

        with Image.open(self.files[0]) as first:
            channels = {"L": 1, "LA": 2, "RGB": 3, "RGBA": 4}.get(first.mode, 3)
            size = first.size
        self._shape = (size[1], size[0], channels)

    num_examples = property(lambda self: len(self.files))
    num_classes = property(lambda self: self._classes)
    image_shape = property(lambda self: self._shape)

    def encoded(self, seed: int) -> tf.data.Dataset:
        ds = tf.data.Dataset.from_tensor_slices({"path": self.files, "label": self.labels})
        ds = ds.shuffle(len(self.files), seed=seed, reshuffle_each_iteration=True)  # files in a seeded order
        return ds.map(lambda r: {"image": tf.io.read_file(r["path"]), "label": r["label"]},
                      num_parallel_calls=tf.data.AUTOTUNE)


class TFRecordSource(FileSource):
    def __init__(self, name: str, folder: Path, split: str):
        super().__init__(name, folder, split)
        try:
            described = json.loads((folder / "features.json").read_text())
            self.features = {k: tf.io.FixedLenFeature([], tf.as_dtype(v)) for k, v in described["features"].items()}
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise FileMissing(f"{name}: {folder / 'features.json'} must describe the records, e.g. "
                              '{"features": {"image": "string", "label": "int64"}} (' + str(e) + ")") from None
        self.files = sorted(str(p) for p in folder.glob(f"{split}*.tfrecord*"))
        if not self.files:
            raise FileMissing(f"{name}: no {split}*.tfrecord* files in {folder}")
        self._shape = tuple(described["image_shape"]) if "image_shape" in described else None
        self._classes = described.get("num_classes")
        self._count: Optional[int] = None

    @property
    def num_examples(self) -> int:
        if self._count is None:
            self._count = sum(1 for _ in tf.data.TFRecordDataset(self.files))
        return self._count

    @property
    def num_classes(self) -> int:
        if self._classes is None:
            labels = tf.data.TFRecordDataset(self.files).map(lambda r: tf.io.parse_single_example(r, self.features))
            self._classes = int(max(int(r["label"]) for r in labels.as_numpy_iterator())) + 1
        return self._classes

    image_shape = property(lambda self: self._shape)

    def encoded(self, seed: int) -> tf.data.Dataset:
        files = tf.data.Dataset.from_tensor_slices(self.files).shuffle(len(self.files), seed=seed)
        return tf.data.TFRecordDataset(files).map(lambda r: tf.io.parse_single_example(r, self.features),
                                                  num_parallel_calls=tf.data.AUTOTUNE)


SOURCES = {"npz": NpzSource, "images": ImageFolderSource, "tfrecord": TFRecordSource}


def load(dataset: str, split: str) -> FileSource:
    kind, folder = parse(dataset)
    return SOURCES[kind](dataset, folder, split)
