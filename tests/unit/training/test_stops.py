"""The stop rules, in the order the loop asks them."""

import math

from echo_experiments.core.record import Target
from echo_experiments.core.signals import Signals
from echo_experiments.training.stops import Budget, Divergence, Evaluation, Outcome, Pruning, Stops, TargetReached

TARGET = Target("accuracy", 0.8, "max")


def stops(stop_at_target=True, best=None, margin=1.0):
    rules = [Divergence(), TargetReached(TARGET, stop_at_target)]
    rules += [Pruning(lambda: best, margin)] if best is not None else []
    return Stops(Budget(1000, None), rules, Signals())


def evaluation(fresh, accuracy, loss=0.5):
    return Evaluation(step=fresh // 10, fresh=fresh, examples_trained=2 * fresh, seconds_to_target=fresh / 100,
                      train_loss=loss, metrics={"accuracy": accuracy})


def test_the_first_evaluation_at_the_target_records_it_and_stops():
    outcome = Outcome()
    stops().after_evaluation(evaluation(300, 0.79), outcome)
    assert outcome == Outcome()
    stops().after_evaluation(evaluation(400, 0.81), outcome)
    assert outcome.status == "reached_target" and outcome.stop
    assert outcome.to_target == {"fresh_examples_to_target": 400, "steps_to_target": 40,
                                 "examples_trained_to_target": 800, "seconds_to_target": 4.0}


def test_without_stop_at_target_the_run_goes_on_and_keeps_the_first_count():
    outcome, rules = Outcome(), stops(stop_at_target=False)
    rules.after_evaluation(evaluation(400, 0.81), outcome)
    rules.after_evaluation(evaluation(500, 0.85), outcome)
    assert not outcome.stop and outcome.to_target["fresh_examples_to_target"] == 400


def test_divergence_comes_before_the_target():
    outcome = Outcome()
    stops().after_evaluation(evaluation(400, 0.81, loss=math.nan), outcome)
    assert (outcome.status, outcome.stop, outcome.to_target) == ("diverged", True, None)


def test_a_non_finite_evaluation_beside_a_finite_train_loss_says_where_it_came_from(caplog):
    outcome = Outcome()
    with caplog.at_level("WARNING"):
        stops().after_evaluation(evaluation(400, math.nan, loss=1.675), outcome)
    assert outcome.status == "diverged"
    assert caplog.messages == ["diverged at step 40: the evaluation's accuracy is not finite while the train loss is "
                               "1.675 (an evaluation label beyond the model's classes, or a metric divided by zero, "
                               "gives this)"]


def test_pruning_stops_a_trial_only_once_past_its_studys_best_times_the_margin():
    outcome, rules = Outcome(), stops(best=400, margin=1.5)
    rules.after_evaluation(evaluation(500, 0.7), outcome)
    assert not outcome.stop  # past the best, not past 1.5 x it
    rules.after_evaluation(evaluation(600, 0.7), outcome)
    assert (outcome.status, outcome.stop) == ("pruned", True)
    reached = Outcome()
    stops(best=100).after_evaluation(evaluation(600, 0.9), reached)  # the target first: never pruned when reached
    assert reached.status == "reached_target"


def test_the_budget_is_spent_at_its_fresh_examples_or_its_step_cap():
    assert not Budget(1000, None).spent(5, 999) and Budget(1000, None).spent(5, 1000)
    assert Budget(None, 10).spent(10, 1) and not Budget(None, 10).spent(9, 10**9)
