"""Optimizers and learning-rate schedules from an ``optimizer`` config (Optax).

The paper trains ResNets with Nesterov momentum and a linear learning-rate decay, Transformers with a
constant rate, and SSD with momentum and a piecewise exponential decay: ``schedule`` is ``linear_decay``,
``constant`` or ``piecewise_exponential`` (times ``decay_factor`` at each boundary), each after an optional
linear warmup.

A schedule is a function of the run's position in it, counted in fresh examples by default
(``warmup_fresh_examples``, ``decay_fresh_examples``, ``decay_boundaries_fresh_examples``): echoing at
factor e takes e times the steps per fresh example, and a schedule in steps would end (or anneal) e times
earlier in fresh examples, favouring whichever condition it happens to suit. The same keys in steps
(``warmup_steps``, ``decay_steps``, ``decay_boundaries_steps``) are there for a user who asks for steps;
setting any of them puts the whole schedule in steps.
"""

from dataclasses import dataclass
from typing import Any, Callable

import jax
import optax

from echo_experiments.core.specs import FRESH_EXAMPLES, STEPS, OptimizerSpec, ScheduleSpec

__all__ = ["FRESH_EXAMPLES", "STEPS", "Schedule", "learning_rate", "optimizer", "schedule", "with_learning_rate"]


@dataclass(frozen=True)
class Schedule:
    """The learning rate at a position of the run (fresh examples trained on before a step, or steps)."""

    rate: Callable[[Any], Any]
    unit: str  # FRESH_EXAMPLES or STEPS

    def __call__(self, position: Any) -> Any:
        return self.rate(position)


def schedule(spec: ScheduleSpec) -> Schedule:
    """The schedule a spec describes (its decay length already the budget where none was given)."""
    lr = spec.learning_rate
    if spec.kind == "linear_decay":
        main = optax.linear_schedule(lr, lr * spec.final_fraction, int(spec.decay))
    elif spec.kind == "piecewise_exponential":
        # Boundaries count from the end of the warmup, like the decay of linear_decay.
        main = optax.piecewise_constant_schedule(lr, {b: spec.decay_factor for b in spec.boundaries})
    else:
        main = optax.constant_schedule(lr)
    if spec.warmup:
        main = optax.join_schedules([optax.linear_schedule(0.0, lr, spec.warmup), main], [spec.warmup])
    return Schedule(main, spec.unit)


def optimizer(spec: OptimizerSpec) -> optax.GradientTransformation:
    """SGD with (Nesterov) momentum; L2 weight decay on weight matrices and kernels, not biases or norms.

    The learning rate, momentum and weight decay are hyperparameters in the optimizer's state
    (optax.inject_hyperparams), inputs of the compiled step rather than constants in it: the trials of a search
    share one compiled program. The train step sets the rate from the schedule at the run's position
    (:func:`with_learning_rate`) before each update."""
    nesterov = spec.nesterov and bool(spec.momentum)

    def sgd(learning_rate: Any, momentum: Any, weight_decay: Any) -> optax.GradientTransformation:
        tx = optax.sgd(learning_rate, momentum=momentum, nesterov=nesterov)
        if weight_decay is not None:
            kernels_only = lambda params: jax.tree.map(lambda p: p.ndim > 1, params)  # noqa: E731
            tx = optax.chain(optax.add_decayed_weights(weight_decay, mask=kernels_only), tx)
        return tx

    # None where the run has none: inject_hyperparams passes it on as it is and keeps it out of the state.
    return optax.inject_hyperparams(sgd)(learning_rate=0.0, momentum=spec.momentum or None,
                                         weight_decay=spec.weight_decay or None)


def with_learning_rate(opt_state: Any, learning_rate: Any) -> Any:
    """The optimizer state of :func:`optimizer` with its learning rate set for the next update."""
    return opt_state._replace(hyperparams={**opt_state.hyperparams, "learning_rate": learning_rate})


def learning_rate(opt_state: Any) -> Any:
    """The learning rate the last update used."""
    return opt_state.hyperparams["learning_rate"]
