"""Send Celery tasks after the transaction commits, without losing them when the broker is down.

The web request that started the work has already committed (a judge run, an import, a
publication are rows in the database), so a broker outage must neither fail that request nor
forget the work: the task is stored as a DeferredTask and the beat's `deferred_tasks_send` sends
it once Redis answers again. Every task is safe to run twice, so a send that reached the broker
but lost its reply costs a duplicate run, never lost or doubled results.
"""

from __future__ import annotations

import logging
from datetime import datetime

from celery import Task
from django.db import transaction
from django.utils import timezone
from kombu.exceptions import OperationalError

from annotate.models import DeferredTask
from config.celery import app as celery_app

logger = logging.getLogger(__name__)


def task_send(*, task: Task, args: tuple | list = ()) -> bool:
    """Send `task` now; if the broker is unreachable, store it for the beat. True if sent."""
    try:
        # No retries here: a request starting 500 conversations must not wait out 500 timeouts;
        # whatever fails goes to the beat, which tries again within a minute.
        task.apply_async(args=list(args), retry=False)
    except OperationalError as error:
        logger.warning("Broker unreachable; %s%s deferred: %s", task.name, tuple(args), error)
        DeferredTask.objects.create(
            name=task.name, args=list(args), created_at=timezone.now(), last_error=str(error)
        )
        return False
    return True


def task_enqueue_on_commit(*, task: Task, args: tuple | list = ()) -> None:
    """Send `task` once the current transaction commits (at once outside one)."""
    transaction.on_commit(lambda: task_send(task=task, args=args))


def deferred_tasks_send(*, now: datetime, limit: int = 500) -> int:
    """Send stored tasks, oldest first; stop at the first broker failure. Return how many went.

    Rows are locked (SKIP LOCKED) while sent, so two beats or a double run never send one twice.
    """
    sent = 0
    with transaction.atomic():
        rows = DeferredTask.objects.select_for_update(skip_locked=True).order_by("id")[:limit]
        for row in rows:
            try:
                celery_app.tasks[row.name].apply_async(args=row.args, retry=False)
            except OperationalError as error:
                DeferredTask.objects.filter(pk=row.pk).update(
                    attempts=row.attempts + 1, last_error=f"{now:%H:%M:%S} {error}"
                )
                break
            row.delete()
            sent += 1
    return sent
