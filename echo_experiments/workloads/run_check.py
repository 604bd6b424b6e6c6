"""The front door of a run: the one place a run's config is checked, and the last place it is read.

:func:`check_run` validates the config (each key's own check, what the task declares, the rules between keys:
registry.validate), applies a tuning trial's draw and validates the result again, and returns the typed
:class:`RunSpec` that everything below takes: the trainer, the stream, the store and the run directory. The
command line, ``compare``, ``profile`` and the benchmark enter the library through it.
"""

from omegaconf import DictConfig

from echo_experiments.core.specs import RunSpec
from echo_experiments.workloads.registry import validate
from echo_experiments.workloads.trials import apply_trial


def checked_config(cfg: DictConfig) -> DictConfig:
    """The config a run trains with: validated, with a tuning trial's values applied (and validated). Raises
    ConfigError naming the first value that is not allowed."""
    validate(cfg)
    trial_cfg = apply_trial(cfg)
    if trial_cfg is not cfg:
        validate(trial_cfg)
    return trial_cfg


def check_run(cfg: DictConfig) -> RunSpec:
    """The run a config asks for, checked: its spec. Raises ConfigError for a bad value."""
    return RunSpec.from_config(checked_config(cfg))
