"""End HITs on their platform, and keep each HIT whose end the platform did not confirm marked
as still live until it does.

A HIT an admin expired keeps taking workers, whose work MTurk pays, for as long as its
UpdateExpirationForHIT call has not gone through. So a HIT is stored expired (`expires_at`) only
once the platform confirmed it. An admin's Expire marks every live HIT `expiry_pending_since`
before the platform is asked (`hits_expiry_ask`, in the request; the calls run in the background,
annotate.crowd.services.review.publication_expire_run), so a run that stops half-way forgets
none; a refused or unanswered call leaves its HIT pending with the platform's error, shown on
the publication page and the API, and asked for again by the next Expire and by the sync beat
(`expiries_pending_retry`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from django.db.models import F, Q, QuerySet, Value
from django.db.models.functions import Coalesce

from annotate.crowd.models import Hit, HitStatus
from annotate.crowd.platforms import get_platform, platform_on_sandbox
from annotate.errors import CrowdPlatformError

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
        # Never empty: a pending HIT without an error is one not asked yet (hits_expiry_ask).
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
    first time asked kept; the last error cleared: it is asked again) before the platform is
    asked, so that a run stopping half-way (a worker killed, a task lost) leaves the rest to the
    sync beat instead of forgetting them; return how many."""
    return hits.filter(still_live_q(now=at)).update(
        expiry_pending_since=Coalesce(F("expiry_pending_since"), Value(at)), expiry_error=""
    )


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
