"""The README's key figure: C3's wall-clock speedup against the echo factor on every workload it is measured on,
beside the paper's timing model and the ideal, drawn from the folders C3's comparisons read (claims.csv's
evidence) and only their conditions, so that it shows what the claim table decides."""

from pathlib import Path

import pandas as pd

from echo_experiments.report import cost_model, figures, tables
from paper.verdicts.claims import CLAIMS
from paper.verdicts.folders import results_trials

FILE = Path("figures") / "wall_clock_speedup.png"  # under results/
CLAIM = "C3"


def speedups(results: Path, claims: pd.DataFrame) -> pd.DataFrame:
    """The speedups tables (with the model's columns) of C3's folders, each kept to the placements C3 compares."""
    folders = list(dict.fromkeys(claims.loc[claims["claim"] == CLAIM, "evidence"]))
    conditions = {(c.a.placement, c.a.auto) for claim in CLAIMS if claim.id == CLAIM for c in claim.comparisons}
    parts = []
    for folder, trials in results_trials(results, folders).items():
        if trials is None or trials.empty:
            continue
        table = cost_model.with_model(tables.speedups(trials), trials)
        compared = [(p, bool(a)) in conditions for p, a in zip(table["placement"], table["echo_auto"])]
        parts.append(table[pd.Series(compared, index=table.index, dtype=bool) | tables.baseline(table)])
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def write(results: Path, claims: pd.DataFrame) -> Path | None:
    """Draw it into results/figures/ in one step; None (and no file) where no speedup is measured yet."""
    table = speedups(results, claims)
    fig = figures.wall_clock(figures.as_shown(table)) if not table.empty else None
    path = results / FILE
    if fig is None:
        path.unlink(missing_ok=True)
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    figures.save(fig, path)
    return path
