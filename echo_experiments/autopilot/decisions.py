"""The autopilot's decisions, recorded so that a rerun can make them again (``echo.replay``).

The autopilot (autopilot.py) decides by the clock, so two runs of one config copy different batches. A run with
``echo.factor=auto`` writes ``echo_decisions.json`` in its directory: for every batch handed to the trainer,
fresh (``f``) or a copy (``c``), and ``r`` where the run resumed from a checkpoint (there the batch read ahead
was dropped and the copies started over from new fresh batches; ``s`` where a user's loader was restored to its
state before that batch, which is read again), run-length coded. A run given
``echo.replay=<that run's directory>`` makes the same decisions whatever its input's speed, so with the same
config on the same machine it trains step for step as the recorded run did; past the recorded decisions the
clock decides again. What makes a decision possible is the placement, the cap and the batch size: a replay
refuses a record made with others.
"""

import json
import logging
from pathlib import Path
from typing import Any, Optional

from echo_experiments.core.placement import EchoSpec
from echo_experiments.core.rundir import write_atomic
from echo_experiments.core.schema import ConfigError

log = logging.getLogger(__name__)
FILE = "echo_decisions.json"
FRESH, COPY, RESUMED = "f", "c", "r"
# Restored exactly (a loader whose own state was saved before the batch read ahead): the copies start over, nothing
# is dropped.
RESTORED = "s"
STARTS_OVER = (RESUMED, RESTORED)
# What a decision depends on, as the record names it and as the config key that sets it.
KEYS = {"placement": "echo.placement", "max_factor": "echo.max_factor", "batch_size": "workload.batch_size"}


class Decisions:
    """Decisions in the order made, as runs of one kind: [[kind, count], ...]."""

    def __init__(self, runs: Optional[list] = None):
        self.runs = [[str(kind), int(count)] for kind, count in runs or []]

    def add(self, kind: str) -> None:
        if self.runs and self.runs[-1][0] == kind:
            self.runs[-1][1] += 1
        else:
            self.runs.append([kind, 1])

    def kinds(self) -> str:
        """One letter per decision."""
        return "".join(kind * count for kind, count in self.runs)


class Replay:
    """Recorded decisions to make again, one at a time; None once they are all made."""

    def __init__(self, decisions: Decisions, source: Path):
        self.kinds, self.source, self.at = decisions.kinds(), source, 0
        self._said_done = False

    def seek(self, delivered: int) -> None:
        """Go on after the first ``delivered`` batches (a resumed replay: they were trained before)."""
        self.at = 0
        while delivered and self.at < len(self.kinds):
            delivered -= self.kinds[self.at] not in STARTS_OVER
            self.at += 1

    def next(self) -> Optional[str]:
        if self.at < len(self.kinds):
            self.at += 1
            return self.kinds[self.at - 1]
        if not self._said_done:
            log.info("made the %d recorded decisions of %s: the clock decides from here", self.at, self.source)
            self._said_done = True
        return None

    def mismatch(self, delivered: int) -> ConfigError:
        return ConfigError("echo.replay", str(self.source), "", (
            f"echo.replay={self.source}: its decision {delivered + 1} copies where nothing recent can be copied within "
            "echo.max_factor: the record is not of this config; replay it with the recorded run's config"))


def header(echo: EchoSpec, batch_size: int) -> dict[str, Any]:
    return {"placement": echo.placement.value, "max_factor": echo.max_factor, "batch_size": batch_size}


def write(run_dir: Path, echo: EchoSpec, batch_size: int, decisions: Decisions) -> None:
    write_atomic(run_dir / FILE, json.dumps({**header(echo, batch_size), "decisions": decisions.runs}) + "\n")


def replay(echo: EchoSpec, batch_size: int) -> Optional[Replay]:
    """The plan of ``echo.replay`` (None: the clock decides); ConfigError for a record that is missing, damaged
    or made with another placement, cap or batch size."""
    if echo.replay is None:
        return None
    given = Path(echo.replay).expanduser()
    path = given / FILE if given.is_dir() else given
    if not path.is_file():
        raise ConfigError("echo.replay", echo.replay, "", (
            f"echo.replay={echo.replay}: {path} does not exist: give the directory of a run made with "
            f"echo.factor=auto (it writes {FILE})"))
    try:
        recorded = json.loads(path.read_text())
        decisions = Decisions(recorded["decisions"])
        if not set(decisions.kinds()) <= {FRESH, COPY, *STARTS_OVER}:
            raise ValueError("unknown decision")
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ConfigError("echo.replay", echo.replay, "", (
            f"echo.replay={echo.replay}: {path} cannot be read as a record of decisions ({type(e).__name__}): "
            "give the directory of a run made with echo.factor=auto")) from None
    for name, value in header(echo, batch_size).items():
        if recorded.get(name) != value:
            raise ConfigError("echo.replay", echo.replay, "", (
                f"echo.replay={echo.replay}: the recorded run has {KEYS[name]}={recorded.get(name)}, this run "
                f"{value}: replay it with the recorded run's {KEYS[name]}"))
    return Replay(decisions, given)
