"""The train step: a pure function of the train state, a batch and the learning rate, compiled once per run,
and the state it starts from.

The learning rate is the schedule's at the run's position (fresh examples trained on before the batch, or
steps), so a schedule in fresh examples gives every echo factor the same rate at the same count of fresh
examples. The schedule is compiled on its own and its rate passed into the step, and the other searched
hyperparameters are in the optimizer's state (optim.py): no searched value is a constant of the step, so the
trials of a search share its compiled program (and JAX's compilation cache).
"""

from typing import Any

import flax.struct
import jax
import jax.numpy as jnp
import optax

from echo_experiments.core.schema import ConfigError
from echo_experiments.core.user_code import HOOKS_DOC
from echo_experiments.training import optim


@flax.struct.dataclass
class TrainState:
    step: jax.Array
    params: Any
    model_state: Any
    opt_state: Any
    rng: jax.Array


def _cast(tree: Any, dtype: Any) -> Any:
    return jax.tree.map(lambda x: x.astype(dtype) if jnp.issubdtype(x.dtype, jnp.floating) else x, tree)


def _loss(workload: Any, params: Any, model_state: Any, batch: dict[str, jax.Array], rng: jax.Array):
    """``workload.loss`` with what it returns checked as it is traced (shapes and types are known then): a
    vector or an integer loss would otherwise fail deep inside jax.grad, far from the hook that made it."""
    out = workload.loss(params, model_state, batch, rng)
    got = "an array, not a pair" if hasattr(out, "shape") else f"a {type(out).__name__}, not a pair"
    if isinstance(out, tuple) and len(out) == 2:
        try:
            dtype, shape = jnp.result_type(out[0]), jnp.shape(out[0])
        except TypeError:
            got = f"a {type(out[0]).__name__} as its loss"
        else:
            if shape == () and jnp.issubdtype(dtype, jnp.floating):
                return out
            got = f"a loss of dtype {dtype} and shape {shape}"
    name = f"{type(workload).__name__}.loss"
    raise ConfigError("workload.task", name, "", (
        f"{name} returns {got}: it returns (the batch's mean loss, a float scalar; the new model_state); "
        f"see {HOOKS_DOC}"))


def learning_rates(schedule: optim.Schedule, sharding: Any = None):
    """The schedule compiled on its own: ``position -> learning rate`` (float32), the rate the step takes."""
    return jax.jit(lambda position: jnp.asarray(schedule(position), jnp.float32), out_shardings=sharding)


def _update(workload: Any, tx: optax.GradientTransformation, compute_dtype: Any):
    """``(state, batch, learning_rate) -> (state, loss, gradient)``: one SGD step and the gradient it took."""

    def update(state: TrainState, batch: dict[str, jax.Array], learning_rate: jax.Array):
        rng = jax.random.fold_in(state.rng, state.step)

        def loss_fn(params):
            return _loss(workload, _cast(params, compute_dtype), state.model_state, batch, rng)

        (loss, model_state), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
        model_state = jax.tree.map(lambda new, old: new.astype(old.dtype), model_state, state.model_state)
        opt_state = optim.with_learning_rate(state.opt_state, learning_rate)
        updates, opt_state = tx.update(grads, opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        state = state.replace(step=state.step + 1, params=params, model_state=model_state, opt_state=opt_state)
        return state, loss, grads

    return update


def make_train_step(workload: Any, tx: optax.GradientTransformation, compute_dtype: Any = jnp.float32):
    """The pure step ``(state, batch, learning_rate) -> (state, loss)``, the rate the schedule's at the run's
    place in it (:func:`learning_rates`). Under mixed precision the model computes in ``compute_dtype`` while
    parameters, optimizer state and model state stay float32."""
    update = _update(workload, tx, compute_dtype)

    def train_step(state: TrainState, batch: dict[str, jax.Array],
                   learning_rate: jax.Array) -> tuple[TrainState, jax.Array]:
        state, loss, _ = update(state, batch, learning_rate)
        return state, loss

    return train_step


def make_slice_loss(workload: Any, compute_dtype: Any = jnp.float32):
    """``(params, model_state, batch) -> loss``, compiled: the loss the train step takes on a batch, without a
    step, its dropout keyed by one fixed key, so that a batch measured window after window differs only by the
    model (the autopilot's held-out slice, autopilot/cap.py)."""
    key = jax.random.PRNGKey(0)
    return jax.jit(lambda params, model_state, batch: _loss(workload, _cast(params, compute_dtype), model_state,
                                                             batch, key)[0])


def _dot(a: Any, b: Any) -> jax.Array:
    return sum(jnp.vdot(x.astype(jnp.float32), y.astype(jnp.float32)) for x, y in zip(jax.tree.leaves(a),
                                                                                    jax.tree.leaves(b)))


def make_probed_step(workload: Any, tx: optax.GradientTransformation, compute_dtype: Any = jnp.float32):
    """The train step with the copy-worth estimate's measures (worth.py): ``(state, batch, learning_rate,
    held_out_gradient, held_out_batch) -> (state, loss, (<g, held_out_gradient>, |g|^2, held-out loss))``, g the
    step's own gradient and the held-out batch's loss taken before the step, its random draws the run's own
    (``state.rng``, the same at every step, so that two steps' losses on one batch differ by the step between
    them alone). The state it returns is the plain step's."""
    update = _update(workload, tx, compute_dtype)

    def probed_step(state: TrainState, batch: dict[str, jax.Array], learning_rate: jax.Array, held_out: Any,
                    held_out_batch: dict[str, jax.Array]):
        held_out_loss = _loss(workload, _cast(state.params, compute_dtype), state.model_state, held_out_batch,
                              state.rng)[0]
        state, loss, grads = update(state, batch, learning_rate)
        return state, loss, (_dot(grads, held_out), _dot(grads, grads), held_out_loss)

    return probed_step


def make_held_out_gradient(workload: Any, compute_dtype: Any = jnp.float32):
    """``(params, model_state, batch, rng) -> gradient`` of the training loss on a held-out batch, the model
    state it would update left as it was: the direction a step would take toward held-out progress."""

    def held_out_gradient(params: Any, model_state: Any, batch: dict[str, jax.Array], rng: jax.Array):
        def loss_fn(params):
            return _loss(workload, _cast(params, compute_dtype), model_state, batch, rng)[0]
        return jax.grad(loss_fn)(params)

    return held_out_gradient


def initial_state(workload: Any, tx: optax.GradientTransformation, seed: int, sharding: Any) -> TrainState:
    """Parameters, model and optimizer state from ``seed``, made by one compiled program (op by op, each
    leaf of the optimizer state would be a program of its own to compile)."""

    def init(seed: jax.Array) -> TrainState:
        init_rng, step_rng = jax.random.split(jax.random.PRNGKey(seed))
        params, model_state = workload.init(init_rng)
        return TrainState(jnp.zeros((), jnp.int32), params, model_state, tx.init(params), step_rng)

    return jax.jit(init, out_shardings=sharding)(seed)
