"""The training loop: SGD steps until a stop rule (stops.py) ends the run.

The budget (``trainer.max_fresh_examples``), the evaluation cadence (``trainer.eval_every_fresh_examples``)
and the learning-rate schedule (optim.py) are in fresh examples, so every echo factor is given the same
schedule, budget and measurement resolution in the paper's cost unit; echoing at factor e simply takes e
times the steps. The loop reads a device value only at evaluations and checkpoints: the steps in between run
asynchronously. What each of its times counts is written in clocks.py.

A run checkpoints every ``trainer.checkpoint_every_seconds`` of training (and/or every
``trainer.checkpoint_every_steps``) and when a signal stops it; started again in the same directory after
being killed, it resumes from the last checkpoint and ends as it would have without the interruption.
"""

import functools
import logging
import math
import time
from pathlib import Path
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np
import tensorflow as tf

from echo_experiments.autopilot import decisions
from echo_experiments.core import machine, user_code
from echo_experiments.core.fresh import FreshCounter
from echo_experiments.core.input_bound import in_words
from echo_experiments.core.record import RunRecord, jsonable
from echo_experiments.core.rundir import CHECKPOINTS, DiskFull, RunDir, study_best
from echo_experiments.core.schema import ConfigError
from echo_experiments.core.signals import Interrupted, Signals, StartupInterrupted, stop_if_signalled_at_startup
from echo_experiments.core.specs import RunSpec
from echo_experiments.data import closing, stream
from echo_experiments.data.sources import DataMissing, data_dir
from echo_experiments.data.storage import Store
from echo_experiments.training import optim, parallel, progress, timing, worth
from echo_experiments.training.checkpoints import Checkpoints
from echo_experiments.training.checkpoints import exist as checkpoints_exist
from echo_experiments.training.clocks import Clocks, ClockState
from echo_experiments.training.events import Events
from echo_experiments.training.inputs import Plain, trainer_inputs
from echo_experiments.training.loop_state import LoopState
from echo_experiments.training.step import TrainState, initial_state, learning_rates, make_slice_loss, make_train_step
from echo_experiments.training.stops import Budget, Divergence, Evaluation, Outcome, Pruning, Stops, TargetReached
from echo_experiments.training.waits import Batches, InputLost, PeerLost, input_source
from echo_experiments.workloads import make

log = logging.getLogger(__name__)
DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}


def run(spec: RunSpec, out_dir: Path | str) -> RunRecord:
    """Train the run ``spec`` describes (resuming from a checkpoint in ``out_dir`` if there is one), and write the
    run directory. Returns the run's record.

    ``spec`` comes from the front door, workloads.run_check.check_run, which checked its config. Raises
    ConfigError for a value that only the run can find wrong and DataMissing for an absent data set before
    training starts.
    """
    if not isinstance(spec, RunSpec):  # a config: the checks it must pass are the front door's
        raise TypeError(f"training.trainer.run takes a RunSpec, not a {type(spec).__name__}: check the config at the "
                        "front door first, echo_experiments.workloads.run_check.check_run(cfg)")
    parallel.use_compilation_cache(spec.trainer.compilation_cache_dir)
    mesh = parallel.setup(spec.parallel, spec.pipeline.batch_size)
    run_dir = RunDir(out_dir).hold() if mesh.writes_run_dir else RunDir(out_dir)
    try:
        return _run(spec, run_dir, mesh)
    except (KeyboardInterrupt, SystemExit, StartupInterrupted):  # none an Exception: _run lets them through
        log.warning("interrupted: %s keeps its metrics and checkpoints and has no summary.json", run_dir.path)
        raise
    except (ConfigError, DataMissing, Interrupted, InputLost, PeerLost, DiskFull):  # each already the line to show
        raise
    except Exception as e:  # one raised in a user's own workload: its line and message, not the libraries'
        raise user_code.task_error(e, spec.workload.task) or e
    finally:
        run_dir.release()


def _run(spec: RunSpec, run_dir: RunDir, mesh: parallel.Parallel) -> RunRecord:
    writer = mesh.writes_run_dir
    done = run_dir.begin(spec.config, spec.trainer.restart, checkpoints_exist(run_dir.path / CHECKPOINTS), writer)
    if done is not None:
        return done
    workload = make(spec.workload, data_dir(spec.data_dir), DTYPES[spec.trainer.precision])
    head = {**_identity(spec), "target": workload.target}
    # A trial of a study stops once it can no longer be the study's best (its siblings in the sweep directory).
    best = (lambda: study_best(run_dir.path.parent, head, workload.target)) if spec.trainer.prune else None
    hparams = ({**head, "target": workload.target.as_dict(), **spec.trial.searched}
               if spec.trainer.tensorboard and writer else None)
    checkpoints = Checkpoints(run_dir.path / CHECKPOINTS) if spec.trainer.checkpoints else None
    if writer and (checkpoints is None or checkpoints.latest() is None):
        run_dir.start(spec.config)
    try:
        if spec.pipeline.service:
            stream.check_service(spec.pipeline.service, spec.trainer.timeout_s)
        with Store(spec.storage, workload.train_source) as store:
            batches = stream.build(workload, spec.pipeline, store=store, host=mesh.host)
            trainer = Trainer(spec, workload, run_dir, mesh, batches, store, checkpoints, best, hparams,
                              input_source(spec))
            with progress.Heartbeat(log, trainer.starting):
                record = RunRecord(**head, **jsonable(trainer.fit()))
            if writer:
                run_dir.write_summary(record)
                trainer.close_events(record)
            trainer.close_input()
    except (ConfigError, Interrupted, InputLost, DiskFull):  # the command line says what happened and what to do
        raise
    except Exception as e:
        stop_if_signalled_at_startup()  # the start-up stop, turned into another error on its way
        if DiskFull.caused(e):  # nothing more can be written: the last complete checkpoint is what there is
            partial = checkpoints.discard_partial() if checkpoints else []
            raise DiskFull(f"no space left on the device of {run_dir.path}: the run keeps its last complete "
                           f"checkpoint{' (the unfinished save is deleted)' if partial else ''}; free space and run "
                           "the same command to resume") from None
        if writer:
            run_dir.write_summary(_failed(head, e))
        if mesh.host.count > 1 and isinstance(e, jax.errors.JaxRuntimeError):
            raise PeerLost(f"process {mesh.host.index} of {mesh.host.count} lost its peers "
                           f"({str(e).strip().splitlines()[0][:200]}): check the other processes' logs; the run "
                           "keeps its last checkpoint: run the same command on every process to resume") from e
        raise
    return record


def _identity(spec: RunSpec) -> dict[str, Any]:
    """What the run is: its condition (the effective pipeline: factor 1 has no echo stage and no echo shuffle),
    its seed and trial, and the machine."""
    echo = spec.pipeline.echo
    placement = echo.placement if echo.auto else echo.stage
    return {"workload": spec.workload.name, "placement": placement.value, "echo_factor": echo.factor,
            "echo_auto": echo.auto, "echo_max_factor": echo.max_factor,
            "echo_cap_rule": echo.cap if echo.auto and echo.cap != "fixed" else None,
            "batch_size": spec.pipeline.batch_size, "shuffle_buffer": spec.pipeline.echo_shuffle,
            "seed": spec.seed, "study": spec.trial.study, "trial": spec.trial.trial,
            "tuning_seed": spec.trial.tuning_seed, "machine": machine.describe()}


def _failed(head: dict[str, Any], error: Exception) -> RunRecord:
    return RunRecord(**head, status="failed", steps=0, fresh_examples=0, wall_time_s=0.0,
                     fresh_examples_to_target=None, steps_to_target=None, seconds_to_target=None,
                     error=f"{type(error).__name__}: {error}")


class Trainer:
    """One run's training: the compiled step, the input stream, the counters, evaluation and checkpoints."""

    def __init__(self, spec: RunSpec, workload: Any, run_dir: RunDir, mesh: parallel.Parallel,
                 batches: tf.data.Dataset, store: Optional[Store] = None, checkpoints: Optional[Checkpoints] = None,
                 study_best: Optional[Callable[[], Optional[int]]] = None, hparams: Optional[dict[str, Any]] = None,
                 source: str = "the input pipeline"):
        self.spec, self.t, self.workload, self.run_dir, self.mesh = spec, spec.trainer, workload, run_dir, mesh
        self.batches, self.store, self.checkpoints, self.source = batches, store, checkpoints, source
        self.hparams = hparams  # the run's values for TensorBoard's HParams (None: no event files)
        self.events: Optional[Events] = None
        self.inputs: Optional[Plain] = None  # the batches, or the autopilot over them (inputs.py)
        self.worth: Optional[worth.Plain] = None  # the step, with the copy-worth estimate (trainer.copy_worth_every)
        self.facts: Optional[timing.Timing] = None  # upstream and downstream time, profiled before training
        self._slice_step: Optional[Callable] = None  # the held-out slice's loss, compiled when first measured
        self.phase: Optional[str] = "starting"  # what the run does before its first evaluation (starting())
        self.at = (0, 0)  # the step and the fresh examples so far, for that line
        self.replay = decisions.replay(spec.pipeline.echo, spec.pipeline.batch_size)  # its errors before compiling
        self.tx = optim.optimizer(spec.optimizer)
        self.schedule = optim.schedule(spec.schedule)
        self.rate = learning_rates(self.schedule, mesh.replicated)
        rules = [Divergence(), TargetReached(workload.target, self.t.stop_at_target)]
        rules += [Pruning(study_best, self.t.prune_margin)] if study_best is not None else []
        self.stops = Stops(Budget(self.t.max_fresh_examples, self.t.max_steps), rules, Signals())

    def _compile(self, state: TrainState):
        spec = {k: jax.ShapeDtypeStruct((self.spec.pipeline.batch_size,) + tuple(v.shape[1:]), v.dtype.as_numpy_dtype,
                                        sharding=self.mesh.batch)
                for k, v in self.batches.element_spec.items() if k != "read_id"}
        step = jax.jit(make_train_step(self.workload, self.tx, self.workload.compute_dtype),
                       donate_argnums=0, in_shardings=(self.mesh.replicated, self.mesh.batch, self.mesh.replicated),
                       out_shardings=(self.mesh.replicated, self.mesh.replicated))
        rate = jax.ShapeDtypeStruct((), jnp.float32, sharding=self.mesh.replicated)
        self.worth = (worth.probe(self.workload, self.tx, self.mesh, self.t.copy_worth_every, state, spec, rate)
                      if self.t.copy_worth_every else worth.Plain(step.lower(state, spec, rate).compile()))
        return self.worth.train_step

    def _timing_facts(self, train_step, state: TrainState) -> Optional[timing.Timing]:
        """Upstream and downstream time before training, their waits bounded like training's (data.timeout_s)."""
        if not (self.t.profile_batches and self.store is not None):
            return None
        at_start = self.rate(self.mesh.put_scalar(0))
        waits = Batches(None, self.t.timeout_s, self.source, self.workload.train_source)

        def pull(fn):  # a signal ends the measurement at the next batch, not at its end
            self._started()
            return waits.call(fn)
        try:
            facts = timing.measure(self.workload, self.spec.pipeline, self.store, self.mesh.host,
                                   lambda state, batch: train_step(state, batch, at_start), state,
                                   self.t.profile_batches, pull=pull)
        finally:
            waits.close()
        log.info("upstream %.4f s/batch, downstream %.4f s/step: R = %.2f, %s without echoing",
                 facts.upstream_s_per_batch, facts.downstream_s_per_step, facts.ratio, in_words(facts.wait_share))
        return facts

    def starting(self) -> Optional[str]:
        """What the run is doing while it starts, for the heartbeat's line (None once it has evaluated)."""
        return self.phase.format(*self.at) if self.phase else None

    def _started(self) -> None:
        """A signal received while starting ends the run now, with nothing of this attempt to save."""
        if self.stops.signalled is not None:
            raise StartupInterrupted(self.stops.signalled)

    def _resume(self, state: TrainState, iterator) -> tuple[TrainState, FreshCounter, LoopState, Outcome, ClockState]:
        """The state to start from: the newest checkpoint that can be read, else the initial one."""
        steps = self.checkpoints.steps() if self.checkpoints else []
        if not steps:
            first = LoopState(next_eval=self.t.eval_every_fresh_examples, started_on=machine.describe()["cpu"])
            return state, FreshCounter(), first, Outcome(), ClockState()
        state, seen, saved, gradient = self.checkpoints.restore_newest(steps, state, iterator,
                                                                       self.worth.template(state))
        loop, outcome, clocks = LoopState.restore(saved)
        self.worth.resume(gradient, loop.copy_worth)
        machine.check_resumed_on(loop.started_on, self.run_dir.path)
        if self.mesh.writes_run_dir:
            self.run_dir.keep_metrics_until(loop.step)
        log.info("resumed %s at step %d (%d fresh examples)", self.run_dir.path, loop.step, int(seen.sum()))
        return state, FreshCounter.from_seen(seen), loop, outcome, clocks

    def fit(self) -> dict[str, Any]:
        """Train until a stop rule ends the run, a metrics row per evaluation; the record's outcome fields."""
        self.phase = "compiling the train step"
        with self.stops.signals:  # a signal during start-up is held until it can end the run cleanly
            self._started()  # one the start-up kept, before anything is compiled
            state = initial_state(self.workload, self.tx, self.spec.seed, self.mesh.replicated)
            began = time.perf_counter()
            train_step = self._compile(state)
            compile_s = time.perf_counter() - began
            self._started()
            self.phase = "profiling the input and the step"
            self.facts = facts = self._timing_facts(train_step, state)
            self.phase = "filling the input's buffers and training to the first evaluation: step {0}, {1} fresh"
            self._started()
            # Kept on the trainer: run() writes the summary before the iterator (and its threads) is torn down.
            self.iterator = iter(self.batches)
            state, fresh, loop, outcome, clock_state = self._resume(state, self.iterator)
            if self.hparams is not None:  # after keep_metrics_until: the event files start over from the kept rows
                self.events = Events(self.run_dir.path, self.hparams, self.run_dir.metrics())
            self.mesh.barrier("training", self.t.distributed_timeout_s)  # every process compiled: the first collective
            self._started()
            clocks = Clocks(clock_state)
            self.inputs = inputs = trainer_inputs(Batches(self.iterator, self.t.timeout_s, self.source,
                                                          self.workload.train_source),
                                                  self.spec.pipeline, self.workload, loop.autopilot, self.replay,
                                                  self._slice_loss, clocks.training)
            step = self._loop(state, fresh, loop, outcome, clocks, inputs)
        inputs.close()
        inputs.finish(self.run_dir.path if self.mesh.writes_run_dir else None)
        if self.checkpoints:
            with clocks.checkpointing():
                self.checkpoints.close()  # the last save's train state is committed before the summary says "done"
        count = self.mesh.total(fresh.count)
        if self.stops.signalled is not None and not outcome.stop:
            raise Interrupted(self.stops.signalled, step, count, self.run_dir.path, self.checkpoints is not None)
        return self._result(loop, outcome, clocks, step, count, compile_s, facts)

    def _loop(self, state, fresh: FreshCounter, loop: LoopState, outcome: Outcome, clocks: Clocks,
              inputs: Plain) -> int:
        t = self.t
        losses = [jnp.asarray(x) for x in loop.pending_losses]
        fresh_units = self.schedule.unit == optim.FRESH_EXAMPLES
        count, step = self.mesh.total(fresh.count), loop.step
        bar = progress.bar(t.max_fresh_examples, t.max_steps, count, step, self.mesh.writes_run_dir and t.progress)
        first = True  # the first batch waits for the shuffle buffers to fill: a signal then ends the start-up
        while not outcome.stop and self.stops.signalled is None:
            batch = inputs.next(self._started if first else lambda: None, running=losses[-1] if losses else None)
            first = False
            clocks.first_batch()
            position = count if fresh_units else step
            fresh.update(batch.pop("read_id"))
            before, count = count, self.mesh.total(fresh.count)
            rate = self.rate(self.mesh.put_scalar(position))
            with jax.profiler.StepTraceAnnotation("train", step_num=step):  # an XProf trace lines up with the steps
                state, loss = self.worth.step(state, self.mesh.put_batch(batch), rate, count - before, step)
            losses.append(loss)
            step += 1
            inputs.after_step(step, state)
            self.at = (step, count)
            bar.update(count - before if t.max_fresh_examples else 1)
            spent = self.stops.budget_spent(step, count)
            if count >= loop.next_eval or spent:
                self._evaluate(state, step, count, losses, loop, outcome, clocks, bar)
                losses = []
                outcome.stop = outcome.stop or spent
            # A signal stops at this step boundary with a checkpoint to resume from (when checkpointing); a run
            # that ended (target, budget, divergence) writes its record instead: it is never resumed.
            if (self.checkpoints and not outcome.stop
                    and clocks.checkpoint_due(t, step, self.stops.signalled is not None)):
                with clocks.checkpointing() as clock_state:
                    inputs.settle()
                    loop.step, loop.pending_losses = step, [float(x) for x in jax.device_get(losses)]
                    loop.autopilot = inputs.state()
                    gradient, loop.copy_worth = self.worth.saved()
                    self.checkpoints.save(step, state, self.iterator, fresh.seen,
                                          LoopState.save(loop, outcome, clock_state), gradient)
        bar.close()
        return step

    def _slice_loss(self, state: TrainState, batches: list) -> float:
        """The model's mean loss on batches it never trained on: the autopilot's slice (a moving cap's)."""
        if self._slice_step is None:
            self._slice_step = make_slice_loss(self.workload, self.workload.compute_dtype)
        trained = [{k: v for k, v in b.items() if k != "read_id"} for b in batches]
        losses = [self._slice_step(state.params, state.model_state, self.mesh.put_batch(b)) for b in trained]
        return float(np.mean(jax.device_get(losses)))

    def _evaluate(self, state, step: int, count: int, losses: list, loop: LoopState, outcome: Outcome,
                  clocks: Clocks, bar) -> None:
        self.phase = "evaluating at step {0} ({1} fresh examples)"
        # Waits for the last step. On the host: stacking on the device would compile a program per list length.
        train_loss = float(np.mean(jax.device_get(losses))) if losses else math.nan
        with clocks.evaluating() as elapsed_s:
            train_s = clocks.training(elapsed_s)
            metrics = self.workload.evaluate(state.params, state.model_state) if math.isfinite(train_loss) else {}
        loop.metrics, loop.train_loss = metrics, train_loss
        examples_trained = step * self.spec.pipeline.batch_size
        row = {"step": step, "fresh_examples": count, "examples_trained": examples_trained, "elapsed_s": elapsed_s,
               "wall_time_s": train_s, "eval_time_s": clocks.state.eval_s, "train_loss": train_loss,
               "learning_rate": float(optim.learning_rate(state.opt_state)), **metrics, **self.worth.at_evaluation(),
               **self.inputs.at_evaluation(examples_trained - loop.trained_at_eval, count - loop.fresh_at_eval)}
        if self.facts and loop.wall_at_eval is not None:  # the first interval holds the shuffle buffer's filling
            batches = (count - loop.fresh_at_eval) / self.spec.pipeline.batch_size
            row["input_slowdown"] = self.facts.input_slowdown(train_s - loop.wall_at_eval, batches)
        loop.trained_at_eval, loop.fresh_at_eval, loop.wall_at_eval = examples_trained, count, train_s
        if self.mesh.writes_run_dir:
            self.run_dir.append_metrics(row)
        if self.events:
            self.events.row(row)
        target = self.workload.target
        shown = metrics.get(target.metric, math.nan)
        chose = f"  echo {row['delivered_per_fresh']:.2f}" if "delivered_per_fresh" in row else ""  # the autopilot
        log.info("step %d  fresh %d  train_loss %.4f  %s %.4f%s  (%.1fs)", step, count, train_loss, target.metric,
                 shown, chose, train_s)
        bar.set_postfix(fresh=count, **{target.metric: f"{shown:.4f}"})
        cadence = self.t.eval_every_fresh_examples
        loop.next_eval = (count // cadence + 1) * cadence
        self.stops.after_evaluation(Evaluation(step, count, examples_trained, clocks.to_target(elapsed_s), train_loss,
                                               metrics), outcome)
        self.phase = None  # the evaluations' own lines from here

    def close_input(self) -> None:
        """Hand the input iterator to a thread that closes it (data/closing.py says why): the run is over."""
        holder, self.iterator, self.inputs = [self.iterator], None, None
        closing.close_later(holder, str(self.run_dir.path))

    def close_events(self, record: RunRecord) -> None:
        """The run's outcome into its event files (the HParams dashboard's metrics), then close them."""
        if self.events:
            self.events.outcome(record)
            self.events.close()

    def _result(self, loop: LoopState, outcome: Outcome, clocks: Clocks, step: int, count: int, compile_s: float,
                facts: Optional[timing.Timing]) -> dict[str, Any]:
        elapsed_s = clocks.stop()
        c = clocks.state
        busy_s, startup_s = c.eval_s + c.checkpoint_s, c.startup_s or 0.0
        examples_trained = step * self.spec.pipeline.batch_size
        to_target = outcome.to_target or {"fresh_examples_to_target": None, "steps_to_target": None,
                                          "examples_trained_to_target": None, "seconds_to_target": None}
        at = ((to_target.get("examples_trained_to_target"), to_target["fresh_examples_to_target"]) if outcome.to_target
              else (examples_trained, count))
        rows = functools.cache(lambda: list(self.run_dir.metrics()))  # read once, for the medians below, if needed
        slowdowns = [r["input_slowdown"] for r in rows() if r.get("input_slowdown") is not None] if facts else []
        timing_facts = ({**facts.as_dict(), "accelerator_idle_fraction": facts.idle_fraction(
            step, elapsed_s - startup_s, busy_s), "input_slowdown": float(np.median(slowdowns)) if slowdowns else None}
            if facts else {})
        return {
            "status": outcome.status, "steps": step, "fresh_examples": count, "examples_trained": examples_trained,
            "elapsed_s": elapsed_s, "startup_s": startup_s, "wall_time_s": elapsed_s - busy_s,
            "eval_time_s": c.eval_s, "checkpoint_time_s": c.checkpoint_s, "compile_time_s": compile_s,
            "other_cores": c.other_cpu_s / elapsed_s if elapsed_s > 0 else 0.0,
            "devices": self.mesh.devices, "precision": self.t.precision, **to_target,
            # Examples trained per fresh example at the target (else at the end): the factor the run really
            # echoed at, which a buffer that fills for most of the run can hold far below its nominal one.
            "effective_echo_factor": at[0] / at[1] if at[0] and at[1] else None,
            **self.inputs.record(),
            "final_metrics": {**loop.metrics, "train_loss": loop.train_loss} if step else {},
            "copy_worth": self.worth.record(rows),
            **timing_facts,
        }

