"""report.md: the report's tables with what each column counts, its figures, and what it left out."""

import pandas as pd

from echo_experiments.core.machine import SHARED_CORES
from echo_experiments.report import tables
from echo_experiments.report.markdown import table, tables_within, wrap_prose
from echo_experiments.report.stats import LEVEL

COUNTS = {c: "count" for c in ("median", "min", "max")}
SECONDS = {c: "seconds" for c in ("median_seconds", "min_seconds", "max_seconds")}


def report_text(t: dict[str, pd.DataFrame], trials: pd.DataFrame, skipped: list, drawn: dict, command: str,
                notes: list[str] = (), mixed: pd.DataFrame = None, include_shared: bool = False) -> str:
    """The whole report.md from the named tables (fresh, paired, best_of_k, speed, final, bounds, partial)."""
    parts = [
        "# Data echoing report\n",
        f"Made by `{command}` from {len(trials)} complete runs ({trials['status'].value_counts().to_dict()}).\n",
        _mixed_text(mixed, trials),
        _unfinished_text(t["partial"]),
        "## Fresh examples to target\n", _fresh_text(), _table(t["fresh"], COUNTS),
        _off_factor_text(t["fresh"]),
        "## Paired comparisons: each condition against its baseline, draw by draw\n", _paired_text(),
        _table(t["paired"], {}),
        "## Seconds to target and speedup\n", _seconds_text(trials) + _shared_note(include_shared),
        _table(t["speed"], SECONDS),
        _shared_list(trials),
        "## Best metric reached (final performance)\n", _table(t["final"], {}),
        "## Best of k trials\n", _best_of_k_text(), _table(t["best_of_k"], {"median_best": "count"}),
        "## Best trials at a bound of the search space\n", _bounds_text(t["bounds"]),
    ]
    if drawn:
        parts.append("## Figures\n")
        parts += [f"![{name}](figures/{name}.png)\n" for name in drawn]
    parts += [f"- {note}\n" for note in notes]
    if skipped:
        parts.append("## Skipped run directories\n")
        parts += [f"- `{s.path}`: {s.reason}\n" for s in skipped]
    return wrap_prose("\n".join(parts))


def _table(frame: pd.DataFrame, kinds: dict[str, str]) -> str:
    """A report table, split where it is wider than a reader's screen, each part led by the condition."""
    return tables_within(frame, kinds, tables.CONDITION)


def _fresh_text() -> str:
    return ("Each condition's value is the median over studies of the study's best trial (the trial that reached "
            "the target with the fewest fresh examples); min and max are over studies. A study that never reached "
            "the target counts as not reached (infinitely many fresh examples), never as zero. n_studies counts "
            "studies and n_studies_reached those whose best trial reached the target; n_trials counts trials (runs), "
            "n_trials_reached those that reached it and n_trials_pruned those stopped once they could no longer be "
            "their study's best. fresh_ratio = this median / the baseline's (below 1: fewer fresh examples; inf: "
            "never reached; baseline: echo factor 1, same workload and batch size). effective_echo_factor: the "
            "median over reached trials of examples trained per fresh example at the target; off_factor: more "
            f"than {tables.FACTOR_TOLERANCE:.0%} off the nominal factor.\n")


def _off_factor_text(fresh: pd.DataFrame) -> str:
    off = fresh[fresh["off_factor"] & (fresh["echo_factor"] > 1)]
    if off.empty:
        return ""
    names = ", ".join(f"{r.placement} e={r.echo_factor:g} (shuffle {r.shuffle_buffer}): "
                      f"{r.effective_echo_factor:.2f}" for r in off.itertuples())
    return (f"**Not echoed at the nominal factor**: {names}. These conditions trained that many examples per fresh "
            "example by the target, so they are not measures of their nominal factor.\n")


def _paired_text() -> str:
    return ("Within a study every condition trains on the same quasi-random draws, so each draw is a pair. A "
            "trial's fresh examples to target are known to lie after the evaluation before the one that saw the "
            "target, up to that one's count, when it reached the target (docs/protocol.md: an evaluation sees the "
            "target only after it was crossed), known to exceed its count when pruned, and infinite when it "
            "diverged or spent its budget; n_fewer, n_more and n_same count "
            "the draws whose order is known, n_open those it is not, n_neither those where neither side reached the "
            "target (left out). ratio_low..ratio_high: the median of the paired ratio (this condition over the "
            "baseline) estimated with the censored draws (Turnbull); ci_low..ci_high: its "
            f"{LEVEL:.0%} bootstrap interval over studies and draws. reading: where that interval lies: below 1, "
            "fewer fresh examples to target than the baseline; above 1, more; across 1, cannot tell; a condition "
            "with fewer studies than its sweep plans (or than 3) is not yet a result (the paper's claims ask more: "
            "docs/protocol.md).\n")


def _seconds_text(trials: pd.DataFrame) -> str:
    return ("Seconds to target count everything from the first batch to the evaluation that met the target (earlier "
            "evaluations included, checkpoints not). The ideal speedup is max(1, min(e, R)), R = upstream / "
            "downstream time per step, where the runs measured it; efficiency = speedup / ideal. pace: seconds of "
            "training per fresh example over the baseline's, medians over every run that had the machine to itself "
            "(reached or not); about 1 where the input bounded the run and the copies cost it nothing, so a speedup "
            "below its ideal comes from fresh examples to target or from the pace. speedup, speedup_min and "
            "speedup_max: the median, min and max over studies of per-study pairs, each study's "
            "baseline seconds over the same study's seconds of this condition. model_seconds and model_speedup "
            "(_min, _max) are a model, not a measurement: the paper's timing model, each fresh batch costing "
            "max(upstream, e x downstream) with the study's times profiled alone, applied to the best trial's fresh "
            "examples to target, so what an accelerator host whose copies cost the input nothing would gain; a "
            "measured speedup below it is limited by the copies' cost to the input here, one at it by fresh "
            "examples to target. A study's seconds are those of its "
            "best trial (the one counted above), from a run of it that had the machine to itself: other processes "
            f"kept at most {SHARED_CORES:g} cores busy on average while it ran. A study whose best trial has no "
            "such run is untimed (n_studies_reached - n_studies_timed) and left out; no other trial stands in for "
            "it. n_runs_shared counts the runs that shared the machine (listed below), n_runs_unmeasured those made "
            f"before that was recorded ({int(trials['other_cores'].isna().sum())} here), whose seconds are not "
            "timings either.\n")


def _shared_note(include_shared: bool) -> str:
    if not include_shared:
        return ""
    return ("\n**Shared timings included** (--include-shared): these seconds come also from runs that shared the "
            "machine with other work (listed below); they are not clean timings.\n")


def _best_of_k_text() -> str:
    return ("What a tuning budget of k trials buys (Dodge et al. 2019, with the median where they take the mean): "
            "median_best is the median of the fewest fresh examples to target among k trials drawn from the "
            "condition's trials; trials that did not reach the target, pruned ones included, count as never "
            f"reaching it, so it is an upper bound. ci_low..ci_high: a {LEVEL:.0%} bootstrap interval.\n")


def _bounds_text(bounds: pd.DataFrame) -> str:
    counts = "; ".join(f"of the trials with the {best}, {int(g['at_bound'].sum())} of {len(g)}"
                       for best, g in bounds.groupby("best", sort=False)) or "none"
    text = (f"Tuned values of the studies' best trials within {tables.BOUND_MARGIN:.0%} of an end of their range (on "
            f"its scale): {counts}. A value there means the range should be wider; each best is checked on its "
            "own trials (the fewest fresh examples to target for the fresh-example claims, the best metric for "
            "the fixed-budget one).\n")
    return text + (table(bounds[bounds["at_bound"]], {}) if bounds["at_bound"].any() else "")


def _mixed_text(mixed, trials: pd.DataFrame) -> str:
    by_model = tables.study_machines(trials)
    text = "" if by_model.empty else (
        "**Studies from several CPU models.** Each study's conditions ran on one model, so its pairs compare "
        "conditions only; the spread between studies includes the machines' (docs/protocol.md, Machines).\n\n"
        + table(by_model, {}) + "\n")
    if mixed is None or mixed.empty:
        return text
    return text + ("**A study's runs from several CPU models** (--mixed-machines): their numbers differ from machine "
                   "to machine, so these studies mix two measurements.\n\n" + table(mixed, {}))


def _unfinished_text(partial: pd.DataFrame) -> str:
    if partial.empty:
        return (f"Every condition here has at least {tables.MIN_STUDIES} studies and all those its sweep plans, "
                "each with all the trials its search draws.\n")
    return (f"**Not yet results** ({len(partial)} conditions; unfinished.csv): a condition's value is a median "
            f"over at least {tables.MIN_STUDIES} complete studies, and over all the studies its sweep plans "
            "(docs/protocol.md); these have fewer, or studies still missing trials. Their numbers below are "
            "partial and no comparison rests on them.\n\n"
            + table(partial, {}))


def _shared_list(trials: pd.DataFrame) -> str:
    shared = tables.shared_runs(trials)
    if shared.empty:
        return ""
    return (f"Runs that shared the machine ({len(shared)}), whose seconds are not timings:\n\n"
            + table(shared[["path", "other_cores"]], {}))


