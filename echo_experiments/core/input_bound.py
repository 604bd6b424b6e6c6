"""How input-bound a training is, in the words its users already have beside R (the input's seconds a batch over
the step's): the share of a step's wall time spent waiting for input, and the class XProf's input-pipeline
analyzer gives it (not input-bound below 5% of the step time, moderately from 5%, highly from 20%). Without
echoing a step waits 1 - 1/R of its time for input where R > 1 (R about 1.05 is 5%, 1.25 is 20%); Google's goodput
calls that share DATA_LOADING badput. No TensorFlow or JAX: the command line and the autopilot for a user's loop
print it as the trainer does."""

import math
from typing import Optional

MODERATELY, HIGHLY = 0.05, 0.20
ROUND_OFF = 1e-12  # R = 1.25 is 20% waiting, though 1 - 1/1.25 is 0.19999999999999996 in floats


def wait_share(ratio: Optional[float]) -> Optional[float]:
    """The share of a step's wall time spent waiting for input without echoing, from R (None: not measured)."""
    if ratio is None or not math.isfinite(ratio) or ratio <= 0:
        return None
    return max(0.0, 1.0 - 1.0 / ratio)


def xprof_class(share: Optional[float]) -> Optional[str]:
    """XProf's input-pipeline class of a wait share (None: not measured)."""
    if share is None or not math.isfinite(share):
        return None
    if share >= HIGHLY - ROUND_OFF:
        return "highly input-bound"
    return "moderately input-bound" if share >= MODERATELY - ROUND_OFF else "not input-bound"


def in_words(share: Optional[float], of: str = "step time") -> str:
    """The share and its class, as a line ends: ``18% of step time waiting for input (moderately input-bound)``."""
    if share is None:
        return "waiting for input: not measured"
    return f"{share:.0%} of {of} waiting for input ({xprof_class(share)})"
