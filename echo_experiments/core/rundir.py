"""Run directories, the contract between the trainer, the tuner and the reporter, and their lifecycle.

    config.yaml     the fully resolved config
    metrics.jsonl   one JSON object per evaluation, flushed as written (a killed run keeps them)
    summary.json    the run record (record.py), written once, atomically, when the run ends; its absence marks
                    an interrupted run
    checkpoints/    Orbax checkpoints of an unfinished run (checkpoints.py); tb/ its TensorBoard event files

One process holds a run directory at a time (:meth:`RunDir.hold`). :meth:`RunDir.begin` decides what a
start means: a complete run is left alone, an interrupted or failed one resumes, one made with another config
is refused, and ``trainer.restart=true`` starts over.
"""

import errno
import json
import logging
import os
import shutil
import socket
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator, Mapping, Optional

from filelock import FileLock, Timeout
from omegaconf import OmegaConf

from echo_experiments.core.record import RecordError, RunRecord, Target, jsonable, metric_rows, row_problem
from echo_experiments.core.schema import ConfigError

log = logging.getLogger(__name__)

CONFIG, METRICS, SUMMARY = "config.yaml", "metrics.jsonl", "summary.json"
LOCK, HOLDER = ".lock", ".lock.holder"
# The run's own folders: its checkpoints and its TensorBoard events. A sweep folder's TIMED holds its study-best
# trials timed again, alone, each the same trial as its tuning run (the reporter counts it once).
CHECKPOINTS, TB, TIMED = "checkpoints", "tb", "timed"
# Keys that say how to run, not what: a rerun may change them without making the run another config. A run
# resumed from a checkpoint goes on as if never stopped, so how often it checkpoints changes no result.
HOW_TO_RUN = ("trainer.restart", "trainer.progress", "trainer.checkpoint_every_seconds",
              "trainer.checkpoint_every_steps")
# What makes two runs the same condition, and what makes them trials of one study (with the target).
CONDITION = ("workload", "placement", "echo_factor", "batch_size", "shuffle_buffer")
# The autopilot (echo_auto) of another cap (echo_max_factor) or rule for it (echo_cap_rule) is another condition.
STUDY = CONDITION + ("echo_auto", "echo_max_factor", "echo_cap_rule", "tuning_seed", "study")


class RunDirInUse(RuntimeError):
    """Another process holds the run directory; str() is the one line shown to the user."""


class DiskFull(RuntimeError):
    """The disk filled up while the run wrote to its directory; str() is the one line shown to the user."""

    @staticmethod
    def caused(error: BaseException) -> bool:
        """Whether ``error`` (or one it was raised from) is a full disk or an exceeded quota."""
        while error is not None:
            if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
                return True
            if "No space left on device" in str(error):  # Orbax and TensorFlow wrap the OSError in their own
                return True
            error = error.__cause__ or error.__context__
        return False


# What a folder must take before a run starts in it: the config Hydra writes and the first records and logs.
PROBE_BYTES = 2**20


def unwritable(path: Path | str) -> Optional[str]:
    """Why a folder could not be made and written (None: it could): a name too long for its file system, or a
    nearest existing folder in which nothing can be made, or not PROBE_BYTES written (tried in a temporary folder,
    removed at once)."""
    path = Path(path).absolute()
    longest = max((len(part.encode()) for part in path.parts), default=0)
    if longest > 255:  # NAME_MAX of the common file systems; a longer name fails before any is asked
        return f"a name in it is {longest} bytes long, more than a file system allows (255)"
    existing = next(p for p in (path, *path.parents) if os.path.lexists(p))
    if not existing.is_dir():
        return f"{existing} is not a folder"
    try:
        probe = tempfile.mkdtemp(dir=existing, prefix=".echo-check-")
    except OSError as e:
        return f"nothing can be made in {existing}: {e.strerror}"
    try:  # a full disk still makes an empty folder: the files a run writes first are what must fit
        with open(os.path.join(probe, "probe"), "wb") as f:
            f.write(bytes(PROBE_BYTES))
    except OSError as e:
        return f"{PROBE_BYTES // 2**20} MiB cannot be written in {existing}: {e.strerror}"
    finally:
        shutil.rmtree(probe, ignore_errors=True)
    return None


def unusable(path: Path, error: OSError) -> ConfigError:
    """The one line for a run directory the process cannot create or write."""
    return ConfigError("hydra.run.dir", str(path), "", (
        f"the run directory {path} cannot be used ({error.strerror or error}): choose another hydra.run.dir (or "
        "hydra.sweep.dir) on a file system this process can write, with a shorter name if it is too long"))


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


class RunDir:
    """One run's directory."""

    def __init__(self, path: Path | str):
        self.path = Path(path)
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise unusable(self.path, e) from None

    def hold(self) -> "RunDir":
        """Take the directory for this process (released on exit, and by the kernel if the process dies, so a
        lock left by a killed run never blocks); RunDirInUse naming the holder if another process has it."""
        self._lock = FileLock(self.path / LOCK, timeout=0)
        try:
            self._lock.acquire()
            (self.path / HOLDER).write_text(f"process {os.getpid()} on {socket.gethostname()} since "
                                            f"{time.strftime('%Y-%m-%d %H:%M:%S')}\n")
        except Timeout:
            holder = (self.path / HOLDER).read_text().strip() if (self.path / HOLDER).exists() else "another process"
            raise RunDirInUse(f"{self.path} is in use by {holder}: wait for it to end, or choose another "
                              "hydra.run.dir") from None
        except OSError as e:
            raise unusable(self.path, e) from None
        return self

    def release(self) -> None:
        lock = getattr(self, "_lock", None)
        if lock is not None and lock.is_locked:
            (self.path / HOLDER).unlink(missing_ok=True)
            lock.release()

    def clear(self) -> None:
        """Forget an earlier attempt (trainer.restart=true): its summary, metrics, event files and checkpoints.
        Folders of those names where no run wrote its config.yaml are someone else's: ConfigError, nothing
        deleted."""
        folders = [name for name in (CHECKPOINTS, TB) if os.path.lexists(self.path / name)]
        if folders and not (self.path / CONFIG).is_file():
            raise ConfigError("trainer.restart", True, "", (
                f"{self.path} holds {' and '.join(f'{name}/' for name in folders)} but no {CONFIG}: no run of this "
                "program was there, so trainer.restart=true deletes nothing of it; choose another hydra.run.dir"))
        for name in (SUMMARY, METRICS):
            (self.path / name).unlink(missing_ok=True)
        for name in (CHECKPOINTS, TB):
            shutil.rmtree(self.path / name, ignore_errors=True)

    def _own_names(self) -> None:
        """The run writes its TensorBoard events into tb/ and removes only its own earlier ones there: a tb/ where no
        run of this program wrote its config.yaml is someone else's, and a tb/ that is a link leads elsewhere. And
        each of the run's names is of its kind (a metrics.jsonl that is a folder, a checkpoints that is a file, each
        a traceback once). ConfigError for any, before anything is written."""
        events = self.path / TB
        if events.is_symlink():
            raise ConfigError("hydra.run.dir", str(self.path), "", (
                f"{events} is a link: a run writes its event files in a folder of its own and follows no link; "
                "remove the link or choose another hydra.run.dir"))
        if events.exists() and not (self.path / CONFIG).is_file():
            raise ConfigError("hydra.run.dir", str(self.path), "", (
                f"{self.path} holds {TB}/ but no {CONFIG}: no run of this program was there, so a run writes nothing "
                "over it; choose another hydra.run.dir"))
        for name, folder in ((CONFIG, False), (METRICS, False), (SUMMARY, False), (CHECKPOINTS, True), (TB, True)):
            path = self.path / name
            if os.path.lexists(path) and (path.is_symlink() or path.is_dir() != folder):
                kind = "a link" if path.is_symlink() else "a folder" if path.is_dir() else "not a folder"
                raise ConfigError("hydra.run.dir", str(self.path), "", (
                    f"{path} is {kind}, where a run keeps its {'folder' if folder else 'file'} {name}: nothing of it "
                    "is read or written; move it away or choose another hydra.run.dir"))

    def start(self, config: Mapping[str, Any]) -> None:
        """Begin (or begin again) a run: write its resolved ``config``; rows of an interrupted attempt are dropped."""
        write_atomic(self.path / CONFIG, OmegaConf.to_yaml(OmegaConf.create(dict(config))))
        (self.path / METRICS).unlink(missing_ok=True)

    def keep_metrics_until(self, step: int) -> None:
        """Drop the rows written after ``step`` (a run resuming from its checkpoint there writes them again), and
        any damaged line (a write cut short), with a warning naming it."""
        rows, path = [], self.path / METRICS
        lines = path.read_text().splitlines() if path.exists() else []
        for i, line in enumerate(lines, 1):
            try:
                row = json.loads(line) if line.strip() else None
            except ValueError:
                row = line
            if row is None:
                continue
            if row_problem(row):
                log.warning("%s line %d is damaged (%s) and is dropped", path, i, row_problem(row))
            elif row["step"] <= step:
                rows.append(row)
        write_atomic(path, "".join(json.dumps(r) + "\n" for r in rows))

    def append_metrics(self, row: dict[str, Any]) -> None:
        with open(self.path / METRICS, "a") as f:
            f.write(json.dumps(jsonable(row)) + "\n")
            f.flush()

    def write_summary(self, record: RunRecord) -> None:
        write_atomic(self.path / SUMMARY, json.dumps(record.to_json(), indent=2) + "\n")

    def differences(self, config: Mapping[str, Any]) -> list[str]:
        """The dotted keys at which this run's stored config differs from the resolved ``config`` ([] if none is
        stored).

        Keys the stored config lacks do not count: they were added to the schema after the run was made,
        and their defaults keep the behaviour the run had. ConfigError when the stored config is damaged."""
        path = self.path / CONFIG
        if not path.exists():
            return []
        try:
            stored = OmegaConf.to_container(OmegaConf.load(path))
        except Exception as e:  # noqa: BLE001 - OmegaConf raises YAML's errors, and its own
            raise self._damaged(CONFIG, e) from None
        if not isinstance(stored, dict):
            raise self._damaged(CONFIG, "not a mapping")
        return [k for k in _diff(stored, dict(config)) if k not in HOW_TO_RUN]

    def _damaged(self, name: str, why: Any) -> ConfigError:
        first = str(why).strip().splitlines()[0] if str(why).strip() else type(why).__name__
        return ConfigError("hydra.run.dir", str(self.path), "", (
            f"{self.path / name} is damaged ({first}): add trainer.restart=true to run this run again from the "
            f"start, or remove {name} to keep its checkpoints"))

    def record(self) -> Optional[RunRecord]:
        """The run's record, None while it has none (not finished); ConfigError when summary.json is damaged."""
        if not (self.path / SUMMARY).exists():
            return None
        try:
            return RunRecord.read(self.path / SUMMARY)
        except RecordError as e:
            raise self._damaged(SUMMARY, e) from None

    def metrics(self) -> Iterator[dict[str, Any]]:
        """metrics.jsonl's rows (checked: RecordError names a damaged line)."""
        return metric_rows(self.path / METRICS)

    def begin(self, config: Mapping[str, Any], restart: bool, has_checkpoint: bool,
              writer: bool = True) -> Optional[RunRecord]:
        """Decide what starting the run of the resolved ``config`` here means: the record of a complete run
        (nothing to do), or None (train, resuming from a checkpoint if there is one). A failed attempt is no
        outcome: it resumes. ConfigError when the directory holds a run of another config. ``restart``
        (trainer.restart): start over; ``writer``: this process writes the directory."""
        self._own_names()
        if restart and writer:
            self.clear()
            has_checkpoint = False
        changed = self.differences(config)
        done = self.record()
        if done is not None and done.status == "failed":
            log.warning("%s failed before (%s); resuming from its last checkpoint (trainer.restart=true starts over)",
                        self.path, done.error)
            if writer:
                (self.path / SUMMARY).unlink(missing_ok=True)
            done = None
        if changed and (done is not None or has_checkpoint):
            # A rerun sweep finishes what is missing; it never mixes two configs in one directory.
            raise ConfigError("hydra.run.dir", str(self.path), "", (
                f"{self.path} already holds a run with another config (it differs at {', '.join(changed[:5])}): "
                "choose another hydra.run.dir or hydra.sweep.dir, or add trainer.restart=true to start this one over"))
        if done is not None:
            log.info("%s is complete (%s); not run again (trainer.restart=true runs it again)", self.path, done.status)
        elif has_checkpoint:
            log.info("%s holds an interrupted run of this config: resuming it (trainer.restart=true starts over)",
                     self.path)
        return done


def study_best(sweep_dir: Path, condition: dict[str, Any], target: Target) -> Optional[int]:
    """The fewest fresh examples to target among the finished trials of a study in ``sweep_dir`` (the sibling
    run directories of a trial): the same ``condition`` (its STUDY keys) and target. None before any reached it."""
    best = None
    for path in Path(sweep_dir).glob(f"*/{SUMMARY}"):
        try:
            other = RunRecord.read(path)
        except RecordError:  # being written, or damaged: it is no finished trial
            continue
        if (other.reached and other.target == target and all(getattr(other, k) == condition[k] for k in STUDY)
                and (best is None or other.fresh_examples_to_target < best)):
            best = other.fresh_examples_to_target
    return best


def _diff(stored: Any, current: Any, prefix: str = "") -> list[str]:
    if isinstance(stored, dict) and isinstance(current, dict):
        return [k for key in sorted(stored, key=str)
                for k in _diff(stored[key], current.get(key), f"{prefix}{key}.")]
    return [] if stored == current else [prefix.rstrip(".")]
