"""Small pure functions from the trials table to the report's tables (batch_science's steps-to-result idea).

The protocol (Choi et al. 2019, after Shallue et al. 2018): within a study, the best trial is the one that
reaches the target with the fewest fresh examples; a condition's value is the median over its studies,
with the min and max over studies as error bars. A study that never reaches the target counts as
infinitely many fresh examples (worse than any study that did), never as zero.
"""

import math

import numpy as np
import pandas as pd

from echo_experiments.runs import CONDITION as _CONDITION

CONDITION = list(_CONDITION)
INF = math.inf
# Counts of studies and of trials, named so that neither reads as the other.
COUNTS = ["n_studies", "n_studies_reached", "n_trials", "n_trials_reached", "n_trials_pruned"]


def study_bests(trials: pd.DataFrame) -> pd.DataFrame:
    """One row per (condition, study): its trial count and its best trial's fresh examples and seconds.

    Ties on fresh examples go to fewer steps, then fewer seconds, then the earlier trial.
    """
    t = trials.copy()
    reached = t["status"] == "reached_target"
    t["fresh"] = t["fresh_examples_to_target"].where(reached, INF).astype(float)
    t["steps"] = t["steps_to_target"].where(reached, INF).astype(float)
    t["seconds"] = t["seconds_to_target"].where(reached, INF).astype(float)
    t["trial_order"] = t["trial"].fillna(-1)
    t = t.sort_values(["fresh", "steps", "seconds", "trial_order", "path"], kind="stable")
    t["is_reached"], t["is_pruned"] = reached, t["status"] == "pruned"
    groups = t.groupby(CONDITION + ["study_key"], sort=True)
    out = groups.agg(n_trials=("path", "size"), n_trials_reached=("is_reached", "sum"),
                     n_trials_pruned=("is_pruned", "sum"), fresh=("fresh", "first"), best_path=("path", "first"),
                     seconds=("seconds", "min")).reset_index()
    out["reached"] = np.isfinite(out["fresh"])
    return out


def _summarise(bests: pd.DataFrame, column: str) -> pd.DataFrame:
    rows = []
    for key, g in bests.groupby(CONDITION, sort=True):
        values = g[column].to_numpy(dtype=float)
        rows.append({**dict(zip(CONDITION, key)), "n_studies": len(g),
                     "n_studies_reached": int(np.isfinite(values).sum()), "n_trials": int(g["n_trials"].sum()),
                     "n_trials_reached": int(g["n_trials_reached"].sum()),
                     "n_trials_pruned": int(g["n_trials_pruned"].sum()), "median": float(np.median(values)),
                     "min": float(values.min()), "max": float(values.max())})
    return pd.DataFrame(rows, columns=CONDITION + COUNTS + ["median", "min", "max"])


def _ratio(baseline: float, value: float) -> float:
    """baseline / value, where not reached (inf) is worse than anything and two unknowns say nothing."""
    if math.isinf(baseline) and math.isinf(value):
        return math.nan
    if math.isinf(value):
        return 0.0
    return baseline / value


def _baseline_medians(table: pd.DataFrame) -> dict[tuple, float]:
    base = table[table["echo_factor"] == 1]
    return {(r.workload, r.batch_size): r.median for r in base.itertuples()}


def fresh_examples_to_target(trials: pd.DataFrame) -> pd.DataFrame:
    """Per condition: studies (and those whose best trial reached the target), trials (and those that reached
    it, and those pruned), median/min/max over studies of the best fresh examples to target, and
    ratio_to_baseline = baseline median / this median (baseline: factor 1, same workload and batch size;
    empty when there is none)."""
    table = _summarise(study_bests(trials), "fresh")
    base = _baseline_medians(table)
    table["ratio_to_baseline"] = [
        _ratio(base[(r.workload, r.batch_size)], r.median) if (r.workload, r.batch_size) in base else math.nan
        for r in table.itertuples()]
    return table


def speedups(trials: pd.DataFrame) -> pd.DataFrame:
    """Per condition: median/min/max over studies of the fastest trial's training seconds to target, the
    speedup over the baseline's median, and beside it the ideal where R is known: time per fresh batch is
    max(upstream, e x downstream), so echoing can save at most min(e, R), and nothing when R < 1."""
    table = _summarise(study_bests(trials), "seconds")
    base = _baseline_medians(table)
    table["speedup"] = [
        _ratio(base[(r.workload, r.batch_size)], r.median) if (r.workload, r.batch_size) in base else math.nan
        for r in table.itertuples()]
    ratio = _upstream_ratio(trials)
    table["R"] = [ratio.get((r.workload, r.batch_size), math.nan) for r in table.itertuples()]
    table["ideal_speedup"] = np.maximum(1.0, np.minimum(table["echo_factor"], table["R"])).where(table["R"].notna())
    return table.rename(columns={"median": "median_seconds", "min": "min_seconds", "max": "max_seconds"})


def _upstream_ratio(trials: pd.DataFrame) -> dict[tuple, float]:
    """R = upstream seconds per batch / downstream seconds per step, the median over the baseline's runs."""
    if "upstream_s_per_batch" not in trials or "downstream_s_per_step" not in trials:
        return {}
    t = trials[(trials["echo_factor"] == 1)].dropna(subset=["upstream_s_per_batch", "downstream_s_per_step"])
    r = t["upstream_s_per_batch"].astype(float) / t["downstream_s_per_step"].astype(float)
    return {k: float(v) for k, v in r.groupby([t["workload"], t["batch_size"]]).median().items()}


def final_performance(trials: pd.DataFrame) -> pd.DataFrame:
    """Per condition: the best value of the target metric any trial reached (the paper's fixed-budget
    comparison, §4.6), per study then median/min/max over studies."""
    t = trials.copy()
    sign = np.where(t["target_mode"] == "max", 1.0, -1.0)
    t["score"] = sign * t["best_metric"].astype(float)
    bests = (t.groupby(CONDITION + ["study_key"], sort=True)
             .agg(score=("score", "max"), n_trials=("path", "size"), metric=("target_metric", "first"),
                  mode=("target_mode", "first")).reset_index())
    rows = []
    for key, g in bests.groupby(CONDITION, sort=True):
        values = g["score"].to_numpy(dtype=float) * (1 if g["mode"].iloc[0] == "max" else -1)
        rows.append({**dict(zip(CONDITION, key)), "metric": g["metric"].iloc[0], "n_studies": len(g),
                     "n_trials": int(g["n_trials"].sum()), "median": float(np.median(values)),
                     "min": float(np.min(values)), "max": float(np.max(values))})
    return pd.DataFrame(rows)


def best_trials(trials: pd.DataFrame) -> pd.DataFrame:
    """Per condition, the trial whose curve is drawn: the best trial of the condition's best study."""
    bests = study_bests(trials).sort_values(["fresh", "seconds", "best_path"], kind="stable")
    return bests.groupby(CONDITION, sort=True).first().reset_index()[CONDITION + ["best_path"]]


# A study's best trial whose value lies this close to an end of its range (on the range's scale) sits on a
# bound: the search space should be wider there (PROTOCOL.md).
BOUND_MARGIN = 0.05


def search_bounds(trials: pd.DataFrame, search: pd.DataFrame) -> pd.DataFrame:
    """Per study whose best trial reached the target: that trial's tuned values, where each lies in its range
    (``position``: 0 = low, 1 = high) and whether it sits on a bound (within BOUND_MARGIN of an end)."""
    columns = CONDITION + ["study_key", "key", "value", "low", "high", "scale", "position", "at_bound"]
    if trials.empty or search.empty:
        return pd.DataFrame(columns=columns)
    bests = study_bests(trials)
    rows = bests[bests["reached"]][CONDITION + ["study_key", "best_path"]].merge(
        search, left_on="best_path", right_on="path")
    rows["at_bound"] = (rows["position"] < BOUND_MARGIN) | (rows["position"] > 1 - BOUND_MARGIN)
    return rows[columns]
