"""A copy's worth as one number, R* of exp(-k / R*): the sum over a factor's copies, the R* one condition implies,
the fit that recovers a known R*, and the paper's 3.25x at e = 5 read as about 4."""

import math

import numpy as np
import pandas as pd
import pytest

from paper.worth import repeat_decay


def test_the_copies_of_a_factor_are_worth_the_sum_of_their_decays():
    assert repeat_decay.copies_sum(2.0, 4.0) == pytest.approx(math.exp(-1 / 4))
    assert repeat_decay.copies_sum(3.5, 4.0) == pytest.approx(math.exp(-0.25) + math.exp(-0.5) + 0.5 * math.exp(-0.75))
    assert repeat_decay.implied(3.0, 1 / (1 + repeat_decay.copies_sum(3.0, 7.0))) == pytest.approx(7.0, rel=1e-6)
    assert math.isnan(repeat_decay.implied(2.0, 1.2))  # copies that cost progress imply no R*
    assert repeat_decay.paper_r_star() == pytest.approx(4.08, abs=0.01)


def test_the_fit_recovers_a_known_r_star_and_says_where_one_does_not_fit():
    def row(e, r_star, studies=(0.98, 1.0, 1.02)):
        ratio = 1 / (1 + repeat_decay.copies_sum(e, r_star))
        return {"workload": "w", "placement": "after_batching", "echo_factor": e, "batch_size": 32, "shuffle_buffer": 0,
                "effective_factor": e, "superseded": False, "worth": 0.0,
                "study_ratios": tuple(ratio * s for s in studies)}
    same = pd.DataFrame([row(e, 6.0) for e in (2.0, 4.0, 8.0)])
    fitted = repeat_decay.table(same).iloc[0]
    assert fitted["r_star"] == pytest.approx(6.0, rel=0.05) and fitted["ci_low"] < 6.0 < fitted["ci_high"]
    assert fitted["one_fits"]
    falling = pd.DataFrame([row(2.0, 12.0), row(4.0, 6.0), row(8.0, 3.0)])  # R* falling with e, as measured
    fitted = repeat_decay.table(falling).iloc[0]
    assert not fitted["one_fits"] and np.isfinite(fitted["r_star_2"])
