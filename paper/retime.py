"""``python -m paper.retime SWEEP_DIR``: run each study's best trial again, alone, for its seconds.

Seconds to target count only from runs that had the machine to themselves (docs/protocol.md), but a study's trials
need not be timed to be tuned: a trial's fresh examples to target do not depend on the clock (the stream is
deterministic, storage included), and the trials of one condition spend the same time per fresh example (same
model, same pipeline, same evaluations), so the trial with the fewest fresh examples to target is the fastest too.
So a wall-clock sweep is tuned with two jobs at a time, and this command then reruns each (condition, study)'s
best trial one at a time, with the job's own overrides, into SWEEP_DIR/timed/<job folder> (for a folder restored
from results/, which keeps no .hydra/, the overrides its job folders' names say, held to the configs they
recorded). Given SWEEP_DIR, the reporter counts a trial run twice once and takes seconds only from the runs that
were alone. A timed run must reach the target with the same fresh examples as its tuning run (the reporter counts
no other: it timed another training); each finished run prints both, and what else kept the cores busy meanwhile.

``--again`` times each trial timed alone once a second time (timed/<job folder>,again): the two timings of one
training give the timing band of the autopilot's checks on this CPU model (docs/protocol.md), and a speedup takes
the median of both. ``--exclude TEXT`` leaves out the trials whose job folder names contain it (a sweep's
conditions that no timed claim reads). ``--store OVERRIDE`` (repeatable: ``--store storage=emulated --store
storage.latency_ms=40``) times the trials on another store than they were tuned on. The store changes when a fresh
batch arrives, never what it holds or its order (storage.py reads in order), so the timed run trains as its tuning
run did; only ``storage`` overrides are taken, and the same check of fresh examples holds them to it. A folder's
timed runs are of one store: the first call writes its overrides to timed/store.json, and a later call with others
is refused.
"""

import argparse
import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

import yaml
from omegaconf import OmegaConf

from echo_experiments.cli.compose import compose_all
from echo_experiments.core.machine import SHARED_CORES, was_alone
from echo_experiments.core.record import RecordError, RunRecord
from echo_experiments.core.rundir import CONFIG, SUMMARY, TIMED, RunDir
from echo_experiments.core.schema import ConfigError
from echo_experiments.report import tables
from echo_experiments.report.collect import collect
from echo_experiments.training.timing import OtherWork
from echo_experiments.workloads.trials import apply_trial
from paper.archive import STORE

AGAIN = ",again"  # the folder suffix of a trial's second timing (--again)

# Seconds the machine is watched before the first run, to say at once whether timings made now can count.
IDLE_CHECK_S = 3.0


def best_trials(sweep: Path) -> list[str]:
    """The job folders (relative to ``sweep``) of each (condition, study)'s best trial that reached the target,
    study by study: a retime stopped part-way has timed whole studies, whose speedups pair within them."""
    trials, _, _, _ = collect([sweep])
    if trials.empty:
        return []
    tuned = trials[~trials["path"].str.startswith(f"{TIMED}/")]
    bests = tables.study_bests(tuned)
    return list(bests[bests["reached"]].sort_values(["study_key", "best_path"], kind="stable")["best_path"])


def _job_overrides(job: Path) -> list[str]:
    """The command-line overrides Hydra ran the job with (its .hydra/overrides.yaml; for a job restored from
    results/, which keeps no .hydra/, those its folder's name says)."""
    path = job / ".hydra" / "overrides.yaml"
    if not path.exists() and (job / CONFIG).is_file():
        return _named_overrides(job)
    try:
        overrides = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError):
        overrides = None
    if not isinstance(overrides, list):
        raise ValueError(f"{path} is missing or unreadable: retime reruns the jobs of a sweep folder Hydra wrote "
                         "(multirun/...), not an archived copy of its runs")
    return held_to_config(job, path, [str(o) for o in overrides])


def held_to_config(job: Path, path: Path, overrides: list[str]) -> list[str]:
    """``overrides`` (read from ``path``, a file of the folder) if they compose the config the job recorded, before
    anything runs or is imported: a file the user did not write may not choose the code a timed run imports
    (a workload.task) or Hydra's own settings (hydra.* keys). ValueError naming the key otherwise."""
    hydra = [o for o in overrides if o.lstrip("+~").split("=", 1)[0].split("/", 1)[0].split(".", 1)[0] == "hydra"]
    if hydra:
        raise ValueError(f"{path} holds {hydra[0]}: retime passes on a job's config overrides, never a hydra key "
                         "from a file; remove it (or rerun the job by hand)")
    try:  # composed, the trial's drawn values applied, and nothing validated: validating imports a user's task
        composed = _trial_config(overrides)
    except ConfigError as e:
        raise ValueError(f"{path}'s overrides do not compose: {e}") from None
    differ = RunDir(job).differences(composed)
    if differ:
        raise ValueError(f"{path}'s overrides compose another config than the job's {CONFIG} ({differ[0]}): retime "
                         "times the job that ran; restore the file (or rerun the job by hand)")
    return overrides


def _trial_config(overrides: list[str]) -> dict:
    """The resolved config ``overrides`` compose, a trial's drawn values applied (nothing validated)."""
    return OmegaConf.to_container(apply_trial(next(iter(compose_all(overrides, multirun=False)))), resolve=True)


def _named_overrides(job: Path) -> list[str]:
    """A restored job's overrides from its folder's name, which Hydra wrote from them (key=value joined by
    commas, hydra.job.override_dirname), taken only where they compose the config the job recorded on every key
    the record has (RunDir.differences): a name cut short, or one whose value held a comma or a slash, is
    refused, not guessed."""
    overrides = re.split(r",(?=[\w.+~@/-]+=)", job.name)
    try:
        differ = RunDir(job).differences(_trial_config(overrides))
    except ConfigError as e:
        raise ValueError(f"{job} has no .hydra/overrides.yaml, and the overrides its name says do not compose: "
                         f"{e}") from None
    if differ:
        raise ValueError(f"{job} has no .hydra/overrides.yaml, and the overrides its name says compose another "
                         f"config than its {CONFIG} ({differ[0]}): rerun it from the sweep folder Hydra wrote")
    return overrides


def _record(path: Path) -> Optional[RunRecord]:
    try:
        return RunRecord.read(path)
    except RecordError:
        return None


def _line(name: str, timed: RunRecord, tuned: Optional[RunRecord]) -> str:
    fresh, tuned_fresh = timed.fresh_examples_to_target, tuned.fresh_examples_to_target if tuned else None
    text = (f"timed {name}: {timed.status}, {fresh} fresh examples to target (its tuning run: {tuned_fresh}), "
            f"{timed.seconds_to_target or float('nan'):.1f} s to target, "
            f"other processes kept {timed.other_cores or 0.0:.2f} cores busy")
    if fresh != tuned_fresh:
        text += "; the fresh examples differ from the tuning run's: the stream was not the same, so this timing is " \
                "not of the tuned trial"
    if timed.other_cores is None:
        text += "; it recorded nothing of other work, so it is not known to be alone and does not count " \
                "(--redo-shared)"
    elif not was_alone(timed.other_cores):
        text += f"; above {SHARED_CORES:g}, so it shared the machine and does not count (--redo-shared)"
    return text


def _run(command: list[str], timeout_s: float) -> Optional[int]:
    """Run one timed job and return its exit status (None when it ran past ``timeout_s`` and was killed).

    SIGTERM is passed on to the job, which stops at a step boundary; Ctrl-C reaches it from the terminal
    already (a second one would stop it at once), so this process only waits for it to end."""
    child = subprocess.Popen(command)
    handlers = {signal.SIGTERM: lambda signum, frame: child.send_signal(signum),
                signal.SIGINT: lambda signum, frame: None}
    previous = {s: signal.signal(s, h) for s, h in handlers.items()}
    try:
        code = child.wait(timeout=timeout_s)
        return 128 - code if code < 0 else code  # ended by signal n (before it could catch it): the shell's 128 + n
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()
        return None
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def positive(text: str) -> float:
    """A number of minutes for argparse: above 0."""
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text} is not a number of minutes above 0")
    return value


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m paper.retime", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sweep", type=Path, help="a sweep folder (hydra.sweep.dir) whose studies are tuned")
    parser.add_argument("--redo-shared", action="store_true",
                        help="time again the timed runs that shared the machine (kept otherwise)")
    parser.add_argument("--timeout-min", type=positive, default=180.0,
                        help="minutes one timed run may take before it is stopped (default 180)")
    parser.add_argument("--list", action="store_true", help="print the trials it would time, and time none")
    parser.add_argument("--exclude", action="append", default=[], metavar="TEXT",
                        help="leave out the trials whose job folder names contain TEXT (echo=after_batching, say; "
                             "repeatable): time only the conditions a claim reads")
    parser.add_argument("--again", action="store_true",
                        help="time each trial timed alone once a second time, into timed/<job folder>,again: two "
                             "timings of one training on this CPU model, the timing band of the autopilot's checks")
    parser.add_argument("--store", action="append", default=[], metavar="OVERRIDE",
                        help="a storage override to time the trials on another store than they were tuned on "
                             "(storage=emulated, storage.latency_ms=40; repeatable)")
    args = parser.parse_args(argv)
    if not args.sweep.is_dir():
        print(f"error: no such sweep folder: {args.sweep}", file=sys.stderr)
        return 2
    problem = _store_problem(args.sweep, args.store)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    names = [n for n in best_trials(args.sweep) if not any(text in n for text in args.exclude)]
    if not names:
        print(f"error: no study in {args.sweep} has a trial that reached its target"
              f"{' outside --exclude' if args.exclude else ''}: nothing to time",
              file=sys.stderr)
        return 2
    todo = _todo(args.sweep, names, args.redo_shared, args.again)
    done = "timed twice already" if args.again else "timed already"
    print(f"{len(names)} best trials in {args.sweep}; {len(names) - len(todo)} {done}, {len(todo)} to time"
          + "".join(f"\n  {n}" for n in todo))
    if args.list or not todo:
        return 0
    try:
        overrides = {name: _job_overrides(args.sweep / name) + args.store for name in todo}
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    (args.sweep / TIMED).mkdir(exist_ok=True)
    (args.sweep / TIMED / STORE).write_text(json.dumps(args.store) + "\n")
    return _time_all(args.sweep, todo, overrides, args.timeout_min, AGAIN if args.again else "")


def _todo(sweep: Path, names: list[str], redo_shared: bool, again: bool) -> list[str]:
    """The trials still to time: not timed (or, with ``redo_shared``, timed beside other work); with ``again``,
    those timed alone once and not a second time."""
    todo = []
    for name in names:
        first = _record(sweep / TIMED / name / SUMMARY)
        timed = _record(sweep / TIMED / f"{name}{AGAIN}" / SUMMARY) if again else first
        if again and (first is None or not was_alone(first.other_cores)):
            continue  # a second timing pairs with a first one alone
        if timed is None or (redo_shared and not was_alone(timed.other_cores)):
            todo.append(name)
    return todo


def _store_problem(sweep: Path, store: list[str]) -> Optional[str]:
    """Why ``--store`` cannot be taken: an override of something other than the store, or a store other than the
    one the folder's timed runs were timed on (None where it can)."""
    other = [o for o in store if not o.split("=", 1)[0].lstrip("+~").split(".")[0] == "storage" or "=" not in o]
    if other:
        return (f"--store {other[0]}: only the store may change in a timed run (storage=..., storage.KEY=...), so "
                "that it trains as its tuning run did")
    written = sweep / TIMED / STORE
    try:  # timed runs and no record of their store: an earlier retime's, on the store they were tuned on
        before = json.loads(written.read_text()) if written.is_file() else (
            [] if any((sweep / TIMED).glob(f"*/{SUMMARY}")) else None)
    except (OSError, ValueError):
        return f"{written} is unreadable: it says which store the timed runs used; restore it or move timed/ away"
    if before is not None and before != store:
        shown = " ".join(f"--store {o}" for o in before) or "no --store"
        return (f"{sweep / TIMED} holds runs timed with {shown}: give the same, or move timed/ away to time them "
                "on another store")
    return None


def _time_all(sweep: Path, todo: list[str], overrides: dict[str, list[str]], timeout_min: float,
              suffix: str = "") -> int:
    """Time each trial in ``todo`` alone, one after another, into SWEEP/timed/<job folder><suffix>."""
    watch = OtherWork()
    time.sleep(IDLE_CHECK_S)
    busy = watch.seconds() / IDLE_CHECK_S
    if busy > SHARED_CORES:
        print(f"warning: other processes keep {busy:.2f} cores busy; runs timed while they do will not count",
              file=sys.stderr)
    began = time.time()
    for i, name in enumerate(todo, 1):
        out = sweep / TIMED / f"{name}{suffix}"
        # Quoted: job folders are named by their overrides (key=value,key=value), which would parse as a sweep.
        quoted = str(out).replace("\\", "\\\\").replace("'", "\\'")
        command = [sys.executable, "-m", "echo_experiments", *overrides[name], f"hydra.run.dir='{quoted}'"]
        if (out / SUMMARY).exists():  # a timing that shared the machine: its run is made again from the start
            command.append("trainer.restart=true")
        code = _run(command, timeout_min * 60)
        if code is None:
            print(f"error: timing {name} took more than {timeout_min:g} min and was stopped", file=sys.stderr)
            return 1
        if code != 0:  # the run's own error is above; a signal's 128 + n is passed on
            print(f"error: timing {name} ended with status {code}; run the same command again to time it and the "
                  "rest", file=sys.stderr)
            return code
        timed = _record(out / SUMMARY)
        if timed is None:
            print(f"error: timing {name} wrote no readable summary.json in {out}", file=sys.stderr)
            return 1
        print(_line(name, timed, _record(sweep / name / SUMMARY)))
        left = (len(todo) - i) * (time.time() - began) / i
        print(f"retime {sweep}: {i} of {len(todo)} timed, about {left / 60:.0f} min left", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
