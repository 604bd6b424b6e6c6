"""The README's findings line: what the committed runs found, in a sentence a reader meets on the first screen,
made from results/claims.csv and results/autopilot.csv like the tables below it (so it cannot say more than
they do)."""

import textwrap

import pandas as pd

from paper.verdicts.autopilot_checks import INCONCLUSIVE, MET, NOT_MEASURED, NOT_MET
from paper.verdicts.claims import BASELINE, CLAIMS, NOT_REPRODUCED, REPRODUCED

BEGIN = "<!-- findings:begin (made by make figures from results/claims.csv and results/autopilot.csv) -->"
END = "<!-- findings:end -->"
# The claim whose comparisons are seconds to target: the paper's headline.
WALL_CLOCK = "C3"
# The README's width.
WIDTH = 116


def findings(claims: pd.DataFrame, checks: pd.DataFrame) -> str:
    """The verdicts counted (the paper's claims apart from the rows held against its published number and the
    findings of ours), the wall-clock headline at the largest factor measured with what one evaluation of the
    echoed side moves, the autopilot's checks."""
    against = claims["short"].astype(str).str.contains("vs the paper's")
    mine = claims["verdict"].astype(str).str.startswith("ours")
    theirs = claims[~against & ~mine]
    counts = theirs["verdict"].value_counts()
    rest = len(theirs) - counts.get(REPRODUCED, 0) - counts.get(NOT_REPRODUCED, 0)
    text = (f"**What the runs found.** Of the paper's {len(CLAIMS)} claims, measured as {len(theirs)} comparisons on "
            f"CPU-sized workloads and judged by rules written before the data (changed since as "
            f"[listed](results/rule_changes.csv)): **{counts.get(REPRODUCED, 0)} reproduced, {rest} inconclusive, "
            f"{counts.get(NOT_REPRODUCED, 0)} not reproduced**.")
    paper = {c.name: c.paper for claim in CLAIMS if claim.id == WALL_CLOCK for c in claim.comparisons}
    headline = {c.name for claim in CLAIMS if claim.id == WALL_CLOCK for c in claim.comparisons
                if c.b == BASELINE and not c.paper}  # each factor against no echoing
    for workload, rows in claims[claims["claim"] == WALL_CLOCK].groupby("workload", sort=False):
        faster = rows[[c in headline for c in rows["comparison"]]]
        r = faster.iloc[-1]  # the largest factor
        if pd.isna(r["ci_low"]):  # no study timed yet: nothing measured to say but that
            text += f" The wall-clock speedup on `{workload}` is not measured yet."
            continue
        text += (f" The wall-clock speedup at {r['short']} on `{workload}` is "
                 f"{r['effect']:.2f}x [{r['ci_low']:.2f}, {r['ci_high']:.2f}] ({r['verdict']}{_grid(r)})")
        for m in rows[[bool(paper.get(c)) for c in rows["comparison"]]].itertuples():
            text += f"; {m.verdict} the paper's {paper[m.comparison]:g}x"
        text += "."
    if mine.any():
        said = "; ".join(f"{r.short} on `{r.workload}`: {r.verdict}" for r in claims[mine].itertuples())
        text += f" Findings of ours, which the paper does not claim: {said}."
    named = [f"{v}: {', '.join(checks.loc[checks['verdict'] == v, 'check'])}"
             for v in (MET, NOT_MET, INCONCLUSIVE, NOT_MEASURED) if (checks["verdict"] == v).any()]
    met = int((checks["verdict"] == MET).sum())
    text += f" The autopilot (`echo.factor=auto`) met {met} of its {len(checks)} checks"
    text += f" ({'; '.join(named)})." if named else "."
    return textwrap.fill(text, WIDTH, break_long_words=False, break_on_hyphens=False) + "\n"


def _grid(r: pd.Series) -> str:
    """One evaluation of the echoed side later and earlier in every study, where it was measured."""
    later, earlier = r.get("later"), r.get("earlier")
    if later is None or earlier is None or pd.isna(later) or pd.isna(earlier):
        return ""
    return f"; {later:.2f}x with the echoed runs one evaluation later, {earlier:.2f}x one earlier"
