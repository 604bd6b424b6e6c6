"""``python -m echo_experiments.benchmark [overrides] [--repeats N] [--out FILE]``: is the echo stage free,
and what does the runner's train loop cost? Medians over repeats, every variant measured in the same run.

1. Echo: items per second the input pipeline delivers with nothing downstream, for every echo point and
   factor, on input-bound storage (the paper's setting: upstream is the bottleneck, so an echoed pipeline
   should deliver e times the plain one's items) and on local storage (for reference: there the stages after
   the echo point repeat their work). Efficiency = delivered items/s / (e x plain items/s).
2. The echo stage alone: its own seconds per delivered item, on examples or batches already in memory
   (nothing upstream to hide behind), against the plain local pipeline's seconds per delivered item.
3. The Grain echo stage (echo_experiments.grain) alone, the same way, against a Grain pipeline that reads and
   decodes the same stored records without it.
4. Runner: steps per second of the trainer's loop (fresh-example counting, evaluation cadence, progress,
   loss bookkeeping), and of the same loop with the autopilot deciding at every step, against a bare loop of
   the same compiled step, all over the same cached batches.
5. Trial: what a trial's seconds are made of, the train step on a cached batch and one evaluation of the
   held-out set, at the config's evaluation batch size and at 32 and 128 (the same examples and sums, in other
   batches), with the evaluation's share of the time between two evaluations at the config's cadence.

``--tables`` chooses among them (default: echo, stage, grain, loop; trial on request).
"""

import argparse
import os
import sys
from typing import Optional

from echo_experiments.cli.compose import compose_all
from echo_experiments.cli.exits import fail, one_line_on_signal
from echo_experiments.cli.plan import check_command_line
from echo_experiments.core import machine
from echo_experiments.workloads.run_check import checked_config


def at_least(low: int):
    """An argparse type: an integer >= low (a rate needs two timed points; argparse exits 2 with one line)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < low:
            raise argparse.ArgumentTypeError(f"{text} is not allowed: an integer >= {low}")
        return value
    return parse


TABLES = ("echo", "stage", "grain", "loop", "trial")
TITLES = {"echo": "Echo stage: items/s delivered, nothing downstream",
          "stage": "The echo stage alone: its cost per delivered item",
          "grain": "The Grain echo stage alone: its cost per delivered item",
          "loop": "Train loop: steps/s on the same cached batches",
          "trial": "A trial's seconds: the train step and one evaluation"}


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m echo_experiments.benchmark", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("overrides", nargs="*", help="config overrides, as for python -m echo_experiments")
    parser.add_argument("--repeats", type=at_least(1), default=5)
    parser.add_argument("--batches", type=at_least(2), default=30, help="plain batches timed per pipeline measurement")
    parser.add_argument("--steps", type=at_least(2), default=300, help="steps timed per loop measurement")
    parser.add_argument("--out", help="also write the tables here (markdown)")
    parser.add_argument("--tables", nargs="+", choices=TABLES, default=list(TABLES[:4]),
                        help="the tables to measure (default: all but trial)")
    args = parser.parse_args(argv)
    if args.out and (os.path.isdir(args.out) or not os.access(os.path.dirname(os.path.abspath(args.out)), os.W_OK)):
        fail(f"--out {args.out} cannot be written: give a file in an existing, writable folder")  # before measuring
    error = check_command_line(args.overrides)
    if error:
        fail(error)
    cfg = checked_config(next(iter(compose_all(args.overrides, multirun=False))))
    # TensorFlow and JAX once the command line is understood: --help and its errors answer without them.
    from echo_experiments.data.sources import data_dir
    from echo_experiments.report.markdown import table
    from echo_experiments.training import benchmarks, parallel
    from echo_experiments.training.trainer import DTYPES
    from echo_experiments.workloads import make

    parallel.use_compilation_cache(cfg.trainer.compilation_cache_dir)
    with one_line_on_signal(lambda: "nothing is written before every measurement is done: run it again"):
        workload = make(cfg.workload, data_dir(cfg.data.dir), DTYPES[cfg.trainer.precision])
        sections = [(TITLES[name], rows) for name, rows in benchmarks.measure(cfg, workload, args, TABLES)]
    command = " ".join(["python -m echo_experiments.benchmark", *(argv if argv is not None else sys.argv[1:])])
    cpu = machine.describe()
    text = (f"Measured with `{command}` ({args.repeats} repeats, medians), on {cpu['cpu']}, {cpu['cores']} cores.\n"
            + "".join(f"\n## {title}\n\n{table(rows)}" for title, rows in sections))
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
