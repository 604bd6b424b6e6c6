"""``python -m echo_experiments.compare [overrides] [--factor E] [--out DIR]``: does echoing help this training?

One command for the question a user has: profile the input and the step (R, the factor it recommends), then
train the baseline and the echoed run on the same fresh-example schedule to the workload's target, and print
fresh examples and seconds to target for both, the speedup beside the one R predicts, and whether other work
shared the machine while they were timed. Both runs stay in DIR (a run directory each) for the reporter.
"""

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

from echo_experiments.cli import fail
from echo_experiments.compose import compose_all
from echo_experiments.data.sources import DataMissing
from echo_experiments.record import RunRecord
from echo_experiments.report.tables import SHARED_CORES
from echo_experiments.schema import ConfigError
from echo_experiments.sweep import check_command_line
from echo_experiments.timing import Timing
from echo_experiments.train import run

PROFILE = ["trainer.max_steps=200", "trainer.stop_at_target=false", "trainer.progress=false"]
# Below this factor echoing repeats too little to show anything: the comparison echoes at 2 and says so.
SMALLEST = 1.05


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m echo_experiments.compare", description=__doc__.splitlines()[0])
    parser.add_argument("overrides", nargs="*", help="config overrides, as for python -m echo_experiments")
    parser.add_argument("--factor", type=float, help="the echo factor to compare (default: the one R recommends)")
    parser.add_argument("--out", type=Path, help="where the two runs go (default compare/<workload>/<time>)")
    return parser.parse_args(argv)


def _run(overrides: list[str], out: Path) -> RunRecord:
    error = check_command_line(overrides)
    if error:
        fail(error)
    try:
        return run(next(iter(compose_all(overrides, multirun=False))), out)
    except (ConfigError, DataMissing) as e:
        fail(str(e))


def profile(overrides: list[str]) -> tuple[Timing, Optional[float]]:
    """The timing facts of a short run of the config, and how many cores other work kept busy meanwhile."""
    with tempfile.TemporaryDirectory(prefix="echo_compare_") as out:
        record = _run([*PROFILE, *overrides], Path(out))
    return Timing(record.upstream_s_per_batch, record.downstream_s_per_step), record.other_cores


def table(base: RunRecord, echoed: RunRecord, timing: Timing, factor: float) -> str:
    """The comparison as Markdown: fresh examples and seconds to target, the speedup and what R predicts."""
    def cell(value, digits=1):
        return "not reached" if value is None else f"{value:,.{digits}f}"

    predicted = max(1.0, min(factor, timing.ratio))
    speedup = (base.seconds_to_target / echoed.seconds_to_target
               if base.seconds_to_target and echoed.seconds_to_target else None)
    fresh = (echoed.fresh_examples_to_target / base.fresh_examples_to_target
             if base.fresh_examples_to_target and echoed.fresh_examples_to_target else None)
    rows = [("baseline", base), (f"e={factor:g} at {echoed.placement}", echoed)]
    lines = ["| run | fresh examples to target | seconds to target | other cores busy |", "|---|---|---|---|"]
    lines += [f"| {name} | {cell(r.fresh_examples_to_target, 0)} | {cell(r.seconds_to_target)} | "
              f"{cell(r.other_cores, 2)} |" for name, r in rows]
    shared = [name for name, r in rows if r.other_cores is None or r.other_cores > SHARED_CORES]
    lines += ["", f"speedup (baseline seconds / echoed seconds): {cell(speedup, 2)}; predicted from R = "
              f"{timing.ratio:.2f}: {predicted:.2f}",
              f"fresh examples, echoed / baseline: {cell(fresh, 2)}",
              (f"the machine was shared while {' and '.join(shared)} ran (more than {SHARED_CORES:g} cores of other "
               "work): its seconds are not a clean timing; run again on an idle machine") if shared else
              "the machine was not shared while either ran: the seconds are timings"]
    return "\n".join(lines) + "\n"


def main(argv: Optional[list[str]] = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    if any(o.startswith(("echo.factor=", "echo=")) for o in args.overrides):
        fail("echo.factor and echo= are set by compare (the baseline, then --factor): leave them out")
    error = check_command_line(args.overrides)
    if error:
        fail(error)
    timing, busy = profile(args.overrides)
    print(timing.advice(busy), flush=True)
    factor = args.factor or timing.recommended_echo_factor()
    if factor < SMALLEST:
        factor = 2.0
        print(f"echoing at e=2 to show what it costs: R = {timing.ratio:.2f} recommends none", flush=True)
    cfg = next(iter(compose_all(args.overrides, multirun=False)))
    out = args.out or Path("compare") / cfg.workload.name / time.strftime("%Y-%m-%d_%H-%M-%S")
    base = _run([*args.overrides, "echo.factor=1"], out / "baseline")
    echoed = _run([*args.overrides, f"echo.factor={factor:g}"], out / f"echo_factor={factor:g}")
    text = table(base, echoed, timing, factor)
    print(text)
    (out / "compare.md").write_text(f"`python -m echo_experiments.compare {' '.join(argv or sys.argv[1:])}`\n\n{text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
