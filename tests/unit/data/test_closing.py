"""A finished run's input iterator is dropped on a thread of its own (data/closing.py), not on the main thread."""

import logging
import re
import threading
import time

from echo_experiments.data import closing


class SlowToClose:
    """Stands in for a tf.data iterator whose destructor waits on its autotuning thread."""

    def __init__(self, seconds: float, closed_on: list):
        self.seconds, self.closed_on = seconds, closed_on

    def __del__(self):
        time.sleep(self.seconds)
        self.closed_on.append(threading.current_thread().name)


def test_the_caller_goes_on_while_the_iterator_closes_and_the_closing_thread_drops_it():
    closed_on = []
    holder = [SlowToClose(1.0, closed_on)]
    began = time.perf_counter()
    closing.close_later(holder, "run A")
    handed_off = time.perf_counter() - began
    assert holder == [] and handed_off < 0.5 and closed_on == []
    assert closing.wait_closed(timeout_s=10)
    assert closed_on == ["close_input"]


def test_a_second_owner_is_waited_for_so_the_destructor_still_runs_on_the_closing_thread():
    closed_on = []
    holder = [SlowToClose(0.0, closed_on)]
    cached = holder[0]  # as a checkpointer caches the iterator it saved
    closing.close_later(holder, "run B")
    time.sleep(0.3)
    assert closed_on == []  # still owned by the run
    del cached
    assert closing.wait_closed(timeout_s=10)
    assert closed_on == ["close_input"]


def test_a_slow_close_is_said_and_the_wait_at_exit_is_bounded(caplog, monkeypatch):
    caplog.set_level(logging.INFO, logger=closing.__name__)
    monkeypatch.setattr(closing, "SAY_AFTER_S", 0.5)
    closing.close_later([SlowToClose(1.5, [])], "run C")
    assert not closing.wait_closed(timeout_s=0.2)  # the bound: it gives up, having said what it waited for
    assert "closing the input pipeline (tf.data's autotuning thread" in caplog.text
    assert closing.wait_closed(timeout_s=10) and closing.pending() == []
    # A loaded machine may sleep past 1.5 s: the message names the time it took, at least the destructor's.
    said = re.search(r"closed the input pipeline of run C in (\d+\.\d) s \(tf.data's autotuning thread\)", caplog.text)
    assert said and float(said.group(1)) >= 1.5
