"""The same config on the same machine gives the same metrics, for every CPU workload (docs/protocol.md,
"Machines": across CPU models it does not)."""

import pytest

from conftest import compose_config, metric_rows
from echo_experiments.train import run

QUIET = ["trainer.profile_batches=0", "trainer.progress=false", "trainer.tensorboard=false",
         "trainer.checkpoint_every_seconds=0", "workload.target.value=0.999"]
WORKLOADS = {
    # Echoing at a fractional factor before augmentation: the echo draws, augmentation and shuffles all count.
    "fashion_mnist": ["workload.model.width=4", "workload.eval_examples=1000", "workload.shuffle_buffer=1000",
                      "echo=before_augmentation", "echo.factor=1.5", "trainer.max_steps=40",
                      "trainer.eval_every_fresh_examples=640"],
    "transformer_pydocs": ["workload.model.d_model=32", "workload.model.mlp_dim=64", "workload.text.seq_len=64",
                           "workload.batch_size=16", "workload.eval_examples=64", "echo=before_batching",
                           "trainer.max_steps=30", "trainer.eval_every_fresh_examples=160"],
    "ssd_fashion": ["workload.eval_examples=20", "echo=after_augmentation", "trainer.max_steps=12",
                    "trainer.eval_every_fresh_examples=96"],
}


# The detection model is the slowest to compile (about 16 s): `make test-all` runs it.
@pytest.mark.parametrize("workload", [pytest.param(w, marks=pytest.mark.slow) if w == "ssd_fashion" else w
                                      for w in sorted(WORKLOADS)])
def test_a_config_run_twice_on_one_machine_gives_identical_metrics(tmp_path, workload):
    cfg = compose_config(f"workload={workload}", *QUIET, *WORKLOADS[workload])
    first, second = run(cfg, tmp_path / "a"), run(cfg, tmp_path / "b")
    rows = metric_rows(tmp_path / "a")
    assert len(rows) >= 2 and rows == metric_rows(tmp_path / "b")
    assert (first.fresh_examples, first.steps, first.final_metrics) == (second.fresh_examples, second.steps,
                                                                        second.final_metrics)
