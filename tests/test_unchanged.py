"""What a refactoring must not change: the default run's numbers on this machine's CPU model, and the tables
`make figures` builds from committed runs, byte for byte."""

import filecmp
import json
import shutil
from pathlib import Path

import pytest
from conftest import compose_config, train

from echo_experiments.core import machine

ROOT = Path(__file__).parents[1]
# Results are bit-reproducible on one CPU model only (machine.py), so the reference is kept per CPU model.
GOLDEN = json.loads((ROOT / "tests" / "golden" / "default_run.json").read_text())
KEYS = ("step", "fresh_examples", "train_loss", "accuracy", "loss", "learning_rate")


def reference() -> dict:
    cpu = machine.describe()["cpu"]
    if cpu not in GOLDEN:
        pytest.skip(f"no reference for this CPU model ({cpu}); tests/golden/default_run.json has "
                    f"{len(GOLDEN)} other(s)")
    return GOLDEN[cpu]


@pytest.mark.slow  # about 31 s: `make test-all` runs it
def test_the_default_runs_first_evaluations_are_unchanged(tmp_path):
    golden = reference()
    # A step cap stops the run early without touching its schedule (which decays over the fresh-example budget);
    # the timing facts measure copies, so leaving them out changes no number.
    record = train(compose_config("trainer.max_steps=200", "trainer.progress=false", "trainer.tensorboard=false",
                                "trainer.profile_batches=0"), tmp_path)
    rows = [{k: r[k] for k in KEYS} for r in map(json.loads, (tmp_path / "metrics.jsonl").read_text().splitlines())]
    assert rows == golden["rows"][:1] and record.steps == 200 and record.fresh_examples == 200 * 64


@pytest.mark.slow
def test_the_default_run_reaches_its_target_where_it_did(tmp_path):
    golden = reference()
    record = train(compose_config("trainer.progress=false", "trainer.tensorboard=false"), tmp_path)
    assert (record.steps_to_target, record.fresh_examples_to_target) == (golden["steps_to_target"],
                                                                          golden["fresh_examples_to_target"])


def test_the_reporter_rebuilds_committed_tables_byte_for_byte(tmp_path, monkeypatch):
    from echo_experiments.report.__main__ import main as report

    committed = ROOT / "results" / "schedule_control_cpu" / "fashion_mnist"
    copy = tmp_path / "copy"
    shutil.copytree(committed / "runs", copy / "runs")
    monkeypatch.chdir(copy)  # as `make figures` runs it: from the folder, so report.md names the same command
    assert report(["runs", "--out", "."]) == 0
    made = sorted(p.relative_to(copy).as_posix() for p in copy.rglob("*") if p.is_file() and "runs" not in p.parts)
    kept = sorted(p.relative_to(committed).as_posix() for p in committed.rglob("*")
                  if p.is_file() and "runs" not in p.parts and p.name != "NOTES.md")  # written by hand
    assert made == kept
    different = [name for name in made if not filecmp.cmp(copy / name, committed / name, shallow=False)]
    assert different == []
