"""The numbers behind each comparison of a claim (claims.py), from a results folder's trials table.

Every number comes with what could undo it: the draws it rests on, whether the conditions are finished
results, whether an echoed condition really echoed at its nominal factor, whether its runs came from one CPU
model, and how large the effect is in evaluations.
"""

import math
from typing import Optional

import numpy as np
import pandas as pd

from echo_experiments.report import stats, tables
from echo_experiments.report.tables import FACTOR_TOLERANCE
from echo_experiments.report.verdicts.claims import NO_LOSS_TOLERANCE, Comparison, Condition


def select(trials: pd.DataFrame, condition: Condition) -> pd.DataFrame:
    """The tuning trials of one condition (timed reruns left out: a trial counts once)."""
    keep = trials["placement"] == condition.table_placement
    if condition.echo_factor is not None:
        keep &= trials["echo_factor"] == condition.echo_factor
    if condition.batch_size is not None:
        keep &= trials["batch_size"] == condition.batch_size
    if condition.shuffle_buffer is not None and condition.placement != "none":
        keep &= trials["shuffle_buffer"] == condition.shuffle_buffer
    return trials[keep & ~trials["path"].str.startswith("timed/")]


def flags(trials: pd.DataFrame, chosen: list[pd.DataFrame], conditions: list[Condition]) -> dict:
    """What undoes a comparison: unfinished conditions, echoed conditions off their factor, a study whose runs
    come from several CPU models (its pairs would compare machines as well as conditions)."""
    partial = tables.unfinished(trials)
    reasons, off = [], []
    for rows, condition in zip(chosen, conditions):
        if rows.empty:
            reasons.append(f"{condition}: no runs")
            continue
        key = rows.iloc[0]
        match = partial[(partial["placement"] == key.placement) & (partial["echo_factor"] == key.echo_factor)
                        & (partial["batch_size"] == key.batch_size) & (partial["shuffle_buffer"] == key.shuffle_buffer)]
        reasons += [f"{condition}: {r}" for r in match["reason"]]
        factor, nominal = _effective_factor(rows), key.echo_factor != 1 and tables.has_nominal_factor(key.placement)
        if nominal and abs(factor / key.echo_factor - 1) > FACTOR_TOLERANCE:
            off.append(f"{condition} trained {factor:.2f} examples per fresh example at its target, not "
                       f"{key.echo_factor:g}")
    present = [rows for rows in chosen if not rows.empty]
    mixed = tables.machines(pd.concat(present)) if present else pd.DataFrame()
    machines = [f"{r.study_key}: {r.n_cpu_models}" for r in mixed.itertuples()]
    return {"unfinished": "; ".join(reasons), "off_factor": "; ".join(off), "machines": "; ".join(machines)}


def trained_per_fresh(rows: pd.DataFrame) -> pd.Series:
    """Examples trained per fresh example at the target (collect's effective_echo_factor), for each trial that
    reached it."""
    return rows.loc[rows["status"] == "reached_target", "effective_echo_factor"].astype(float)


def _effective_factor(rows: pd.DataFrame) -> float:
    """The median over reached trials of examples trained per fresh example at the target."""
    factors = trained_per_fresh(rows)
    return float(np.median(factors)) if len(factors) else math.nan


def per_study_ratios(a: pd.Series, b: pd.Series, undefined: float) -> pd.Series:
    """a over b (by study) for the studies both have, by stats.divide's rules (``undefined``: inf/inf, 0/0)."""
    common = a.index.intersection(b.index)
    return pd.Series(stats.divide(a[common].to_numpy(), b[common].to_numpy(), undefined), index=common)


def _study_best_ratios(a: pd.DataFrame, b: pd.DataFrame) -> pd.Series:
    """Per study, a's best fresh examples to target over b's (inf: not reached; neither reached: a tie, 1)."""
    best = [rows["fresh_examples_to_target"].where(rows["status"] == "reached_target").astype(float)
            .fillna(math.inf).groupby(rows["study_key"]).min() for rows in (a, b)]
    return per_study_ratios(*best, undefined=1.0)


def _study_best(chosen: list[Optional[pd.DataFrame]], interaction: bool) -> tuple[float, float, float, int]:
    """The study-best ratio (a over b; an interaction's a/b over c/d, per study) as median, min, max, studies."""
    ratios = _study_best_ratios(chosen[0], chosen[1])
    if interaction:
        ratios = per_study_ratios(ratios, _study_best_ratios(chosen[2], chosen[3]), undefined=math.nan)
    ratios = ratios.dropna()
    if ratios.empty:
        return math.nan, math.nan, math.nan, 0
    return float(ratios.median()), float(ratios.min()), float(ratios.max()), len(ratios)


def fewer(trials: pd.DataFrame, comparison: Comparison) -> dict:
    conditions = [comparison.a, comparison.b, comparison.c, comparison.d]
    chosen = [stats.outcome_bounds(select(trials, c)) if c is not None else None for c in conditions]
    pairs = stats.Pairs.of(chosen[0], chosen[1])
    if comparison.kind == "interaction":
        pairs = pairs.over(stats.Pairs.of(chosen[2], chosen[3]))
    row = stats.paired_effect(pairs)
    median, low, high, studies = _study_best(chosen, comparison.kind == "interaction")
    reference = chosen[1]["fresh_examples_to_target"].where(chosen[1]["status"] == "reached_target").median()
    cadence = _cadence(trials)
    row.update({"low": row.pop("ratio_low"), "high": row.pop("ratio_high"), "n_studies": studies,
                "study_best_median": median, "study_best_min": low, "study_best_max": high})
    # The resolution (evaluations in the reference's count) and the effect's size in evaluations (its bound
    # nearest 1, the side against the claim).
    row["resolution"] = reference / cadence if cadence else math.nan
    row["evaluations"] = min(abs(1 - row["low"]), abs(1 - row["high"])) * row["resolution"]
    present = [c for c in chosen if c is not None]
    return {**row, **flags(trials, present, [c for c in conditions if c is not None])}


def _cadence(trials: pd.DataFrame) -> Optional[float]:
    cadence = trials["eval_every_fresh_examples"].dropna() if "eval_every_fresh_examples" in trials else []
    return float(cadence.max()) if len(cadence) else None


def faster(trials: pd.DataFrame, comparison: Comparison) -> dict:
    """Per study, the reference's best trial's seconds over the condition's, each timed alone."""
    seconds = tables.study_seconds(trials)
    a, b = (per_study_seconds(seconds, c) for c in (comparison.a, comparison.b))
    common = a.index.intersection(b.index)
    values = np.array([b[s] / a[s] for s in common if np.isfinite(a[s]) and np.isfinite(b[s])])
    ci = _bootstrap_median(values)
    return {"low": float(np.median(values)) if len(values) else math.nan, "ci_low": ci[0], "ci_high": ci[1],
            "n_draws": len(values), "n_studies": len(values),
            **flags(trials, [select(trials, comparison.a), select(trials, comparison.b)],
                     [comparison.a, comparison.b])}


def per_study_seconds(seconds: pd.DataFrame, condition: Condition) -> pd.Series:
    """One condition's seconds by study, from tables.study_seconds."""
    keep = seconds["placement"] == condition.table_placement
    if condition.echo_factor is not None:
        keep &= seconds["echo_factor"] == condition.echo_factor
    return seconds.loc[keep].set_index("study_key")["seconds"]


def _bootstrap_median(values: np.ndarray) -> tuple[float, float]:
    """The median's interval over studies resampled with replacement."""
    if not len(values):
        return math.nan, math.nan
    rng = np.random.default_rng(stats.SEED)
    return stats.interval(np.array([np.median(rng.choice(values, size=len(values))) for _ in range(stats.RESAMPLES)]))


def no_loss(trials: pd.DataFrame, comparison: Comparison) -> dict:
    """Per draw, the condition's best metric minus the reference's (in the metric's better direction)."""
    a, b = select(trials, comparison.a), select(trials, comparison.b)
    joined = a.merge(b, on=["study_key", "trial"], suffixes=("_a", "_b"))
    sign = np.where(joined["target_mode_a"] == "max", 1.0, -1.0)
    difference = (joined["best_metric_a"] - joined["best_metric_b"]).to_numpy(float) * sign
    keep = np.isfinite(difference)
    pairs = stats.Pairs(joined["study_key"].to_numpy()[keep], difference[keep], difference[keep], 0)
    ci = stats.interval(*stats.bootstrap(pairs)) if keep.any() else (math.nan, math.nan)
    return {"low": float(np.median(difference[keep])) if keep.any() else math.nan, "ci_low": ci[0], "ci_high": ci[1],
            "n_draws": int(keep.sum()), "n_studies": joined["study_key"].nunique(),
            "tolerance": NO_LOSS_TOLERANCE * abs(float(b["best_metric"].median())),
            **flags(trials, [a, b], [comparison.a, comparison.b])}


MEASURES = {"fewer": fewer, "interaction": fewer, "faster": faster, "no_loss": no_loss}
