"""Celery entry points for crowd work. Each takes ids, is safe to run twice, and retries only when
the platform throttled or failed transiently, backing off exponentially."""

from __future__ import annotations

import logging

from celery import shared_task
from django.contrib.auth import get_user_model
from django.utils import timezone

from annotate.crowd.models import Publication, PublicationStatus
from annotate.crowd.services import publishing, review
from annotate.errors import TransientPlatformError

logger = logging.getLogger(__name__)

RETRY = {
    "autoretry_for": (TransientPlatformError,),
    "retry_backoff": 5,
    "retry_backoff_max": 600,
    "retry_jitter": True,
    "max_retries": 8,
}


def _user(user_id: int | None):
    return get_user_model().objects.filter(pk=user_id).first() if user_id else None


@shared_task(**RETRY)
def publish_publication(publication_id: int, user_id: int | None = None) -> str:
    publication = publishing.publication_publish(
        publication_id=publication_id, now=timezone.now(), user=_user(user_id)
    )
    return publication.status


@shared_task(**RETRY)
def sync_publication(publication_id: int, user_id: int | None = None) -> dict:
    result = review.publication_sync(
        publication_id=publication_id, now=timezone.now(), user=_user(user_id)
    )
    return {"hits": result.hits, "seen": result.seen, "new": result.new}


@shared_task
def sync_all_publications() -> int:
    """Celery beat: sync every publication that has HITs out, each as its own task: publishing
    too, which is also what a publish whose worker died half-way (a restart, a kill) stays, its
    HITs taking workers whose work, and the platform's own approvals, only a sync confirms."""
    live = Publication.objects.filter(
        status__in=[
            PublicationStatus.PUBLISHED,
            PublicationStatus.PARTIAL,
            PublicationStatus.PUBLISHING,
        ]
    ).values_list("pk", flat=True)
    for publication_id in live:
        try:
            sync_publication.delay(publication_id)
        except Exception:
            # Without a broker (CELERY_TASK_ALWAYS_EAGER) each sync runs here and its error
            # comes back to this loop: logged, and the publications after it still sync.
            logger.exception("Crowd sync of publication %s failed", publication_id)
    return len(live)


@shared_task(**RETRY)
def pay_bonus(bonus_id: int, user_id: int) -> str:
    return review.bonus_pay(bonus_id=bonus_id, user=_user(user_id), now=timezone.now()).status
