"""retime's overrides for a job restored from results/, which keeps no .hydra/: read from its folder's name and
held to the config it recorded."""

import pytest
from omegaconf import OmegaConf

from echo_experiments.cli.compose import compose_all
from echo_experiments.core.config import short_name
from echo_experiments.workloads.run_check import checked_config
from paper.retime import _job_overrides

OVERRIDES = ["echo.factor=3", "echo=before_batching", "tuning.study=0", "tuning.trial=1", "workload=synthetic"]


def _restored_job(tmp_path, name: str, recorded: list[str]):
    """A job folder as `make restore` leaves it: named ``name``, with the config a run of ``recorded`` wrote."""
    cfg = checked_config(next(iter(compose_all(recorded, multirun=False))))
    job = tmp_path / name
    job.mkdir()
    (job / "config.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True))
    return job


def test_a_restored_job_is_rerun_with_the_overrides_its_name_says(tmp_path):
    job = _restored_job(tmp_path, ",".join(OVERRIDES), OVERRIDES)
    assert _job_overrides(job) == OVERRIDES
    # A run recorded before a key existed still matches on the keys it has.
    text = (job / "config.yaml").read_text()
    (job / "config.yaml").write_text(text.replace("  min_worth: 0.0\n", ""))
    assert "min_worth" in text and _job_overrides(job) == OVERRIDES
    # Hydra's own record of them, where the job has it, is what is taken (held to the config all the same).
    (job / ".hydra").mkdir()
    (job / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in reversed(OVERRIDES)))
    assert _job_overrides(job) == list(reversed(OVERRIDES))


def test_a_folders_file_that_would_choose_the_code_or_hydras_settings_is_refused_before_any_import(tmp_path):
    """A workload.task added to .hydra/overrides.yaml made the timed run import that module before the override
    was refused; hydra.* keys from the same file were passed on. Both are refused from the file alone."""
    job = _restored_job(tmp_path, ",".join(OVERRIDES), OVERRIDES)
    (job / ".hydra").mkdir()
    marker = tmp_path / "imported"
    (tmp_path / "planted.py").write_text(f"open({str(marker)!r}, 'w').write('x')\nclass X: pass\n")
    overrides = job / ".hydra" / "overrides.yaml"
    for added, line in (("workload.task=planted:X", r"compose another config than the job's config.yaml "
                                                    r"\(workload.task\)"),
                        ("hydra.job.chdir=true", r"holds hydra.job.chdir=true: retime passes on a job's config "
                                                 r"overrides, never a hydra key from a file")):
        overrides.write_text("".join(f"- {o}\n" for o in [*OVERRIDES, added]))
        with pytest.raises(ValueError, match=line):
            _job_overrides(job)
    assert not marker.exists()


def test_a_name_that_does_not_compose_its_recorded_config_is_refused(tmp_path):
    named = ["echo.factor=2", *OVERRIDES[1:]]  # the folder says e=2, its run trained at e=3
    with pytest.raises(ValueError, match=r"compose another config than its config.yaml \(echo.factor\)"):
        _job_overrides(_restored_job(tmp_path, ",".join(named), OVERRIDES))
    cut = short_name(",".join([*OVERRIDES, "workload.name=" + "x" * 120]))  # cut short, with a hash
    with pytest.raises(ValueError, match="has no .hydra/overrides.yaml"):
        _job_overrides(_restored_job(tmp_path, cut, OVERRIDES))
