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
import re
import time
import zipfile
from pathlib import Path
from typing import Optional

import numpy as np
import tensorflow as tf

KINDS = ("npz", "images", "tfrecord")
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif")
# The most classes a model is sized for from a data set's labels: a label of 1e9 would size one from it.
MAX_CLASSES = 65_536
# The channels an image can be stored with as PNG (grey, grey and alpha, RGB, RGBA).
CHANNELS = (1, 2, 3, 4)
# How long a split is searched for the example a pipeline stage refused (a user's data set may be large).
FAULT_SEARCH_S = 60.0


class FileMissing(RuntimeError):
    """A file source that is not there, not readable or not usable; str() says what to put where."""


def checked_labels(name: str, where: Path, labels: np.ndarray) -> np.ndarray:
    """A split's labels as int64 class indices, or FileMissing naming ``where`` and what is wrong: labels that are
    not whole numbers (NaN among them), negative or beyond MAX_CLASSES."""
    if labels.ndim != 1 or not len(labels):
        raise FileMissing(f"{name}: {where} holds no examples" if not len(labels) else
                          f"{name}: {where} needs one label per example (shape (N,)), not shape {labels.shape}")
    if not np.issubdtype(labels.dtype, np.integer):
        whole = np.issubdtype(labels.dtype, np.floating) and np.isfinite(labels).all() and \
            (labels == np.round(labels)).all()
        if not whole:
            raise FileMissing(f"{name}: {where} has labels that are not class indices (dtype {labels.dtype}"
                              f"{', NaN or infinite among them' if labels.dtype.kind == 'f' else ''}): store them "
                              "as integers from 0")
    low, high = int(labels.min()), int(labels.max())
    if low < 0 or high >= MAX_CLASSES:
        raise FileMissing(f"{name}: {where} has label {low if low < 0 else high}: labels are class indices from 0 "
                          f"to at most {MAX_CLASSES - 1}")
    return labels.astype(np.int64)


def check_splits(train: "FileSource", evaluation: "FileSource") -> None:
    """The training split has more than one class, and the evaluation split no class training lacks (a model is
    sized by the training split's): FileMissing naming the split's file or folder."""
    if train.num_classes < 2:
        raise FileMissing(f"{train.name}: {train.where} has one class only: a classifier needs two or more")
    if evaluation.num_classes > train.num_classes:
        raise FileMissing(f"{evaluation.name}: {evaluation.where} has class {evaluation.num_classes - 1}, and the "
                          f"training split {train.where} has {train.num_classes} classes (0 to "
                          f"{train.num_classes - 1}): every evaluation class must be one the model trains on")


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

    @property
    def where(self) -> Path:
        """The file or folder this split is read from, for messages."""
        return self.folder

    def decoded(self) -> tf.data.Dataset:
        channels = self.image_shape[-1] if self.image_shape else 0

        def decode(record):
            image = tf.io.decode_image(record["image"], channels=channels or 0, expand_animations=False)
            image.set_shape(self.image_shape or (None, None, None))
            return {**record, "image": image}
        return self.encoded(seed=0).map(decode, num_parallel_calls=tf.data.AUTOTUNE)

    def fault(self) -> Optional[str]:
        """Which example of the split a pipeline stage cannot take, and why, naming its file (None: none found
        within FAULT_SEARCH_S). Searched only once a stage has refused one, so a good data set costs nothing."""
        return None


class NpzSource(FileSource):
    def __init__(self, name: str, folder: Path, split: str):
        super().__init__(name, folder, split)
        path = self.path = folder / f"{split}.npz"
        try:
            with np.load(path) as arrays:
                image, label = arrays["image"], arrays["label"]
        except (OSError, KeyError, ValueError, EOFError, zipfile.BadZipFile) as e:
            raise FileMissing(f"{name}: {path} is not a .npz with arrays image and label "
                              f"({type(e).__name__}: {e or 'empty'})") from None
        if image.ndim not in (3, 4) or (image.ndim == 4 and image.shape[-1] not in CHANNELS):
            raise FileMissing(f"{name}: {path} needs images of shape (N, H, W) or (N, H, W, C) with C one of "
                              f"{', '.join(map(str, CHANNELS))}, not {image.shape}")
        self.image = image[..., None] if image.ndim == 3 else image
        self.label = checked_labels(name, path, label)
        if self.image.dtype != np.uint8 or len(self.image) != len(self.label):
            raise FileMissing(f"{name}: {path} needs uint8 images and one label per image (it has {image.dtype} "
                              f"images, {len(self.image)} of them, and {len(self.label)} labels)")
        self._classes = int(self.label.max()) + 1

    num_examples = property(lambda self: len(self.label))
    num_classes = property(lambda self: self._classes)
    image_shape = property(lambda self: tuple(self.image.shape[1:]))
    where = property(lambda self: self.path)

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
        extra = sorted({p.name for p in (folder / split).iterdir() if p.is_dir()} - set(classes))
        if extra:
            raise FileMissing(f"{name}: {folder / split} has class folders {folder / classes_from} lacks "
                              f"({', '.join(extra[:5])}): every evaluation class must be one the model trains on")
        if len(classes) > MAX_CLASSES:
            raise FileMissing(f"{name}: {folder / classes_from} has {len(classes)} class folders, more than "
                              f"{MAX_CLASSES}")
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
    where = property(lambda self: self.folder / self.split)

    def fault(self) -> Optional[str]:
        from PIL import Image

        deadline = time.monotonic() + FAULT_SEARCH_S
        for path in self.files:
            if time.monotonic() > deadline:
                return None
            try:
                with Image.open(path) as image:
                    image.load()
                    size = image.size
            except (OSError, ValueError, SyntaxError) as e:  # PIL's errors for a damaged or unknown file
                return f"{path} is not a readable image ({type(e).__name__}: {_said(e, 120)}): replace or remove it"
            if size != (self._shape[1], self._shape[0]):
                return (f"{path} is {size[0]}x{size[1]} pixels and {self.files[0]} {self._shape[1]}x{self._shape[0]}: "
                        "the images of a data set must have one size (resize them)")
        return None

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
        if self.features.get("label", tf.io.FixedLenFeature([], tf.int64)).dtype != tf.int64:
            raise FileMissing(f"{name}: {folder / 'features.json'} declares label as "
                              f"{self.features['label'].dtype.name}: labels are class indices, int64")
        first = self._first()
        self._shape = tuple(described["image_shape"]) if "image_shape" in described else self._shape_of(first)
        self._classes = described.get("num_classes")
        if self._classes is not None and not (isinstance(self._classes, int) and 2 <= self._classes <= MAX_CLASSES):
            raise FileMissing(f"{name}: {folder / 'features.json'} has num_classes {self._classes!r}: an integer "
                              f"from 2 to {MAX_CLASSES}")
        self._count: Optional[int] = None

    def _shape_of(self, record: dict) -> Optional[tuple]:
        """The shape of a record's decoded image (None: it has none); FileMissing where it is not an image file's
        bytes."""
        if "image" not in record:
            return None
        try:
            return tuple(tf.io.decode_image(record["image"], expand_animations=False).shape)
        except (tf.errors.OpError, ValueError) as e:
            raise FileMissing(f"{self.name}: the image of the first record of {self.files[0]} is not PNG, JPEG, BMP "
                              f"or GIF bytes ({_said(e, 160)}): store images encoded") from None

    def _first(self) -> dict:
        """The first record, parsed (FileMissing where the files hold none or it does not parse)."""
        try:
            for record in tf.data.TFRecordDataset(self.files[:1]).take(1):
                return tf.io.parse_single_example(record, self.features)
        except (tf.errors.OpError, ValueError) as e:
            raise FileMissing(f"{self.name}: {self.files[0]} cannot be read as the tf.train.Example records "
                              f"{self.folder / 'features.json'} describes ({_said(e, 200)})") from None
        raise FileMissing(f"{self.name}: {self.files[0]} holds no records")

    @property
    def num_examples(self) -> int:
        if self._count is None:
            self._count = sum(1 for _ in tf.data.TFRecordDataset(self.files))
        return self._count

    @property
    def num_classes(self) -> int:
        """features.json's num_classes, else one more than the largest label (every record read once)."""
        if self._classes is None:
            label = {"label": self.features["label"]}
            labels = tf.data.TFRecordDataset(self.files).map(lambda r: tf.io.parse_single_example(r, label)["label"])
            self._classes = int(checked_labels(self.name, self.where, np.fromiter(labels.as_numpy_iterator(),
                                                                                    np.int64)).max()) + 1
        return self._classes

    image_shape = property(lambda self: self._shape)
    where = property(lambda self: self.folder / f"{self.split}*.tfrecord*")

    def encoded(self, seed: int) -> tf.data.Dataset:
        files = tf.data.Dataset.from_tensor_slices(self.files).shuffle(len(self.files), seed=seed)
        return tf.data.TFRecordDataset(files).map(self._parsed, num_parallel_calls=tf.data.AUTOTUNE)

    def _parsed(self, serialized: tf.Tensor) -> dict:
        """A record's features; a label outside features.json's num_classes stops the pipeline (``fault`` then
        says which record), where it would otherwise train as garbage or make the loss NaN."""
        record = tf.io.parse_single_example(serialized, self.features)
        if "label" in record and self._classes is not None:
            in_range = tf.logical_and(record["label"] >= 0, record["label"] < self._classes)
            with tf.control_dependencies([tf.debugging.Assert(in_range, [record["label"]])]):
                record["label"] = tf.identity(record["label"])
        return record

    def fault(self) -> Optional[str]:
        deadline = time.monotonic() + FAULT_SEARCH_S
        for path in self.files:
            for index, serialized in enumerate(tf.data.TFRecordDataset([path]).as_numpy_iterator()):
                if time.monotonic() > deadline:
                    return None
                found = self._record_fault(tf.io.parse_single_example(serialized, self.features))
                if found:
                    return f"record {index} of {path} {found}"
        return None

    def _record_fault(self, record: dict) -> Optional[str]:
        """What is wrong with one parsed record (None: nothing a stage of this package would refuse)."""
        label = int(record["label"]) if "label" in record else 0
        if self._classes is not None and not 0 <= label < self._classes:
            return (f"has label {label}, and {self.folder / 'features.json'} gives num_classes {self._classes}: "
                    f"labels are class indices from 0 to {self._classes - 1}")
        if "image" not in record:
            return None
        try:
            shape = tuple(tf.io.decode_image(record["image"], expand_animations=False).shape)
        except (tf.errors.OpError, ValueError) as e:
            return f"is not a PNG, JPEG, BMP or GIF image ({_said(e, 160)}): store images encoded"
        if self._shape and shape[:2] != tuple(self._shape[:2]):
            return (f"has an image of shape {shape}, and the data set's is {tuple(self._shape)}: the images of a "
                    "data set must have one size (resize them)")
        return None


def _said(error: Exception, limit: int) -> str:
    """What a TensorFlow or Python error says, on one line, at most ``limit`` characters (without the name of
    TensorFlow's function node and op, which say nothing to a user)."""
    said = re.sub(r"\{\{[^}]*\}\}|\[Op:\w+\]( name:\S*)?", "", getattr(error, "message", "") or str(error))
    return " ".join(said.split())[:limit]


SOURCES = {"npz": NpzSource, "images": ImageFolderSource, "tfrecord": TFRecordSource}


def load(dataset: str, split: str) -> FileSource:
    kind, folder = parse(dataset)
    return SOURCES[kind](dataset, folder, split)
