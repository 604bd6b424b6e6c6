"""The autopilot's decisions, kept as runs, and a replay that goes on after the batches a resumed run trained."""

from echo_experiments.autopilot.decisions import Decisions, Replay


def test_decisions_are_kept_as_runs_and_a_resumed_replay_goes_on_after_the_batches_it_trained():
    decisions = Decisions()
    for kind in "ffccfrcf":
        decisions.add(kind)
    assert decisions.runs == [["f", 2], ["c", 2], ["f", 1], ["r", 1], ["c", 1], ["f", 1]]
    plan = Replay(Decisions(decisions.runs), "a recorded run")
    plan.seek(5)  # five batches trained: the resumption recorded after them is still to make
    assert [plan.next() for _ in range(4)] == ["r", "c", "f", None]
