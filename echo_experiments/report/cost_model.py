"""What an accelerator host would gain, under the paper's cost model, from the fresh examples the runs measured.

The paper's timing model: the input delivers a fresh batch every ``upstream`` seconds and a step takes
``downstream`` seconds beside it, so a fresh batch echoed e times costs max(upstream, e x downstream). A study's
best trial that reached its target after F fresh examples of batches of B would take
F / B x max(upstream, e x downstream) seconds there: its copies cost the input nothing, which on a CPU-only host,
where the steps share the cores with the input, they do not. Beside a measured speedup, the modelled one says
which of the two limits it: fresh examples to target (in both) or the copies' cost to the input (the measured
alone). Evaluations are not in the model: they fall on the same fresh-example cadence in every condition. upstream
is the whole input pipeline's time a batch, as each run profiles it: where the echo stage comes before augmentation,
the copies' own augmentation is in neither term (on fashion_mnist it is small beside the store's reads).

upstream and downstream are a study's medians over its runs that had the machine to themselves (each run
profiles both before it trains), per workload and batch size: one store and one model, so one pair for every
condition of the study at that batch size. A study with no such run has no model (NaN). The autopilot chooses its
factor as it goes, so it has none either.
"""

import math

import numpy as np
import pandas as pd

from echo_experiments.report import tables
from echo_experiments.report.tables import CONDITION

COLUMNS = ["model_seconds", "model_speedup", "model_speedup_min", "model_speedup_max"]
KEY = ["workload", "batch_size", "study_key"]  # one pipeline and one step: a batch size has its own of each


def study_costs(trials: pd.DataFrame) -> pd.DataFrame:
    """Per study (of one workload at one batch size): the median upstream seconds per batch and downstream seconds
    per step of its runs alone on the folder's timing store (tables.timing_store)."""
    on_store = tables.on_timing_store(trials)
    timed = on_store[tables.alone(on_store)].dropna(subset=["upstream_s_per_batch", "downstream_s_per_step"])
    return timed.groupby(KEY)[["upstream_s_per_batch", "downstream_s_per_step"]].median()


def model_seconds(trials: pd.DataFrame) -> pd.DataFrame:
    """study_bests with each study's ``model_seconds``: F / B x max(upstream, e x downstream) of its best trial
    (inf where it did not reach the target, NaN where the study has no profile alone or the factor is chosen)."""
    bests = tables.study_bests(trials)
    costs = study_costs(trials).reindex(pd.MultiIndex.from_frame(bests[KEY]))
    per_fresh_batch = np.maximum(costs["upstream_s_per_batch"].to_numpy(float),
                                 bests["echo_factor"].to_numpy(float) * costs["downstream_s_per_step"].to_numpy(float))
    seconds = bests["fresh"].to_numpy(float) / bests["batch_size"].to_numpy(float) * per_fresh_batch
    chosen = bests["echo_auto"].astype(bool).to_numpy()  # the autopilot's factor is its result: no model
    return bests.assign(model_seconds=np.where(chosen, math.nan, seconds))


def with_model(speedups: pd.DataFrame, trials: pd.DataFrame) -> pd.DataFrame:
    """The speedups table (tables.speedups) with the model's columns: the median over studies of the modelled
    seconds to target, and the modelled speedup as per-study pairs (tables.study_speedups: each study's baseline
    over the same study's condition; median, min and max over the studies modelled in both)."""
    if speedups.empty:
        return speedups.assign(**{c: pd.Series(dtype=float) for c in COLUMNS})
    bests = model_seconds(trials)
    medians = bests.groupby(CONDITION)["model_seconds"].median()
    pairs = tables.study_speedups(bests.assign(seconds=bests["model_seconds"]))
    keys = list(speedups[CONDITION].itertuples(index=False, name=None))
    columns = {"model_seconds": [float(medians.get(key, math.nan)) for key in keys]}
    for column, summary in (("model_speedup", np.median), ("model_speedup_min", np.min),
                            ("model_speedup_max", np.max)):
        columns[column] = [float(summary(pairs[key])) if pairs.get(key) else math.nan for key in keys]
    return speedups.assign(**columns)
