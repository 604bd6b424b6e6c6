"""Stop signals from the process's first instant: kept while starting and raised only at a safe point, a second
one ending the process at once, taken over by the training loop, and kept ignored where the parent ignores them."""

import gc
import os
import signal
import sys

import pytest

from echo_experiments.core.signals import Signals, stop_at_startup


@pytest.fixture
def handlers():
    """The process's signal handlers and unraisable hook, as they were before the test."""
    previous, hook = {s: signal.getsignal(s) for s in Signals.SIGNALS}, sys.unraisablehook
    yield
    sys.unraisablehook = hook
    for s, handler in previous.items():
        signal.signal(s, handler)


@pytest.fixture
def kept(handlers, monkeypatch):
    """The start-up handler installed, a second signal's exit recorded instead of ending the test's process, and
    the kept signal forgotten afterwards."""
    from echo_experiments.core import signals

    ended = []
    monkeypatch.setattr(signals, "_end_now", ended.append)
    stop_at_startup()
    yield ended
    signals._at_startup.clear()


@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")  # nothing raised, nothing shown
def test_a_start_up_signal_is_kept_where_it_lands_and_the_loop_takes_it_over(kept):
    """Inside a garbage-collection callback, as inside an extension module's import (where a raised exception
    crashed the process), the handler raises nothing: the signal is kept, and the trainer's Signals take it
    over."""
    sent = []

    def callback(phase, info):
        if phase == "start" and not sent:
            sent.append(os.kill(os.getpid(), signal.SIGTERM))  # its handler runs here, inside the callback

    gc.callbacks.append(callback)
    try:
        gc.collect()
    finally:
        gc.callbacks.remove(callback)
    assert sent and kept == []
    with Signals() as signals:
        assert signals.received == signal.SIGTERM
    with Signals() as signals:  # taken over once
        assert signals.received is None


def test_a_kept_signal_ends_the_start_up_at_its_next_safe_point_and_a_second_one_at_once(kept):
    from echo_experiments.core.signals import StartupInterrupted, stop_if_signalled_at_startup

    stop_if_signalled_at_startup()  # nothing kept: nothing to raise
    ran_on = []
    os.kill(os.getpid(), signal.SIGTERM)  # kept: the code it interrupted goes on
    ran_on.append(True)
    with pytest.raises(StartupInterrupted) as stopped:
        stop_if_signalled_at_startup()
    assert ran_on and stopped.value.signum == signal.SIGTERM and kept == []
    os.kill(os.getpid(), signal.SIGINT)  # a second one: the process ends now
    assert kept == [signal.SIGINT]


def test_a_signal_the_parent_ignores_stays_ignored(handlers):
    """``nohup`` ignores SIGHUP so that a run outlives its terminal; neither start-up nor the loop may undo that."""
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    stop_at_startup()
    assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    assert signal.getsignal(signal.SIGTERM) not in (signal.SIG_IGN, signal.SIG_DFL)
    with Signals():
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN


def _as_hydra_runs(job):
    """What Hydra does with an exception of composing or of the job: prints it (no traceback) and exits 1."""
    def run_job():
        try:
            job()
        except Exception as e:  # noqa: BLE001 - as Hydra's run_and_report
            print(e, file=sys.stderr)
            sys.exit(1)
    return run_job


def _interrupted(error: Exception):
    """A step that a SIGINT interrupts and that then fails with ``error`` (OmegaConf half-updated, say)."""
    def step(*args):
        os.kill(os.getpid(), signal.SIGINT)  # kept while the command plans and composes
        raise error
    return step


@pytest.mark.parametrize("where", ["composing", "planning"])
def test_an_error_while_a_start_up_signal_is_kept_ends_as_the_stop(kept, monkeypatch, capsys, where):
    """Interrupted while Hydra composes, OmegaConf can raise an AttributeError of its own, which Hydra prints and
    exits 1 on; while the command is planned, the error can be a ConfigError. The signal is what ended the
    command: __main__ prints the start-up line and exits 128 + its number."""
    from echo_experiments.cli import main as cli
    from echo_experiments.core.schema import ConfigError
    from echo_experiments.core.signals import StartupInterrupted

    if where == "composing":
        monkeypatch.setattr(cli, "plan", lambda argv: None)
        monkeypatch.setattr(cli, "run_job", _as_hydra_runs(_interrupted(AttributeError("'NoneType' object has no "
                                                                                       "attribute"))))
    else:
        monkeypatch.setattr(cli, "plan", _interrupted(ConfigError("workload", None, "", "cannot be composed")))
    with pytest.raises(StartupInterrupted) as stopped:
        cli.main([])
    assert stopped.value.signum == signal.SIGINT
    assert "error: " not in capsys.readouterr().err  # no second line: the one line is the start-up one


def test_without_a_start_up_signal_an_error_stays_itself(monkeypatch):
    from echo_experiments.cli import main as cli

    def bug():
        raise AttributeError("a real bug")
    monkeypatch.setattr(cli, "plan", lambda argv: None)
    monkeypatch.setattr(cli, "run_job", _as_hydra_runs(bug))
    with pytest.raises(SystemExit) as ended:
        cli.main([])
    assert ended.value.code == 1


def test_a_signal_after_the_training_loop_says_the_run_ended_not_that_it_was_starting(kept):
    from echo_experiments.core.signals import StartupInterrupted

    assert "while starting, before this attempt trained" in str(StartupInterrupted(signal.SIGTERM))
    with Signals():
        pass  # the loop ran and gave the signals back
    assert str(StartupInterrupted(signal.SIGTERM)) == (
        "stopped by SIGTERM as the run ended, after its training loop: its record and metrics are written; the same "
        "command reports it")
    stop_at_startup()  # the next start (a sweep's worker, its next job)
    assert "while starting" in str(StartupInterrupted(signal.SIGTERM))
