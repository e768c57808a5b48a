"""Running work in threads of their own, as a second worker or a second request would, for the
tests of what two deliveries of one task, or two writers, do at once."""

import threading

from django.db import connection


def in_thread(target, outcomes: list) -> threading.Thread:
    """Start `target` in a thread; its result, or the exception it raised, is appended to
    `outcomes`. The thread's own database connection is closed when it ends."""

    def body():
        try:
            outcomes.append(target())
        except Exception as error:  # noqa: BLE001 - the test reads it
            outcomes.append(error)
        finally:
            connection.close()

    thread = threading.Thread(target=body)
    thread.start()
    return thread


def at_once(*calls, timeout: float = 30) -> list:
    """Run each of `calls` in a thread of its own, released together (a barrier), and return
    their results in order, an exception raised in its place. Each thread's database connection
    is closed when it ends."""
    start, outcomes = threading.Barrier(len(calls)), [[] for _ in calls]

    def released(call):
        def body():
            start.wait(timeout)
            return call()

        return body

    threads = [
        in_thread(released(call), outcome) for call, outcome in zip(calls, outcomes, strict=True)
    ]
    for thread in threads:
        thread.join(timeout)
    return [outcome[0] if outcome else None for outcome in outcomes]


def waiting_for_a_row_lock() -> bool:
    """Whether some connection to the test database waits for a lock (PostgreSQL): the racing
    transaction waits for the one a test holds open."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return cursor.fetchone()[0] > 0


def other_verdict_first(monkeypatch, other) -> None:
    """Run `other` (another admin's verdict) once, after the verdict under test read the work's
    status and before it stores its own: review._decide asks platform_confirms between the two."""
    from annotate.crowd.services import review

    confirms = review.platform_confirms
    pending = [other]

    def interleaved(platform_name):
        if pending:
            pending.pop()()
        return confirms(platform_name)

    monkeypatch.setattr(review, "platform_confirms", interleaved)
