"""A search dimension's scales: where a unit interval's point lies in [low, high] on a linear, log, log(1 - x) or
integer scale, and back. The tuner draws trials with them (workloads/trials.py); the reporter says where a best
trial lies in its range (report/collect.py)."""

import math


def scale(u: float, low: float, high: float, kind: str) -> float | int:
    """Map u in [0, 1) onto [low, high] on the dimension's scale."""
    if kind == "log":
        return float(math.exp(math.log(low) + u * (math.log(high) - math.log(low))))
    if kind == "log_one_minus":  # momentum-like: 1 - value is log-uniform
        return float(1 - math.exp(math.log(1 - low) + u * (math.log(1 - high) - math.log(1 - low))))
    if kind == "int":
        return int(low + math.floor(u * (high - low + 1)))
    return float(low + u * (high - low))


def unit_position(value: float, low: float, high: float, kind: str) -> float:
    """Where ``value`` lies in [low, high] on the dimension's scale: 0 at low, 1 at high (``scale``'s inverse)."""
    if kind == "log":
        return (math.log(value) - math.log(low)) / (math.log(high) - math.log(low))
    if kind == "log_one_minus":
        return (math.log(1 - value) - math.log(1 - low)) / (math.log(1 - high) - math.log(1 - low))
    return (value - low) / (high - low)
