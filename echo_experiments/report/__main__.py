"""``python -m echo_experiments.report RUN_DIRS... --out DIR``: tables, figures and report.md from runs.

Writes fresh_examples_to_target.csv, paired.csv, best_of_k.csv, speedups.csv, final_performance.csv,
trials.csv, curves.csv, search_bounds.csv, unfinished.csv, skipped.csv, figures/*.png|svg and report.md into
DIR. Run directories that cannot be counted are listed (stderr, skipped.csv, report.md) and left out. A study
whose runs come from several CPU models is refused unless --mixed-machines.
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

from echo_experiments.core.rundir import write_atomic  # noqa: E402
from echo_experiments.report import comparisons, cost_model, figures, tables  # noqa: E402
from echo_experiments.report.collect import collect  # noqa: E402
from echo_experiments.report.text import report_text  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m echo_experiments.report", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=Path, help="run directories or folders holding them (any depth)")
    parser.add_argument("--out", type=Path, required=True, help="where to write the report")
    parser.add_argument("--include-shared", action="store_true",
                        help="take seconds also from runs that shared the machine (marked as such in report.md)")
    parser.add_argument("--mixed-machines", action="store_true",
                        help="report a study whose runs come from several CPU models (refused otherwise)")
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
    mixed = tables.machines(trials)
    if not mixed.empty and not args.mixed_machines:
        names = "; ".join(f"{r.study_key}: {r.n_cpu_models} CPU models" for r in mixed.itertuples())
        print(f"error: runs of one study come from several CPU models ({names}), whose numbers differ: rerun the "
              "study on one machine, or add --mixed-machines to report it as it is, marked", file=sys.stderr)
        return 2
    command = " ".join(["python -m echo_experiments.report", *(argv or sys.argv[1:])])
    written = write_report(trials, curves, search, skipped, args.out, command=command, mixed=mixed,
                           include_shared=args.include_shared)
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
                 command: str, mixed: pd.DataFrame = None, include_shared: bool = False) -> list[str]:
    out.mkdir(parents=True, exist_ok=True)
    fresh = tables.fresh_examples_to_target(trials)
    bounds = tables.search_bounds(trials, search)
    speed = cost_model.with_model(tables.speedups(trials, include_shared), trials)
    final = tables.final_performance(trials)
    partial = tables.unfinished(trials)
    best = tables.best_trials(trials)
    target = trials[["path", "target_metric", "target_value"]]
    curve_rows = (best.merge(target, left_on="best_path", right_on="path")
                  .merge(curves, on="path") if not curves.empty else pd.DataFrame())
    paired, best_k = comparisons.paired_table(trials), comparisons.best_of_k_table(trials)
    outputs = {"fresh_examples_to_target.csv": fresh, "paired.csv": paired, "best_of_k.csv": best_k,
               "speedups.csv": speed, "final_performance.csv": final,
               "trials.csv": trials, "curves.csv": curve_rows, "search_bounds.csv": bounds,
               "unfinished.csv": partial,
               "skipped.csv": pd.DataFrame([vars(s) for s in skipped], columns=["path", "reason"])}
    for name, frame in outputs.items():
        write_atomic(out / name, frame.to_csv(index=False))
    (out / "figures").mkdir(exist_ok=True)
    notes: list[str] = []
    drawn = figures.draw_all({"fresh": fresh, "speed": speed, "curves": curve_rows, "best_of_k": best_k}, notes,
                             partial)
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    for name in figures.FIGURES:
        fig = drawn.get(name)
        for ext in ("png", "svg"):
            path = out / "figures" / f"{name}.{ext}"
            if fig is None:  # drawn by an earlier report from other runs: it would stand beside these tables
                path.unlink(missing_ok=True)
            else:
                figures.save(fig, path)
        if fig is not None:
            plt.close(fig)
    named = {"fresh": fresh, "paired": paired, "best_of_k": best_k, "speed": speed, "final": final, "bounds": bounds,
             "partial": partial}
    write_atomic(out / "report.md", report_text(named, trials, skipped, drawn, command, notes, mixed, include_shared))
    return [*outputs, *(f"figures/{n}.png|svg" for n in drawn), "report.md"]


if __name__ == "__main__":
    sys.exit(main())
