"""Logging overrides checked before any job runs: each bad one was Hydra's traceback as the job started."""

import pytest

from echo_experiments.cli.plan import check_command_line


@pytest.mark.parametrize("override, said", [
    ("hydra.job_logging.handlers.file.filename=/nonexistent/x.log",
     "hydra.job_logging.handlers.file.filename=/nonexistent/x.log cannot be written (/nonexistent is not a folder: "
     "logging makes no folder): name a file in a folder this process can write, or leave the key out"),
    ("hydra.job_logging.handlers.console.class=nope.Nope",
     "hydra.job_logging cannot be configured: Unable to configure handler 'console' (ValueError: Cannot resolve "
     "'nope.Nope': No module named 'nope'): fix the handler, formatter or level it names"),
    ("hydra.hydra_logging.root.level=LOUD",
     "hydra.hydra_logging cannot be configured: Unable to configure root logger (ValueError: Unknown level: "
     "'LOUD'): fix the handler, formatter or level it names"),
])
def test_a_logging_override_hydra_cannot_configure_is_one_line_naming_the_section(override, said):
    assert check_command_line(["workload=synthetic", override]) == said
    assert check_command_line(["-m", "workload=synthetic", "echo.factor=1,2", override]) == said


def test_logging_overrides_it_can_configure_pass(tmp_path):
    assert check_command_line(["workload=synthetic", "hydra.job_logging.root.level=DEBUG"]) is None
    assert check_command_line(["workload=synthetic", "hydra/job_logging=disabled"]) is None
    assert check_command_line(["workload=synthetic", f"hydra.job_logging.handlers.file.filename={tmp_path}/x.log"]) \
        is None
    assert not (tmp_path / "x.log").exists()  # tried on os.devnull: the check writes no file
