"""Optimizers and learning-rate schedules from an ``optimizer`` config (Optax).

The paper trains ResNets with Nesterov momentum and a linear learning-rate decay, Transformers with a
constant rate, and SSD with momentum and a piecewise exponential decay: ``schedule`` is ``linear_decay``,
``constant`` or ``piecewise_exponential`` (times ``decay_factor`` at each of ``decay_boundaries``), each after
an optional linear warmup.
"""

from typing import Any

import jax
import optax


def schedule(cfg: Any, max_steps: int) -> optax.Schedule:
    lr = float(cfg.learning_rate)
    if cfg.schedule == "linear_decay":
        main = optax.linear_schedule(lr, lr * float(cfg.final_fraction), int(cfg.decay_steps or max_steps))
    elif cfg.schedule == "piecewise_exponential":
        # Boundaries count steps after the warmup, like the decay of linear_decay.
        main = optax.piecewise_constant_schedule(lr, {int(b): float(cfg.decay_factor) for b in cfg.decay_boundaries})
    else:
        main = optax.constant_schedule(lr)
    if cfg.warmup_steps:
        warmup = optax.linear_schedule(0.0, lr, int(cfg.warmup_steps))
        return optax.join_schedules([warmup, main], [int(cfg.warmup_steps)])
    return main


def optimizer(cfg: Any, max_steps: int) -> optax.GradientTransformation:
    """SGD with (Nesterov) momentum; L2 weight decay on weight matrices and kernels, not biases or norms."""
    momentum = float(cfg.momentum) or None
    tx = optax.sgd(schedule(cfg, max_steps), momentum=momentum, nesterov=bool(cfg.nesterov) and momentum is not None)
    if cfg.weight_decay:
        kernels_only = lambda params: jax.tree.map(lambda p: p.ndim > 1, params)  # noqa: E731
        tx = optax.chain(optax.add_decayed_weights(float(cfg.weight_decay), mask=kernels_only), tx)
    return tx
