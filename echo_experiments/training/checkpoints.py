"""Checkpoints that survive preemption, through Orbax's own CheckpointManager.

One Orbax step holds three items, written together and committed atomically by Orbax (a step folder
exists only once complete; ``max_to_keep`` removes old ones):

- ``state``: the train state (params, model state, optimizer state, step, RNG), saved asynchronously: the
  arrays are copied to the host before ``save`` returns and written while training goes on;
- ``loop``: the loop's counters (evaluation cadence, time so far, target bookkeeping), as JSON;
- ``input``: the input pipeline's position, one folder per process: tf.data's own iterator checkpoint (its
  place in the data, shuffle buffers, the echo stage) and the read ids already trained on. Only this part
  is written by TensorFlow, through the small handler below.

A run with the copy-worth estimate (``trainer.copy_worth_every``) adds a fourth, ``worth``: the held-out gradient
its measures are taken against (its counters are in ``loop``), so that a resumed run measures as if it had never
stopped. A checkpoint without it resumes with the estimate taken afresh.

Restoring all three gives the same stream of batches and the same fresh-example count as if the run had
never stopped.
"""

import dataclasses
import logging
import os
import shutil
from pathlib import Path
from typing import Any, Optional

import jax
import numpy as np
import orbax.checkpoint as ocp
import tensorflow as tf
from etils import epath

from echo_experiments.core.schema import ConfigError

log = logging.getLogger(__name__)


# Read by tensorflow.python.eager.context.async_wait (ParameterServerStrategy sets it too).
SKIP_ASYNC_WAIT = "TF_PS_DISABLE_ASYNC_EXECUTOR_GLOBALLY"


class InputHandler(ocp.CheckpointHandler):
    """Orbax handler for one process's input state: tf.data iterator + seen read ids."""

    def __init__(self) -> None:
        self._iterator: Any = None
        self._checkpoint: Optional[tf.train.Checkpoint] = None

    def _for(self, iterator: Any) -> tf.train.Checkpoint:
        # One tf.train.Checkpoint per iterator: a new one would trace its save function again at every save.
        if iterator is not self._iterator:
            self._iterator, self._checkpoint = iterator, tf.train.Checkpoint(iterator=iterator)
        return self._checkpoint

    def save(self, directory: epath.Path, args: "InputSave") -> None:
        # tf.train.Checkpoint.write ends with context.async_wait(), which syncs every eager executor in the
        # process while the input pipeline's threads go on running py_function calls (emulated and HTTP
        # storage, the tokenizer), and that sync can abort the process (sync_executors with a py_function
        # mid-call in another thread). Nothing here runs eager ops asynchronously, so the wait has nothing to
        # wait for: TensorFlow's own switch skips it.
        os.environ[SKIP_ASYNC_WAIT] = "True"
        folder = epath.Path(directory) / f"process_{jax.process_index()}"
        folder.mkdir(parents=True, exist_ok=True)
        self._for(args.iterator).write(str(folder / "iterator"))
        seen = np.asarray(args.seen, bool)
        np.savez(str(folder / "seen.npz"), bits=np.packbits(seen), size=seen.size)

    def restore(self, directory: epath.Path, args: "InputRestore") -> np.ndarray:
        folder = epath.Path(directory) / f"process_{jax.process_index()}"
        self._for(args.iterator).read(str(folder / "iterator")).assert_consumed()
        with np.load(str(folder / "seen.npz")) as saved:
            return np.unpackbits(saved["bits"], count=int(saved["size"])).astype(bool)

    def metadata(self, directory: epath.Path) -> None:
        return None


@ocp.args.register_with_handler(InputHandler, for_save=True)
@dataclasses.dataclass
class InputSave(ocp.args.CheckpointArgs):
    iterator: Any
    seen: np.ndarray


@ocp.args.register_with_handler(InputHandler, for_restore=True)
@dataclasses.dataclass
class InputRestore(ocp.args.CheckpointArgs):
    iterator: Any


def exist(directory: Path | str) -> bool:
    """Whether ``directory`` (a run's checkpoints folder) holds a complete checkpoint to resume from."""
    return bool(ocp.utils.checkpoint_steps(Path(directory)))


# What a checkpoint of a run holds, a folder each: the train state, the loop's counters, the input's state.
ITEMS = ("state", "loop", "input")
WORTH = "worth"  # the optional fourth: the copy-worth estimate's held-out gradient
# The suffix of the folder Orbax writes a step into until it is complete (renamed to the step's number then).
PARTIAL = ".orbax-checkpoint-tmp"


class _DiskFullSaid(logging.Filter):
    """Orbax's save threads log a full disk at ERROR with their whole traceback (absl's logger), before the
    trainer's own one line says it and what to do: those records are left out."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return "No space left on device" not in f"{record.getMessage()} {error or ''}"


def _denied(error: BaseException) -> bool:
    """Whether a failure to read was the file system's refusal (somewhere in its chain of causes)."""
    while error is not None:
        if isinstance(error, PermissionError) or "Permission denied" in str(error):
            return True
        error = error.__cause__ or error.__context__
    return False


class Checkpoints:
    def __init__(self, directory: Path | str, keep: int = 2):
        self.directory = Path(directory).absolute()
        self.manager = ocp.CheckpointManager(
            Path(directory).absolute(),
            options=ocp.CheckpointManagerOptions(max_to_keep=keep, enable_async_checkpointing=True),
            item_handlers=dict(zip(ITEMS, (ocp.StandardCheckpointHandler(), ocp.JsonCheckpointHandler(),
                                           InputHandler())), **{WORTH: ocp.StandardCheckpointHandler()}))
        absl = logging.getLogger("absl")
        if not any(isinstance(f, _DiskFullSaid) for f in absl.filters):
            absl.addFilter(_DiskFullSaid())

    def latest(self) -> Optional[int]:
        """The newest complete checkpoint's step, or None."""
        return self.manager.latest_step()

    def steps(self) -> list[int]:
        """Every complete checkpoint's step, newest first: those the manager reads, and the folders of complete
        ones it cannot (a damaged checkpoint must be said, not passed over as if the run had none)."""
        folders = self.directory.iterdir() if self.directory.is_dir() else ()
        return sorted(set(self.manager.all_steps()) | {int(p.name) for p in folders if p.name.isdigit()}, reverse=True)

    def ours(self, step: int) -> bool:
        """Whether the checkpoint folder of ``step`` is one this program wrote: it holds each of its items."""
        return all((self.directory / str(step) / item).is_dir() for item in ITEMS)

    def discard(self, step: int) -> None:
        """Delete a checkpoint that cannot be read (so the run's next saves follow the one it resumed from)."""
        if step in self.manager.all_steps():
            self.manager.delete(step)
        else:
            shutil.rmtree(self.directory / str(step), ignore_errors=True)

    def discard_partial(self) -> list[Path]:
        """Delete the folders of saves this process began and never completed (a full disk stopped them): they
        cannot be resumed from and hold the space a next save needs. The folders deleted. The save in flight is
        waited for first, to its end or its failure: deleting its folder while its thread writes and then renames
        it left a step folder without its items, which the next run refused as not this program's."""
        try:
            self.manager.wait_until_finished()
        except Exception as e:  # noqa: BLE001 - the full disk again, as Orbax raises it: the run's own line says so
            log.info("the save in flight when the disk filled did not complete (%s)", str(e).strip()[:160])
        partial = [p for p in self.directory.glob(f"*{PARTIAL}*") if p.name.split(".")[0].isdigit() and p.is_dir()]
        for folder in partial:
            shutil.rmtree(folder, ignore_errors=True)
        return partial

    def save(self, step: int, state: Any, iterator: Any, seen: np.ndarray, loop: dict[str, Any],
             worth: Any = None) -> None:
        """Save; returns once the input's state is written and the train state copied off the device."""
        extra = {WORTH: ocp.args.StandardSave(worth)} if worth is not None else {}
        self.manager.save(step, args=ocp.args.Composite(
            state=ocp.args.StandardSave(state), loop=ocp.args.JsonSave(loop), input=InputSave(iterator, seen),
            **extra))

    def restore(self, step: int, state: Any, iterator: Any, worth: Any = None) -> tuple[Any, np.ndarray, dict, Any]:
        """(train state shaped and sharded like ``state``, the seen read ids, the loop's counters, the held-out
        gradient shaped like ``worth`` where the checkpoint has one and ``worth`` is given, else None); the
        iterator is restored in place."""
        extra = ({WORTH: ocp.args.StandardRestore(worth)}
                 if worth is not None and (self.directory / str(step) / WORTH).is_dir() else {})
        restored = self.manager.restore(step, args=ocp.args.Composite(
            state=ocp.args.StandardRestore(state), loop=ocp.args.JsonRestore(), input=InputRestore(iterator),
            **extra))
        return restored["state"], restored["input"], dict(restored["loop"]), restored[WORTH] if extra else None

    def restore_newest(self, steps: list[int], state: Any, iterator: Any,
                       worth: Any = None) -> tuple[Any, np.ndarray, dict, Any]:
        """:meth:`restore` of the newest readable checkpoint of ``steps`` (newest first); a damaged one is said,
        deleted, and the one before it tried. ConfigError when none can be read."""
        for step in steps:
            folder = self.directory / str(step)
            if not self.ours(step):  # never deleted: it may be anything of anyone's
                raise ConfigError("hydra.run.dir", str(self.directory.parent), "", (
                    f"{folder} is not a checkpoint this program wrote (it lacks {', '.join(ITEMS)}): move it out of "
                    "the run directory, or choose another hydra.run.dir"))
            try:
                return self.restore(step, state, iterator, worth)
            except Exception as e:  # noqa: BLE001 - Orbax, TensorFlow and NumPy each raise their own on bad bytes
                why = (str(e).strip().splitlines() or [type(e).__name__])[0][:160]
                if _denied(e):  # not damage: the bytes may be fine, and deleting them would lose the run
                    raise ConfigError("hydra.run.dir", str(self.directory.parent), "", (
                        f"the checkpoint at step {step} in {self.directory} cannot be read ({why}): nothing was "
                        "deleted; give this user read access to it and run the same command again")) from None
                log.warning("the checkpoint at step %d in %s cannot be read (%s): deleted; trying the one before",
                            step, self.directory, why)
                self.discard(step)
        raise ConfigError("trainer.restart", False, "", (
            f"no checkpoint in {self.directory} can be read (steps {', '.join(map(str, steps))}, each damaged): "
            "add trainer.restart=true to start this run over"))

    def close(self) -> None:
        """Wait for the last save to be committed, then release the manager's threads."""
        self.manager.wait_until_finished()
        self.manager.close()
