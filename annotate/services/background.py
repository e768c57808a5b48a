"""Start long work a page asked for without holding the request: a Celery task when a broker is
configured, else a thread of this process (settings.BACKGROUND_THREADS), after the commit."""

from __future__ import annotations

import logging
import threading

from celery import Task
from django import db
from django.conf import settings
from django.db import transaction

from annotate.services.deferred_tasks import task_enqueue_on_commit

logger = logging.getLogger(__name__)


def background_start(*, task: Task, args: tuple | list = ()) -> None:
    """Run `task(*args)` once the current transaction commits, never inside the web request."""
    if not settings.BACKGROUND_THREADS:
        task_enqueue_on_commit(task=task, args=args)
        return
    transaction.on_commit(lambda: _thread(task, tuple(args)))


def _thread(task: Task, args: tuple) -> None:
    def work() -> None:
        try:
            task.run(*args)  # the task records its own failure on its row
        except Exception:
            logger.exception("background %s%s failed", task.name, args)
        finally:
            db.connections.close_all()

    threading.Thread(target=work, name=f"background-{task.name}", daemon=True).start()
