"""The paper's figures, drawn from the report's tables (as written to, or read back from, CSV).

Each function returns a matplotlib Figure, or None when the tables hold nothing for it. Points are medians
over studies with min-max error bars; a condition whose median study never reached the target is left out
of the line and named in the legend. A figure that shows a condition not yet a result (unfinished.csv: too few
studies or trials) says so at its foot.
"""

import math
import os
from pathlib import Path
from typing import Optional

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from echo_experiments.core.placement import Placement
from echo_experiments.report.tables import CONDITION, condition_label

LABELS = {p.value: p.label for p in Placement} | {condition_label("after_batching", True): "autopilot (cap e)"}


def as_shown(table: pd.DataFrame) -> pd.DataFrame:
    """A table as the figures draw it: the autopilot's condition named by its label (``after_batching_auto``)
    and placed at its cap on a factor axis, beside the fixed factors. A table without the autopilot's columns
    is drawn as it is."""
    if "echo_auto" not in table or "echo_max_factor" not in table:
        return table
    auto = table["echo_auto"].astype(bool)
    return table.assign(placement=[condition_label(p, a) for p, a in zip(table["placement"], auto)],
                        echo_factor=table["echo_factor"].where(~auto, table["echo_max_factor"]))


def _label(placement: str, shuffle_buffer: int = 0) -> str:
    text = LABELS.get(placement, placement)
    return f"{text} (shuffle {shuffle_buffer})" if shuffle_buffer else text


def _series(rows: pd.DataFrame, keys: list[str], x: str):
    """The lines of a figure: (key, shuffle, rows) per value of ``keys``, split by echo shuffle buffer only
    where one x has several (a swept buffer, shuffle None otherwise). The default buffer grows with e and
    the batch size (data/stream.py), so splitting by it would leave one point per line."""
    for key, g in rows.groupby(keys):
        if g.groupby(x).size().max() > 1:
            for shuffle, h in g.groupby("shuffle_buffer"):
                yield key, shuffle, h
        else:
            yield key, None, g


def _panels(workloads: list[str], title: str) -> tuple[Figure, list]:
    fig, axes = plt.subplots(1, len(workloads), figsize=(5.2 * len(workloads), 4), squeeze=False)
    fig.suptitle(title)
    return fig, list(axes[0])


def _errorbar(ax, x, rows: pd.DataFrame, label: str, y: str = "median", low: str = "min", high: str = "max", **kw):
    finite = np.isfinite(rows[y].to_numpy(dtype=float))
    if not finite.any():
        ax.plot([], [], " ", label=f"{label}: not reached")
        return
    r = rows[finite]
    x = np.asarray(x)[finite]
    med = r[y].to_numpy(dtype=float)
    lo = med - r[low].to_numpy(dtype=float)
    hi = np.where(np.isfinite(r[high].to_numpy(dtype=float)), r[high].to_numpy(dtype=float) - med, 0)
    ax.errorbar(x, med, yerr=[lo, hi], marker="o", capsize=3, label=label, **kw)


def _finish_panel(ax, workload: str, xlabel: str, ylabel: str, outside: bool = False) -> None:
    """Labels, title and legend (``outside``: to the right of the axes, where many lines would hide the data)."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(workload)
    if outside:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
    else:
        ax.legend(fontsize=8)


def placement_bars(table: pd.DataFrame, factor: float = 2.0) -> Optional[Figure]:
    """Fresh examples to target at echo factor ``factor`` per placement, beside the baseline (paper Fig. 3).

    One panel per workload and batch size that has runs at that factor.
    """
    at = table[(table["echo_factor"] == factor) | (table["echo_factor"] == 1)]
    panels = sorted({(r.workload, r.batch_size) for r in at[at["echo_factor"] == factor].itertuples()})
    if not panels:
        return None
    if not np.isfinite(at["median"].to_numpy(dtype=float)).any():  # bars of nothing would be an empty figure
        raise ValueError(f"no condition reached the target at echo factor {factor:g} or without echoing")
    fig, axes = _panels([f"{w}, batch {b}" for w, b in panels], f"Fresh examples to target at echo factor {factor:g}")
    for ax, (workload, batch_size) in zip(axes, panels):
        rows = at[(at["workload"] == workload) & (at["batch_size"] == batch_size)]
        rows = rows.sort_values(["echo_factor", "placement", "shuffle_buffer"])
        labels = [_label(r.placement, r.shuffle_buffer) for r in rows.itertuples()]
        med = rows["median"].to_numpy(dtype=float)
        shown = np.where(np.isfinite(med), med, 0)
        # An unreached median is a bar of 0 marked "not reached": no bar below it, even where a study reached.
        # A reached median has a reached min (min <= median), so only the median decides.
        lo = np.where(np.isfinite(med), shown - rows["min"], 0)
        hi = np.where(np.isfinite(med) & np.isfinite(rows["max"]), rows["max"] - shown, 0)
        bars = ax.bar(range(len(rows)), shown, yerr=[lo, hi], capsize=4, color="#8fb3d9")
        for bar, value in zip(bars, med):
            if not np.isfinite(value):
                ax.annotate("not reached", (bar.get_x() + bar.get_width() / 2, 0), ha="center", va="bottom",
                            rotation=90)
        base = rows[rows["echo_factor"] == 1]["median"]
        if len(base) and np.isfinite(base.iloc[0]):
            ax.axhline(base.iloc[0] / factor, ls="--", color="k", label=f"baseline / {factor:g}")
            ax.legend()
        ax.set_xticks(range(len(rows)), labels, rotation=30, ha="right")
        ax.set_ylabel("fresh examples to target")
        ax.set_title(f"{workload}, batch {batch_size}")
    fig.tight_layout()
    return fig


def factor_sweep(table: pd.DataFrame) -> Optional[Figure]:
    """Fresh examples to target against the echo factor, with the 1/e ideal (paper Fig. 5)."""
    workloads = sorted(w for w in table["workload"].unique()
                       if table[(table["workload"] == w) & (table["echo_factor"] > 1)]["echo_factor"].nunique() >= 2)
    if not workloads:
        return None
    fig, axes = _panels(workloads, "Fresh examples to target vs echo factor")
    for ax, workload in zip(axes, workloads):
        rows = table[table["workload"] == workload]
        for batch_size in sorted(rows["batch_size"].unique()):
            at_b = rows[rows["batch_size"] == batch_size]
            base = at_b[at_b["echo_factor"] == 1]
            for (placement,), shuffle, g in _series(at_b[at_b["echo_factor"] > 1], ["placement"], "echo_factor"):
                g = pd.concat([base, g]).sort_values("echo_factor")
                suffix = f", batch {batch_size}" if rows["batch_size"].nunique() > 1 else ""
                _errorbar(ax, g["echo_factor"], g, _label(placement, shuffle or 0) + suffix)
            if len(base) and np.isfinite(base["median"].iloc[0]):
                e = np.array(sorted(at_b["echo_factor"].unique()))
                ax.plot(e, base["median"].iloc[0] / e, "k--", label="baseline / e")
        ax.set_xscale("log", base=2)
        _finish_panel(ax, workload, "echo factor e", "fresh examples to target")
    fig.tight_layout()
    return fig


def batch_size_sweep(table: pd.DataFrame) -> Optional[Figure]:
    """Fresh examples to target against batch size, per echo condition (paper Fig. 6)."""
    workloads = sorted(w for w in table["workload"].unique()
                       if table[table["workload"] == w]["batch_size"].nunique() >= 2)
    if not workloads:
        return None
    fig, axes = _panels(workloads, "Fresh examples to target vs batch size")
    for ax, workload in zip(axes, workloads):
        rows = table[table["workload"] == workload]
        for (placement, factor), shuffle, g in _series(rows, ["placement", "echo_factor"], "batch_size"):
            g = g.sort_values("batch_size")
            label = _label(placement, shuffle or 0) + (f", e={factor:g}" if factor != 1 else "")
            _errorbar(ax, g["batch_size"], g, label)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        _finish_panel(ax, workload, "batch size", "fresh examples to target")
    fig.tight_layout()
    return fig


def shuffle_sweep(table: pd.DataFrame) -> Optional[Figure]:
    """Fresh examples to target against the size of the shuffle buffer after the echo stage (paper Fig. 7)."""
    echoed = table[table["echo_factor"] > 1]
    # Only where a condition was run at several buffers: placements that differ in their default buffer
    # (example echoing shuffles, batch echoing does not) are no shuffle sweep.
    swept = echoed.groupby(["workload", "placement", "echo_factor", "batch_size"])["shuffle_buffer"].nunique()
    workloads = sorted({w for (w, *_), n in swept.items() if n >= 2})
    if not workloads:
        return None
    fig, axes = _panels(workloads, "Fresh examples to target vs echo shuffle buffer")
    for ax, workload in zip(axes, workloads):
        rows = echoed[echoed["workload"] == workload]
        for (placement, factor, batch_size), g in rows.groupby(["placement", "echo_factor", "batch_size"]):
            g = g.sort_values("shuffle_buffer")
            _errorbar(ax, g["shuffle_buffer"], g, f"{_label(placement)}, e={factor:g}")
        base = table[(table["workload"] == workload) & (table["echo_factor"] == 1)]
        if len(base) and np.isfinite(base["median"].iloc[0]):
            ax.axhline(base["median"].iloc[0], color="k", ls=":", label="baseline")
            if np.isfinite(base["max"].iloc[0]):
                ax.axhspan(base["min"].iloc[0], base["max"].iloc[0], color="k", alpha=0.08, label="baseline min-max")
        # symlog puts 0 (no shuffle) on the axis beside the log-spaced sizes; ticks only at the sizes run, and
        # margins on both sides so neither end's point sits on the frame.
        sizes = sorted(int(s) for s in rows["shuffle_buffer"].unique())
        ax.set_xscale("symlog", linthresh=1)
        ax.set_xticks(sizes, [str(s) for s in sizes])
        ax.minorticks_off()
        ax.set_xlim(-0.5, 2 * max(sizes))
        _finish_panel(ax, workload, "shuffle buffer after the echo stage (0 = none), in\n"
                      "examples after example echoing, batches after batch echoing", "fresh examples to target")
    fig.tight_layout()
    return fig


def curves(curves_table: pd.DataFrame) -> Optional[Figure]:
    """The target metric against fresh examples for the best trial of each condition.

    ``curves_table`` has the condition columns, ``target_metric``, ``target_value`` and the metric rows.
    """
    if curves_table.empty:
        return None
    workloads = sorted(curves_table["workload"].unique())
    fig, axes = _panels(workloads, "Best trial of each condition")
    for ax, workload in zip(axes, workloads):
        rows = curves_table[curves_table["workload"] == workload]
        metric = rows["target_metric"].iloc[0]
        for (placement, factor, batch_size, shuffle), g in rows.groupby(
                ["placement", "echo_factor", "batch_size", "shuffle_buffer"]):
            label = _label(placement, shuffle) + (f", e={factor:g}" if factor != 1 else "")
            if rows["batch_size"].nunique() > 1:
                label += f", batch {batch_size}"
            ax.plot(g["fresh_examples"], g[metric], marker=".", label=label)
        ax.axhline(rows["target_value"].iloc[0], color="k", ls="--", label="target")
        _finish_panel(ax, workload, "fresh examples", metric)
    fig.tight_layout()
    return fig


def wall_clock(speedup_table: pd.DataFrame) -> Optional[Figure]:
    """Training-time speedup over the baseline against the echo factor (median, min-max over studies), beside
    the paper's timing model's from the same fresh examples (cost_model.py, where the table has it) and the ideal
    max(1, min(e, R))."""
    echoed = speedup_table[(speedup_table["echo_factor"] > 1) & np.isfinite(speedup_table["speedup"])]
    if echoed.empty:
        return None
    workloads = sorted(echoed["workload"].unique())
    fig, axes = _panels(workloads, "Wall-clock speedup to target")
    for ax, workload in zip(axes, workloads):
        rows = speedup_table[speedup_table["workload"] == workload]
        for (placement,), shuffle, g in _series(rows[rows["echo_factor"] > 1], ["placement"], "echo_factor"):
            g = g.sort_values("echo_factor")
            _errorbar(ax, g["echo_factor"], g, _label(placement, shuffle or 0), y="speedup", low="speedup_min",
                      high="speedup_max")
            if "model_speedup" in g and np.isfinite(g["model_speedup"].to_numpy(float)).any():
                ax.plot(g["echo_factor"], g["model_speedup"], ls=":", marker="s", mfc="none",
                        color=ax.lines[-1].get_color(),
                        label=f"{_label(placement, shuffle or 0)}: the timing model (copies cost the input nothing)")
        e = np.array(sorted(rows["echo_factor"].unique()))
        ratio = rows["R"].dropna()
        if len(ratio) and math.isfinite(ratio.iloc[0]):
            ax.plot(e, np.maximum(1.0, np.minimum(e, ratio.iloc[0])), "k--",
                    label=f"ideal max(1, min(e, R)), R = {ratio.iloc[0]:.2f}")
        ax.axhline(1, color="grey", lw=0.8)
        _finish_panel(ax, workload, "echo factor e", "speedup in training time to target")
    fig.tight_layout()
    return fig


# Every figure, by file name, from the fresh-examples table, the speedups table and the curve rows.
# The label of a figure whose legends stand outside its axes: it is saved with a tight bounding box to keep them.
LEGEND_OUTSIDE = "legend outside"


def best_of_k(table: pd.DataFrame) -> Optional[Figure]:
    """The median best fresh examples to target among k trials against k, with its 90% interval: what a tuning
    budget of k trials buys each condition (a line ends where the median best is not reached)."""
    if table.empty or table["k"].nunique() < 2:
        return None
    panels = sorted({(r.workload, r.batch_size) for r in table.itertuples()})
    fig, axes = _panels([f"{w}, batch {b}" for w, b in panels], "Best of k trials: median fresh examples to target")
    for ax, (workload, batch_size) in zip(axes, panels):
        rows = table[(table["workload"] == workload) & (table["batch_size"] == batch_size)]
        for key, g in rows.groupby(["placement", "echo_factor", "shuffle_buffer"], sort=True):
            label = "baseline" if key[1] == 1 else f"{_label(key[0], key[2])}, e={key[1]:g}"
            _errorbar(ax, g["k"], g, label, y="median_best", low="ci_low", high="ci_high")
        _finish_panel(ax, f"{workload}, batch {batch_size}", "trials (k)", "median best fresh examples to target",
                      outside=True)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    fig.set_label(LEGEND_OUTSIDE)
    fig.tight_layout()
    return fig


# Each figure and the table it is drawn from.
FIGURES = {
    "fresh_examples_at_e2": (placement_bars, "fresh"),
    "fresh_examples_vs_echo_factor": (factor_sweep, "fresh"),
    "fresh_examples_vs_batch_size": (batch_size_sweep, "fresh"),
    "fresh_examples_vs_shuffle_buffer": (shuffle_sweep, "fresh"),
    "wall_clock_speedup": (wall_clock, "speed"),
    "best_trial_curves": (curves, "curves"),
    "best_of_k": (best_of_k, "best_of_k"),
}


def draw_all(tables: dict[str, pd.DataFrame], notes: Optional[list[str]] = None,
             unfinished: Optional[pd.DataFrame] = None) -> dict[str, Figure]:
    """Every figure the tables have data for, by file name. A figure that cannot be drawn (a log axis over
    values that are all zero, missing or not reached) is left out with a line in ``notes``; one whose table
    holds conditions of ``unfinished`` (not yet results) is marked."""
    drawn = {}
    for name, (make, source) in FIGURES.items():
        try:
            fig = make(as_shown(tables[source]))
            if fig is not None:
                fig.canvas.draw()  # scales are resolved here: a log axis with nothing positive fails now
                _mark_unfinished(fig, tables[source], unfinished)
                drawn[name] = fig
        except ValueError as e:
            plt.close("all")
            if notes is not None:
                notes.append(f"{name} not drawn: {str(e).splitlines()[0]}")
    return drawn


NOT_YET = "not yet results"


def marked(fig: Figure) -> bool:
    """Whether the figure carries the not-yet-results line below its axes (saved with a tight bounding box)."""
    return any(t.get_text().startswith(NOT_YET) for t in fig.texts)


def save(fig: Figure, path: Path) -> None:
    """The figure into ``path`` (its suffix the format) in one step, like the tables: a report killed while
    saving leaves the figure before it. An SVG carries no date, so the same runs make the same bytes."""
    fmt = path.suffix.lstrip(".")
    part = path.with_name(f".{path.name}.part")
    fig.savefig(part, format=fmt, dpi=120, metadata={"Date": None} if fmt == "svg" else None,
                bbox_inches="tight" if marked(fig) or fig.get_label() == LEGEND_OUTSIDE else None)
    os.replace(part, path)


def _mark_unfinished(fig: Figure, shown: pd.DataFrame, unfinished: Optional[pd.DataFrame]) -> None:
    """A line at the figure's foot where some conditions of its table are not yet results: their points are a
    sweep's partial numbers, which the studies still to come can move."""
    keys = [c for c in CONDITION if c in shown.columns]
    if unfinished is None or unfinished.empty or not keys:
        return
    conditions = shown[keys].drop_duplicates()
    partial = conditions.merge(unfinished[keys].drop_duplicates(), on=keys)
    if partial.empty:
        return
    # Below the figure (saved with a tight bounding box, which takes it in): inside, it would cover tick labels.
    fig.text(0.5, -0.01, f"{NOT_YET}: {len(partial)} of the {len(conditions)} conditions of the table drawn\n"
             "here (too few studies or trials; unfinished.csv)", ha="center", va="top", fontsize=9, color="firebrick")
