"""A user's own data, each kind end to end through the training stream: a TFDS data set stored in data.dir by
name, TFRecord files, NumPy arrays and an image folder (one of them through the HTTP record server)."""

import json
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds
from conftest import compose_config, train

from echo_experiments.data import sources


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
    record = train(compose_config(
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


EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
RECORD = {"image": ("string", []), "label": ("int64", []), "read_id": ("int64", [])}
EXAMPLE = {"image": ("uint8", [28, 28, 1]), "label": ("int64", []), "read_id": ("int64", [])}


def spec(tensors) -> dict:
    return {k: (v.dtype.name, v.shape.as_list()) for k, v in tensors.items()}


def typed_workload(chunks: bool):
    """The example workload, each hook asserting what docs/your-model.md says it receives."""
    from fashion_mlp import FashionMLP

    class Typed(FashionMLP):
        augments_in_chunks = chunks
        seen: list = []

        def decode(self, record):
            self.seen.append(("decode", spec(record)))
            return super().decode(record)

        def augment(self, example, seed):
            self.seen.append(("augment", spec(example), spec({"seed": seed})))
            return super().augment(example, seed)

        def augment_chunk(self, examples, seed):
            self.seen.append(("augment_chunk", spec(examples), spec({"seed": seed})))
            return tf.map_fn(lambda x: super(Typed, self).augment(x, seed), examples)

    return Typed


@pytest.mark.parametrize("kind,chunks", [(kind, False) for kind in sorted(KINDS)] + [("npz", True)])
def test_each_hook_receives_what_the_docs_say_for_each_kind_of_data(tmp_path, fashion, monkeypatch, kind, chunks):
    from conftest import echoed_batches

    monkeypatch.syspath_prepend(str(EXAMPLES))
    dataset = KINDS[kind][0](tmp_path / "data", fashion)
    cfg = compose_config(f"hydra.searchpath=[file://{EXAMPLES / 'conf'}]", "workload=fashion_mlp",
                         f"workload.dataset={dataset}")
    workload = typed_workload(chunks)(cfg.workload, tmp_path / "data")
    batches = echoed_batches(workload, workload.train_source.encoded(0).take(16), "before_augmentation", 2,
                             batch_size=8, shuffle_buffer=16)
    augmented = ("augment_chunk", {k: (t, [None, *s]) for k, (t, s) in EXAMPLE.items()}, {"seed": ("int64", [2])}) \
        if chunks else ("augment", EXAMPLE, {"seed": ("int64", [2])})
    assert workload.seen == [("decode", RECORD), augmented]
    assert {k: (v.dtype.name, list(v.shape)) for k, v in batches[0].items()} == {
        "image": ("uint8", [8, 28, 28, 1]), "label": ("int64", [8]), "read_id": ("int64", [8])}
    assert spec(workload.eval_examples().element_spec) == {"image": ("uint8", [28, 28, 1]), "label": ("int64", [])}
    assert spec(workload.eval_source.decoded().element_spec) == {"image": ("uint8", [28, 28, 1]),
                                                                "label": ("int64", [])}


def test_a_hook_that_fails_is_one_line_with_the_users_own_line_and_the_error_in_full(tmp_path, fashion, monkeypatch):
    from conftest import echoed_batches

    from echo_experiments.core.schema import ConfigError

    monkeypatch.syspath_prepend(str(EXAMPLES))
    from fashion_mlp import FashionMLP

    class Broken(FashionMLP):
        def augment(self, example, seed):
            return {**example, "image": example["image"] + "x"}  # text added to pixels

    cfg = compose_config(f"hydra.searchpath=[file://{EXAMPLES / 'conf'}]", "workload=fashion_mlp",
                         f"workload.dataset={as_npz(tmp_path / 'data', fashion)}")
    workload = Broken(cfg.workload, tmp_path / "data")
    with pytest.raises(ConfigError) as error:
        echoed_batches(workload, workload.train_source.encoded(0).take(8), "before_augmentation", 2, batch_size=8,
                       shuffle_buffer=8)
    line = Broken.augment.__code__.co_firstlineno + 1
    assert str(error.value) == (
        "Broken.augment fails on its examples: TypeError: Input 'y' of 'AddV2' Op has type string that does not "
        f"match type uint8 of argument 'x'. (at {__file__}:{line}, in augment: return {{**example, \"image\": "
        "example[\"image\"] + \"x\"}  # text added to pixels); what each hook receives: "
        "docs/your-model.md#what-each-hook-receives")


def test_tfrecord_images_stored_as_raw_pixels_end_the_run_with_one_line_saying_so(tmp_path, fashion):
    from echo_experiments.core.schema import ConfigError

    root = tmp_path / "data"
    as_tfrecord(root, fashion)
    for name, (images, labels) in fashion.items():  # the same records, the pixels' bytes in place of a PNG
        with tf.io.TFRecordWriter(str(root / f"{name}-00000.tfrecord")) as writer:
            for image, label in zip(images, labels):
                feature = {"image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[image.tobytes()])),
                           "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(label)]))}
                writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    with pytest.raises(ConfigError) as error:
        train(compose_config(f"workload.dataset=tfrecord:{root}", "trainer.max_steps=4", "trainer.profile_batches=0",
                           "trainer.progress=false", "trainer.tensorboard=false"), tmp_path / "run")
    assert str(error.value) == (
        f"the input pipeline cannot take an example of tfrecord:{root}: record 0 of {root}/train-00000.tfrecord is "
        "not a PNG, JPEG, BMP or GIF image (Unknown image file format. One of JPEG, JPEG XL, PNG, GIF, BMP, WebP "
        "required.): store images encoded")
    # Without image_shape the shape is read from the first record's image, which says so at once.
    (root / "features.json").write_text(json.dumps({"features": {"image": "string", "label": "int64"}}))
    with pytest.raises(sources.DataMissing, match=r"the image of the first record of \S+train-00000.tfrecord is not "
                                                  r"PNG, JPEG, BMP or GIF bytes \(.*\): store images encoded"):
        sources.load(f"tfrecord:{root}", "train", tmp_path)


def npz_case(root: Path, fashion, change) -> str:
    """The real arrays as npz, with ``change`` applied to a dict of the four arrays first."""
    arrays = {f"{split}_{k}": v.copy() for split, (images, labels) in fashion.items()
              for k, v in (("image", images), ("label", labels))}
    change(arrays)
    root.mkdir()
    for split in fashion:
        np.savez(root / f"{split}.npz", image=arrays[f"{split}_image"], label=arrays[f"{split}_label"])
    return f"npz:{root}"


def _set(key, index, value):
    def change(arrays):
        labels = arrays[key].astype(type(value)) if isinstance(value, float) else arrays[key]
        labels[index] = value
        arrays[key] = labels
    return change


NPZ_CASES = {
    "nan_label": (_set("train_label", 5, float("nan")), "train.npz has labels that are not class indices (dtype "
                                                        "float64, NaN or infinite among them): store them as integers"),
    "negative_label": (_set("train_label", 5, -1), "train.npz has label -1: labels are class indices from 0"),
    "huge_label": (_set("train_label", 5, 10**9), "train.npz has label 1000000000: labels are class indices from 0 "
                                                   "to at most 65535"),
    "one_class": (lambda a: a.update(train_label=np.zeros_like(a["train_label"])), "train.npz has one class only"),
    "test_class_beyond_train": (lambda a: a.update(train_label=a["train_label"] % 5),
                                "test.npz has class 9, and the training split"),
    "no_examples": (lambda a: a.update(train_image=a["train_image"][:0], train_label=a["train_label"][:0]),
                    "train.npz holds no examples"),
    "flat_images": (lambda a: a.update(train_image=a["train_image"].reshape(len(a["train_image"]), -1)),
                    "train.npz needs images of shape (N, H, W) or (N, H, W, C) with C one of 1, 2, 3, 4, not "
                    "(384, 784)"),
    "five_channels": (lambda a: a.update(train_image=np.repeat(a["train_image"], 5, axis=-1)),
                      "not (384, 28, 28, 5)"),
}


@pytest.mark.parametrize("case", sorted(NPZ_CASES))
def test_npz_data_that_cannot_train_is_refused_naming_its_file(tmp_path, fashion, data_dir, case):
    from echo_experiments.workloads import make

    change, expected = NPZ_CASES[case]
    dataset = npz_case(tmp_path / "data", fashion, change)
    with pytest.raises(sources.DataMissing) as error:
        make(compose_config(f"workload.dataset={dataset}").workload, data_dir)
    assert expected in str(error.value) and str(tmp_path / "data") in str(error.value)


def test_a_zero_byte_npz_is_one_line(tmp_path, data_dir):
    (tmp_path / "train.npz").write_bytes(b"")
    with pytest.raises(sources.DataMissing, match=r"train.npz is not a .npz with arrays image and label \(EOFError"):
        sources.load(f"npz:{tmp_path}", "train", data_dir)


def test_image_folders_with_one_class_or_a_test_class_training_lacks_are_refused(tmp_path, fashion, data_dir):
    from echo_experiments.workloads import make

    images, labels = fashion["train"]
    one = {split: (x, np.zeros_like(y)) for split, (x, y) in fashion.items()}
    with pytest.raises(sources.DataMissing, match="train has one class only"):
        make(compose_config(f"workload.dataset={as_images(tmp_path / 'one', one)}").workload, data_dir)
    fewer = {"train": (images, labels % 5), "test": fashion["test"]}
    with pytest.raises(sources.DataMissing, match=r"test has class folders .* lacks \(class5, class6"):
        make(compose_config(f"workload.dataset={as_images(tmp_path / 'fewer', fewer)}").workload, data_dir)


def test_tfrecords_need_only_their_features_and_are_refused_when_empty_or_mislabelled(tmp_path, fashion, data_dir):
    from echo_experiments.workloads import make

    root = Path(as_tfrecord(tmp_path / "data", fashion).split(":", 1)[1])
    (root / "features.json").write_text(json.dumps({"features": {"image": "string", "label": "int64"}}))
    workload = make(compose_config(f"workload.dataset=tfrecord:{root}").workload, data_dir)  # the optional keys
    assert (workload.train_source.image_shape, workload.train_source.num_classes) == ((28, 28, 1), 10)
    (root / "features.json").write_text(json.dumps({"features": {"image": "string", "label": "int64"},
                                                    "num_classes": 1}))
    with pytest.raises(sources.DataMissing, match="has num_classes 1: an integer from 2 to 65536"):
        sources.load(f"tfrecord:{root}", "train", data_dir)
    (root / "features.json").write_text(json.dumps({"features": {"image": "string", "label": "float32"}}))
    with pytest.raises(sources.DataMissing, match="declares label as float32: labels are class indices, int64"):
        sources.load(f"tfrecord:{root}", "train", data_dir)
    (root / "features.json").write_text(json.dumps({"features": {"image": "string", "label": "int64"}}))
    (root / "train-00000.tfrecord").write_bytes(b"")
    with pytest.raises(sources.DataMissing, match=r"train-00000.tfrecord holds no records"):
        sources.load(f"tfrecord:{root}", "train", data_dir)


def test_tfrecord_labels_are_checked_when_features_json_does_not_give_the_classes(tmp_path, fashion, data_dir):
    from echo_experiments.workloads import make

    images, labels = fashion["train"]
    for name, train_labels, expected in [("fewer", labels % 5, r"test\*.tfrecord\* has class 9, and the training"),
                                         ("negative", np.where(labels == 3, -1, labels), "has label -1")]:
        root = Path(as_tfrecord(tmp_path / name, {"train": (images, train_labels), "test": fashion["test"]})[9:])
        (root / "features.json").write_text(json.dumps({"features": {"image": "string", "label": "int64"}}))
        with pytest.raises(sources.DataMissing, match=expected):
            make(compose_config(f"workload.dataset=tfrecord:{root}").workload, data_dir)
