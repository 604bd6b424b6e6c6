"""An example of a user's data that a stage of the pipeline cannot take (a damaged image, one of another size, a
label beyond the declared classes) ends the run with one line naming its file, in the training split as in the
held-out one, instead of a TensorFlow error, garbage trained on or a NaN loss taken for divergence."""

import re
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from conftest import compose_config, train
from test_your_data import as_images, as_tfrecord

from echo_experiments.core.schema import ConfigError

BAD = 5  # the example spoiled: not the first, which a source reads when it opens


def spoiled_images(root: Path, data, split: str, fault: str) -> tuple[str, str]:
    """An image folder with one file of ``split`` spoiled; (dataset, the file's path)."""
    from PIL import Image

    dataset = as_images(root, data)
    path = sorted((root / split).glob("*/*.png"))[BAD]
    if fault == "damaged":
        path.write_bytes(path.read_bytes()[:40])
    else:
        Image.open(path).resize((20, 20)).save(path)
    return dataset, str(path)


def spoiled_tfrecord(root: Path, data, split: str, fault: str) -> tuple[str, str]:
    """TFRecords with record BAD of ``split`` spoiled; (dataset, its file's path)."""
    images, labels = data[split]
    if fault == "damaged":
        png = tf.io.encode_png(images[BAD]).numpy()
        spoiled = {BAD: png[:40]}
    elif fault == "resized":
        spoiled = {BAD: tf.io.encode_png(tf.image.resize(images[BAD], (20, 20)).numpy().astype(np.uint8)).numpy()}
    else:
        spoiled, labels = {}, np.where(np.arange(len(labels)) == BAD, 12, labels)
    dataset = as_tfrecord(root, {**data, split: (images, labels)})
    path = root / f"{split}-00000.tfrecord"
    if spoiled:
        records = [tf.train.Example.FromString(r) for r in tf.data.TFRecordDataset([str(path)]).as_numpy_iterator()]
        records[BAD].features.feature["image"].bytes_list.value[0] = spoiled[BAD]
        with tf.io.TFRecordWriter(str(path)) as writer:
            for record in records:
                writer.write(record.SerializeToString())
    return dataset, f"record {BAD} of {path}"


EXPECTED = {"damaged": r"is not a (readable|PNG, JPEG, BMP or GIF) image \(.*\)",
            "resized": r"(is 20x20 pixels and \S+ 28x28|has an image of shape \(20, 20, 1\), and the data set's is "
                       r"\(28, 28, 1\)): the images of a data set must have one size \(resize them\)",
            "label": r"has label 12, and \S+features.json gives num_classes 10: labels are class indices from 0 to 9"}
CASES = [("images", spoiled_images, f) for f in ("damaged", "resized")] + \
        [("tfrecord", spoiled_tfrecord, f) for f in ("damaged", "resized", "label")]


def trained(tmp_path: Path, dataset: str, *overrides: str):
    return train(compose_config(f"workload.dataset={dataset}", "workload.model.width=4", "trainer.max_steps=12",
                              "trainer.eval_every_fresh_examples=384", "trainer.profile_batches=0",
                              "trainer.progress=false", "trainer.tensorboard=false", *overrides), tmp_path / "run")


@pytest.mark.parametrize("kind,spoil,fault", CASES, ids=[f"{k}-{f}" for k, _, f in CASES])
def test_an_example_of_the_training_split_a_stage_cannot_take_is_one_line_naming_its_file(tmp_path, fashion, kind,
                                                                                         spoil, fault):
    dataset, where = spoil(tmp_path / "data", fashion, "train", fault)
    with pytest.raises(ConfigError) as error:
        trained(tmp_path, dataset)
    message = str(error.value)
    assert message.startswith(f"the input pipeline cannot take an example of {dataset}: {where} "), message
    assert re.search(EXPECTED[fault], message), message


@pytest.mark.parametrize("kind,spoil", [("images", spoiled_images), ("tfrecord", spoiled_tfrecord)])
def test_a_damaged_image_of_the_held_out_split_is_one_line_naming_its_file(tmp_path, fashion, kind, spoil):
    dataset, where = spoil(tmp_path / "data", fashion, "test", "damaged")
    with pytest.raises(ConfigError, match=f"cannot take an example of {dataset}: {where} is not a "):
        trained(tmp_path, dataset)
