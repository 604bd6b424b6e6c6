"""The committed sweep folders a verdict reads: each one's trials (read once) and its report as a link."""

from pathlib import Path
from typing import Iterable, Optional

import pandas as pd

from echo_experiments.report.collect import collect


def results_trials(results: Path, folders: Iterable[str]) -> dict[str, Optional[pd.DataFrame]]:
    """The trials of each results/<sweep>/<workload> folder's runs/, each folder read once (None: no runs/)."""
    return {folder: collect([results / folder / "runs"])[0] if (results / folder / "runs").is_dir() else None
            for folder in dict.fromkeys(folders)}


def committed_folders(results: Path) -> list[str]:
    """Every results/<sweep>/<workload> folder that holds runs/, by name."""
    return sorted(f"{runs.parent.parent.name}/{runs.parent.name}" for runs in results.glob("*/*/runs") if runs.is_dir())


def report_link(results: Path, folder: str) -> str:
    """A results folder as a reference link to its report.md (its target in :func:`link_targets`, so that a table
    cell holds only the folder's name), or its bare name while it has none (a sweep still running)."""
    return f"[{folder}]" if (results / folder / "report.md").exists() else folder


def link_targets(links: Iterable[str]) -> str:
    """The targets of :func:`report_link`'s links (the bare names among them link nowhere), one line each, for
    below the table that holds them."""
    folders = dict.fromkeys(link[1:-1] for link in links if link.startswith("[") and link.endswith("]"))
    return "".join(f"[{f}]: results/{f}/report.md\n" for f in folders)
