"""The timing band (docs/protocol.md, "The autopilot's checks"): how far apart one training is timed twice on one
CPU model, from every committed folder's pairs of such timings. A check's seconds are decided against its limit
with the band of its runs' CPU model."""

from dataclasses import dataclass
from typing import Optional

import pandas as pd

from echo_experiments.report import tables


@dataclass(frozen=True)
class Band:
    """How far apart one training is timed twice on a CPU model, and the folders whose pairs measured it."""
    width: float
    folders: tuple[str, ...]


def timing_bands(sweeps: dict[str, Optional[pd.DataFrame]]) -> dict[str, Band]:
    """Per CPU model, how far apart one training is timed twice: the widest ratio, as max(r, 1/r), of the seconds to
    target of two runs of one sweep folder, one store and one study's trial (one draw of the search) that trained
    alike (the same fresh examples, steps and effective factor to the target and the same best metric), each alone
    on the machine and each bound by its own compute (R below 1): a store's emulated waits would set the band by
    their own steadiness, not a training's. Where the input is not the bottleneck the autopilot makes no copy and
    trains as the baseline does, so its sweep holds such pairs; a folder made to time them (timing_band_cpu's:
    each study's best baseline trial timed alone twice) holds nothing else. A model with no pair has no band."""
    return merged({folder: folder_widths(trials) for folder, trials in sweeps.items()})


def folder_widths(trials: Optional[pd.DataFrame]) -> dict[str, float]:
    """timing_bands' widest ratio per CPU model within one sweep folder's runs (a model with no pair left out)."""
    if trials is None or trials.empty or "store" not in trials:
        return {}
    same = ["study_key", "trial", "fresh_examples_to_target", "steps_to_target", "effective_echo_factor",
            "best_metric", "store", "cpu"]
    computed = (tables.input_ratios(trials) < 1).fillna(False).astype(bool)
    timed = trials[tables.alone(trials) & (trials["status"] == "reached_target") & computed].dropna(subset=same)
    widest: dict[str, float] = {}
    for key, runs in timed.groupby(same):
        seconds = runs["seconds_to_target"].astype(float)
        if len(runs) > 1:
            widest[key[-1]] = max(widest.get(key[-1], 1.0), float(seconds.max() / seconds.min()))
    return widest


def merged(widths: dict[str, dict[str, float]]) -> dict[str, Band]:
    """Per CPU model, the widest of the folders' widths, with the folders that measured one."""
    bands: dict[str, Band] = {}
    for folder, per_cpu in widths.items():
        for cpu, width in per_cpu.items():
            known = bands.get(cpu, Band(1.0, ()))
            bands[cpu] = Band(max(known.width, width), tuple(sorted({*known.folders, folder})))
    return bands
