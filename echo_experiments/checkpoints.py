"""Checkpoints that survive preemption: a killed run restarts where its last checkpoint left it.

- ``checkpoints/state/<step>``: the train state (params, model state, optimizer state, step, RNG), by Orbax.
- ``checkpoints/data/<step>/``: the input pipeline's iterator (its position, shuffle buffers and the echo
  stage's place, by tf.train.Checkpoint; one per process), the set of read ids already trained on, and the
  loop's counters (evaluation cadence, time so far, target bookkeeping).

The data part is written first and renamed into place, and the Orbax step last (atomically), so the
newest Orbax step always has its data part. Restoring both gives the same stream of batches and the same
fresh-example count as if the run had never stopped.
"""

import json
import os
import shutil
from pathlib import Path
from typing import Any, Optional

import numpy as np
import orbax.checkpoint as ocp
import tensorflow as tf


def exist(directory: Path | str) -> bool:
    """Whether ``directory`` (a run's checkpoints folder) holds a complete checkpoint to resume from."""
    return any((Path(directory) / "data").glob("*/loop.json"))


class Checkpoints:
    def __init__(self, directory: Path | str, keep: int = 2, host: int = 0):
        directory = Path(directory)
        self.data = directory / "data"
        self.host = host
        self.manager = ocp.CheckpointManager(
            (directory / "state").absolute(),
            options=ocp.CheckpointManagerOptions(max_to_keep=keep, enable_async_checkpointing=False))

    def latest(self) -> Optional[int]:
        """The newest complete checkpoint's step, or None."""
        step = self.manager.latest_step()
        return step if step is not None and (self.data / str(step) / "loop.json").exists() else None

    def save(self, step: int, state: Any, iterator: Any, seen: np.ndarray, loop: dict[str, Any]) -> None:
        folder = self.data / str(step)
        part = self.data / f".{step}.{self.host}.partial"
        shutil.rmtree(part, ignore_errors=True)
        part.mkdir(parents=True)
        tf.train.Checkpoint(iterator=iterator).write(str(part / f"iterator_{self.host}"))
        np.save(part / f"seen_{self.host}.npy", seen)
        (part / "loop.json").write_text(json.dumps(loop))
        folder.mkdir(parents=True, exist_ok=True)
        for item in part.iterdir():
            os.replace(item, folder / item.name)
        part.rmdir()
        self.manager.save(step, args=ocp.args.StandardSave(state))
        self.manager.wait_until_finished()
        kept = {str(s) for s in self.manager.all_steps()}
        for old in self.data.iterdir():
            if old.name not in kept and not old.name.startswith("."):
                shutil.rmtree(old, ignore_errors=True)

    def restore(self, step: int, state: Any, iterator: Any) -> tuple[Any, np.ndarray, dict[str, Any]]:
        """(train state shaped and sharded like ``state``, the seen read ids, the loop's counters); the
        iterator is restored in place."""
        folder = self.data / str(step)
        restored = self.manager.restore(step, args=ocp.args.StandardRestore(state))
        tf.train.Checkpoint(iterator=iterator).read(str(folder / f"iterator_{self.host}")).assert_consumed()
        seen = np.load(folder / f"seen_{self.host}.npy")
        return restored, seen, json.loads((folder / "loop.json").read_text())

    def close(self) -> None:
        self.manager.close()
