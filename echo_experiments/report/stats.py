"""Paired statistics over every trial (docs/protocol.md, "Statistics"): within a study every condition trains on
the same quasi-random draws, so two conditions are compared draw by draw.

A trial's outcome is its fresh examples to target within the budget every condition shares: an interval,
since some trials stop before they can say.

- reached the target: exactly its count, [x, x];
- pruned at count c: it needed more than c, and may never have reached the target: [c, inf];
- not reached within the budget, or diverged: [inf, inf].

A draw's paired ratio (the first condition's outcome over the second's) is then an interval too. A draw says
something of the ratio only when one side at least reached the target and neither diverged: a draw where
neither reached (pruned or not) is left out (``n_neither``), and so is one where either side diverged, counted
per side (``n_diverged_a``, ``n_diverged_b``): a diverged run says what its metaparameters do to stability,
not how many fresh examples it would need. The median paired ratio lies between two medians: ``ratio_low``,
every open interval resolved in the first condition's favour, and ``ratio_high``, against it; where no censored
draw sits at the median, and the median is unique, they are equal. Each has a 90% interval from a bootstrap over
studies and, within each, draws.
"""

import math
from dataclasses import dataclass
from typing import Optional

import numpy as np
import pandas as pd

INF = math.inf
LEVEL = 0.90
RESAMPLES = 2000
SEED = 20190715  # the bootstrap's draws are fixed, so the same runs give the same tables


def outcome_bounds(trials: pd.DataFrame) -> pd.DataFrame:
    """``lo`` and ``hi`` of each trial's fresh examples to target (see the module's docstring)."""
    status = trials["status"]
    reached = status == "reached_target"
    count = trials["fresh_examples_to_target"].where(reached).astype(float)
    lo = count.where(reached, np.where(status == "pruned", trials["fresh_examples"].astype(float), INF))
    hi = count.where(reached, INF)
    return trials.assign(lo=lo.astype(float), hi=hi.astype(float), reached=reached, diverged=status == "diverged")


def interval(low: np.ndarray, high: Optional[np.ndarray] = None) -> tuple[float, float]:
    """The LEVEL interval of bootstrap samples: the lower tail of ``low``, the upper tail of ``high`` (``low``
    again by default). Quantiles are sample values (no interpolation), so infinite samples stay infinite."""
    if not len(low):
        return math.nan, math.nan
    tail = (1 - LEVEL) / 2
    high = low if high is None else high
    return (float(np.quantile(low, tail, method="inverted_cdf")),
            float(np.quantile(high, 1 - tail, method="inverted_cdf")))


def divide(a: np.ndarray, b: np.ndarray, undefined: float = 1.0) -> np.ndarray:
    """a / b over [0, inf], x / inf = 0; inf / inf and 0 / 0 are ``undefined``: 1 for two outcomes (both never
    reach the target: a tie), the bound's own end (0 for a lower bound, inf for an upper) for two ratios."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out = a / b
    return np.where(np.isnan(out), undefined, out)


@dataclass(frozen=True)
class Pairs:
    """The draws two conditions share: per draw its study and the bounds of the paired ratio."""

    study: np.ndarray
    low: np.ndarray
    high: np.ndarray
    neither: int  # draws left out that say nothing of the ratio (neither reached; an interaction's unordered)
    draw: Optional[np.ndarray] = None  # the trial (draw) of each, for pairing two comparisons
    diverged: tuple[int, int] = (0, 0)  # draws left out because the first, or the second, condition diverged

    @classmethod
    def of(cls, a: pd.DataFrame, b: pd.DataFrame) -> "Pairs":
        """``a`` and ``b``: one condition's trials each (outcome_bounds'), joined on (study_key, trial); the draws
        that say something of the ratio (the module's docstring)."""
        joined = a.merge(b, on=["study_key", "trial"], suffixes=("_a", "_b"))
        diverged = joined["diverged_a"].to_numpy(bool) | joined["diverged_b"].to_numpy(bool)
        neither = ~diverged & ~joined["reached_a"].to_numpy(bool) & ~joined["reached_b"].to_numpy(bool)
        kept = joined[~diverged & ~neither]
        low = divide(kept["lo_a"].to_numpy(float), kept["hi_b"].to_numpy(float))
        high = divide(kept["hi_a"].to_numpy(float), kept["lo_b"].to_numpy(float))
        return cls(kept["study_key"].to_numpy(), low, high, int(neither.sum()), kept["trial"].to_numpy(),
                   (int(joined["diverged_a"].sum()), int(joined["diverged_b"].sum())))

    def __len__(self) -> int:
        return len(self.low)

    def over(self, other: "Pairs") -> "Pairs":
        """The ratio of these paired ratios to ``other``'s on the draws both have (an interaction: did one
        comparison's ratio fall below the other's?); a draw whose ratio of ratios is unbounded both ways, [0,
        inf], says nothing and is left out."""
        mine = {(s, d): i for i, (s, d) in enumerate(zip(self.study, self.draw))}
        both = [(mine[(s, d)], j) for j, (s, d) in enumerate(zip(other.study, other.draw)) if (s, d) in mine]
        i, j = (np.array([k[n] for k in both], dtype=int) for n in (0, 1))
        low = divide(self.low[i], other.high[j], undefined=0.0) if len(both) else np.array([])
        high = divide(self.high[i], other.low[j], undefined=math.inf) if len(both) else np.array([])
        says = ~((low == 0) & np.isinf(high))
        left_out = len(self) + len(other) - 2 * len(both) + int((~says).sum())
        diverged = (self.diverged[0] + other.diverged[0], self.diverged[1] + other.diverged[1])
        return Pairs(self.study[i][says], low[says], high[says], left_out, self.draw[i][says], diverged)


def turnbull(low: np.ndarray, high: np.ndarray, tolerance: float = 1e-7, steps: int = 1000
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The nonparametric maximum-likelihood distribution of values known only to lie in [low, high] (Turnbull
    1976): its support, the innermost intervals (left ends, right ends), and their probabilities."""
    points = sorted({(x, 0) for x in low} | {(x, 1) for x in high})  # at a tie a left end comes first
    left = np.array([a for (a, ka), (b, kb) in zip(points, points[1:]) if ka == 0 and kb == 1])
    right = np.array([b for (a, ka), (b, kb) in zip(points, points[1:]) if ka == 0 and kb == 1])
    inside = (low[:, None] <= left[None, :]) & (right[None, :] <= high[:, None])
    p = np.full(len(left), 1 / len(left))
    for _ in range(steps):  # self-consistency (EM): each value's mass spread over its intervals by p
        share = inside * p
        share /= share.sum(axis=1, keepdims=True)
        updated = share.mean(axis=0)
        if np.abs(updated - p).max() < tolerance:
            return left, right, updated
        p = updated
    return left, right, p


# Masses of the Turnbull estimate closer than this are one (EM stops at a tolerance of 1e-7 per interval; with
# up to a few hundred draws, two cumulative masses that differ at all differ by far more).
TIE = 1e-5


def censored_median(low: np.ndarray, high: np.ndarray) -> tuple[float, float]:
    """Every median of the Turnbull estimate, as (the lowest, the highest): from the innermost interval where
    its distribution reaches 1/2 to, where it stays at exactly 1/2 up to the next interval with mass (an even
    count's two middle draws), that one's right end. One value when the median is unique and exact."""
    if np.array_equal(low, high):
        ordered = np.sort(low)
        return float(ordered[(len(ordered) - 1) // 2]), float(ordered[len(ordered) // 2])
    with np.errstate(divide="ignore"):  # a ratio of 0 (only the first reached the target) is -inf on this scale
        left, right, p = turnbull(np.log(low), np.log(high))
    cumulative = np.cumsum(p)
    at = int(np.searchsorted(cumulative, 0.5 - TIE))
    end = at
    if abs(cumulative[at] - 0.5) <= TIE and (later := np.flatnonzero(p[at + 1:] > TIE)).size:
        end = at + 1 + int(later[0])  # not the end EM's round-off would pick
    return float(np.exp(left[at])), float(np.exp(right[end]))


def paired_effect(pairs: Pairs, resamples: int = RESAMPLES, seed: int = SEED) -> dict[str, float]:
    """The censoring-aware median paired ratio (``ratio_low``..``ratio_high``), its 90% bootstrap interval, and
    how the draws fall: fewer, more, the same, or not ordered (both censored past each other)."""
    n = len(pairs)
    row = {"n_draws": n, "n_neither": pairs.neither, "n_diverged_a": pairs.diverged[0],
           "n_diverged_b": pairs.diverged[1], "n_fewer": int((pairs.high < 1).sum()),
           "n_more": int((pairs.low > 1).sum()), "n_same": int(((pairs.low == 1) & (pairs.high == 1)).sum())}
    row["n_open"] = n - row["n_fewer"] - row["n_more"] - row["n_same"]
    row["share_fewer"] = row["n_fewer"] / n if n else math.nan
    if not n:
        return {**row, **{k: math.nan for k in ("ratio_low", "ratio_high", "ci_low", "ci_high")}}
    ci = interval(*bootstrap(pairs, resamples, seed))
    median = censored_median(pairs.low, pairs.high)
    return {**row, "ratio_low": median[0], "ratio_high": median[1], "ci_low": ci[0], "ci_high": ci[1]}


def bootstrap(pairs: Pairs, resamples: int = RESAMPLES, seed: int = SEED) -> tuple[np.ndarray, np.ndarray]:
    """The censored median's two ends over resamples: studies drawn with replacement, then within each drawn
    study its draws with replacement (scipy.stats.bootstrap resamples one level only)."""
    rng = np.random.default_rng(seed)
    studies = [np.flatnonzero(pairs.study == s) for s in dict.fromkeys(pairs.study)]
    low, high = np.empty(resamples), np.empty(resamples)
    for i in range(resamples):
        chosen = rng.integers(len(studies), size=len(studies))
        index = np.concatenate([rng.choice(studies[c], size=len(studies[c])) for c in chosen])
        low[i], high[i] = censored_median(pairs.low[index], pairs.high[index])
    return low, high


def best_of_k(outcomes: np.ndarray, ks: list[int], resamples: int = RESAMPLES,
              seed: int = SEED) -> pd.DataFrame:
    """The median of the best (fewest) fresh examples to target among k trials drawn from a condition's trials,
    for each k (Dodge et al. 2019, "Show your work", with the median where they take the mean: a trial that
    never reaches the target makes the mean infinite). Pruned trials count as never reaching it, so the curve
    is an upper bound. A 90% interval from a bootstrap over the trials."""
    rows = []
    rng = np.random.default_rng(seed)
    values = np.sort(np.asarray(outcomes, float))
    samples = [np.sort(rng.choice(values, size=len(values))) for _ in range(resamples)] if len(values) else []
    for k in ks:
        ci = interval(np.array([_median_best(s, k) for s in samples]))
        rows.append({"k": k, "median_best": _median_best(values, k), "ci_low": ci[0], "ci_high": ci[1]})
    return pd.DataFrame(rows)


def _median_best(sorted_values: np.ndarray, k: int) -> float:
    """The smallest v with P(min of k draws <= v) >= 1/2, draws with replacement from the values."""
    n = len(sorted_values)
    if not n:
        return math.nan
    cdf = np.arange(1, n + 1) / n  # P(one draw <= sorted_values[i])
    best = 1 - (1 - cdf) ** k
    return float(sorted_values[int(np.argmax(best >= 0.5))])
