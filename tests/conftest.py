import os
import signal
from collections import Counter

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
# The signal tests stop runs with SIGINT and SIGHUP, and a run keeps a signal its parent ignores ignored (as nohup
# and a shell's background jobs ask): the suite undoes that for its own processes and the ones they start, so it
# tests the same thing from a terminal, in the background or under nohup.
signal.signal(signal.SIGINT, signal.default_int_handler)
signal.signal(signal.SIGHUP, signal.SIG_DFL)

from hydra import compose, initialize_config_module  # noqa: E402

import echo_experiments.workloads.registry  # noqa: E402,F401  (stores the schemas in Hydra's ConfigStore)

# The trainer's fast tests run the synthetic workload (conf/workload/synthetic.yaml): seconds per run. They skip the
# timing facts (a few seconds a run); a test about them sets trainer.profile_batches after FAST (the last wins).
FAST = ["workload=synthetic", "trainer.progress=false", "trainer.checkpoint_every_seconds=0",
        "trainer.profile_batches=0"]


def env_with_xla_flags(*flags: str) -> dict[str, str]:
    """This process's environment for a subprocess, with ``flags`` added to any XLA_FLAGS already set."""
    return {**os.environ, "XLA_FLAGS": " ".join([os.environ.get("XLA_FLAGS", ""), *flags]).strip()}


def metric_rows(run_dir):
    """A run directory's metrics.jsonl rows without their clock readings (the keys ending in _s, and input_slowdown,
    a ratio of two), the part two runs of the same config must agree on."""
    from echo_experiments.core.rundir import RunDir

    return [{k: v for k, v in r.items() if not k.endswith("_s") and k != "input_slowdown"}
            for r in RunDir(run_dir).metrics()]


def signal_at_evaluation(monkeypatch, n: int, signum: int = signal.SIGINT):
    """Make this process send itself ``signum`` right after its n-th evaluation row (SIGINT: as Ctrl-C would);
    returns the undo, for the rerun that resumes."""
    from echo_experiments.training.events import Events

    original, calls = Events.row, {"n": 0}

    def row(self, values):
        original(self, values)
        calls["n"] += 1
        if calls["n"] == n:
            os.kill(os.getpid(), signum)

    monkeypatch.setattr(Events, "row", row)
    return lambda: monkeypatch.setattr(Events, "row", original)


def compose_config(*overrides: str):
    with initialize_config_module(version_base="1.3", config_module="echo_experiments.conf"):
        return compose("config", overrides=list(overrides))


def train(cfg, out_dir):
    """Train the run a composed config asks for, as the command line does: checked at the front door
    (workloads/run_check.py), then handed to the trainer as its spec. Returns the run's record."""
    from echo_experiments.training.trainer import run
    from echo_experiments.workloads.run_check import check_run

    return run(check_run(cfg), out_dir)


def echoed_batches(workload, records, placement, factor, *, shuffle=0, batch_size, shuffle_buffer, seed=0):
    """One pass over ``records`` through the training stream (data/stream.py), as a list of NumPy batches."""
    from echo_experiments.core.placement import EchoSpec, Placement
    from echo_experiments.core.specs import PipelineSpec
    from echo_experiments.data import stream

    spec = PipelineSpec(batch_size, shuffle_buffer, seed, EchoSpec(Placement(placement), factor, shuffle))
    ds = stream.build(workload, spec, records=records, epochs=1)
    return list(ds.as_numpy_iterator())


def fresh_and_delivered(out):
    """The fresh examples in ``out`` (counted as the trainer counts them) and the examples it delivers."""
    from echo_experiments.core.fresh import FreshCounter

    counter = FreshCounter()
    for b in out:
        counter.update(b["read_id"])
    return counter.count, sum(len(b["read_id"]) for b in out)


def assert_each_read_delivered(out, n: int, factor: int) -> None:
    """An integer echo factor: the ``n`` reads are all fresh, and each is delivered exactly ``factor`` times."""
    assert fresh_and_delivered(out) == (n, factor * n)
    assert Counter(int(i) for b in out for i in b["read_id"]) == {i: factor for i in range(n)}


@pytest.fixture(scope="session")
def data_dir():
    """The TFDS data directory the program itself uses (Fashion-MNIST is prepared there once)."""
    from echo_experiments.data import sources

    directory = sources.data_dir(None)
    sources.load("fashion_mnist", "train", directory)  # prepares it from the Debian files if needed
    return directory


@pytest.fixture(scope="module")
def fashion():
    """Real Fashion-MNIST images and labels, 384 of the training split and 128 of the test split."""
    from echo_experiments.data import sources

    def split(prefix, n):
        images = sources.read_idx(sources.FASHION_MNIST_DIR / f"{prefix}-images-idx3-ubyte.gz")[:n]
        labels = sources.read_idx(sources.FASHION_MNIST_DIR / f"{prefix}-labels-idx1-ubyte.gz")[:n]
        return images[..., None], labels.astype(np.int64)
    return {"train": split("train", 384), "test": split("t10k", 128)}
