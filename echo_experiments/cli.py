"""The command-line layer: ``python -m echo_experiments [overrides]`` runs one job (a sweep with ``-m``).

Everything a user can get wrong on the command line ends here in one line on stderr and exit status 2
(:func:`fail`): before Hydra runs anything, every job the command line would run is composed with Hydra's
own compose API and validated (Hydra would report composition errors over several lines, and a sweep
would only meet them job by job); a missing data set or an unreachable store found while a job starts
ends the same way. Library modules never import this one.
"""

import hashlib
import copy
import itertools
import logging
import math
import os
import re
import sys
import time
from pathlib import Path
from typing import Iterable, Optional

import hydra
from hydra import compose, initialize_config_module
from hydra.core.hydra_config import HydraConfig
from hydra._internal.utils import get_args_parser
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import ConfigCompositionException, MissingConfigException, OverrideParseException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import ConfigAttributeError, ConfigKeyError, OmegaConfBaseException

from echo_experiments import config as C
from echo_experiments.runs import SUMMARY

CONFIG_MODULE = "echo_experiments.conf"
log = logging.getLogger("echo_experiments")


def fail(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


@hydra.main(version_base="1.3", config_path="pkg://" + CONFIG_MODULE, config_name="config")
def run_job(cfg: DictConfig) -> Optional[float]:
    from echo_experiments.data.sources import DataMissing
    from echo_experiments.runs import RunDirInUse
    from echo_experiments.train import InputLost, Interrupted, PeerLost, run

    out_dir = HydraConfig.get().runtime.output_dir
    repeats = os.environ.get(SWEEP_REPEATS, "").split()
    if repeats and job_key(cfg) in repeats:
        log.info("not run: the same run as another job of this sweep (at echo factor 1 there is no echo stage, "
                 "so the placement and echo shuffle make no difference) -> %s", out_dir)
        return None
    began = time.time()
    try:
        summary = run(cfg, out_dir)
    except (C.ConfigError, DataMissing, RunDirInUse) as e:
        fail(str(e))
    except Interrupted as e:  # the shell's convention for a process ended by a signal: 128 + its number
        print(f"error: {e}", file=sys.stderr)
        sys.exit(128 + e.signum)
    except (InputLost, PeerLost) as e:
        # A thread may still be blocked in the unanswered call (inside TensorFlow), and JAX's distributed
        # runtime would abort at exit waiting for the lost peer: exit at once.
        print(f"error: {e}", file=sys.stderr, flush=True)
        logging.shutdown()
        os._exit(3 if isinstance(e, InputLost) else 4)
    log.info("%s: %s fresh examples to target, %d steps, %d fresh examples, %.1f s of training -> %s",
             summary["status"], summary["fresh_examples_to_target"], summary["steps"], summary["fresh_examples"],
             summary["wall_time_s"], out_dir)
    _sweep_progress(Path(out_dir), time.time() - began, summary.get("elapsed_s"))
    # The objective a sweeper minimises: fresh examples to target (infinite when not reached).
    reached = summary["fresh_examples_to_target"]
    return float(reached) if reached is not None else float("inf")


# Set by main() for a sweep, read by every job (launchers that start processes pass the environment on).
SWEEP_JOBS, SWEEP_STARTED, SWEEP_REPEATS = "ECHO_SWEEP_JOBS", "ECHO_SWEEP_STARTED", "ECHO_SWEEP_REPEATS"


def job_key(cfg: DictConfig) -> str:
    """The condition a job runs: its config but for the tuning trial it is (a study's trials are alike in
    this), as a short digest, the same in main() and in the job, whichever process runs it."""
    condition = copy.deepcopy(cfg)
    condition.tuning.study, condition.tuning.trial = None, None
    return hashlib.sha256(OmegaConf.to_yaml(condition, resolve=True).encode()).hexdigest()[:16]


def run_key(cfg: DictConfig) -> str:
    """The run a job makes: its config with the echo settings that factor 1 ignores (no echo stage, so no
    placement and no echo shuffle; stream.build) made equal. A sweep of placements x factors, such as
    `echo=before_batching,after_batching echo.factor=1,2,4`, then makes its baseline once, not per placement."""
    if C.Placement.of(cfg.echo) is not C.Placement.NONE:
        return job_key(cfg)
    plain = copy.deepcopy(cfg)
    plain.echo.placement, plain.echo.shuffle_buffer = C.Placement.NONE.value, None
    return job_key(plain)


def _sweep_progress(job_dir: Path, attempt_s: float, elapsed_s: Optional[float]) -> None:
    """After each job of a sweep, one line: this command's jobs complete, and the time left at the pace of
    the work it did itself. A job complete from an earlier, interrupted command took none of it; one it
    resumed from a checkpoint took the share ``attempt_s`` (its seconds in this command) is of ``elapsed_s``
    (its training seconds over every attempt), so the jobs that finish soon after a restart do not make the
    rest look short."""
    total, started = int(os.environ.get(SWEEP_JOBS, 0)), float(os.environ.get(SWEEP_STARTED, 0))
    summary = job_dir / SUMMARY
    if total <= 1 or not summary.exists():  # one job, or not process 0 of a multi-process job
        return
    ran, sweep_dir = summary.stat().st_mtime >= started, job_dir.parent
    # Compiling and loading count in attempt_s, not in elapsed_s: a job run from the start is one whole job.
    share = min(1.0, attempt_s / elapsed_s) if ran and elapsed_s else float(ran)
    # A launcher may run the jobs in other processes (joblib) or on other machines (submitit): each job adds
    # one line to this command's progress file (appends this short are atomic), so the last one counts all.
    progress = sweep_dir / f".progress-{os.environ[SWEEP_STARTED]}"
    with progress.open("a") as f:
        f.write(f"ran {share:.4f}\n" if ran else "kept\n")
    lines = progress.read_text().splitlines()
    shares = [float(line.split()[1]) if line.startswith("ran") else 0.0 for line in lines]
    eta = time_left(total, shares, time.time() - started)
    if eta is None:
        left = "time left known once a job has run"
    else:
        left = f"about {eta / 3600:.1f} h left" if eta >= 3600 else f"about {eta / 60:.0f} min left"
    log.info("sweep %s: %d of %d jobs complete (%d kept from an earlier run); %s", sweep_dir, len(lines), total,
             lines.count("kept"), left)


def time_left(total: int, shares: list[float], seconds: float) -> Optional[float]:
    """Seconds left of a sweep of ``total`` jobs, ``seconds`` into the command that completed ``shares``: per
    complete job, the share of its work that command did (0: complete before it). None until it did some."""
    done = sum(shares)
    return (total - len(shares)) * seconds / done if done else None


def main() -> None:
    argv = sys.argv[1:]
    jobs: list[int] = []
    repeats: list[str] = []
    error = check_command_line(argv, jobs, repeats)
    if error:
        fail(error)
    os.environ[SWEEP_JOBS], os.environ[SWEEP_STARTED] = str(jobs[0] if jobs else 1), str(time.time())
    os.environ[SWEEP_REPEATS] = " ".join(repeats)
    run_job()
# Past this many combinations each swept value is checked once, not every product.
MAX_COMBINATIONS = 128
# The keys that pick a tuning trial: the same condition in every trial (tuning.py).
TRIAL_KEYS = ("tuning.study", "tuning.trial")


def check_command_line(argv: list[str], jobs: Optional[list[int]] = None,
                       repeats: Optional[list[str]] = None) -> Optional[str]:
    """Return the one-line error for a command line, or None if every job it would run is valid; the number
    of jobs it would run is appended to ``jobs`` when given, and to ``repeats`` the job_key of each condition
    whose jobs make the same runs as an earlier condition's (run_key): its jobs are not run nor counted."""
    args = get_args_parser().parse_args(argv)
    if args.help or args.hydra_help or args.shell_completion or args.info or args.experimental_rerun:
        return None
    if args.config_path or args.config_dir:
        return None  # a user config tree: each job still validates itself
    from echo_experiments.tuning import run_config

    tasks, makers, repeated, n_conditions = set(), {}, [], []
    try:
        for cfg in compose_all(args.overrides, multirun=args.multirun, config_name=args.config_name or "config",
                               jobs=jobs, conditions=n_conditions):
            run_config(cfg)
            tasks.add(cfg.workload.task)
            condition = job_key(cfg)
            if makers.setdefault(run_key(cfg), condition) != condition and condition not in repeated:
                repeated.append(condition)
        if jobs and repeated:  # every condition has the same trials: a repeated one's jobs do not run
            jobs[-1] -= jobs[-1] // n_conditions[0] * len(repeated)
        if repeats is not None:
            repeats += repeated
        from echo_experiments.workloads import task_class  # TensorFlow and JAX: only for valid command lines

        for task in sorted(tasks):  # a user's class meets the Workload contract before any job starts
            task_class(task)
    except C.ConfigError as e:
        return str(e)
    return None


def compose_all(overrides: list[str], multirun: bool, config_name: str = "config", jobs: Optional[list[int]] = None,
                conditions: Optional[list[int]] = None) -> Iterable[DictConfig]:
    """Compose the config of every job the command line would run (past MAX_COMBINATIONS, see _combinations);
    the number of jobs it would run is appended to ``jobs`` and the number of its conditions (combinations of
    the swept keys but a tuning trial's) to ``conditions`` when given."""
    parser = OverridesParser.create()
    try:
        parsed = parser.parse_overrides(overrides)
    except OverrideParseException as e:
        raise _parse_error(e) from None
    app = [o for o in parsed if not o.is_hydra_override()]
    for o in app:  # OmegaConf would read 2 or "yes" as true: a boolean key takes true or false
        field = C.schema_field(o.get_key_element())
        if (field is not None and field.metadata.get("check") is C.boolean and not o.is_sweep_override()
                and str(o.value()).lower() not in ("true", "false")):
            raise C.ConfigError(o.get_key_element(), o.value(), field.metadata["allowed"])
    # hydra.searchpath among them finds a user's own config tree (their workloads and presets beside ours).
    hydra_args = [o.input_line for o in parsed if o.is_hydra_override()]
    with initialize_config_module(version_base="1.3", config_module=CONFIG_MODULE):
        if not multirun:
            if jobs is not None:
                jobs.append(1)
            if conditions is not None:
                conditions.append(1)
            yield _compose(config_name, [o.input_line for o in app] + hydra_args)
            return
        sweeps = {o.get_key_element(): list(o.sweep_string_iterator()) for o in app if o.is_sweep_override()}
        set_here = [o for o in app if not o.is_sweep_override()]
        fixed, fixed_keys = [o.input_line for o in set_here], {o.get_key_element() for o in set_here}
        # Sweeps declared in a preset (hydra.sweeper.params), unless the command line sweeps or sets the same
        # key (Hydra's sweeper lets the command line win: `tuning.study=0` runs study 0 alone).
        first = _compose(config_name, fixed + [f"{k}={v[0]}" for k, v in sweeps.items()] + hydra_args, hydra=True)
        params = OmegaConf.select(first, "hydra.sweeper.params") or {}
        for key, spec in params.items():
            if key not in sweeps and key not in fixed_keys:
                ov = parser.parse_override(f"{key}={spec}")
                sweeps[key] = list(ov.sweep_string_iterator()) if ov.is_sweep_override() else [str(spec)]
        if jobs is not None:
            jobs.append(math.prod(len(v) for v in sweeps.values()))
        if conditions is not None:
            conditions.append(math.prod(len(v) for k, v in sweeps.items() if k not in TRIAL_KEYS))
        composed = 0
        for combo in _combinations(sweeps):
            composed += 1
            yield _compose(config_name, fixed + [f"{k}={v}" for k, v in combo] + hydra_args)
        if not composed:  # an empty sweep, e.g. tuning.trials=0: the values that emptied it are still checked
            yield first


def _combinations(sweeps: dict[str, list[str]]) -> Iterable[list[tuple[str, str]]]:
    """Every combination; past MAX_COMBINATIONS every condition (combination of the keys but a tuning
    trial's) at the first trial, then each trial once, so that check_command_line finds every condition that
    repeats another's runs; past MAX_COMBINATIONS conditions, each value once (every value is checked,
    and only the repeats among those composed are found: the others run)."""
    keys = list(sweeps)
    if math.prod(len(v) for v in sweeps.values()) <= MAX_COMBINATIONS:
        for values in itertools.product(*(sweeps[k] for k in keys)):
            yield list(zip(keys, values))
        return
    base = {k: v[0] for k, v in sweeps.items()}
    conditions = [k for k in keys if k not in TRIAL_KEYS]
    if math.prod(len(sweeps[k]) for k in conditions) <= MAX_COMBINATIONS:
        for values in itertools.product(*(sweeps[k] for k in conditions)):
            yield list({**base, **dict(zip(conditions, values))}.items())
        rest = [k for k in keys if k in TRIAL_KEYS]
    else:
        yield list(base.items())
        rest = keys
    for k in rest:
        for v in sweeps[k][1:]:
            yield list({**base, k: v}.items())


def _compose(config_name: str, overrides: list[str], hydra: bool = False) -> DictConfig:
    try:
        return compose(config_name, overrides=overrides, return_hydra_config=hydra)
    except MissingConfigException as e:
        raise _missing_option(e, overrides) from None
    except ConfigCompositionException as e:
        raise _composition_error(e, overrides) from None
    except OmegaConfBaseException as e:
        key = getattr(e, "full_key", "") or ""
        raise C.ConfigError(key, None, "", f"{key}: {_first_line(str(e))}") from None


def _missing_option(e: MissingConfigException, overrides: list[str]) -> C.ConfigError:
    group, _, option = (e.missing_cfg_file or "").rpartition("/")
    options = ", ".join(sorted(e.options or []))
    if not group:
        return C.ConfigError("", None, "", _first_line(str(e)))
    return C.ConfigError(group, option, f"one of {options}")


def _composition_error(e: ConfigCompositionException, overrides: list[str]) -> C.ConfigError:
    cause = e.__cause__
    key = getattr(cause, "full_key", None)
    if not key:
        return C.ConfigError("", None, "", _first_line(str(e)))
    value = _override_value(key, overrides)
    if isinstance(cause, (ConfigAttributeError, ConfigKeyError)):
        section = key.rpartition(".")[0]
        return C.ConfigError.unknown_key(key, _known_keys(section, overrides, key))
    allowed = C.allowed_for(key) or _first_line(str(cause))
    return C.ConfigError(key, value, allowed)


def _known_keys(section: str, overrides: list[str], bad_key: str) -> list[str]:
    keys = C.keys_of(section)
    if keys:
        return keys
    # A free-form mapping (workload.model, workload.augment): list what the composed config holds.
    rest = [o for o in overrides if _override_key(o) != bad_key]
    try:
        node = OmegaConf.select(compose("config", overrides=rest), section)
    except Exception:  # noqa: BLE001 - only used to enrich the message
        return []
    return list(node.keys()) if isinstance(node, DictConfig) else []


def _override_key(line: str) -> str:
    return line.split("=", 1)[0].lstrip("+~")


def _override_value(key: str, overrides: list[str]) -> Optional[str]:
    for line in overrides:
        if _override_key(line) == key and "=" in line:
            return line.split("=", 1)[1]
    return None


def _parse_error(e: OverrideParseException) -> C.ConfigError:
    match = re.search(r"override '([^']*)'", str(e))
    line = match.group(1) if match else ""
    key = _override_key(line)
    return C.ConfigError(key, None, "", f"cannot parse override '{line}': write key=value, sweeps as "
                         "key=a,b,c (see https://hydra.cc/docs/advanced/override_grammar/basic)")


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else "invalid config"
