"""Celery entry points for crowd work. Each takes ids, is safe to run twice, and retries only when
the platform throttled or failed transiently, backing off exponentially."""

from __future__ import annotations

import logging

from celery import shared_task
from django.contrib.auth import get_user_model
from django.utils import timezone

from annotate.crowd.models import BonusStatus, Publication, PublicationStatus
from annotate.crowd.platforms import publication_on_other_endpoint
from annotate.crowd.services import expiry, publishing, review
from annotate.errors import FieldInputError, TransientPlatformError
from annotate.services.leases import LeaseHeldError

logger = logging.getLogger(__name__)

RETRY = {
    "autoretry_for": (TransientPlatformError,),
    "retry_backoff": 5,
    "retry_backoff_max": 600,
    "retry_jitter": True,
    "max_retries": 8,
}


# How many times a delivery that found the publish held by another looks again (each once that
# lease could be stale): a publish beating for longer than this ends itself.
LEASE_RETRIES = 12


def _user(user_id: int | None):
    return get_user_model().objects.filter(pk=user_id).first() if user_id else None


@shared_task(bind=True, **RETRY)
def publish_publication(self, publication_id: int, user_id: int | None = None) -> str:
    """Make the publication's missing HITs. A delivery while another makes them (Redis hands a
    task out again once it has run past the visibility timeout) makes none and looks again once
    that one's lease could be stale: if its worker died meanwhile, this one takes over."""
    try:
        publication = publishing.publication_publish(
            publication_id=publication_id,
            now=timezone.now(),
            user=_user(user_id),
            # Throttled with retries left, in a worker: the publication waits (pending) for this
            # task's retry. Run in the request (no broker), no retry follows: partial, Resume.
            retry_follows=not self.request.is_eager and self.request.retries < self.max_retries,
        )
    except LeaseHeldError as busy:
        if self.request.is_eager:  # run in the request: the delivery holding it ends it
            return PublicationStatus.PUBLISHING
        if self.request.retries >= LEASE_RETRIES:
            # Never taken: if the publish holding it fell silent meanwhile, the page says so and
            # offers Resume; one still beating ends it itself.
            publishing.publications_stalled_mark(now=timezone.now(), publication_id=publication_id)
            return Publication.objects.get(pk=publication_id).status
        raise self.retry(countdown=busy.retry_in, exc=busy, max_retries=LEASE_RETRIES) from None
    return publication.status


@shared_task(**RETRY)
def sync_publication(publication_id: int, user_id: int | None = None) -> dict:
    result = review.publication_sync(
        publication_id=publication_id, now=timezone.now(), user=_user(user_id)
    )
    return {"hits": result.hits, "seen": result.seen, "new": result.new}


@shared_task
def sync_all_publications() -> int:
    """Celery beat: mark publishes gone silent stalled, ask again for the expiries the platform
    did not confirm (a HIT an admin expired takes paid work until it does), then sync every
    publication that has HITs out, each as its own task: publishing and stalled too (a publish
    whose worker died half-way, a restart or a kill), their HITs taking workers whose work, and
    the platform's own approvals, only a sync confirms."""
    publishing.publications_stalled_mark(now=timezone.now())
    try:
        expiry.expiries_pending_retry(now=timezone.now())
    except Exception:  # a platform not configured any more, say: the syncs run all the same
        logger.exception("Crowd expiries still pending were not asked for again")
    live = [
        publication.pk
        for publication in Publication.objects.filter(
            status__in=[
                PublicationStatus.PUBLISHED,
                PublicationStatus.PARTIAL,
                PublicationStatus.PUBLISHING,
                PublicationStatus.STALLED,
            ]
        ).only("pk", "platform", "sandbox")
        # Made on the other MTurk endpoint (the sandbox, before going live): refused, not synced.
        if not publication_on_other_endpoint(publication)
    ]
    for publication_id in live:
        try:
            sync_publication.delay(publication_id)
        except Exception:
            # Without a broker (CELERY_TASK_ALWAYS_EAGER) each sync runs here and its error
            # comes back to this loop: logged, and the publications after it still sync.
            logger.exception("Crowd sync of publication %s failed", publication_id)
    return len(live)


@shared_task
def expire_publication(publication_id: int, user_id: int | None = None) -> dict:
    """An admin's Expire, its platform calls (publication_expire_run). Not retried: each HIT the
    platform did not confirm stays marked, and the beat asks for it again."""
    outcome = review.publication_expire_run(
        publication_id=publication_id, now=timezone.now(), user=_user(user_id)
    )
    return {"expired": outcome.expired, "failed": outcome.failed}


@shared_task(**RETRY)
def pay_bonus(bonus_id: int, user_id: int) -> str:
    """Send a stored bonus; a bonus over CROWD_BONUS_MAX_USD now is marked failed with why (the
    review page shows it), the refusal not raised again here."""
    try:
        return review.bonus_pay(bonus_id=bonus_id, user=_user(user_id), now=timezone.now()).status
    except FieldInputError:
        return BonusStatus.FAILED
