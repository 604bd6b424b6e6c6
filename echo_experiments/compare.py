"""``python -m echo_experiments.compare [overrides] [--factor E] [--no-auto] [--out DIR]``: does echoing help
this training?

One command for the question a user has: profile the input and the step (R, the factor it recommends), then
train the baseline, the echoed run and the autopilot (echo.factor=auto) on the same fresh-example schedule to
the workload's target, and print fresh examples and seconds to target for each, the speedup beside the one R
predicts, the factor each really echoed at, what an echoed example was worth, the R each run measured, and whether
other work shared the machine while they were timed; then a one-line answer. A baseline that reaches its target
within its first evaluations leaves nothing to measure: compare says so and stops (exit 2); a factor higher than
the evaluation cadence resolves is cut to one it does. The runs stay in DIR (a run directory each) for the reporter.
"""

import argparse
import logging
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

import numpy as np
from omegaconf import DictConfig

from echo_experiments.cli.compose import PROFILE_RUN, compose_all, profile_overrides
from echo_experiments.cli.exits import fail, one_line_on_signal
from echo_experiments.cli.plan import check_command_line
from echo_experiments.core.config import MAX_FACTOR
from echo_experiments.core.input_bound import in_words
from echo_experiments.core.machine import SHARED_CORES
from echo_experiments.core.record import RunRecord
from echo_experiments.core.rundir import unwritable
from echo_experiments.core.schema import ConfigError
from echo_experiments.training.timing import Timing

# Below this factor echoing repeats too little to show anything: the comparison echoes at 2 and says so.
SMALLEST = 1.05


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m echo_experiments.compare", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("overrides", nargs="*", help="config overrides, as for python -m echo_experiments")
    parser.add_argument("--factor", type=_factor, help="the echo factor to compare, at least 1 (default: the one R "
                        "recommends)")
    parser.add_argument("--no-auto", dest="auto", action="store_false",
                        help="leave out the autopilot's run (echo.factor=auto at the echoed run's placement)")
    parser.add_argument("--out", type=_out, help="where the runs go (default compare/<workload>/<time>)")
    return parser.parse_args(argv)


def _factor(text: str) -> float:
    """--factor's value: a number of examples trained per fresh one, above 1 (1 is the baseline, which compare runs
    anyway: a comparison of it with itself trained for minutes to say "cannot tell"; 0 is not "none")."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (1 < value <= MAX_FACTOR):
        raise argparse.ArgumentTypeError(f"{text} is not an echo factor to compare: a number above 1 and at most "
                                         f"{MAX_FACTOR} (1 is the baseline, which compare runs anyway)")
    return value


def _out(text: str) -> Path:
    """--out's value: a folder's path, never empty (an empty one would be the working folder itself)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty --out would write the runs into the working folder itself: give a "
                                         "folder's path")
    return Path(text)


def _training():
    """Training a composed config (checked at the front door) and the missing-data error, imported when a run
    starts: --help and the command line's errors answer without TensorFlow and JAX."""
    from echo_experiments.data.sources import DataMissing
    from echo_experiments.training.trainer import run
    from echo_experiments.workloads.run_check import check_run

    def train(cfg: DictConfig, out: Path) -> RunRecord:
        return run(check_run(cfg), out)
    return train, DataMissing


def _run(overrides: list[str], out: Path, name: str = "") -> RunRecord:
    run, DataMissing = _training()
    error = check_command_line(overrides)
    if error:
        fail(error)
    if name:
        print(f"training {name} to the target: {out}", flush=True)
    try:
        return run(next(iter(compose_all(overrides, multirun=False))), out)
    except (ConfigError, DataMissing) as e:
        fail(str(e))


def autopilot(overrides: list[str], placement: str, out: Path) -> tuple[str, RunRecord]:
    """The autopilot's run at the echoed run's placement, so that it differs from that run only in choosing its
    factor; after batching where the workload cannot echo there with it (before augmentation, examples of
    varying shape). Returns the placement it ran at and its record."""
    auto = [*overrides, "echo.factor=auto"]
    run, DataMissing = _training()
    print(f"training the autopilot to the target: {out}", flush=True)
    try:
        return placement, run(next(iter(compose_all([*auto, f"echo.placement={placement}"], multirun=False))), out)
    except ConfigError as e:
        if e.key != "echo.placement" or placement == "after_batching":
            fail(str(e))
        print(f"  the autopilot cannot echo at {placement} here ({e}): it runs after batching", flush=True)
    except DataMissing as e:
        fail(str(e))
    return "after_batching", _run([*auto, "echo.placement=after_batching"], out)


def profile(overrides: list[str]) -> tuple[Timing, Optional[float]]:
    """The timing facts of a short run of the config, and how many cores other work kept busy meanwhile."""
    with tempfile.TemporaryDirectory(prefix="echo_compare_") as out:
        record = _run(profile_overrides(overrides), Path(out))
    return Timing(record.upstream_s_per_batch, record.downstream_s_per_step), record.other_cores


# A run that trained at most this many examples per fresh example echoed nothing worth measuring.
NO_ECHO_BELOW = 1.01
# A baseline that reached its target in fewer evaluations leaves nothing to measure: one evaluation would be more
# than a tenth of its fresh examples, more than the timing spread below.
MIN_EVALUATIONS = 10
# The most echoing the cadence resolves: a factor whose best case (every copy worth a fresh example) would reach
# the target in fewer evaluations than this is cut to one that takes this many.
EVALUATIONS_AT_BEST = 2
# Identical training timed minutes apart on one machine took 0.93-1.13 of the baseline's seconds
# (the project's runs of the autopilot on local storage, where it copies nothing): a speedup within 10% of 1 is
# no gain.
TIMING_SPREAD = 0.10
# R measured in the profile and the runs: beyond this ratio of the highest to the lowest the input changed speed
# between the runs (each of R's two timings moves by the spread above).
R_DRIFT = 1.25


def evaluations_to_target(record: RunRecord, every: int) -> Optional[int]:
    """The evaluation, counted from 1, at which a run reached its target (None: it did not)."""
    reached = record.fresh_examples_to_target
    return None if reached is None else max(1, round(reached / every))


def resolvable_factor(base: RunRecord, every: int) -> Optional[float]:
    """The highest factor the evaluation cadence resolves against this baseline (None: no limit known)."""
    k = evaluations_to_target(base, every)
    return None if k is None else max(1.0, k / EVALUATIONS_AT_BEST)


def _echoed(r: RunRecord) -> bool:
    return r.effective_echo_factor is not None and r.effective_echo_factor > NO_ECHO_BELOW


def worth(base: RunRecord, echoed: RunRecord) -> Optional[float]:
    """What one echoed example was worth in fresh ones: w in fresh_base / fresh_echoed = 1 + w (e_eff - 1), where
    e_eff is the run's examples trained per fresh example (1: as good as fresh; 0: useless)."""
    if not (base.fresh_examples_to_target and echoed.fresh_examples_to_target and _echoed(echoed)):
        return None
    e = echoed.effective_echo_factor
    return (base.fresh_examples_to_target / echoed.fresh_examples_to_target - 1) / (e - 1)


def _cell(value: Optional[float], digits: int = 1) -> str:
    return "not reached" if value is None else f"{value:,.{digits}f}"


def _worth_cell(base: RunRecord, r: RunRecord) -> str:
    if r is base:
        return ""
    if r.effective_echo_factor is not None and not _echoed(r):
        return "nothing echoed"
    return _cell(worth(base, r), 2)


def _shared(rows: list[tuple[str, RunRecord]]) -> list[str]:
    """The runs timed while other work kept more than SHARED_CORES busy (or with no record of it)."""
    return [name for name, r in rows if r.other_cores is None or r.other_cores > SHARED_CORES]


def _ratios(rows: list[tuple[str, RunRecord]], timing: Timing) -> list[float]:
    """R as the profile and each run measured it (a run measures it when trainer.profile_batches > 0)."""
    return [timing.ratio, *(r.upstream_downstream_ratio for _, r in rows if r.upstream_downstream_ratio)]


def table(base: RunRecord, echoed: list[tuple[str, RunRecord]], timing: Timing) -> str:
    """The comparison as Markdown: fresh examples and seconds to target, the speedup beside what R predicts,
    the factor each run really echoed at, what an echoed example was worth, the R each run measured and what its
    steps and copies cost its input (input_slowdown)."""
    def speedup(r: RunRecord) -> Optional[float]:
        return base.seconds_to_target / r.seconds_to_target if base.seconds_to_target and r.seconds_to_target \
            else None

    rows = [("baseline", base), *echoed]
    lines = ["| run | fresh examples to target | seconds to target | speedup | predicted | trained per fresh | "
             "one echoed example worth | other cores busy | R in the run | input slowdown |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for name, r in rows:
        predicted = timing.predicted_speedup(r.effective_echo_factor or 1.0) if r is not base else None
        lines.append(f"| {name} | {_cell(r.fresh_examples_to_target, 0)} | {_cell(r.seconds_to_target)} | "
                     f"{_cell(speedup(r), 2) if r is not base else ''} | {_cell(predicted, 2) if predicted else ''} | "
                     f"{_cell(r.effective_echo_factor, 2)} | {_worth_cell(base, r)} | "
                     f"{_cell(r.other_cores, 2)} | {_cell(r.upstream_downstream_ratio, 2)} | "
                     f"{'-' if r.input_slowdown is None else _cell(r.input_slowdown, 2)} |")
    shared, ratios = _shared(rows), _ratios(rows, timing)
    lines += ["", f"speedup: baseline seconds / the run's seconds to target; predicted from R = {timing.ratio:.2f} at "
              "the factor the run trained at: max(1, min(e, R)), the bound if every echoed example were as good as "
              "a fresh one; an echoed example's worth w: fresh examples baseline / run = 1 + w (e - 1)",
              "input slowdown: the run's seconds of training per fresh batch over its input's alone (the median "
              "over evaluations): 1 where the input paced the run and its steps and copies cost it nothing; above "
              "1 where they took time from it (an echoed run's above the baseline's is what its copies cost the "
              "input here); below 1 where the run's fresh batches came faster than the profile timed the input "
              "alone (the profile pulls the plain pipeline with nothing downstream for a few hundred batches, "
              "not the run's steady state): read an echoed run's value against the baseline's in this table, "
              "not against 1",
              f"R (upstream seconds a batch / seconds a step): {timing.ratio:.2f} in the profile ("
              f"{in_words(timing.wait_share)} without echoing), {min(ratios):.2f}-{max(ratios):.2f} over the "
              "profile and the runs",
              (f"the machine was shared while {' and '.join(shared)} ran (more than {SHARED_CORES:g} cores of other "
               "work): its seconds are not a clean timing; run again on an idle machine") if shared else
              "the machine was not shared while any ran: the seconds are timings"]
    return "\n".join(lines) + "\n"


def answer(base: RunRecord, echoed: list[tuple[str, RunRecord]], timing: Timing, every: int) -> str:
    """The comparison's answer in one line of two parts. Fresh examples, which no machine moves: what each echoed
    run needed against the baseline, within one evaluation or not, and what a copy was worth. Seconds, where the
    runs were timed fairly (the machine not shared, R the same in every run): the fastest echoed run's seconds to
    target against the baseline's, split into fresh examples and seconds per fresh example. Where the baseline
    leaves nothing to measure, it cannot tell either."""
    k = evaluations_to_target(base, every)
    if k is None:
        return ("cannot tell: the baseline did not reach the target (raise trainer.max_fresh_examples or lower "
                "workload.target.value)")
    if k < MIN_EVALUATIONS:
        return (f"cannot tell: the baseline reached the target at evaluation {k} ({base.fresh_examples_to_target:,} "
                f"fresh examples, one evaluation every {every:,}), too early for the comparison to measure anything; "
                f"evaluate at least {MIN_EVALUATIONS} times before the target (trainer.eval_every_fresh_examples="
                f"{max(1, base.fresh_examples_to_target // MIN_EVALUATIONS)}) or set a harder workload.target.value")
    return f"fresh examples: {_fresh_part(base, echoed, every)}; seconds: {_seconds_part(base, echoed, timing)}"


def _fresh_part(base: RunRecord, echoed: list[tuple[str, RunRecord]], every: int) -> str:
    """What echoing did to the fresh examples to target, run by run: the machine-independent half of the answer."""
    said = []
    for name, r in echoed:
        if not r.fresh_examples_to_target:
            said.append(f"{name} did not reach the target")
            continue
        ratio = r.fresh_examples_to_target / base.fresh_examples_to_target
        close = abs(r.fresh_examples_to_target - base.fresh_examples_to_target) < every
        w = worth(base, r)
        copy = f", a copy worth {w:.2f} of a fresh example" if w is not None else ", nothing echoed"
        said.append(f"{name} needed {ratio:.2f}x the baseline's" + (" (within one evaluation)" if close else "")
                    + copy)
    return "; ".join(said) if said else "no echoed run"


def _seconds_part(base: RunRecord, echoed: list[tuple[str, RunRecord]], timing: Timing) -> str:
    """The seconds half: only from runs timed on an unshared machine against an input of one speed."""
    rows = [("baseline", base), *echoed]
    if shared := _shared(rows):
        return f"cannot tell: the machine was shared while {' and '.join(shared)} ran; run again on an idle machine"
    ratios = _ratios(rows, timing)
    if max(ratios) > R_DRIFT * min(ratios):
        return (f"cannot tell: R moved from {min(ratios):.2f} to {max(ratios):.2f} between the profile and the runs "
                "(the input changed speed), so their seconds were timed against different inputs; run again")
    reached = [(name, r) for name, r in echoed if r.seconds_to_target]
    if not reached:
        return "no gain here: no echoed run reached the target"
    name, best = min(reached, key=lambda item: item[1].seconds_to_target)
    speedup = base.seconds_to_target / best.seconds_to_target
    fresh = best.fresh_examples_to_target / base.fresh_examples_to_target
    parts = (f"fresh examples to target {fresh:.2f}x the baseline's, seconds per fresh example "
             f"{speedup ** -1 / fresh:.2f}x")
    if speedup > 1 + TIMING_SPREAD:
        return f"echoing saved {1 - 1 / speedup:.0%} of the seconds to target here: {name}, {speedup:.2f}x ({parts})"
    if speedup < 1 - TIMING_SPREAD:
        return f"no gain here: the fastest echoed run, {name}, was slower, {speedup:.2f}x ({parts})"
    return (f"no gain here: the fastest echoed run, {name}, {speedup:.2f}x, is within the {TIMING_SPREAD:.0%} spread "
            f"of identical runs ({parts})")


def _show_progress() -> None:
    """The trainer's line per evaluation on stderr: each run takes minutes."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("  %(message)s"))
    logger = logging.getLogger("echo_experiments.training.trainer")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False  # a handler the libraries put on the root logger would print each line again


def main(argv: Optional[list[str]] = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    if any(o.startswith(("echo.factor=", "echo=", "echo.placement=")) for o in args.overrides):
        fail("echo.factor, echo.placement and echo= are set by compare (the baseline, --factor, the autopilot): "
             "leave them out")
    if placed := [o for o in args.overrides if o.startswith(("hydra.run.dir=", "hydra.sweep.dir="))]:
        fail(f"{placed[0].split('=')[0]} is set by compare (a folder for each of its runs under --out): give --out "
             "instead")
    error = check_command_line(args.overrides)
    if error:
        fail(error)
    _show_progress()
    cfg = next(iter(compose_all(args.overrides, multirun=False)))
    given = [name for name in ("out", "factor") if getattr(args, name) is not None]
    args.out = args.out or Path("compare") / cfg.workload.name / time.strftime("%Y-%m-%d_%H-%M-%S")
    if problem := unwritable(args.out):  # before minutes of profiling
        fail(f"--out {args.out} cannot be used ({problem}): choose another folder")
    with one_line_on_signal(lambda: _go_on(args, given)):
        return _compare(args, cfg, argv)


def _go_on(args: argparse.Namespace, given: list[str]) -> str:
    """How to finish an interrupted comparison: the same folder (its runs resume, or are complete) and the same
    factor (the profile's recommendation may differ on a rerun)."""
    if not args.out.exists():
        return "nothing was kept (it was profiling): run the same command again"
    again = ([] if "out" in given else [f"--out {args.out}"]) + \
        ([] if "factor" in given or args.factor is None else [f"--factor {args.factor:g}"])
    how = f"add {' '.join(again)} to the same command" if again else "run the same command"
    return f"the runs so far are in {args.out}: {how} to go on from there"


def _compare(args: argparse.Namespace, cfg: DictConfig, argv: Optional[list[str]]) -> int:
    steps = PROFILE_RUN["trainer.max_steps"]
    print(f"profiling: {steps} steps of the input and the train step, without echoing", flush=True)
    timing, busy = profile(args.overrides)
    print(timing.advice(busy), flush=True)
    args.factor = args.factor or timing.recommended_echo_factor()
    if args.factor < SMALLEST:
        args.factor = 2.0
        print(f"echoing at e=2 to show what it costs: R = {timing.ratio:.2f} recommends none", flush=True)
    out, every = args.out, int(cfg.trainer.eval_every_fresh_examples)
    command = f"`python -m echo_experiments.compare {' '.join(argv or sys.argv[1:])}`"
    base = _run(args.overrides + ["echo.factor=1"], out / "baseline", "the baseline")
    k = evaluations_to_target(base, every)
    if k is not None and k < MIN_EVALUATIONS:
        line = answer(base, [], timing, every)
        (out / "compare.md").write_text(f"{command}\n\n{table(base, [], timing)}\n{line}\n")
        fail(line)
    factor = _resolvable(args.factor, base, every)
    echoed = [(f"e={factor:g} at {cfg.echo.placement}",
               _run(args.overrides + [f"echo.factor={factor:g}"], out / f"echo_factor={factor:g}", f"e={factor:g}"))]
    if args.auto:
        placement, auto = autopilot(args.overrides, cfg.echo.placement, out / "echo_factor=auto")
        echoed.append((f"auto at {placement} (cap {auto.echo_max_factor:g})", auto))
    text = f"{table(base, echoed, timing)}\n{answer(base, echoed, timing, every)}\n"
    print(text)
    (out / "compare.md").write_text(f"{command}\n\n{text}")
    return 0


def _resolvable(factor: float, base: RunRecord, every: int) -> float:
    """``factor``, or the highest one the evaluation cadence resolves against the baseline, saying so."""
    cap = resolvable_factor(base, every)
    if cap is None or factor <= cap:
        return factor
    cut = float(np.floor(cap * 100) / 100)
    print(f"echoing at e={cut:g}, not {factor:g}: the baseline reached the target at evaluation "
          f"{evaluations_to_target(base, every)}, and above e={cut:g} even copies as good as fresh examples would "
          f"reach it in fewer than {EVALUATIONS_AT_BEST} evaluations, which the cadence cannot tell apart", flush=True)
    return cut


if __name__ == "__main__":
    sys.exit(main())
