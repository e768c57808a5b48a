"""Leases on job rows: of two deliveries of one Celery task (Redis hands a task still running
after the visibility timeout to a second worker), only the one holding the job's lease works.

A job model taking part has `lease` (the holder's token) and `heartbeat_at` (its last sign of
life). The lease is taken by one conditional UPDATE, so of two deliveries at once one gets it;
`claimable` says when (queued, or running but silent: its worker died). The model engine's
chunks take theirs here too, and renew it between calls (annotate.engine.services.runs
._ChunkLease) instead of in a thread.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime

from django.db import DatabaseError, connection
from django.db.models import Q, QuerySet
from django.utils import timezone

logger = logging.getLogger(__name__)


class LeaseHeldError(Exception):
    """Another delivery holds the job's lease and beats: this one did nothing. `retry_in`:
    seconds after which that lease would be stale if it stopped beating, when to look again."""

    def __init__(self, job: str, *, retry_in: float) -> None:
        self.retry_in = retry_in
        super().__init__(
            f"{job} is run by another delivery of its task: this one did nothing and looks "
            f"again in {retry_in:.0f} s."
        )


def lease_take(
    *,
    job: QuerySet,
    claimable: Q,
    now: datetime,
    heartbeat_field: str = "heartbeat_at",
    lease_field: str = "lease",
    **fields,
) -> str | None:
    """Give the job (a queryset of its one row) a new lease if it is `claimable`, setting
    `fields` in the same UPDATE; return the token, or None when another delivery holds it.
    `heartbeat_field`, `lease_field`: the model's columns (an engine chunk's heartbeat is
    `heartbeat`; a publication's Expire has its own pair beside its publish's)."""
    token = uuid.uuid4().hex
    taken = job.filter(claimable).update(**{lease_field: token, heartbeat_field: now}, **fields)
    return token if taken else None


def lease_retry_in(*, heartbeat_at: datetime | None, stale_seconds: float, now: datetime) -> float:
    """Seconds until a lease last renewed at `heartbeat_at` is stale (at least 1)."""
    beat = heartbeat_at or now
    return max(1.0, stale_seconds - (now - beat).total_seconds() + 1)


@contextmanager
def lease_beating(
    *,
    job: QuerySet,
    token: str,
    every: float,
    heartbeat_field: str = "heartbeat_at",
    lease_field: str = "lease",
) -> Iterator[None]:
    """Stamp the job's heartbeat every `every` seconds, while the lease is `token`'s, in a
    thread of its own for as long as the block runs."""
    stop = threading.Event()
    mine = job.filter(**{lease_field: token})

    def beat() -> None:
        try:
            while not stop.wait(every):
                try:
                    mine.update(**{heartbeat_field: timezone.now()})
                except DatabaseError:  # SQLite busy with the job's own writes: the next beat
                    logger.warning("%s: heartbeat not stored", job.model.__name__)
        finally:
            connection.close()  # this thread's own connection

    thread = threading.Thread(target=beat, name=f"{job.model.__name__}-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
