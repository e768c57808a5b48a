"""Running a delivery in a thread of its own, as a second worker would, for the tests of what
two deliveries of one task at once do."""

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
