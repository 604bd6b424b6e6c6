"""compare's one-line answer and the factor the evaluation cadence resolves, from the runs' records."""

import pytest

from echo_experiments.compare import answer, evaluations_to_target, resolvable_factor
from echo_experiments.core.record import RunRecord, Target
from echo_experiments.training.timing import Timing

EVERY = 1000
TIMING = Timing(upstream_s_per_batch=0.2, downstream_s_per_step=0.1)  # R = 2


def record(fresh, seconds, e=1.0, other_cores=0.0, ratio=2.0) -> RunRecord:
    return RunRecord("w", "after_batching", e, 64, 0, 0, None, None, "reached_target" if fresh else "not_reached", 100,
                     fresh or 50_000, 10.0, Target("accuracy", 0.9), fresh, 100, seconds,
                     effective_echo_factor=e, other_cores=other_cores, upstream_downstream_ratio=ratio)


def test_a_speedup_beyond_the_timing_spread_is_a_saving_split_into_fresh_examples_and_seconds_per_fresh():
    base, echoed = record(20_000, 100.0), record(24_000, 60.0, e=2)
    assert answer(base, [("e=2 at after_batching", echoed)], TIMING, EVERY) == (
        "fresh examples: e=2 at after_batching needed 1.20x the baseline's, a copy worth -0.17 of a fresh example; "
        "seconds: echoing saved 40% of the seconds to target here: e=2 at after_batching, 1.67x (fresh examples to "
        "target 1.20x the baseline's, seconds per fresh example 0.50x)")


@pytest.mark.parametrize("seconds,starts", [(95.0, "no gain here: the fastest echoed run, e=2, 1.05x, is within the "
                                                   "10% spread of identical runs"),
                                            (150.0, "no gain here: the fastest echoed run, e=2, was slower, 0.67x")])
def test_within_the_spread_or_slower_is_no_gain(seconds, starts):
    line = answer(record(20_000, 100.0), [("e=2", record(30_000, seconds, e=2))], TIMING, EVERY)
    assert line.split("; seconds: ")[1].startswith(starts)


def test_a_baseline_at_its_first_evaluations_leaves_nothing_to_measure():
    line = answer(record(3_000, 10.0), [("e=2", record(2_000, 1.0, e=2))], TIMING, EVERY)
    assert line == ("cannot tell: the baseline reached the target at evaluation 3 (3,000 fresh examples, one "
                    "evaluation every 1,000), too early for the comparison to measure anything; evaluate at least 10 "
                    "times before the target (trainer.eval_every_fresh_examples=300) or set a harder "
                    "workload.target.value")
    assert answer(record(None, None), [], TIMING, EVERY).startswith("cannot tell: the baseline did not reach")


def test_a_shared_machine_or_an_input_that_changed_speed_cannot_tell_the_seconds_but_still_tells_the_fresh():
    """The fresh-example half needs no clean machine: a shared one takes only the seconds' half away."""
    base = record(20_000, 100.0)
    line = answer(base, [("e=5.82", record(18_600, 50.0, e=5.82, other_cores=0.9))], TIMING, EVERY)
    assert line == ("fresh examples: e=5.82 needed 0.93x the baseline's, a copy worth 0.02 of "
                    "a fresh example; seconds: cannot tell: the machine was shared while e=5.82 ran; run again on an "
                    "idle machine")
    assert answer(base, [("e=2", record(20_000, 50.0, e=2, ratio=3.2))], TIMING, EVERY).split("; seconds: ")[
        1].startswith("cannot tell: R moved from 2.00 to 3.20 between the profile and the runs")
    assert "seconds: echoing saved" in answer(base, [("e=2", record(20_000, 50.0, e=2, ratio=2.4))], TIMING, EVERY)
    auto_missed = answer(base, [("auto", record(None, None, e=3.0))], TIMING, EVERY)
    assert auto_missed.startswith("fresh examples: auto did not reach the target; seconds: no gain here")


def test_the_cadence_caps_the_factor_at_two_evaluations_of_the_best_case():
    base = record(12_000, 100.0)
    assert evaluations_to_target(base, EVERY) == 12 and resolvable_factor(base, EVERY) == 6.0
    assert resolvable_factor(record(None, None), EVERY) is None


@pytest.mark.parametrize("given", ["0", "-2", "0.5", "nan", "two", "1"])
def test_a_factor_below_one_is_refused_not_taken_for_none(given, capsys):
    from echo_experiments.compare import parse

    with pytest.raises(SystemExit) as refused:
        parse(["--factor", given])
    assert refused.value.code == 2
    assert (f"argument --factor: {given} is not an echo factor to compare: a number above 1 and at most 1000 (1 is "
            "the baseline, which compare runs anyway)") in capsys.readouterr().err


def test_an_out_folder_that_cannot_be_made_is_refused_before_profiling(capsys):
    from echo_experiments.compare import main

    with pytest.raises(SystemExit) as refused:
        main(["--out", "/proc/compare"])
    assert refused.value.code == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "error: --out /proc/compare cannot be used (nothing can be made in /proc: No such file or directory): "
        "choose another folder"]


@pytest.mark.parametrize("argv, line", [
    (["--out", ""], "argument --out: an empty --out would write the runs into the working folder itself"),
    (["hydra.run.dir=/tmp/x"], "error: hydra.run.dir is set by compare (a folder for each of its runs under --out): "
                               "give --out instead"),
])
def test_compare_refuses_an_empty_out_and_a_run_dir_it_would_ignore(argv, line, capsys):
    from echo_experiments.compare import main

    with pytest.raises(SystemExit) as refused:
        main(argv)
    assert refused.value.code == 2 and line in capsys.readouterr().err
