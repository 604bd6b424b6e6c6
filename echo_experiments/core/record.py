"""The run record: a run's summary.json as one typed dataclass, and its metrics.jsonl rows, checked.

It is the contract between the trainer (which writes it), the tuner (pruning reads the records of a study),
the reporter, TensorBoard's outcome, retime and archive/restore (which read them). Reading checks every field
it holds (type, finite numbers, structure) and raises :class:`RecordError` with the reason, so a damaged file
is reported as such and never passes for a result.

Versions: 1 (no ``schema_version`` field) is every record made before the machine and the effective echo
factor were recorded; 2 adds ``machine``, ``examples_trained_to_target`` and ``effective_echo_factor`` (and,
optional, the autopilot's ``echo_auto`` and ``echo_copied_batches``); 3 gives the autopilot's cap a field of its
own, ``echo_max_factor`` (echo.max_factor), where 2 held it in ``echo_factor``: an older autopilot record is read
as version 3 would say it (``echo_factor`` 1, its stage's factor, and the cap in ``echo_max_factor``). A record of
a version this code does not know is refused with its number.
"""

import json
import math
import os
import stat
import typing
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Iterator, Optional, Union

from echo_experiments.core.placement import PLACEMENTS

SCHEMA_VERSION = 3
STATUSES = ("reached_target", "not_reached", "pruned", "diverged", "failed")
MODES = ("max", "min")
# What the copy-worth estimate's ``copy_worth`` holds besides the copied share (training/worth.py says each).
COPY_WORTH_CANDIDATES = ("alignment", "loss_ratio", "noise", "loss_drop")


class RecordError(ValueError):
    """A run file that cannot be read as a run: str() says which field and why."""


# The most a run's files are read of: far beyond what a run writes (an LM run's metrics.jsonl of 10,000
# evaluations is about 5 MB), short of what would exhaust memory.
SUMMARY_BYTES = 1 << 20
METRICS_BYTES = 64 << 20
CONFIG_BYTES = 1 << 20


def bounded_text(path: Path | str, limit: int) -> str:
    """A file a run wrote, as text: a regular file (not a link, a FIFO or a device, which could block or never
    end) of at most ``limit`` bytes, in UTF-8. FileNotFoundError where there is none; RecordError naming the
    file and what it is otherwise."""
    name = Path(path).name
    try:
        info = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        raise
    except OSError as e:
        raise RecordError(f"{name} cannot be read ({e.strerror})") from None
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISREG(info.st_mode):
        raise RecordError(f"{name} is {'a link' if stat.S_ISLNK(info.st_mode) else 'not a regular file'}, not a "
                          "file a run writes")
    if info.st_size > limit:
        raise RecordError(f"{name} is {info.st_size:,} bytes, more than a run writes ({limit:,} at most)")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as f:
            data = f.read(limit + 1)
    except OSError as e:
        raise RecordError(f"{name} cannot be read ({e.strerror})") from None
    if len(data) > limit:
        raise RecordError(f"{name} grew past {limit:,} bytes while read")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise RecordError(f"{name} is not UTF-8 text (byte {e.start})") from None


@dataclass(frozen=True)
class Target:
    """The out-of-sample value a run must reach: ``metric`` at least (max) or at most (min) ``value``."""

    metric: str
    value: float
    mode: str = "max"

    def reached(self, metrics: dict[str, float]) -> bool:
        if self.metric not in metrics:
            return False
        got = metrics[self.metric]
        return got >= self.value if self.mode == "max" else got <= self.value

    def as_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "value": self.value, "mode": self.mode}

    def described(self) -> str:
        """The target in words: ``accuracy >= 0.875``."""
        return f"{self.metric} {'>=' if self.mode == 'max' else '<='} {self.value:g}"


@dataclass(frozen=True)
class RunRecord:
    """What a finished run says of itself (summary.json). ``study``/``trial`` are None outside a tuning study;
    the ``*_to_target`` fields are None unless the target was reached."""

    workload: str
    placement: str
    echo_factor: float
    batch_size: int
    shuffle_buffer: int
    seed: int
    study: Optional[int]
    trial: Optional[int]
    status: str
    steps: int
    fresh_examples: int
    wall_time_s: float
    target: Target
    fresh_examples_to_target: Optional[int]
    steps_to_target: Optional[int]
    seconds_to_target: Optional[float]
    tuning_seed: Optional[int] = None
    examples_trained: Optional[int] = None
    examples_trained_to_target: Optional[int] = None
    # Examples trained per fresh example at the target (else at the end): the factor really echoed at.
    effective_echo_factor: Optional[float] = None
    # echo.factor=auto: the autopilot echoed, up to echo.max_factor, copying this many batches (echo_factor is 1:
    # it has no echo stage).
    echo_auto: bool = False
    echo_copied_batches: Optional[int] = None
    echo_max_factor: Optional[float] = None
    # The rule that moved the autopilot's cap (echo.cap: trend, paired; None: the cap was echo.max_factor).
    echo_cap_rule: Optional[str] = None
    elapsed_s: Optional[float] = None
    startup_s: Optional[float] = None
    eval_time_s: Optional[float] = None
    checkpoint_time_s: Optional[float] = None
    compile_time_s: Optional[float] = None
    other_cores: Optional[float] = None
    devices: Optional[int] = None
    precision: Optional[str] = None
    final_metrics: dict[str, Optional[float]] = field(default_factory=dict)
    # trainer.copy_worth_every: the copy-worth estimate's candidates, each its median over the evaluations
    # (training/worth.py); empty without it.
    copy_worth: dict[str, Optional[float]] = field(default_factory=dict)
    upstream_s_per_batch: Optional[float] = None
    downstream_s_per_step: Optional[float] = None
    upstream_downstream_ratio: Optional[float] = None
    recommended_echo_factor: Optional[float] = None
    accelerator_idle_fraction: Optional[float] = None
    input_slowdown: Optional[float] = None  # training/timing.py: the median over evaluations
    # Without echoing, the share of a step's wall time spent waiting for input (1 - 1/R) and XProf's class of it
    # (core/input_bound.py); None where R was not measured.
    input_wait_share: Optional[float] = None
    input_bound: Optional[str] = None
    machine: Optional[dict[str, Any]] = None
    error: Optional[str] = None
    schema_version: int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        for f in fields(self):
            _check(f.name, getattr(self, f.name), _HINTS[f.name])
        if self.status not in STATUSES:
            raise RecordError(f"status {self.status!r} is not one of {', '.join(STATUSES)}")
        if self.placement not in PLACEMENTS:
            raise RecordError(f"placement {self.placement!r} is not one of {', '.join(PLACEMENTS)}")
        if self.status == "reached_target" and self.fresh_examples_to_target is None:
            raise RecordError("status reached_target without fresh_examples_to_target")
        if self.target.mode not in MODES:
            raise RecordError(f"target mode {self.target.mode!r} is not max or min")

    @property
    def reached(self) -> bool:
        return self.status == "reached_target"

    @classmethod
    def from_json(cls, data: Any) -> "RunRecord":
        """A record from summary.json's content; RecordError names the first field that is wrong."""
        if not isinstance(data, dict):
            raise RecordError("not a JSON object")
        data = {"schema_version": 1, **data}
        version = data["schema_version"]
        if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version <= SCHEMA_VERSION:
            raise RecordError(f"schema_version {json.dumps(version, default=str)[:20]} is not one this code reads "
                              f"(1 to {SCHEMA_VERSION}): read it with the version of echo_experiments that wrote it")
        if version < 3 and data.get("echo_auto") and "echo_factor" in data and data.get("echo_max_factor") is None:
            data = {**data, "echo_factor": 1.0, "echo_max_factor": data["echo_factor"]}
        required = [f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING]
        missing = [k for k in required if k not in data]
        if missing:
            raise RecordError(f"lacks {', '.join(missing)}")
        target = data["target"]
        if not (isinstance(target, dict) and {"metric", "value", "mode"} <= set(target)):
            raise RecordError("target lacks metric, value, mode")
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known and k != "target"},
                   target=Target(target["metric"], target["value"], target["mode"]))

    def to_json(self) -> dict[str, Any]:
        """summary.json's content: floats JSON cannot hold (nan, inf) as null."""
        return jsonable(asdict(self))

    @classmethod
    def read(cls, path: Path | str) -> "RunRecord":
        """The record in a summary.json; RecordError when it is missing, not JSON, or not a record."""
        try:
            text = bounded_text(path, SUMMARY_BYTES)
        except FileNotFoundError:
            raise RecordError("no summary.json (an interrupted run)") from None
        try:
            data = json.loads(text)
        except ValueError as e:
            raise RecordError(f"summary.json is not JSON ({e})") from None
        except RecursionError:
            raise RecordError("summary.json is not a record (nested too deep to read)") from None
        try:
            return cls.from_json(data)
        except RecordError as e:
            raise RecordError(f"summary.json: {e}") from None


_HINTS = typing.get_type_hints(RunRecord)


def _check(name: str, value: Any, hint: Any) -> None:
    """RecordError unless ``value`` has the type ``hint`` allows (numbers finite, ints not bools)."""
    if typing.get_origin(hint) is Union:
        options = typing.get_args(hint)
        if value is None and type(None) in options:
            return
        hint = next(o for o in options if o is not type(None))
    origin = typing.get_origin(hint) or hint
    if hint is float:
        ok = _number(value)
    elif hint is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif hint is Target:
        ok = isinstance(value, Target) and isinstance(value.metric, str) and _number(value.value)
    elif origin is dict:
        ok = isinstance(value, dict)
        if ok and name in ("final_metrics", "copy_worth"):
            ok = all(v is None or _number(v) for v in value.values())
    else:
        ok = isinstance(value, origin)
    if not ok:
        raise RecordError(f"{name} is {json.dumps(value, default=str)[:60]}, not {_describe(hint)}")


def _describe(hint: Any) -> str:
    return {float: "a finite number", int: "an integer", str: "a string", Target: "a metric, value and mode"}.get(
        hint, "a mapping of finite numbers" if typing.get_origin(hint) is dict else str(hint))


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def jsonable(value: Any) -> Any:
    """``value`` with the floats JSON cannot hold (nan, inf) as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value


# --- metrics.jsonl ----------------------------------------------------------------------------------------

ROW_COUNTS = ("step", "fresh_examples")


def metric_rows(path: Path | str) -> Iterator[dict[str, Any]]:
    """metrics.jsonl's rows, each checked: a JSON object with integer ``step`` and ``fresh_examples`` and every
    other value a finite number or null. RecordError names the first line that is not."""
    try:
        lines = bounded_text(path, METRICS_BYTES).splitlines()
    except FileNotFoundError:
        return
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except (ValueError, RecursionError):
            raise RecordError(f"metrics.jsonl line {i} is not JSON") from None
        problem = row_problem(row)
        if problem:
            raise RecordError(f"metrics.jsonl line {i}: {problem}")
        yield row


def row_problem(row: Any) -> Optional[str]:
    """Why a metrics row is not one (None when it is)."""
    if not isinstance(row, dict):
        return "not a JSON object"
    for key in ROW_COUNTS:
        if not (isinstance(row.get(key), int) and not isinstance(row.get(key), bool)):
            return f"{key} is {json.dumps(row.get(key))[:40]}, not an integer"
    bad = [k for k, v in row.items() if v is not None and not _number(v)]
    return f"{bad[0]} is {json.dumps(row[bad[0]])[:40]}, not a finite number" if bad else None
