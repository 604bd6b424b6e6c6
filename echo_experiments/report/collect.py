"""Read run directories (at any depth) into a table of trials and their metric curves.

A directory counts as a run when it holds any of the run files (config.yaml, metrics.jsonl, summary.json).
Runs that cannot be counted (interrupted, malformed, incomplete) are returned as :class:`Skipped` with the
reason, never silently dropped. A run is named by its path relative to the folder it was found under
(prefixed with that folder's name when several are given), so no table holds a path of the machine.
"""

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

import pandas as pd
import yaml

from echo_experiments.runs import CONFIG, METRICS, STATUSES, SUMMARY
from echo_experiments.tuning import unit_position

REQUIRED = ("workload", "placement", "echo_factor", "batch_size", "shuffle_buffer", "seed", "study", "trial",
            "status", "steps", "fresh_examples", "wall_time_s", "target", "fresh_examples_to_target",
            "steps_to_target", "seconds_to_target")
TIMING = ("upstream_s_per_batch", "downstream_s_per_step", "accelerator_idle_fraction", "other_cores")


@dataclass(frozen=True)
class Skipped:
    path: str
    reason: str


def run_dirs(paths: Iterable[Path | str]) -> Iterator[tuple[Path, str]]:
    """Every run directory under the given paths, each once, in sorted order, with the name it is shown by."""
    roots = [Path(p) for p in paths]
    found: dict[Path, str] = {}
    for root in roots:
        if not root.exists():
            continue
        base = root.resolve()
        candidates = [root] if root.is_dir() else []
        candidates += [p.parent for name in (SUMMARY, METRICS, CONFIG) for p in root.rglob(name)]
        for d in candidates:
            if ".hydra" in d.parts or not any((d / name).exists() for name in (SUMMARY, METRICS, CONFIG)):
                continue
            relative = d.resolve().relative_to(base).as_posix()
            name = f"{base.name}/{relative}" if len(roots) > 1 or relative == "." else relative
            found.setdefault(d.resolve(), name.removesuffix("/."))
    yield from sorted(found.items())


def _read_summary(directory: Path) -> dict[str, Any]:
    """The summary of a complete run; ValueError says why it cannot be counted."""
    path = directory / SUMMARY
    if not path.exists():
        raise ValueError("interrupted: no summary.json")
    try:
        summary = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"malformed summary.json: {e}") from None
    if not isinstance(summary, dict):
        raise ValueError("malformed summary.json: not a JSON object")
    missing = [k for k in REQUIRED if k not in summary]
    if missing:
        raise ValueError(f"summary.json lacks {', '.join(missing)}")
    if summary["status"] not in STATUSES:
        raise ValueError(f"unknown status {summary['status']!r}")
    if summary["status"] == "reached_target" and not _is_number(summary["fresh_examples_to_target"]):
        raise ValueError("reached_target without fresh_examples_to_target")
    target = summary["target"]
    if not (isinstance(target, dict) and {"metric", "value", "mode"} <= set(target)):
        raise ValueError("summary.json target lacks metric, value, mode")
    return summary


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _read_metrics(directory: Path) -> list[dict[str, Any]]:
    path = directory / METRICS
    if not path.exists():
        return []
    rows = []
    for i, line in enumerate(path.read_text().splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                raise ValueError(f"malformed metrics.jsonl line {i}") from None
    return rows


def _config(directory: Path) -> dict[str, Any] | None:
    """The run's composed config, or None where it is missing or unreadable (what it would say is unknown,
    not guessed)."""
    try:
        config = yaml.safe_load((directory / CONFIG).read_text())
    except (OSError, yaml.YAMLError):
        return None
    return config if isinstance(config, dict) else None


def _search(config: dict[str, Any] | None, name: str) -> list[dict[str, Any]]:
    """A study trial's drawn values, each with where it lies in its search range (0 = low, 1 = high)."""
    try:
        rows = []
        for d in config["workload"]["search_space"]:
            value = config
            for part in d["key"].split("."):
                value = value[part]
            rows.append({"path": name, "key": d["key"], "value": value, "low": d["low"], "high": d["high"],
                         "scale": d["scale"], "position": unit_position(float(value), float(d["low"]),
                                                                       float(d["high"]), d["scale"])})
        return rows
    except (KeyError, TypeError, ValueError):
        return []


def _study_trials(config: dict[str, Any] | None) -> float:
    """The trials its study draws (tuning.trials), or NaN where the config does not say."""
    try:
        return float(config["tuning"]["trials"])
    except (KeyError, TypeError, ValueError):
        return math.nan


def collect(paths: Iterable[Path | str]) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, list[Skipped]]:
    """(trials, curves, search, skipped): one trial row per complete run, its metric rows, each study trial's
    drawn values with their place in the search range, and what was left out."""
    trials, curves, skipped, search = [], [], [], []
    for directory, name in run_dirs(paths):
        try:
            summary = _read_summary(directory)
            rows = _read_metrics(directory)
        except ValueError as e:
            skipped.append(Skipped(name, str(e)))
            continue
        target = summary["target"]
        values = [r[target["metric"]] for r in rows if _is_number(r.get(target["metric"]))]
        best = (max if target["mode"] == "max" else min)(values) if values else math.nan
        config = _config(directory) if summary["study"] is not None else None
        trials.append({
            **{k: summary[k] for k in REQUIRED if k != "target"},
            "study_key": _study_key(summary, name), "study_trials": _study_trials(config),
            "target_metric": target["metric"], "target_value": target["value"], "target_mode": target["mode"],
            "best_metric": best,
            **{k: summary.get(k) for k in TIMING},
            "path": name,
        })
        curves += [{"path": name, **r} for r in rows]
        if summary["study"] is not None:
            search += _search(config, name)
    trials, curves = pd.DataFrame(trials), pd.DataFrame(curves)
    trials, off_target = _one_target_per_workload(trials)
    if off_target:
        skipped += off_target
        curves = curves[curves["path"].isin(trials["path"])]
    search = pd.DataFrame(search, columns=["path", "key", "value", "low", "high", "scale", "position"])
    return trials, curves, search[search["path"].isin(trials["path"])] if len(trials) else search, skipped


def _one_target_per_workload(trials: pd.DataFrame) -> tuple[pd.DataFrame, list[Skipped]]:
    """Fresh examples to different targets cannot be pooled: keep each workload's most common target."""
    if trials.empty:
        return trials, []
    target = trials["target_metric"] + trials["target_mode"].map({"max": ">=", "min": "<="}) \
        + trials["target_value"].map(lambda v: f"{v:g}")
    keep = target == target.groupby(trials["workload"]).transform(lambda t: t.value_counts().index[0])
    usual = target[keep].groupby(trials["workload"][keep]).first()
    skipped = [Skipped(p, f"its target {t} differs from the other {w} runs' {usual[w]}")
               for p, t, w in zip(trials["path"][~keep], target[~keep], trials["workload"][~keep])]
    return trials[keep].reset_index(drop=True), skipped


def _study_key(summary: dict[str, Any], name: str) -> str:
    """Trials of one search share a key; a run outside a study is a one-trial study of its own."""
    if summary["study"] is None:
        return f"run:{name}"
    return f"study:{summary.get('tuning_seed', 0)}:{summary['study']}"
