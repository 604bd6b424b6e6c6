"""Paired statistics over every trial (docs/protocol.md, "Statistics"): within a study every condition trains on
the same quasi-random draws, so two conditions are compared draw by draw.

A trial's outcome is its fresh examples to target within the budget every condition shares: an interval,
since some trials stop before they can say, and an evaluation sees the target only after it was crossed.

- reached the target at an evaluation counting x: somewhere after the evaluation before it (at p), [p + 1, x]
  (fresh counts are whole); read as exactly x where asked (``censored=False``: the reading before 2026-12-07);
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
# Enough that no interval end of the committed claim table moves with the bootstrap's seed (three seeds agree to
# the last digit at 20,000; at 2,000 an end moved by up to 0.07: tests/paper/test_verdicts.py); all resamples'
# medians are computed at once (censored_medians), about a second a comparison.
RESAMPLES = 20_000
# Best-of-k's curves are a picture, not a verdict: a tenth of that.
CURVE_RESAMPLES = 2000
SEED = 20190715  # the bootstrap's draws are fixed, so the same runs give the same tables


def outcome_bounds(trials: pd.DataFrame, censored: bool = True) -> pd.DataFrame:
    """``lo`` and ``hi`` of each trial's fresh examples to target (see the module's docstring)."""
    status = trials["status"]
    reached = status == "reached_target"
    count = trials["fresh_examples_to_target"].where(reached).astype(float)
    first = count
    if censored and "fresh_before_target" in trials:
        before = trials["fresh_before_target"].astype(float)
        first = (before + 1).where(reached & before.notna(), count)
    lo = first.where(reached, np.where(status == "pruned", trials["fresh_examples"].astype(float), INF))
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


def paired_effect(pairs: Pairs, resamples: Optional[int] = None, seed: Optional[int] = None) -> dict[str, float]:
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


def bootstrap(pairs: Pairs, resamples: Optional[int] = None, seed: Optional[int] = None
              ) -> tuple[np.ndarray, np.ndarray]:
    """The censored median's two ends over resamples: studies drawn with replacement, then within each drawn
    study its draws with replacement (scipy.stats.bootstrap resamples one level only); all resamples' medians at
    once (:func:`censored_medians`)."""
    resamples = resamples or RESAMPLES
    rng = np.random.default_rng(SEED if seed is None else seed)
    studies = [np.flatnonzero(pairs.study == s) for s in dict.fromkeys(pairs.study)]
    weights = np.empty((resamples, len(pairs)))
    for i in range(resamples):
        chosen = rng.integers(len(studies), size=len(studies))
        index = np.concatenate([rng.choice(studies[c], size=len(studies[c])) for c in chosen])
        weights[i] = np.bincount(index, minlength=len(pairs))
    return censored_medians(pairs.low, pairs.high, weights)


def censored_medians(low: np.ndarray, high: np.ndarray, weights: np.ndarray, tolerance: float = 1e-7,
                     steps: int = 1000) -> tuple[np.ndarray, np.ndarray]:
    """:func:`censored_median` of every resample, each given by its ``weights`` (how often each draw is in it), at
    once: the same Turnbull estimate on each resample's own innermost intervals, by EM on them all together."""
    if np.array_equal(low, high):
        order = np.argsort(low, kind="stable")
        cumulative = np.cumsum(weights[:, order], axis=1)
        n = cumulative[:, -1:]
        return (low[order][np.argmax(cumulative > (n - 1) // 2, axis=1)],
                low[order][np.argmax(cumulative > n // 2, axis=1)])
    with np.errstate(divide="ignore"):
        lo, hi = np.log(low), np.log(high)
    ends = Endpoints(lo, hi, weights > 0)
    inside = ((lo[:, None] <= ends.left[None, :]) & (ends.right[None, :] <= hi[:, None])).astype(float)
    p = ends.valid / ends.valid.sum(axis=1, keepdims=True)
    total, going = weights.sum(axis=1, keepdims=True), np.arange(len(weights))
    for _ in range(steps):  # self-consistency (EM), the resamples not yet settled only
        share = np.where(weights[going] > 0, weights[going] / np.maximum(p[going] @ inside.T, 1e-300), 0.0)
        updated = p[going] * (share @ inside) / total[going]
        settled = np.abs(updated - p[going]).max(axis=1) < tolerance
        p[going] = updated
        going = going[~settled]
        if not len(going):
            break
    return ends.medians(p)


class Endpoints:
    """The innermost intervals of all draws (left ends ``left``, right ends ``right``, in order) and, per resample,
    which lie in one of its own innermost intervals (``valid``) and that one's ends: a resample's innermost interval
    is a run of the full ones between two of its own ends, a left then a right, with none of its own between."""

    def __init__(self, lo: np.ndarray, hi: np.ndarray, present: np.ndarray):
        points = sorted({(x, 0) for x in lo} | {(x, 1) for x in hi})  # at a tie a left end comes first
        values, kinds = np.array([x for x, _ in points]), np.array([k for _, k in points])
        at = np.flatnonzero((kinds[:-1] == 0) & (kinds[1:] == 1))
        self.left, self.right = values[at], values[at + 1]
        index = {point: k for k, point in enumerate(points)}
        owned = np.zeros((len(lo), len(points)))  # which draws each end point belongs to
        for i, (a, b) in enumerate(zip(lo, hi)):
            owned[i, index[(a, 0)]] = owned[i, index[(b, 1)]] = 1
        active, k = (present.astype(float) @ owned) > 0, np.arange(len(points))
        before = np.maximum.accumulate(np.where(active, k, -1), axis=1)[:, at]
        after = np.minimum.accumulate(np.where(active, k, len(points))[:, ::-1], axis=1)[:, ::-1][:, at + 1]
        self.valid = ((before >= 0) & (after < len(points)) & (kinds[np.clip(before, 0, None)] == 0)
                      & (kinds[np.clip(after, None, len(points) - 1)] == 1)).astype(float)
        self.values, self.before, self.after = values, before, after

    def medians(self, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """censored_median's two ends per resample from its masses ``p`` on the full innermost intervals."""
        rows = np.arange(len(p))
        cumulative = np.cumsum(p, axis=1)
        at = np.argmax((cumulative >= 0.5 - TIE) & (self.valid > 0), axis=1)
        group = self.before[rows, at]
        last = np.where(self.before == group[:, None], np.arange(p.shape[1]), -1).max(axis=1)  # its group's end
        reached = cumulative[rows, last]
        group_mass = _group_sums(p, self.before)
        later = (np.arange(p.shape[1])[None, :] > last[:, None]) & (group_mass > TIE) & (self.valid > 0)
        tie = (np.abs(reached - 0.5) <= TIE) & later.any(axis=1)
        end = np.where(tie, np.argmax(later, axis=1), at)
        return np.exp(self.values[group]), np.exp(self.values[self.after[rows, end]])


def _group_sums(p: np.ndarray, group: np.ndarray) -> np.ndarray:
    """Each entry's group total, where a group is the entries of a row sharing a value of ``group``."""
    out = np.zeros_like(p)
    for b in range(len(p)):
        keys, inverse = np.unique(group[b], return_inverse=True)
        out[b] = np.bincount(inverse, weights=p[b], minlength=len(keys))[inverse]
    return out


def best_of_k(outcomes: np.ndarray, ks: list[int], resamples: int = CURVE_RESAMPLES,
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
