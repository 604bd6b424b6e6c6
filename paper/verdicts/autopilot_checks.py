"""The autopilot's checks (docs/protocol.md, "The autopilot's checks"): what ``echo.factor=auto`` promises,
measured on the ``autopilot_cpu`` sweeps by rules written before their runs. No verdict is written by hand.

- ``within``: each study's best trial (best by fresh examples to target, as every tuned comparison picks it)
  gives a condition's seconds to target in that study; per study, the candidate's over the fastest reference's,
  the fastest (the one it is hardest to beat: the highest median ratio) chosen on the other studies, so that a
  study's own timing noise does not pick the reference it is held against. Every ratio sets two runs of one
  study, so of one machine, against each other; every trial of these sweeps runs alone, so its seconds are a
  timing. The median of those ratios is set against ``limit`` with the timing band of the runs' CPU model
  (timing_band.py): met at most limit / band, not met above limit x band, inconclusive between; the ratios' range
  and how many studies are within the limit are shown beside it.
- ``echoes``: examples trained per fresh example at the target, in every reached trial of the candidate,
  below ``limit``.
- ``window`` (A6, A7): fresh examples to target, the candidate's over one fixed factor's, paired over the shared
  draws as every "fewer" comparison (evidence.fewer, claims.judge's interval). Its copies cost worth (not met) when
  the interval lies above 1 with its lower end at least MIN_EVALUATIONS evaluations of the reference's count beyond
  it; no worth that matters (met) when the interval lies below ``limit`` with the reference's count at least
  RESOLUTION evaluations; inconclusive otherwise, and when the candidate's median effective factor to the target is
  below ``min_factor`` (it did not echo at its cap, so its copies were not what was compared).

Beside every check, a diagnostic that decides nothing: the candidate's seconds of training per fresh example over
no echoing's in the same folder. An echoed step is free only where it runs beside the input; on a CPU-only host it
shares the cores with the input pipeline, and this ratio shows what the copies cost the input there.

A check decides nothing (inconclusive) while a condition is not yet a result, when a study's runs come from
several CPU models, when a study's best trial has no timing, or when no timing band was measured on its runs' CPU
model; it is "not measured" while its folder has no runs.
"""

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np
import pandas as pd

from echo_experiments.core.machine import short_cpu
from echo_experiments.report import tables
from echo_experiments.report.markdown import table
from paper.verdicts import evidence
from paper.verdicts.claims import (
    BASELINE,
    MIN_EVALUATIONS,
    RESOLUTION,
    Comparison,
    Condition,
    Successor,
    current,
    planned,
)
from paper.verdicts.folders import committed_folders, link_targets, report_link, results_trials
from paper.verdicts.timing_band import Band, folder_widths, merged

MET, NOT_MET, INCONCLUSIVE, NOT_MEASURED = "met", "not met", "inconclusive", "not measured"
AUTO = Condition("after_batching", None, label="auto", auto=True)  # at whatever cap its sweep set


def fixed(placement: str, *factors: float) -> tuple[Condition, ...]:
    """No echoing and the fixed factors at ``placement``: the references a check holds the autopilot against."""
    return (BASELINE, *(Condition(placement, e, label=f"e={e:g}") for e in factors))


# Every fixed factor of the sweeps, e = 1 (no echoing) among them: the autopilot is checked against whichever
# was fastest, not against echoing alone.
STATIC = fixed("after_batching", 2.0, 4.0, 6.0)
BEGIN, END = "<!-- autopilot:begin (made by make figures from results/autopilot.csv) -->", "<!-- autopilot:end -->"

LOCAL_INTEL = Successor("autopilot_cpu-local_intel/fashion_mnist")
# A5 again on the Intel Xeon, where timing_band_cpu measured a band, with e = 8 (the factor nearest its R) timed;
# e = 2 and 3, slower than e = 5 in every study of the AMD EPYC's runs, are not timed again (docs/protocol.md).
A5_INTEL = Successor("lm_fine_cpu-intel/transformer_pydocs",
                     changes=(("references", fixed("before_batching", 4.0, 5.0, 8.0)),))


@dataclass(frozen=True)
class Check:
    id: str
    statement: str
    folder: str  # results/<sweep>/<workload>
    kind: str  # within, echoes, window
    limit: float
    candidate: Condition = AUTO
    references: tuple[Condition, ...] = STATIC
    min_factor: float = 0.0  # window: the candidate's median effective factor below which nothing is decided
    # within: a second limit, on the candidate over no echoing's seconds alone, which must be met too (A5)
    over_baseline: Optional[float] = None
    shown_before_runs: bool = True  # False: no row until the candidate has runs (its rule says so: A5)
    successor: Optional[Successor] = None  # its runs again on another CPU model, deciding alone once committed


CHECKS = [
    Check("A1", "on the slow store (R about 6), at most 1.1x the seconds of the best fixed factor (e = 1 among "
          "them)",
          "autopilot_cpu/fashion_mnist", "within", 1.1),
    Check("A2", "under drift, faster than every fixed factor (e = 1 among them)",
          "autopilot_cpu-drift/fashion_mnist", "within", 1.0),
    # A3 and A4 again on the Intel Xeon, whose timing band timing_band_cpu measures (docs/protocol.md)
    Check("A3", "where the input is not the bottleneck, it echoes almost nothing (below 1.1 per fresh example)",
          "autopilot_cpu-local/fashion_mnist", "echoes", 1.1, successor=LOCAL_INTEL),
    Check("A4", "where the input is not the bottleneck, no slower than the baseline",
          "autopilot_cpu-local/fashion_mnist", "within", 1.0, references=(BASELINE,), successor=LOCAL_INTEL),
    # Where copies pay: the language model's example echoing on a slow store, the fixed factors' seconds being C3's
    # timed study-best trials in the same folder; the autopilot's own trials run there alone (lm_fine_cpu.yaml).
    Check("A5", "where copies pay, no slower than the fastest fixed factor (e = 1 among them) and at least 1.5x "
          "faster than no echoing",
          "lm_fine_cpu/transformer_pydocs", "within", 1.0,
          Condition("before_batching", 8.0, label="auto, cap 8", auto=True),
          fixed("before_batching", 2.0, 3.0, 4.0, 5.0),
          over_baseline=1 / 1.5, shown_before_runs=False, successor=A5_INTEL),
    # A2 where copies pay: the language model's example echoing on a store that alternates slow and keeping-up spans;
    # the fixed factors are lm_fine_cpu's study-best trials timed on it, the autopilot's trials run there alone.
    Check("A8", "under drift where copies pay, faster than every fixed factor (e = 1, 2, 4, 8)",
          "autopilot_drift_lm_cpu/transformer_pydocs", "within", 1.0,
          Condition("before_batching", 8.0, label="auto, cap 8", auto=True),
          fixed("before_batching", 2.0, 4.0, 8.0),
          shown_before_runs=False),
    Check("A6", "where copies pay, its copies from the 4 newest batches are worth a fixed factor's shuffled "
          "ones: fresh examples to target below 1.1x e = 2's",
          "autopilot_window_cpu/transformer_pydocs", "window", 1.1,
          Condition("before_batching", 2.0, label="auto, cap 2", auto=True),
          (Condition("before_batching", 2.0, label="e=2"),), min_factor=1.8),
    # A6's comparison again, A6's copies having cost worth: the autopilot drawing its example copies from a pool as
    # deep as a fixed factor's echo shuffle at its cap (autopilot.ExampleCopies); fixed e = 2's runs are A6's.
    Check("A7", "where copies pay, its copies drawn from a pool as deep as a fixed factor's echo shuffle are worth "
          "that factor's: fresh examples to target below 1.1x e = 2's",
          "autopilot_window_cpu-pool/transformer_pydocs", "window", 1.1,
          Condition("before_batching", 2.0, label="auto, cap 2", auto=True),
          (Condition("before_batching", 2.0, label="e=2"),), min_factor=1.8),
]


def in_force(results: Path, checks: Optional[list[Check]] = None) -> list[Check]:
    """``checks`` (every check by default), each on its successor's folder once that has committed runs."""
    return [current(c, results) for c in (CHECKS if checks is None else checks)]


COLUMNS = ["check", "statement", "candidate", "reference", "effect", "range_min", "range_max", "n_studies",
           "input_ratio_min", "input_ratio_max", "pace", "band", "band_from", "verdict", "reason", "caution",
           "evidence"]


def measure(results: Path, checks: Optional[list[Check]] = None,
            bands: Optional[dict[str, float]] = None) -> pd.DataFrame:
    """One row per check, with its verdict; ``bands``: the timing band per CPU model (None: timing_band.py's, from
    every committed folder's runs but the check's own, a folder made only to time such pairs among them)."""
    checks = in_force(results, checks)
    rows, read = [], results_trials(results, [check.folder for check in checks])
    given = None if bands is None else {cpu: Band(width, ("given",)) for cpu, width in bands.items()}
    widths = {}
    if given is None:
        read_too = results_trials(results, [f for f in committed_folders(results) if f not in read])
        widths = {folder: folder_widths(trials) for folder, trials in {**read, **read_too}.items()}
    for check in checks:
        trials = read[check.folder]
        if not check.shown_before_runs and (trials is None or evidence.select(trials, check.candidate).empty):
            continue
        # never from the check's own runs: a band measured on them would widen or narrow with what it judges
        own = given or merged({f: w for f, w in widths.items() if f != check.folder})
        head = {"check": check.id, "statement": check.statement, "candidate": str(check.candidate),
                "evidence": check.folder}
        if trials is None or trials.empty:
            rows.append({**head, "verdict": NOT_MEASURED,
                         "reason": f"no runs in results/{check.folder} ({planned(check.folder)})"})
        else:
            if check.kind == "within":
                measured = _within(trials, check, own) if check.over_baseline is None else _both(trials, check, own)
            else:
                measured = _echoes(trials, check) if check.kind == "echoes" else _window(trials, check)
            regime = _input_ratio(trials)
            rows.append({**head, **regime, "pace": _pace(trials, check.candidate), **measured,
                         "caution": _caution(check, trials, regime["input_ratio_min"])})
        if check.successor:  # not yet in force
            rows[-1]["caution"] = "; ".join(filter(None, [rows[-1].get("caution"), check.successor.pending()]))
    table = pd.DataFrame(rows, columns=COLUMNS)
    return table.assign(link=[report_link(results, f) for f in table["evidence"]])


def _input_ratio(trials: pd.DataFrame) -> dict:
    """The regime a check ran in: R (tables.input_ratios), each study's median over its runs that had the machine
    to themselves (those whose seconds count; over all its runs where none did); the lowest and highest study's.
    The slow store is built for R about 6, and R moves with the machine's step time and load, so a check shows the
    R it was measured at, on the folder's timing store (tables.timing_store): a folder whose trials were tuned on
    another store and timed on the slow one (A5's) shows the timed runs'."""
    on_store = tables.on_timing_store(trials)
    alone = tables.alone(on_store)
    runs = on_store[alone] if alone.any() else on_store
    per_study = tables.input_ratios(runs).groupby(runs["study_key"]).median()
    return {"input_ratio_min": per_study.min(), "input_ratio_max": per_study.max()}


def _caution(check: Check, trials: pd.DataFrame, input_ratio: float) -> str:
    """What a seconds check's reader must weigh beside its verdict, which it does not change: where every study's
    R lies above every fixed factor the check sets against the autopilot, and the autopilot's cap above them too,
    a lead may come from its being allowed more copies than they are, not from choosing when to copy."""
    factors = [c.echo_factor for c in check.references if c.echo_factor is not None]
    if check.kind != "within" or not check.candidate.auto or not factors or not input_ratio > max(factors):
        return ""
    cap = float(evidence.select(trials, check.candidate)["echo_max_factor"].max())
    if not cap > max(factors):
        return ""
    return (f"R (lowest study {input_ratio:.1f}) lies above every fixed factor compared (at most e={max(factors):g}) "
            f"and the cap {cap:g} above them: a lead may come from copying more than they may, not from choosing "
            "when to copy")


def _pace(trials: pd.DataFrame, candidate: Condition) -> float:
    """The candidate's seconds per fresh example over the baseline's (tables.seconds_per_fresh), each over its runs
    that had the machine to itself (timed reruns among them: A5's baseline was timed alone, tuned beside another
    job), on the folder's timing store: the speedups tables' ``pace``."""
    on_store = tables.on_timing_store(trials)
    paces = [tables.seconds_per_fresh(rows[tables.alone(rows)])
             for rows in (evidence.select(on_store, c, timed=True) for c in (candidate, BASELINE))]
    return paces[0] / paces[1]


def _undone(trials: pd.DataFrame, conditions: list[Condition]) -> Optional[str]:
    """Why a check's runs decide nothing yet, if they do not."""
    flags = evidence.flags(trials, [evidence.select(trials, c) for c in conditions], conditions)
    if flags["unfinished"]:
        return f"not yet a result: {flags['unfinished']}"
    if flags["machines"]:
        return f"mixed machines: a study's runs come from several CPU models ({flags['machines']})"
    return None


def cross_fitted(by_reference: dict[str, pd.Series]) -> tuple[pd.Series, list[str]]:
    """Per study, the candidate's ratio over the fastest reference (the highest median ratio) on the other studies
    (on its own where it is the only one): choosing it on the study itself would favour "not met", since the
    highest of several noisy medians is biased upwards. The ratios, and each study's reference."""
    studies = sorted(set().union(*(ratios.index for ratios in by_reference.values())))
    ratios, chosen = {}, []
    for study in studies:
        others = {name: r.drop(study, errors="ignore") for name, r in by_reference.items()}
        pool = others if any(len(r) for r in others.values()) else by_reference
        name = max(pool, key=lambda n: np.nan_to_num(pool[n].median(), nan=-math.inf))
        if study in by_reference[name].index:
            ratios[study] = by_reference[name][study]
            chosen.append(name)
    return pd.Series(ratios, dtype=float), chosen


def _within(trials: pd.DataFrame, check: Check, bands: dict[str, Band]) -> dict:
    conditions = [check.candidate, *check.references]
    seconds = tables.study_seconds(trials)
    per_study = {str(c): evidence.per_study_seconds(seconds, c) for c in conditions}
    candidate = per_study[str(check.candidate)]
    # NaN where a study is untimed (the check is then untimed, below) or neither condition reached the target
    ratios, chosen = cross_fitted({str(c): evidence.per_study_ratios(candidate, per_study[str(c)],
                                                                      undefined=math.nan) for c in check.references})
    reference = ", ".join(chosen) if len(set(chosen)) > 1 else "".join(chosen[:1])
    cpus = set(trials["cpu"].dropna())
    known = [bands.get(cpu) for cpu in cpus]  # every CPU model of the check needs a band: the widest applies
    band = max(b.width for b in known) if known and None not in known else math.nan
    band_from = ", ".join(sorted({f for b in known if b is not None for f in b.folders}))
    row = {"reference": reference, "effect": float(ratios.median()) if len(ratios) else math.nan,
           "range_min": ratios.min(), "range_max": ratios.max(), "n_studies": len(ratios), "band": band,
           "band_from": band_from}
    why = _undone(trials, conditions)
    if why is None and any(s.isna().any() for s in per_study.values()):
        why = "untimed: a study's best trial has no run that had the machine to itself"
    if why is None and math.isnan(band):
        why = (f"no timing band: no training bound by its compute was timed twice alone on this CPU model "
               f"outside this check's runs ({', '.join(map(short_cpu, sorted(cpus))) or 'unrecorded'})")
    if why is not None:
        return {**row, "verdict": INCONCLUSIVE, "reason": why}
    low, high, effect = check.limit / band, check.limit * band, row["effect"]
    verdict = MET if effect <= low else NOT_MET if effect > high else INCONCLUSIVE
    side = {MET: f"at most {low:.2f}", NOT_MET: f"above {high:.2f}"}.get(verdict, f"within {low:.2f}-{high:.2f}")
    meets = int((ratios <= check.limit).sum())
    return {**row, "verdict": verdict, "side": side, "meets": meets,  # side, meets: for _both's shorter reason
            "reason": f"the median is {side}, {check.limit:.3g} x/ the timing band {band:.3f}, "
                      f"each study against the others' fastest reference ({reference}); {meets} of "
                      f"{len(ratios)} studies within {check.limit:.3g}"}


def _both(trials: pd.DataFrame, check: Check, bands: dict[str, Band]) -> dict:
    """Two ``within`` checks that must both be met: against the fastest reference at ``limit``, and against no
    echoing at ``over_baseline``; not met where either is not met."""
    fastest = _within(trials, check, bands)
    baseline = _within(trials, dataclasses.replace(check, limit=check.over_baseline, references=(BASELINE,)), bands)
    verdicts = {fastest["verdict"], baseline["verdict"]}
    verdict = NOT_MET if NOT_MET in verdicts else MET if verdicts == {MET} else INCONCLUSIVE
    over = "-" if math.isnan(baseline["effect"]) else f"{baseline['effect']:.2f}"
    if "side" not in fastest or "side" not in baseline:  # undecided: the first reason why
        why = fastest["reason"] if "side" not in fastest else baseline["reason"]
        return {**fastest, "verdict": verdict, "reason": why}
    return {**fastest, "verdict": verdict,
            "reason": f"vs the fastest fixed factor: {fastest['side']}; vs no echoing: {over}, {baseline['side']} "
                      f"(limits {check.limit:.3g} and {check.over_baseline:.3g} x/ the timing band "
                      f"{fastest['band']:.3f}); {fastest['meets']} and {baseline['meets']} of {fastest['n_studies']} "
                      "studies within them"}


def _echoes(trials: pd.DataFrame, check: Check) -> dict:
    rows = evidence.select(trials, check.candidate)
    factors = evidence.trained_per_fresh(rows)
    row = {"reference": "", "effect": float(np.median(factors)) if len(factors) else math.nan,
           "range_min": factors.min(), "range_max": factors.max(), "n_studies": rows["study_key"].nunique()}
    why = _undone(trials, [check.candidate]) or (None if len(factors) else "no trial reached the target")
    if why is not None:
        return {**row, "verdict": INCONCLUSIVE, "reason": why}
    below = factors.max() < check.limit
    return {**row, "verdict": MET if below else NOT_MET,
            "reason": f"{int((factors < check.limit).sum())} of {len(factors)} reached trials trained below "
                      f"{check.limit:g} examples per fresh example"}


def _window(trials: pd.DataFrame, check: Check) -> dict:
    (reference,) = check.references
    effect = evidence.fewer(trials, Comparison(check.folder, "fewer", check.candidate, reference))
    factors = evidence.trained_per_fresh(evidence.select(trials, check.candidate))
    factor = float(np.median(factors)) if len(factors) else math.nan
    row = {"reference": str(reference), "effect": effect["low"], "range_min": effect["study_best_min"],
           "range_max": effect["study_best_max"], "n_studies": effect["n_studies"]}
    lo, hi, resolution = effect["ci_low"], effect["ci_high"], effect["resolution"]
    interval = f"the interval [{lo:.3g}, {hi:.3g}] over {effect['n_draws']} draws"
    why = _undone(trials, [check.candidate, reference])
    if not why and effect["off_factor"]:
        why = f"confounded: {effect['off_factor']}"
    if not why and math.isnan(factor):
        why = f"{check.candidate}: no trial reached the target"
    if not why and factor < check.min_factor:
        why = (f"confounded: {check.candidate} trained a median {factor:.2f} examples per fresh example at its "
               f"target, below {check.min_factor:g}")
    if why:
        return {**row, "verdict": INCONCLUSIVE, "reason": why}
    beyond = (lo - 1) * resolution  # the lower end's distance above 1, in evaluations of the reference's count
    if lo > 1 and beyond >= MIN_EVALUATIONS:
        return {**row, "verdict": NOT_MET, "reason": f"its copies cost worth: {interval} lies above 1, its lower end "
                                                     f"{beyond:.1f} evaluations beyond it"}
    if hi < check.limit and resolution >= RESOLUTION:
        return {**row, "verdict": MET, "reason": f"no worth that matters: {interval} lies below {check.limit:g}, "
                                                 f"at {resolution:.0f} evaluations to {reference}'s target"}
    return {**row, "verdict": INCONCLUSIVE,
            "reason": f"{interval}, at {resolution:.0f} evaluations to {reference}'s target, decides neither: above 1 "
                      f"by at least {MIN_EVALUATIONS} evaluations, or below {check.limit:g} at {RESOLUTION} or more"}


def readme_table(rows: pd.DataFrame, drawn: Optional[dict[str, str]] = None) -> str:
    """One row per check: what it promises, the R it ran at, the measured effect with the per-study range, what an
    echoed step cost the input (pace), the verdict, why; below it, each check's figure (``drawn``: check -> its
    path from the README) and caution."""
    out = []
    for r in rows.itertuples():
        measured = "-" if pd.isna(r.effect) else (
            f"{_ratio(r.effect)} ({_ratio(r.range_min)}-{_ratio(r.range_max)})"
            + (f" of {r.reference}" if r.reference else ""))
        ratio = "-" if pd.isna(r.input_ratio_min) else f"{r.input_ratio_min:.1f}-{r.input_ratio_max:.1f}"
        pace = "-" if pd.isna(r.pace) else f"{r.pace:.2f}"
        band = "-" if pd.isna(r.band) else f"x/ {r.band:.3f} ({r.band_from})"
        out.append({"check": f"{r.check}: {r.statement}", "R (per study)": ratio,
                    "measured: median (range over studies or trials)": measured,
                    "seconds per fresh example, over no echoing's": pace, "timing band (pairs from)": band,
                    "verdict": r.verdict, "why": r.reason, "evidence": r.link})
    said = [f"{r.check}: {r.caution}." for r in rows.itertuples() if isinstance(r.caution, str) and r.caution]
    shown = [f"[{check}]({path})" for check, path in (drawn or {}).items()]
    below = ([f"What the autopilot chose as it trained, beside its store: {', '.join(shown)}."] if shown else []) + (
        [f"Cautions, which change no verdict. {' '.join(said)}"] if said else [])
    paragraph = " ".join(below) + "\n\n" if below else ""
    return table(pd.DataFrame(out), {}) + "\n" + paragraph + link_targets(rows["link"])


def _ratio(value: float) -> str:
    """A ratio for the README; infinite where the candidate did not reach the target and the reference did."""
    return "∞" if math.isinf(value) else f"{value:.2f}"

