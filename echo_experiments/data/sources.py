"""Where data lives: the one module that knows data set names, TFDS directories and offline copies.

Training reads records with their images still encoded (decoding is its own stage of the pipeline, upstream
of any echo point); evaluation reads them decoded. Nothing here downloads: a data set that is not prepared
raises :class:`DataMissing` with the exact steps to get it.
"""

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np
import tensorflow as tf
import tensorflow_datasets as tfds
from filelock import FileLock, Timeout
from google.protobuf import json_format

from echo_experiments.core.rundir import unwritable
from echo_experiments.core.schema import ConfigError
from echo_experiments.core.user_code import HOOKS_DOC
from echo_experiments.data import files
from echo_experiments.data.offline import (
    FASHION_MNIST_DIR,
    PYTHON_DOCS_DIR,
    DebianFashionMnist,
    FashionMnistDetection,
    PythonDocs,
    SyntheticImages,
    compose_canvas,
    read_idx,
)

# Progress bars of TFDS's preparation would interleave with the run's own output.
tfds.disable_progress_bar()

HOW_TO_GET = {
    "fashion_mnist": "install Debian's copy with `sudo apt-get install dataset-fashion-mnist` (or `make setup`), "
                     "or prepare TFDS fashion_mnist into {data_dir}",
    "cifar10": "on a machine with internet run `tfds build cifar10 --data_dir=/some/dir`, then copy "
               "/some/dir/cifar10 to {data_dir}/cifar10 (or set data.dir=/some/dir)",
    "fashion_mnist_detection": "install Debian's copy of Fashion-MNIST with `sudo apt-get install "
                               "dataset-fashion-mnist` (or `make setup`); the detection set is built from it",
    "coco": "download the 2017 images and annotations from https://cocodataset.org into "
            "~/tensorflow_datasets/downloads/manual, run `tfds build coco/2017 --data_dir={data_dir}` (or set "
            "data.dir to a directory holding a prepared coco/2017)",
    "python_docs": "install Debian's copy with `sudo apt-get install python3-doc` (or `make setup`)",
    "synthetic_images": "it is generated on first use into {data_dir}; check that the directory is writable",
    "lm1b": "on a machine with internet run `tfds build lm1b --data_dir=/some/dir`, then copy /some/dir/lm1b to "
            "{data_dir}/lm1b (or set data.dir=/some/dir)",
    "c4": "build c4/en with Apache Beam as https://www.tensorflow.org/datasets/catalog/c4 describes "
          "(`tfds build c4/en --data_dir=/some/dir --beam_pipeline_options=...`), "
          "then copy /some/dir/c4 to {data_dir}/c4",
    "imagenet2012": "download ILSVRC2012_img_train.tar and ILSVRC2012_img_val.tar from image-net.org into "
                    "~/tensorflow_datasets/downloads/manual, run `tfds build imagenet2012 --data_dir={data_dir}` "
                    "(or set data.dir to a directory holding a prepared imagenet2012)",
}


# What runs the same workload on a machine without the paper's data sets: the offline set of the same task, whose
# splits the override names (a CPU or a first try: every paper-scale workload trains and evaluates on it, tested).
STAND_IN = {"imagenet2012": "workload.dataset=synthetic_images workload.eval_split=test",
            "cifar10": "workload.dataset=synthetic_images workload.eval_split=test",
            "lm1b": "workload.dataset=python_docs workload.eval_split=validation",
            "c4": "workload.dataset=python_docs workload.eval_split=validation",
            "coco": "workload.dataset=fashion_mnist_detection workload.eval_split=test"}


class DataMissing(RuntimeError):
    """A data set that is not on this machine; str() says how to get it."""


@dataclass
class Source:
    """One data set split as TFDS serves it."""

    name: str
    builder: tfds.core.DatasetBuilder
    split: str

    @property
    def num_examples(self) -> Optional[int]:
        """The split's size when TFDS knows it (it does not under ``tfds.testing.mock_data``)."""
        splits = self.builder.info.splits
        return splits[self.split].num_examples if self.split in splits else None

    @property
    def num_classes(self) -> int:
        return self.builder.info.features["label"].num_classes

    @property
    def image_shape(self) -> Optional[tuple]:
        """The stored images' shape (None where a size varies), when the data set has images."""
        features = self.builder.info.features
        return tuple(features["image"].shape) if "image" in features else None

    @property
    def data_dir(self) -> str:
        return str(self.builder.data_dir_root)

    def encoded(self, seed: int) -> tf.data.Dataset:
        """One epoch of records, image bytes undecoded; files are read in a seeded order."""
        decoders = {"image": tfds.decode.SkipDecoding()} if "image" in self.builder.info.features else None
        return self._read(shuffle_files=True, decoders=decoders,
                          read_config=tfds.ReadConfig(shuffle_seed=seed, shuffle_reshuffle_each_iteration=True))

    def decoded(self) -> tf.data.Dataset:
        """The split in its stored order, decoded: for evaluation."""
        return self._read(shuffle_files=False)

    def fault(self) -> Optional[str]:
        """Which example a pipeline stage cannot take (files.FileSource.fault): TFDS checks its data sets as it
        prepares them, so there is nothing more to search here."""
        return None

    def _read(self, **kwargs) -> tf.data.Dataset:
        splits = self.builder.info.splits
        if splits and self.split not in splits:
            raise DataMissing(f"{self.name} has no split {self.split!r}; it has {', '.join(splits)}")
        try:
            return self.builder.as_dataset(split=self.split, **kwargs)
        except AssertionError as e:  # TFDS's way of saying the data set was never prepared here
            if "could not find data" not in str(e):
                raise
            family = self.name.split("/")[0]
            how = HOW_TO_GET[family].format(data_dir=self.builder.data_dir_root)
            instead = (f"; to run this workload without it now, add {STAND_IN[family]} (an offline stand-in of "
                       "the same task)") if family in STAND_IN else ""
            raise DataMissing(f"{self.name} is not prepared in {self.builder.data_dir_root}: {how}{instead}") from None

    def check_split(self, key: str) -> None:
        """The split is one the data set has (DataMissing naming ``key``, the config key that chose it), before
        any profiling or compiling; a data set not prepared yet says so when it is first read."""
        splits = self.builder.info.splits
        if splits and self.split.split("[")[0] not in splits:
            raise DataMissing(f"{self.name} has no split {self.split!r}; it has {', '.join(splits)}: set {key} to "
                              "one of them")


def cause(error: tf.errors.OpError) -> str:
    """What a TensorFlow error says: TF wraps the cause in its op and iterator names; the Python error at the end
    is what to show."""
    causes = re.findall(r"\b\w+(?:Error|Exception): [^\n]*", error.message or "")
    if causes:
        return causes[-1]
    text = re.sub(r"\{\{[^}]*\}\}\s*", "", error.message or "")  # the function and node names
    text = re.sub(r"^Error in user-defined function passed to \S+ transformation with iterator: \S+: ", "", text)
    return text.strip().splitlines()[0] if text.strip() else type(error).__name__


def example_refused(source: Optional["Source"], error: tf.errors.InvalidArgumentError) -> ConfigError:
    """The one line for a stage of the pipeline that cannot take an example of ``source``: which example and why
    where a file source finds it, else what the stage said and what the stages expect. Rerunning cannot help."""
    found = source.fault() if source is not None else None
    return ConfigError("workload.dataset", None, "", (
        f"the input pipeline cannot take an example of {source.name}: {found}" if found else
        f"the input pipeline cannot take an example ({cause(error)}): the data is not what the workload's stages "
        f"expect (images stored as PNG, JPEG, BMP or GIF bytes; what each hook receives: {HOOKS_DOC})"))


def check_splits(train: "Source", evaluation: "Source") -> None:
    """A user's file data: a training split of two classes or more and an evaluation split within them
    (DataMissing naming the file); TFDS's data sets carry their classes in their metadata."""
    if isinstance(train, files.FileSource) and isinstance(evaluation, files.FileSource):
        try:
            files.check_splits(train, evaluation)
        except files.FileMissing as e:
            raise DataMissing(str(e)) from None


def known(dataset: str) -> bool:
    """Whether a data set is one this package knows by name (not a user's own)."""
    return dataset.split("/")[0] in HOW_TO_GET


def data_dir(configured: Optional[str]) -> Path:
    """The TFDS data directory: the configured one, else $TFDS_DATA_DIR, else ~/tensorflow_datasets."""
    path = configured or os.environ.get("TFDS_DATA_DIR") or "~/tensorflow_datasets"
    return Path(os.path.expandvars(path)).expanduser()


def load(dataset: str, split: str, directory: Path) -> Source:
    """A split of a data set (preparing the offline Fashion-MNIST copy on first use).

    Reading a data set that is not prepared, or whose prepared metadata cannot be read, raises DataMissing.
    """
    try:
        return _load(dataset, split, directory)
    except DataMissing:
        raise
    # json_format.Error: a corrupt dataset_info.json; AssertionError: one of another version (TFDS asserts it).
    except (ValueError, OSError, AssertionError, json_format.Error) as e:
        raise unreadable(dataset, directory, e) from None


def unreadable(dataset: str, directory: Path, error: Exception, what: str = "") -> DataMissing:
    """The one line for a data set whose files cannot be read (``what``: which part, e.g. its evaluation split)."""
    message = getattr(error, "message", None) or str(error)
    first = message.strip().splitlines()[0] if message.strip() else repr(error)
    return DataMissing(f"{dataset}{what} in {directory} cannot be read ({type(error).__name__}: {first}): delete the "
                       f"data set's folder in {directory} and run again to rebuild it (the offline data sets), or "
                       f"prepare it again with `tfds build {dataset} --data_dir={directory}`")


# Preparing an offline data set takes a minute; another process preparing it is waited for this long at most.
PREPARE_TIMEOUT_S = 900
# The data sets built on this machine from Debian's files (or from nothing), with a split that opens each.
OFFLINE = {"fashion_mnist": "test", "python_docs": "validation", "fashion_mnist_detection": "test",
           "synthetic_images": "test"}


def prepare_offline(directory: Path) -> None:
    """Prepare every offline data set in ``directory`` now (``make setup``), rather than on first use."""
    for dataset, split in OFFLINE.items():
        load(dataset, split, directory)


def _load(dataset: str, split: str, directory: Path) -> Source:
    if dataset == "fashion_mnist":
        return Source(dataset, _fashion_mnist(directory), split)
    if dataset == "fashion_mnist_detection":
        builder = _offline(FashionMnistDetection, FASHION_MNIST_DIR / "train-images-idx3-ubyte.gz", directory)
        return (CanvasStream(dataset, builder, split) if split == FashionMnistDetection.GENERATED_SPLIT
                else Source(dataset, builder, split))
    if dataset == "python_docs":
        return Source(dataset, _offline(PythonDocs, PYTHON_DOCS_DIR / "library", directory), split)
    if dataset == "synthetic_images":
        return Source(dataset, _offline(SyntheticImages, None, directory), split)
    if files.parse(dataset):
        try:
            return files.load(dataset, split)
        except files.FileMissing as e:
            raise DataMissing(str(e)) from None
    if dataset.split("/")[0] not in HOW_TO_GET:
        return Source(dataset, _prepared(dataset, directory), split)
    return Source(dataset, tfds.builder(dataset, data_dir=str(directory)), split)


def _prepared(dataset: str, directory: Path) -> tfds.core.DatasetBuilder:
    """A data set TFDS has prepared in ``directory`` that this package does not know by name (one of TFDS's
    catalogue, or one a user stored with tfds.dataset_builders.store_as_tfds_dataset)."""
    try:
        builder = tfds.builder(dataset, data_dir=str(directory))
        if builder.is_prepared():
            return builder
    except (tfds.core.registered.DatasetNotFoundError, ValueError):
        pass
    name, _, version = dataset.partition(":")
    folder = directory / name
    versions = sorted((p for p in folder.glob("*") if (p / "dataset_info.json").exists()), key=lambda p: p.name)
    chosen = [p for p in versions if p.name == version] if version else versions[-1:]
    if not chosen:
        raise DataMissing(
            f"unknown data set {dataset!r}: not prepared in {directory} (no {folder}/<version>/dataset_info.json); "
            f"this package knows {', '.join(HOW_TO_GET)}; prepare yours with `tfds build` or "
            "tfds.dataset_builders.store_as_tfds_dataset into data.dir, or name your files as npz:<folder>, "
            "images:<folder> or tfrecord:<folder> (docs/your-model.md)")
    return tfds.builder_from_directory(str(chosen[-1]))


def _fashion_mnist(directory: Path) -> tfds.core.DatasetBuilder:
    if (directory / "fashion_mnist").is_dir():
        official = tfds.builder("fashion_mnist", data_dir=str(directory))
        if official.is_prepared():
            return official
    return _offline(DebianFashionMnist, FASHION_MNIST_DIR / "train-images-idx3-ubyte.gz", directory)


def _offline(builder_class: type, needs: Optional[Path], directory: Path) -> tfds.core.DatasetBuilder:
    """A builder over files a Debian package installs (``needs``), or over none, prepared once (under a lock:
    sweeps run in parallel)."""
    builder = builder_class(data_dir=str(directory))
    if builder.is_prepared():
        return builder
    name = builder.name
    if needs is not None and not needs.exists():
        raise DataMissing(f"{name} needs {needs}, which is missing: " + HOW_TO_GET[builder_class.DATASET]
                          .format(data_dir=directory))
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise DataMissing(f"{name} cannot be prepared in {directory} ({e.strerror}): set data.dir to a folder you "
                          "can write") from None
    problem = unwritable(directory)
    if problem:
        raise DataMissing(f"{name} is not prepared in {directory}, which cannot be written ({problem}): set data.dir "
                          "to a folder you can write (it is prepared there once)")
    try:
        lock = FileLock(directory / f".{name}.lock", timeout=PREPARE_TIMEOUT_S)
        lock.acquire()
    except (Timeout, OSError) as e:
        raise DataMissing(f"{name} could not be locked for preparing in {directory} within {PREPARE_TIMEOUT_S} s "
                          f"({e}): another process may be preparing it; run again once it is done") from None
    with lock:
        builder = builder_class(data_dir=str(directory))
        if not builder.is_prepared():  # another process may have prepared it while we waited
            print(f"Preparing {name} {f'from {needs.parent} ' if needs else ''}into {directory} (once) ...", flush=True)
            builder.download_and_prepare()
    return builder


@dataclass
class CanvasStream(Source):
    """The training canvases of fashion_mnist_detection, composed as they are read.

    A record is only its index in the epoch (so storage emulation and the record server have something to
    carry); the workload's decode stage composes canvas number ``read_id`` from the training items
    (:meth:`canvas`), a different canvas for every read, across epochs too."""

    EPOCH = 12_000  # records per epoch: the size of the stored training set this stream replaces
    SEED = 0

    def check_split(self, key: str) -> None:
        """Composed as read: no stored split to look for."""

    @property
    def num_examples(self) -> Optional[int]:
        return self.EPOCH

    def encoded(self, seed: int) -> tf.data.Dataset:
        del seed  # the read id, given downstream, picks the canvas
        return tf.data.Dataset.range(self.EPOCH).map(lambda i: {"index": i})

    def decoded(self) -> tf.data.Dataset:
        raise DataMissing(f"{self.name} has no stored {self.split!r} split: its canvases are composed per read")

    def canvas(self, read_id: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Canvas number ``read_id``: (uint8 image [64, 64, 1], boxes float32 [n, 4], labels int64 [n])."""
        if not hasattr(self, "_items"):
            self._items = read_idx(FASHION_MNIST_DIR / "train-images-idx3-ubyte.gz")
            self._labels = read_idx(FASHION_MNIST_DIR / "train-labels-idx1-ubyte.gz")
        image, boxes, classes = compose_canvas(np.random.default_rng([self.SEED, int(read_id)]), self._items,
                                               self._labels, FashionMnistDetection.CANVAS)
        return (image[..., None], np.asarray(boxes, np.float32).reshape(-1, 4), np.asarray(classes, np.int64))


