"""Open claims per client address on the crowd worker pages, which have no login.

On a self-hosted link anyone may make up participant ids, and on an MTurk HIT's page anyone may
make up worker and assignment ids: every new one claims a task, and the claim holds one of its
task's slots until it is submitted, returned or its time runs out. The per-address rates (scope
"crowd-starts", "crowd-pages") bound how fast one client makes claims; this bounds how many of
its claims are open at once (CROWD_OPEN_CLAIMS_PER_ADDRESS), so one client cannot keep a batch's
tasks from everyone else. An honest worker holds one open claim at a time (a few behind a
shared address), and never meets it; a reload of a claim, or a participant's own claim handed
back to them, is no new claim.

Each address's claims are kept in the cache (the throttles' own) by assignment id; whether they
are still open is read from the database, so a claim submitted, returned, ended by a block or
run out frees its place at once. An address's requests that may claim take turns
(`one_at_a_time`, a lock in the same cache) from the check to the record: requests sent at once
all passed the check and each wrote its own list over the others', so a burst of forged ids
held far more than the limit.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.core.cache import cache

from annotate.errors import RateLimitedError
from annotate.models import Assignment, AssignmentStatus

_KEY = "crowd-open-claims:{address}"
# How long a request waits for the address's turn, and how long a turn is kept at most (a
# process killed holding it): far longer than a claim takes.
TURN_WAIT_SECONDS = 5.0
_TURN_SECONDS = 30


@dataclass(frozen=True)
class AddressClaims:
    """The open claims of one client address, checked before a new claim, recorded after."""

    address: str
    now: datetime

    @property
    def key(self) -> str:
        return _KEY.format(address=self.address)

    def _open(self) -> dict[int, datetime]:
        ids = cache.get(self.key) or []
        return dict(
            Assignment.objects.filter(
                pk__in=ids, status=AssignmentStatus.CLAIMED, expires_at__gt=self.now
            ).values_list("pk", "expires_at")
        )

    @contextmanager
    def one_at_a_time(self) -> Iterator[None]:
        """Hold the address's turn from `check` to `record`: its other requests that may
        claim wait for it (429 after TURN_WAIT_SECONDS)."""
        if not settings.CROWD_OPEN_CLAIMS_PER_ADDRESS:
            yield
            return
        turn = f"{self.key}:turn"
        deadline = time.monotonic() + TURN_WAIT_SECONDS
        while not cache.add(turn, True, timeout=_TURN_SECONDS):
            if time.monotonic() >= deadline:
                raise RateLimitedError(
                    retry_after=1,
                    what="requests at once",
                    rate="one at a time",
                    outcome="No task was given to you.",
                )
            time.sleep(0.05)
        try:
            yield
        finally:
            cache.delete(turn)

    def check(self) -> None:
        """Refuse a new claim (RateLimitedError, 429) while the address holds its limit of
        open claims; the wait is until the first of them runs out."""
        limit = settings.CROWD_OPEN_CLAIMS_PER_ADDRESS
        if not limit:
            return
        open_claims = self._open()
        if len(open_claims) < limit:
            return
        first_end = min(open_claims.values())
        raise RateLimitedError(
            retry_after=max(1, int((first_end - self.now).total_seconds())),
            what="open tasks",
            rate=f"{limit} at a time",
            outcome=(
                "Submit or return one of them first (a task whose time runs out frees its "
                "place too). No task was given to you."
            ),
        )

    def record(self, assignment: Assignment) -> None:
        """Count `assignment` among the address's claims while it is open."""
        if assignment.status != AssignmentStatus.CLAIMED or assignment.expires_at <= self.now:
            return
        open_claims = self._open()
        open_claims[assignment.pk] = assignment.expires_at
        last_end = max(open_claims.values())
        cache.set(self.key, list(open_claims), int((last_end - self.now).total_seconds()) + 60)
