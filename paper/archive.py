"""``python -m paper.archive {archive,restore} SWEEP [--results DIR]``: a sweep's runs into the
committed results and back.

- ``archive``: copy the complete runs of the sweep folder ``SWEEP`` (multirun/<preset>/<workload>, its jobs and
  those of its timed/ folder) into ``DIR/<preset>/<workload>/runs/``, only the run files the reporter reads
  (config.yaml, metrics.jsonl, summary.json) and, for the autopilot's runs, the decisions a replay makes again
  (echo_decisions.json). A failed run is no outcome (its command resumes it from its checkpoint, which
  results/ does not keep), a run without a readable record or its metrics is not complete: both stay out, and so
  does a run whose files are links (their targets could be any file on the machine).
- ``restore``: the reverse, on a machine without the sweep folder (a new one, or after ``make clean``): the
  sweep's command, run again, then leaves those runs alone and prunes new trials against their bests. A job
  folder with a record or checkpoints of its own is not touched (it may hold an interrupted run); one without
  (an interrupted restore) is restored, unless its path goes through a link (it would write into another folder).
"""

import argparse
import os
import shutil
import stat
import sys
from pathlib import Path
from typing import Iterator, Optional

from echo_experiments.autopilot import decisions
from echo_experiments.core.record import RecordError, RunRecord
from echo_experiments.core.rundir import CHECKPOINTS, CONFIG, METRICS, SUMMARY, TIMED

RUN_FILES = (CONFIG, METRICS, SUMMARY, decisions.FILE)
STORE = "store.json"  # in TIMED: the store overrides they were timed with (retime --store), kept with them


def committed_runs(sweep: Path, results: Path) -> Path:
    """Where a sweep folder's runs are committed: results/<preset>/<workload>/runs."""
    sweep = Path(sweep)
    return Path(results) / sweep.parent.name / sweep.name / "runs"


def jobs(folder: Path) -> Iterator[Path]:
    """The job folders of a sweep folder (or of its committed copy): its own and those of its timed/ folder,
    never a link to a folder elsewhere."""
    for parent in (folder, folder / TIMED):
        if parent.is_dir() and not parent.is_symlink():
            yield from sorted(p for p in parent.iterdir() if p.is_dir() and not p.is_symlink() and p.name != TIMED)


def _regular(path: Path) -> bool:
    """A file as a run writes it: regular, not a link (whose target could be any file on the machine)."""
    return os.path.lexists(path) and stat.S_ISREG(os.lstat(path).st_mode)


def _linked(path: Path, top: Path) -> Optional[Path]:
    """The first link on the way from ``top`` down to ``path`` (None: there is none)."""
    for part in [path, *path.parents]:
        if part == top or top not in part.parents:
            return None
        if part.is_symlink():
            return part
    return None


def _copy(source: Path, destination: Path) -> None:
    """The run files, each in one step and the record last: an interrupted copy leaves no file half-written and
    no record before the files it describes (so it counts as not copied, and the next copy finishes it). Only
    regular files are copied, and a link at the destination is replaced, never written through."""
    for name in sorted(RUN_FILES, key=lambda name: name == SUMMARY):
        _copy_file(source / name, destination / name)


def _copy_file(source: Path, destination: Path) -> None:
    """One regular file, in one step (nothing where ``source`` is not one)."""
    if _regular(source):
        destination.parent.mkdir(parents=True, exist_ok=True)
        part = destination.with_name(f".{destination.name}.part")
        if os.path.lexists(part):
            part.unlink()
        shutil.copy2(source, part, follow_symlinks=False)
        os.replace(part, destination)


def _left_out(job: Path) -> Optional[str]:
    """Why a job folder holds no complete run to copy (None: it does): its files must be the run's own regular
    files, a readable record that did not fail and the metrics it describes."""
    links = [name for name in RUN_FILES if (job / name).is_symlink()]
    if links:
        return f"{', '.join(links)} {'is a link' if len(links) == 1 else 'are links'}, not files a run writes"
    unreadable = [name for name in RUN_FILES if _regular(job / name) and not os.access(job / name, os.R_OK)]
    if unreadable:  # a permission, not damage: the files may be fine
        return (f"{', '.join(unreadable)} cannot be read by this user (permission): give it read access and archive "
                "again")
    try:
        record = RunRecord.read(job / SUMMARY)
    except RecordError as e:
        return str(e)
    if record.status == "failed":
        return "failed: its command resumes it"
    if not _regular(job / METRICS):
        return "no metrics.jsonl: the record describes metrics that are not there"
    return None


def archive(sweep: Path, results: Path) -> str:
    destination = committed_runs(sweep, results)
    copied, left_out = 0, []
    for job in jobs(sweep):
        if not os.path.lexists(job / SUMMARY):
            continue  # interrupted: its command finishes it
        target = destination / job.relative_to(sweep)
        if reason := _left_out(job) or (f"{link} is a link" if (link := _linked(target, destination)) else None):
            left_out.append(f"{job.relative_to(sweep)} ({reason})")
            continue
        _copy(job, target)
        copied += 1
    if not _linked(destination / TIMED / STORE, destination):
        _copy_file(sweep / TIMED / STORE, destination / TIMED / STORE)
    lines = [f"{copied} complete runs -> {destination}"]
    lines += [f"{len(left_out)} runs left out:"] + [f"  {line}" for line in left_out] if left_out else []
    return "\n".join(lines)


def restore(sweep: Path, results: Path) -> str:
    source = committed_runs(sweep, results)
    if not source.is_dir():
        raise FileNotFoundError(f"no committed runs in {source}")
    restored, refused = 0, []
    for run in jobs(source):
        job = sweep / run.relative_to(source)
        if link := _linked(job, sweep):  # restoring there would write into the folder it points to
            refused.append(f"  {job} (its path goes through the link {link})")
        elif not (os.path.lexists(job / SUMMARY) or os.path.lexists(job / CHECKPOINTS)):
            if reason := _left_out(run):  # a committed record that cannot be read is no complete job
                refused.append(f"  {run} ({reason})")
                continue
            _copy(run, job)
            restored += 1
    if not (os.path.lexists(sweep / TIMED / STORE) or _linked(sweep / TIMED / STORE, sweep)):
        _copy_file(source / TIMED / STORE, sweep / TIMED / STORE)
    lines = [f"{restored} committed runs -> {sweep}"]
    return "\n".join(lines + ([f"{len(refused)} left alone:"] + refused if refused else []))


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m paper.archive", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=("archive", "restore"))
    parser.add_argument("sweep", type=Path, help="a sweep folder, multirun/<preset>/<workload>")
    parser.add_argument("--results", type=Path, default=Path("results"), help="the committed results (results)")
    args = parser.parse_args(argv)
    if args.action == "archive" and not args.sweep.is_dir():
        print(f"error: no such sweep folder: {args.sweep}", file=sys.stderr)
        return 2
    try:
        print((archive if args.action == "archive" else restore)(args.sweep, args.results))
    except FileNotFoundError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
