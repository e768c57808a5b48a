"""End HITs on their platform, and keep each HIT whose end the platform did not confirm marked
as still live until it does.

A HIT an admin expired keeps taking workers, whose work MTurk pays, for as long as its
UpdateExpirationForHIT call has not gone through. So a HIT is stored expired (`expires_at`) only
once the platform confirmed it. An admin's Expire marks every live HIT `expiry_pending_since`
before the platform is asked (`hits_expiry_ask`, in the request; the calls run in the background,
annotate.crowd.services.review.publication_expire_run, whose state is stored on the publication:
`expiry_run_of`), so a run that stops half-way forgets none; a refused or unanswered call leaves its HIT pending with the platform's error, shown on
the publication page and the API, and asked for again by the next Expire and by the sync beat
(`expiries_pending_retry`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import F, Q, QuerySet, Value
from django.db.models.functions import Coalesce, Now

from annotate.crowd.models import Hit, HitStatus, Publication
from annotate.crowd.platforms import get_platform, platform_on_sandbox
from annotate.errors import CrowdPlatformError
from annotate.services.leases import lease_silent

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ExpiryOutcome:
    """How many HITs the platform confirmed expired, and how many it did not (still live), with
    the first of its errors; `unchecked`: why HITs a stopped publish may have made on the
    platform were not looked for (publication_orphans_adopt), when they were not."""

    expired: int = 0
    failed: int = 0
    error: str = ""
    unchecked: str = ""

    def __add__(self, other: ExpiryOutcome) -> ExpiryOutcome:
        return ExpiryOutcome(
            self.expired + other.expired, self.failed + other.failed, self.error or other.error
        )


def still_live_q(*, now: datetime, prefix: str = "") -> Q:
    """HITs workers may still take at `now`: made, and not ended by a time the platform
    confirmed, or whose expiry it has not confirmed yet."""
    return Q(**{f"{prefix}status": HitStatus.CREATED}) & (
        Q(**{f"{prefix}expires_at__isnull": True})
        | Q(**{f"{prefix}expires_at__gt": now})
        | Q(**{f"{prefix}expiry_pending_since__isnull": False})
    )


def hit_expire(hit: Hit, platform, *, at: datetime) -> bool:
    """Ask the platform to end `hit` at `at` (a time past ends it at once); return whether it
    confirmed. Confirmed, the HIT is stored as ending then; refused or unanswered (boto3's retries
    spent), it is stored as still live with the error, its `expires_at` left as the platform
    last confirmed it."""
    try:
        platform.hit_update_expiration(hit_id=hit.hit_id, expires_at=at)
    except CrowdPlatformError as error:
        logger.warning("HIT %s not expired: %s", hit.hit_id, error)
        # Never empty: a pending HIT without an error is one the platform has not answered about
        # yet (hits_expiry_ask); this refusal stays until it answers again.
        hit.expiry_error = (str(error) or type(error).__name__)[:2000]
        # The first time asked stays: how long the HIT has been live against the admin's wish.
        Hit.objects.filter(pk=hit.pk).update(
            expiry_pending_since=Coalesce(F("expiry_pending_since"), Value(at)),
            expiry_error=hit.expiry_error,
        )
        hit.expiry_pending_since = hit.expiry_pending_since or at
        return False
    ended = at if hit.expires_at is None else min(hit.expires_at, at)
    hit.expires_at, hit.expiry_pending_since, hit.expiry_error = ended, None, ""
    hit.save(update_fields=["expires_at", "expiry_pending_since", "expiry_error"])
    return True


def hits_expiry_ask(hits: QuerySet[Hit], *, at: datetime) -> int:
    """Mark every HIT of `hits` still live at `at` as to be ended (`expiry_pending_since`, the
    first time asked kept) before the platform is asked, so that a run stopping half-way (a
    worker killed, a task lost) leaves the rest to the sync beat instead of forgetting them;
    return how many. The platform's last refusal stays until it answers again: a run that
    never comes leaves it shown, not a HIT that looks merely "not asked yet"."""
    return hits.filter(still_live_q(now=at)).update(
        expiry_pending_since=Coalesce(F("expiry_pending_since"), Value(at))
    )


class ExpiryRunState:
    """Where a publication's last Expire is (expiry_run_of)."""

    NONE = ""  # never pressed
    ASKED = "asked"  # pressed; its run has not started
    RUNNING = "running"  # its run asks the platform, and beats
    FINISHED = "finished"  # its run ended: `outcome` says how (an error too)
    STOPPED = "stopped"  # silent for CROWD_EXPIRY_STALE_SECONDS: killed, or its task lost


@dataclass(frozen=True)
class ExpiryRun:
    """The last Expire of a publication as its page and the API show it."""

    state: str
    asked_at: datetime | None = None
    started_at: datetime | None = None
    heartbeat_at: datetime | None = None
    finished_at: datetime | None = None
    outcome: str = ""

    @property
    def alive(self) -> bool:
        """Waiting for its run, or running: the page refreshes, and Expire is not pressed twice."""
        return self.state in (ExpiryRunState.ASKED, ExpiryRunState.RUNNING)


def expiry_stale_before(now: datetime) -> datetime:
    return now - timedelta(seconds=settings.CROWD_EXPIRY_STALE_SECONDS)


def expiry_run_of(publication: Publication, *, now: datetime) -> ExpiryRun:
    """The state of the publication's last Expire at `now` (the database's: expiry_run_read).
    One asked and never started, or
    started and silent, for CROWD_EXPIRY_STALE_SECONDS stopped: nothing of it runs any more
    (its worker was killed, or its task lost), and Expire may be pressed again."""
    p, stale = publication, expiry_stale_before(now)
    if p.expiry_asked_at is None:
        state = ExpiryRunState.NONE
    elif p.expiry_finished_at is not None:
        state = ExpiryRunState.FINISHED
    elif p.expiry_started_at is None:
        state = ExpiryRunState.ASKED if p.expiry_asked_at >= stale else ExpiryRunState.STOPPED
    else:
        beat = p.expiry_heartbeat_at or p.expiry_started_at
        state = ExpiryRunState.RUNNING if beat >= stale else ExpiryRunState.STOPPED
    return ExpiryRun(
        state=state,
        asked_at=p.expiry_asked_at,
        started_at=p.expiry_started_at,
        heartbeat_at=p.expiry_heartbeat_at,
        finished_at=p.expiry_finished_at,
        outcome=p.expiry_outcome,
    )


def expiry_run_read(publication_id: int) -> ExpiryRun:
    """The state of the publication's last Expire now by the database's clock, read with its
    row: its asked time and heartbeat are written by that clock, not this host's."""
    row = Publication.objects.annotate(database_now=Now()).get(pk=publication_id)
    return expiry_run_of(row, now=row.database_now)


def expiry_unfinished_q() -> Q:
    """Publications whose last Expire was pressed and whose run has not ended."""
    return Q(expiry_asked_at__isnull=False, expiry_finished_at__isnull=True)


def expiry_alive_q() -> Q:
    """Publications whose last Expire waits for its run, or runs (expiry_run_of), by the
    database's clock, which its asked time and heartbeat are written by (not the web host's:
    one running ahead by more than the threshold took a running Expire for stopped)."""
    stale = settings.CROWD_EXPIRY_STALE_SECONDS
    waits = Q(expiry_started_at__isnull=True) & ~lease_silent(
        stale_seconds=stale, heartbeat_field="expiry_asked_at"
    )
    runs = Q(expiry_started_at__isnull=False) & ~lease_silent(
        stale_seconds=stale, heartbeat_field="expiry_heartbeat_at", since_field="expiry_started_at"
    )
    return expiry_unfinished_q() & (waits | runs)


def expiry_claimable_q() -> Q:
    """Publications whose last Expire a delivery of its run may take: not started yet, or
    started and silent (its worker killed) by the database's clock, which its heartbeat is
    written by (not a worker's: two hosts' clocks may differ by more than the threshold)."""
    silent = lease_silent(
        stale_seconds=settings.CROWD_EXPIRY_STALE_SECONDS, heartbeat_field="expiry_heartbeat_at"
    )
    return expiry_unfinished_q() & (Q(expiry_started_at__isnull=True) | silent)


def expiry_summary(outcome: ExpiryOutcome) -> str:
    """What an Expire came to, in a sentence for the publication page and the API."""
    said = f"{outcome.expired} HIT{_s(outcome.expired)} expired"
    if outcome.failed:
        said += (
            f"; {outcome.failed} HIT{_s(outcome.failed)} not confirmed by the platform "
            f"({outcome.error}): still live"
        )
    said += "."
    if outcome.unchecked:
        said += f" {outcome.unchecked}."
    return said


def _s(count: int) -> str:
    return "" if count == 1 else "s"


def hits_expire(hits: QuerySet[Hit], platform, *, at: datetime) -> ExpiryOutcome:
    """End every HIT of `hits` still live at `at` (whose expiry is pending included), each
    whatever became of the ones before it: one call that fails leaves only its own HIT live."""
    outcome = ExpiryOutcome()
    for hit in hits.filter(still_live_q(now=at)).order_by("id"):
        done = hit_expire(hit, platform, at=at)
        outcome += ExpiryOutcome(int(done), int(not done), "" if done else hit.expiry_error)
    return outcome


def expiries_pending_retry(*, now: datetime, user=None) -> ExpiryOutcome:
    """Ask again for every expiry the platform has not confirmed (the sync beat); safe to run
    twice or at once, as ending a HIT that ended already is."""
    pending = Hit.objects.filter(status=HitStatus.CREATED, expiry_pending_since__isnull=False)
    outcome = ExpiryOutcome()
    made_on = pending.values_list("publication__platform", "publication__sandbox")
    for name, sandbox in made_on.distinct().order_by():
        if sandbox != platform_on_sandbox(name):
            # Made on the other MTurk endpoint (publication_endpoint_check): unknown there.
            continue
        hits = pending.filter(publication__platform=name, publication__sandbox=sandbox)
        outcome += hits_expire(hits, get_platform(name, user=user), at=now)
    return outcome
