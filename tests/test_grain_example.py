"""examples/grain_fashion.py, the Grain example: it learns Fashion-MNIST with echoing, counts fresh examples
exactly, and a run stopped as if killed resumes from its checkpoint exactly as if it had not stopped."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import grain_fashion  # noqa: E402

from echo_experiments.grain import window_size  # noqa: E402

FACTOR, BATCH = 1.5, 128


def arguments(out: Path, *extra: str):
    return grain_fashion.parse(["--out", str(out), "--factor", str(FACTOR), "--fresh-examples", "6400",
                                "--eval-every", "1600", "--checkpoint-every", "20", *extra])


# The clock's readings in a row: a resumed run's differ from an uninterrupted one's.
CLOCKS = ("train_s", "input_wait_share")


def rows(out: Path) -> list[dict]:
    return [{k: v for k, v in json.loads(line).items() if k not in CLOCKS}
            for line in (out / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    out = tmp_path_factory.mktemp("whole")
    grain_fashion.train(arguments(out))
    return out


def test_the_example_learns_with_echoing_and_counts_fresh_examples(whole):
    evaluations = rows(whole)
    assert [r["fresh_examples"] >= f for r, f in zip(evaluations, (1600, 3200, 4800, 6400))] == [True] * 4
    last = evaluations[-1]
    assert 6400 <= last["fresh_examples"] < 6400 + BATCH  # it stops at the first step past the budget
    # Every copy is delivered, apart from those still in the window shuffle when training stops.
    assert abs(last["examples"] - FACTOR * last["fresh_examples"]) <= window_size(FACTOR, BATCH)
    assert last["accuracy"] > 0.7  # 10 classes: chance is 0.1


def test_a_run_stopped_without_saving_resumes_exactly(whole, tmp_path):
    with pytest.raises(SystemExit, match="stopped at step 50"):
        grain_fashion.train(arguments(tmp_path, "--stop-at-step", "50"))  # its newest checkpoint: step 40
    assert (tmp_path / "checkpoints" / "40").is_dir() and len(rows(tmp_path)) == 2  # 1,600 and 3,200 at step 36
    grain_fashion.train(arguments(tmp_path))
    assert rows(tmp_path) == rows(whole)  # every evaluation's accuracy and training loss, to the last bit


def test_echo_on_stall_trains_and_never_passes_its_cap(tmp_path):
    """--auto: no echo stage in the pipeline, the autopilot's copies of examples (augmented in the loop), on a
    store slow enough that it copies: never more than the cap per fresh example, fresh examples exact."""
    grain_fashion.train(grain_fashion.parse(["--out", str(tmp_path), "--auto", "3", "--read-us", "200",
                                             "--fresh-examples", "3200", "--eval-every", "1600"]))
    last = rows(tmp_path)[-1]
    assert 3200 <= last["fresh_examples"] < 3200 + BATCH
    assert last["fresh_examples"] < last["examples"] <= 3 * last["fresh_examples"]


@pytest.mark.parametrize("argv, said", [
    (["--hidden", "0"], "--read-us and --workers must be >= 0, --hidden >= 1"),
    (["--workers", "-1"], "--read-us and --workers must be >= 0, --hidden >= 1"),
    (["--read-us", "-5"], "--read-us and --workers must be >= 0, --hidden >= 1"),
])
def test_the_examples_bad_options_are_one_line_and_exit_2(tmp_path, capsys, argv, said):
    with pytest.raises(SystemExit) as ended:
        grain_fashion.parse(["--out", str(tmp_path), *argv])
    assert ended.value.code == 2 and capsys.readouterr().err.strip().splitlines()[-1].endswith(f"error: {said}")


@pytest.mark.parametrize("argv, said", [
    (["--seeds", "0"], "--seeds must be >= 1, --r > 1, --accuracy between 0 and 1 and --fresh-examples >= 3000"),
    (["--r", "1"], "--seeds must be >= 1, --r > 1, --accuracy between 0 and 1 and --fresh-examples >= 3000"),
    (["--accuracy", "1.5"], "--seeds must be >= 1, --r > 1, --accuracy between 0 and 1 and --fresh-examples >= 3000"),
    (["--fresh-examples", "100"],
     "--seeds must be >= 1, --r > 1, --accuracy between 0 and 1 and --fresh-examples >= 3000"),
    (["--workers", "-1"], "--workers must be >= 0 and --hidden >= 1"),
    (["--hidden", "0"], "--workers must be >= 0 and --hidden >= 1"),
])
def test_the_echo_on_stall_tables_bad_options_are_one_line_and_exit_2(tmp_path, capsys, argv, said):
    import echo_on_stall_table

    with pytest.raises(SystemExit) as ended:
        echo_on_stall_table.parse(["--out", str(tmp_path / "t.md"), *argv])
    assert ended.value.code == 2 and capsys.readouterr().err.strip().splitlines()[-1].endswith(f"error: {said}")
