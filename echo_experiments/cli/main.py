"""The command-line layer: ``python -m echo_experiments [overrides]`` runs one job (a sweep with ``-m``).

Everything a user can get wrong on the command line ends here in one line on stderr and exit status 2
(:func:`fail`): before Hydra runs anything, every job the command line would run is composed and validated
(cli/plan.py); a missing data set or an unreachable store found while a job starts ends the same way; an
input that stops answering during the run ends with exit 3, a lost peer process with 4, a signal with
128 + its number. Library modules never import this one.
"""

import errno
import logging
import os
import signal
import sys
import time
from pathlib import Path
from typing import Optional

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from echo_experiments.cli import worker_stops
from echo_experiments.cli.compose import CONFIG_MODULE
from echo_experiments.cli.exits import end_now, fail
from echo_experiments.cli.plan import PLAN_VARIABLE, SweepPlan, job_key, plan, progress
from echo_experiments.core.input_bound import in_words
from echo_experiments.core.record import RunRecord, Target
from echo_experiments.core.rules import unused
from echo_experiments.core.rundir import SUMMARY, unwritable
from echo_experiments.core.schema import ConfigError
from echo_experiments.core.signals import Interrupted, StartupInterrupted, stop_at_startup, stop_if_signalled_at_startup

log = logging.getLogger("echo_experiments")


def _run(cfg: DictConfig, out_dir: str):
    """One job's run; what a user can fix ends the command with one line (a stop signal is left to the caller)."""
    from echo_experiments.core.rundir import DiskFull, RunDirInUse
    from echo_experiments.data.sources import DataMissing
    from echo_experiments.training.trainer import InputLost, PeerLost, run
    from echo_experiments.workloads.run_check import check_run

    stop_if_signalled_at_startup()  # TensorFlow and JAX are imported: a safe point
    log.info("%s", _first_line(cfg, out_dir))
    for note in unused(cfg):
        log.warning("%s", note)
    try:
        return run(check_run(cfg), out_dir)
    except (ConfigError, DataMissing, RunDirInUse) as e:
        fail(str(e))
    except (InputLost, PeerLost, DiskFull) as e:
        end_now(str(e), 4 if isinstance(e, PeerLost) else 3)


def _first_line(cfg: DictConfig, out_dir: str) -> str:
    """What the run trains, on what data, to what target, and where it writes: a target set for the workload's
    own data says so when the data is a user's."""
    from echo_experiments.data.sources import known

    target, dataset = cfg.workload.target, cfg.workload.dataset
    line = f"{cfg.workload.name} on {dataset}, to {Target(target.metric, float(target.value), target.mode).described()}"
    if not known(dataset):
        line += f" (the target of {cfg.workload.name}'s own data: set workload.target.value for {dataset})"
    return f"{line} -> {out_dir}"


def _last_line(record: RunRecord, out_dir: str) -> str:
    """How the run ended, and, for the autopilot, the factor it trained at and the copies it made."""
    reached = record.fresh_examples_to_target
    auto = (f", the autopilot trained {record.effective_echo_factor:.2f} examples per fresh one (cap "
            f"{record.echo_max_factor:g}, {record.echo_copied_batches} batches copied)") \
        if record.echo_auto and record.effective_echo_factor is not None else ""
    bound = (f"; R = {record.upstream_downstream_ratio:.2f}: {in_words(record.input_wait_share)} without echoing"
             if record.upstream_downstream_ratio is not None else "")
    return (f"{record.status}: {'target not reached' if reached is None else f'{reached} fresh examples to target'}, "
            f"{record.steps} steps, {record.fresh_examples} fresh examples{auto}, {record.wall_time_s:.1f} s of "
            f"training{bound} -> {out_dir}")


class _JobTag(logging.Filter):
    """Prefixes every line a job logs with its number in the sweep (its first line names its folder)."""

    def __init__(self, tag: str):
        super().__init__()
        self.tag = tag

    def filter(self, record: logging.LogRecord) -> bool:
        if not getattr(record, "job_tagged", False):  # a record goes through every handler: tagged once
            record.msg, record.job_tagged = f"{self.tag} {record.msg}", True
        return True


def _tag_lines(tag: str) -> None:
    """Hydra configures the job's handlers anew for every job: the tag goes on this job's."""
    for handler in logging.getLogger().handlers:
        handler.filters = [f for f in handler.filters if not isinstance(f, _JobTag)]
        handler.addFilter(_JobTag(tag))


@hydra.main(version_base="1.3", config_path="pkg://" + CONFIG_MODULE, config_name="config")
def run_job(cfg: DictConfig) -> Optional[float]:
    stop_if_signalled_at_startup()  # Hydra has composed the config and made the run's folder: a safe point
    out_dir = HydraConfig.get().runtime.output_dir
    current = SweepPlan.of_this_job()
    if current is not None and current.jobs > 1:  # parallel jobs' lines interleave: each says its job
        _tag_lines(f"[job {HydraConfig.get().job.num}]")
    if current is not None and job_key(cfg) in current.repeats:
        log.info("not run: the same run as another job of this sweep (at echo factor 1 there is no echo stage, "
                 "so the placement and echo shuffle make no difference) -> %s", out_dir)
        return None
    began = time.time()
    if worker_stops.in_worker():  # a job of a sweep in a worker process: a stop ends the job, not the worker
        if (signum := worker_stops.stopped()) is not None:
            log.info("not started: the sweep was stopped by %s -> %s", signal.Signals(signum).name, out_dir)
            return None
        with worker_stops.between_jobs():
            try:
                stop_at_startup()
                if (signum := worker_stops.stopped()) is not None:  # held just before the job took the signals
                    raise StartupInterrupted(signum)
                record = _run(cfg, out_dir)
            except (Interrupted, StartupInterrupted) as e:
                sys.stderr.write(f"error: {e}\n")  # one write: the other workers' lines come at the same time
                sys.stderr.flush()
                worker_stops.job_stopped(e.signum)
                return None
    else:
        try:
            record = _run(cfg, out_dir)
        except Interrupted as e:  # the shell's convention for a signal: 128 + its number
            end_now(str(e), 128 + e.signum)  # its checkpoint is committed; a signal after it adds no second line
        except StartupInterrupted as e:
            end_now(str(e), 128 + e.signum)
    log.info("%s", _last_line(record, out_dir))
    summary = Path(out_dir) / SUMMARY
    if current is not None and summary.exists():  # only the process that writes the run directory reports
        line = progress(Path(out_dir), summary.stat().st_mtime >= current.started, time.time() - began,
                        record.elapsed_s)
        if line:
            log.info("%s", line)
    # The objective a sweeper minimises: fresh examples to target (infinite when not reached).
    reached = record.fresh_examples_to_target
    return float(reached) if reached is not None else float("inf")


def _run_in_workers() -> None:
    """The sweep, its jobs in worker processes: a stop signal lets the running jobs checkpoint (worker_stops.py)."""
    waiting = worker_stops.Waiting()
    try:
        with worker_stops.workers_hold_signals(), waiting:
            run_job()
    except worker_stops.SweepStopped as e:
        end_now(str(e), 128 + e.signum)
    except Exception:
        if waiting.received is None:
            raise
        stopped = waiting.ended_by_error()
        end_now(str(stopped), 128 + stopped.signum)
    if waiting.received is not None:  # a normal exit: joblib's own exit handler then ends the idle workers
        print(f"error: {waiting.message()}", file=sys.stderr)
        sys.exit(128 + waiting.received)


def _quoted(value: str) -> str:
    """A value for Hydra's override grammar, whatever characters a path holds."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def main(argv: list[str]) -> None:
    """The command (see __main__.py): plan and validate every job, then run them."""
    # A log file that can no longer be written (a full disk) must not print a traceback for every line logged:
    # the error that follows says what happened in one.
    logging.raiseExceptions = False
    try:
        current = plan(argv)
    except ConfigError as e:
        fail(str(e))
    folder = current and (current.sweep_dir or current.run_dir)
    problem = unwritable(folder) if folder else None
    if problem:
        key = "hydra.sweep.dir" if current.sweep_dir else "hydra.run.dir"
        fail(f"{key}={folder} cannot be used ({problem}): choose another {key}")
    if current is not None and current.sweep_dir is not None:
        folder = Path(current.sweep_dir).absolute()
        os.environ[PLAN_VARIABLE] = str(current.save(folder))
        # The folder the plan is in is the one the jobs go into: a default named by the time is resolved once.
        if not any(a.startswith("hydra.sweep.dir=") for a in argv):
            sys.argv.append(f"hydra.sweep.dir={_quoted(current.sweep_dir)}")
    try:
        if current is not None and current.workers:
            stop_if_signalled_at_startup()  # planned: a safe point
            _run_in_workers()
        else:
            run_job()
    except SystemExit as e:
        if e.code:  # Hydra's exit on an error a start-up signal may have caused
            stop_if_signalled_at_startup()
        raise
    except OSError as e:  # Hydra makes the run's folder and writes its .hydra/ files before the job runs
        if e.filename is None or e.errno not in OUTPUT_ERRORS:
            raise
        fail(f"{e.filename} cannot be written ({e.strerror}): choose another hydra.run.dir (or hydra.sweep.dir) on "
             "a file system this process can write, with a shorter name if it is too long")


# The errors of a folder the process cannot make or write: read-only, too long a name, no permission, full.
OUTPUT_ERRORS = (errno.EROFS, errno.ENAMETOOLONG, errno.EACCES, errno.EPERM, errno.ENOSPC)
