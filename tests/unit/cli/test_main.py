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
