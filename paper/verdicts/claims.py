"""The paper's claims, each a set of comparisons on committed runs, and the verdict rules (docs/protocol.md,
"Verdicts") that decide them. No verdict is written by hand: :func:`judge` applies the rules to the numbers.

Kinds of comparison:

- ``fewer``: the first condition needs fewer fresh examples to target than the second, draw by draw
  (stats.py): the effect is the median paired ratio (first over second, below 1 = fewer);
- ``interaction``: one paired ratio falls below another on the same draws (batch echoing's ratio to its
  baseline at a large batch over the same at a small batch): the effect is their ratio, below 1 = the claim;
- ``faster``: seconds to target, each study's best trial timed alone, as a speedup (reference seconds over
  the condition's, above 1 = faster); ``paper`` is the paper's speedup where it states one;
- ``no_loss``: the best metric within the budget, the paired difference (first minus second, in the
  metric's better direction); the paper found no loss.
"""

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Optional

import pandas as pd

INCONCLUSIVE, REPRODUCED, NOT_REPRODUCED = "inconclusive", "reproduced", "not reproduced"
# Against a number the paper publishes (C3's 3.25x), the interval's place beside it, never "reproduced":
# its low end above the number, the number inside it, its high end below.
AT_LEAST, CONSISTENT, BELOW = "at least", "consistent with", "below"
# A comparison of something the paper does not say (``Comparison.ours``): what the rows found, as ours.
OURS_FEWER, OURS_NONE = "ours: fewer", "ours: no saving"
# The smallest saving the paper's "fewer" and "faster" claims mean: an interval that excludes a 10% saving
# refutes them. Written down before the data (docs/protocol.md).
MIN_SAVING = 0.10
# A loss of the best metric smaller than this share of its value is no loss (docs/protocol.md).
NO_LOSS_TOLERANCE = 0.01
# Fewer draws than this (pairs where a condition reached the target; studies for seconds) decide nothing.
MIN_DRAWS = 5
# An effect smaller than this many evaluations is no finding on its own; a "no difference" needs evaluations
# at least this fine (the reference's fresh examples to target over the cadence) to be seen.
MIN_EVALUATIONS = 2
RESOLUTION = 40


@dataclass(frozen=True)
class Condition:
    """Trials of one condition in a results folder: placement and factor (and batch size, echo shuffle), or the
    autopilot at a placement."""

    placement: str
    echo_factor: Optional[float] = 2.0  # with auto: its cap, None for any
    batch_size: Optional[int] = None
    shuffle_buffer: Optional[int] = None
    label: str = ""
    auto: bool = False  # the autopilot at this placement (echo.factor=auto)
    cap_rule: str = "fixed"  # with auto: what set its cap (echo.cap): a rule's runs are never pooled with another's

    def rows(self, table: pd.DataFrame) -> pd.Series:
        """Which rows of a table with the condition columns (report/tables.py's CONDITION) are this condition's:
        its placement, the autopilot or not and what set its cap, its factor (the autopilot's: its cap, in
        echo_max_factor, where a fixed factor's is its factor), batch size and echo shuffle where given."""
        keep = ((table["placement"] == self.placement) & (table["echo_auto"].astype(bool) == self.auto)
                & (table["echo_cap_rule"] == self.cap_rule))
        if self.echo_factor is not None:
            keep &= table["echo_max_factor"] == self.echo_factor
        if self.batch_size is not None:
            keep &= table["batch_size"] == self.batch_size
        if self.shuffle_buffer is not None and self.placement != "none":
            keep &= table["shuffle_buffer"] == self.shuffle_buffer
        return keep

    def __str__(self) -> str:
        if self.label:
            return self.label
        text = "baseline" if self.placement == "none" else f"{self.placement} e={self.echo_factor:g}"
        text += f", batch {self.batch_size}" if self.batch_size else ""
        return text + (f", shuffle {self.shuffle_buffer}" if self.shuffle_buffer is not None else "")


BASELINE = Condition("none", 1.0)


@dataclass(frozen=True)
class Successor:
    """A sweep planned to replace a comparison's folder (a finer cadence, more studies): the reporter measures
    the comparison on it once it has runs and, until then, says in the row that it is not run and where its
    cost is written (:func:`planned`)."""

    folder: str
    # What else the successor changes in its item, as (field, value) pairs: a check run again with a fixed factor
    # its predecessor never timed compares with it too (A5 on the Intel Xeon, docs/protocol.md).
    changes: tuple[tuple[str, object], ...] = ()

    def in_force(self, results: Path) -> bool:
        """Whether it replaces its predecessor now: from its first committed run."""
        return (results / self.folder / "runs").is_dir()

    def pending(self) -> str:
        """What its predecessor's row says until then."""
        return f"planned sweep {self.folder.split('/')[0]} not run: {planned(self.folder)}"


def current(item, results: Path):
    """``item`` (a Comparison or an autopilot Check: a folder and its successor) on its successor's folder once
    that replaces it, else as it is."""
    if item.successor and item.successor.in_force(results):
        return replace(item, folder=item.successor.folder, successor=None, **dict(item.successor.changes))
    return item


def planned(folder: str) -> str:
    """Where a results folder's sweep, not run yet, is planned: its preset's header, which estimates its hours
    before it runs (the folder is named ``<preset>[-<variant>]/<workload>``, results/README.md)."""
    preset = folder.split("/")[0].split("-")[0]
    return f"conf/experiment/{preset}.yaml estimates its hours"


@dataclass(frozen=True)
class Comparison:
    folder: str  # results/<preset>/<workload>
    kind: str  # fewer, interaction, faster, no_loss
    a: Condition
    b: Condition = BASELINE
    # interaction: a/b here over c/d (the same draws)
    c: Optional[Condition] = None
    d: Optional[Condition] = None
    paper: Optional[float] = None  # the paper's value where it states one (faster: its speedup)
    short: str = ""  # the README's name for it (where the conditions' own would be long)
    successor: Optional[Successor] = None
    part: str = ""  # a part of its claim, given a README row of its own ("" the claim's main row)
    ours: bool = False  # a comparison the paper does not make: a finding of ours, never "(not) reproduced"

    @property
    def name(self) -> str:
        if self.kind == "interaction":
            return f"({self.a} / {self.b}) / ({self.c} / {self.d})"
        return f"{self.a} vs {self.b}" + (f", reaching {self.paper:g}x" if self.kind == "faster" and self.paper else "")


@dataclass(frozen=True)
class Claim:
    id: str
    statement: str  # the paper's, in a few words
    source: str  # where the paper shows it
    comparisons: list[Comparison] = field(default_factory=list)
    quote: str = ""  # the paper's own words for it (its section title, and its sentence where it has one)


def _fig3(folder: str, augments: bool,
          successor: Optional[Successor] = None) -> tuple[list[Comparison], list[Comparison]]:
    """C1 and C2's comparisons in one placements folder."""
    if augments:
        points = ["before_augmentation", "after_augmentation", "after_batching"]
        pairs = [("before_augmentation", "after_augmentation"), ("after_augmentation", "after_batching")]
    else:
        points = ["before_batching", "after_batching"]
        pairs = [("before_batching", "after_batching")]
    return ([Comparison(folder, "fewer", Condition(p), successor=successor) for p in points],
            [Comparison(folder, "fewer", Condition(a), Condition(b), successor=successor) for a, b in pairs])


FASHION = "placements_e2_fine_cpu/fashion_mnist"
SSD = "placements_e2_cpu/ssd_fashion"
LM = "lm_placements_e2_cpu/transformer_pydocs"
# ssd_fashion's first sweep evaluates every 6,400 fresh examples, 12 evaluations to the baseline's target.
SSD_FINE = Successor("ssd_placements_e2_fine_cpu/ssd_fashion")
# The language model's C1, C2 and C4 at 1/40 of the baseline's fresh sequences to target, 5 studies (the first
# sweeps evaluated 11-29 times to it, 3 studies).
LM_FINE = Successor("lm_fine_cpu/transformer_pydocs")
# Batch echoing e=8 over e=4 again at twice that cadence: lm_fine_cpu's e=4 reaches at 30 evaluations.
LM_BATCH_FINE = Successor("lm_batch_echo_fine_cpu/transformer_pydocs")
_c1 = {f: _fig3(f, augments, successor)
       for f, augments, successor in ((FASHION, True, None), (SSD, True, SSD_FINE), (LM, False, LM_FINE))}
_factor = "lm_echo_factor_sweep_cpu/transformer_pydocs"
_batch = "lm_batch_size_sweep_cpu/transformer_pydocs"
_shuffle = "lm_shuffle_buffer_sweep_cpu/transformer_pydocs"
# The paper's mechanisms where the first sweeps lacked them: one echo shuffle at every batch size (Fig. 6's
# example echoing) and batch-echo buffers shorter than the run (Fig. 7).
_fixed_shuffle = "lm_batch_size_fixed_shuffle_cpu/transformer_pydocs"
_short_buffers = "lm_batch_echo_buffers_cpu/transformer_pydocs"
# C5's three rows again at 1/40 of the coarsest condition's count, 5 studies, each on one CPU model (the fixed
# shuffle's had 16 evaluations and 3 studies; batch echoing's, runs that name no CPU model), sharing baselines.
BATCH_SIZE_FINE = Successor("lm_batch_size_fine_cpu/transformer_pydocs")
# C6's 1,024/0 rows on runs that name their CPU model; batch echoing at batch 4, where the runs are long
# enough for a 1,024-batch buffer to hold the effective factor near 2 (docs/protocol.md, "C5, C6 and C7 again").
SHUFFLE_FINE = Successor("lm_shuffle_buffer_fine_cpu/transformer_pydocs")
# fashion_mnist's Table 2 again, on runs that name their CPU model.
FIXED_FASHION = Successor("fixed_budget_cpu-rerun/fashion_mnist")
# 6 of its 36 runs were made on a machine that recorded no CPU model: the rest cannot be added to them.
FIXED_LM = Successor("fixed_budget_cpu-rerun/transformer_pydocs")
_wall = "wall_clock_cpu/fashion_mnist"
# Its 3 studies are too few for seconds (MIN_DRAWS), and studies from another CPU model cannot be added to them.
WALL_5 = Successor("wall_clock_5_studies_cpu/fashion_mnist")


def _timed(folder: str, placement: str, successor: Optional[Successor] = None) -> list[Comparison]:
    """C3's comparisons in one wall-clock folder: each factor against the baseline, e=5 against the paper's
    3.25x, and each factor over the one below (its own README row)."""
    def at(e: float) -> Condition:
        return Condition(placement, e)
    return ([Comparison(folder, "faster", at(e), short=f"e={e:g}", successor=successor) for e in (2.0, 3.0, 4.0, 5.0)]
            + [Comparison(folder, "faster", at(5.0), paper=3.25, short="e=5 vs the paper's 3.25x",
                          successor=successor, part="against the paper's number")]
            # Falling with e, step by step: each factor's seconds against the next lower one's, study by study.
            + [Comparison(folder, "faster", at(hi), at(lo), short=f"e={hi:g} over e={lo:g}", successor=successor,
                          part="each factor over the one below") for lo, hi in ((2.0, 3.0), (3.0, 4.0), (4.0, 5.0))])


def _at_batch(batch: int, placement: str = "after_batching") -> tuple[Condition, Condition]:
    """e=2 at ``placement`` and its baseline, both at ``batch``."""
    return Condition(placement, 2.0, batch), Condition("none", 1.0, batch)


CLAIMS = [
    Claim("C1", "echoing at e=2 needs fewer fresh examples than the baseline", "Fig. 3",
          [c for f in _c1 for c in _c1[f][0]],
          quote="§4.1: \"In all but one case, data echoing requires strictly fewer fresh examples than the "
                "baseline to reach the target out-of-sample performance\" (the exception: batch echoing on ResNet-50)"),
    Claim("C2", "before augmentation beats after; example echoing beats batch echoing", "Fig. 3",
          [c for f in _c1 for c in _c1[f][1]],
          quote="§4.1, as it describes Fig. 3: echoing before augmentation is generally more efficient than after it, "
                "and example echoing generally beats unshuffled batch echoing"),
    # Faster at each e, and at e=5 as fast as the paper's 3.25x: two claims, refuted apart.
    # On the language model, lm_fine_cpu's study-best trials of example echoing timed alone on a slow store
    # (retime --store; its preset's header says which and the hours).
    Claim("C3", "seconds to target fall with e, 3.25x at e=5 with R near 6", "Fig. 4",
          _timed(_wall, "before_augmentation", WALL_5) + _timed(LM_FINE.folder, "before_batching"),
          quote="§4.2: \"Data echoing provides a significant speedup for all echoing factors, up to a speedup factor "
                "of 3.25 for echoing factor 5\" (ResNet-50 on ImageNet read over a network, R about 6)"),
    Claim("C4", "the language model keeps gaining up to e of about 4-8", "Fig. 5",
          [Comparison(_factor, "fewer", Condition(p, hi), Condition(p, lo), short=f"{name} e={hi:g}/{lo:g}",
                      successor=LM_FINE, ours=name == "batch")
           for p, name in (("before_batching", "example"), ("after_batching", "batch"))
           for lo, hi in ((2.0, 4.0), (4.0, 8.0)) if (name, hi) != ("batch", 8.0)]
          # Fig. 5 shows one variant's curve; that batch echoing keeps gaining the paper does not say: ours.
          + [Comparison(LM_FINE.folder, "fewer", Condition("after_batching", 8.0), Condition("after_batching", 4.0),
                        short="batch e=8/4", successor=LM_BATCH_FINE, ours=True)],
          quote="§4.3, \"Data echoing can be useful up to a reasonable upper bound on the echoing factor\": on the "
                "Transformer on LM1B the best factor lies between 4 and 8, and e = 16 still beats the baseline"),
    Claim("C5", "batch echoing gains more at larger batch sizes; example echoing, at a fixed shuffle buffer, less",
          "Fig. 6",
          [Comparison(_batch, "interaction", *_at_batch(big), *_at_batch(small),
                      short=f"batch, batch {big}/{small}", successor=BATCH_SIZE_FINE)
           for big, small in ((128, 16), (64, 32))]
          # Below 1: example echoing's ratio to its baseline is lower (it gains more) at the smaller batch.
          + [Comparison(_fixed_shuffle, "interaction", *_at_batch(16, "before_batching"),
                        *_at_batch(128, "before_batching"),
                        short="example, fixed shuffle, batch 16/128", successor=BATCH_SIZE_FINE)],
          quote="§4.4, \"Data echoing as batch size increases\": as the batch size grows batch echoing improves "
                "relative to the baseline, and example echoing can get worse unless more shuffling lowers the "
                "duplicates in a batch"),
    Claim("C6", "a larger shuffle buffer after the echo stage helps", "Fig. 7",
          [Comparison(_shuffle, "fewer", Condition(p, 2.0, shuffle_buffer=1024), Condition(p, 2.0, shuffle_buffer=0),
                      short=f"{name}, buffer 1024/0", successor=SHUFFLE_FINE)
           for p, name in (("before_batching", "example"), ("after_batching", "batch"))]
          + [Comparison(_short_buffers, "fewer", Condition("after_batching", 2.0, shuffle_buffer=128),
                        Condition("after_batching", 2.0, shuffle_buffer=0), short="batch, buffer 128/0")],
          quote="§4.5, \"Data echoing performs better with more shuffling\": larger buffers after the echo stage "
                "improve both batch and example echoing"),
    Claim("C7", "echoing loses nothing of the best metric at a fixed fresh-example budget", "Table 2",
          [Comparison("fixed_budget_cpu/fashion_mnist", "no_loss", Condition("before_augmentation"),
                      successor=FIXED_FASHION),
           Comparison("fixed_budget_cpu/transformer_pydocs", "no_loss", Condition("before_batching"),
                      successor=FIXED_LM)],
          quote="§4.6, \"Data echoing does not harm predictive performance\": at a fixed budget of fresh examples "
                "the best validation metric with echoing is no worse (Transformer on LM1B, ResNet-50 on ImageNet)"),
]


def judge(kind: str, effect: dict, paper: Optional[float] = None) -> tuple[str, str]:
    """(verdict, reason) for one comparison's numbers, by the written rules. ``effect`` holds ``low``,
    ``high`` (the effect's bounds), ``ci_low``, ``ci_high`` (its 90% interval), ``n_draws``, the flags
    ``unfinished``, ``off_factor`` and ``machines``, and for fresh-example effects ``evaluations`` (the effect's
    size in evaluations) and ``resolution`` (evaluations in the reference's fresh examples to target)."""
    if effect.get("unfinished"):
        return INCONCLUSIVE, f"not yet a result: {effect['unfinished']}"
    if effect.get("machines"):
        return INCONCLUSIVE, f"mixed machines: a study's runs come from several CPU models ({effect['machines']})"
    if effect.get("off_factor"):
        return INCONCLUSIVE, f"confounded: {effect['off_factor']}"
    if kind == "faster" and not effect["n_draws"]:
        return INCONCLUSIVE, ("not timed: no study's best trials were run alone (python -m paper.retime, "
                              "docs/operations.md)")
    if effect["n_draws"] < MIN_DRAWS:
        return INCONCLUSIVE, f"too few draws: {effect['n_draws']}, at least {MIN_DRAWS} decide"
    lo, hi = effect["ci_low"], effect["ci_high"]
    if kind in ("fewer", "interaction"):
        return _studies_agree(effect, *_fewer(effect, lo, hi))
    if kind == "faster":
        return _faster(effect, lo, hi, paper)
    tolerance = effect["tolerance"]
    if lo > -tolerance:
        return REPRODUCED, f"the interval lies above a loss of {tolerance:.3g}"
    if hi < -tolerance:
        return NOT_REPRODUCED, f"the interval lies below a loss of {tolerance:.3g}"
    return INCONCLUSIVE, _would_decide(effect, -tolerance)


def _faster(effect: dict, lo: float, hi: float, paper: Optional[float]) -> tuple[str, str]:
    """Faster at all (the interval above 1), or as fast as the paper's stated speedup (it reaches it); either is
    refuted only where the fresh-example counts the seconds rest on were fine enough (Resolution)."""
    coarse = effect["resolution"] < RESOLUTION
    if paper is not None:
        return _against_the_paper(lo, hi, paper)
    if lo > 1:
        return REPRODUCED, "the interval lies above 1"
    if hi < 1 + MIN_SAVING and not coarse:
        return NOT_REPRODUCED, f"the interval excludes a {MIN_SAVING:.0%} speedup"
    if hi < 1 + MIN_SAVING:
        return INCONCLUSIVE, (f"too coarse: no speedup seen, but at {effect['resolution']:.0f} evaluations to the "
                              f"reference's target (at least {RESOLUTION} needed) a smaller one cannot be")
    return INCONCLUSIVE, _would_decide(effect, 1.0)


def _against_the_paper(lo: float, hi: float, paper: float) -> tuple[str, str]:
    """Where the interval lies beside the paper's number: a published magnitude is met "at least", is "consistent
    with" the interval, or lies above it ("below"); a row of it is never "reproduced" (docs/protocol.md)."""
    if lo > paper:
        return AT_LEAST, f"the interval lies above the paper's {paper:g}x"
    if hi < paper:
        return BELOW, f"the interval lies below the paper's {paper:g}x"
    return CONSISTENT, f"the interval holds the paper's {paper:g}x"


def ours(verdict: str) -> str:
    """A comparison the paper does not make, said as what it found (``Comparison.ours``)."""
    return {REPRODUCED: OURS_FEWER, NOT_REPRODUCED: OURS_NONE}.get(verdict, verdict)


def _studies_agree(effect: dict, verdict: str, reason: str) -> tuple[str, str]:
    """A paired effect with fewer than MIN_DRAWS studies reproduces a claim only where every study's study-best
    ratio points its way (with so few studies the bootstrap's interval covers less than it says); with more, a
    study that points the other way is said."""
    against, studies = effect.get("n_studies_against", 0), effect.get("n_studies", 0)
    if verdict != REPRODUCED or not against:
        return verdict, reason
    said = f"{against} of {studies} studies' study-best ratios point the other way"
    if studies < MIN_DRAWS:
        return INCONCLUSIVE, f"studies disagree: {said}"
    return verdict, f"{reason}; {said}"


def _fewer(effect: dict, lo: float, hi: float) -> tuple[str, str]:
    if hi < 1 and effect["evaluations"] >= MIN_EVALUATIONS:
        return REPRODUCED, "the interval lies below 1"
    if hi < 1:
        return INCONCLUSIVE, (f"under {MIN_EVALUATIONS} evaluations: below 1 by {effect['evaluations']:.2f} "
                              "evaluations")
    if lo > 1 - MIN_SAVING and effect["resolution"] >= RESOLUTION:
        return NOT_REPRODUCED, f"the interval excludes a saving of {MIN_SAVING:.0%}"
    if lo > 1 - MIN_SAVING:
        return INCONCLUSIVE, (f"too coarse: no saving seen, but at {effect['resolution']:.0f} evaluations to the "
                              f"reference's target (at least {RESOLUTION} needed) a smaller one cannot be")
    return INCONCLUSIVE, _would_decide(effect, 1.0)


def _would_decide(effect: dict, edge: float) -> str:
    """What resolution would decide: the interval spans ``edge``; halving its width takes about 4x the draws."""
    lo, hi, n = effect["ci_low"], effect["ci_high"], effect["n_draws"]
    return (f"interval spans {edge:g}: [{lo:.3g}, {hi:.3g}]; about {4 * n} draws (4x these {n}) would halve "
            "its width")
