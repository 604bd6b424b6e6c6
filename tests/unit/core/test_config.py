"""Names made from a job's overrides: one directory each, whatever the values hold."""

from echo_experiments.core.config import run_name, short_name


def test_a_path_in_an_override_is_one_directory_name():
    assert run_name("workload.dataset=npz:/data/x,echo.factor=2") == "workload.dataset=npz:_data_x,echo.factor=2"
    assert run_name("") == "default"


def test_a_long_name_is_cut_with_a_hash_of_the_whole():
    a, b = short_name("x=" + "a" * 200), short_name("x=" + "a" * 199 + "b")
    assert len(a) == len(b) == 120 and a != b and "/" not in short_name("p=/" + "q/" * 100)
    assert short_name("d=a/b" + "c" * 200) != short_name("d=a_b" + "c" * 200)  # the hash is of the name as typed


def test_a_name_is_cut_in_bytes_never_in_the_middle_of_a_character():
    """A cut at 120 characters let 60 emoji make a 372-byte name, which no file system takes."""
    name = short_name("workload.name=" + "\N{GRINNING FACE}" * 60 + ",echo.factor=2")
    assert len(name.encode()) <= 120 and name.encode().decode() == name
    assert short_name("x=" + "\N{GRINNING FACE}" * 26) == "x=" + "\N{GRINNING FACE}" * 26  # 106 bytes: kept whole


def test_a_cap_set_beside_a_fixed_factor_is_said_to_be_unread():
    """echo.max_factor was ignored with no word beside a fixed factor; a preset sets it for its autopilot beside
    fixed factors (autopilot_cpu), so it is said, not refused."""
    from conftest import compose_config

    from echo_experiments.core.rules import unused

    assert unused(compose_config("echo.factor=2", "echo.max_factor=8")) == [
        "echo.max_factor=8 is read only with echo.factor=auto: this run's fixed factor is its own cap"]
    assert unused(compose_config("echo.factor=auto", "echo.max_factor=8")) == []
    assert unused(compose_config("echo.factor=2")) == []


def test_a_value_with_a_newline_stays_on_the_one_line_it_is_refused_in():
    from echo_experiments.cli.plan import check_command_line

    line = check_command_line(["storage.kind='http\nremote'"])  # quoted: Hydra takes the newline into the value
    assert line == "storage.kind='http\\nremote' is not allowed: one of local, http, emulated"
