"""``python -m echo_experiments.report RUN_DIRS... --out DIR``: tables, figures and report.md from runs.

Writes fresh_examples_to_target.csv, speedups.csv, final_performance.csv, trials.csv, curves.csv,
search_bounds.csv, unfinished.csv, skipped.csv, figures/*.png|svg and report.md into DIR. Run directories
that cannot be counted are listed (stderr, skipped.csv, report.md) and left out.
"""

import argparse
import os
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, also where a display exists
# Figures rebuilt from the same runs are the same files (no date, no random element ids): `make figures` on
# committed results shows no diff.
matplotlib.rcParams["svg.hashsalt"] = "echo_experiments"
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from echo_experiments.report import figures, tables  # noqa: E402
from echo_experiments.report.markdown import table  # noqa: E402
from echo_experiments.report.collect import collect  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m echo_experiments.report", description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run directories or folders holding them (any depth)")
    parser.add_argument("--out", type=Path, required=True, help="where to write the report")
    args = parser.parse_args(argv)
    problem = _argument_problem(args.runs, args.out)  # before any work
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    trials, curves, search, skipped = collect(args.runs)
    for s in skipped:
        print(f"skipped {s.path}: {s.reason}", file=sys.stderr)
    if trials.empty:
        print(f"error: no complete run directory under {', '.join(map(str, args.runs))}", file=sys.stderr)
        return 2
    command = " ".join(["python -m echo_experiments.report", *(argv or sys.argv[1:])])
    written = write_report(trials, curves, search, skipped, args.out, command=command)
    print(f"{len(trials)} runs ({len(skipped)} skipped) -> {args.out}: {', '.join(written)}")
    return 0


def _argument_problem(runs: list[Path], out: Path) -> str | None:
    missing = [str(p) for p in runs if not p.exists()]
    if missing:
        return f"no such run directory: {', '.join(missing)}"
    if out.exists() and not out.is_dir():
        return f"--out {out} is a file: give a folder (it is created if missing)"
    existing = next(p for p in (out, *out.absolute().parents) if p.exists())
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"--out {out} cannot be written: {existing} is not writable"
    return None


def write_report(trials: pd.DataFrame, curves: pd.DataFrame, search: pd.DataFrame, skipped: list, out: Path,
                 command: str) -> list[str]:
    out.mkdir(parents=True, exist_ok=True)
    fresh = tables.fresh_examples_to_target(trials)
    bounds = tables.search_bounds(trials, search)
    speed = tables.speedups(trials)
    final = tables.final_performance(trials)
    partial = tables.unfinished(trials)
    best = tables.best_trials(trials)
    target = trials[["path", "target_metric", "target_value"]]
    curve_rows = (best.merge(target, left_on="best_path", right_on="path")
                  .merge(curves, on="path") if not curves.empty else pd.DataFrame())
    outputs = {"fresh_examples_to_target.csv": fresh, "speedups.csv": speed, "final_performance.csv": final,
               "trials.csv": trials, "curves.csv": curve_rows, "search_bounds.csv": bounds,
               "unfinished.csv": partial,
               "skipped.csv": pd.DataFrame([vars(s) for s in skipped], columns=["path", "reason"])}
    for name, frame in outputs.items():
        frame.to_csv(out / name, index=False)
    (out / "figures").mkdir(exist_ok=True)
    notes: list[str] = []
    drawn = figures.draw_all(fresh, speed, curve_rows, notes)
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    for name in figures.FIGURES:
        fig = drawn.get(name)
        for ext in ("png", "svg"):
            path = out / "figures" / f"{name}.{ext}"
            if fig is None:  # drawn by an earlier report from other runs: it would stand beside these tables
                path.unlink(missing_ok=True)
            else:
                fig.savefig(path, dpi=120, metadata={"Date": None} if ext == "svg" else None)
        if fig is not None:
            plt.close(fig)
    (out / "report.md").write_text(markdown(fresh, speed, final, bounds, partial, trials, skipped, drawn, command,
                                                notes))
    return [*outputs, *(f"figures/{n}.png|svg" for n in drawn), "report.md"]


def markdown(fresh, speed, final, bounds, partial, trials, skipped, drawn, command: str,
             notes: list[str] = ()) -> str:
    counts = {c: "count" for c in ("median", "min", "max")}
    seconds = {c: "seconds" for c in ("median_seconds", "min_seconds", "max_seconds")}
    parts = [
        "# Data echoing report\n",
        f"Made by `{command}` from {len(trials)} complete runs"
        f" ({trials['status'].value_counts().to_dict()}).\n",
        "Each condition's value is the median over studies of the study's best trial (the trial that reached the "
        "target with the fewest fresh examples); min and max are over studies. A study that never reached the "
        "target counts as not reached (infinitely many fresh examples), never as zero. "
        "n_studies counts studies and n_studies_reached those whose best trial reached the target; n_trials counts "
        "trials (runs), n_trials_reached those that reached it and n_trials_pruned those stopped once they could no "
        "longer be their study's best. "
        "fresh_speedup = baseline median / this median, how many times fewer fresh examples than the baseline "
        "(above 1: fewer; 0: never reached; baseline: echo factor 1, same workload and batch size).\n",
        _unfinished_text(partial),
        "## Fresh examples to target\n", table(fresh, counts),
        "## Seconds to target and speedup\n",
        "Seconds to target count everything from the first batch to the evaluation that met the target "
        "(earlier evaluations included, checkpoints not). The ideal speedup is max(1, min(e, R)), "
        "R = upstream / downstream time per step, where the runs measured it; efficiency = speedup / ideal. "
        "speedup_min and speedup_max: the baseline's median over the slowest and the fastest study. "
        "A study's seconds are those of its best trial (the one counted above), from a run of it that had the "
        f"machine to itself: other processes kept at most {tables.SHARED_CORES:g} cores busy on average while it "
        "ran. A study whose best trial has no such run is untimed (n_studies_reached - n_studies_timed) and "
        "left out of the median; no other trial stands in for it. n_runs_shared counts the runs that shared the "
        "machine (listed below), n_runs_unmeasured those made before that was recorded "
        f"({int(trials['other_cores'].isna().sum())} here), whose seconds are not timings either.\n",
        table(speed, seconds),
        _shared_list(trials),
        "## Best metric reached (final performance)\n", table(final, {}),
        "## Best trials at a bound of the search space\n",
        (f"{int(bounds['at_bound'].sum())} of {len(bounds)} tuned values of the studies' best trials lie within "
         f"{tables.BOUND_MARGIN:.0%} of an end of their range (on its scale); a value there means the range "
         "should be wider.\n"),
        table(bounds[bounds["at_bound"]], {}) if bounds["at_bound"].any() else "",
    ]
    if drawn:
        parts.append("## Figures\n")
        parts += [f"![{name}](figures/{name}.png)\n" for name in drawn]
    parts += [f"- {note}\n" for note in notes]
    if skipped:
        parts.append("## Skipped run directories\n")
        parts += [f"- `{s.path}`: {s.reason}\n" for s in skipped]
    return "\n".join(parts)


def _unfinished_text(partial: pd.DataFrame) -> str:
    if partial.empty:
        return (f"Every condition here has at least {tables.MIN_STUDIES} studies, each with all the trials its "
                "search draws.\n")
    return (f"**Not yet results** ({len(partial)} conditions; unfinished.csv): a condition's value is a median "
            f"over at least {tables.MIN_STUDIES} complete studies (PROTOCOL.md), and these have fewer, or "
            "studies still missing trials. Their numbers below are partial and no comparison rests on them.\n\n"
            + table(partial, {}))


def _shared_list(trials: pd.DataFrame) -> str:
    shared = tables.shared_runs(trials)
    if shared.empty:
        return ""
    return (f"Runs that shared the machine ({len(shared)}), whose seconds are not timings:\n\n"
            + table(shared[["path", "other_cores"]], {}))


if __name__ == "__main__":
    sys.exit(main())
