"""Names made from a job's overrides: one directory each, whatever the values hold."""

from echo_experiments.core.config import run_name, short_name


def test_a_path_in_an_override_is_one_directory_name():
    assert run_name("workload.dataset=npz:/data/x,echo.factor=2") == "workload.dataset=npz:_data_x,echo.factor=2"
    assert run_name("") == "default"


def test_a_long_name_is_cut_with_a_hash_of_the_whole():
    a, b = short_name("x=" + "a" * 200), short_name("x=" + "a" * 199 + "b")
    assert len(a) == len(b) == 120 and a != b and "/" not in short_name("p=/" + "q/" * 100)
    assert short_name("d=a/b" + "c" * 200) != short_name("d=a_b" + "c" * 200)  # the hash is of the name as typed
