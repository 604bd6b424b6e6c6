"""The detection workload: box transforms, matching, the loss, decoding, mAP and echo counts, on the real
Fashion-MNIST detection canvases."""

from collections import Counter

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tensorflow as tf
from conftest import assert_each_read_delivered, compose_config, echoed_batches, train

from echo_experiments.core.rundir import RunDir
from echo_experiments.models import ssd
from echo_experiments.workloads import make
from echo_experiments.workloads.mean_ap import Detections

N, B = 64, 8


@pytest.fixture(scope="module")
def workload(data_dir):
    return make(compose_config("workload=ssd_fashion", "workload.augment.photometric=false").workload, data_dir)


@pytest.fixture(scope="module")
def canvases(workload):
    ds = workload.train_source.encoded(seed=0).take(40).enumerate().map(lambda i, r: {**r, "read_id": i})
    return list(ds.map(workload.decode))


def tight_box(image: np.ndarray, box: np.ndarray, margin: int = 1):
    """The tight box of the nonzero pixels in ``box`` and the ``margin`` pixels around it, or None.

    Items on a canvas are at least one empty pixel apart, so a margin of 1 sees no neighbour."""
    size = image.shape[0]
    y0, x0, y1, x1 = (box * size).round().astype(int)
    region = image[max(0, y0 - margin):y1 + margin, max(0, x0 - margin):x1 + margin, 0] > 0
    rows, cols = np.flatnonzero(region.any(1)), np.flatnonzero(region.any(0))
    if rows.size == 0:
        return None
    top, left = max(0, y0 - margin), max(0, x0 - margin)
    return np.array([top + rows[0], left + cols[0], top + rows[-1] + 1, left + cols[-1] + 1]) / size


def test_flip_keeps_boxes_tight_on_their_pixels(canvases):
    from echo_experiments.workloads.detection import flip

    for ex in canvases:
        image, boxes = flip(tf.cast(ex["image"], tf.float32), ex["boxes"], tf.constant(True))
        image, boxes = image.numpy(), boxes.numpy()
        for box in boxes[ex["box_mask"].numpy() > 0]:
            np.testing.assert_allclose(tight_box(image, box), box, atol=1e-6)


def test_crop_and_flip_keep_boxes_inside_the_image_and_on_their_objects(workload, canvases):
    kept = dropped = 0
    for i, ex in enumerate(canvases):
        out = workload.augment(ex, tf.constant([7, i], tf.int64))
        image, boxes, mask = out["image"].numpy(), out["boxes"].numpy(), out["box_mask"].numpy()
        assert image.shape == (64, 64, 1)
        for box in boxes[mask > 0]:
            assert np.all(box >= 0) and np.all(box <= 1) and box[0] < box[2] and box[1] < box[3]
            tight = tight_box(image, box)
            assert tight is not None  # the object is there
            # The box still fits its object's pixels; resampling after the crop blurs edges by a pixel or two.
            np.testing.assert_allclose(tight, box, atol=2 / 64)
        kept += int(mask.sum())
        dropped += int(ex["box_mask"].numpy().sum() - mask.sum())
    assert kept > 40 and dropped > 0  # crops happened, and dropped boxes whose centre left them


def test_matching_gives_every_box_a_default_box():
    default = jnp.asarray(ssd.anchors([8, 4, 2]))
    match = jax.jit(ssd.match)
    rng = np.random.default_rng(0)
    for _ in range(50):
        n = int(rng.integers(1, 5))
        corners = rng.uniform(0, 1, (4, 2, 2))
        boxes = np.concatenate([corners.min(1), corners.max(1)], axis=1)[:, [0, 1, 2, 3]]
        boxes[:, 2:] = np.maximum(boxes[:, 2:], boxes[:, :2] + 0.01)
        boxes[1] = boxes[0] + 0.002  # two almost identical small boxes compete for the same best anchor
        valid = np.arange(4) < n
        assigned, positive = match(jnp.asarray(boxes, jnp.float32), jnp.asarray(valid), default)
        owners = set(np.asarray(assigned)[np.asarray(positive)].tolist())
        assert set(np.flatnonzero(valid).tolist()) <= owners
        assert not owners - set(np.flatnonzero(valid).tolist())  # padding owns nothing


def test_decoding_inverts_encoding():
    default = jnp.asarray(ssd.anchors([8, 4, 2]))
    rng = np.random.default_rng(1)
    y0x0 = rng.uniform(0, 0.7, (len(default), 2))
    boxes = jnp.asarray(np.concatenate([y0x0, y0x0 + rng.uniform(0.05, 0.3, (len(default), 2))], 1), jnp.float32)
    np.testing.assert_allclose(ssd.decode(ssd.encode(boxes, default), default), boxes, atol=1e-5)


def test_evaluation_scores_the_detections_of_each_real_image_and_none_of_a_padded_one(workload):
    """eval_accumulate: non-maximum suppression on the model's boxes, then each real image's detections against
    its true boxes; a padded image (mask 0) counts for nothing, neither its boxes nor its detections."""
    truth = np.zeros((2, 4, 4), np.float32)
    truth[:, 0] = [0.1, 0.1, 0.5, 0.5]
    boxes = np.zeros((2, 3, 4), np.float32)
    boxes[:, 0], boxes[:, 1], boxes[:, 2] = [0.1, 0.1, 0.5, 0.5], [0.12, 0.1, 0.5, 0.5], [0.6, 0.6, 0.9, 0.9]
    scores = np.zeros((2, 3, workload.num_classes), np.float32)
    scores[0, 0, 3], scores[0, 1, 3] = 0.9, 0.8  # a box and a near duplicate that suppression removes
    scores[1, 2, 3] = 0.95  # the padded image: a wrong box of the same class, and its true box missed
    batch = {"boxes": truth, "labels": np.full((2, 4), 3, np.int32), "box_mask": np.array([[1, 0, 0, 0]] * 2,
             np.float32), "mask": np.array([1, 0], np.float32)}
    found = workload.eval_accumulate(None, (boxes, scores), batch)
    assert workload.eval_metrics(found) == {"map": pytest.approx(1.0), "map50": pytest.approx(1.0)}


def test_mean_ap_matches_a_hand_checked_case():
    found = Detections(num_classes=2)
    found.add(np.array([[0.1, 0.1, 0.5, 0.5]]), np.array([0]),
              np.array([[0.1, 0.1, 0.5, 0.5], [0.6, 0.6, 0.9, 0.9]]), np.array([0, 0]), np.array([0.9, 0.3]))
    found.add(np.array([[0.0, 0.0, 0.5, 0.5], [0.5, 0.5, 1.0, 1.0]]), np.array([1, 1]),
              np.array([[0.0, 0.0, 0.5, 0.31]]), np.array([1]), np.array([0.8]))
    # Class 0: AP 1 at every IoU threshold. Class 1: one of two boxes found at IoU 0.62, so recall 0.5 at
    # thresholds 0.5, 0.55, 0.6 (101-point AP = 51/101) and nothing above.
    result = found.mean_ap()
    assert result["map50"] == pytest.approx((1 + 51 / 101) / 2)
    assert result["map"] == pytest.approx((1 + 0.3 * 51 / 101) / 2)


def batches(workload, placement, factor, batch_size=B):
    return echoed_batches(workload, workload.train_source.encoded(0).take(N), placement, factor, batch_size=batch_size,
                          shuffle_buffer=N)


@pytest.mark.parametrize("placement", ["before_augmentation", "after_augmentation", "after_batching"])
@pytest.mark.parametrize("factor", [1, 2, 3])
def test_exact_fresh_counts(workload, placement, factor):
    out = batches(workload, placement, factor)
    assert_each_read_delivered(out, N, factor)
    for b in out:
        assert b["image"].shape == (B, 64, 64, 1) and b["boxes"].shape == (B, 4, 4)


@pytest.mark.parametrize("placement", ["before_augmentation", "after_augmentation"])
def test_example_echo_at_one_and_a_half(workload, placement):
    copies = Counter(int(b["read_id"][0]) for b in batches(workload, placement, 1.5, batch_size=1))
    assert len(copies) == N and set(copies.values()) == {1, 2}


@pytest.mark.slow  # about 32 s of SSD training: `make test-all` runs it
def test_loss_is_finite_and_falls_on_real_data(tmp_path):
    # 60 steps: the loss halves by then (about 14.0 at step 20, 6.9 at step 60 for seed 0).
    summary = train(compose_config("workload=ssd_fashion", "trainer.max_steps=60", "workload.eval_examples=100",
                                 "trainer.eval_every_fresh_examples=640", "trainer.profile_batches=0",
                                 "trainer.progress=false", "workload.target.value=0.99"), tmp_path).to_json()
    rows = list(RunDir(tmp_path).metrics())
    assert summary["status"] == "not_reached" and len(rows) == 3
    losses = [r["train_loss"] for r in rows]
    assert all(np.isfinite(losses)) and losses[-1] < 0.7 * losses[0]
    assert 0 <= rows[-1]["map"] <= 1 and rows[-1]["map50"] >= rows[-1]["map"]
