"""The same config on the same machine gives the same metrics, for every CPU workload (docs/protocol.md,
"Machines": across CPU models it does not)."""

import re
import signal

import pytest
from conftest import FAST, compose_config, metric_rows, signal_at_evaluation, train

from echo_experiments.core import machine
from echo_experiments.core.schema import ConfigError
from echo_experiments.core.signals import Interrupted

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
    first, second = train(cfg, tmp_path / "a"), train(cfg, tmp_path / "b")
    rows = metric_rows(tmp_path / "a")
    assert len(rows) >= 2 and rows == metric_rows(tmp_path / "b")
    assert (first.fresh_examples, first.steps, first.final_metrics) == (second.fresh_examples, second.steps,
                                                                        second.final_metrics)


@pytest.mark.slow  # three runs, about 11 s of CPU: `make test-all` runs it
def test_a_run_resumes_only_on_the_cpu_model_it_started_on(tmp_path, monkeypatch):
    """Stopped with a checkpoint, then run again on another CPU model: refused, its files kept; started over
    there only when asked."""
    long = [*FAST, "trainer.stop_at_target=false", "trainer.max_fresh_examples=10240",
            "trainer.checkpoint_every_steps=64"]
    undo = signal_at_evaluation(monkeypatch, 3, signal.SIGTERM)
    with pytest.raises(Interrupted):
        train(compose_config(*long), tmp_path)
    undo()
    here, rows = machine.describe(), metric_rows(tmp_path)
    other = "Another CPU (x86_64, family/model/stepping 6/85/7; avx2)"
    monkeypatch.setattr(machine, "describe", lambda: {**here, "cpu": other})
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(tmp_path))} started on {re.escape(here['cpu'])}, and "
                                          rf"this machine is {re.escape(other)}: .* resume it on that model, or add "
                                          r"trainer.restart=true to start it over here$"):
        train(compose_config(*long), tmp_path)
    assert metric_rows(tmp_path) == rows and not (tmp_path / "summary.json").exists()
    record = train(compose_config(*long, "trainer.restart=true"), tmp_path)
    assert record.steps == 320 and record.machine["cpu"] == other
