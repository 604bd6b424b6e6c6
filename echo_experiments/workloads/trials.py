"""Quasi-random metaparameter search (Bousquet et al. 2017), the way the paper tuned every condition.

A study is one scrambled low-discrepancy sequence (Halton or Sobol, scipy.stats.qmc) over the search space
the workload declares; trial k of study s is point k of the sequence seeded by (tuning.seed, s). A trial is
an ordinary run whose config has the point's values written into it, so tuning needs nothing from the
launcher: ``-m tuning=study`` sweeps tuning.study and tuning.trial like any other key, and every launcher
(basic, joblib, submitit) runs the trials. Conditions (echo factors, placements) share the same points
within a study, so they are compared on equal metaparameter draws.
"""

import copy
from typing import Any

import numpy as np
from omegaconf import DictConfig, OmegaConf

from echo_experiments.core.schema import ConfigError
from echo_experiments.core.search_space import scale


def unit_point(dimensions: int, study: int, trial: int, seed: int, sampler: str) -> np.ndarray:
    """Point ``trial`` of study ``study``'s scrambled sequence, in [0, 1)^dimensions."""
    from scipy.stats import qmc  # a second to import (all of scipy.stats): only a study's trials pay it

    rng = np.random.default_rng([seed, study])
    engine = (qmc.Halton(dimensions, scramble=True, seed=rng) if sampler == "halton"
              else qmc.Sobol(dimensions, scramble=True, seed=rng))
    if trial:  # scipy's Sobol fast_forward(0) raises OverflowError
        engine.fast_forward(trial)
    return engine.random(1)[0]


def trial_values(space: list[Any], study: int, trial: int, seed: int = 0, sampler: str = "halton") -> dict[str, Any]:
    """The metaparameter values of one trial: {dotted config key: value}."""
    u = unit_point(len(space), study, trial, seed, sampler)
    return {d.key: scale(float(x), float(d.low), float(d.high), d.scale) for d, x in zip(space, u)}


def check_space(space: list[Any], cfg: DictConfig) -> None:
    for i, d in enumerate(space):
        where = f"workload.search_space[{i}]"
        if OmegaConf.select(cfg, d.key, default=KeyError) is KeyError:
            raise ConfigError(f"{where}.key", d.key, "a config key, e.g. optimizer.learning_rate")
        if not d.low < d.high or (d.scale == "log" and d.low <= 0) or (d.scale == "log_one_minus" and d.high >= 1):
            raise ConfigError(f"{where}", f"[{d.low}, {d.high}]",
                              "low < high (and > 0 for log, < 1 for log_one_minus)")


def apply_trial(cfg: DictConfig) -> DictConfig:
    """The config of a tuning trial: a copy with the trial's values and its own training seed.

    Any other config is returned as it is.
    """
    t = cfg.tuning
    if t.study is None and t.trial is None:
        return cfg
    if t.study is None or t.trial is None:
        missing = "tuning.study" if t.study is None else "tuning.trial"
        raise ConfigError(missing, None, "an integer >= 0 (a trial needs both tuning.study and tuning.trial)")
    space = list(cfg.workload.search_space)
    if not space:
        raise ConfigError("workload.search_space", "[]", f"a search space: workload {cfg.workload.name} declares none")
    check_space(space, cfg)
    out = copy.deepcopy(cfg)
    for key, value in trial_values(space, int(t.study), int(t.trial), int(t.seed), t.sampler).items():
        OmegaConf.update(out, key, value, merge=False)
    # Each trial trains from its own seed, so repeated studies are independent repeats; conditions at the same
    # (study, trial) share it, so they are compared on the same initialisation and data order.
    out.seed = int(np.random.SeedSequence([int(cfg.seed), int(t.study), int(t.trial)]).generate_state(1)[0] >> 1)
    return out
