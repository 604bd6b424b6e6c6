"""The training loop: SGD steps until the workload's target is reached or ``trainer.max_steps``.

Evaluation happens each time the fresh-example count crosses a multiple of
``trainer.eval_every_fresh_examples``, so every echo factor is measured at the same resolution in the
paper's cost unit. ``wall_time_s`` counts the input pipeline and the steps, not evaluation or checkpoints
(AlgoPerf's rule); ``elapsed_s`` counts everything, ``seconds_to_target`` everything but checkpoints (see
Trainer._evaluate). The loop reads a device value only at evaluations and checkpoints: the steps in
between run asynchronously.

A run checkpoints every ``trainer.checkpoint_every_steps``; started again in the same directory after
being killed, it resumes from the last checkpoint and ends as it would have without the interruption.
"""

import logging
import math
import sys
import time
from pathlib import Path
from typing import Any, Optional

import flax.struct
import jax
import jax.numpy as jnp
import optax
import tensorflow as tf
from omegaconf import DictConfig
from tqdm import tqdm

from echo_experiments import optim, parallel, profile
from echo_experiments.checkpoints import Checkpoints
from echo_experiments.checkpoints import exist as checkpoints_exist
from echo_experiments.config import ConfigError
from echo_experiments.data.echo import FreshCounter
from echo_experiments.data.pipeline import Feed
from echo_experiments.data.sources import data_dir
from echo_experiments.data.storage import Store
from echo_experiments.runs import RunDir
from echo_experiments.tuning import apply_trial
from echo_experiments.workloads import Workload, check_config, make

log = logging.getLogger(__name__)
DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}


@flax.struct.dataclass
class TrainState:
    step: jax.Array
    params: Any
    model_state: Any
    opt_state: Any
    rng: jax.Array


def _cast(tree: Any, dtype: Any) -> Any:
    return jax.tree.map(lambda x: x.astype(dtype) if jnp.issubdtype(x.dtype, jnp.floating) else x, tree)


def make_train_step(workload: Workload, tx: optax.GradientTransformation, compute_dtype: Any = jnp.float32):
    """The pure step; under mixed precision the model computes in ``compute_dtype`` while parameters,
    optimizer state and model state stay float32."""

    def train_step(state: TrainState, batch: dict[str, jax.Array]) -> tuple[TrainState, jax.Array]:
        rng = jax.random.fold_in(state.rng, state.step)

        def loss_fn(params):
            return workload.loss(_cast(params, compute_dtype), state.model_state, batch, rng)

        (loss, model_state), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
        model_state = jax.tree.map(lambda new, old: new.astype(old.dtype), model_state, state.model_state)
        updates, opt_state = tx.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        return state.replace(step=state.step + 1, params=params, model_state=model_state, opt_state=opt_state), loss

    return train_step


def resolve_config(cfg: DictConfig) -> DictConfig:
    """The config a run trains with: validated, with a tuning trial's values applied (and validated)."""
    check_config(cfg)
    trial_cfg = apply_trial(cfg)
    if trial_cfg is not cfg:
        check_config(trial_cfg)
    return trial_cfg


def run(cfg: DictConfig, out_dir: Path | str) -> dict[str, Any]:
    """Validate the config, train (resuming from a checkpoint in ``out_dir`` if there is one), and write the
    run directory. Returns the summary.

    Raises ConfigError for a bad value and DataMissing for an absent data set before training starts.
    """
    cfg = resolve_config(cfg)
    run_dir = RunDir(out_dir)
    changed = run_dir.differences(cfg)
    done = run_dir.summary()
    if done is not None or (changed and checkpoints_exist(run_dir.path / "checkpoints")):
        if changed:  # a rerun sweep finishes what is missing; it never mixes two configs in one directory
            raise ConfigError("hydra.run.dir", str(run_dir.path), "", (
                f"{run_dir.path} already holds a run with another config (it differs at "
                f"{', '.join(changed[:5])}): choose another hydra.run.dir or hydra.sweep.dir"))
        if done is not None:
            log.info("%s is complete (%s); not run again", run_dir.path, done["status"])
            return done
    if cfg.trainer.compilation_cache_dir:
        jax.config.update("jax_compilation_cache_dir", str(Path(cfg.trainer.compilation_cache_dir).expanduser()))
    workload = make(cfg.workload, data_dir(cfg.data.dir))
    mesh = parallel.setup(cfg.trainer, int(cfg.workload.batch_size))
    writer = mesh.host.index == 0
    summary = _summary_head(cfg)
    try:
        with Store(cfg.storage, workload.train_source) as store:
            trainer = Trainer(cfg, workload, run_dir, store, mesh)
            summary.update(trainer.fit())
            if writer:
                run_dir.write_summary(summary)
    except ConfigError:  # an unreachable store: nothing was trained
        raise
    except (KeyboardInterrupt, SystemExit):
        log.warning("interrupted: %s keeps its metrics and checkpoints and has no summary.json", run_dir.path)
        raise
    except Exception as e:
        if writer:
            run_dir.write_summary({**summary, "status": "failed", "error": f"{type(e).__name__}: {e}"})
        raise
    return summary


def _summary_head(cfg: DictConfig) -> dict[str, Any]:
    factor = float(cfg.echo.factor)
    echoing = factor != 1
    in_study = cfg.tuning.study is not None
    return {
        "workload": cfg.workload.name,
        # The effective pipeline: factor 1 is the plain pipeline (no echo stage, no echo shuffle).
        "placement": cfg.echo.placement if echoing else "none",
        "echo_factor": factor,
        "batch_size": int(cfg.workload.batch_size),
        "shuffle_buffer": int(cfg.echo.shuffle_buffer) if echoing else 0,
        "seed": int(cfg.seed),
        "study": cfg.tuning.study,
        "trial": cfg.tuning.trial,
        "tuning_seed": int(cfg.tuning.seed) if in_study else None,
    }


class Trainer:
    """One run's training: the compiled step, the input stream, the counters, evaluation and checkpoints."""

    def __init__(self, cfg: DictConfig, workload: Workload, run_dir: RunDir, store: Optional[Store],
                 mesh: parallel.Parallel, batches: Optional[tf.data.Dataset] = None):
        self.cfg, self.t, self.workload, self.run_dir, self.mesh = cfg, cfg.trainer, workload, run_dir, mesh
        self.writer = mesh.host.index == 0
        self.batch_size = int(cfg.workload.batch_size)
        workload.compute_dtype = DTYPES[self.t.precision]
        self.tx = optim.optimizer(cfg.optimizer, self.t.max_steps)
        self.learning_rate = optim.schedule(cfg.optimizer, self.t.max_steps)
        feed = Feed(records=store.records(cfg.seed) if store else None, host=mesh.host, service=cfg.data.service)
        self.batches = batches if batches is not None else workload.train_batches(cfg.echo, cfg.seed, feed)
        self.store = store
        self.checkpoints = (Checkpoints(run_dir.path / "checkpoints", host=mesh.host.index)
                            if self.t.checkpoint_every_steps else None)

    def _initial_state(self) -> TrainState:
        init_rng, step_rng = jax.random.split(jax.random.PRNGKey(self.cfg.seed))
        params, model_state = jax.jit(self.workload.init)(init_rng)
        state = TrainState(jnp.zeros((), jnp.int32), params, model_state, self.tx.init(params), step_rng)
        return jax.device_put(state, self.mesh.replicated)

    def _compile(self, state: TrainState):
        spec = {k: jax.ShapeDtypeStruct((self.batch_size,) + tuple(v.shape[1:]), v.dtype.as_numpy_dtype,
                                        sharding=self.mesh.batch)
                for k, v in self.batches.element_spec.items() if k != "read_id"}
        step = jax.jit(make_train_step(self.workload, self.tx, self.workload.compute_dtype), donate_argnums=0,
                       in_shardings=(self.mesh.replicated, self.mesh.batch),
                       out_shardings=(self.mesh.replicated, self.mesh.replicated))
        return step.lower(state, spec).compile()

    def fit(self) -> dict[str, Any]:
        """Train until the target (or a budget); append a metrics row per evaluation."""
        t = self.t
        state = self._initial_state()
        began = time.perf_counter()
        train_step = self._compile(state)
        compile_s = time.perf_counter() - began
        timing = None
        if t.profile_batches and self.store is not None:
            timing = profile.measure(self.workload, Feed(self.store.records(self.cfg.seed), self.mesh.host),
                                     self.cfg, train_step, state, t.profile_batches)
            log.info("upstream %.4f s/batch, downstream %.4f s/step: R = %.2f", timing.upstream_s_per_batch,
                     timing.downstream_s_per_step, timing.ratio)

        # Kept on the trainer: run() writes the summary before the iterator (and its threads) is torn down.
        self.iterator = iterator = iter(self.batches)
        loop = {"step": 0, "next_eval": t.eval_every_fresh_examples, "status": "not_reached", "to_target": None,
                "eval_s": 0.0, "checkpoint_s": 0.0, "elapsed_s": 0.0, "startup_s": None, "pending_losses": [],
                "metrics": {}, "train_loss": None}
        fresh = FreshCounter()
        latest = self.checkpoints.latest() if self.checkpoints else None
        if latest is not None:
            state, seen, loop = self.checkpoints.restore(latest, state, iterator)
            fresh = FreshCounter.from_seen(seen)
            if self.writer:
                self.run_dir.keep_metrics_until(loop["step"])
            log.info("resumed %s at step %d (%d fresh examples)", self.run_dir.path, loop["step"], fresh.count)
        elif self.writer:
            self.run_dir.start(self.cfg)
        losses = [jnp.asarray(x) for x in loop.pop("pending_losses")]
        bar = tqdm(total=t.max_steps, initial=loop["step"], unit="step", leave=False,
                   disable=not (self.writer and t.progress and sys.stderr.isatty()))
        start = time.perf_counter() - loop["elapsed_s"]
        step = loop["step"]
        while step < t.max_steps and not loop.get("stop"):
            batch = {k: v.numpy() for k, v in next(iterator).items()}
            if loop["startup_s"] is None:  # the shuffle buffer is full: the steady state begins
                loop["startup_s"] = time.perf_counter() - start
            fresh.update(batch.pop("read_id"))
            state, loss = train_step(state, self.mesh.put_batch(batch))
            losses.append(loss)
            step += 1
            bar.update()
            count = self.mesh.total(fresh.count)
            budget_spent = t.max_fresh_examples is not None and count >= t.max_fresh_examples
            if count >= loop["next_eval"] or step == t.max_steps or budget_spent:
                self._evaluate(state, step, count, losses, loop, start, bar)
                losses = []
                loop["stop"] = loop.get("stop") or budget_spent
            if self.checkpoints and (step % t.checkpoint_every_steps == 0 or step == t.max_steps or loop.get("stop")):
                saving = time.perf_counter()
                loop.update(step=step, elapsed_s=saving - start,
                            pending_losses=[float(x) for x in jax.device_get(losses)])
                self.checkpoints.save(step, state, iterator, fresh.seen, loop)
                loop.pop("pending_losses")
                loop["checkpoint_s"] += time.perf_counter() - saving
        bar.close()
        if self.checkpoints:
            self.checkpoints.close()
        return self._result(loop, step, self.mesh.total(fresh.count), time.perf_counter() - start, compile_s, timing)

    def _evaluate(self, state, step: int, count: int, losses: list, loop: dict, start: float, bar) -> None:
        train_loss = float(jnp.mean(jnp.stack(losses))) if losses else math.nan  # waits for the last step
        eval_began = time.perf_counter()
        # Seconds to target count everything until this evaluation began, earlier evaluations too: they fall
        # on the same fresh-example cadence in every condition, and leaving them out would credit input-bound
        # runs with the reading tf.data goes on doing while evaluation runs. Checkpoints are left out: they
        # fall on a step cadence, which would charge echoing (more steps per fresh example) for them.
        elapsed_s = eval_began - start
        train_s = elapsed_s - loop["eval_s"] - loop["checkpoint_s"]
        metrics = self.workload.evaluate(state.params, state.model_state) if math.isfinite(train_loss) else {}
        loop["eval_s"] += time.perf_counter() - eval_began
        loop["metrics"], loop["train_loss"] = metrics, train_loss
        target = self.workload.target
        row = {"step": step, "fresh_examples": count, "examples_trained": step * self.batch_size,
               "elapsed_s": elapsed_s, "wall_time_s": train_s, "eval_time_s": loop["eval_s"],
               "train_loss": train_loss, "learning_rate": float(self.learning_rate(step - 1)), **metrics}
        if self.writer:
            self.run_dir.append_metrics(row)
        shown = metrics.get(target.metric, math.nan)
        log.info("step %d  fresh %d  train_loss %.4f  %s %.4f  (%.1fs)", step, count, train_loss, target.metric,
                 shown, train_s)
        bar.set_postfix(fresh=count, **{target.metric: f"{shown:.4f}"})
        cadence = int(self.t.eval_every_fresh_examples)
        loop["next_eval"] = (count // cadence + 1) * cadence
        if not all(math.isfinite(v) for v in (train_loss, *metrics.values())):
            loop["status"], loop["stop"] = "diverged", True
            log.warning("diverged at step %d (train loss %s)", step, train_loss)
        elif loop["to_target"] is None and target.reached(metrics):
            loop["status"] = "reached_target"
            loop["to_target"] = {"fresh_examples_to_target": count, "steps_to_target": step,
                                 "seconds_to_target": elapsed_s - loop["checkpoint_s"]}
            log.info("reached %s %s %s at step %d with %d fresh examples", target.metric,
                     ">=" if target.mode == "max" else "<=", target.value, step, count)
            loop["stop"] = self.t.stop_at_target

    def _result(self, loop: dict, step: int, count: int, elapsed_s: float, compile_s: float,
                timing: Optional[profile.Timing]) -> dict[str, Any]:
        busy_s = loop["eval_s"] + loop["checkpoint_s"]
        startup_s = loop["startup_s"] or 0.0
        facts = ({**timing.as_dict(), "accelerator_idle_fraction": timing.idle_fraction(step, elapsed_s - startup_s,
                                                                                         busy_s)}
                 if timing else {})
        return {
            "status": loop["status"],
            "steps": step,
            "fresh_examples": count,
            "examples_trained": step * self.batch_size,
            "elapsed_s": elapsed_s,
            "startup_s": startup_s,
            "wall_time_s": elapsed_s - busy_s,
            "eval_time_s": loop["eval_s"],
            "checkpoint_time_s": loop["checkpoint_s"],
            "compile_time_s": compile_s,
            "devices": self.mesh.devices,
            "precision": self.t.precision,
            "target": self.workload.target.as_dict(),
            **(loop["to_target"] or {"fresh_examples_to_target": None, "steps_to_target": None,
                                      "seconds_to_target": None}),
            "final_metrics": {**loop["metrics"], "train_loss": loop["train_loss"]} if step else {},
            **facts,
        }


def fit(cfg: DictConfig, workload: Workload, run_dir: RunDir, store: Optional[Store] = None,
        batches: Optional[tf.data.Dataset] = None) -> dict[str, Any]:
    """Train on this process's devices (the benchmark feeds its own ``batches``)."""
    mesh = parallel.setup(cfg.trainer, int(cfg.workload.batch_size))
    return Trainer(cfg, workload, run_dir, store, mesh, batches).fit()
