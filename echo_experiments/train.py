"""The training loop: SGD steps until the workload's target is reached or ``trainer.max_steps``.

Evaluation happens each time the fresh-example count crosses a multiple of
``trainer.eval_every_fresh_examples``, so every echo factor is measured at the same resolution in the
paper's cost unit. ``wall_time_s`` counts the input pipeline and the steps, not evaluation (AlgoPerf's rule); ``elapsed_s`` and
``seconds_to_target`` count evaluation too (see fit).
The loop reads a device value only at evaluations: the steps in between run asynchronously.
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

from echo_experiments import optim, profile
from echo_experiments.config import ConfigError
from echo_experiments.data.echo import FreshCounter
from echo_experiments.data.sources import data_dir
from echo_experiments.data.storage import Store
from echo_experiments.runs import RunDir
from echo_experiments.tuning import apply_trial
from echo_experiments.workloads import Workload, check_config, make

log = logging.getLogger(__name__)


@flax.struct.dataclass
class TrainState:
    step: jax.Array
    params: Any
    model_state: Any
    opt_state: Any
    rng: jax.Array


def make_train_step(workload: Workload, tx: optax.GradientTransformation):
    def train_step(state: TrainState, batch: dict[str, jax.Array]) -> tuple[TrainState, jax.Array]:
        rng = jax.random.fold_in(state.rng, state.step)

        def loss_fn(params):
            return workload.loss(params, state.model_state, batch, rng)

        (loss, model_state), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
        updates, opt_state = tx.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        return state.replace(step=state.step + 1, params=params, model_state=model_state, opt_state=opt_state), loss

    return jax.jit(train_step, donate_argnums=0)


def resolve_config(cfg: DictConfig) -> DictConfig:
    """The config a run trains with: validated, with a tuning trial's values applied (and validated)."""
    check_config(cfg)
    trial_cfg = apply_trial(cfg)
    if trial_cfg is not cfg:
        check_config(trial_cfg)
    return trial_cfg


def run(cfg: DictConfig, out_dir: Path | str) -> dict[str, Any]:
    """Validate the config, train, and write the run directory. Returns the summary.

    Raises ConfigError for a bad value and DataMissing for an absent data set before training starts.
    """
    cfg = resolve_config(cfg)
    run_dir = RunDir(out_dir)
    done = run_dir.summary()
    if done is not None:  # a rerun sweep finishes what is missing and redoes nothing
        changed = run_dir.differences(cfg)
        if changed:
            raise ConfigError("hydra.run.dir", str(run_dir.path), "", (
                f"{run_dir.path} already holds a complete run with another config (it differs at "
                f"{', '.join(changed[:5])}): choose another hydra.run.dir or hydra.sweep.dir"))
        log.info("%s is complete (%s); not run again", run_dir.path, done["status"])
        return done
    if cfg.trainer.compilation_cache_dir:
        jax.config.update("jax_compilation_cache_dir", str(Path(cfg.trainer.compilation_cache_dir).expanduser()))
    run_dir.start(cfg)
    workload = make(cfg.workload, data_dir(cfg.data.dir))
    summary = _summary_head(cfg)
    try:
        with Store(cfg.storage, workload.train_source) as store:
            summary.update(fit(cfg, workload, run_dir, store))
    except ConfigError:  # an unreachable store: nothing was trained
        raise
    except (KeyboardInterrupt, SystemExit):
        log.warning("interrupted: %s keeps its metrics and has no summary.json", run_dir.path)
        raise
    except Exception as e:
        run_dir.write_summary({**summary, "status": "failed", "error": f"{type(e).__name__}: {e}"})
        raise
    run_dir.write_summary(summary)
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


def fit(cfg: DictConfig, workload: Workload, run_dir: RunDir, store: Store,
        batches: Optional[tf.data.Dataset] = None) -> dict[str, Any]:
    """Train until the target (or the step budget); append a metrics row per evaluation.

    ``batches`` replaces the workload's training stream (the benchmark feeds cached batches).
    """
    t = cfg.trainer
    batch_size = int(cfg.workload.batch_size)
    tx = optim.optimizer(cfg.optimizer, t.max_steps)
    learning_rate = optim.schedule(cfg.optimizer, t.max_steps)
    init_rng, step_rng = jax.random.split(jax.random.PRNGKey(cfg.seed))
    params, model_state = jax.jit(workload.init)(init_rng)
    state = TrainState(jnp.zeros((), jnp.int32), params, model_state, tx.init(params), step_rng)

    if batches is None:
        batches = workload.train_batches(cfg.echo, cfg.seed, store.records(cfg.seed))
    began = time.perf_counter()
    spec = {k: jax.ShapeDtypeStruct(v.shape, v.dtype.as_numpy_dtype)
            for k, v in batches.element_spec.items() if k != "read_id"}
    train_step = make_train_step(workload, tx).lower(state, spec).compile()
    compile_s = time.perf_counter() - began
    timing = None
    if t.profile_batches:
        timing = profile.measure(workload, store.records(cfg.seed), cfg, train_step, state, t.profile_batches)
        log.info("upstream %.4f s/batch, downstream %.4f s/step: R = %.2f", timing.upstream_s_per_batch,
                 timing.downstream_s_per_step, timing.ratio)

    target = workload.target
    fresh = FreshCounter()
    cadence = int(t.eval_every_fresh_examples)
    next_eval = cadence
    status, to_target, metrics = "not_reached", None, {}
    losses: list[jax.Array] = []
    eval_s = 0.0
    bar = tqdm(total=t.max_steps, unit="step", disable=not (t.progress and sys.stderr.isatty()), leave=False)
    stream = batches.as_numpy_iterator()
    start = time.perf_counter()
    step = 0
    startup_s = None
    for step in range(1, t.max_steps + 1):
        batch = next(stream)
        if startup_s is None:  # the shuffle buffer is full: the steady state begins
            startup_s = time.perf_counter() - start
        fresh.update(batch.pop("read_id"))
        state, loss = train_step(state, batch)
        losses.append(loss)
        bar.update()
        out_of_budget = t.max_fresh_examples is not None and fresh.count >= t.max_fresh_examples
        if fresh.count < next_eval and step < t.max_steps and not out_of_budget:
            continue
        train_loss = float(jnp.mean(jnp.stack(losses)))  # waits for the last step
        losses = []
        eval_began = time.perf_counter()
        elapsed_s = eval_began - start
        train_s = elapsed_s - eval_s
        metrics = workload.evaluate(state.params, state.model_state) if math.isfinite(train_loss) else {}
        eval_s += time.perf_counter() - eval_began
        row = {"step": step, "fresh_examples": fresh.count, "examples_trained": step * batch_size,
               "elapsed_s": elapsed_s, "wall_time_s": train_s, "eval_time_s": eval_s, "train_loss": train_loss,
               "learning_rate": float(learning_rate(step - 1)), **metrics}
        run_dir.append_metrics(row)
        shown = metrics.get(target.metric, float("nan"))
        log.info("step %d  fresh %d  train_loss %.4f  %s %.4f  (%.1fs)", step, fresh.count, train_loss,
                 target.metric, shown, train_s)
        bar.set_postfix(fresh=fresh.count, **{target.metric: f"{shown:.4f}"})
        next_eval = (fresh.count // cadence + 1) * cadence
        if not all(math.isfinite(v) for v in (train_loss, *metrics.values())):
            status = "diverged"
            log.warning("diverged at step %d (train loss %s)", step, train_loss)
            break
        if to_target is None and target.reached(metrics):
            status = "reached_target"
            # Seconds to target count everything until this evaluation began, the earlier evaluations
            # too: they fall on the same fresh-example cadence in every condition, and leaving them out would
            # credit input-bound runs with the reading tf.data goes on doing while evaluation runs.
            to_target = {"fresh_examples_to_target": fresh.count, "steps_to_target": step,
                         "seconds_to_target": elapsed_s}
            log.info("reached %s %s %s at step %d with %d fresh examples", target.metric,
                     ">=" if target.mode == "max" else "<=", target.value, step, fresh.count)
            if t.stop_at_target:
                break
        if out_of_budget:
            break
    bar.close()
    elapsed_s = time.perf_counter() - start
    timing_facts = {**timing.as_dict(),
                    "accelerator_idle_fraction": timing.idle_fraction(step, elapsed_s - startup_s, eval_s)
                    } if timing else {}
    return {
        "status": status,
        "steps": step,
        "fresh_examples": fresh.count,
        "examples_trained": step * batch_size,
        "elapsed_s": elapsed_s,
        "startup_s": startup_s,
        "wall_time_s": elapsed_s - eval_s,
        "eval_time_s": eval_s,
        "compile_time_s": compile_s,
        "target": target.as_dict(),
        **(to_target or {"fresh_examples_to_target": None, "steps_to_target": None, "seconds_to_target": None}),
        "final_metrics": {**metrics, "train_loss": row["train_loss"]} if step else {},
        **timing_facts,
    }

