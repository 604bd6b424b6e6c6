"""The sweep plan: what a command line runs (every job composed and checked first), the conditions that make the
same runs as another (run once), and the progress line after each job.

The plan is made once by the command (:func:`plan`) and written as a file into the sweep folder; its jobs,
which a launcher may run in other processes or on other machines, find it through the one variable every
launcher passes on to them, ECHO_SWEEP_PLAN (its path). Each job appends a line to the plan's progress file,
so the last one to finish counts them all.
"""

import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional

from omegaconf import DictConfig, OmegaConf

from echo_experiments.cli.compose import Counts, compose_all, refuse_unsafe_yaml
from echo_experiments.cli.worker_stops import runs_in_workers
from echo_experiments.core.placement import EchoSpec, Placement
from echo_experiments.core.private_api import hydra_args_parser
from echo_experiments.core.schema import ConfigError
from echo_experiments.workloads.run_check import checked_config

PLAN_VARIABLE = "ECHO_SWEEP_PLAN"


@dataclass
class SweepPlan:
    """A command's jobs (less those that repeat another's runs), when it started, and the conditions (job_key)
    whose runs another condition of the sweep makes."""

    jobs: int = 1
    started: float = field(default_factory=time.time)
    repeats: list[str] = field(default_factory=list)
    sweep_dir: Optional[str] = None  # a sweep's folder (hydra.sweep.dir, resolved); None for one run
    run_dir: Optional[str] = None  # one run's folder (hydra.run.dir, resolved); None for a sweep
    workers: bool = False  # the jobs run in worker processes of the command (worker_stops.py)

    def save(self, folder: Path) -> Path:
        path = Path(folder) / f".sweep-{self.started:.6f}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(asdict(self)))
        return path

    @classmethod
    def of_this_job(cls) -> Optional["SweepPlan"]:
        """The plan of the command that started this job (None outside a sweep)."""
        path = os.environ.get(PLAN_VARIABLE)
        try:
            return cls(**json.loads(Path(path).read_text())) if path else None
        except (OSError, ValueError, TypeError):
            return None

    @property
    def progress_file(self) -> str:
        return f".progress-{self.started:.6f}"


def job_key(cfg: DictConfig) -> str:
    """The condition a job runs: its config but for the tuning trial it is (a study's trials are alike in
    this), as a short digest, the same in the command and in the job, whichever process runs it."""
    return _digest(_condition(cfg))


def run_key(cfg: DictConfig) -> str:
    """The run a job makes: its config with the echo settings that factor 1 ignores (no echo stage, so no
    placement and no echo shuffle) made equal. A sweep of placements x factors, such as
    `echo=before_batching,after_batching echo.factor=1,2,4`, then makes its baseline once, not per placement.
    The autopilot echoes in the trainer, not in a stage, and what it copies depends on the placement."""
    condition = _condition(cfg)
    echo = EchoSpec.from_config(cfg.echo)
    if echo.stage is Placement.NONE and not echo.auto:
        condition["echo"].update(placement=Placement.NONE.value, shuffle_buffer=None)
    return _digest(condition)


def _condition(cfg: DictConfig) -> dict:
    """The job's config, resolved, as plain values (a copy), with no tuning trial."""
    condition = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
    condition["tuning"].update(study=None, trial=None)
    return condition


def _digest(condition: dict) -> str:
    return hashlib.sha256(json.dumps(condition, sort_keys=True, default=str).encode()).hexdigest()[:16]


def plan(argv: list[str]) -> Optional[SweepPlan]:
    """The plan of a command line, every job it would run composed and validated first (ConfigError for the
    first that is not valid); None when it runs no job (--help, --cfg and the like)."""
    args = hydra_args_parser().parse_args(argv)
    if args.help or args.hydra_help or args.shell_completion or args.info or args.experimental_rerun:
        return None
    if args.cfg and args.multirun:
        raise ConfigError("--cfg", args.cfg, "", f"--cfg {args.cfg} prints one job's config: leave out -m (or "
                          "--multirun), or give the job's values instead of the sweep")
    if args.config_path or args.config_dir:
        refuse_unsafe_yaml([Path(p) for p in (args.config_dir, args.config_path) if p])
        return SweepPlan()  # a user config tree: each job still validates itself
    tasks, makers, repeated, counts = set(), {}, [], Counts()
    for cfg in compose_all(args.overrides, multirun=args.multirun, config_name=args.config_name or "config",
                           counts=counts):
        checked_config(cfg)
        tasks.add(cfg.workload.task)
        condition = job_key(cfg)
        if makers.setdefault(run_key(cfg), condition) != condition and condition not in repeated:
            repeated.append(condition)
    from echo_experiments.workloads.registry import TASKS, task_class

    for task in sorted(tasks - set(TASKS)):  # a user's class meets the Workload contract before any job starts
        task_class(task)  # (this imports TensorFlow and JAX: only for a valid command line with a user's task)
    # Every condition has the same trials: a repeated one's jobs do not run.
    jobs = counts.jobs - counts.jobs // counts.conditions * len(repeated)
    return SweepPlan(jobs=0 if args.cfg else jobs, repeats=repeated,
                     sweep_dir=counts.sweep_dir if args.multirun else None,
                     run_dir=None if args.multirun else counts.run_dir,
                     workers=args.multirun and runs_in_workers(counts.launcher, counts.n_jobs))


def check_command_line(argv: list[str]) -> Optional[str]:
    """The one-line error for a command line, or None if every job it would run is valid."""
    try:
        plan(argv)
    except ConfigError as e:
        return str(e)
    return None


def progress(job_dir: Path, done: bool, attempt_s: float, elapsed_s: Optional[float]) -> Optional[str]:
    """After a job of a sweep: this command's jobs complete, and the time left at the pace of the work it did
    itself (None outside a sweep of several jobs). ``done``: the job's record was written by this command (not
    kept from an earlier one). A job it resumed from a checkpoint counts for the share ``attempt_s`` (its
    seconds in this command) is of ``elapsed_s`` (its training seconds over every attempt), so the jobs that
    finish soon after a restart do not make the rest look short."""
    current = SweepPlan.of_this_job()
    if current is None or current.jobs <= 1:
        return None
    # Compiling and loading count in attempt_s, not in elapsed_s: a job run from the start is one whole job.
    share = min(1.0, attempt_s / elapsed_s) if done and elapsed_s else float(done)
    path = job_dir.parent / current.progress_file
    with path.open("a") as f:  # appends this short are atomic, whichever process or machine writes them
        f.write(f"ran {share:.4f}\n" if done else "kept\n")
    lines = path.read_text().splitlines()
    shares = [float(line.split()[1]) if line.startswith("ran") else 0.0 for line in lines]
    eta = time_left(current.jobs, shares, time.time() - current.started)
    if eta is None:
        left = "time left known once a job has run"
    else:
        left = f"about {eta / 3600:.1f} h left" if eta >= 3600 else f"about {eta / 60:.0f} min left"
    return (f"sweep {job_dir.parent}: {len(lines)} of {current.jobs} jobs complete ({lines.count('kept')} kept from "
            f"an earlier run); {left}")


def time_left(total: int, shares: list[float], seconds: float) -> Optional[float]:
    """Seconds left of a sweep of ``total`` jobs, ``seconds`` into the command that completed ``shares``: per
    complete job, the share of its work that command did (0: complete before it). None until it did some."""
    done = sum(shares)
    return (total - len(shares)) * seconds / done if done else None
