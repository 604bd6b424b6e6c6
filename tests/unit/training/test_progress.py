"""A run's start is never silent for long: the heartbeat's line while it compiles, profiles and trains to its first
evaluation, silence once the evaluations speak, and no thread left when the run ends."""

import logging
import threading
import time

from echo_experiments.training.progress import Heartbeat


def test_the_heartbeat_speaks_while_the_run_starts_then_leaves_it_to_the_evaluations(caplog):
    said = {"what": "compiling the train step"}
    log = logging.getLogger("heartbeat-test")
    before = set(threading.enumerate())
    with caplog.at_level(logging.INFO, logger="heartbeat-test"), Heartbeat(log, lambda: said["what"], every_s=0.05):
        time.sleep(0.3)
        said["what"] = None  # the first evaluation has been logged: nothing more from the heartbeat
        time.sleep(0.1)
        heard = len(caplog.records)
        time.sleep(0.2)
    assert heard >= 3 and len(caplog.records) == heard
    assert caplog.records[0].getMessage().startswith("still compiling the train step (")
    assert set(threading.enumerate()) - before == set()
