"""Celery entry points: retry on throttling only, safe to run twice, periodic sync."""

import logging

import pytest
from celery.exceptions import Retry
from django.conf import settings as django_settings
from django.utils import timezone

from annotate.crowd import selectors, tasks
from annotate.crowd.models import HitStatus, PublicationStatus
from annotate.crowd.services import publishing
from annotate.crowd.services.publishing import PublishSettings
from annotate.errors import TransientPlatformError
from tests.factories import TaskFactory

pytestmark = pytest.mark.django_db


def _note(publication) -> str:
    """What the publication page and the API say of how it stands (selectors.publication_note)."""
    progress = selectors.publication_progress(publication=publication)
    return selectors.publication_note(publication=publication, progress=progress)


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
    task, asked = tasks.publish_publication, []

    def retry_later(*args, **kwargs):  # a worker's delivery: Celery sends the retry later
        asked.append(kwargs)
        raise Retry()

    task.retry = retry_later
    task.push_request(id="delivered", retries=0, is_eager=False)
    try:
        with pytest.raises(Retry):
            task(publication.pk)
    finally:
        task.pop_request()
        del task.retry
    assert asked
    publication.refresh_from_db()
    # It waits for the task's own retry, the only publish a throttled call hands it to...
    assert publication.status == PublicationStatus.PENDING
    assert "ThrottlingException" in publication.error and "retries by itself" in publication.error
    # ...which picks up where the first run stopped.
    assert tasks.publish_publication.apply(args=[publication.pk]).get() == "published"
    assert len(fake_mturk.state.hits) == 3
    assert fake_mturk.state.calls.count("CreateHITWithHITType") == 6
    assert tasks.publish_publication.retry_backoff and tasks.publish_publication.autoretry_for == (
        TransientPlatformError,
    )


def test_publish_task_run_in_the_request_leaves_a_throttled_publish_to_resume(
    mturk_settings, fake_mturk, crowd_batch
):
    """Without a broker the task runs in the request and no retry follows: the publication ends
    partial, and only the admin's Resume asks for the rest."""
    publication = _publication(crowd_batch)
    for _ in range(3):
        fake_mturk.fail_next("CreateHITWithHITType", "ThrottlingException")
    with pytest.raises(Retry):
        tasks.publish_publication.apply(args=[publication.pk])
    publication.refresh_from_db()
    assert publication.status == PublicationStatus.PARTIAL
    assert "Resume makes the 3 missing" in _note(publication)
    assert tasks.publish_publication.apply(args=[publication.pk]).get() == "partial"
    assert not fake_mturk.state.hits


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


def test_beat_syncs_a_publication_whose_publish_died_half_way(
    mturk_settings, fake_mturk, crowd_batch
):
    """A worker killed mid-publish leaves the publication 'publishing' with HITs out: workers
    take them and MTurk approves their work after its delay, and no sync ever looked."""
    publication = _publication(crowd_batch)
    publishing.publication_publish(publication_id=publication.pk, now=timezone.now())
    publication.status = PublicationStatus.PUBLISHING  # as the killed publish left it
    publication.save(update_fields=["status"])
    assert tasks.sync_all_publications.apply().get() == 1
    assert publication.hits.filter(synced_at__isnull=False).count() == 3


def test_selfhosted_publication_needs_no_platform(crowd_batch):
    publication = _publication(crowd_batch, platform="selfhosted")
    assert tasks.publish_publication.apply(args=[publication.pk]).get() == (
        PublicationStatus.PUBLISHED
    )
    assert not publication.hits.exists()


def test_beat_sync_goes_on_after_a_publication_that_fails(
    mturk_settings, fake_mturk, crowd_batch, caplog
):
    # Without a broker each sync runs inside the beat's loop: one publication whose HITs the
    # platform no longer has must not keep the others from syncing.
    other_batch = TaskFactory(batch__project=crowd_batch.project).batch
    lost, kept = _publication(crowd_batch), _publication(other_batch)
    for publication in (lost, kept):
        publishing.publication_publish(publication_id=publication.pk, now=timezone.now())
    lost_ids = set(lost.hits.values_list("hit_id", flat=True))
    for hit_id in lost_ids:
        del fake_mturk.state.hits[hit_id]

    with caplog.at_level(logging.ERROR, logger="annotate.crowd.tasks"):
        assert tasks.sync_all_publications.apply().get() == 2

    assert kept.hits.exclude(synced_at__isnull=False).count() == 0
    assert [r.getMessage() for r in caplog.records] == [
        f"Crowd sync of publication {lost.pk} failed"
    ]
