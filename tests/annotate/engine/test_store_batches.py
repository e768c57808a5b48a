"""The writer's batches: stored once a burst of replies pauses, and in the last burst (every
unit taken, no call to follow) as they come."""

import queue
import threading

from annotate.engine.services.runs import _ENDED, _next_batch


class ArrivingQueue(queue.Queue):
    """A queue whose results arrive while the writer waits: each blocking `get` that finds
    it empty receives the next of `arriving` first (a reply coming in during the wait)."""

    def __init__(self, ready, arriving):
        super().__init__()
        for item in ready:
            self.put(item)
        self.arriving = list(arriving)

    def get(self, block=True, timeout=None):
        if block and self.empty() and self.arriving:
            self.put(self.arriving.pop(0))
        return super().get(block, timeout)


def test_a_burst_of_replies_is_one_batch_once_it_pauses():
    results = ArrivingQueue(["a"], ["b", "c"])
    assert _next_batch(results) == ["a", "b", "c"]
    assert _next_batch(results, threading.Event()) == []  # not all taken: waits as before


def test_once_every_unit_is_taken_a_batch_is_what_has_come_without_waiting():
    all_taken = threading.Event()
    all_taken.set()
    results = ArrivingQueue(["a", "b"], ["c", _ENDED])
    assert _next_batch(results, all_taken) == ["a", "b"]
    assert _next_batch(results, all_taken) == ["c"]
    assert _next_batch(results, all_taken) == []  # the end mark is never a result
