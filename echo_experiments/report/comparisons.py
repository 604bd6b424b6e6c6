"""A results folder's paired comparisons (every condition against its baseline, draw by draw) and its
expected-best-of-k curves: the per-folder view of the statistics the claims rest on (stats.py)."""

import math

import numpy as np
import pandas as pd

from echo_experiments.core.rundir import TIMED
from echo_experiments.report import stats
from echo_experiments.report.tables import CONDITION, baseline, unfinished

PAIRED = ["n_draws", "n_neither", "n_fewer", "n_more", "n_same", "n_open", "share_fewer", "ratio_low", "ratio_high",
          "ci_low", "ci_high", "reading"]
NOT_YET, FEWER, MORE, CANNOT_TELL = "not yet a result", "fewer", "more", "cannot tell"


def _tuning(trials: pd.DataFrame) -> pd.DataFrame:
    """The tuning trials: a trial timed again (retime's timed/ runs) counts once."""
    return trials[~trials["path"].str.startswith(f"{TIMED}/")]


def paired_table(trials: pd.DataFrame) -> pd.DataFrame:
    """Per condition with a baseline (factor 1, same workload and batch size): its fresh examples to target over
    the baseline's on the same draws, censoring-aware (stats.paired_effect)."""
    t = stats.outcome_bounds(_tuning(trials))
    partial = {tuple(k) for k in unfinished(_tuning(trials))[CONDITION].itertuples(index=False, name=None)}
    rows = []
    for key, g in t.groupby(CONDITION, sort=True):
        condition = dict(zip(CONDITION, key))
        if baseline(g).iloc[0]:  # the baseline itself
            continue
        base = t[baseline(t) & (t["workload"] == condition["workload"]) & (t["batch_size"] == condition["batch_size"])]
        if base.empty:
            continue
        effect = stats.paired_effect(stats.Pairs.of(g, base))
        finished = key not in partial and not any(k in partial for k in base.groupby(CONDITION).groups)
        rows.append({**condition, **effect, "reading": reading(effect, finished)})
    return pd.DataFrame(rows, columns=CONDITION + PAIRED)


def reading(effect: dict, finished: bool) -> str:
    """Where a condition's 90% interval lies beside its baseline: below 1, fewer fresh examples to target; above
    1, more; across it (or no draw to place), cannot tell. A condition (or baseline) with fewer studies than its
    sweep plans, or than the protocol's 3, is not yet a result. The paper's claims ask more (two evaluations,
    resolution: docs/protocol.md); this is the reading a user's own sweep gets."""
    if not finished:
        return NOT_YET
    if effect["ci_high"] < 1:
        return FEWER
    return MORE if effect["ci_low"] > 1 else CANNOT_TELL


def best_of_k_table(trials: pd.DataFrame) -> pd.DataFrame:
    """Per condition and k = 1 .. the trials a study draws: the median best fresh examples to target among k
    trials (stats.best_of_k; a trial that did not reach the target, pruned ones too, counts as never)."""
    t = _tuning(trials)
    planned = t["study_trials"].max()
    ks = list(range(1, int(planned) + 1)) if not math.isnan(planned) else [1]
    frames = []
    for key, g in t.groupby(CONDITION, sort=True):
        outcomes = g["fresh_examples_to_target"].where(g["status"] == "reached_target").astype(float).fillna(np.inf)
        curve = stats.best_of_k(outcomes.to_numpy(), ks)
        frames.append(curve.assign(**dict(zip(CONDITION, key)), n_trials=len(g)))
    columns = CONDITION + ["n_trials", "k", "median_best", "ci_low", "ci_high"]
    return pd.concat(frames)[columns] if frames else pd.DataFrame(columns=columns)
