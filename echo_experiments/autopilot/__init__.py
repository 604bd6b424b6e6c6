"""Echo on stall: the autopilot (``echo.factor=auto``) for any training loop, and the trainer's own.

Wrap your loader; each ``next`` gives a fresh batch when the loader has one ready, else a batch of copies of
earlier fresh data while the step in flight is done, never training an example more than ``max_factor`` times::

    from echo_experiments.autopilot import EchoOnStall

    loop = EchoOnStall(loader, max_factor=4)           # any iterator of batches (Grain, tf.data, PyTorch, yours)
    for batch in loop:
        state, loss = train_step(state, batch)          # dispatched asynchronously (JAX)
        loop.step_in_flight(loss)                       # copies only once this step is done
    print(loop.summary())                               # fresh examples, copies, the share of time spent waiting
    loop.close()

``copies="examples"`` copies examples drawn from a pool of earlier batches (as an echo shuffle spreads a fixed
factor's copies) instead of whole recent batches; ``read_ids="read_id"`` counts fresh examples by their read ids
(``echo_experiments.grain.with_read_ids``). ``loop.state()`` is what to checkpoint beside the loader's own state,
``EchoOnStall(loader, ..., state=saved)`` goes on from it, and ``replay=loop.decisions`` makes a run's decisions
again. docs/your-model.md, "Echo on stall in your own loop", has the Grain, plain-iterator and PyTorch recipes.
"""

from echo_experiments.autopilot.loop import EchoOnStall, Summary
from echo_experiments.autopilot.reader import LoaderError

__all__ = ["EchoOnStall", "LoaderError", "Summary"]
