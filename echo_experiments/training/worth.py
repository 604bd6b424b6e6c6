"""What a copy is worth, estimated while training (``trainer.copy_worth_every``): three candidates from the
steps' own gradients, in fresh-example units (1: a copy teaches what a fresh example does; 0: nothing).

To first order a step lowers the held-out loss by the learning rate times its gradient's inner product with the
held-out gradient G. So G, taken every ``copy_worth_every`` steps on a batch of the held-out split (never trained
on; the batches taken in turn), gives each step t a measure of what it taught, p_t = <g_t, G>, and the steps of
copies can be set against the steps of fresh examples. With c_t the share of a step's examples that were copies
(from its read ids: 1 for an autopilot's copy or an echoed batch, about 1 - 1/e for example echoing), least
squares over the steps since the last evaluation fit ``y = fresh + (copy - fresh) c`` for three values y:

- ``alignment``: y = p. A copy step's held-out progress over a fresh step's.
- ``loss_ratio``: y = the batch's loss before its step. A copy's loss over a fresh batch's: below 1 as far as
  the model has learnt the copy already (a fresh batch's loss is an unbiased held-out estimate).
- ``noise``: a fresh step's p over its |g|^2, which is B / (B + B_noise) for the simple gradient noise scale
  B_noise = B (|g|^2 - |G|^2) / |G|^2 (McCandlish et al. 2018), with |G|^2 estimated by p. Near 1 the batch's
  gradient is mostly signal, where more steps on the same data do what fresh data would; near 0 it is mostly
  the batch's noise, which a copy repeats.
- ``loss_drop``: y = what the step lowered the held-out batch's loss by, measured (the batch's loss before the
  step less its loss before the next step, on the batch G was taken on). p is to first order; a copy repeats its
  batch's noise, and the harm of a noise direction taken twice is second order, which the loss itself shows.

docs/protocol.md ("What a copy is worth: the estimate's pilot") says which of them the project uses, and how it
was chosen. Nothing here changes what the steps compute: a run with the estimate trains as one without it.
"""

from typing import Any, Callable, Optional

import jax
import numpy as np

from echo_experiments.core.record import COPY_WORTH_CANDIDATES
from echo_experiments.core.schema import ConfigError
from echo_experiments.data import stream
from echo_experiments.training import step

# The held-out batches G is taken on, in turn: one batch's noise would otherwise stay in every measure.
HELD_OUT_BATCHES = 8
# Below this spread of c among an interval's steps the fit cannot tell copies from fresh examples.
MIN_COPY_SPREAD = 0.01
CANDIDATES = COPY_WORTH_CANDIDATES


def held_out_batches(workload: Any, batch_size: int, keys: dict[str, Any]) -> list[dict[str, np.ndarray]]:
    """Up to HELD_OUT_BATCHES full batches of the held-out split, with the training batches' ``keys`` (name ->
    (shape, dtype) of one example); ValueError naming the key where the held-out examples differ."""
    batches = stream.eval_batches(workload.eval_examples(), batch_size, limit=HELD_OUT_BATCHES * batch_size)
    kept = []
    for batch in batches.as_numpy_iterator():
        if len(next(iter(batch.values()))) < batch_size:
            break
        for key, (shape, dtype) in keys.items():
            if key not in batch or batch[key].shape[1:] != tuple(shape) or batch[key].dtype != np.dtype(dtype):
                found = "none" if key not in batch else f"{batch[key].shape[1:]} {batch[key].dtype}"
                raise ValueError(f"the held-out examples' {key!r} is {found}, where a training batch's is "
                                 f"{tuple(shape)} {np.dtype(dtype)}")
        kept.append({key: batch[key] for key in keys})
    if not kept:
        raise ValueError(f"the held-out split has fewer than a batch ({batch_size}) of examples")
    return kept


def fit(shares: np.ndarray, values: np.ndarray) -> Optional[tuple[float, float]]:
    """(fresh, copy): the least-squares line of ``values`` over the copied ``shares``, at share 0 and at 1; None
    where the shares do not spread (MIN_COPY_SPREAD)."""
    if len(shares) < 2 or float(np.var(shares)) < MIN_COPY_SPREAD:
        return None
    slope, intercept = np.polyfit(shares, values, 1)
    return float(intercept), float(intercept + slope)


def estimates(shares: np.ndarray, progress: np.ndarray, losses: np.ndarray, norms: np.ndarray,
              drop_shares: np.ndarray, drops: np.ndarray) -> dict[str, Any]:
    """The candidates (None where undefined) from one interval's steps: each step's copied share, held-out
    progress p, loss and |g|^2, and the held-out loss drops with their steps' shares; and the interval's mean
    copied share and its count of steps."""
    out: dict[str, Any] = {"copy_share": float(np.mean(shares)) if len(shares) else None, "steps": len(shares)}
    for name, xs, ys in (("alignment", shares, progress), ("loss_ratio", shares, losses),
                         ("loss_drop", drop_shares, drops)):
        line = fit(xs, ys)
        out[name] = line[1] / line[0] if line and line[0] > 0 else None
    fresh = shares < 0.5
    if not fresh.any():
        out["noise"] = None
    else:
        signal, norm = float(np.mean(progress[fresh])), float(np.mean(norms[fresh]))
        out["noise"] = signal / norm if norm > 0 and signal > 0 else None
    return out


def summary(rows: list[dict[str, Any]]) -> dict[str, Optional[float]]:
    """The record's ``copy_worth``: each candidate's median over the evaluations that defined it, and the
    median copied share."""
    out: dict[str, Optional[float]] = {}
    for name in (*CANDIDATES, "copy_share"):
        values = [row[f"copy_worth_{name}"] for row in rows if row.get(f"copy_worth_{name}") is not None]
        out[name] = float(np.median(values)) if values else None
    return out


class Plain:
    """The train step without the estimate, asked as a :class:`Probe` is (the loop asks every step the same)."""

    def __init__(self, train_step: Callable):
        self.train_step = train_step

    def step(self, state: Any, batch: dict[str, jax.Array], rate: jax.Array, fresh_in_batch: Optional[int] = None,
             at_step: Optional[int] = None) -> tuple[Any, jax.Array]:
        return self.train_step(state, batch, rate)

    def template(self, state: Any) -> Any:
        """What a checkpoint's held-out gradient is restored as (None: it keeps none)."""
        return None

    def saved(self) -> tuple[Any, dict[str, Any]]:
        return None, {}

    def resume(self, gradient: Any, saved: dict[str, Any]) -> None:
        """Nothing to go on from."""

    def at_evaluation(self) -> dict[str, Any]:
        return {}

    def record(self, rows: Callable[[], list[dict[str, Any]]]) -> dict[str, Any]:
        """The record's ``copy_worth`` from the run's metrics rows (``rows()`` reads them)."""
        return {}


class Probe(Plain):
    """The train step with the estimate beside it: ``step(state, batch, rate, fresh_in_batch, at_step)`` trains
    as the plain step does and keeps the step's measures (``at_step``: the steps before it, counted on the host,
    so that choosing when to take G never waits for the device); ``at_evaluation()`` turns the steps since the
    last evaluation into the metrics row's ``copy_worth_*`` fields."""

    def __init__(self, probed_step: Callable, held_out_gradient: Callable, batches: list[dict[str, jax.Array]],
                 every: int, batch_size: int):
        super().__init__(lambda state, batch, rate: self.step(state, batch, rate))
        self.probed_step, self.held_out_gradient = probed_step, held_out_gradient
        self.batches, self.every, self.batch_size = batches, every, batch_size
        self.gradient: Any = None
        self.taken = 0  # held-out gradients taken: the one in use is on batch (taken - 1) % len(batches)
        # (copied share, loss, (p, |g|^2, held-out loss), G's number) per step since the last evaluation
        self.steps: list[tuple[float, Any, Any, int]] = []
        self.carried: Optional[tuple[float, Any, Any, int]] = None  # the last one before it: its drop ends now

    def step(self, state: Any, batch: dict[str, jax.Array], rate: jax.Array, fresh_in_batch: Optional[int] = None,
             at_step: Optional[int] = None) -> tuple[Any, jax.Array]:
        if self.gradient is None or (at_step is not None and at_step % self.every == 0):
            self.taken += 1
            self.gradient = self.held_out_gradient(state.params, state.model_state, self._held_out, state.rng)
        state, loss, measures = self.probed_step(state, batch, rate, self.gradient, self._held_out)
        if fresh_in_batch is not None:
            self.steps.append((1.0 - fresh_in_batch / self.batch_size, loss, measures, self.taken))
        return state, loss

    @property
    def _held_out(self) -> dict[str, jax.Array]:
        return self.batches[(self.taken - 1) % len(self.batches)]

    def template(self, state: Any) -> Any:
        return state.params

    def record(self, rows: Callable[[], list[dict[str, Any]]]) -> dict[str, Any]:
        return summary(rows())

    def saved(self) -> tuple[Any, dict[str, Any]]:
        """(G, the counters and the steps since the last evaluation as JSON): what a checkpoint keeps, so that a
        resumed run measures as one that never stopped."""
        steps, carried = jax.device_get((self.steps, self.carried))  # one transfer for every step's values

        def plain(s):
            share, loss, measures, taken = s
            return [share, float(loss), [float(m) for m in measures], taken]
        return self.gradient, {"taken": self.taken, "steps": [plain(s) for s in steps],
                               "carried": plain(carried) if carried else None}

    def resume(self, gradient: Any, saved: dict[str, Any]) -> None:
        """Continue from :meth:`saved`; a checkpoint without it (``gradient`` None) takes G afresh."""
        if gradient is None or not saved:
            return
        self.gradient, self.taken = gradient, saved["taken"]
        self.steps = [tuple(s) for s in saved["steps"]]
        self.carried = tuple(saved["carried"]) if saved["carried"] else None

    def at_evaluation(self) -> dict[str, Any]:
        steps, self.steps = self.steps, []
        chain = ([self.carried] if self.carried else []) + steps
        self.carried = steps[-1] if steps else self.carried
        shares = np.array([s[0] for s in steps], np.float64)
        losses, measures = jax.device_get(([s[1] for s in steps], [s[2] for s in chain]))
        own = measures[len(chain) - len(steps):]
        # A step's drop: its batch's held-out loss less the next step's, where both were on G's batch.
        pairs = [(a[0], float(ma[2]) - float(mb[2])) for a, b, ma, mb in zip(chain, chain[1:], measures, measures[1:])
                 if a[3] == b[3]]
        found = estimates(shares, np.array([m[0] for m in own], np.float64), np.asarray(losses, np.float64),
                          np.array([m[1] for m in own], np.float64), np.array([x for x, _ in pairs], np.float64),
                          np.array([y for _, y in pairs], np.float64))
        return {**{f"copy_worth_{name}": found[name] for name in (*CANDIDATES, "copy_share")},
                "copy_worth_copy_steps": float(shares.sum())}  # the steps of copies the estimates rest on


def probe(workload: Any, tx: Any, mesh: Any, every: int, state: Any, batch_spec: dict[str, Any],
          rate_spec: Any) -> Probe:
    """The :class:`Probe` of a run: its steps compiled before training on ``mesh`` as the trainer's are, for
    ``state`` and the training batch's and the rate's shapes (jax.ShapeDtypeStruct); ConfigError where the
    held-out split cannot give G."""
    batch_size = next(iter(batch_spec.values())).shape[0]
    try:
        batches = held_out_batches(workload, batch_size, {k: (v.shape[1:], v.dtype) for k, v in batch_spec.items()})
    except ValueError as e:
        raise ConfigError("trainer.copy_worth_every", every, "0 for this workload",
                          f"trainer.copy_worth_every={every} needs held-out batches like the training ones, and {e}: "
                          f"set it to 0") from None
    r, b = mesh.replicated, mesh.batch
    gradient = jax.jit(step.make_held_out_gradient(workload, workload.compute_dtype), in_shardings=(r, r, b, r),
                       out_shardings=r).lower(state.params, state.model_state, batch_spec, state.rng).compile()
    probed = jax.jit(step.make_probed_step(workload, tx, workload.compute_dtype), donate_argnums=0,
                     in_shardings=(r, b, r, r, b), out_shardings=(r, r, r)
                     ).lower(state, batch_spec, rate_spec, state.params, batch_spec).compile()
    local = batch_size // mesh.host.count  # each process puts its own rows of a global batch
    rows = slice(mesh.host.index * local, (mesh.host.index + 1) * local)
    mine = [{k: v[rows] for k, v in batch.items()} for batch in batches]
    return Probe(probed, gradient, [mesh.put_batch(batch) for batch in mine], every, batch_size)
