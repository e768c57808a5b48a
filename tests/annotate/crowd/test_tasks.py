"""Celery entry points: retry on throttling only, safe to run twice, periodic sync."""

import pytest
from celery.exceptions import Retry
from django.conf import settings as django_settings
from django.utils import timezone

from annotate.crowd import tasks
from annotate.crowd.models import HitStatus, PublicationStatus
from annotate.crowd.services import publishing
from annotate.crowd.services.publishing import PublishSettings
from annotate.errors import TransientPlatformError

pytestmark = pytest.mark.django_db


def _publication(batch, platform="mturk"):
    return publishing.publication_create(
        batch=batch,
        platform_name=platform,
        chosen=PublishSettings(title="t", description="d"),
        base_url="https://annotate.example.org",
    )


def test_publish_task_retries_when_throttled_and_finishes(mturk_settings, fake_mturk, crowd_batch):
    publication = _publication(crowd_batch)
    for _ in range(3):  # boto3's own three attempts all throttled: the task asks for a retry
        fake_mturk.fail_next("CreateHITWithHITType", "ThrottlingException")
    with pytest.raises(Retry):
        tasks.publish_publication.apply(args=[publication.pk])
    publication.refresh_from_db()
    assert publication.status == PublicationStatus.PARTIAL
    assert "ThrottlingException" in publication.error
    # The retry (Celery runs it after the backoff) picks up where the first run stopped.
    assert tasks.publish_publication.apply(args=[publication.pk]).get() == "published"
    assert len(fake_mturk.state.hits) == 3
    assert fake_mturk.state.calls.count("CreateHITWithHITType") == 6
    assert tasks.publish_publication.retry_backoff and tasks.publish_publication.autoretry_for == (
        TransientPlatformError,
    )


def test_publish_task_does_not_retry_refusals(mturk_settings, fake_mturk, crowd_batch):
    publication = _publication(crowd_batch)
    fake_mturk.fail_next("CreateHITType", "RequestError", "Reward is too low")
    assert tasks.publish_publication.apply(args=[publication.pk]).get() == "failed"
    assert fake_mturk.state.calls.count("CreateHITType") == 1
    publication.refresh_from_db()
    assert "Reward is too low" in publication.error
    assert not publication.hits.filter(status=HitStatus.CREATED).exists()


def test_beat_syncs_every_live_publication(mturk_settings, fake_mturk, crowd_batch):
    publication = _publication(crowd_batch)
    publishing.publication_publish(publication_id=publication.pk, now=timezone.now())
    assert tasks.sync_all_publications.apply().get() == 1
    assert publication.hits.filter(synced_at__isnull=False).count() == 3
    schedule = django_settings.CELERY_BEAT_SCHEDULE["crowd-sync"]
    assert schedule["task"] == tasks.sync_all_publications.name


def test_selfhosted_publication_needs_no_platform(crowd_batch):
    publication = _publication(crowd_batch, platform="selfhosted")
    assert tasks.publish_publication.apply(args=[publication.pk]).get() == (
        PublicationStatus.PUBLISHED
    )
    assert not publication.hits.exists()
