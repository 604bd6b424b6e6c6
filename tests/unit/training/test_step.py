"""The compiled train step: no searched value is a constant of it, so the trials of a search share one program."""

import jax
import jax.numpy as jnp
import optax
import pytest
from conftest import compose_config

from echo_experiments.core.schema import ConfigError
from echo_experiments.core.specs import RunSpec
from echo_experiments.data.sources import data_dir
from echo_experiments.training import optim
from echo_experiments.training.step import TrainState, initial_state, learning_rates, make_train_step
from echo_experiments.workloads import make


def step_of(*overrides):
    """The lowered step of a synthetic run with ``overrides`` (shapes alone: nothing is computed), the
    optimizer's hyperparameters as it starts, and the schedule's first rate."""
    cfg = compose_config("workload=synthetic", *overrides)
    spec = RunSpec.from_config(cfg)
    workload = make(cfg.workload, data_dir(cfg.data.dir), jnp.float32)
    tx = optim.optimizer(spec.optimizer)
    state = jax.eval_shape(lambda: initial_state(workload, tx, spec.seed, None))
    batch = {k: jax.ShapeDtypeStruct((8, *v.shape[1:]), v.dtype.as_numpy_dtype)
             for k, v in workload.eval_batches.element_spec.items() if k != "read_id"}
    rate = learning_rates(optim.schedule(spec.schedule))(jnp.int32(0))
    lowered = jax.jit(make_train_step(workload, tx)).lower(state, batch, rate)
    hyperparams = tx.init({"kernel": jnp.zeros((2, 2))}).hyperparams
    return lowered.as_text(), {k: float(v) for k, v in hyperparams.items()}, float(rate)


def test_trials_with_other_searched_values_lower_to_the_same_step():
    one = step_of("optimizer.learning_rate=0.01", "optimizer.momentum=0.8", "optimizer.weight_decay=1e-4")
    other = step_of("optimizer.learning_rate=0.3", "optimizer.momentum=0.95", "optimizer.weight_decay=5e-4",
                    "optimizer.schedule=linear_decay", "optimizer.final_fraction=0.1",
                    "optimizer.decay_fresh_examples=5000", "optimizer.warmup_fresh_examples=640")
    assert one[0] == other[0]
    # The values reach the step as inputs: in the optimizer's state, and the rate from the schedule.
    assert one[1] == pytest.approx({"learning_rate": 0.0, "momentum": 0.8, "weight_decay": 1e-4})
    assert other[1] == pytest.approx({"learning_rate": 0.0, "momentum": 0.95, "weight_decay": 5e-4})
    assert (one[2], other[2]) == (pytest.approx(0.01), 0.0)  # the second starts its warmup at zero


def test_a_run_without_momentum_or_weight_decay_has_neither_in_its_step():
    text, hyperparams, _ = step_of("optimizer.momentum=0", "optimizer.weight_decay=0")
    assert set(hyperparams) == {"learning_rate"}
    assert text != step_of("optimizer.momentum=0.9", "optimizer.weight_decay=0")[0]


class _Returns:
    """A workload whose loss hook returns ``value`` (its model state empty)."""

    def __init__(self, value):
        self.value = value

    def loss(self, params, model_state, batch, rng):
        return self.value(params["w"] * batch["x"])


@pytest.mark.parametrize("value, got", [
    (lambda v: (v, {}), "a loss of dtype float32 and shape (4,)"),
    (lambda v: (v.sum().astype(jnp.int32), {}), "a loss of dtype int32 and shape ()"),
    (lambda v: v.mean(), "an array, not a pair"),
    (lambda v: [v.mean(), {}], "a list, not a pair"),
])
def test_a_loss_hook_that_returns_no_float_scalar_is_one_line_naming_the_hook(value, got):
    """A vector or an integer loss failed deep inside jax.grad (33 lines); it is checked as the step is traced."""
    tx, params = optax.sgd(0.1), {"w": jnp.ones(4)}
    start = TrainState(jnp.zeros((), jnp.int32), params, {}, tx.init(params), jax.random.PRNGKey(0))
    with pytest.raises(ConfigError) as raised:
        jax.jit(make_train_step(_Returns(value), tx)).lower(start, {"x": jnp.ones(4)}, jnp.float32(0.1))
    assert str(raised.value) == (
        f"_Returns.loss returns {got}: it returns (the batch's mean loss, a float scalar; the new model_state); "
        "see docs/your-model.md#what-each-hook-receives")
