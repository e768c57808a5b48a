"""Leases on job rows: of two deliveries of one Celery task (Redis hands a task still running
after the visibility timeout to a second worker), only the one holding the job's lease works.

A job model taking part has `lease` (the holder's token) and `heartbeat_at` (its last sign of
life). The lease is taken by one conditional UPDATE, so of two deliveries at once one gets it;
`claimable` says when (queued, or running but silent: its worker died). The model engine's
chunks take theirs here too, and renew it between calls (annotate.engine.services.runs
._ChunkLease) instead of in a thread.

A lease is written and aged by the database's clock (`Now()`: PostgreSQL's statement time,
SQLite's clock), never a worker's: two hosts whose clocks differ by more than the stale
threshold would otherwise both run one job, the one whose clock runs ahead (or whose holder's
runs behind) taking a lease that still beats. `lease_silent` is the take's staleness test,
`lease_beating` the renewal, `lease_held_retry_in` the wait of a delivery that found it held.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta

from django.db import DatabaseError, connection
from django.db.models import Q, QuerySet
from django.db.models.functions import Now

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
    now: datetime | Now,
    heartbeat_field: str = "heartbeat_at",
    lease_field: str = "lease",
    **fields,
) -> str | None:
    """Give the job (a queryset of its one row) a new lease if it is `claimable`, setting
    `fields` in the same UPDATE; return the token, or None when another delivery holds it.
    `heartbeat_field`, `lease_field`: the model's columns (an engine chunk's heartbeat is
    `heartbeat`; a publication's Expire has its own pair beside its publish's); `now` the
    heartbeat's value, `Now()` for the database's clock."""
    token = uuid.uuid4().hex
    taken = job.filter(claimable).update(**{lease_field: token, heartbeat_field: now}, **fields)
    return token if taken else None


def lease_silent(
    *, stale_seconds: float, heartbeat_field: str = "heartbeat_at", since_field: str = ""
) -> Q:
    """Rows whose lease gave no sign of life for `stale_seconds` by the database's clock: last
    heartbeat older than that, or, with `since_field` (when the row was made), never beaten and
    made before it. Compared in the UPDATE that takes the lease, with `now=Now()`."""
    silent_since = Now() - timedelta(seconds=stale_seconds)
    silent = Q(**{f"{heartbeat_field}__lt": silent_since})
    if since_field:
        silent |= Q(**{f"{heartbeat_field}__isnull": True, f"{since_field}__lt": silent_since})
    return silent


def lease_held_retry_in(
    *, job: QuerySet, stale_seconds: float, heartbeat_field: str = "heartbeat_at"
) -> float:
    """Seconds until the lease of the job (a queryset of its one row), which another delivery
    holds, is stale should it stop beating: its heartbeat aged by the database's clock."""
    row = job.annotate(database_now=Now()).values_list(heartbeat_field, "database_now").first()
    if row is None:  # gone meanwhile: look again soon, and find it gone
        return 1.0
    heartbeat_at, database_now = row
    return lease_retry_in(heartbeat_at=heartbeat_at, stale_seconds=stale_seconds, now=database_now)


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
    """Stamp the job's heartbeat (the database's clock) every `every` seconds, while the lease
    is `token`'s, in a thread of its own for as long as the block runs."""
    stop = threading.Event()
    mine = job.filter(**{lease_field: token})

    def beat() -> None:
        try:
            while not stop.wait(every):
                try:
                    mine.update(**{heartbeat_field: Now()})
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
