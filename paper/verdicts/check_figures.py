"""A figure per autopilot check: what the autopilot chose as it trained, beside what its store made it wait.

Above, each study's best autopilot trial (the one its seconds are read from): the examples it trained per fresh
one between two evaluations, against fresh examples, and its cap; below, the store's latency per read of the reads
under way at that count of fresh examples (a drifting store's spans, a fixed latency, or none for local storage),
with the R its runs profiled in the title. Written to results/figures/autopilot_<check>.png by ``make figures``.
"""

from pathlib import Path
from typing import Optional

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import yaml
from matplotlib.figure import Figure

from echo_experiments.core.record import metric_rows
from echo_experiments.core.rundir import CONFIG, METRICS
from echo_experiments.report import figures, tables
from paper.verdicts import evidence


def factors(run: Path) -> pd.DataFrame:
    """A run's examples trained per fresh example between consecutive evaluations (the first from the start),
    at each evaluation's count of fresh examples: columns fresh_examples and factor."""
    rows = list(metric_rows(run / METRICS))
    fresh = np.array([0] + [r["fresh_examples"] for r in rows], dtype=float)
    trained = np.array([0] + [r.get("examples_trained", r["fresh_examples"]) for r in rows], dtype=float)
    gained = np.diff(fresh)
    factor = np.divide(np.diff(trained), gained, out=np.full_like(gained, np.nan), where=gained > 0)
    return pd.DataFrame({"fresh_examples": fresh[1:], "factor": factor})


def latencies(run: Path, fresh: np.ndarray) -> np.ndarray:
    """The store's latency per read (ms) where the input is when a run has trained ``fresh`` examples (0 for local
    storage): one read a fresh example, as the slow stores here serve them, the reads running the workload's
    shuffle buffer ahead of training (the store sits before the shuffle, which fills first). What the autopilot
    answers is the latency of the reads under way, not of those its fresh examples came from."""
    from echo_experiments.data.storage import latency_at  # TensorFlow's import: not for the command's --help

    config = yaml.safe_load((run / CONFIG).read_text()) or {}
    storage = config.get("storage") or {}
    if storage.get("kind") != "emulated":
        return np.zeros(len(fresh))
    ahead = int((config.get("workload") or {}).get("shuffle_buffer") or 0)
    return np.array([latency_at(int(f) + ahead, float(storage.get("latency_ms") or 0.0),
                                storage.get("latency_schedule")) for f in fresh])


def best_runs(trials: pd.DataFrame, runs: Path, check) -> list[tuple[str, Path]]:
    """Each study's best autopilot trial: (its study, its run folder); a study none of whose trials reached the
    target is left out."""
    chosen = evidence.select(trials, check.candidate)
    studies = chosen.drop_duplicates("study_key").set_index("study_key")["study"]
    bests = tables.study_bests(chosen)
    bests = bests[bests["reached"]].assign(study=lambda b: b["study_key"].map(studies)).sort_values("study")
    return [(f"{r.study:g}", runs / r.best_path) for r in bests.itertuples()]


def figure(check, trials: pd.DataFrame, runs: Path, input_ratios: tuple[float, float]) -> Optional[Figure]:
    """The check's figure, or None where no study's autopilot reached the target."""
    chosen = best_runs(trials, runs, check)
    if not chosen:
        return None
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 5), sharex=True, height_ratios=(2, 1))
    cap = float(evidence.select(trials, check.candidate)["echo_max_factor"].max())
    for study, run in chosen:
        series = factors(run)
        # each evaluation's factor holds from the evaluation before it (the first from the start)
        top.step(np.r_[0.0, series["fresh_examples"]], np.r_[series["factor"].iloc[0], series["factor"]], where="pre",
                 label=f"study {study}")
        sample = np.linspace(0, series["fresh_examples"].max(), 400)
        bottom.plot(sample, latencies(run, sample), color="0.4", linewidth=1)
    top.axhline(cap, color="k", linestyle="--", linewidth=1, label=f"cap {cap:g}")
    top.set_ylabel("examples trained\nper fresh one")
    top.set_ylim(bottom=0.9)
    top.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
    low, high = input_ratios
    top.set_title(f"{check.id}: {check.statement}\n(studies' R {low:.1f}-{high:.1f}; each study's best trial)",
                  fontsize=8)
    bottom.set_ylabel("store latency per\nread under way (ms)")
    bottom.set_xlabel("fresh examples")
    fig.set_label(figures.LEGEND_OUTSIDE)
    return fig


def figure_path(results: Path, check_id: str) -> Path:
    """Where a check's figure is written."""
    return results / "figures" / f"autopilot_{check_id}.png"


def write(results: Path, check, trials: pd.DataFrame, input_ratios: tuple[float, float]) -> Optional[Path]:
    """Draw the check's figure into results/figures/ (None, and no file, where it has none)."""
    fig = figure(check, trials, results / check.folder / "runs", input_ratios)
    if fig is None:
        return None
    path = figure_path(results, check.id)
    path.parent.mkdir(parents=True, exist_ok=True)
    figures.save(fig, path)
    plt.close(fig)
    return path


def write_all(results: Path, checks: pd.DataFrame) -> dict[str, Path]:
    """The figure of every check in ``checks`` (autopilot_checks.measure's rows) whose candidate is the autopilot
    and reached the target: check -> its file."""
    from paper.verdicts.autopilot_checks import in_force
    from paper.verdicts.folders import results_trials

    rows = checks.set_index("check")
    chosen = [c for c in in_force(results) if c.candidate.auto and c.id in rows.index]
    read = results_trials(results, [c.folder for c in chosen])
    drawn = {}
    for check in chosen:
        if read[check.folder] is not None:
            ratios = (rows.at[check.id, "input_ratio_min"], rows.at[check.id, "input_ratio_max"])
            if path := write(results, check, read[check.folder], ratios):
                drawn[check.id] = path
    return drawn
