"""The copy-worth estimate's arithmetic (training/worth.py): known answers for each candidate, None where the
steps cannot define one, the record's medians, and held-out batches that are not like the training ones refused
with the key."""

import numpy as np
import pytest
import tensorflow as tf

from echo_experiments.training import worth


def _steps(worth_of_copy, n=40, fresh_progress=2.0, fresh_loss=1.5, copy_loss=0.6, norm=8.0, drop_worth=0.1):
    shares = np.tile([0.0, 1.0], n // 2)  # batch echoing at e=2: a fresh batch, then its copy
    progress = np.where(shares == 1, worth_of_copy * fresh_progress, fresh_progress)
    losses = np.where(shares == 1, copy_loss, fresh_loss)
    drops = np.where(shares == 1, drop_worth * 0.01, 0.01)
    return shares, progress, losses, np.full(n, norm), shares, drops


@pytest.mark.parametrize("w", [0.0, 0.25, 1.0])
def test_each_candidate_gives_its_known_answer(w):
    found = worth.estimates(*_steps(w))
    assert found["alignment"] == pytest.approx(w)  # a copy step's held-out progress over a fresh step's
    assert found["loss_ratio"] == pytest.approx(0.6 / 1.5)  # a copy's loss over a fresh batch's
    assert found["noise"] == pytest.approx(2.0 / 8.0)  # B / (B + B_noise) = <g, G> / |g|^2 on fresh steps
    assert found["loss_drop"] == pytest.approx(0.1)  # a copy step's measured held-out drop over a fresh step's
    assert found["copy_share"] == pytest.approx(0.5) and found["steps"] == 40


def test_mixed_batches_are_fitted_by_their_copied_share():
    rng = np.random.default_rng(0)
    shares = rng.uniform(0.3, 0.7, 200)  # example echoing: every batch part fresh, part copies
    progress = 3.0 * (1 - shares) + 3.0 * 0.4 * shares
    found = worth.estimates(shares, progress, 1.0 + 0 * shares, 5.0 + 0 * shares, shares, progress / 100)
    assert found["alignment"] == pytest.approx(0.4) and found["loss_drop"] == pytest.approx(0.4)
    assert found["noise"] is not None


def test_without_copies_only_the_noise_candidate_is_defined():
    shares = np.zeros(30)
    found = worth.estimates(shares, np.full(30, 1.0), np.full(30, 2.0), np.full(30, 4.0), shares, np.full(30, 0.1))
    assert found["alignment"] is None and found["loss_ratio"] is None  # no copies to set against fresh steps
    assert found["loss_drop"] is None
    assert found["noise"] == pytest.approx(0.25)


def test_no_fresh_progress_defines_no_ratio():
    shares, _, losses, norms, _, drops = _steps(0.5)
    found = worth.estimates(shares, np.where(shares == 1, 0.1, -1.0), losses, norms, shares, drops)
    assert found["alignment"] is None and found["noise"] is None  # a ratio over a step that made no progress


def test_the_record_holds_each_candidates_median_over_the_evaluations_that_defined_it():
    rows = [{"copy_worth_alignment": 0.2, "copy_worth_loss_ratio": None, "copy_worth_noise": 0.1,
             "copy_worth_copy_share": 0.5},
            {"copy_worth_alignment": 0.4, "copy_worth_loss_ratio": 0.9, "copy_worth_noise": 0.3,
             "copy_worth_copy_share": 0.5},
            {"copy_worth_alignment": 0.9, "copy_worth_noise": None, "copy_worth_copy_share": 0.0}, {"step": 1}]
    assert worth.summary(rows) == {"alignment": 0.4, "loss_ratio": 0.9, "noise": 0.2, "loss_drop": None,
                                   "copy_share": 0.5}


class _State:
    def __init__(self, step=0):
        self.step, self.params, self.model_state, self.rng = step, None, None, None


def test_a_steps_drop_is_its_held_out_loss_less_the_next_steps_on_one_batch_across_evaluations():
    """Fresh steps lower the held-out loss by 1, copies by 0.25; a new G (every 4 steps) starts a new chain on
    another batch, whose loss level is another, so the step before it has no drop."""
    levels, taken = {"loss": 100.0}, []

    def probed_step(state, batch, rate, gradient, held_out):
        before = levels["loss"] + 1000 * held_out["k"]  # each held-out batch its own level
        levels["loss"] -= 0.25 if batch["copy"] else 1.0
        return _State(state.step + 1), 0.0, (1.0, 2.0, before)

    def gradient(params, model_state, held_out, rng):
        taken.append(held_out["k"])
        return held_out["k"]

    probe = worth.Probe(probed_step, gradient, [{"k": 0}, {"k": 1}], every=4, batch_size=2)
    state, rows = _State(), []
    for n in range(24):
        copy = n % 2 == 1  # batch echoing at e=2
        state, _ = probe.step(state, {"copy": copy}, None, 0 if copy else 2, n)
        if n % 6 == 5:
            rows.append(probe.at_evaluation())
    assert taken == [0, 1, 0, 1, 0, 1]  # G every 4 steps, on the held-out batches in turn
    assert [r["copy_worth_loss_drop"] for r in rows] == [pytest.approx(0.25)] * 4
    assert [r["copy_worth_copy_share"] for r in rows] == [0.5] * 4


class _HeldOut:
    def __init__(self, images):
        self.images = images

    def eval_examples(self):
        return tf.data.Dataset.from_tensor_slices({"image": self.images, "label": np.zeros(len(self.images), np.int64)})


def test_held_out_batches_are_full_batches_of_the_training_keys():
    batches = worth.held_out_batches(_HeldOut(np.zeros((20, 4, 4, 1), np.float32)), 8,
                                     {"image": ((4, 4, 1), np.float32), "label": ((), np.int64)})
    assert [sorted(b) for b in batches] == [["image", "label"]] * 2  # 20 examples: two full batches of 8
    assert all(len(b["image"]) == 8 for b in batches)


def test_held_out_examples_unlike_the_training_batches_are_refused_with_the_key():
    with pytest.raises(ValueError, match=r"held-out examples' 'image' is \(5, 5, 1\) float32, where a training "
                                         r"batch's is \(4, 4, 1\) float32"):
        worth.held_out_batches(_HeldOut(np.zeros((20, 5, 5, 1), np.float32)), 8,
                               {"image": ((4, 4, 1), np.float32)})
    with pytest.raises(ValueError, match="fewer than a batch"):
        worth.held_out_batches(_HeldOut(np.zeros((3, 4, 4, 1), np.float32)), 8, {"image": ((4, 4, 1), np.float32)})
