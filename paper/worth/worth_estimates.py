"""The copy-worth estimate against the worth the fixed-factor sweeps measured, and each pilot's choice among its
candidates (docs/protocol.md, "What a copy is worth: the estimate's pilot").

Each run of a pilot's folder (PILOTS) was made with ``trainer.copy_worth_every`` at a fixed factor, at the draw
of a study-0 best trial of the sweep its condition was measured in (SOURCES). Its row sets each candidate's
median over the run's evaluations (summary.json's ``copy_worth``) beside that sweep's measured worth
(copy_worth.py: w = (1/r - 1)/(e - 1) from the per-study ratios' median, with the range over studies).

The choice, as the protocol wrote each pilot's rule before its runs: the candidate whose estimates order the
conditions as the measured values do (the second pilot: and each lies within its condition's measured range
over the studies), with the smallest mean absolute difference from them; none where no candidate qualifies.
"""

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from echo_experiments.core.record import COPY_WORTH_CANDIDATES as CANDIDATES
from echo_experiments.core.record import RecordError, RunRecord


@dataclass(frozen=True)
class Pilot:
    candidates: tuple[str, ...]
    within_range: bool  # each estimate must also lie within its condition's measured range over the studies


PILOTS = {"run-copy_worth_pilot": Pilot(("alignment", "loss_ratio", "noise"), within_range=False),
          "run-copy_worth_pilot2": Pilot(CANDIDATES, within_range=True)}
# Where each condition's worth is measured: (workload, placement, echo factor, batch size) -> the newest sweep of
# it. The language model's pilot runs took their draws from lm_echo_factor_sweep_cpu's study 0, which lm_fine_cpu
# has replaced (5 studies, 1/40 of the baseline's count); until 2026-12-07 they were set against the older sweep.
SOURCES = {
    ("fashion_mnist", "after_batching", 2.0, 64): "placements_e2_fine_cpu/fashion_mnist",
    ("fashion_mnist", "before_augmentation", 2.0, 64): "placements_e2_fine_cpu/fashion_mnist",
    ("transformer_pydocs", "after_batching", 2.0, 32): "lm_fine_cpu/transformer_pydocs",
    ("transformer_pydocs", "before_batching", 2.0, 32): "lm_fine_cpu/transformer_pydocs",
}
CONDITION = ["workload", "placement", "echo_factor", "batch_size"]
COLUMNS = ["pilot", "folder", "run", *CONDITION, "status", "measured_in", "measured_worth", "measured_min",
           "measured_max", *CANDIDATES, "copy_share"]
CHOICE_COLUMNS = ["pilot", "candidate", "conditions", "orders_as_measured", "within_measured_range",
                  "mean_abs_difference", "chosen"]


def _records(results: Path) -> list[tuple[str, str, str, RunRecord]]:
    found = []
    for folder in PILOTS:
        for summary in sorted((results / folder).glob("*/runs/*/summary.json")):
            try:
                record = RunRecord.read(summary)
            except RecordError:
                continue  # a damaged record is the folder's own report's to name; it estimates nothing
            found.append((folder, f"{folder}/{summary.parent.parent.parent.name}", summary.parent.name, record))
    return found


def estimates(results: Path, measured: pd.DataFrame) -> pd.DataFrame:
    """One row per run with the estimate: its candidates beside its condition's measured worth (copy_worth.py's
    table ``measured``; NaN where its sweep measured none)."""
    rows = []
    for pilot, folder, run, record in _records(results):
        key = (record.workload, record.placement, float(record.echo_factor), record.batch_size)
        source = SOURCES.get(key)
        match = measured[(measured["folder"] == source)
                         & (measured[CONDITION] == pd.Series(dict(zip(CONDITION, key)))).all(axis=1)]
        value = match.iloc[0] if len(match) else {}
        rows.append({"pilot": pilot, "folder": folder, "run": run, **dict(zip(CONDITION, key)), "status": record.status,
                     "measured_in": source, "measured_worth": value.get("worth", math.nan),
                     "measured_min": value.get("worth_min", math.nan), "measured_max": value.get("worth_max", math.nan),
                     **{name: record.copy_worth.get(name) for name in (*CANDIDATES, "copy_share")}})
    return pd.DataFrame(rows, columns=COLUMNS)


def choice(table: pd.DataFrame) -> pd.DataFrame:
    """Each pilot's candidates: whether its estimates order the measured conditions as the measurements do (ties
    in either, or a condition it left undefined, count as out of order), whether each lies within its condition's
    measured range, its mean absolute difference, and which one the pilot's rule chooses (at most one)."""
    frames = []
    for pilot, rule in PILOTS.items():
        runs = table[table["pilot"] == pilot]
        if runs.empty:
            continue
        rows = [_judged(pilot, name, runs) for name in rule.candidates]
        frame = pd.DataFrame(rows, columns=CHOICE_COLUMNS)
        qualified = frame[frame["orders_as_measured"] & (frame["within_measured_range"] | (not rule.within_range))]
        if len(qualified):
            frame.loc[qualified["mean_abs_difference"].idxmin(), "chosen"] = True
        frames.append(frame)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=CHOICE_COLUMNS)


def _judged(pilot: str, name: str, runs: pd.DataFrame) -> dict:
    columns = ["measured_worth", "measured_min", "measured_max", name]
    both = runs[columns].apply(pd.to_numeric, errors="coerce").dropna()
    estimated = both[name].to_numpy()[np.argsort(both["measured_worth"].to_numpy(), kind="stable")]
    complete = len(both) == len(runs) and len(both) >= 2
    return {"pilot": pilot, "candidate": name, "conditions": len(both),
            "orders_as_measured": complete and bool(np.all(np.diff(estimated) > 0)),
            "within_measured_range": complete and bool(((both[name] >= both["measured_min"])
                                                        & (both[name] <= both["measured_max"])).all()),
            "mean_abs_difference": float(np.mean(np.abs(both[name] - both["measured_worth"]))) if len(both)
            else math.nan, "chosen": False}
