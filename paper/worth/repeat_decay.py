"""A copy's worth as one number: the repeat-decay constant R*, where the k-th copy of an example is worth
exp(-k / R*) of a fresh one (the form Muennighoff et al., NeurIPS 2023, fit to whole epochs of tokens, R* = 15.4).

Echoing at factor e trains each fresh example once and its copies k = 1 .. e - 1 (a fractional e: the last copy
with probability e - floor(e)), so a condition that needs a fraction r of the baseline's fresh examples implies
1 / r - 1 = S(e; R*) = sum_k exp(-k / R*) (copy_worth.py's w is S / (e - 1)). Per workload and placement, from
every row of copy_worth.csv that no later sweep superseded, at the workload's usual batch size and the default echo
shuffle (the batch-size and shuffle-buffer sweeps change what a copy is worth by design), at the factor its runs
trained at:

- ``r_star``: one R* for every factor, least squares on the studies' ratios, with a 90% bootstrap interval
  (each condition's studies resampled);
- ``by_factor``: the R* each factor implies alone (none where a copy is worth nothing or everything);
- ``a``, ``r_star_2``: the two-parameter form a exp(-k / R*), where one R* does not fit every factor.

The paper's 3.25x at e = 5 (R about 6, so its speedup is about its fresh-example ratio) implies R* about 4.1.
"""

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from scipy.optimize import brentq, least_squares, minimize_scalar  # noqa: E402

from echo_experiments.core.placement import echo_shuffle_size  # noqa: E402
from paper.worth.copy_worth import RATIOS  # noqa: E402

MUENNIGHOFF = 15.4
PAPER_SPEEDUP, PAPER_FACTOR = 3.25, 5.0
COLUMNS = ["workload", "placement", "factors", "n_rows", "r_star", "ci_low", "ci_high", "by_factor", "a", "r_star_2",
           "one_fits"]
RESAMPLES = 2000
SEED = 20231210
BOUNDS = (0.05, 1000.0)  # R* searched on a log scale between a copy worth nothing and one worth a fresh example


def copies_sum(e: float, r_star: float, a: float = 1.0) -> float:
    """S(e; R*): what the copies of one fresh example are worth, in fresh examples."""
    whole = math.floor(e)
    k = np.arange(1, whole)
    return a * (float(np.exp(-k / r_star).sum()) + (e - whole) * math.exp(-whole / r_star))


def implied(e: float, ratio: float) -> float:
    """The R* one condition implies (NaN where its copies were worth nothing or as much as fresh examples)."""
    target = 1 / ratio - 1
    if not 0 < target < e - 1:
        return math.nan
    return float(math.exp(brentq(lambda x: copies_sum(e, math.exp(x)) - target, *np.log(BOUNDS))))


def fit(points: list[tuple[float, float]]) -> float:
    """One R* for (factor, ratio) points, least squares on 1 / r - 1."""
    def loss(x: float) -> float:
        return sum((1 / r - 1 - copies_sum(e, math.exp(x))) ** 2 for e, r in points)
    return float(math.exp(minimize_scalar(loss, bounds=np.log(BOUNDS), method="bounded").x))


def fit_two(points: list[tuple[float, float]]) -> tuple[float, float]:
    """(a, R*) of a exp(-k / R*), least squares on 1 / r - 1; a copy is worth at most a fresh example (a <= 1)."""
    def residuals(x: np.ndarray) -> np.ndarray:
        return np.array([1 / r - 1 - copies_sum(e, math.exp(x[1]), x[0]) for e, r in points])
    got = least_squares(residuals, x0=[0.9, math.log(4.0)], bounds=([0.0, math.log(BOUNDS[0])],
                                                                     [1.0, math.log(BOUNDS[1])]))
    return float(got.x[0]), float(math.exp(got.x[1]))


def paper_r_star() -> float:
    """What the paper's 3.25x at e = 5 implies, taken as its fresh-example ratio."""
    return implied(PAPER_FACTOR, 1 / PAPER_SPEEDUP)


def usual(worth: pd.DataFrame) -> pd.DataFrame:
    """The rows the fit rests on: not superseded, echoing at all, at the workload's most common batch size and the
    default echo shuffle (none after batch echoing, 10 x ceil(e) x batch after example echoing)."""
    kept = worth[~worth["superseded"].astype(bool) & (worth["effective_factor"] > 1.05)]
    batch = kept.groupby("workload")["batch_size"].agg(lambda b: b.mode().iloc[0])
    default = [0 if p == "after_batching" else echo_shuffle_size(e, b)
               for p, e, b in zip(kept["placement"], kept["echo_factor"], kept["batch_size"])]
    return kept[(kept["batch_size"] == kept["workload"].map(batch)) & (kept["shuffle_buffer"] == default)]


def table(worth: pd.DataFrame) -> pd.DataFrame:
    """One row per workload and placement (copy_worth.measure's rows, RATIOS included)."""
    rows = []
    kept = usual(worth)
    rng = np.random.default_rng(SEED)
    for (workload, placement), g in kept.groupby(["workload", "placement"], sort=True):
        conditions = [(float(r.effective_factor), [float(x) for x in getattr(r, RATIOS) if x > 0])
                      for r in g.itertuples()]
        conditions = [(e, ratios) for e, ratios in conditions if ratios]
        points = [(e, r) for e, ratios in conditions for r in ratios]
        if not points:
            continue
        r_star = fit(points)
        draws = [fit([(e, r) for e, ratios in conditions for r in rng.choice(ratios, size=len(ratios))])
                 for _ in range(RESAMPLES)]
        a, r_star_2 = fit_two(points) if len(conditions) > 1 else (math.nan, math.nan)
        by_factor = {e: implied(e, float(np.median(ratios))) for e, ratios in conditions}
        low, high = np.quantile(draws, [0.05, 0.95])
        finite = [v for v in by_factor.values() if math.isfinite(v)]
        rows.append({"workload": workload, "placement": placement,
                     "factors": ", ".join(f"{e:.2f}" for e, _ in conditions), "n_rows": len(conditions),
                     "r_star": r_star, "ci_low": float(low), "ci_high": float(high),
                     "by_factor": "; ".join(f"e={e:.2f}: {v:.2f}" if math.isfinite(v) else f"e={e:.2f}: -"
                                            for e, v in by_factor.items()),
                     "a": a, "r_star_2": r_star_2,
                     # One R* fits where every factor's own lies within the fit's interval.
                     "one_fits": bool(finite) and all(low <= v <= high for v in finite)})
    return pd.DataFrame(rows, columns=COLUMNS)


def figure(worth: pd.DataFrame, fits: pd.DataFrame, path: Path) -> Path:
    """A copy's mean worth against the factor trained at, per workload and placement, with each one-R* fit, the
    paper's implied R* and Muennighoff's."""
    kept = usual(worth)
    fig, ax = plt.subplots(figsize=(8, 5))
    grid = np.linspace(1.05, 16, 200)
    for (workload, placement), g in kept.groupby(["workload", "placement"], sort=True):
        line = ax.plot(g["effective_factor"], g["worth"], "o", label=f"{workload}, {placement}")[0]
        match = fits[(fits["workload"] == workload) & (fits["placement"] == placement)]
        if len(match):
            r_star = float(match["r_star"].iloc[0])
            ax.plot(grid, [copies_sum(e, r_star) / (e - 1) for e in grid], "-", color=line.get_color(), alpha=0.6)
    for r_star, label in ((paper_r_star(), f"the paper's 3.25x at e=5 (R* {paper_r_star():.1f})"),
                          (MUENNIGHOFF, f"Muennighoff et al. (R* {MUENNIGHOFF:g})")):
        ax.plot(grid, [copies_sum(e, r_star) / (e - 1) for e in grid], "k--" if r_star < 10 else "k:", label=label)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("echo factor trained at (examples per fresh example)")
    ax.set_ylabel("a copy's mean worth, in fresh examples")
    ax.set_ylim(-0.3, 1.05)
    ax.axhline(0, color="grey", lw=0.5)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    ax.set_title("A copy's worth: measured (points) and exp(-k/R*) fits (lines)")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)
    return path
