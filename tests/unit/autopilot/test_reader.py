"""Reading a loader on a thread of its own: a wait bounded in the process's own time, a loader's error or end in
one line, and the step in flight asked in the ways the loops that users write can say it."""

import concurrent.futures
import threading

import pytest

from echo_experiments.autopilot.reader import LoaderEnded, LoaderError, Reader, step_done, wait_for_step


class Ready:
    def __init__(self, done):
        self.done_ = done

    def is_ready(self):
        return self.done_


class Event:  # torch.cuda.Event's way
    def query(self):
        return True


def test_the_step_in_flight_is_asked_as_a_jax_array_a_cuda_event_a_future_or_a_callable():
    finished = concurrent.futures.Future()
    assert step_done(None) and step_done(Ready(True)) and not step_done(Ready(False)) and step_done(Event())
    assert not step_done(finished) and step_done(lambda: True)
    finished.set_result(1)
    assert step_done(finished)
    wait_for_step(lambda: False, given_up=lambda: True)  # a wait that no longer matters ends


def test_a_reader_hands_on_batches_and_says_the_loaders_end_error_or_silence_in_one_line():
    reader = Reader(iter([1, 2]), 5.0, "the numbers")
    assert [reader.next(), reader.next()] == [1, 2]
    with pytest.raises(LoaderEnded):
        reader.next()
    reader.close()

    def failing():
        raise KeyError("image 7")
        yield
    reader = Reader(failing(), 5.0, "the images")
    with pytest.raises(LoaderError, match=r"^the images raised KeyError: 'image 7'$"):
        reader.next()
    reader.close()

    never = threading.Event()
    reader = Reader(iter(lambda: never.wait(30), None), 0.2, "the slow store")
    with pytest.raises(LoaderError, match=r"^no batch from the slow store within 0.2 s"):
        reader.next()
    reader.close()  # at once: its thread is a daemon, stuck in the loader
    never.set()
