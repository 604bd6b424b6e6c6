"""The numbers behind each comparison of a claim (claims.py), from a results folder's trials table.

Every number comes with what could undo it: the draws it rests on, whether the conditions are finished
results, whether an echoed condition really echoed at its nominal factor, whether its runs came from one CPU
model, and how large the effect is in evaluations.
"""

import math
from typing import Optional

import numpy as np
import pandas as pd

from echo_experiments.core.rundir import TIMED
from echo_experiments.report import cost_model, stats, tables
from echo_experiments.report.tables import FACTOR_TOLERANCE
from paper.verdicts.claims import NO_LOSS_TOLERANCE, Comparison, Condition


def select(trials: pd.DataFrame, condition: Condition, timed: bool = False) -> pd.DataFrame:
    """The tuning trials of one condition (timed reruns left out, a trial counting once; with them where
    ``timed``: what a second of training costs is read from every run that had the machine to itself)."""
    keep = condition.rows(trials)
    return trials[keep] if timed else trials[keep & ~trials["path"].str.startswith(f"{TIMED}/")]


def flags(trials: pd.DataFrame, chosen: list[pd.DataFrame], conditions: list[Condition]) -> dict:
    """What undoes a comparison: unfinished conditions, echoed conditions off their factor, a study whose runs
    come from several CPU models (its pairs would compare machines as well as conditions); and what the reader
    is told: how many of its runs name no CPU model (one machine cannot be shown for them)."""
    partial = tables.unfinished(trials)
    reasons, off = [], []
    for rows, condition in zip(chosen, conditions):
        if rows.empty:
            reasons.append(f"{condition}: no runs")
            continue
        key = rows.iloc[0]
        match = partial[np.logical_and.reduce([partial[c] == key[c] for c in tables.CONDITION])]
        reasons += [f"{condition}: {r}" for r in match["reason"]]
        factor, nominal = _effective_factor(rows), key.echo_factor != 1 and not key.echo_auto
        if nominal and abs(factor / key.echo_factor - 1) > FACTOR_TOLERANCE:
            off.append(f"{condition} trained {factor:.2f} examples per fresh example at its target, not "
                       f"{key.echo_factor:g}")
    present = [rows for rows in chosen if not rows.empty]
    mixed = tables.machines(pd.concat(present)) if present else pd.DataFrame()
    machines = [f"{r.study_key}: {r.n_cpu_models}" for r in mixed.itertuples()]
    unrecorded = int(sum(rows["cpu"].isna().sum() for rows in present)) if present else 0
    return {"unfinished": "; ".join(reasons), "off_factor": "; ".join(off), "machines": "; ".join(machines),
            "n_unrecorded": unrecorded}


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


def _study_best(chosen: list[Optional[pd.DataFrame]], interaction: bool) -> pd.Series:
    """The study-best ratio per study (a over b; an interaction's a/b over c/d)."""
    ratios = _study_best_ratios(chosen[0], chosen[1])
    if interaction:
        ratios = per_study_ratios(ratios, _study_best_ratios(chosen[2], chosen[3]), undefined=math.nan)
    return ratios.dropna()


def _pairs(chosen: list[Optional[pd.DataFrame]], interaction: bool) -> stats.Pairs:
    pairs = stats.Pairs.of(chosen[0], chosen[1])
    return pairs.over(stats.Pairs.of(chosen[2], chosen[3])) if interaction else pairs


def _on_grid(rows: pd.DataFrame, cadence: float) -> pd.DataFrame:
    """A condition's outcomes as evaluations see them: a count at an evaluation holds the ids of the batch that
    crossed it too (32,004 for the 10th evaluation of 3,200), so each finite bound is floored to the grid."""
    return rows.assign(**{k: np.floor(rows[k] / cadence) * cadence for k in ("lo", "hi")})


def _reached_median(rows: pd.DataFrame) -> float:
    return rows["fresh_examples_to_target"].where(rows["status"] == "reached_target").median()


def fewer(trials: pd.DataFrame, comparison: Comparison, censored: bool = True) -> dict:
    """The paired effect of fresh examples to target (an interaction's ratio of two), reached counts read as
    censored between the evaluation before and the one that saw the target (``censored=False``: as exact counts,
    the reading before 2026-12-07, for the list of the verdicts it moved)."""
    conditions = [comparison.a, comparison.b, comparison.c, comparison.d]
    interaction = comparison.kind == "interaction"
    chosen = [stats.outcome_bounds(select(trials, c), censored) if c is not None else None for c in conditions]
    present = [c for c in chosen if c is not None]
    row = stats.paired_effect(_pairs(chosen, interaction))
    studies = _study_best(chosen, interaction)
    row.update({"low": row.pop("ratio_low"), "high": row.pop("ratio_high"), "n_studies": len(studies),
                "study_best_median": studies.median() if len(studies) else math.nan,
                "study_best_min": studies.min() if len(studies) else math.nan,
                "study_best_max": studies.max() if len(studies) else math.nan,
                "n_studies_against": int((studies >= 1).sum())})
    # The resolution: evaluations in the reference's count (an interaction's coarsest of its four conditions).
    cadence = _cadence(trials)
    counts = [_reached_median(c) for c in (present if interaction else [chosen[1]])]
    row["resolution"] = min(counts) / cadence if cadence else math.nan
    # The effect's size in evaluations (its bound nearest 1, the side against the claim), counted on the grid.
    if cadence and row["n_draws"]:
        grid = _pairs([_on_grid(c, cadence) if c is not None else None for c in chosen], interaction)
        ends = stats.censored_median(grid.low, grid.high)
        row["evaluations"] = round(min(abs(1 - ends[0]), abs(1 - ends[1])) * row["resolution"], 6)
    else:
        row["evaluations"] = math.nan
    return {**row, **flags(trials, present, [c for c in conditions if c is not None])}


def _cadence(trials: pd.DataFrame) -> Optional[float]:
    cadence = trials["eval_every_fresh_examples"].dropna() if "eval_every_fresh_examples" in trials else []
    return float(cadence.max()) if len(cadence) else None


def faster(trials: pd.DataFrame, comparison: Comparison, censored: bool = True) -> dict:
    """Per study, the reference's best trial's seconds over the condition's, each timed alone; the median's
    interval from the studies' order statistics (:func:`median_interval`), and the resolution of the fresh-example
    counts the seconds rest on (evaluations in the reference's count). Beside it, the median had the condition
    reached its target one evaluation later, and one earlier, in every study (``later``, ``earlier``): what the
    evaluation grid alone could move (seconds are measured values, read as they are either way)."""
    seconds = tables.study_seconds(trials)
    a, b = (per_study_seconds(seconds, c) for c in (comparison.a, comparison.b))
    common = a.index.intersection(b.index)
    values = np.array([b[s] / a[s] for s in common if np.isfinite(a[s]) and np.isfinite(b[s])])
    ci = median_interval(values)
    span = per_study_seconds(seconds.assign(seconds=seconds["seconds_per_evaluation"]), comparison.a) \
        if "seconds_per_evaluation" in seconds else pd.Series(dtype=float)
    moved = {name: [b[s] / (a[s] + sign * span.get(s, math.nan)) for s in common
                    if np.isfinite(a[s]) and np.isfinite(b[s])] for name, sign in (("later", 1), ("earlier", -1))}
    shifted = {name: float(np.median(v)) if len(v) and np.isfinite(v).all() else math.nan for name, v in moved.items()}
    cadence = _cadence(trials)
    reference = select(trials, comparison.b)
    # The machines of every run whose seconds count: the tuning runs and the timed reruns of the study-best trials.
    timed = [with_timed(trials, c) for c in (comparison.a, comparison.b)]
    return {"low": float(np.median(values)) if len(values) else math.nan, "ci_low": ci[0], "ci_high": ci[1],
            "n_draws": len(values), "n_studies": len(values), **shifted,
            "resolution": _reached_median(reference) / cadence if cadence else math.nan,
            **modelled(trials, comparison), **flags(trials, timed, [comparison.a, comparison.b])}


def modelled(trials: pd.DataFrame, comparison: Comparison) -> dict:
    """Beside a measured speedup, the paper's timing model's (cost_model.py): per study, the reference's modelled
    seconds over the condition's; the median, min and max over the studies modelled in both."""
    seconds = cost_model.model_seconds(trials).drop(columns="seconds").rename(columns={"model_seconds": "seconds"})
    a, b = (per_study_seconds(seconds, c) for c in (comparison.a, comparison.b))
    ratios = per_study_ratios(b, a, undefined=math.nan).dropna()
    spread = (float(ratios.median()), float(ratios.min()), float(ratios.max())) if len(ratios) else (math.nan,) * 3
    return dict(zip(("model_speedup", "model_speedup_min", "model_speedup_max"), spread))


def median_interval(values: np.ndarray, level: float = stats.LEVEL) -> tuple[float, float]:
    """The distribution-free interval of a median from n values' order statistics: [x_(k), x_(n+1-k)] for the
    largest k whose coverage, 1 - 2 P(Binomial(n, 1/2) < k), is at least ``level`` (k = 1, the min and the max,
    where none is: 5 studies give 0.94). No resampling, so it does not move with a seed."""
    from scipy.stats import binom

    if not len(values):
        return math.nan, math.nan
    ordered, n = np.sort(values), len(values)
    k = max([j for j in range(1, (n + 1) // 2 + 1) if 1 - 2 * binom.cdf(j - 1, n, 0.5) >= level] or [1])
    return float(ordered[k - 1]), float(ordered[n - k])


def with_timed(trials: pd.DataFrame, condition: Condition) -> pd.DataFrame:
    """A condition's tuning trials and the timed reruns of them (select leaves the reruns out)."""
    keep = select(trials.assign(path=trials["path"].str.removeprefix(f"{TIMED}/")), condition).index
    return trials.loc[keep]


def per_study_seconds(seconds: pd.DataFrame, condition: Condition) -> pd.Series:
    """One condition's seconds by study, from tables.study_seconds."""
    return seconds.loc[condition.rows(seconds)].set_index("study_key")["seconds"]


def no_loss(trials: pd.DataFrame, comparison: Comparison, censored: bool = True) -> dict:
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
