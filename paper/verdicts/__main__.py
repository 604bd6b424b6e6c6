"""``python -m paper.verdicts [RESULTS] [--readme README.md] [--details docs/reproducing.md]``:
every claim's comparisons measured on the committed runs, judged by the written rules (claims.py), into
RESULTS/claims.csv, the README's claim table (between its ``claims:begin`` and ``claims:end`` markers) and one
table per claim in the details page (between ``<ID>:begin`` and ``<ID>:end``); the autopilot's checks
(autopilot_checks.py) likewise into RESULTS/autopilot.csv and the README (``autopilot:begin``, ``autopilot:end``),
with a figure per check of what the autopilot chose (check_figures.py, RESULTS/figures/autopilot_<check>.png);
the README's findings line from both (``findings:begin``, ``findings:end``); and what a copy was worth in every
fixed-factor condition (paper/worth/copy_worth.py) into RESULTS/copy_worth.csv, and the copy-worth estimate against
it with the pilot's choice among its candidates (paper/worth/worth_estimates.py) into RESULTS/copy_worth_estimates.csv
and RESULTS/copy_worth_choice.csv.
``make figures`` runs it last.
"""

import argparse
import os
import sys
from pathlib import Path
from typing import Optional

from echo_experiments.core.rundir import write_atomic
from paper.verdicts import autopilot_checks, check_figures, findings, key_figure, rule_changes
from paper.verdicts.claim_tables import (
    claim_tables,
    measure,
    readme_table,
    write_block,
    write_readme,
)
from paper.verdicts.claims import CLAIMS
from paper.worth import copy_worth, repeat_decay, worth_estimates


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m paper.verdicts",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", nargs="?", type=Path, default=Path("results"))
    parser.add_argument("--readme", type=Path,
                        help="write the claim table, the autopilot's table and the findings line into this README too")
    parser.add_argument("--details", type=Path, help="write each claim's table into this page as well")
    args = parser.parse_args(argv)
    if not args.results.is_dir():
        print(f"error: no such results folder: {args.results}", file=sys.stderr)
        return 2
    claims = measure(args.results)
    write_atomic(args.results / "claims.csv", claims.drop(columns="link").to_csv(index=False))
    changes = rule_changes.table(measure(args.results, censored=False), claims)
    write_atomic(args.results / "rule_changes.csv", changes.to_csv(index=False))
    checks = autopilot_checks.measure(args.results)
    write_atomic(args.results / "autopilot.csv", checks.drop(columns="link").to_csv(index=False))
    drawn = check_figures.write_all(args.results, checks)
    successors = {c.folder: c.successor.folder for claim in CLAIMS for c in claim.comparisons if c.successor}
    worth = copy_worth.measure(args.results, successors)
    write_atomic(args.results / "copy_worth.csv", copy_worth.written(worth))
    decay = repeat_decay.table(worth)
    write_atomic(args.results / "repeat_decay.csv", decay.to_csv(index=False))
    repeat_decay.figure(worth, decay, args.results / "figures" / "repeat_decay.png")
    estimated = worth_estimates.estimates(args.results, worth)
    write_atomic(args.results / "copy_worth_estimates.csv", estimated.to_csv(index=False))
    write_atomic(args.results / "copy_worth_choice.csv", worth_estimates.choice(estimated).to_csv(index=False))
    try:
        if args.readme:
            write_readme(args.readme, readme_table(claims))
            write_block(args.readme, autopilot_checks.BEGIN, autopilot_checks.END,
                        autopilot_checks.readme_table(checks, {check: os.path.relpath(path, args.readme.parent)
                                                               for check, path in drawn.items()}))
            write_block(args.readme, findings.BEGIN, findings.END, findings.findings(claims, checks))
        if args.details:
            for claim, text in claim_tables(claims).items():
                write_block(args.details, f"<!-- {claim}:begin -->", f"<!-- {claim}:end -->", text)
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    figure = key_figure.write(args.results, claims)
    counts = claims["verdict"].value_counts().to_dict()
    print(f"{len(claims)} comparisons of {len(CLAIMS)} claims -> {args.results / 'claims.csv'}: {counts}")
    print(f"{len(changes)} rows of rule changes and the verdicts they moved -> {args.results / 'rule_changes.csv'}")
    counts = checks["verdict"].value_counts().to_dict()
    print(f"{len(checks)} autopilot checks -> {args.results / 'autopilot.csv'}: {counts}; what the autopilot chose, "
          f"{len(drawn)} figures -> {args.results / 'figures'}")
    print(f"{len(worth)} fixed-factor conditions -> {args.results / 'copy_worth.csv'}: what a copy was worth; "
          f"R* per workload and placement -> {args.results / 'repeat_decay.csv'}")
    print(f"{len(estimated)} runs with the estimate -> {args.results / 'copy_worth_estimates.csv'} "
          f"(the pilot's choice: {args.results / 'copy_worth_choice.csv'})")
    print(f"C3's speedups -> {figure}" if figure else "C3's speedups: none measured, no figure")
    return 0


if __name__ == "__main__":
    sys.exit(main())
