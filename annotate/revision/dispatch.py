"""Start a model call in the background once the transaction that asked for it commits.

`REVISION_GENERATION` chooses how: "celery" (the default when a broker is configured), "thread"
(the embedded default: a thread of this process, reused from job to job, so the web request
answers at once), or "inline" (tests: run in the on-commit callback). A thread that dies with the process leaves the
answer pending; the session page turns an answer pending too long into a failure with a retry
button (annotate.revision.services.sessions.stale_calls_fail).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

from django.conf import settings
from django.db import close_old_connections, connection, transaction

from annotate.services.deferred_tasks import task_send

logger = logging.getLogger(__name__)


def _mode() -> str:
    configured = getattr(settings, "REVISION_GENERATION", "")
    if configured:
        return configured
    return "thread" if settings.CELERY_TASK_ALWAYS_EAGER else "celery"


class _ThreadPool:
    """Daemon threads of this process that run generation jobs, reused from job to job.

    A job never waits for another: it goes to an idle thread, else to a new one. Reusing the
    threads keeps their database connections (within CONN_MAX_AGE) and spares the web request
    that enqueued the job the start of a thread; a thread idle for IDLE_SECONDS ends.
    """

    IDLE_SECONDS = 60.0

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0  # threads waiting for a job and not yet promised one
        self._started = 0

    def submit(self, function: Callable[[int], None], object_id: int) -> None:
        with self._lock:
            if self._idle:
                self._idle -= 1  # promised to this job
                start = False
            else:
                self._started += 1
                start = True
        self._jobs.put((function, object_id))
        if start:
            name = f"revision-{self._started}"
            threading.Thread(target=self._work, name=name, daemon=True).start()

    def _work(self) -> None:
        try:
            while True:
                try:
                    function, object_id = self._jobs.get(timeout=self.IDLE_SECONDS)
                except queue.Empty:
                    with self._lock:
                        if not self._idle:  # promised a job that is on its way: take it
                            continue
                        self._idle -= 1
                    return
                close_old_connections()
                try:
                    function(object_id)
                except Exception:
                    logger.exception("revision generation job %s failed", object_id)
                finally:
                    close_old_connections()
                with self._lock:
                    self._idle += 1
        finally:
            connection.close()


_pool = _ThreadPool()


def _start(task_name: str, object_id: int) -> None:
    from annotate.revision import tasks  # the tasks import services, which import this module

    task = {"initial": tasks.generate_initial_task, "turn": tasks.generate_turn_task}[task_name]
    mode = _mode()
    if mode == "celery":
        task_send(task=task, args=(object_id,))
    elif mode == "thread":
        _pool.submit(task.run, object_id)
    else:
        task.run(object_id)


def generation_enqueue(*, what: str, object_id: int) -> None:
    """Generate the initial answer ("initial", a session id) or a turn ("turn", a turn id)."""
    transaction.on_commit(lambda: _start(what, object_id))
