"""Tables as Markdown, with numbers formatted for reading."""

import math
import textwrap
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


def tables_within(frame: pd.DataFrame, kinds: Optional[dict[str, str]], keys: Iterable[str], width: int = 160) -> str:
    """``frame`` as Markdown tables whose header fits ``width`` characters: the columns beyond the first table's
    go into further tables, each led again by the ``keys`` columns that say which row is which."""
    keys = [k for k in keys if k in frame.columns]
    rest, parts, chunk = [c for c in frame.columns if c not in keys], [], []
    for column in rest:
        if chunk and len("| " + " | ".join([*keys, *chunk, column]) + " |") > width:
            parts.append(chunk)
            chunk = []
        chunk.append(column)
    parts.append(chunk)
    return "\n".join(table(frame[[*keys, *part]], kinds) for part in parts)


def wrap_prose(text: str, width: int = 120) -> str:
    """Markdown with its paragraphs and list items wrapped at ``width`` (a soft line break is a space to a
    renderer); tables, headings, images, link targets and code blocks are left as they are."""
    out, fenced = [], False
    for line in text.split("\n"):
        if line.startswith("```"):
            fenced = not fenced
        if fenced or len(line) <= width or line.startswith(("|", "#", "!", "[", "```", " ")):
            out.append(line)
        elif line.startswith("- "):
            out.append(textwrap.fill(line, width, subsequent_indent="  ", break_long_words=False,
                                     break_on_hyphens=False))
        else:
            out.append(textwrap.fill(line, width, break_long_words=False, break_on_hyphens=False))
    return "\n".join(out)

