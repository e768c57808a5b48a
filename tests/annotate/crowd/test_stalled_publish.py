"""A publish whose worker died half-way: shown stalled (not busy forever), resumed by an admin
who confirms the missing HITs' cost again, each HIT made once. Over real boto3 to the fake
MTurk server; the death is a BaseException raised inside the publish, which nothing of ours
catches, as a SIGKILL leaves it: the publication "publishing" with its last heartbeat."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.db.models import F
from django.db.models.functions import Now
from django.urls import reverse
from django.utils import timezone

from annotate.crowd import selectors, tasks
from annotate.crowd.models import HitStatus, Publication, PublicationStatus
from annotate.crowd.services import publishing, review
from annotate.crowd.services.publishing import PublishSettings
from annotate.errors import ConflictError, PublishError, TransientPlatformError
from annotate.services.leases import LeaseHeldError
from tests.clocks import clock_off_by

pytestmark = pytest.mark.django_db
REFRESH = 'http-equiv="refresh"'
# 3 assignments × ($1.00 + MTurk's 20% fee) a HIT
PER_HIT = Decimal("3.60")


def _note(publication) -> str:
    """What the publication page and the API say of how it stands (selectors.publication_note)."""
    progress = selectors.publication_progress(publication=publication)
    return selectors.publication_note(publication=publication, progress=progress)


class WorkerKilled(BaseException):
    """The worker's process ended mid-publish: no `except Exception` of ours runs."""


def _create(batch):
    return publishing.publication_create(
        batch=batch,
        platform_name="mturk",
        chosen=PublishSettings(title="t", description="d", reward_usd=Decimal("1.00")),
        base_url="https://annotate.example.org",
    )


def _killed_publish(monkeypatch, publication, *, made: int, error: BaseException | None = None):
    """Publish until `made` HITs are made on MTurk, then die (or raise `error`) before the last
    of them is stored here: its reply came back to a process that stopped."""
    real, stored = publishing._hit_created, []

    def dying(hit, info):
        if len(stored) == made - 1:
            raise error or WorkerKilled()
        stored.append(hit.pk)
        real(hit, info)

    monkeypatch.setattr(publishing, "_hit_created", dying)
    with pytest.raises(type(error) if error else WorkerKilled):
        publishing.publication_publish(publication_id=publication.pk, now=timezone.now())
    monkeypatch.setattr(publishing, "_hit_created", real)
    publication.refresh_from_db()
    return publication


def _silent_since(publication, settings, extra=1):
    """The publish's last sign of life is older than CROWD_PUBLISH_STALE_SECONDS."""
    then = timezone.now() - timedelta(seconds=settings.CROWD_PUBLISH_STALE_SECONDS + extra)
    Publication.objects.filter(pk=publication.pk).update(heartbeat_at=then)


def _time_passes(publication, elapsed: timedelta) -> None:
    """`elapsed` passes for the publication: when it was made and its last sign of life move
    that far back, by the database's clock the beat and a publish judge them by."""
    Publication.objects.filter(pk=publication.pk).update(
        created_at=F("created_at") - elapsed,
        heartbeat_at=F("heartbeat_at") - elapsed,
    )


def _ours_are_the_servers(publication, fake_mturk):
    ours = set(publication.hits.filter(status=HitStatus.CREATED).values_list("hit_id", flat=True))
    return ours == set(fake_mturk.state.hits)


def test_a_publish_killed_half_way_is_shown_stalled_and_the_admins_resume_finishes_it(
    monkeypatch, client, admin_user, mturk_settings, fake_mturk, crowd_batch, settings,
    django_capture_on_commit_callbacks,
):  # fmt: skip
    """It stayed "publishing" for good: the page refreshed every 2 s, waiting, and offered
    nothing; the third task never got a HIT."""
    publication = _killed_publish(monkeypatch, _create(crowd_batch), made=2)
    assert publication.status == PublicationStatus.PUBLISHING
    assert len(fake_mturk.state.hits) == 2  # the second made on MTurk, not stored here
    client.force_login(admin_user)
    url = reverse("crowd:publication", args=[publication.pk])
    page = client.get(url).text  # its worker may be alive: the page waits for it
    assert REFRESH in page and 'id="resume-button"' not in page

    _silent_since(publication, settings)
    page = client.get(url).text
    assert REFRESH not in page
    assert "<strong>Stalled (the publish stopped before its end)</strong>" in page
    assert "1 of 3 HITs made; Resume makes the 2 missing, none twice." in page
    assert f'id="resume-total">${2 * PER_HIT}<' in page
    assert f"Resume: publish the 2 missing HITs (${2 * PER_HIT})</button>" in page

    with django_capture_on_commit_callbacks(execute=True):
        answer = client.post(
            reverse("crowd:publication-action", args=[publication.pk]),
            {"action": "publish", "confirm_total": str(2 * PER_HIT)},
        )
    assert answer.status_code == 302
    publication.refresh_from_db()
    assert publication.status == PublicationStatus.PUBLISHED and publication.error == ""
    assert len(fake_mturk.state.hits) == 3  # the second adopted by its token, not made twice
    assert _ours_are_the_servers(publication, fake_mturk)
    page = client.get(url).text
    assert REFRESH not in page and 'id="resume"' not in page


def test_a_resume_after_mturk_forgot_the_tokens_adopts_the_hit_the_dead_publish_made(
    monkeypatch, admin_user, mturk_settings, fake_mturk, crowd_batch
):
    """MTurk keeps a UniqueRequestToken 24 hours: resumed two days later, the HIT made just
    before the death is found by its RequesterAnnotation instead of being made (paid) again."""
    publication = _killed_publish(monkeypatch, _create(crowd_batch), made=2)
    fake_mturk.forget_tokens()
    _time_passes(publication, timedelta(days=2))
    resumed = publishing.publication_resume(
        publication_id=publication.pk,
        confirm_total=2 * PER_HIT,
        now=timezone.now(),
        user=admin_user,
    )
    assert resumed.status == PublicationStatus.PENDING
    done = publishing.publication_publish(publication_id=publication.pk, now=timezone.now())
    assert done.status == PublicationStatus.PUBLISHED
    assert len(fake_mturk.state.hits) == 3
    assert _ours_are_the_servers(publication, fake_mturk)


def test_a_resume_checks_the_cost_again_and_the_balance(
    monkeypatch, admin_user, mturk_settings, fake_mturk, crowd_batch, settings
):
    publication = _killed_publish(monkeypatch, _create(crowd_batch), made=2)
    _silent_since(publication, settings)
    now = timezone.now()
    with pytest.raises(PublishError, match=r"cost \$7.20 \(you confirmed \$3.60\)"):
        publishing.publication_resume(
            publication_id=publication.pk, confirm_total=PER_HIT, now=now, user=admin_user
        )
    fake_mturk.state.balance = Decimal("5.00")
    with pytest.raises(PublishError, match=r"has \$5.00, less than the \$7.20"):
        publishing.publication_resume(
            publication_id=publication.pk, confirm_total=2 * PER_HIT, now=now, user=admin_user
        )
    publication.refresh_from_db()
    assert publication.status == PublicationStatus.STALLED  # nothing resumed, nothing made
    assert len(fake_mturk.state.hits) == 2


def test_the_page_offers_no_resume_the_balance_cannot_pay(
    monkeypatch, client, admin_user, mturk_settings, fake_mturk, crowd_batch, settings
):
    publication = _killed_publish(monkeypatch, _create(crowd_batch), made=2)
    _silent_since(publication, settings)
    fake_mturk.state.balance = Decimal("5.00")
    client.force_login(admin_user)
    action = reverse("crowd:publication-action", args=[publication.pk])
    client.post(action, {"action": "balance"})  # the page's GET asks MTurk nothing
    page = client.get(reverse("crowd:publication", args=[publication.pk])).text
    assert 'id="resume-unaffordable"' in page and 'id="resume-button"' not in page


def test_a_resume_is_refused_while_the_publish_still_beats(
    monkeypatch, admin_user, mturk_settings, fake_mturk, crowd_batch
):
    publication = _killed_publish(monkeypatch, _create(crowd_batch), made=2)
    with pytest.raises(ConflictError, match="is being published"):
        publishing.publication_resume(
            publication_id=publication.pk,
            confirm_total=2 * PER_HIT,
            now=timezone.now(),
            user=admin_user,
        )
    publication.refresh_from_db()
    assert publication.status == PublicationStatus.PUBLISHING


def test_a_second_delivery_takes_a_silent_publish_over(
    monkeypatch, mturk_settings, fake_mturk, crowd_batch, settings
):
    """The killed worker's task delivered again (Celery acks late): while the dead publish's
    lease could still be alive it waits; once silent, it makes the missing HITs."""
    publication = _killed_publish(monkeypatch, _create(crowd_batch), made=2)
    assert tasks.publish_publication.apply(args=[publication.pk]).get() == "publishing"
    assert len(fake_mturk.state.hits) == 2
    _silent_since(publication, settings)
    assert tasks.publish_publication.apply(args=[publication.pk]).get() == "published"
    assert len(fake_mturk.state.hits) == 3
    assert _ours_are_the_servers(publication, fake_mturk)


def test_an_unexpected_error_mid_publish_leaves_it_stalled_not_publishing(
    monkeypatch, mturk_settings, fake_mturk, crowd_batch, caplog
):
    error = RuntimeError("database went away")
    publication = _killed_publish(monkeypatch, _create(crowd_batch), made=2, error=error)
    assert publication.status == PublicationStatus.STALLED
    assert "RuntimeError: database went away" in publication.error
    assert _note(publication).endswith("Resume makes the 2 missing, none twice.")


def test_the_beat_marks_a_silent_publish_stalled_and_syncs_its_hits(
    monkeypatch, mturk_settings, fake_mturk, crowd_batch, settings
):
    publication = _killed_publish(monkeypatch, _create(crowd_batch), made=2)
    _silent_since(publication, settings)
    assert tasks.sync_all_publications.apply().get() == 1
    publication.refresh_from_db()
    assert publication.status == PublicationStatus.STALLED
    assert publication.hits.filter(synced_at__isnull=False).count() == 1


def test_a_silent_publish_whose_hits_were_all_made_is_marked_published(
    mturk_settings, fake_mturk, crowd_batch, settings
):
    """Killed after its last HIT was stored, before it wrote its end: nothing is missing."""
    publication = publishing.publication_publish(
        publication_id=_create(crowd_batch).pk, now=timezone.now()
    )
    Publication.objects.filter(pk=publication.pk).update(status=PublicationStatus.PUBLISHING)
    _silent_since(publication, settings)
    assert publishing.publications_stalled_mark(now=timezone.now()) == 1
    publication.refresh_from_db()
    assert (publication.status, publication.error) == (PublicationStatus.PUBLISHED, "")


def test_a_publication_whose_task_never_ran_is_stalled_too(mturk_settings, fake_mturk, crowd_batch):
    """Its task lost (a broker flushed): waiting to publish, with no heartbeat at all."""
    publication = _create(crowd_batch)
    assert publishing.publications_stalled_mark(now=timezone.now()) == 0  # it may start yet
    _time_passes(publication, timedelta(hours=1))
    assert publishing.publications_stalled_mark(now=timezone.now()) == 1
    publication.refresh_from_db()
    assert publication.status == PublicationStatus.STALLED
    assert "0 of 3 HITs made" in _note(publication)


def test_a_resume_never_makes_a_deleted_hit_again(
    mturk_settings, fake_mturk, crowd_batch, admin_user
):
    """A HIT deleted once its work was reviewed counted as missing: a resume after MTurk forgot
    its token made it, and paid its assignments, a second time."""
    fake_mturk.fail_next("CreateHITWithHITType", "RequestError", "Question is not valid")
    publication = publishing.publication_publish(
        publication_id=_create(crowd_batch).pk, now=timezone.now()
    )
    assert publication.status == PublicationStatus.PARTIAL
    now = timezone.now()
    review.publication_expire(publication_id=publication.pk, now=now, user=admin_user)
    assert review.publication_delete_finished(publication_id=publication.pk, user=admin_user) == (
        2,
        0,
    )
    fake_mturk.forget_tokens()
    later = now + timedelta(days=2)
    publishing.publication_resume(
        publication_id=publication.pk, confirm_total=PER_HIT, now=later, user=admin_user
    )
    done = publishing.publication_publish(publication_id=publication.pk, now=later)
    assert done.status == PublicationStatus.PUBLISHED
    assert len(fake_mturk.state.hits) == 1  # the refused one; the two deleted stay deleted
    assert publication.hits.filter(status=HitStatus.DELETED).count() == 2


def test_the_api_reports_a_silent_publish_stalled(
    monkeypatch, client, admin_user, mturk_settings, fake_mturk, crowd_batch, settings
):
    publication = _killed_publish(monkeypatch, _create(crowd_batch), made=2)
    client.force_login(admin_user)
    url = reverse("crowd-api:publication", args=[publication.pk])
    assert client.get(url).json()["status"] == "publishing"
    _silent_since(publication, settings)
    body = client.get(url).json()
    assert (body["status"], body["hits_created"], body["hits_total"]) == ("stalled", 1, 3)
    assert "1 of 3 HITs made; Resume makes the 2 missing" in body["error"]
    assert body["hits_missing"] == 2


def _offered(fake_mturk, *, at):
    """The HITs MTurk still offers to workers at `at`."""
    return [hit for hit in fake_mturk.state.hits.values() if hit["Expiration"] > at.timestamp()]


def test_a_redelivery_leaves_a_stalled_publication_to_the_admins_resume(
    monkeypatch, mturk_settings, fake_mturk, crowd_batch, settings
):
    """The killed worker's task delivered again (acks late) after the page showed the publish
    stalled made the missing HITs with no confirmation of their cost and no balance check."""
    publication = _killed_publish(monkeypatch, _create(crowd_batch), made=2)
    _silent_since(publication, settings)
    assert publishing.publications_stalled_mark(now=timezone.now()) == 1
    assert tasks.publish_publication.apply(args=[publication.pk]).get() == "stalled"
    assert len(fake_mturk.state.hits) == 2
    publication.refresh_from_db()
    assert "Resume makes the 2 missing" in _note(publication)


@pytest.mark.parametrize("marked_stalled", [True, False])
def test_a_redelivery_makes_no_hit_of_a_publication_the_admin_expired(
    monkeypatch, admin_user, mturk_settings, fake_mturk, crowd_batch, settings, marked_stalled
):
    """The admin stopped the publication instead of resuming it; the killed task's redelivery
    then put new HITs live, which the expiry (of the HITs already made) never reached."""
    publication = _killed_publish(monkeypatch, _create(crowd_batch), made=2)
    _silent_since(publication, settings)
    if marked_stalled:
        assert publishing.publications_stalled_mark(now=timezone.now()) == 1
    now = timezone.now()
    review.publication_expire(publication_id=publication.pk, now=now, user=admin_user)
    tasks.publish_publication.apply(args=[publication.pk]).get()
    assert len(fake_mturk.state.hits) == 2 and not _offered(fake_mturk, at=now)
    # The HIT the killed publish made but never stored was found by its token and expired too.
    assert publication.hits.filter(status=HitStatus.CREATED, expires_at__lte=now).count() == 2
    # The admin's Resume, confirming the cost again, is what asks for the last one.
    publishing.publication_resume(
        publication_id=publication.pk, confirm_total=PER_HIT, now=now, user=admin_user
    )
    assert tasks.publish_publication.apply(args=[publication.pk]).get() == "published"
    assert len(fake_mturk.state.hits) == 3 and _ours_are_the_servers(publication, fake_mturk)


def test_expire_ends_a_silent_publish_at_once(
    monkeypatch, client, admin_user, mturk_settings, fake_mturk, crowd_batch, settings
):
    """Its worker killed, the beat not come yet: after the Expire it stayed "Publishing" (the
    page refreshing, no Resume) until the beat marked it stalled, though nothing of it was
    alive to end it."""
    publication = _killed_publish(monkeypatch, _create(crowd_batch), made=2)
    _silent_since(publication, settings)
    token, now = publication.lease, timezone.now()
    review.publication_expire(publication_id=publication.pk, now=now, user=admin_user)
    publication.refresh_from_db()
    assert publication.status == PublicationStatus.PARTIAL
    assert publication.error == publishing.EXPIRED_BY_ADMIN
    assert (publication.expired_at, publication.finished_at) == (now, now)
    assert publication.lease != token  # the killed publish's, should it wake: it stops
    assert not _offered(fake_mturk, at=now)  # the HIT it stored, and the one it made, ended
    client.force_login(admin_user)
    page = client.get(reverse("crowd:publication", args=[publication.pk])).text
    assert REFRESH not in page and 'id="resume-button"' in page
    assert tasks.publish_publication.apply(args=[publication.pk]).get() == "partial"
    assert len(fake_mturk.state.hits) == 2


def test_a_publish_stops_making_hits_once_the_admin_expires_it(
    monkeypatch, admin_user, mturk_settings, fake_mturk, crowd_batch
):
    """The expiry ends the HITs made so far: the publish still running made the rest live after
    it, the one it was making at that moment included."""
    publication = _create(crowd_batch)
    real, now = publishing._hit_publish, timezone.now()

    def admin_expires_before_the_second(hit, platform):
        if len(fake_mturk.state.hits) == 1:
            review.publication_expire(publication_id=publication.pk, now=now, user=admin_user)
        real(hit, platform)

    monkeypatch.setattr(publishing, "_hit_publish", admin_expires_before_the_second)
    publication = publishing.publication_publish(publication_id=publication.pk, now=now)
    assert len(fake_mturk.state.hits) == 2 and not _offered(fake_mturk, at=now)
    assert publication.status == PublicationStatus.PARTIAL
    assert (
        _note(publication)
        == "Expired by an admin. 2 of 3 HITs made; Resume makes the 1 missing, none twice."
    )
    assert publication.hits.filter(status=HitStatus.CREATED, expires_at__lte=now).count() == 2


def test_a_frozen_publish_that_wakes_after_a_resume_writes_nothing_over_it(
    monkeypatch, admin_user, mturk_settings, fake_mturk, crowd_batch, settings
):
    """A publish frozen (not killed) long enough to be shown stalled and resumed wrote its own
    end (partial: a throttled call) over the Resume's 'pending'."""
    publication = _create(crowd_batch)
    real = publishing._hit_publish

    def frozen_then_throttled(hit, platform):
        if not fake_mturk.state.hits:
            return real(hit, platform)
        _silent_since(publication, settings)
        publishing.publication_resume(
            publication_id=publication.pk,
            confirm_total=2 * PER_HIT,
            now=timezone.now(),
            user=admin_user,
        )
        raise TransientPlatformError("ThrottlingException")

    monkeypatch.setattr(publishing, "_hit_publish", frozen_then_throttled)
    with pytest.raises(TransientPlatformError):
        publishing.publication_publish(publication_id=publication.pk, now=timezone.now())
    publication.refresh_from_db()
    assert publication.status == PublicationStatus.PENDING and publication.error == ""
    monkeypatch.setattr(publishing, "_hit_publish", real)
    assert tasks.publish_publication.apply(args=[publication.pk]).get() == "published"
    assert len(fake_mturk.state.hits) == 3


def test_a_delivery_that_never_takes_the_publish_stops_looking(
    monkeypatch, mturk_settings, fake_mturk, crowd_batch
):
    """It looked again forever (max_retries=None) while another delivery held the lease."""
    publication = _killed_publish(monkeypatch, _create(crowd_batch), made=2)
    task = tasks.publish_publication
    task.push_request(id="redelivered", retries=tasks.LEASE_RETRIES, is_eager=False)
    try:
        assert task(publication.pk) == PublicationStatus.PUBLISHING
    finally:
        task.pop_request()
    assert len(fake_mturk.state.hits) == 2


def test_a_stray_delivery_never_remakes_the_refused_hits_of_a_partial_publication(
    client, admin_user, mturk_settings, fake_mturk, crowd_batch
):
    """A publish ended partial because MTurk refused a HIT (insufficient funds: not a throttle).
    Another delivery of its task (one that found the lease held while it ran, looking again)
    took the partial publication and made the refused HIT: no Resume, no total confirmed
    again, no balance checked."""
    fake_mturk.fail_next("CreateHITWithHITType", "RequestError", "You do not have enough funds.")
    publication = publishing.publication_publish(
        publication_id=_create(crowd_batch).pk, now=timezone.now()
    )
    assert publication.status == PublicationStatus.PARTIAL
    assert len(fake_mturk.state.hits) == 2
    task = tasks.publish_publication
    task.push_request(id="redelivered", retries=1, is_eager=False)
    try:
        assert task(publication.pk) == PublicationStatus.PARTIAL
    finally:
        task.pop_request()
    assert len(fake_mturk.state.hits) == 2
    assert publication.hits.filter(status=HitStatus.FAILED).count() == 1
    client.force_login(admin_user)
    page = client.get(reverse("crowd:publication", args=[publication.pk])).text
    assert REFRESH not in page
    assert f"Resume: publish the 1 missing HIT (${PER_HIT})</button>" in page
    # The admin's Resume, with the total confirmed, is what makes it.
    publishing.publication_resume(
        publication_id=publication.pk, confirm_total=PER_HIT, now=timezone.now()
    )
    assert tasks.publish_publication.apply(args=[publication.pk]).get() == "published"
    assert len(fake_mturk.state.hits) == 3


def test_a_throttle_after_a_refused_hit_ends_partial_not_for_the_retry(
    mturk_settings, fake_mturk, crowd_batch
):
    """A throttled call leaves the publication pending for the task's own retry, unless MTurk
    refused a HIT before it: that one waits for the admin's Resume, and so does the rest."""
    publication = _create(crowd_batch)
    fake_mturk.fail_next("CreateHITWithHITType", "RequestError", "You do not have enough funds.")
    for _ in range(3):  # boto3's three attempts, all throttled
        fake_mturk.fail_next("CreateHITWithHITType", "ThrottlingException")
    with pytest.raises(TransientPlatformError):
        publishing.publication_publish(
            publication_id=publication.pk, now=timezone.now(), retry_follows=True
        )
    publication.refresh_from_db()
    assert publication.status == PublicationStatus.PARTIAL
    assert "(the platform refused HITs)" in publication.error
    assert tasks.publish_publication.apply(args=[publication.pk]).get() == "partial"
    assert not fake_mturk.state.hits


def test_a_throttled_publish_waits_for_its_retry_and_offers_no_resume(
    client, admin_user, mturk_settings, fake_mturk, crowd_batch
):
    """Throttled with retries left, the publication is pending: the page waits for the retry
    (which makes the rest) and offers no Resume meanwhile."""
    publication = _create(crowd_batch)
    for _ in range(3):  # boto3's three attempts, all throttled
        fake_mturk.fail_next("CreateHITWithHITType", "ThrottlingException")
    with pytest.raises(TransientPlatformError):
        publishing.publication_publish(
            publication_id=publication.pk, now=timezone.now(), retry_follows=True
        )
    client.force_login(admin_user)
    page = client.get(reverse("crowd:publication", args=[publication.pk])).text
    assert REFRESH in page and 'id="resume"' not in page
    assert "(the publish retries by itself)" in page
    assert tasks.publish_publication.apply(args=[publication.pk]).get() == "published"
    assert len(fake_mturk.state.hits) == 3


def test_expired_counts_as_not_made_only_the_hits_mturk_never_made(
    monkeypatch, client, admin_user, mturk_settings, fake_mturk, crowd_batch, settings
):
    """The Expire's note counted the HIT the killed publish made on MTurk but never stored as
    "not made", though its run found it by its token, stored it, and expired it."""
    publication = _killed_publish(monkeypatch, _create(crowd_batch), made=2)
    _silent_since(publication, settings)
    review.publication_expire(publication_id=publication.pk, now=timezone.now(), user=admin_user)
    publication.refresh_from_db()
    assert publication.hits.filter(status=HitStatus.CREATED).count() == 2
    assert (
        _note(publication)
        == "Expired by an admin. 2 of 3 HITs made; Resume makes the 1 missing, none twice."
    )
    client.force_login(admin_user)
    page = client.get(reverse("crowd:publication", args=[publication.pk])).text
    assert "Expired by an admin. 2 of 3 HITs made; Resume makes the 1 missing, none twice." in page


def _expire_on_the_page(client, publication, capture):
    """Press Expire on the publication page and let its background run go."""
    with capture(execute=True):
        pressed = client.post(
            reverse("crowd:publication-action", args=[publication.pk]), {"action": "expire"}
        )
    assert pressed.status_code == 302


def _resume_on_the_page(client, publication, capture, *, total: Decimal):
    with capture(execute=True):
        answer = client.post(
            reverse("crowd:publication-action", args=[publication.pk]),
            {"action": "publish", "confirm_total": str(total)},
        )
    assert answer.status_code == 302
    publication.refresh_from_db()


def _shown(client, publication) -> tuple[str, dict]:
    page = client.get(reverse("crowd:publication", args=[publication.pk])).text
    return page, client.get(reverse("crowd-api:publication", args=[publication.pk])).json()


@pytest.mark.parametrize("death", ["killed", "throttled"])
def test_hits_an_expire_finds_are_no_longer_said_missing_and_resume_makes_only_the_rest(
    monkeypatch, client, admin_user, mturk_settings, fake_mturk, crowd_batch, settings,
    django_capture_on_commit_callbacks, death,
):  # fmt: skip
    """A publish died after MTurk made its second HIT, before storing it: stalled ("Resume
    makes the 2 missing"), or partial after a throttle with no retry. The Expire's run found
    that HIT by its token and stored it, and the page and the API still said 2 were missing."""
    error = TransientPlatformError("Rate exceeded") if death == "throttled" else None
    publication = _killed_publish(monkeypatch, _create(crowd_batch), made=2, error=error)
    _silent_since(publication, settings)
    client.force_login(admin_user)
    page, body = _shown(client, publication)
    assert body["status"] == ("partial" if death == "throttled" else "stalled")
    assert "1 of 3 HITs made; Resume makes the 2 missing, none twice." in page
    _expire_on_the_page(client, publication, django_capture_on_commit_callbacks)
    assert len(fake_mturk.state.hits) == 2  # the Expire made nothing
    page, body = _shown(client, publication)
    assert "2 of 3 HITs made; Resume makes the 1 missing, none twice." in page
    assert "Resume makes the 2 missing" not in page
    assert "2 of 3 HITs made; Resume makes the 1 missing" in body["error"]
    assert (body["hits_created"], body["hits_missing"]) == (2, 1)
    assert f'id="resume-total">${PER_HIT}<' in page
    _resume_on_the_page(client, publication, django_capture_on_commit_callbacks, total=PER_HIT)
    assert publication.status == PublicationStatus.PUBLISHED and publication.error == ""
    assert len(fake_mturk.state.hits) == 3  # only the one MTurk never made
    assert _ours_are_the_servers(publication, fake_mturk)
    page, body = _shown(client, publication)
    assert (body["status"], body["error"], body["hits_missing"]) == ("published", "", 0)


def test_a_stalled_publish_whose_last_hit_an_expire_finds_ends_published(
    monkeypatch, client, admin_user, mturk_settings, fake_mturk, crowd_batch, settings,
    django_capture_on_commit_callbacks,
):  # fmt: skip
    """The publish died after MTurk made its last HIT: stalled, "Resume makes the 1 missing".
    The Expire stored that HIT, and the publication stayed stalled with none missing, its
    Resume refused ("nothing to resume"): stalled for good."""
    publication = _killed_publish(monkeypatch, _create(crowd_batch), made=3)
    _silent_since(publication, settings)
    client.force_login(admin_user)
    assert _shown(client, publication)[1]["status"] == "stalled"
    _expire_on_the_page(client, publication, django_capture_on_commit_callbacks)
    page, body = _shown(client, publication)
    assert (body["status"], body["error"], body["hits_missing"]) == ("published", "", 0)
    assert "<strong>Published</strong>" in page and 'id="resume"' not in page
    assert len(fake_mturk.state.hits) == 3 and _ours_are_the_servers(publication, fake_mturk)


def test_a_publish_stopped_on_an_error_whose_last_hit_an_expire_finds_keeps_its_cause(
    monkeypatch, client, admin_user, mturk_settings, fake_mturk, crowd_batch,
    django_capture_on_commit_callbacks,
):  # fmt: skip
    """Published once the Expire stored the HIT made before the error: the note that said why
    the publish stopped (a bug or an outage, the admin's to look into) was cleared."""
    error = RuntimeError("database went away")
    publication = _killed_publish(monkeypatch, _create(crowd_batch), made=3, error=error)
    client.force_login(admin_user)
    _expire_on_the_page(client, publication, django_capture_on_commit_callbacks)
    page, body = _shown(client, publication)
    assert (body["status"], body["hits_missing"]) == ("published", 0)
    assert (
        "The publish stopped on an unexpected error (RuntimeError: database went away)"
        in (body["error"])
    )
    assert "RuntimeError: database went away" in page and "<strong>Published</strong>" in page
    assert len(fake_mturk.state.hits) == 3 and _ours_are_the_servers(publication, fake_mturk)


def test_a_publish_marked_stalled_while_it_stored_its_last_hit_ends_published(
    mturk_settings, fake_mturk, crowd_batch, settings, monkeypatch
):
    """The publish froze inside its last HIT's call and the beat marked it stalled ("Resume
    makes the 1 missing"); it then woke and stored that HIT, and could not write its end (no
    longer publishing): stalled for good, with nothing missing."""
    publication, real = _create(crowd_batch), publishing._hit_created

    def stalled_meanwhile(hit, info):
        if hit.pk == publication.hits.order_by("id").last().pk:
            _silent_since(publication, settings)
            assert publishing.publications_stalled_mark(now=timezone.now()) == 1
        real(hit, info)

    monkeypatch.setattr(publishing, "_hit_created", stalled_meanwhile)
    publishing.publication_publish(publication_id=publication.pk, now=timezone.now())
    publication.refresh_from_db()
    assert (publication.status, publication.error) == (PublicationStatus.PUBLISHED, "")
    assert len(fake_mturk.state.hits) == 3 and _ours_are_the_servers(publication, fake_mturk)


@pytest.mark.parametrize("skewed", ["holder", "taker"])
def test_a_publish_that_beats_is_not_taken_over_whatever_the_workers_clocks_say(
    monkeypatch, mturk_settings, fake_mturk, crowd_batch, settings, skewed
):
    """Two workers whose clocks differ by two minutes, more than the stale threshold: the
    lease's age is the database's clock, so a second delivery arriving while the first makes
    HITs neither sees the holder's slow clock nor reads by its own fast one a stale lease, and
    makes no HIT (each would be paid twice)."""
    settings.CROWD_PUBLISH_STALE_SECONDS = 60
    publication = _create(crowd_batch)
    real_now, real_publish, second = timezone.now, publishing._hit_publish, []

    def second_arrives(hit, platform):
        if not second:
            with monkeypatch.context() as clock:
                clock.setattr(timezone, "now", real_now)
                if skewed == "taker":
                    clock_off_by(clock, +120)
                with pytest.raises(LeaseHeldError) as held:
                    publishing.publication_publish(
                        publication_id=publication.pk, now=timezone.now()
                    )
            second.append(held.value)
        real_publish(hit, platform)

    monkeypatch.setattr(publishing, "_hit_publish", second_arrives)
    with monkeypatch.context() as clock:
        if skewed == "holder":
            clock_off_by(clock, -120)
        first = publishing.publication_publish(publication_id=publication.pk, now=timezone.now())
    assert 59 < second[0].retry_in <= 61  # the lease is fresh: stale in a minute
    assert first.status == PublicationStatus.PUBLISHED
    assert len(fake_mturk.state.hits) == 3 and _ours_are_the_servers(first, fake_mturk)


def test_a_silent_publish_is_taken_over_whatever_the_takers_clock_says(
    monkeypatch, mturk_settings, fake_mturk, crowd_batch, settings
):
    settings.CROWD_PUBLISH_STALE_SECONDS = 60
    publication = _killed_publish(monkeypatch, _create(crowd_batch), made=2)
    Publication.objects.filter(pk=publication.pk).update(heartbeat_at=Now() - timedelta(seconds=61))
    clock_off_by(monkeypatch, -120)  # by its own clock the last beat is a minute ahead
    done = publishing.publication_publish(publication_id=publication.pk, now=timezone.now())
    assert done.status == PublicationStatus.PUBLISHED, done.error
    assert len(fake_mturk.state.hits) == 3 and _ours_are_the_servers(done, fake_mturk)


def test_a_publish_that_beats_is_not_marked_stalled_nor_expired_by_a_host_whose_clock_runs_ahead(
    monkeypatch, mturk_settings, fake_mturk, crowd_batch, settings, admin_user
):
    """The beat's (or the web's) host two minutes ahead of the database, more than the stale
    threshold: a publish that beat a moment ago, by the database's clock its heartbeat is
    written by, is alive. Marked stalled, the page offered Resume of the HITs it was making."""
    settings.CROWD_PUBLISH_STALE_SECONDS = 60
    publication = _killed_publish(monkeypatch, _create(crowd_batch), made=2)
    Publication.objects.filter(pk=publication.pk).update(heartbeat_at=Now())
    clock_off_by(monkeypatch, +120)

    assert publishing.publications_stalled_mark(now=timezone.now()) == 0
    assert not publishing.publication_unheld_expire(
        publication_id=publication.pk, now=timezone.now()
    )
    with pytest.raises(ConflictError):
        publishing.publication_resume(
            publication_id=publication.pk,
            confirm_total=2 * PER_HIT,
            now=timezone.now(),
            user=admin_user,
        )
    publication.refresh_from_db()
    assert (publication.status, publication.expired_at) == (PublicationStatus.PUBLISHING, None)

    Publication.objects.filter(pk=publication.pk).update(heartbeat_at=Now() - timedelta(seconds=61))
    assert publishing.publications_stalled_mark(now=timezone.now()) == 1  # silent, truly
    publication.refresh_from_db()
    assert publication.status == PublicationStatus.STALLED
