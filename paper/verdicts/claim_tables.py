"""The claim table: every claim's comparisons measured on the committed runs and judged by the written rules
(claims.py), as RESULTS/claims.csv's rows, the README's table and one table per claim for the details page."""

import math
import re
from pathlib import Path
from typing import Optional

import pandas as pd

from echo_experiments.core.placement import Placement
from echo_experiments.core.rundir import write_atomic
from echo_experiments.report.markdown import table
from paper.verdicts import evidence
from paper.verdicts.claims import CLAIMS, INCONCLUSIVE, REPRODUCED, Claim, Comparison, current, judge, ours
from paper.verdicts.folders import link_targets, report_link, results_trials

BEGIN, END = "<!-- claims:begin (made by make figures from results/claims.csv) -->", "<!-- claims:end -->"
COLUMNS = ["claim", "part", "workload", "comparison", "short", "kind", "effect", "ci_low", "ci_high", "n_studies",
           "n_draws", "n_fewer", "n_more", "n_same", "n_open", "share_fewer", "n_neither", "n_diverged_a",
           "n_diverged_b", "study_best_median", "study_best_min", "study_best_max", "n_studies_against", "resolution",
           "evaluations", "n_unrecorded", "model_speedup", "model_speedup_min", "model_speedup_max", "later",
           "earlier", "verdict", "reason", "pending", "evidence"]
# An effect's range of medians in claims.csv: two non-negative ratios.
RANGE = re.compile(r"[0-9.e+]+-[0-9.e+]+")
# The marks of the README's cells, said below its table.
UNRECORDED, AGAINST = "†", "‡"
MARKS = (f"{UNRECORDED}: some of its runs name no CPU model, so one machine per study cannot be shown for them. "
         f"{AGAINST}: reproduced, though some study's study-best ratio points the other way.\n")


def measure(results: Path, censored: bool = True) -> pd.DataFrame:
    """One row per comparison of every claim, with its verdict (``censored``: reached counts read as censored, the
    rule since 2026-12-07; False: as exact counts, to list what that rule moved)."""
    in_force = [(claim, current(comparison, results)) for claim in CLAIMS for comparison in claim.comparisons]
    trials = results_trials(results, [comparison.folder for _, comparison in in_force])
    claims = pd.DataFrame([_row(claim, c, trials[c.folder], censored) for claim, c in in_force], columns=COLUMNS)
    # Counts as floats whatever the rows hold (a comparison without runs has none), so the CSV keeps one form.
    counts = [c for c in COLUMNS if c.startswith("n_")]
    claims[counts] = claims[counts].astype(float)
    return claims.assign(link=[report_link(results, f) for f in claims["evidence"]])


def _pending(comparison: Comparison) -> Optional[str]:
    return comparison.successor.pending() if comparison.successor else None


def _row(claim: Claim, comparison: Comparison, trials: Optional[pd.DataFrame], censored: bool = True) -> dict:
    head = {"claim": claim.id, "part": comparison.part, "workload": comparison.folder.split("/")[1],
            "comparison": comparison.name,
            "short": comparison.short or _short(comparison.name), "kind": comparison.kind,
            "evidence": comparison.folder,
            "pending": _pending(comparison)}
    if trials is None or trials.empty:
        return {**head, "verdict": INCONCLUSIVE, "reason": f"not measured: no runs in results/{comparison.folder}"}
    numbers = evidence.MEASURES[comparison.kind](trials, comparison, censored)
    verdict, reason = judge(comparison.kind, numbers, comparison.paper)
    if comparison.ours:  # the paper does not say it: what the rows found, as ours (docs/protocol.md)
        verdict, reason = ours(verdict), f"{reason} (not a claim of the paper's: a finding of ours)"
    low, high = numbers["low"], numbers.get("high", numbers["low"])
    effect = low if high == low or math.isnan(low) else f"{low:.3g}-{high:.3g}"  # nan: no draw to pair
    return {**head, **{k: numbers.get(k) for k in COLUMNS if k in numbers}, "effect": effect, "verdict": verdict,
            "reason": reason}


def _number(value, kind: str = "") -> str:
    """A number for the tables; an effect whose median is not unique (``low-high``, as claims.csv holds it) as the
    range of its two ends."""
    if isinstance(value, str):
        if not RANGE.fullmatch(value):
            return value
        ends = [_number(float(end), kind) for end in value.split("-")]
        return ends[0] if ends[0] == ends[1] else "-".join(ends)  # "0.86-0.86" says nothing the one number does not
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if math.isinf(value):
        return "inf"
    return f"{value:+.3f}" if kind == "no_loss" else f"{value:.2f}"


def _short(comparison: str) -> str:
    for placement in Placement:
        comparison = comparison.replace(placement.value, placement.short)
    return comparison.replace(" e=2", "").replace(" vs baseline", "").replace(" vs ", "/")


def _cell(r) -> str:
    if pd.isna(r.ci_low):
        return f"{r.short}: not measured"
    unit = "x" if r.kind == "faster" else ""
    marks = (UNRECORDED if r.n_unrecorded > 0 else "") + (AGAINST if r.verdict == REPRODUCED
                                                          and r.n_studies_against > 0 else "")
    grid = f" ({_grid(r)})" if paper_row(r) and _grid(r) else ""
    return (f"{r.short}: {_number(r.effect, r.kind)}{unit} [{_number(r.ci_low, r.kind)}, "
            f"{_number(r.ci_high, r.kind)}]{marks}{grid}")


def paper_row(r) -> bool:
    """A row held against a number the paper publishes (its verdict says where the interval lies beside it)."""
    return "vs the paper's" in str(r.short)


def _grid(r) -> str:
    """What one evaluation of the echoed side moves: the median had it reached its target one evaluation later, and
    one earlier, in every study."""
    later, earlier = getattr(r, "later", math.nan), getattr(r, "earlier", math.nan)
    if pd.isna(later) or pd.isna(earlier):
        return ""
    return f"{_number(later)}x one evaluation later, {_number(earlier)}x one earlier"


def _brief(row) -> str:
    """A verdict's reason in a few words: up to its first colon, or its first clause."""
    reason = str(row.reason)
    return reason.split(":")[0] if ":" in reason else reason.split(";")[0]


def readme_table(claims: pd.DataFrame) -> str:
    """One row per claim and workload: the paper's statement, each comparison's effect with its interval, its
    verdict, and the folder of the evidence."""
    rows = []
    statements = {c.id: f"{c.id}: {c.statement} ({c.source})" for c in CLAIMS}
    for (claim, part, workload), g in claims.fillna({"part": ""}).groupby(["claim", "part", "workload"], sort=False):
        ours = "; ".join(_cell(r) for r in g.itertuples())
        evidence = g.drop_duplicates("evidence")
        why = list(dict.fromkeys([_brief(r) for r in g.itertuples() if r.verdict != REPRODUCED]
                                 # the sweep's name; where its hours are written, the details page says
                                 + [r.pending.split(":")[0] for r in g.itertuples() if isinstance(r.pending, str)]))
        rows.append({"claim": statements[claim] + (f", {part}" if part else ""), "workload": f"`{workload}`",
                     "ours: effect [90% interval]": ours,
                     "verdict": "; ".join(g["verdict"]), "why not": "; ".join(why)[:160],
                     "evidence": "; ".join(evidence["link"])})
    return table(pd.DataFrame(rows), {}) + "\n" + MARKS + "\n" + link_targets(claims["link"])


def claim_tables(claims: pd.DataFrame) -> dict[str, str]:
    """Per claim, every comparison with its numbers, verdict and reason (the details page's tables)."""
    out = {}
    for claim, g in claims.groupby("claim", sort=False):
        rows = [{"workload": f"`{r.workload}`", "comparison": r.comparison,
                 "effect [90% interval]": _cell(r).split(": ", 1)[1], "studies": _count(r.n_studies),
                 **({"one evaluation later, earlier": _grid(r) or "-"} if (g["kind"] == "faster").any() else {}),
                 "draws (fewer/more/same/open; diverged, each side)": _draws(r),
                 "study-best ratio, median (min-max)": _study_best(r),
                 **({MODEL: _model(r)} if (g["kind"] == "faster").any() else {}),
                 "verdict": r.verdict, "why": _why(r)} for r in g.itertuples()]
        text = table(pd.DataFrame(rows), {})
        quote = next((c.quote for c in CLAIMS if c.id == claim and c.quote), "")
        out[claim] = (f"The paper: {quote}.\n\n" if quote else "") + text + (
            "\n" + MARKS if UNRECORDED in text or AGAINST in text else "")
    return out


# A column of the seconds' claims: a model, not a measurement (cost_model.py).
MODEL = "model: an accelerator host's speedup, median (min-max)"


def _model(r) -> str:
    if pd.isna(r.model_speedup):
        return "-"
    return f"{_number(r.model_speedup)}x ({_number(r.model_speedup_min)}-{_number(r.model_speedup_max)})"


def _why(r) -> str:
    return f"{r.reason}; {r.pending}" if isinstance(r.pending, str) else r.reason


def _count(value) -> str:
    return "-" if pd.isna(value) else f"{int(value)}"


def _draws(r) -> str:
    if pd.isna(r.n_draws):
        return "-"
    if pd.isna(r.share_fewer):
        return f"{int(r.n_draws)}"
    diverged = (f"; diverged {int(r.n_diverged_a)}/{int(r.n_diverged_b)}"
                if r.n_diverged_a > 0 or r.n_diverged_b > 0 else "")
    return f"{int(r.n_draws)} ({int(r.n_fewer)}/{int(r.n_more)}/{int(r.n_same)}/{int(r.n_open)}){diverged}"


def _study_best(r) -> str:
    if pd.isna(r.study_best_median):
        return "-"
    return f"{_number(r.study_best_median)} ({_number(r.study_best_min)}-{_number(r.study_best_max)})"


def write_block(path: Path, begin: str, end: str, text: str) -> None:
    """Replace what stands between the markers ``begin`` and ``end`` in ``path`` with ``text``, in one step: the
    page around the block is written by hand, so an interrupted rewrite must leave it whole."""
    content = path.read_text()
    if begin not in content or end not in content:
        raise ValueError(f"{path} has no {begin} ... {end} block")
    head, rest = content.split(begin, 1)
    write_atomic(path, f"{head}{begin}\n{text}{end}{rest.split(end, 1)[1]}")


def write_readme(readme: Path, text: str) -> None:
    write_block(readme, BEGIN, END, text)
