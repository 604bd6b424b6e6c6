"""Tables as Markdown, with numbers formatted for reading."""

import math
from pathlib import Path
from typing import Any, Iterable, Optional

import pandas as pd


def cell(value: Any, kind: str = "") -> str:
    """One value: ``count`` and ``seconds`` say 'not reached' for infinity; NaN is left empty."""
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        if math.isinf(value):
            return "not reached" if kind in ("count", "seconds") else "inf"
        if kind == "count":
            return f"{value:,.0f}"
        if kind == "seconds":
            return f"{value:,.1f}"
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"
    return str(value)


def table(frame: pd.DataFrame, kinds: Optional[dict[str, str]] = None) -> str:
    """A Markdown table; ``kinds`` maps a column to the kind of number in it (see :func:`cell`)."""
    kinds = kinds or {}
    head = "| " + " | ".join(frame.columns) + " |\n|" + "---|" * len(frame.columns) + "\n"
    body = "".join("| " + " | ".join(cell(v, kinds.get(c, "")) for c, v in row.items()) + " |\n"
                   for _, row in frame.iterrows())
    return head + body


def report_link(results: Path, folder: str) -> str:
    """A results folder as a reference link to its report.md (its target in :func:`link_targets`, so that a table
    cell holds only the folder's name), or its bare name while it has none (a sweep still running)."""
    return f"[{folder}]" if (results / folder / "report.md").exists() else folder


def link_targets(links: Iterable[str]) -> str:
    """The targets of :func:`report_link`'s links (the bare names among them link nowhere), one line each, for
    below the table that holds them."""
    folders = dict.fromkeys(link[1:-1] for link in links if link.startswith("[") and link.endswith("]"))
    return "".join(f"[{f}]: results/{f}/report.md\n" for f in folders)
