"""What an echoed copy was worth, in fresh examples, as the committed fixed-factor runs imply it.

A condition echoing every fresh example e times that needs a fraction ``r`` of the baseline's fresh examples to
reach the target (each study's best trial over the same study's baseline best, at one batch size) trained e x r
examples where the baseline trained 1. If each of the e - 1 copies of an example is worth w fresh examples, then
r x (1 + (e - 1) w) = 1, so w = (1 / r - 1) / (e - 1): 1 where a copy is as good as a fresh example, 0 where it
teaches nothing, below 0 where copies cost progress (a condition that never reached the target: w = -1 / (e - 1)).
The model takes w as one number over the whole run; the autopilot's estimate of it is checked against this.
"""

import math
from pathlib import Path

import numpy as np
import pandas as pd

from echo_experiments.core.rundir import TIMED
from echo_experiments.report import tables

COLUMNS = ["folder", "workload", "placement", "echo_factor", "batch_size", "shuffle_buffer", "n_studies",
           "fresh_ratio", "worth", "worth_min", "worth_max"]


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
    base = bests[bests["echo_factor"] == 1].set_index(["workload", "batch_size", "study_key"])["fresh"]
    rows = []
    echoed = bests[(bests["echo_factor"] > 1) & bests["placement"].map(tables.has_nominal_factor)]
    for key, group in echoed.groupby(tables.CONDITION, sort=True):
        condition = dict(zip(tables.CONDITION, key))
        references = [base.get((r.workload, r.batch_size, r.study_key), math.nan) for r in group.itertuples()]
        ratios = [r.fresh / ref for r, ref in zip(group.itertuples(), references) if math.isfinite(ref)]
        if not ratios:
            continue
        values = [worth(r, condition["echo_factor"]) for r in ratios]
        rows.append({"folder": folder, **condition, "n_studies": len(ratios), "fresh_ratio": float(np.median(ratios)),
                     "worth": worth(float(np.median(ratios)), condition["echo_factor"]),
                     "worth_min": min(values), "worth_max": max(values)})
    return pd.DataFrame(rows, columns=COLUMNS)


def measure(results: Path) -> pd.DataFrame:
    """implied() for every results folder's committed trials.csv (the reporter's table of its runs)."""
    frames = [implied(pd.read_csv(csv), f"{csv.parent.parent.name}/{csv.parent.name}")
              for csv in sorted(results.glob("*/*/trials.csv"))]
    return pd.concat([f for f in frames if not f.empty] or [pd.DataFrame(columns=COLUMNS)], ignore_index=True)
