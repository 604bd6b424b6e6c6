"""Read run directories (at any depth) into a table of trials and their metric curves.

A directory counts as a run when it holds any of the run files (config.yaml, metrics.jsonl, summary.json).
Runs that cannot be counted (interrupted, malformed, incomplete) are returned as :class:`Skipped` with the
reason, never silently dropped. A run is named by its path relative to the folder it was found under
(prefixed with that folder's name when several are given), so no table holds a path of the machine.
"""

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

import pandas as pd
import yaml

from echo_experiments.core.record import CONFIG_BYTES, RecordError, RunRecord, bounded_text, metric_rows
from echo_experiments.core.rundir import CONFIG, METRICS, SUMMARY
from echo_experiments.core.search_space import unit_position

# The record's fields a trial row holds, in the columns' order.
TRIAL_FIELDS = ("workload", "placement", "echo_factor", "batch_size", "shuffle_buffer", "seed", "study", "trial",
                "status", "steps", "fresh_examples", "wall_time_s", "fresh_examples_to_target", "steps_to_target",
                "seconds_to_target")
TIMING = ("upstream_s_per_batch", "downstream_s_per_step", "accelerator_idle_fraction", "other_cores")
# libyaml's parser where PyYAML was built with it: a report reads every run's config, and the pure-Python one
# spends most of a report's time there.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


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


def _read(directory: Path) -> tuple[RunRecord, list[dict[str, Any]]]:
    """The record and metric rows of a complete run; RecordError says why it cannot be counted."""
    record = RunRecord.read(directory / SUMMARY)
    if record.status == "failed":
        raise RecordError(f"failed ({record.error}): its command resumes it")
    return record, list(metric_rows(directory / METRICS))


def _config(directory: Path) -> dict[str, Any] | None:
    """The run's composed config, or None where it is missing or unreadable (what it would say is unknown,
    not guessed)."""
    try:
        config = yaml.load(bounded_text(directory / CONFIG, CONFIG_BYTES), Loader=_LOADER)
    except (OSError, RecordError, yaml.YAMLError, RecursionError):
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


def _effective_factor(record: RunRecord) -> float:
    """Examples trained per fresh example at the target (else at the end), recorded or (version 1) derived."""
    if record.effective_echo_factor is not None:
        return record.effective_echo_factor
    if record.reached and record.steps_to_target:
        return record.steps_to_target * record.batch_size / record.fresh_examples_to_target
    return record.steps * record.batch_size / record.fresh_examples if record.fresh_examples else math.nan


def _before_target(record: RunRecord, rows: list[dict[str, Any]]) -> dict[str, float]:
    """Where a reached run stood at the evaluation before the one that saw the target: its fresh examples (0
    before the first: the target was crossed somewhere after them, docs/protocol.md's censored reading) and the
    seconds from it to the target's (what one evaluation more or less would add or take away). NaN unless
    reached."""
    if not record.reached:
        return {"fresh_before_target": math.nan, "seconds_per_evaluation": math.nan}
    at = [i for i, r in enumerate(rows) if r.get("fresh_examples") == record.fresh_examples_to_target]
    before = rows[at[0] - 1] if at and at[0] > 0 else None
    elapsed = [r.get("elapsed_s") for r in (rows[at[0]] if at else None, before) if r is not None]
    span = elapsed[0] - elapsed[1] if len(elapsed) == 2 and None not in elapsed else math.nan
    return {"fresh_before_target": float(before["fresh_examples"]) if before else 0.0,
            "seconds_per_evaluation": float(span)}


def store_name(storage: Any) -> str:
    """What a run read through, in a few words (its config's storage section): a timing belongs to its store, and
    seconds on two stores are never set against each other (tables.study_seconds). "unknown" where the run's
    config does not say."""
    if not isinstance(storage, dict):
        return "unknown"
    kind = storage.get("kind", "local")
    if kind == "local":
        return "local"
    schedule = storage.get("latency_schedule")
    latency = (" then ".join(f"{ms:g} ms for {n:g} reads" for n, ms in schedule) if schedule
               else f"{storage.get('latency_ms', 0):g} ms")
    bandwidth = f", {storage['bandwidth_mb_s']:g} MB/s" if storage.get("bandwidth_mb_s") else ""
    return (f"{kind}: {latency} per {storage.get('read_unit', 'record')}{bandwidth}, "
            f"{storage.get('parallel_reads', 1)} at a time")


def _select(config: dict[str, Any] | None, *keys: str) -> Any:
    """A value of the run's config, or NaN where the config does not say."""
    try:
        for key in keys:
            config = config[key]
    except (KeyError, TypeError):
        return math.nan
    return config


def _cap_rule(record: RunRecord, config: dict[str, Any] | None) -> str:
    """The rule that moved the autopilot's cap, "fixed" where none did; a record made before it said so is read
    from its config's echo.cap."""
    rule = record.echo_cap_rule or (_select(config, "echo", "cap") if record.echo_auto else None)
    return rule if isinstance(rule, str) else "fixed"


def _planned(record: RunRecord, config: dict[str, Any] | None, key: str) -> float:
    """What a study run's sweep plans (tuning.trials: the trials its study draws; tuning.studies), or NaN where
    the run is in no study or its config does not say."""
    try:
        return float(config["tuning"][key]) if record.study is not None else math.nan
    except (KeyError, TypeError, ValueError):
        return math.nan


def collect(paths: Iterable[Path | str]) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, list[Skipped]]:
    """(trials, curves, search, skipped): one trial row per complete run, its metric rows, each study trial's
    drawn values with their place in the search range, and what was left out."""
    trials, curves, skipped, search = [], [], [], []
    for directory, name in run_dirs(paths):
        try:
            record, rows = _read(directory)
        except RecordError as e:
            skipped.append(Skipped(name, str(e)))
            continue
        target = record.target
        values = [r[target.metric] for r in rows if r.get(target.metric) is not None]
        best = (max if target.mode == "max" else min)(values) if values else math.nan
        config = _config(directory)
        trials.append({
            **{k: getattr(record, k) for k in TRIAL_FIELDS},
            # The autopilot is its own condition (tables.CONDITION): its placement, and its cap as the most it may
            # train an example, where a fixed factor's is its factor.
            "echo_auto": bool(record.echo_auto),
            "echo_max_factor": record.echo_max_factor if record.echo_auto else record.echo_factor,
            "echo_cap_rule": _cap_rule(record, config),
            "study_key": _study_key(record, name), "study_trials": _planned(record, config, "trials"),
            "planned_studies": _planned(record, config, "studies"), "target_metric": target.metric,
            "target_value": target.value, "target_mode": target.mode,
            "best_metric": best,
            **{k: getattr(record, k) for k in TIMING},
            "effective_echo_factor": _effective_factor(record),
            **_before_target(record, rows),
            "eval_every_fresh_examples": _select(config, "trainer", "eval_every_fresh_examples"),
            "store": store_name(_select(config, "storage")),
            "cpu": (record.machine or {}).get("cpu"),
            "path": name,
        })
        curves += [{"path": name, **r} for r in rows]
        if record.study is not None:
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


def _study_key(record: RunRecord, name: str) -> str:
    """Trials of one search share a key; a run outside a study is a one-trial study of its own."""
    if record.study is None:
        return f"run:{name}"
    return f"study:{0 if record.tuning_seed is None else record.tuning_seed}:{record.study}"

