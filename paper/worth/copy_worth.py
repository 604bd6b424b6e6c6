"""What an echoed copy was worth, in fresh examples, as the committed fixed-factor runs imply it.

A condition echoing every fresh example e times that needs a fraction ``r`` of the baseline's fresh examples to
reach the target (each study's best trial over the same study's baseline best, at one batch size) trained e x r
examples where the baseline trained 1. If each of the e - 1 copies of an example is worth w fresh examples, then
r x (1 + (e - 1) w) = 1, so w = (1 / r - 1) / (e - 1): 1 where a copy is as good as a fresh example, 0 where it
teaches nothing, below 0 where copies cost progress (a condition that never reached the target: w = -1 / (e - 1)).
The model takes w as one number over the whole run; the autopilot's estimate of it is checked against this.

e is the factor the runs trained at (examples per fresh example at the target, the median over the condition's
reached trials), not the nominal one: a shuffle buffer as long as the run holds it below (1.59 for a nominal 2).
Sweeps whose fixed factors train the same runs (the same configs and draws on another store: fresh examples do
not depend on the clock) give one row, its other folders in ``also_in``; a row that a successor sweep measured
again (claims.py's ``Successor``) is marked ``superseded``.
"""

import math
from pathlib import Path
from typing import Optional

import numpy as np
import pandas as pd

from echo_experiments.core.rundir import CONDITION, TIMED
from echo_experiments.report import tables

COLUMNS = ["folder", "workload", "placement", "echo_factor", "batch_size", "shuffle_buffer", "effective_factor",
           "n_studies", "fresh_ratio", "worth", "worth_min", "worth_max", "also_in", "superseded"]
# The per-study ratios a row rests on (for the repeat-decay fit, repeat_decay.py); not written to the CSV.
RATIOS = "study_ratios"


def worth(ratio: float, factor: float) -> float:
    """A copy's worth in fresh examples where a factor-``factor`` condition needs ``ratio`` of the baseline's."""
    if ratio == 0:
        return math.inf
    return (1 / ratio - 1) / (factor - 1)


def implied(trials: pd.DataFrame, folder: str) -> pd.DataFrame:
    """One row per fixed echo factor > 1 (not the autopilot, at a placement that echoes at its factor) with a
    baseline of its batch size in the same folder: the per-study ratios' median and the worth it implies, with
    the worth's range over the studies."""
    tuned = trials[~trials["path"].str.startswith(f"{TIMED}/")]  # C3's timed reruns are not trials of their own
    bests = tables.study_bests(tuned)
    base = bests[tables.baseline(bests)].set_index(["workload", "batch_size", "study_key"])["fresh"]
    rows = []
    echoed = bests[(bests["echo_factor"] > 1) & ~bests["echo_auto"].astype(bool)]
    for key, group in echoed.groupby(tables.CONDITION, sort=True):
        condition = dict(zip(tables.CONDITION, key))
        references = [base.get((r.workload, r.batch_size, r.study_key), math.nan) for r in group.itertuples()]
        ratios = [r.fresh / ref for r, ref in zip(group.itertuples(), references) if math.isfinite(ref)]
        if not ratios:
            continue
        factor = _effective(tuned, key)
        values = [worth(r, factor) for r in ratios]
        rows.append({"folder": folder, **condition, "effective_factor": factor, "n_studies": len(ratios),
                     "fresh_ratio": float(np.median(ratios)), "worth": worth(float(np.median(ratios)), factor),
                     "worth_min": min(values), "worth_max": max(values), "also_in": "", "superseded": False,
                     RATIOS: tuple(ratios)})
    return pd.DataFrame(rows, columns=[*COLUMNS, RATIOS])


def _effective(trials: pd.DataFrame, key: tuple) -> float:
    """The factor a condition trained at: examples per fresh example at the target, the median over its reached
    trials (its nominal factor where none reached)."""
    rows = trials[(trials[tables.CONDITION] == pd.Series(dict(zip(tables.CONDITION, key)))).all(axis=1)]
    reached = rows.loc[rows["status"] == "reached_target", "effective_echo_factor"].astype(float).dropna()
    return float(reached.median()) if len(reached) else float(key[tables.CONDITION.index("echo_factor")])


def measure(results: Path, successors: Optional[dict[str, str]] = None) -> pd.DataFrame:
    """implied() for every results folder's committed trials.csv (the reporter's table of its runs), a row that
    rests on the same runs as an earlier folder's once, and where ``successors`` (folder -> the sweep that
    replaced it) gives its replacement a row of the same condition, marked superseded. RATIOS stays as a column;
    the CSV leaves it out (:func:`written`)."""
    frames = [implied(pd.read_csv(csv), f"{csv.parent.parent.name}/{csv.parent.name}")
              for csv in sorted(results.glob("*/*/trials.csv"))]
    rows = pd.concat([f for f in frames if not f.empty] or [pd.DataFrame(columns=[*COLUMNS, RATIOS])],
                     ignore_index=True)
    if rows.empty:  # an empty frame's row-wise join is a frame, not a column
        return rows
    # A row is a fixed factor's (implied): its condition is the run's, with no autopilot columns.
    same = rows[list(CONDITION)].astype(str).agg("|".join, axis=1) + "|" + rows[RATIOS].astype(str)
    first = ~same.duplicated()
    rows.loc[first, "also_in"] = [", ".join(rows.loc[(same == key) & ~first, "folder"]) for key in same[first]]
    rows = rows[first].reset_index(drop=True)
    condition = rows[list(CONDITION)].astype(str).agg("|".join, axis=1)
    measured = set(zip(rows["folder"], condition))
    rows["superseded"] = [(successors or {}).get(folder, "") != "" and ((successors or {})[folder], key) in measured
                          for folder, key in zip(rows["folder"], condition)]
    return rows


def written(rows: pd.DataFrame) -> str:
    """copy_worth.csv's text: every column but the per-study ratios."""
    return rows[COLUMNS].to_csv(index=False)
