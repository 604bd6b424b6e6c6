"""Small pure functions from the trials table to the report's tables (batch_science's steps-to-result idea).

The protocol (Choi et al. 2019, after Shallue et al. 2018): within a study, the best trial is the one that
reaches the target with the fewest fresh examples; a condition's value is the median over its studies,
with the min and max over studies as error bars. A study that never reaches the target counts as
infinitely many fresh examples (worse than any study that did), never as zero.
"""

import math
from typing import Optional

import numpy as np
import pandas as pd

from echo_experiments.core.machine import was_alone
from echo_experiments.core.rundir import CONDITION as _CONDITION
from echo_experiments.core.rundir import TIMED

# A condition: the run's (core/rundir.py), and whether the autopilot chose the factor (echo_auto) with the most
# examples it may train per fresh one (echo_max_factor: the autopilot's cap, or its bound where a rule moved it;
# a fixed factor's own e) and the rule that moved its cap (echo_cap_rule: fixed where none did), so that
# autopilots of other placements, caps or rules are other conditions, and placement and echo_factor keep their
# meaning.
CONDITION = [*_CONDITION, "echo_auto", "echo_max_factor", "echo_cap_rule"]
# An echoed condition that trained more than this share off e examples per fresh example at its target did
# not echo at its nominal factor: its rows are flagged (``off_factor``), and a comparison of it decides nothing.
FACTOR_TOLERANCE = 0.10
INF = math.inf
# Counts of studies and of trials, named so that neither reads as the other.
COUNTS = ["n_studies", "n_studies_reached", "n_trials", "n_trials_reached", "n_trials_pruned"]
# The seconds table's counts: studies whose best trial was timed alone, and runs whose seconds are no timing.
SPEEDUP_COUNTS = ["n_studies", "n_studies_reached", "n_studies_timed", "n_runs_shared", "n_runs_unmeasured"]


def trial_ids(trials: pd.DataFrame) -> pd.Series:
    """What a run is a run of: its study trial (``trial 3``), or itself when it is in no study. A trial run
    again (``python -m paper.retime`` times a study's best trial alone) is still one trial."""
    return trials["trial"].map(lambda x: None if pd.isna(x) else f"trial {x:g}").fillna(trials["path"])


def study_bests(trials: pd.DataFrame) -> pd.DataFrame:
    """One row per (condition, study): its trial counts and its best trial's fresh examples and seconds.

    Ties on fresh examples go to fewer steps, then fewer seconds, then the earlier trial.
    """
    t = trials.copy()
    reached = t["status"] == "reached_target"
    t["fresh"] = t["fresh_examples_to_target"].where(reached, INF).astype(float)
    t["steps"] = t["steps_to_target"].where(reached, INF).astype(float)
    t["seconds"] = t["seconds_to_target"].where(reached, INF).astype(float)
    t["trial_order"] = t["trial"].fillna(-1)
    t["trial_id"] = trial_ids(t)
    t = t.sort_values(["fresh", "steps", "seconds", "trial_order", "path"], kind="stable")
    t["reached_id"] = t["trial_id"].where(reached)
    t["pruned_id"] = t["trial_id"].where(t["status"] == "pruned")
    groups = t.groupby(CONDITION + ["study_key"], sort=True)
    out = groups.agg(n_trials=("trial_id", "nunique"), n_trials_reached=("reached_id", "nunique"),
                     n_trials_pruned=("pruned_id", "nunique"), fresh=("fresh", "first"),
                     best_path=("path", "first"), best_trial=("trial_id", "first"),
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


def _ratio(numerator: float, denominator: float) -> float:
    """numerator / denominator, where not reached (inf) is worse than anything and two unknowns say nothing."""
    if math.isinf(numerator) and math.isinf(denominator):
        return math.nan
    if math.isinf(denominator):
        return 0.0
    return numerator / denominator


def baseline(rows: pd.DataFrame) -> pd.Series:
    """Which rows are the baseline's: factor 1, no autopilot (whose stage's factor is 1 too)."""
    return (rows["echo_factor"] == 1) & ~rows["echo_auto"].astype(bool)


def _baseline_medians(table: pd.DataFrame) -> dict[tuple, float]:
    base = table[baseline(table)]
    return {(r.workload, r.batch_size): r.median for r in base.itertuples()}


def fresh_examples_to_target(trials: pd.DataFrame) -> pd.DataFrame:
    """Per condition: studies (and those whose best trial reached the target), trials (and those that reached
    it, and those pruned), median/min/max over studies of the best fresh examples to target, and
    fresh_ratio = this median / the baseline's, below 1 when fewer fresh examples than the baseline (inf: never
    reached; baseline: factor 1, same workload and batch size; empty when there is none); the effective echo
    factor (the median over reached trials of examples trained per fresh example at the target) and whether
    it is more than FACTOR_TOLERANCE off the nominal factor (``off_factor``)."""
    table = _summarise(study_bests(trials), "fresh")
    base = _baseline_medians(table)
    table["fresh_ratio"] = [
        _ratio(r.median, base[(r.workload, r.batch_size)]) if (r.workload, r.batch_size) in base else math.nan
        for r in table.itertuples()]
    reached = trials[trials["status"] == "reached_target"]
    factor = reached.groupby(CONDITION)["effective_echo_factor"].median()
    table["effective_echo_factor"] = [factor.get(tuple(r), math.nan) for r in table[CONDITION].itertuples(index=False)]
    # The autopilot has no nominal factor: what it chose is its result, not a confound.
    table["off_factor"] = (((table["effective_echo_factor"] / table["echo_factor"] - 1).abs() > FACTOR_TOLERANCE)
                           & ~table["echo_auto"].astype(bool))
    return table


# How a table shown to a reader names the autopilot's condition: its placement with this suffix (the columns
# keep the placement and echo_auto apart).
AUTOPILOT = "_auto"


def condition_label(placement: str, auto: bool) -> str:
    """A condition's placement as shown: the autopilot's marked (``after_batching_auto``)."""
    return placement + AUTOPILOT if auto else placement


def shared_runs(trials: pd.DataFrame) -> pd.DataFrame:
    """The runs that shared the machine (other_cores above SHARED_CORES), with how much."""
    other = trials["other_cores"].astype(float)  # NaN: a run made before it was recorded
    shared = other.notna() & ~alone(trials)
    return trials.loc[shared, ["path", *CONDITION]].assign(other_cores=other[shared].to_numpy())


def alone(trials: pd.DataFrame) -> pd.Series:
    """was_alone for each run."""
    return trials["other_cores"].map(was_alone).astype(bool)


def speedups(trials: pd.DataFrame, include_shared: bool = False) -> pd.DataFrame:
    """Per condition: median/min/max over studies of the seconds to target of each study's best trial (the
    trial fresh_examples_to_target counts, the one ``python -m paper.retime`` times again), taken
    from a run of that trial that had the machine to itself; the speedup over the baseline as per-study pairs
    (each study's baseline seconds over the same study's seconds of this condition: median, min and max over
    the studies timed in both); beside it the ideal where R is known: time per fresh
    batch is max(upstream, e x downstream), so echoing can save at most min(e, R), and nothing when R < 1;
    efficiency = speedup / ideal (the paper: 3.25 of 5 at e=5, 0.65). pace: seconds per fresh example over the
    baseline's (seconds_per_fresh), over every run that had the machine to itself.

    A study whose best trial never reached the target counts as not reached (inf), timed or not. A study whose
    best trial reached it but has no run alone is untimed: left out of the median and counted as
    n_studies_reached - n_studies_timed; another trial of that study that ran alone never stands in for it,
    since it is not the study's best. n_runs_shared and n_runs_unmeasured count the condition's runs whose
    seconds are not timings (they shared the machine; they recorded nothing of it)."""
    t = trials.assign(trial_id=trial_ids(trials))
    bests = study_seconds(trials, include_shared)
    n_shared = shared_runs(t).groupby(CONDITION).size()
    n_unmeasured = t[t["other_cores"].isna()].groupby(CONDITION).size()
    rows = []
    for key, g in bests.groupby(CONDITION, sort=True):
        values = g["seconds"].dropna().to_numpy(dtype=float)  # untimed studies left out; not reached is inf
        spread = (np.median(values), values.min(), values.max()) if len(values) else (math.nan,) * 3
        rows.append({**dict(zip(CONDITION, key)), "n_studies": len(g), "n_studies_reached": int(g["reached"].sum()),
                     "n_studies_timed": int(np.isfinite(values).sum()), "n_runs_shared": int(n_shared.get(key, 0)),
                     "n_runs_unmeasured": int(n_unmeasured.get(key, 0)),
                     **dict(zip(["median", "min", "max"], map(float, spread)))})
    table = pd.DataFrame(rows, columns=CONDITION + SPEEDUP_COUNTS + ["median", "min", "max"])
    pairs = study_speedups(bests)
    for column, summary in (("speedup", np.median), ("speedup_min", np.min), ("speedup_max", np.max)):
        table[column] = [float(summary(pairs[key])) if pairs.get(key) else math.nan
                         for key in table[CONDITION].itertuples(index=False, name=None)]
    on_store = on_timing_store(t)
    timed = on_store[alone(on_store)]
    pace = {key: seconds_per_fresh(g) for key, g in timed.groupby(CONDITION)}
    base = {key: seconds_per_fresh(g) for key, g in timed[baseline(timed)].groupby(["workload", "batch_size"])}
    table["pace"] = [pace.get(tuple(getattr(r, c) for c in CONDITION), math.nan)
                     / base.get((r.workload, r.batch_size), math.nan) for r in table.itertuples()]
    ratio = _upstream_ratio(timed)
    table["R"] = [ratio.get((r.workload, r.batch_size), math.nan) for r in table.itertuples()]
    table["ideal_speedup"] = np.maximum(1.0, np.minimum(table["echo_max_factor"], table["R"])).where(table["R"].notna())
    table["efficiency"] = table["speedup"] / table["ideal_speedup"]
    table["store"] = timing_store(trials) or "unknown"
    return table.rename(columns={"median": "median_seconds", "min": "min_seconds", "max": "max_seconds"})


def seconds_per_fresh(runs: pd.DataFrame) -> float:
    """Seconds of training per fresh example, the median over these runs (reached or not: every run reads its
    fresh examples at the pace of the input and of its own steps, and evaluates at the same fresh counts); NaN
    where there are none. Over the baseline's it is what echoing cost per fresh example (``pace``): about 1 while
    the input bounds the run and a copy's step runs beside it, above 1 where the steps slow the input or bound
    the run. Seconds to target are about fresh examples to target times this pace, so a speedup below its ideal
    comes from the one or the other."""
    per_fresh = runs["wall_time_s"].astype(float) / runs["fresh_examples"].astype(float)
    return float(per_fresh.median()) if len(per_fresh) else math.nan


def study_speedups(bests: pd.DataFrame) -> dict[tuple, list[float]]:
    """Per condition, each study's speedup: the baseline's seconds in that study over the condition's (the same
    study's draws), for the studies timed in both."""
    base = bests[baseline(bests)].set_index(["workload", "batch_size", "study_key"])["seconds"]
    pairs: dict[tuple, list[float]] = {}
    for r in bests.itertuples():
        reference = base.get((r.workload, r.batch_size, r.study_key), math.nan)
        if not (math.isnan(reference) or math.isnan(r.seconds)):
            pairs.setdefault(tuple(getattr(r, c) for c in CONDITION), []).append(_ratio(reference, r.seconds))
    return {k: [v for v in values if not math.isnan(v)] for k, values in pairs.items()}


def _cpus(runs: pd.DataFrame) -> pd.Series:
    """Each run's CPU model; runs made before the machine was recorded name none and count as one more model
    (one machine of their own), so that they are never pooled with named ones unnoticed."""
    return runs["cpu"].fillna("unrecorded") if "cpu" in runs else pd.Series("unrecorded", index=runs.index)


def machines(trials: pd.DataFrame) -> pd.DataFrame:
    """The studies whose runs, of any condition, come from more than one CPU model. A study is the unit a machine
    owns: its conditions share their draws, so every pair and every study-best comparison stays on one model."""
    cpus = trials.assign(cpu=_cpus(trials)).groupby("study_key")["cpu"].nunique()
    mixed = cpus[cpus > 1]
    return mixed.rename("n_cpu_models").reset_index()


def study_machines(trials: pd.DataFrame) -> pd.DataFrame:
    """Each CPU model with the studies it made, when the studies come from more than one (one row each)."""
    cpus = trials.assign(cpu=_cpus(trials))
    if cpus["cpu"].nunique() < 2:
        return pd.DataFrame(columns=["cpu", "studies"])
    named = cpus.groupby("cpu")["study_key"].agg(lambda keys: ", ".join(sorted(set(keys))))
    return named.rename("studies").reset_index()


def timing_store(trials: pd.DataFrame) -> Optional[str]:
    """The store a folder's seconds are read on: its timed reruns' (retime --store), else the one most of its runs
    that had the machine to themselves read through (None: no store known)."""
    if "store" not in trials or trials.empty:
        return None
    reruns = trials[trials["path"].astype(str).str.startswith(f"{TIMED}/")] if "path" in trials else trials.iloc[:0]
    pool = reruns if len(reruns) else trials[alone(trials)]
    pool = pool if len(pool) else trials
    return str(pool["store"].value_counts().index[0])


def on_timing_store(trials: pd.DataFrame) -> pd.DataFrame:
    """The runs that read through the folder's timing_store: a timing belongs to its store, and seconds, paces and
    R measured on another are never set beside it."""
    store = timing_store(trials)
    return trials if store is None else trials[trials["store"] == store]


def study_seconds(trials: pd.DataFrame, include_shared: bool = False) -> pd.DataFrame:
    """study_bests with each study's ``seconds``: its best trial's seconds to target from a run of it that had
    the machine to itself, or any run of it with ``include_shared`` (NaN: no such run, untimed; inf: the study
    never reached the target), on the folder's timing_store only. A run counts only where it trained as the best
    trial did, to the target at the same fresh examples: a timed rerun that did not (another stream) timed another
    training."""
    t = on_timing_store(trials.assign(trial_id=trial_ids(trials)))
    timed = t[(alone(t) | include_shared) & (t["status"] == "reached_target")]
    by = timed.groupby(CONDITION + ["study_key", "trial_id", "fresh_examples_to_target"])
    seconds = by["seconds_to_target"].median()
    bests = study_bests(trials)
    keys = list(bests[CONDITION + ["study_key", "best_trial", "fresh"]].itertuples(index=False, name=None))
    bests["seconds"] = [seconds.get(key, math.nan) if reached else INF for key, reached in zip(keys, bests["reached"])]
    if "seconds_per_evaluation" in t:  # the seconds from the evaluation before the target's to it (collect.py)
        span = by["seconds_per_evaluation"].median()
        bests["seconds_per_evaluation"] = [span.get(key, math.nan) for key in keys]
    return bests


def input_ratios(trials: pd.DataFrame) -> pd.Series:
    """Each run's R: upstream seconds per batch / downstream seconds per step, as the run profiled them before it
    trained (NaN where it did not)."""
    return trials["upstream_s_per_batch"].astype(float) / trials["downstream_s_per_step"].astype(float)


def _upstream_ratio(trials: pd.DataFrame) -> dict[tuple, float]:
    """R, the median over the baseline's runs."""
    if "upstream_s_per_batch" not in trials or "downstream_s_per_step" not in trials:
        return {}
    t = trials[baseline(trials)].dropna(subset=["upstream_s_per_batch", "downstream_s_per_step"])
    return {k: float(v) for k, v in input_ratios(t).groupby([t["workload"], t["batch_size"]]).median().items()}


def _metric_score(trials: pd.DataFrame) -> pd.Series:
    """Each trial's best value of its target metric, signed so that higher is better."""
    return np.where(trials["target_mode"] == "max", 1.0, -1.0) * trials["best_metric"].astype(float)


def final_performance(trials: pd.DataFrame) -> pd.DataFrame:
    """Per condition: the best value of the target metric any trial reached (the paper's fixed-budget
    comparison, §4.6), per study then median/min/max over studies."""
    t = trials.assign(score=_metric_score(trials))
    t["trial_id"] = trial_ids(t)
    bests = (t.groupby(CONDITION + ["study_key"], sort=True)
             .agg(score=("score", "max"), n_trials=("trial_id", "nunique"), metric=("target_metric", "first"),
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


# docs/protocol.md: a condition's value is a median over at least this many studies.
MIN_STUDIES = 3


def unfinished(trials: pd.DataFrame) -> pd.DataFrame:
    """The conditions whose numbers are not yet a result under the protocol, and why: fewer than MIN_STUDIES
    studies, fewer than their sweep plans (tuning.studies: a verdict on part of a sweep could be undone by the
    studies to come), or studies with fewer complete trials than their search draws (tuning.trials; a sweep
    that is still running, or was stopped). A run outside any study is a study of one trial."""
    columns = CONDITION + ["n_studies", "n_studies_complete", "reason"]
    if trials.empty:
        return pd.DataFrame(columns=columns)
    bests = study_bests(trials)
    planned = trials.groupby(CONDITION + ["study_key"])["study_trials"].max().rename("planned").reset_index()
    bests = bests.merge(planned, on=CONDITION + ["study_key"])
    bests["complete"] = ~(bests["n_trials"] < bests["planned"])  # NaN planned: the config does not say
    planned_studies = trials.groupby(CONDITION)["planned_studies"].max()
    rows = []
    for key, g in bests.groupby(CONDITION, sort=True):
        n, complete = len(g), int(g["complete"].sum())
        reasons = []
        plan = planned_studies.get(key, math.nan)  # the larger of the two counts is the one still to reach
        if n < plan and plan > MIN_STUDIES:
            reasons.append(f"{n} of the {plan:.0f} studies its sweep plans")
        elif n < MIN_STUDIES:
            reasons.append(f"{n} of the {MIN_STUDIES} studies the protocol asks for")
        missing = g[~g["complete"]]
        reasons += [f"study {s} has {t} of its {p:.0f} trials" for s, t, p in
                    zip(missing["study_key"].str.rsplit(":", n=1).str[-1], missing["n_trials"], missing["planned"])]
        if reasons:
            rows.append({**dict(zip(CONDITION, key)), "n_studies": n, "n_studies_complete": complete,
                         "reason": "; ".join(reasons)})
    return pd.DataFrame(rows, columns=columns)


# A study's best trial whose value lies this close to an end of its range (on the range's scale) sits on a
# bound: the search space should be wider there (docs/protocol.md).
BOUND_MARGIN = 0.05


def search_bounds(trials: pd.DataFrame, search: pd.DataFrame) -> pd.DataFrame:
    """Per study, the tuned values of its best trials and where each lies in its range (``position``: 0 = low,
    1 = high), and whether it sits on a bound (within BOUND_MARGIN of an end). ``best`` says which best: the
    trial with the fewest fresh examples to target (where one reached it), and the trial with the best metric
    (the fixed-budget comparison's, C7)."""
    columns = CONDITION + ["study_key", "best", "key", "value", "low", "high", "scale", "position", "at_bound"]
    if trials.empty or search.empty:
        return pd.DataFrame(columns=columns)
    bests = study_bests(trials)
    to_target = bests[bests["reached"]][CONDITION + ["study_key", "best_path"]].assign(best=FEWEST_FRESH)
    rows = pd.concat([to_target, _best_metric_trials(trials).assign(best=BEST_METRIC)], ignore_index=True).merge(
        search, left_on="best_path", right_on="path")
    rows["at_bound"] = (rows["position"] < BOUND_MARGIN) | (rows["position"] > 1 - BOUND_MARGIN)
    return rows[columns]


FEWEST_FRESH, BEST_METRIC = "fewest fresh examples to target", "best metric"


def _best_metric_trials(trials: pd.DataFrame) -> pd.DataFrame:
    """Per condition and study, the trial whose best value of the target metric is best (ties: the first path)."""
    t = trials.assign(score=_metric_score(trials))
    t = t[np.isfinite(t["score"])].sort_values(["score", "path"], ascending=[False, True], kind="stable")
    best = t.groupby(CONDITION + ["study_key"], sort=True).first().reset_index()
    return best[CONDITION + ["study_key", "path"]].rename(columns={"path": "best_path"})
