"""The tf.data service command's arguments: each wrong one is one line naming it, before any server starts."""

import pytest

from echo_experiments.service import main, parse


@pytest.mark.parametrize("argv,said", [
    (["worker", "--dispatcher", "localhost:5050", "--timeout-s", "-5"],
     "argument --timeout-s: -5 is not a wait: a number of seconds above 0, at most 3600"),
    (["worker", "--dispatcher", "localhost:abc"], "argument --dispatcher: localhost:abc is not HOST:PORT with a port "
                                                   "from 1 to 65535"),
    (["worker", "--dispatcher", "localhost:99999"], "localhost:99999 is not HOST:PORT"),
    (["dispatcher", "--port", "99999"], "argument --port: 99999 is not a port: an integer from 0 (any free port) to "
                                        "65535"),
])
def test_a_wrong_argument_is_one_line_naming_it(argv, said, capsys):
    with pytest.raises(SystemExit) as refused:
        parse(argv)
    assert refused.value.code == 2 and said in capsys.readouterr().err


def test_a_work_dir_that_cannot_be_made_is_named_not_the_port(capsys):
    with pytest.raises(SystemExit) as refused:
        main(["dispatcher", "--port", "0", "--work-dir", "/proc/journal"])
    assert refused.value.code == 2
    assert capsys.readouterr().err.strip() == (
        "error: --work-dir /proc/journal cannot be used (nothing can be made in /proc: No such file or directory): "
        "choose a folder this user can write")
