"""A run's TensorBoard event files, in ``<run dir>/tb``: `tensorboard --logdir <sweep dir>` shows every trial.

Written with TensorFlow's own ``tf.summary`` (already the input pipeline's library; Flax's clu writers wrap the
same files and would add a dependency whose last release is from 2024) and TensorBoard's HParams API. The
rows are the ones metrics.jsonl gets, so the event files never say anything metrics.jsonl does not.

Tags: ``eval/<metric>``, ``train/loss``, ``train/learning_rate``, ``train/fresh_examples`` and
``train/effective_echo_factor`` (examples trained / fresh examples so far, the record's effective_echo_factor: e
once the echo stage is in steady state; with the autopilot also ``train/delivered_per_fresh``, metrics.jsonl's
factor it chose since the evaluation before; where the run profiled its input, ``train/input_slowdown``: timing.py),
``worth/<candidate>`` (with ``trainer.copy_worth_every``, the
copy-worth estimate: worth.py) and ``time/<clock>`` on the step axis; the same losses and metrics
again under ``by_fresh/`` with fresh examples as the step, the axis the paper compares echoed and baseline runs on;
``outcome/...`` once at the end (the HParams dashboard's metrics: fresh examples to target, reached or not, the
timing facts).
"""

import math
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import tensorflow as tf

# hparams from the module the plugin's api re-exports it from: the api also imports its Keras callback, and Keras.
from tensorboard.plugins.hparams import summary_v2 as hp

from echo_experiments.core.record import RunRecord
from echo_experiments.core.rundir import TB

# Row keys that are bookkeeping, not curves.
_NOT_CURVES = {"step", "fresh_examples", "examples_trained", "learning_rate", "train_loss", "delivered_per_fresh",
               "input_slowdown"}
_CLOCKS = {"elapsed_s", "wall_time_s", "eval_time_s"}
_WORTH = "copy_worth_"  # the copy-worth estimate's fields (worth.py): curves of training, not of evaluation
# tf.summary.scalar stores float32 and raises on a larger value (a diverging LM's perplexity, exp(568), is one);
# such a value is left out of the event files like inf and NaN, and stays in metrics.jsonl.
_FLOAT32_MAX = float(np.finfo(np.float32).max)


def _number(value: Any) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
            and abs(value) <= _FLOAT32_MAX)


class Events:
    """The event files of one run. Opening them starts the folder over from ``rows`` (metrics.jsonl's rows
    kept by a resumed run), so a resumed run continues the same curves without a point written twice."""

    def __init__(self, run_path: Path, hparams: dict[str, Any], rows: Iterable[dict[str, Any]] = ()):
        folder = Path(run_path) / TB
        for old in folder.glob("events.out.tfevents.*"):  # its own earlier files only (RunDir refuses a foreign tb/)
            old.unlink()
        self.writer = tf.summary.create_file_writer(str(folder))
        with self.writer.as_default():
            hp.hparams({k: v for k, v in hparams.items() if isinstance(v, (bool, int, float, str))},
                       trial_id=Path(run_path).name)
        for row in rows:
            self.row(row)

    def row(self, row: dict[str, Any]) -> None:
        """One evaluation's row: curves on steps and, for losses and metrics, on fresh examples."""
        step, fresh = int(row["step"]), int(row["fresh_examples"])
        with self.writer.as_default():
            scalars = {"train/loss": row.get("train_loss"), "train/learning_rate": row.get("learning_rate"),
                       "train/fresh_examples": fresh,
                       "train/effective_echo_factor": row["examples_trained"] / fresh if fresh else None,
                       "train/delivered_per_fresh": row.get("delivered_per_fresh"),
                       "train/input_slowdown": row.get("input_slowdown")}
            scalars.update({f"worth/{k[len(_WORTH):]}": v for k, v in row.items() if k.startswith(_WORTH)})
            metrics = {k: v for k, v in row.items()
                       if k not in _NOT_CURVES and k not in _CLOCKS and not k.startswith(_WORTH)}
            for name, value in {**scalars, **{f"eval/{k}": v for k, v in metrics.items()},
                                **{f"time/{k}": row.get(k) for k in _CLOCKS}}.items():
                if _number(value):
                    tf.summary.scalar(name, value, step=step)
            for name, value in {"train/loss": row.get("train_loss"), **{f"eval/{k}": v for k, v in metrics.items()}
                                }.items():
                if _number(value):
                    tf.summary.scalar(f"by_fresh/{name}", value, step=fresh)
        self.writer.flush()

    def outcome(self, record: RunRecord) -> None:
        """The run's outcome, once, at its last step: what a sweep is sorted and filtered by."""
        summary = record.to_json()
        ends = ("_to_target", "_s", "_fraction", "ratio", "_share")
        facts = {"reached_target": float(record.reached),
                 **{k: v for k, v in summary.items() if k.endswith(ends) or k == "effective_echo_factor"}}
        with self.writer.as_default():
            for name, value in facts.items():
                if _number(value):
                    tf.summary.scalar(f"outcome/{name}", value, step=record.steps)
            tf.summary.text("outcome/status", record.status, step=record.steps)
            if record.input_bound is not None:  # XProf's words beside R (core/input_bound.py)
                tf.summary.text("outcome/input_bound", record.input_bound, step=record.steps)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()
