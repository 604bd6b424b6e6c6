"""Stop signals from the process's first instant: held while composing, one line while starting, taken over by the
training loop, and kept ignored where the parent ignores them."""

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


@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")  # no traceback shown for it
def test_a_start_up_signal_whose_exception_python_drops_still_reaches_the_loop(handlers):
    """Raised inside a garbage-collection callback, the start-up handler's exception is dropped; the signal
    must still end the start-up once the trainer's Signals take over, and nothing be printed for it."""
    sent = []

    def callback(phase, info):
        if phase == "start" and not sent:
            sent.append(os.kill(os.getpid(), signal.SIGTERM))  # its handler runs here, inside the callback

    stop_at_startup()
    gc.callbacks.append(callback)
    try:
        gc.collect()  # the StartupInterrupted goes to sys.unraisablehook, not here
    finally:
        gc.callbacks.remove(callback)
    with Signals() as signals:
        assert signals.received == signal.SIGTERM
    with Signals() as signals:  # taken over once
        assert signals.received is None


@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")  # no traceback shown for it
def test_an_error_the_start_up_stop_caused_where_python_drops_it_is_not_shown(handlers):
    """Raised where C code called back into Python (TensorFlow's nest, flattening in an iterator's __del__), the
    start-up handler's exception comes back as a SystemError caused by it, which Python drops: not shown (seen
    once as a traceback above the stop's one line), and the signal still reaches the loop."""
    from echo_experiments.core.signals import StartupInterrupted

    class Iterator:
        def __del__(self):
            try:
                os.kill(os.getpid(), signal.SIGTERM)
            except StartupInterrupted as e:
                raise SystemError("<built-in function __import__> returned a result with an exception set") from e

    stop_at_startup()
    Iterator()  # dropped at once: its __del__'s SystemError goes to sys.unraisablehook
    gc.collect()
    with Signals() as signals:
        assert signals.received == signal.SIGTERM


def test_an_unraisable_error_the_stop_did_not_cause_is_still_shown(handlers):
    shown = []
    sys.unraisablehook = shown.append
    stop_at_startup()

    class Broken:
        def __del__(self):
            raise SystemError("a real bug")

    Broken()
    gc.collect()
    assert [type(u.exc_value) for u in shown] == [SystemError]


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
    """A step that a SIGINT interrupts and that turns the start-up handler's exception into ``error``."""
    from echo_experiments.core.signals import StartupInterrupted

    def step(*args):
        try:
            os.kill(os.getpid(), signal.SIGINT)  # kept while the command plans and composes
            os.kill(os.getpid(), signal.SIGINT)  # a second one: the start-up handler raises here
        except StartupInterrupted:
            raise error from None
    return step


@pytest.mark.parametrize("where", ["composing", "planning"])
def test_a_start_up_signal_a_library_turned_into_its_own_error_ends_as_the_stop(handlers, monkeypatch, capsys, where):
    """Interrupted while Hydra composes (by a second signal: the first is kept), OmegaConf raises an
    AttributeError of its own, which Hydra prints and exits 1 on; interrupted while the command is planned, the
    error can be a ConfigError. The signal is what ended the command: __main__ prints the start-up line and
    exits 128 + its number."""
    from echo_experiments.cli import main as cli
    from echo_experiments.core.schema import ConfigError
    from echo_experiments.core.signals import StartupInterrupted, _at_startup, _held

    if where == "composing":
        monkeypatch.setattr(cli, "plan", lambda argv: None)
        monkeypatch.setattr(cli, "run_job", _as_hydra_runs(_interrupted(AttributeError("'NoneType' object has no "
                                                                                       "attribute"))))
    else:
        monkeypatch.setattr(cli, "plan", _interrupted(ConfigError("workload", None, "", "cannot be composed")))
    stop_at_startup()
    try:
        with pytest.raises(StartupInterrupted) as stopped:
            cli.main([])
    finally:
        _at_startup.clear()
        _held.clear()
    assert stopped.value.signum == signal.SIGINT
    assert "error: " not in capsys.readouterr().err  # no second line: the one line is the start-up one


def test_a_signal_while_the_command_plans_and_composes_is_kept_until_its_job_starts(handlers):
    """Raised while Hydra composes, the start-up stop can leave OmegaConf half-updated and Hydra print its error
    as a traceback (seen with a SIGINT one second after the start), so the first signal is kept until the job's
    own code runs; a second one is raised at once."""
    from echo_experiments.core.signals import (
        StartupInterrupted,
        _at_startup,
        _held,
        hold_startup_signals,
        release_startup_signals,
    )

    stop_at_startup()
    try:
        release_startup_signals()  # nothing held: nothing to raise
        hold_startup_signals()
        os.kill(os.getpid(), signal.SIGTERM)  # kept
        with pytest.raises(StartupInterrupted) as stopped:
            release_startup_signals()
        assert stopped.value.signum == signal.SIGTERM
        hold_startup_signals()
        with pytest.raises(StartupInterrupted):  # a signal already came: this one is not kept
            os.kill(os.getpid(), signal.SIGINT)
    finally:
        _at_startup.clear()
        _held.clear()


def test_without_a_start_up_signal_an_error_stays_itself(monkeypatch):
    from echo_experiments.cli import main as cli

    def bug():
        raise AttributeError("a real bug")
    monkeypatch.setattr(cli, "plan", lambda argv: None)
    monkeypatch.setattr(cli, "run_job", _as_hydra_runs(bug))
    with pytest.raises(SystemExit) as ended:
        cli.main([])
    assert ended.value.code == 1
