"""Run directories: the contract between the trainer, the tuner and the reporter.

    config.yaml     the fully resolved config
    metrics.jsonl   one JSON object per evaluation, flushed as written (a killed run keeps them)
    summary.json    written once, atomically, when the run ends; its absence marks an interrupted run
"""

import json
import math
import os
import shutil
import socket
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator, Optional

from filelock import FileLock, Timeout
from omegaconf import DictConfig, OmegaConf

CONFIG, METRICS, SUMMARY = "config.yaml", "metrics.jsonl", "summary.json"
LOCK, HOLDER = ".lock", ".lock.holder"
# Keys that say how to run, not what: a rerun may change them without making the run another config. A run
# resumed from a checkpoint goes on as if never stopped, so how often it checkpoints changes no result.
HOW_TO_RUN = ("trainer.restart", "trainer.progress", "trainer.checkpoint_every_seconds",
              "trainer.checkpoint_every_steps")
STATUSES = ("reached_target", "not_reached", "pruned", "diverged", "failed")
# What makes two runs the same condition, and what makes them trials of one study (with the target).
CONDITION = ("workload", "placement", "echo_factor", "batch_size", "shuffle_buffer")
STUDY = CONDITION + ("tuning_seed", "study")


class RunDirInUse(RuntimeError):
    """Another process holds the run directory; str() is the one line shown to the user."""


def write_atomic(path: Path, text: str) -> None:
    """Write a file so that readers see either the old content or all of the new, never a part; with the
    permissions the user's umask gives any other file (mkstemp alone makes it 0600)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _jsonable(value: Any) -> Any:
    """Floats that JSON cannot hold (nan, inf) become null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


class RunDir:
    """One run's directory."""

    def __init__(self, path: Path | str):
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)

    def hold(self) -> "RunDir":
        """Take the directory for this process (released on exit, and by the kernel if the process dies, so a
        lock left by a killed run never blocks); RunDirInUse naming the holder if another process has it."""
        self._lock = FileLock(self.path / LOCK, timeout=0)
        try:
            self._lock.acquire()
        except Timeout:
            holder = (self.path / HOLDER).read_text().strip() if (self.path / HOLDER).exists() else "another process"
            raise RunDirInUse(f"{self.path} is in use by {holder}: wait for it to end, or choose another "
                              "hydra.run.dir") from None
        (self.path / HOLDER).write_text(f"process {os.getpid()} on {socket.gethostname()} since "
                                        f"{time.strftime('%Y-%m-%d %H:%M:%S')}\n")
        return self

    def release(self) -> None:
        lock = getattr(self, "_lock", None)
        if lock is not None and lock.is_locked:
            (self.path / HOLDER).unlink(missing_ok=True)
            lock.release()

    def clear(self) -> None:
        """Forget an earlier attempt (trainer.restart=true): its summary, metrics, event files and checkpoints."""
        for name in (SUMMARY, METRICS):
            (self.path / name).unlink(missing_ok=True)
        for name in ("checkpoints", "tb"):
            shutil.rmtree(self.path / name, ignore_errors=True)

    def start(self, cfg: DictConfig) -> None:
        """Begin (or begin again) a run: write its config; rows of an interrupted attempt are dropped."""
        write_atomic(self.path / CONFIG, OmegaConf.to_yaml(cfg, resolve=True))
        (self.path / METRICS).unlink(missing_ok=True)

    def keep_metrics_until(self, step: int) -> None:
        """Drop the rows written after ``step`` (a run resuming from its checkpoint there writes them again)."""
        rows = [r for r in self.metrics() if r["step"] <= step]
        write_atomic(self.path / METRICS, "".join(json.dumps(r) + "\n" for r in rows))

    def append_metrics(self, row: dict[str, Any]) -> None:
        with open(self.path / METRICS, "a") as f:
            f.write(json.dumps(_jsonable(row)) + "\n")
            f.flush()

    def write_summary(self, summary: dict[str, Any]) -> None:
        if summary.get("status") not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {summary.get('status')!r}")
        write_atomic(self.path / SUMMARY, json.dumps(_jsonable(summary), indent=2) + "\n")

    def differences(self, cfg: DictConfig) -> list[str]:
        """The dotted keys at which this run's stored config differs from ``cfg`` ([] if none is stored).

        Keys the stored config lacks do not count: they were added to the schema after the run was made,
        and their defaults keep the behaviour the run had."""
        path = self.path / CONFIG
        if not path.exists():
            return []
        stored = OmegaConf.to_container(OmegaConf.load(path))
        return [k for k in _diff(stored, OmegaConf.to_container(cfg, resolve=True)) if k not in HOW_TO_RUN]

    def summary(self) -> Optional[dict[str, Any]]:
        path = self.path / SUMMARY
        return json.loads(path.read_text()) if path.exists() else None

    def metrics(self) -> Iterator[dict[str, Any]]:
        path = self.path / METRICS
        if path.exists():
            with open(path) as f:
                for line in f:
                    if line.strip():
                        yield json.loads(line)


def read_summary(path: Path) -> Optional[dict[str, Any]]:
    """A summary.json's content, or None when it is missing or unreadable (being written, or broken)."""
    try:
        summary = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return summary if isinstance(summary, dict) else None


def study_best(sweep_dir: Path, trial: dict[str, Any]) -> Optional[int]:
    """The fewest fresh examples to target among the finished trials of ``trial``'s study in ``sweep_dir``
    (its sibling run directories): same condition, study and target. None before any reached it."""
    best = None
    for path in Path(sweep_dir).glob(f"*/{SUMMARY}"):
        other = read_summary(path)
        if (other and other.get("status") == "reached_target" and other.get("target") == trial["target"]
                and all(other.get(k) == trial[k] for k in STUDY)):
            fresh = other.get("fresh_examples_to_target")
            if isinstance(fresh, int) and (best is None or fresh < best):
                best = fresh
    return best


def _diff(stored: Any, current: Any, prefix: str = "") -> list[str]:
    if isinstance(stored, dict) and isinstance(current, dict):
        return [k for key in sorted(stored, key=str)
                for k in _diff(stored[key], current.get(key), f"{prefix}{key}.")]
    return [] if stored == current else [prefix.rstrip(".")]
