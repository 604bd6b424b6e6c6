"""Every change to the verdict rules since they were first written (2026-11-26), with its date, the data it had
seen and the verdicts it moved: results/rule_changes.csv, which the README's findings line links. The changes
before 2026-12-07 are as docs/protocol.md's "Rule changes" recorded them when they were made; the censored
reading of reached counts is judged again at every ``make figures``, each row under both readings, so its list
cannot drift from the runs."""

import pandas as pd

COLUMNS = ["date", "change", "data_seen", "claim", "workload", "comparison", "before", "after"]
CENSORED = "2026-12-07"
# (date, change, the data it had seen, [(claim or check, workload, comparison, before, after), ...]); a change that
# moved nothing has one row of dashes, so that it is listed too.
RECORDED = [
    ("2026-11-27", "a study, not a condition, runs on one CPU model", "every committed sweep",
     [("-", "-", "-", "-", "-")]),
    ("2026-12-01", "a draw says something only where a side reached and neither diverged; evaluations counted on "
     "the grid; resolution for seconds; C3 split into faster and as fast as 3.25x", "every committed sweep",
     [("C5", "transformer_pydocs", "batch echoing, batch 128/16", "reproduced", "inconclusive"),
      ("C5", "transformer_pydocs", "batch echoing, batch 64/32", "reproduced", "inconclusive"),
      ("C2", "transformer_pydocs", "example/batch", "inconclusive", "reproduced"),
      ("C3", "fashion_mnist", "e=5", "not reproduced", "reproduced"),
      ("C3", "fashion_mnist", "e=5 vs the paper's 3.25x", "not reproduced", "inconclusive")]),
    ("2026-12-02", "C3 step by step: each factor over the one below", "C3 on fashion_mnist",
     [("-", "-", "-", "-", "-")]),
    ("2026-12-02", "the autopilot's checks: the reference chosen on the other studies, a timing band per CPU model",
     "A1, A2 and A4's runs",
     [("A1", "fashion_mnist", "autopilot vs the fastest fixed factor", "not met", "inconclusive"),
      ("A2", "fashion_mnist", "autopilot vs the fastest fixed factor", "not met", "inconclusive"),
      ("A4", "fashion_mnist", "autopilot vs the baseline", "met", "inconclusive")]),
    ("2026-12-06", "a caution beneath a check whose R lies above every factor compared", "A5's runs",
     [("-", "-", "-", "-", "-")]),
    ("2026-12-07", "a comparison with the paper's published number reads at least, consistent with or below; a "
     "comparison the paper does not make is a finding of ours", "every committed sweep",
     [("C3", "transformer_pydocs", "e=5 vs the paper's 3.25x", "reproduced", "consistent with"),
      ("C3", "fashion_mnist", "e=5 vs the paper's 3.25x", "inconclusive", "below"),
      ("C4", "transformer_pydocs", "batch e=4/2", "reproduced", "ours: fewer"),
      ("C4", "transformer_pydocs", "batch e=8/4", "not reproduced", "ours: no saving")]),
    ("2026-12-07", "20,000 bootstrap resamples, not 2,000 (an interval end moved by up to 0.07 with the seed)",
     "every committed sweep", [("-", "-", "-", "-", "-")]),
    ("2026-12-07", "a timing belongs to its store; a check's band from compute-bound pairs outside its own runs",
     "A1-A7's rows and C3's",
     [("A5", "transformer_pydocs", "autopilot vs the fastest fixed factor and no echoing", "met", "inconclusive")]),
    ("2026-12-07", "a check's band from the compute-bound pairs of every committed folder but its own, not only the "
     "other checks' folders", "every committed sweep", [("-", "-", "-", "-", "-")]),
]
CENSORED_CHANGE = ("reached counts read as censored between the evaluation before and the one that saw the target",
                   "five rows re-read by an audit; no run of the sweeps begun that day")


def table(exact: pd.DataFrame, censored: pd.DataFrame) -> pd.DataFrame:
    """The recorded changes, then the censored reading's: every row whose verdict differs between the claims judged
    on exact counts (``exact``) and on censored ones (``censored``), both as claim_tables.measure gives them."""
    rows = [dict(zip(COLUMNS, (date, change, seen, *moved))) for date, change, seen, list_ in RECORDED
            for moved in list_]
    keys = ["claim", "workload", "short"]
    joined = exact[keys + ["verdict"]].merge(censored[keys + ["verdict"]], on=keys, suffixes=("_before", "_after"))
    moved = joined[joined["verdict_before"] != joined["verdict_after"]]
    rows += [dict(zip(COLUMNS, (CENSORED, *CENSORED_CHANGE, r.claim, r.workload, r.short, r.verdict_before,
                                r.verdict_after))) for r in moved.itertuples()]
    if moved.empty:
        rows.append(dict(zip(COLUMNS, (CENSORED, *CENSORED_CHANGE, "-", "-", "-", "-", "-"))))
    return pd.DataFrame(rows, columns=COLUMNS)
