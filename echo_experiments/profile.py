"""``python -m echo_experiments.profile [overrides]``: where a config's time goes, and the echo factor that
would reclaim it. A short normal run (200 steps unless told otherwise) measures the timing facts
(timing.py) and prints them with the recommendation."""

import sys
import tempfile
from typing import Optional

from echo_experiments.cli.compose import compose_all
from echo_experiments.cli.exits import fail, one_line_on_signal
from echo_experiments.cli.plan import check_command_line
from echo_experiments.core.schema import ConfigError
from echo_experiments.data.sources import DataMissing
from echo_experiments.report.verdicts.autopilot_checks import input_bound_verdicts
from echo_experiments.training.timing import Timing
from echo_experiments.training.trainer import run


def main(argv: Optional[list[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if {"-h", "--help"} & set(argv):
        print(f"usage: python -m echo_experiments.profile [overrides]\n\n{__doc__}")
        return 0
    given = {a.split("=", 1)[0] for a in argv}
    defaults = {"trainer.max_steps": 200, "trainer.stop_at_target": "false", "trainer.progress": "false"}
    overrides = [f"{k}={v}" for k, v in defaults.items() if k not in given] + argv
    error = check_command_line(overrides)
    if error:
        fail(error)
    cfg = next(iter(compose_all(overrides, multirun=False)))
    if not cfg.trainer.profile_batches:  # the timing facts are what this command prints
        fail(f"trainer.profile_batches={cfg.trainer.profile_batches} is not allowed here: an integer >= 1 "
             "(the batches the profiler times)")
    with one_line_on_signal(lambda: "nothing is kept (the profile runs in a temporary folder): run it again"), \
            tempfile.TemporaryDirectory(prefix="echo_profile_") as out:
        try:
            summary = run(cfg, out)
        except (ConfigError, DataMissing) as e:
            fail(str(e))
    timing = Timing(summary.upstream_s_per_batch, summary.downstream_s_per_step)
    print(f"upstream    {timing.upstream_s_per_batch:.4f} s per batch (input pipeline alone, no echoing)")
    print(f"downstream  {timing.downstream_s_per_step:.4f} s per step (train step on a cached batch)")
    print(f"R           {timing.ratio:.2f}")
    print(f"idle        {summary.accelerator_idle_fraction:.2f} of a {summary.steps}-step run's training "
          f"time was not spent in train steps (after {summary.startup_s:.1f} s to the first batch)")
    e = timing.recommended_echo_factor()
    print(f"recommended echo factor: {e:g} (the largest e <= R)")
    print(f"predicted   speedup over no echoing at e={e:g}: {timing.predicted_speedup(e):.2f}, if every echoed "
          "example were worth a fresh one (python -m echo_experiments.compare measures it)")
    print(timing.advice(summary.other_cores, autopilot=input_bound_verdicts()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
