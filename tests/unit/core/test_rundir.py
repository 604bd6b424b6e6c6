"""Run directories: atomic records, metric rows, and what starting a run in a directory means."""

import json

import pytest

from echo_experiments.core.record import SCHEMA_VERSION, RunRecord, Target
from echo_experiments.core.rundir import RunDir, study_best, write_atomic
from echo_experiments.core.schema import ConfigError

TARGET = Target("accuracy", 0.8, "max")
# A run's resolved config, as the front door hands it to the run directory (RunSpec.config).
CONFIG = {"seed": 0, "trainer": {"max_steps": None, "checkpoint_every_seconds": 0.0}}


def record(**fields) -> RunRecord:
    base = dict(workload="w", placement="none", echo_factor=1.0, batch_size=32, shuffle_buffer=0, seed=0, study=0,
                trial=0, tuning_seed=0, status="reached_target", steps=10, fresh_examples=320, wall_time_s=1.0,
                target=TARGET, fresh_examples_to_target=320, steps_to_target=10, seconds_to_target=1.0)
    return RunRecord(**{**base, **fields})


def test_a_record_is_written_whole_with_nan_as_null(tmp_path):
    run = RunDir(tmp_path / "r")
    run.write_summary(record(status="diverged", fresh_examples_to_target=None, final_metrics={"loss": None}))
    written = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert written["status"] == "diverged" and written["schema_version"] == SCHEMA_VERSION == 3
    assert RunRecord.from_json(written) == run.record()
    assert [p.name for p in (tmp_path / "r").iterdir()] == ["summary.json"]  # no temp file left behind


def test_metric_rows_are_appended_and_read_back(tmp_path):
    run = RunDir(tmp_path)
    run.append_metrics({"step": 1, "fresh_examples": 32, "accuracy": 0.5})
    run.append_metrics({"step": 2, "fresh_examples": 64, "accuracy": float("inf")})
    assert list(run.metrics()) == [{"step": 1, "fresh_examples": 32, "accuracy": 0.5},
                                   {"step": 2, "fresh_examples": 64, "accuracy": None}]


def test_resuming_keeps_the_rows_up_to_the_checkpoint_and_drops_a_damaged_line(tmp_path):
    run = RunDir(tmp_path)
    for step in (1, 2, 3):
        run.append_metrics({"step": step, "fresh_examples": 32 * step})
    with open(tmp_path / "metrics.jsonl", "a") as f:
        f.write('{"step": 4, "fresh_exa')  # a write the kill cut short
    run.keep_metrics_until(2)
    assert [r["step"] for r in run.metrics()] == [1, 2]


def test_atomic_write_replaces_content(tmp_path):
    write_atomic(tmp_path / "f.txt", "one")
    write_atomic(tmp_path / "f.txt", "two")
    assert (tmp_path / "f.txt").read_text() == "two"


def test_begin_leaves_a_complete_run_alone_and_resumes_a_failed_one(tmp_path):
    cfg = CONFIG
    run = RunDir(tmp_path)
    run.start(cfg)
    assert run.begin(cfg, False, has_checkpoint=False) is None  # started, never finished: train
    run.write_summary(record())
    assert run.begin(cfg, False, has_checkpoint=False) == record()
    run.write_summary(record(status="failed", error="OSError: gone"))
    assert run.begin(cfg, False, has_checkpoint=True) is None and not (tmp_path / "summary.json").exists()


def test_begin_refuses_another_config_unless_restarted(tmp_path):
    run = RunDir(tmp_path)
    run.start(CONFIG)
    run.write_summary(record())
    other = {**CONFIG, "trainer": {**CONFIG["trainer"], "max_steps": 3}}
    with pytest.raises(ConfigError, match="already holds a run with another config .*trainer.max_steps"):
        run.begin(other, False, has_checkpoint=False)
    # How often a run checkpoints says how to run, not what: not another config.
    checkpointing = {**CONFIG, "trainer": {**CONFIG["trainer"], "checkpoint_every_seconds": 5.0}}
    assert run.begin(checkpointing, False, False) == record()
    assert run.begin(other, True, has_checkpoint=True) is None and not (tmp_path / "summary.json").exists()


@pytest.mark.parametrize("name,content", [("summary.json", "{\"status\": "), ("summary.json", "[]"),
                                          ("config.yaml", "a: [unclosed")])
def test_a_damaged_run_file_is_one_line_naming_it_and_the_choice(tmp_path, name, content):
    run = RunDir(tmp_path)
    cfg = CONFIG
    run.start(cfg)
    (tmp_path / name).write_text(content)
    with pytest.raises(ConfigError) as error:
        run.begin(cfg, False, has_checkpoint=False)
    message = str(error.value)
    assert f"{tmp_path / name} is damaged" in message and "trainer.restart=true" in message
    assert "\n" not in message


def test_study_best_is_the_fewest_fresh_examples_of_the_same_condition_study_and_target(tmp_path):
    RunDir(tmp_path / "a").write_summary(record(fresh_examples_to_target=500))
    RunDir(tmp_path / "b").write_summary(record(fresh_examples_to_target=400))
    RunDir(tmp_path / "c").write_summary(record(fresh_examples_to_target=100, study=1))  # another study
    RunDir(tmp_path / "d").write_summary(record(fresh_examples_to_target=100, target=Target("accuracy", 0.5)))
    RunDir(tmp_path / "e").write_summary(record(status="pruned", fresh_examples_to_target=None))
    (tmp_path / "f").mkdir()
    (tmp_path / "f" / "summary.json").write_text("{")  # being written: no finished trial
    auto = dict(placement="after_batching", echo_auto=True, echo_max_factor=4.0)
    RunDir(tmp_path / "g").write_summary(record(fresh_examples_to_target=100, **auto))  # the autopilot, cap 4
    RunDir(tmp_path / "h").write_summary(record(fresh_examples_to_target=300, **auto))
    RunDir(tmp_path / "i").write_summary(record(fresh_examples_to_target=50, **{**auto, "echo_max_factor": 8.0}))
    RunDir(tmp_path / "j").write_summary(record(fresh_examples_to_target=20, **auto, echo_cap_rule="trend"))
    condition = {"workload": "w", "placement": "none", "echo_factor": 1.0, "batch_size": 32, "shuffle_buffer": 0,
                 "echo_auto": False, "echo_max_factor": None, "echo_cap_rule": None, "tuning_seed": 0, "study": 0}
    assert study_best(tmp_path, condition, TARGET) == 400
    assert study_best(tmp_path, {**condition, "study": 2}, TARGET) is None
    assert study_best(tmp_path, {**condition, **auto}, TARGET) == 100  # another cap is another condition
    # and a cap moved by another rule another still: a paired-spans trial is not pruned by a trend trial's best
    assert study_best(tmp_path, {**condition, **auto, "echo_cap_rule": "paired"}, TARGET) is None
    assert study_best(tmp_path, {**condition, **auto, "echo_cap_rule": "trend"}, TARGET) == 20


def test_restart_deletes_a_runs_own_folders_and_nothing_where_no_run_was(tmp_path):
    (tmp_path / "checkpoints" / "thesis").mkdir(parents=True)  # someone's folder, named like a run's
    (tmp_path / "tb").mkdir()
    with pytest.raises(ConfigError, match=r"holds checkpoints/ and tb/ but no config.yaml: no run of this program "
                                          r"was there, so trainer.restart=true deletes nothing of it"):
        RunDir(tmp_path).clear()
    assert (tmp_path / "checkpoints" / "thesis").is_dir() and (tmp_path / "tb").is_dir()
    (tmp_path / "config.yaml").write_text("seed: 0\n")  # a run was here: its folders go
    RunDir(tmp_path).clear()
    assert not (tmp_path / "checkpoints").exists() and not (tmp_path / "tb").exists()


def test_a_tb_folder_the_run_did_not_write_is_refused_and_a_linked_one_is_not_followed(tmp_path):
    """Every start removed tb/ whole: someone's own tb/ in a folder with no run of ours was lost, and a tb/ that was a
    link was followed and written into. Now both are refused before anything is written."""
    cfg = CONFIG
    foreign = tmp_path / "foreign"
    (foreign / "tb").mkdir(parents=True)
    (foreign / "tb" / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match=r"holds tb/ but no config.yaml: no run of this program was there"):
        RunDir(foreign).begin(cfg, False, False)
    assert (foreign / "tb" / "notes.txt").read_text() == "mine"
    linked, elsewhere = tmp_path / "linked", tmp_path / "elsewhere"
    linked.mkdir()
    elsewhere.mkdir()
    RunDir(linked).start(cfg)
    (linked / "tb").symlink_to(elsewhere)
    with pytest.raises(ConfigError, match=r"tb is a link: a run writes its event files in a folder of its own"):
        RunDir(linked).begin(cfg, False, False)
    own = tmp_path / "own"
    RunDir(own).start(cfg)
    (own / "tb").mkdir()
    assert RunDir(own).begin(cfg, False, False) is None  # a run's own tb/ beside its config: resumed as before


@pytest.mark.parametrize("name, made, kind", [
    ("metrics.jsonl", "folder", "a folder, where a run keeps its file metrics.jsonl"),
    ("summary.json", "folder", "a folder, where a run keeps its file summary.json"),
    ("checkpoints", "file", "not a folder, where a run keeps its folder checkpoints"),
    ("metrics.jsonl", "link", "a link, where a run keeps its file metrics.jsonl"),
])
def test_a_runs_name_of_the_wrong_kind_is_one_line_and_left_as_it_was(tmp_path, name, made, kind):
    """A metrics.jsonl that was a folder, or a checkpoints that was a file, was a traceback as the run wrote."""
    cfg = CONFIG
    RunDir(tmp_path).start(cfg)
    path = tmp_path / name
    path.unlink(missing_ok=True)
    {"folder": path.mkdir, "file": lambda: path.write_text("mine"),
     "link": lambda: path.symlink_to(tmp_path / "config.yaml")}[made]()
    with pytest.raises(ConfigError) as raised:
        RunDir(tmp_path).begin(cfg, False, False)
    assert str(raised.value) == (f"{path} is {kind}: nothing of it is read or written; move it away or choose "
                                 "another hydra.run.dir")
    assert path.is_symlink() if made == "link" else path.is_dir() == (made == "folder")
