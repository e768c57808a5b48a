import threading

from annotate.revision.dispatch import _ThreadPool


def test_a_job_never_waits_behind_another_and_threads_are_reused():
    pool = _ThreadPool()
    second_ran, first_done = threading.Event(), threading.Event()

    def first(_object_id: int) -> None:
        # Finishes only once the second job has run: a pool that queued it would hang here.
        assert second_ran.wait(timeout=10)
        first_done.set()

    pool.submit(first, 1)
    pool.submit(lambda _object_id: second_ran.set(), 2)
    assert first_done.wait(timeout=10)
    ran = threading.Event()
    for _ in range(50):  # let both threads report idle
        with pool._lock:
            if pool._idle == 2:
                break
        threading.Event().wait(0.01)
    pool.submit(lambda _object_id: ran.set(), 3)
    assert ran.wait(timeout=10)
    assert pool._started == 2  # the third job went to an idle thread


def test_a_failing_job_leaves_the_thread_working():
    pool = _ThreadPool()
    ran = threading.Event()

    def broken(_object_id: int) -> None:
        raise RuntimeError("boom")

    pool.submit(broken, 1)
    for _ in range(50):
        with pool._lock:
            if pool._idle == 1:
                break
        threading.Event().wait(0.01)
    pool.submit(lambda _object_id: ran.set(), 2)
    assert ran.wait(timeout=10)
    assert pool._started == 1
