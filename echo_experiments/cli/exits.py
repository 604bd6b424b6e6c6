"""How a command ends when it cannot go on: one line on stderr and an exit status (2: something the user can fix;
3: an input that stopped answering; 4: a lost peer; 128 + its number: a stop signal), never a traceback. The
commands (the trainer's command line, compare, profile, benchmark) share them."""

import logging
import os
import signal
import sys
from contextlib import contextmanager
from typing import Callable, Iterator, NoReturn

from echo_experiments.core.signals import Interrupted, StartupInterrupted, stop_at_startup, stop_if_signalled_at_startup


def fail(message: str) -> NoReturn:
    stop_if_signalled_at_startup()  # an error a start-up signal caused is that signal
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


def end_now(message: str, code: int) -> NoReturn:
    """The error line, then exit at once: a thread may still wait inside TensorFlow (a shuffle buffer filling,
    an unanswered input), and JAX's distributed runtime would wait at a normal exit for a lost peer."""
    print(f"error: {message}", file=sys.stderr, flush=True)
    logging.shutdown()
    os._exit(code)


@contextmanager
def one_line_on_signal(what_next: Callable[[], str]) -> Iterator[None]:
    """For the commands that train or time in this process (compare, profile, benchmark): a stop signal ends
    them with one line, ``stopped by SIG...; <what_next()>``, and 128 + its number, not a traceback (Ctrl-C) or a
    silent exit (SIGTERM, SIGHUP)."""
    stop_at_startup()
    try:
        yield
        stop_if_signalled_at_startup()  # one kept after the last run's loop gave the signals back
    except (Interrupted, StartupInterrupted) as e:
        end_now(f"stopped by {signal.Signals(e.signum).name}; {what_next()}", 128 + e.signum)
