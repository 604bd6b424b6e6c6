"""Data sources: the offline Fashion-MNIST copy, and clear messages for data sets that are absent."""

import numpy as np
import pytest
import tensorflow_datasets as tfds

from echo_experiments.data import sources


def test_idx_files_are_read_exactly():
    images = sources.read_idx(sources.FASHION_MNIST_DIR / "t10k-images-idx3-ubyte.gz")
    labels = sources.read_idx(sources.FASHION_MNIST_DIR / "t10k-labels-idx1-ubyte.gz")
    assert images.shape == (10_000, 28, 28) and images.dtype == np.uint8
    assert labels.shape == (10_000,) and set(np.unique(labels)) == set(range(10))
    assert np.bincount(labels).tolist() == [1000] * 10  # Fashion-MNIST's test split is balanced


def test_tfds_builder_serves_the_debian_files(data_dir):
    source = sources.load("fashion_mnist", "test", data_dir)
    assert source.num_examples == 10_000 and source.num_classes == 10
    images = sources.read_idx(sources.FASHION_MNIST_DIR / "t10k-images-idx3-ubyte.gz")
    labels = sources.read_idx(sources.FASHION_MNIST_DIR / "t10k-labels-idx1-ubyte.gz")
    first = next(iter(tfds.as_numpy(source.decoded().take(1))))
    # TFDS reorders examples by key hash; the example must be one of the originals, byte for byte.
    matches = np.flatnonzero((images == first["image"][..., 0]).all(axis=(1, 2)))
    assert matches.size >= 1 and labels[matches[0]] == first["label"]
    assert sum(1 for _ in source.decoded()) == 10_000


@pytest.mark.parametrize("dataset,hint", [
    ("cifar10", "tfds build cifar10"),
    ("imagenet2012", "ILSVRC2012_img_train.tar"),
])
def test_absent_data_set_says_how_to_get_it(tmp_path, dataset, hint):
    source = sources.load(dataset, "train", tmp_path)
    with pytest.raises(sources.DataMissing) as e:
        source.encoded(seed=0)
    message = str(e.value)
    assert message.startswith(f"{dataset} is not prepared in {tmp_path}: ")
    assert hint in message and "\n" not in message
    # The next step without it: the offline stand-in of the same task.
    assert message.endswith("; to run this workload without it now, add workload.dataset=synthetic_images "
                            "workload.eval_split=test (an offline stand-in of the same task)")


def test_absent_fashion_mnist_says_how_to_get_it(tmp_path, monkeypatch):
    monkeypatch.setattr(sources, "FASHION_MNIST_DIR", tmp_path / "nowhere")
    with pytest.raises(sources.DataMissing, match="apt-get install dataset-fashion-mnist"):
        sources.load("fashion_mnist", "train", tmp_path / "tfds")


def test_unknown_split_is_named(data_dir):
    with pytest.raises(sources.DataMissing, match="has no split 'validation'; it has"):
        sources.load("fashion_mnist", "validation", data_dir).decoded()
    with pytest.raises(sources.DataMissing) as e:  # checked as the workload is made, before any profile or compile
        sources.load("synthetic_images", "validation", data_dir).check_split("workload.eval_split")
    assert str(e.value) == ("synthetic_images has no split 'validation'; it has train, test: set workload.eval_split "
                            "to one of them")


def test_data_dir_follows_tfds_conventions(monkeypatch, tmp_path):
    monkeypatch.setenv("TFDS_DATA_DIR", str(tmp_path))
    assert sources.data_dir(None) == tmp_path
    assert sources.data_dir("~/elsewhere") == sources.data_dir("$HOME/elsewhere")
