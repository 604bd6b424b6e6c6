"""A run's first line: what it trains, on what data, to what target, and where; a target not set for a user's
data says so."""

from conftest import compose_config

from echo_experiments.cli.main import _first_line


def test_the_first_line_names_workload_data_target_and_folder():
    assert _first_line(compose_config(), "runs/fashion_mnist/default") == (
        "fashion_mnist on fashion_mnist, to accuracy >= 0.875 -> runs/fashion_mnist/default")


def test_on_a_users_data_it_says_whose_target_it_is():
    cfg = compose_config("workload.dataset=npz:/data/x")
    assert _first_line(cfg, "runs/fashion_mnist/workload.dataset=npz:_data_x") == (
        "fashion_mnist on npz:/data/x, to accuracy >= 0.875 (the target of fashion_mnist's own data: set "
        "workload.target.value for npz:/data/x) -> runs/fashion_mnist/workload.dataset=npz:_data_x")
    assert "set workload.target.value" in _first_line(compose_config("workload.dataset=my_fmnist"), "r")
    assert "set workload.target.value" not in _first_line(compose_config("workload=resnet32"), "r")


def test_the_last_line_says_how_it_ended_and_what_the_autopilot_did():
    from echo_experiments.cli.main import _last_line
    from echo_experiments.core.record import RunRecord, Target

    def record(**kw):
        return RunRecord("w", "after_batching", 1.0, 32, 0, 0, None, None, kw.pop("status", "reached_target"), 400,
                         10240, 12.34, Target("accuracy", 0.85), kw.pop("reached", 8192), 300, 10.0, **kw)

    assert _last_line(record(), "d") == (
        "reached_target: 8192 fresh examples to target, 400 steps, 10240 fresh examples, 12.3 s of training -> d")
    assert _last_line(record(status="not_reached", reached=None), "d").startswith("not_reached: target not reached,")
    auto = record(echo_auto=True, effective_echo_factor=1.25, echo_max_factor=3.0, echo_copied_batches=80)
    assert _last_line(auto, "d") == (
        "reached_target: 8192 fresh examples to target, 400 steps, 10240 fresh examples, the autopilot trained 1.25 "
        "examples per fresh one (cap 3, 80 batches copied), 12.3 s of training -> d")
