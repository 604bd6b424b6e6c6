"""``python -m echo_experiments [overrides]``: one run (or a sweep, with ``-m``) of a workload with echoing.

A bad config value or a missing data set ends the program with one line on stderr and exit status 2.
"""

import logging
import sys
from typing import Optional

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from echo_experiments.config import ConfigError
from echo_experiments.preflight import check_command_line

log = logging.getLogger("echo_experiments")


def fail(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def run_job(cfg: DictConfig) -> Optional[float]:
    from echo_experiments.data.sources import DataMissing
    from echo_experiments.train import run

    out_dir = HydraConfig.get().runtime.output_dir
    try:
        summary = run(cfg, out_dir)
    except (ConfigError, DataMissing) as e:
        fail(str(e))
    log.info("%s: %s fresh examples to target, %d steps, %d fresh examples, %.1f s of training -> %s",
             summary["status"], summary["fresh_examples_to_target"], summary["steps"], summary["fresh_examples"],
             summary["wall_time_s"], out_dir)
    # The objective a sweeper minimises: fresh examples to target (infinite when not reached).
    reached = summary["fresh_examples_to_target"]
    return float(reached) if reached is not None else float("inf")


def main() -> None:
    error = check_command_line(sys.argv[1:])
    if error:
        fail(error)
    run_job()


if __name__ == "__main__":
    main()
