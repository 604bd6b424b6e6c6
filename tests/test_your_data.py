"""A user's own data, each kind end to end through the training stream: a TFDS data set stored in data.dir by
name, TFRecord files, NumPy arrays and an image folder (one of them through the HTTP record server)."""

import json
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds
from conftest import compose_config

from echo_experiments.data import sources
from echo_experiments.training.trainer import run

TRAIN, TEST = 384, 128


@pytest.fixture(scope="module")
def fashion():
    """Real Fashion-MNIST images and labels, a few of each split."""
    def split(prefix, n):
        images = sources.read_idx(sources.FASHION_MNIST_DIR / f"{prefix}-images-idx3-ubyte.gz")[:n]
        labels = sources.read_idx(sources.FASHION_MNIST_DIR / f"{prefix}-labels-idx1-ubyte.gz")[:n]
        return images[..., None], labels.astype(np.int64)
    return {"train": split("train", TRAIN), "test": split("t10k", TEST)}


def as_npz(root: Path, data) -> str:
    root.mkdir()
    for name, (images, labels) in data.items():
        np.savez(root / f"{name}.npz", image=images, label=labels)
    return f"npz:{root}"


def as_images(root: Path, data) -> str:
    from PIL import Image

    for name, (images, labels) in data.items():
        for i, (image, label) in enumerate(zip(images, labels)):
            (root / name / f"class{label}").mkdir(parents=True, exist_ok=True)
            Image.fromarray(image[..., 0]).save(root / name / f"class{label}" / f"{i}.png")
    return f"images:{root}"


def as_tfrecord(root: Path, data) -> str:
    root.mkdir()
    for name, (images, labels) in data.items():
        with tf.io.TFRecordWriter(str(root / f"{name}-00000.tfrecord")) as writer:
            for image, label in zip(images, labels):
                feature = {"image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[
                                     tf.io.encode_png(image).numpy()])),
                           "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(label)]))}
                writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    (root / "features.json").write_text(json.dumps({"features": {"image": "string", "label": "int64"},
                                                    "image_shape": [28, 28, 1], "num_classes": 10}))
    return f"tfrecord:{root}"


def as_tfds(root: Path, data) -> str:
    features = tfds.features.FeaturesDict({"image": tfds.features.Image(shape=(28, 28, 1)),
                                          "label": tfds.features.ClassLabel(num_classes=10)})
    splits = {name: tf.data.Dataset.from_tensor_slices({"image": images, "label": labels})
              for name, (images, labels) in data.items()}
    tfds.dataset_builders.store_as_tfds_dataset(name="my_fmnist", version="1.0.0", features=features,
                                                 split_datasets=splits, data_dir=str(root))
    return "my_fmnist"


KINDS = {"npz": (as_npz, "local"), "images": (as_images, "http"), "tfrecord": (as_tfrecord, "local"),
         "tfds": (as_tfds, "local")}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_each_kind_of_data_trains_through_the_stream_with_exact_fresh_counts(tmp_path, fashion, kind):
    make, storage = KINDS[kind]
    dataset = make(tmp_path / "data", fashion)
    record = run(compose_config(
        f"workload.dataset={dataset}", f"data.dir={tmp_path / 'data'}", f"storage={storage}",
        "echo=before_augmentation", "echo.shuffle_buffer=0", "workload.model.width=4", "workload.shuffle_buffer=256",
        "trainer.max_steps=24", "trainer.eval_every_fresh_examples=384", "workload.target.value=0.99",
        "trainer.profile_batches=0", "trainer.progress=false", "trainer.tensorboard=false",
        "trainer.checkpoint_every_seconds=0"), tmp_path / "run")
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    # e=2 before augmentation at batch 64, copies adjacent: 24 steps deliver 1,536 examples, 768 of them fresh
    # (2 epochs of 384, a second epoch read with new read ids).
    assert (record.steps, record.fresh_examples, record.examples_trained) == (24, 768, 1536)
    assert [r["fresh_examples"] for r in rows] == [384, 768] and 0 <= rows[-1]["accuracy"] <= 1
