"""The front door of a run: a config is checked once and becomes the typed spec every layer below takes."""

import dataclasses

import pytest
import yaml
from conftest import compose_config
from omegaconf import DictConfig

from echo_experiments.core.schema import ConfigError
from echo_experiments.core.specs import RunSpec, StorageSpec
from echo_experiments.workloads.run_check import check_run
from echo_experiments.workloads.trials import trial_values


def _values(spec) -> list:
    """Every value a spec holds, nested specs opened, the workload's own section and the resolved config left out."""
    out = []
    for f in dataclasses.fields(spec):
        value = getattr(spec, f.name)
        if f.name not in ("workload", "config"):
            out += _values(value) if dataclasses.is_dataclass(value) else [value]
    return out


def test_a_trials_spec_carries_its_draw_its_seed_and_its_place_in_the_study():
    spec = check_run(compose_config("workload=synthetic", "tuning.study=1", "tuning.trial=2", "tuning.seed=3"))
    drawn = trial_values(list(compose_config("workload=synthetic").workload.search_space), 1, 2, 3)
    assert spec.schedule.learning_rate == pytest.approx(drawn["optimizer.learning_rate"])
    assert spec.optimizer.momentum == pytest.approx(drawn["optimizer.momentum"])
    assert (spec.trial.study, spec.trial.trial, spec.trial.tuning_seed) == (1, 2, 3)
    assert spec.trial.searched == pytest.approx(drawn)
    # The resolved config the run directory keeps is the trial's, its seed the trial's own.
    assert spec.config["optimizer"]["learning_rate"] == pytest.approx(drawn["optimizer.learning_rate"])
    assert spec.config["seed"] == spec.seed != 0


def test_below_the_door_the_spec_holds_plain_values_and_no_config_but_the_workloads_own_section():
    spec = check_run(compose_config("workload=synthetic", "storage=emulated", "storage.latency_ms=4",
                                    "storage.latency_schedule=[[10,1],[20,3.5]]", "trainer.restart=true",
                                    "trainer.compilation_cache_dir=/tmp/cache"))
    assert spec.storage == StorageSpec("emulated", 4.0, None, 1, "record", None, ((10, 1.0), (20, 3.5)))
    assert spec.trainer.restart and spec.trainer.compilation_cache_dir == "/tmp/cache"
    assert spec.trial.study is None and spec.trial.tuning_seed is None
    assert not any(isinstance(v, DictConfig) for v in _values(spec))
    assert isinstance(spec.config, dict) and yaml.safe_load(yaml.safe_dump(spec.config)) == spec.config
    assert isinstance(spec, RunSpec) and spec.workload.name == "synthetic"


@pytest.mark.parametrize("override,key", [("echo.factor=0.5", "echo.factor"),
                                          ("storage.latency_schedule=[[10,1]]", "storage.latency_schedule"),
                                          ("echo.min_worth=0.5", "echo.min_worth")])
def test_a_bad_value_is_refused_at_the_door_naming_its_key(override, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        check_run(compose_config("workload=synthetic", override))


def test_a_value_a_trials_draw_makes_bad_is_refused_after_the_draw():
    """The draw is checked too: a search range that reaches past what a key allows is refused by that key."""
    cfg = compose_config("workload=synthetic", "tuning.study=0", "tuning.trial=0",
                         "workload.search_space=[{key: optimizer.momentum, low: 1.5, high: 2.0, scale: linear}]")
    with pytest.raises(ConfigError, match=r"optimizer\.momentum"):
        check_run(cfg)
