"""Start a model call in the background once the transaction that asked for it commits.

`REVISION_GENERATION` chooses how: "celery" (the default when a broker is configured), "thread"
(the embedded default: a thread of this process, so the web request answers at once), or
"inline" (tests: run in the on-commit callback). A thread that dies with the process leaves the
answer pending; the session page turns an answer pending too long into a failure with a retry
button (annotate.revision.services.sessions.stale_calls_fail).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from django.conf import settings
from django.db import close_old_connections, connection, transaction

from annotate.services.deferred_tasks import task_send


def _mode() -> str:
    configured = getattr(settings, "REVISION_GENERATION", "")
    if configured:
        return configured
    return "thread" if settings.CELERY_TASK_ALWAYS_EAGER else "celery"


def _in_thread(function: Callable[..., None], object_id: int) -> None:
    def run() -> None:
        close_old_connections()
        try:
            function(object_id)
        finally:
            connection.close()

    threading.Thread(target=run, name=f"revision-{object_id}", daemon=True).start()


def _start(task_name: str, object_id: int) -> None:
    from annotate.revision import tasks  # the tasks import services, which import this module

    task = {"initial": tasks.generate_initial_task, "turn": tasks.generate_turn_task}[task_name]
    mode = _mode()
    if mode == "celery":
        task_send(task=task, args=(object_id,))
    elif mode == "thread":
        _in_thread(task.run, object_id)
    else:
        task.run(object_id)


def generation_enqueue(*, what: str, object_id: int) -> None:
    """Generate the initial answer ("initial", a session id) or a turn ("turn", a turn id)."""
    transaction.on_commit(lambda: _start(what, object_id))
