"""trainer.copy_worth_every end to end, on the synthetic workload: the estimate trains nothing differently, its
rows and record say what a copy was worth, and a run without copies defines only what it can."""

import pytest
from conftest import FAST, compose_config, metric_rows, train

from echo_experiments.core.schema import ConfigError

ECHOED = [*FAST, "echo=after_batching", "echo.factor=2", "trainer.stop_at_target=false",
          "trainer.max_fresh_examples=3072"]
WORTH = ("copy_worth_alignment", "copy_worth_loss_ratio", "copy_worth_noise", "copy_worth_loss_drop",
         "copy_worth_copy_share", "copy_worth_copy_steps")


@pytest.mark.slow  # about 20 s: `make test-all` runs it
def test_a_run_with_the_estimate_trains_as_one_without_it_and_says_what_a_copy_was_worth(tmp_path):
    plain = train(compose_config(*ECHOED), tmp_path / "plain")
    probed = train(compose_config(*ECHOED, "trainer.copy_worth_every=4"), tmp_path / "probed")
    rows = metric_rows(tmp_path / "probed")
    assert [{k: v for k, v in r.items() if k not in WORTH} for r in rows] == metric_rows(tmp_path / "plain")
    assert (probed.steps, probed.fresh_examples, probed.final_metrics) == (
        plain.steps, plain.fresh_examples, plain.final_metrics)  # bit for bit: the estimate only looks
    assert plain.copy_worth == {} and "copy_worth_alignment" not in metric_rows(tmp_path / "plain")[0]
    # A fresh batch, then its copy; the first evaluation falls after the 32nd fresh batch, before its copy.
    assert [r["copy_worth_copy_share"] for r in rows] == [31 / 63, 0.5, 0.5]
    assert all(isinstance(r[k], float) for r in rows for k in WORTH)
    assert set(probed.copy_worth) == {"alignment", "loss_ratio", "noise", "loss_drop", "copy_share"}
    assert probed.copy_worth["copy_share"] == 0.5 and 0 < probed.copy_worth["noise"] <= 1


def test_without_copies_a_run_estimates_only_the_noise_candidate(tmp_path):
    record = train(compose_config(*FAST, "trainer.stop_at_target=false", "trainer.max_fresh_examples=2048",
                                "trainer.copy_worth_every=8"), tmp_path)
    rows = metric_rows(tmp_path)
    assert [(r["copy_worth_alignment"], r["copy_worth_loss_ratio"], r["copy_worth_copy_share"]) for r in rows] == [
        (None, None, 0.0)] * 2
    assert record.copy_worth["alignment"] is None and record.copy_worth["noise"] > 0


def test_a_negative_cadence_is_refused_with_its_key():
    with pytest.raises(ConfigError, match=r"trainer.copy_worth_every=-1 is not allowed: an integer >= 0"):
        train(compose_config(*FAST, "trainer.copy_worth_every=-1"), "unused")
