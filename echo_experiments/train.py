"""The training loop: SGD steps until the workload's target is reached or the budget is spent.

The budget (``trainer.max_fresh_examples``), the evaluation cadence (``trainer.eval_every_fresh_examples``)
and the learning-rate schedule (optim.py) are in fresh examples, so every echo factor is given the same
schedule, budget and measurement resolution in the paper's cost unit; echoing at factor e simply takes e
times the steps. ``trainer.max_steps`` caps steps where a user asks for it.

``wall_time_s`` counts the input pipeline and the steps, not evaluation or checkpoints (AlgoPerf's rule);
``elapsed_s`` counts everything, ``seconds_to_target`` everything but checkpoints (see Trainer._evaluate).
The loop reads a device value only at evaluations and checkpoints: the steps in between run
asynchronously.

A run checkpoints every ``trainer.checkpoint_every_seconds`` of training (and/or every
``trainer.checkpoint_every_steps``) and at the end; started again in the same directory after being killed,
it resumes from the last checkpoint and ends as it would have without the interruption.
"""

import concurrent.futures
import logging
import math
import re
import signal
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np
import optax
import tensorflow as tf
from omegaconf import DictConfig
from tqdm import tqdm

from echo_experiments import machine, optim, parallel, timing, tuning
from echo_experiments.checkpoints import Checkpoints
from echo_experiments.checkpoints import exist as checkpoints_exist
from echo_experiments.config import ConfigError, Placement
from echo_experiments.data import stream
from echo_experiments.data.echo import FreshCounter
from echo_experiments.data.sources import data_dir
from echo_experiments.data.storage import Store
from echo_experiments.events import Events
from echo_experiments.runs import SUMMARY, RunDir, study_best
from echo_experiments.tuning import run_config
from echo_experiments.workloads import Workload, make

log = logging.getLogger(__name__)
DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}


class Interrupted(Exception):
    """The run stopped on SIGINT or SIGTERM at a step boundary; str() is the one line shown to the user."""

    def __init__(self, signum: int, step: int, fresh: int, run_path: Path, saved: bool):
        self.signum = signum
        where = (f"its checkpoint is in {run_path / 'checkpoints'}: run the same command to resume" if saved else
                 "no checkpoint was written (trainer.checkpoint_every_seconds and _steps are 0): a rerun starts over")
        super().__init__(f"stopped by {signal.Signals(signum).name} at step {step} ({fresh} fresh examples); {where}")


class InputLost(Exception):
    """The input pipeline's source stopped answering (nothing within data.timeout_s) or failed (a record server
    gone, a truncated file); str() is the one line shown to the user."""

    def __init__(self, what: str):
        super().__init__(f"{what}; the run keeps its last checkpoint: run the same command to resume once it answers")


def input_source(cfg: DictConfig) -> str:
    """What the input pipeline waits on, in words, for a timeout's message."""
    if cfg.data.service:
        return (f"the tf.data service at {cfg.data.service} (are its dispatcher and workers running? "
                "python -m echo_experiments.service)")
    if cfg.storage.kind == "http":
        return f"the record server at {cfg.storage.url or 'the loopback record server'}"
    return f"the input pipeline reading {cfg.data.dir or 'the TFDS data directory'}"


class PeerLost(Exception):
    """Another process of a multi-process run stopped answering; str() is the one line shown to the user."""


def result_within(future: concurrent.futures.Future, timeout_s: float, slice_s: float = 1.0) -> Any:
    """``future.result()``, waiting at most ``timeout_s`` seconds of this process's own running time.

    The wait goes in slices, each counted as what it asked for: a process stopped in the middle of one
    (SIGSTOP, Ctrl-Z, a suspended machine) counts one slice, not the pause. One wait of ``timeout_s`` would
    blame the input for the pause and end a resumed run (a sweep paused for 24 minutes lost its jobs so).
    concurrent.futures.TimeoutError once the slices add up to ``timeout_s``."""
    waited = 0.0
    while True:
        step = min(slice_s, timeout_s - waited)
        try:
            return future.result(timeout=step)
        except concurrent.futures.TimeoutError:
            waited += step
            if waited >= timeout_s:
                raise


class StopSignals:
    """While training, SIGINT (Ctrl-C) and SIGTERM (what SLURM sends before a time limit) ask the loop to stop
    at the next step boundary, where it can checkpoint; a second Ctrl-C interrupts at once."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __enter__(self) -> "StopSignals":
        self.received: Optional[int] = None
        self.previous = {}
        if threading.current_thread() is threading.main_thread():  # Python allows handlers only there
            self.previous = {s: signal.signal(s, self._handle) for s in self.SIGNALS}
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        if self.received is not None and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.received = signum

    def __exit__(self, *exc: Any) -> None:
        for s, handler in self.previous.items():
            signal.signal(s, handler)


@flax.struct.dataclass
class TrainState:
    step: jax.Array
    params: Any
    model_state: Any
    opt_state: Any
    rng: jax.Array


def _cast(tree: Any, dtype: Any) -> Any:
    return jax.tree.map(lambda x: x.astype(dtype) if jnp.issubdtype(x.dtype, jnp.floating) else x, tree)


def make_train_step(workload: Workload, tx: optax.GradientTransformation, schedule: optim.Schedule,
                    compute_dtype: Any = jnp.float32):
    """The pure step ``(state, batch, position) -> (state, loss)``: the learning rate is the schedule's at
    ``position``, the run's place in its schedule (fresh examples trained on before this batch, or steps).
    Under mixed precision the model computes in ``compute_dtype`` while parameters, optimizer state and
    model state stay float32."""

    def train_step(state: TrainState, batch: dict[str, jax.Array], position: jax.Array) -> tuple[TrainState, jax.Array]:
        rng = jax.random.fold_in(state.rng, state.step)

        def loss_fn(params):
            return workload.loss(_cast(params, compute_dtype), state.model_state, batch, rng)

        (loss, model_state), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
        model_state = jax.tree.map(lambda new, old: new.astype(old.dtype), model_state, state.model_state)
        opt_state = optim.with_learning_rate(state.opt_state, schedule(position))
        updates, opt_state = tx.update(grads, opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        return state.replace(step=state.step + 1, params=params, model_state=model_state, opt_state=opt_state), loss

    return train_step


def run(cfg: DictConfig, out_dir: Path | str) -> dict[str, Any]:
    """Validate the config, train (resuming from a checkpoint in ``out_dir`` if there is one), and write the
    run directory. Returns the summary.

    Raises ConfigError for a bad value and DataMissing for an absent data set before training starts.
    """
    cfg = run_config(cfg)
    use_compilation_cache(cfg.trainer.compilation_cache_dir)
    mesh = parallel.setup(cfg.trainer, int(cfg.workload.batch_size))
    run_dir = RunDir(out_dir).hold() if mesh.writes_run_dir else RunDir(out_dir)
    try:
        return _run(cfg, run_dir, mesh)
    finally:
        run_dir.release()


def _run(cfg: DictConfig, run_dir: RunDir, mesh: parallel.Parallel) -> dict[str, Any]:
    writer = mesh.writes_run_dir
    if cfg.trainer.restart and writer:
        run_dir.clear()
    changed = run_dir.differences(cfg)
    done = run_dir.summary()
    if done is not None and done.get("status") == "failed":
        # A failed attempt is not an outcome: the same command goes on from its last checkpoint.
        log.warning("%s failed before (%s); resuming from its last checkpoint (trainer.restart=true starts over)",
                    run_dir.path, done.get("error"))
        if writer:
            (run_dir.path / SUMMARY).unlink(missing_ok=True)
        done = None
    if done is not None or (changed and checkpoints_exist(run_dir.path / "checkpoints")):
        if changed:  # a rerun sweep finishes what is missing; it never mixes two configs in one directory
            raise ConfigError("hydra.run.dir", str(run_dir.path), "", (
                f"{run_dir.path} already holds a run with another config (it differs at "
                f"{', '.join(changed[:5])}): choose another hydra.run.dir or hydra.sweep.dir, or add "
                "trainer.restart=true to start this one over"))
        if done is not None:
            log.info("%s is complete (%s); not run again (trainer.restart=true runs it again)", run_dir.path,
                     done["status"])
            return done
    workload = make(cfg.workload, data_dir(cfg.data.dir), DTYPES[cfg.trainer.precision])
    summary = {**_summary_head(cfg), "target": workload.target.as_dict()}
    # A trial of a study stops once it can no longer be the study's best (its siblings in the sweep directory).
    pruning = cfg.tuning.study is not None and cfg.tuning.prune and cfg.trainer.stop_at_target
    prune = (lambda: study_best(run_dir.path.parent, summary)) if pruning else None
    try:
        if cfg.data.service:
            stream.check_service(cfg.data.service, float(cfg.data.timeout_s))
        with Store(cfg.storage, workload.train_source) as store:
            batches = stream.build(workload, cfg, store=store, host=mesh.host)
            hparams = {**summary, **tuning.searched_values(cfg)} if cfg.trainer.tensorboard else None
            trainer = Trainer(cfg, workload, run_dir, mesh, batches, store, prune, hparams)
            summary.update(trainer.fit())
            if writer:
                run_dir.write_summary(summary)
                trainer.close_events(summary)
    except ConfigError:  # an unreachable store: nothing was trained
        raise
    except (Interrupted, InputLost):  # the command line says what happened and how to resume
        raise
    except (KeyboardInterrupt, SystemExit):
        log.warning("interrupted: %s keeps its metrics and checkpoints and has no summary.json", run_dir.path)
        raise
    except Exception as e:
        if writer:
            run_dir.write_summary({**summary, "status": "failed", "error": f"{type(e).__name__}: {e}"})
        if mesh.host.count > 1 and isinstance(e, jax.errors.JaxRuntimeError):
            raise PeerLost(f"process {mesh.host.index} of {mesh.host.count} lost its peers "
                           f"({str(e).strip().splitlines()[0][:200]}): check the other processes' logs; the run "
                           "keeps its last checkpoint: run the same command on every process to resume") from e
        raise
    return summary


def use_compilation_cache(directory: Optional[str]) -> None:
    """JAX's persistent compilation cache in ``directory`` (None: off), for every program: on a CPU even the
    small ones take a second to compile, and a sweep's trials and a test session compile the same ones."""
    if directory:
        jax.config.update("jax_compilation_cache_dir", str(Path(directory).expanduser()))
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)


def initial_state(workload: Workload, tx: optax.GradientTransformation, seed: int, sharding: Any) -> TrainState:
    """Parameters, model and optimizer state from ``seed``, made by one compiled program (op by op, each
    leaf of the optimizer state would be a program of its own to compile)."""

    def init(seed: jax.Array) -> TrainState:
        init_rng, step_rng = jax.random.split(jax.random.PRNGKey(seed))
        params, model_state = workload.init(init_rng)
        return TrainState(jnp.zeros((), jnp.int32), params, model_state, tx.init(params), step_rng)

    return jax.jit(init, out_shardings=sharding)(seed)


def _summary_head(cfg: DictConfig) -> dict[str, Any]:
    factor = float(cfg.echo.factor)
    in_study = cfg.tuning.study is not None
    return {
        "workload": cfg.workload.name,
        # The effective pipeline: factor 1 is the plain pipeline (no echo stage, no echo shuffle).
        "placement": Placement.of(cfg.echo).value,
        "echo_factor": factor,
        "batch_size": int(cfg.workload.batch_size),
        "shuffle_buffer": stream.echo_shuffle_buffer(cfg.echo, int(cfg.workload.batch_size)),
        "seed": int(cfg.seed),
        "study": cfg.tuning.study,
        "trial": cfg.tuning.trial,
        "tuning_seed": int(cfg.tuning.seed) if in_study else None,
        "machine": machine.describe(),
    }


def _per_fresh(to_target: Optional[dict[str, Any]], examples_trained: int, fresh: int) -> Optional[float]:
    if to_target is not None:
        examples_trained, fresh = to_target["examples_trained_to_target"], to_target["fresh_examples_to_target"]
    return examples_trained / fresh if fresh else None


@dataclass
class LoopState:
    """What the training loop carries from step to step; saved with every checkpoint, so a resumed run goes
    on with the same evaluation cadence, clocks and target bookkeeping."""

    step: int = 0
    next_eval: int = 0  # the fresh-example count at which the next evaluation falls
    status: str = "not_reached"
    to_target: Optional[dict[str, Any]] = None  # fresh examples, steps and seconds to target, once reached
    eval_s: float = 0.0
    checkpoint_s: float = 0.0
    elapsed_s: float = 0.0
    startup_s: Optional[float] = None  # seconds until the first batch (the shuffle buffer filling)
    other_cpu_s: float = 0.0  # CPU seconds other processes used while this run trained (timing.OtherWork)
    metrics: dict[str, float] = field(default_factory=dict)  # the last evaluation's
    train_loss: Optional[float] = None
    stop: bool = False
    pending_losses: list[float] = field(default_factory=list)  # train losses since the last evaluation


class Trainer:
    """One run's training: the compiled step, the input stream, the counters, evaluation and checkpoints."""

    def __init__(self, cfg: DictConfig, workload: Workload, run_dir: RunDir, mesh: parallel.Parallel,
                 batches: tf.data.Dataset, store: Optional[Store] = None,
                 prune: Optional[Callable[[], Optional[int]]] = None, hparams: Optional[dict[str, Any]] = None):
        self.cfg, self.t, self.workload, self.run_dir, self.mesh = cfg, cfg.trainer, workload, run_dir, mesh
        self.batches, self.store = batches, store
        #: The fewest fresh examples to target of the study's other trials so far (None: not in a study).
        self.prune = prune
        #: The run's values for TensorBoard's HParams (None: no event files).
        self.hparams = hparams if mesh.writes_run_dir else None
        self.events: Optional[Events] = None
        self._waiter: Optional[concurrent.futures.ThreadPoolExecutor] = None
        self.batch_size = int(cfg.workload.batch_size)
        self.tx = optim.optimizer(cfg.optimizer)
        self.schedule = optim.schedule(cfg.optimizer, cfg.trainer)
        checkpointing = self.t.checkpoint_every_steps or self.t.checkpoint_every_seconds
        self.checkpoints = Checkpoints(run_dir.path / "checkpoints") if checkpointing else None

    def _compile(self, state: TrainState):
        spec = {k: jax.ShapeDtypeStruct((self.batch_size,) + tuple(v.shape[1:]), v.dtype.as_numpy_dtype,
                                        sharding=self.mesh.batch)
                for k, v in self.batches.element_spec.items() if k != "read_id"}
        step = jax.jit(make_train_step(self.workload, self.tx, self.schedule, self.workload.compute_dtype),
                       donate_argnums=0, in_shardings=(self.mesh.replicated, self.mesh.batch, self.mesh.replicated),
                       out_shardings=(self.mesh.replicated, self.mesh.replicated))
        position = jax.ShapeDtypeStruct((), jnp.int32, sharding=self.mesh.replicated)
        return step.lower(state, spec, position).compile()

    def fit(self) -> dict[str, Any]:
        """Train until the target (or a budget); append a metrics row per evaluation."""
        t = self.t
        state = initial_state(self.workload, self.tx, int(self.cfg.seed), self.mesh.replicated)
        began = time.perf_counter()
        train_step = self._compile(state)
        compile_s = time.perf_counter() - began
        facts = None
        if t.profile_batches and self.store is not None:
            at_start = self.mesh.put_scalar(0)
            facts = timing.measure(self.workload, self.cfg, self.store, self.mesh.host,
                                   lambda state, batch: train_step(state, batch, at_start), state, t.profile_batches)
            log.info("upstream %.4f s/batch, downstream %.4f s/step: R = %.2f", facts.upstream_s_per_batch,
                     facts.downstream_s_per_step, facts.ratio)

        # Kept on the trainer: run() writes the summary before the iterator (and its threads) is torn down.
        self.iterator = iterator = iter(self.batches)
        loop = LoopState(next_eval=t.eval_every_fresh_examples)
        fresh = FreshCounter()
        latest = self.checkpoints.latest() if self.checkpoints else None
        if latest is not None:
            state, seen, saved = self.checkpoints.restore(latest, state, iterator)
            loop = LoopState(**saved)
            fresh = FreshCounter.from_seen(seen)
            if self.mesh.writes_run_dir:
                self.run_dir.keep_metrics_until(loop.step)
            log.info("resumed %s at step %d (%d fresh examples)", self.run_dir.path, loop.step, fresh.count)
        elif self.mesh.writes_run_dir:
            self.run_dir.start(self.cfg)
        if self.hparams is not None:  # after keep_metrics_until: the event files start over from the kept rows
            self.events = Events(self.run_dir.path, self.hparams, self.run_dir.metrics())
        losses = [jnp.asarray(x) for x in loop.pending_losses]
        fresh_units = self.schedule.unit == optim.FRESH_EXAMPLES
        self.mesh.barrier("training", float(t.distributed_timeout_s))  # every process compiled: the first collective
        count = self.mesh.total(fresh.count)
        # Progress in the budget's unit: fresh examples unless only a step cap is given.
        bar = tqdm(total=t.max_fresh_examples or t.max_steps, initial=count if t.max_fresh_examples else loop.step,
                   unit="fresh" if t.max_fresh_examples else "step", leave=False,
                   disable=not (self.mesh.writes_run_dir and t.progress and sys.stderr.isatty()))
        start = time.perf_counter() - loop.elapsed_s
        other_work = timing.OtherWork(loop.other_cpu_s)
        step = loop.step
        last_save = time.perf_counter()
        with StopSignals() as signals:
            while not loop.stop and signals.received is None:
                batch = self._next_batch(iterator)
                if loop.startup_s is None:  # the shuffle buffer is full: the steady state begins
                    loop.startup_s = time.perf_counter() - start
                position = count if fresh_units else step
                fresh.update(batch.pop("read_id"))
                state, loss = train_step(state, self.mesh.put_batch(batch), self.mesh.put_scalar(position))
                losses.append(loss)
                step += 1
                before, count = count, self.mesh.total(fresh.count)
                bar.update(count - before if t.max_fresh_examples else 1)
                budget_spent = ((t.max_fresh_examples is not None and count >= t.max_fresh_examples)
                                or (t.max_steps is not None and step >= t.max_steps))
                if count >= loop.next_eval or budget_spent:
                    self._evaluate(state, step, count, losses, loop, start, bar)
                    losses = []
                    loop.stop = loop.stop or budget_spent
                # A signal stops at this step boundary with a checkpoint to resume from (when checkpointing).
                stopping = loop.stop or signals.received is not None
                if self.checkpoints and self._checkpoint_due(step, stopping, last_save):
                    last_save = saving = time.perf_counter()
                    loop.step, loop.elapsed_s, loop.other_cpu_s = step, saving - start, other_work.seconds()
                    loop.pending_losses = [float(x) for x in jax.device_get(losses)]
                    self.checkpoints.save(step, state, iterator, fresh.seen, asdict(loop))
                    loop.checkpoint_s += time.perf_counter() - saving
        bar.close()
        if self._waiter is not None:
            self._waiter.shutdown()
        if self.checkpoints:
            closing = time.perf_counter()
            self.checkpoints.close()  # the last save's train state is committed before the summary says "done"
            loop.checkpoint_s += time.perf_counter() - closing
        if signals.received is not None and not loop.stop:
            raise Interrupted(signals.received, step, self.mesh.total(fresh.count), self.run_dir.path,
                              self.checkpoints is not None)
        loop.other_cpu_s = other_work.seconds()
        return self._result(loop, step, self.mesh.total(fresh.count), time.perf_counter() - start, compile_s, facts)

    def _next_batch(self, iterator) -> dict[str, np.ndarray]:
        """The next batch, waiting at most data.timeout_s: a lost service worker or a record server that stopped
        answering ends the run with one line instead of a silent wait. (The wait runs on a helper thread, since
        a blocked tf.data call cannot be interrupted; the handoff costs microseconds a step.)"""
        if self._waiter is None:
            self._waiter = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="next_batch")
        future = self._waiter.submit(lambda: {k: v.numpy() for k, v in next(iterator).items()})
        try:
            return result_within(future, float(self.cfg.data.timeout_s))
        except tf.errors.OpError as e:  # raised by a stage: a read that failed for good
            # TF wraps the cause in its op and iterator names; the Python error at the end is what to show.
            causes = re.findall(r"\b\w+(?:Error|Exception): [^\n]*", e.message or "")
            cause = causes[-1] if causes else (e.message or type(e).__name__).strip().splitlines()[0]
            raise InputLost(f"the input pipeline failed reading from {input_source(self.cfg)}: {cause}") from None
        except concurrent.futures.TimeoutError:
            self._waiter.shutdown(wait=False)
            raise InputLost(f"no batch from {input_source(self.cfg)} within data.timeout_s="
                            f"{self.cfg.data.timeout_s:g} s") from None

    def close_events(self, summary: dict[str, Any]) -> None:
        """The run's outcome into its event files (the HParams dashboard's metrics), then close them."""
        if self.events:
            self.events.outcome(summary)
            self.events.close()

    def _checkpoint_due(self, step: int, stopping: bool, last_save: float) -> bool:
        t = self.t
        by_steps = t.checkpoint_every_steps and step % t.checkpoint_every_steps == 0
        by_time = t.checkpoint_every_seconds and time.perf_counter() - last_save >= t.checkpoint_every_seconds
        return bool(by_steps or by_time or stopping)

    def _evaluate(self, state, step: int, count: int, losses: list, loop: LoopState, start: float, bar) -> None:
        # Waits for the last step. On the host: stacking on the device would compile a program per list length.
        train_loss = float(np.mean(jax.device_get(losses))) if losses else math.nan
        eval_began = time.perf_counter()
        # Seconds to target count everything until this evaluation began, earlier evaluations too: they fall
        # on the same fresh-example cadence in every condition, and leaving them out would credit input-bound
        # runs with the reading tf.data goes on doing while evaluation runs. Checkpoints are left out: they
        # fall on a step cadence, which would charge echoing (more steps per fresh example) for them.
        elapsed_s = eval_began - start
        train_s = elapsed_s - loop.eval_s - loop.checkpoint_s
        metrics = self.workload.evaluate(state.params, state.model_state) if math.isfinite(train_loss) else {}
        loop.eval_s += time.perf_counter() - eval_began
        loop.metrics, loop.train_loss = metrics, train_loss
        target = self.workload.target
        row = {"step": step, "fresh_examples": count, "examples_trained": step * self.batch_size,
               "elapsed_s": elapsed_s, "wall_time_s": train_s, "eval_time_s": loop.eval_s,
               "train_loss": train_loss, "learning_rate": float(optim.learning_rate(state.opt_state)), **metrics}
        if self.mesh.writes_run_dir:
            self.run_dir.append_metrics(row)
        if self.events:
            self.events.row(row)
        shown = metrics.get(target.metric, math.nan)
        log.info("step %d  fresh %d  train_loss %.4f  %s %.4f  (%.1fs)", step, count, train_loss, target.metric,
                 shown, train_s)
        bar.set_postfix(fresh=count, **{target.metric: f"{shown:.4f}"})
        cadence = int(self.t.eval_every_fresh_examples)
        loop.next_eval = (count // cadence + 1) * cadence
        if not all(math.isfinite(v) for v in (train_loss, *metrics.values())):
            loop.status, loop.stop = "diverged", True
            log.warning("diverged at step %d (train loss %s)", step, train_loss)
        elif loop.to_target is None and self.workload.has_reached_target(metrics):
            loop.status = "reached_target"
            loop.to_target = {"fresh_examples_to_target": count, "steps_to_target": step,
                              "examples_trained_to_target": step * self.batch_size,
                              "seconds_to_target": elapsed_s - loop.checkpoint_s}
            log.info("reached %s %s %s at step %d with %d fresh examples", target.metric,
                     ">=" if target.mode == "max" else "<=", target.value, step, count)
            loop.stop = self.t.stop_at_target
        elif loop.to_target is None and self.prune is not None:
            best = self.prune()
            # It could reach the target only past the study's best (times the margin, which keeps more draws
            # informative for the paired comparison at the price of the fresh examples trained past the best).
            if best is not None and count >= best * float(self.cfg.tuning.prune_margin):
                loop.status, loop.stop = "pruned", True
                log.info("pruned at %d fresh examples: this study's best trial reached the target with %d", count,
                         best)

    def _result(self, loop: LoopState, step: int, count: int, elapsed_s: float, compile_s: float,
                facts: Optional[timing.Timing]) -> dict[str, Any]:
        busy_s = loop.eval_s + loop.checkpoint_s
        startup_s = loop.startup_s or 0.0
        timing_facts = ({**facts.as_dict(), "accelerator_idle_fraction": facts.idle_fraction(
            step, elapsed_s - startup_s, busy_s)} if facts else {})
        return {
            "status": loop.status,
            "steps": step,
            "fresh_examples": count,
            "examples_trained": step * self.batch_size,
            "elapsed_s": elapsed_s,
            "startup_s": startup_s,
            "wall_time_s": elapsed_s - busy_s,
            "eval_time_s": loop.eval_s,
            "checkpoint_time_s": loop.checkpoint_s,
            "compile_time_s": compile_s,
            "other_cores": loop.other_cpu_s / elapsed_s if elapsed_s > 0 else 0.0,
            "devices": self.mesh.devices,
            "precision": self.t.precision,
            **(loop.to_target or {"fresh_examples_to_target": None, "steps_to_target": None,
                                  "examples_trained_to_target": None, "seconds_to_target": None}),
            # Examples trained per fresh example at the target (else at the end): the factor the run really
            # echoed at, which a buffer that fills for most of the run can hold far below its nominal one.
            "effective_echo_factor": _per_fresh(loop.to_target, step * self.batch_size, count),
            "final_metrics": {**loop.metrics, "train_loss": loop.train_loss} if step else {},
            **timing_facts,
        }


def fit(cfg: DictConfig, workload: Workload, run_dir: RunDir, batches: tf.data.Dataset) -> dict[str, Any]:
    """Train on this process's devices from given ``batches`` (the benchmark feeds cached ones)."""
    mesh = parallel.setup(cfg.trainer, int(cfg.workload.batch_size))
    return Trainer(cfg, workload, run_dir, mesh, batches).fit()
