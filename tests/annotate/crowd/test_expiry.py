"""Expire: its MTurk calls run in the background, the HITs marked first; a HIT whose expiry MTurk
did not confirm stays marked live (stored, shown, asked again by the next Expire and by the
beat); a publication no delivery took ends at once; and the API's Resume. Over real boto3 to the fake MTurk server."""

from decimal import Decimal

import pytest
from django.urls import reverse
from django.utils import timezone

from annotate.crowd import selectors, tasks
from annotate.crowd.models import Hit, HitStatus, Publication, PublicationStatus
from annotate.crowd.services import expiry, publishing, review
from annotate.crowd.services.publishing import PublishSettings

pytestmark = pytest.mark.django_db


def _note(publication) -> str:
    """What the publication page and the API say of how it stands (selectors.publication_note)."""
    progress = selectors.publication_progress(publication=publication)
    return selectors.publication_note(publication=publication, progress=progress)


REFRESH = 'http-equiv="refresh"'
# 3 assignments × ($1.00 + MTurk's 20% fee) a HIT
PER_HIT = Decimal("3.60")
# boto3's three attempts (MTURK_MAX_ATTEMPTS) all throttled, or all unanswered (503); or refused.
THROTTLED = [("ThrottlingException", 400)] * 3
UNAVAILABLE = [("ServiceUnavailable", 503)] * 3
REFUSED = [("RequestError", 400)]


def _create(batch):
    return publishing.publication_create(
        batch=batch,
        platform_name="mturk",
        chosen=PublishSettings(title="t", description="d", reward_usd=Decimal("1.00")),
        base_url="https://annotate.example.org",
    )


def _offered(fake_mturk, *, at) -> set[str]:
    """The HIT ids MTurk still offers to workers at `at`."""
    return {
        hit_id
        for hit_id, hit in fake_mturk.state.hits.items()
        if hit["Expiration"] > at.timestamp()
    }


def _fail_expiry(fake_mturk, codes) -> None:
    for code, status in codes:
        fake_mturk.fail_next("UpdateExpirationForHIT", code, f"{code}: try later", status)


@pytest.mark.parametrize("codes", [UNAVAILABLE, THROTTLED, REFUSED])
def test_a_hit_whose_expiry_failed_is_stored_as_live_shown_and_retried_by_the_beat(
    client, admin_user, live, fake_mturk, codes
):
    """The first HIT's UpdateExpirationForHIT failed: the Expire stopped there (the other two
    stayed live too) and nothing recorded that any of them still took workers."""
    first, *others = live.hits.order_by("id")
    now = timezone.now()
    _fail_expiry(fake_mturk, codes)
    outcome = review.publication_expire(publication_id=live.pk, now=now, user=admin_user)
    assert (outcome.expired, outcome.failed) == (2, 1)
    assert _offered(fake_mturk, at=now) == {first.hit_id}
    first.refresh_from_db()
    assert first.expiry_pending_since == now
    assert f"{codes[0][0]}: try later" in first.expiry_error
    assert first.expires_at > now  # not marked expired: MTurk never confirmed it
    for hit in others:
        hit.refresh_from_db()
        assert hit.expires_at == now and hit.expiry_pending_since is None

    client.force_login(admin_user)
    page = client.get(reverse("crowd:publication", args=[live.pk])).text
    assert 'id="expiry-pending"' in page
    assert "1 HIT could not be expired" in page and "1 HIT still live" in page
    assert "expiry failed: still live" in page  # its row
    api = client.get(reverse("crowd-api:publication", args=[live.pk])).json()
    assert (api["hits_expiry_pending"], api["hits_live"]) == (1, 1)

    tasks.sync_all_publications.apply().get()  # the beat asks MTurk again
    assert not _offered(fake_mturk, at=timezone.now())
    first.refresh_from_db()
    assert first.expiry_pending_since is None and first.expiry_error == ""
    assert first.expires_at <= timezone.now()
    page = client.get(reverse("crowd:publication", args=[live.pk])).text
    assert 'id="expiry-pending"' not in page


def _expire_pressed(client, publication, capture) -> str:
    """Press Expire on the publication page, let its background run go, and return the page."""
    with capture(execute=True):
        pressed = client.post(
            reverse("crowd:publication-action", args=[publication.pk]), {"action": "expire"}
        )
    assert pressed.status_code == 302
    return client.get(pressed["Location"]).text


def test_the_next_expire_press_asks_again_for_the_hit_whose_expiry_failed(
    client, admin_user, live, fake_mturk, django_capture_on_commit_callbacks
):
    first = live.hits.order_by("id").first()
    _fail_expiry(fake_mturk, REFUSED)
    client.force_login(admin_user)
    page = _expire_pressed(client, live, django_capture_on_commit_callbacks)
    assert "Expiring 3 HITs" in page
    assert "Last Expire: 2 HITs expired; 1 HIT not confirmed by the platform" in page
    assert "1 HIT could not be expired" in page and "RequestError: try later" in page
    assert _offered(fake_mturk, at=timezone.now()) == {first.hit_id}

    page = _expire_pressed(client, live, django_capture_on_commit_callbacks)
    assert "Expiring 1 HIT:" in page and "Last Expire: 1 HIT expired." in page
    assert "could not be expired" not in page
    assert not _offered(fake_mturk, at=timezone.now())
    assert not Hit.objects.filter(expiry_pending_since__isnull=False).exists()


def test_expire_asks_mturk_in_the_background_and_the_page_follows_it(
    client, admin_user, live, fake_mturk, django_capture_on_commit_callbacks
):
    """Expire called UpdateExpirationForHIT once per live HIT inside the web request: slow, and
    cut off half-way by the request's timeout when MTurk is slow to answer."""
    client.force_login(admin_user)
    with django_capture_on_commit_callbacks() as started:
        pressed = client.post(
            reverse("crowd:publication-action", args=[live.pk]), {"action": "expire"}
        )
    assert pressed.status_code == 302 and len(started) == 1
    assert "UpdateExpirationForHIT" not in fake_mturk.state.calls
    assert len(_offered(fake_mturk, at=timezone.now())) == 3
    page = client.get(pressed["Location"]).text
    assert "Expiring 3 HITs" in page and 'id="expiring"' in page and REFRESH in page
    assert 'id="expiry-pending"' not in page  # asked, not refused
    api_url = reverse("crowd-api:publication", args=[live.pk])
    api = client.get(api_url).json()
    assert (api["hits_live"], api["hits_expiring"], api["expiry_outcome"]) == (3, 3, "")

    started[0]()  # the background run
    assert fake_mturk.state.calls.count("UpdateExpirationForHIT") == 3
    assert not _offered(fake_mturk, at=timezone.now())
    page = client.get(pressed["Location"]).text
    assert 'id="expiring"' not in page and REFRESH not in page
    assert "Last Expire: 3 HITs expired." in page
    api = client.get(api_url).json()
    assert (api["hits_live"], api["hits_expiring"]) == (0, 0)
    assert api["expiry_outcome"] == "3 HITs expired."


def test_an_expire_stopped_half_way_leaves_the_hits_it_did_not_reach_to_the_beat(
    client, admin_user, live, fake_mturk, monkeypatch, django_capture_on_commit_callbacks
):
    """The run stops after the first HIT (its worker killed, or an error of ours): the two HITs
    it never reached were stored as neither expired nor pending, so nothing asked MTurk again
    and they took paid work with nothing here saying so."""
    real, asked = expiry.hit_expire, []

    def stops_after_the_first(hit, platform, *, at):
        if asked:
            raise RuntimeError("worker lost")
        asked.append(hit.pk)
        return real(hit, platform, at=at)

    monkeypatch.setattr(expiry, "hit_expire", stops_after_the_first)
    client.force_login(admin_user)
    with django_capture_on_commit_callbacks() as started:
        pressed = client.post(
            reverse("crowd:publication-action", args=[live.pk]), {"action": "expire"}
        )
    with pytest.raises(RuntimeError, match="worker lost"):
        started[0]()
    assert len(_offered(fake_mturk, at=timezone.now())) == 2
    pending = Hit.objects.filter(publication=live, expiry_pending_since__isnull=False)
    assert pending.count() == 2
    page = client.get(pressed["Location"]).text
    assert "The expiry stopped on an unexpected error (RuntimeError: worker lost)" in page
    assert "2 HITs to end, not confirmed by the platform yet" in page

    monkeypatch.setattr(expiry, "hit_expire", real)
    tasks.sync_all_publications.apply().get()  # the beat asks MTurk for the two
    assert not _offered(fake_mturk, at=timezone.now())
    assert not pending.exists()


def test_a_hit_made_while_the_admin_expired_the_publication_is_kept_live_when_its_expiry_fails(
    monkeypatch, admin_user, mturk_settings, fake_mturk, crowd_batch
):
    """The HIT the publish was making when the admin pressed Expire is expired once made; that
    call failed, the publish ended "failed" (as if the HIT type was refused) and the HIT stayed
    live with nothing here saying so."""
    publication = _create(crowd_batch)
    real, now = publishing._hit_publish, timezone.now()

    def admin_expires_before_the_second(hit, platform):
        if len(fake_mturk.state.hits) == 1:
            review.publication_expire(publication_id=publication.pk, now=now, user=admin_user)
            _fail_expiry(fake_mturk, REFUSED)  # the second HIT's expiry
        real(hit, platform)

    monkeypatch.setattr(publishing, "_hit_publish", admin_expires_before_the_second)
    publication = publishing.publication_publish(publication_id=publication.pk, now=now)
    assert publication.status == PublicationStatus.PARTIAL
    assert (
        _note(publication)
        == "Expired by an admin. 2 of 3 HITs made; Resume makes the 1 missing, none twice."
    )
    second = publication.hits.order_by("id")[1]
    assert second.status == HitStatus.CREATED and second.expiry_pending_since is not None
    assert _offered(fake_mturk, at=now) == {second.hit_id}

    outcome = review.publication_expire(
        publication_id=publication.pk, now=timezone.now(), user=admin_user
    )
    assert (outcome.expired, outcome.failed) == (1, 0)
    assert not _offered(fake_mturk, at=timezone.now())


def test_expire_before_any_delivery_ends_the_publication_at_once(
    client, admin_user, mturk_settings, fake_mturk, crowd_batch
):
    """No delivery had taken it: it stayed "Waiting to publish" (the page refreshing) until the
    beat marked it stalled."""
    publication = _create(crowd_batch)
    outcome = review.publication_expire(
        publication_id=publication.pk, now=timezone.now(), user=admin_user
    )
    assert (outcome.expired, outcome.failed) == (0, 0)
    publication.refresh_from_db()
    assert publication.status == PublicationStatus.PARTIAL
    assert _note(publication) == (
        "Expired by an admin. 0 of 3 HITs made; Resume makes the 3 missing, none twice."
    )
    assert publication.expired_at is not None and publication.lease
    client.force_login(admin_user)
    page = client.get(reverse("crowd:publication", args=[publication.pk])).text
    assert REFRESH not in page and "Expired by an admin" in page

    # The publish's task, delivered after the Expire, makes nothing.
    assert tasks.publish_publication.apply(args=[publication.pk]).get() == "partial"
    assert not fake_mturk.state.hits and "CreateHITType" not in fake_mturk.state.calls
    # The admin's Resume, confirming the cost, is what publishes it.
    publishing.publication_resume(
        publication_id=publication.pk, confirm_total=3 * PER_HIT, now=timezone.now()
    )
    assert tasks.publish_publication.apply(args=[publication.pk]).get() == "published"
    assert len(fake_mturk.state.hits) == 3


def test_expire_while_a_delivery_holds_the_lease_leaves_the_end_to_it(
    admin_user, mturk_settings, fake_mturk, crowd_batch
):
    publication = _create(crowd_batch)
    token = publishing._publish_claim(publication_id=publication.pk)
    review.publication_expire(publication_id=publication.pk, now=timezone.now(), user=admin_user)
    publication.refresh_from_db()
    assert publication.status == PublicationStatus.PUBLISHING and publication.lease == token
    assert publication.expired_at is not None


# --- Resume through the API -----------------------------------------------------------------


def _partial(fake_mturk, crowd_batch) -> Publication:
    """A publication whose second HIT MTurk refused: partly published, one HIT missing."""
    fake_mturk.fail_next("CreateHITWithHITType", "RequestError", "You do not have enough funds.")
    publication = publishing.publication_publish(
        publication_id=_create(crowd_batch).pk, now=timezone.now()
    )
    assert publication.status == PublicationStatus.PARTIAL
    return publication


def test_the_api_resumes_a_partial_publication_once_its_total_is_confirmed(
    client, admin_user, mturk_settings, fake_mturk, crowd_batch,
    django_capture_on_commit_callbacks,
):  # fmt: skip
    publication = _partial(fake_mturk, crowd_batch)
    url = reverse("crowd-api:resume", args=[publication.pk])
    client.force_login(admin_user)
    quote = client.get(url).json()
    assert quote["hits"] == 1 and quote["total_usd"] == str(PER_HIT)
    # A GET asks MTurk nothing: the balance was never checked (the POST checks it).
    assert quote["balance_usd"] is None and quote["affordable"] is True

    refused = client.post(url, {"confirm_total_usd": "1.00"}, content_type="application/json")
    assert refused.status_code == 400
    assert refused.json()["detail"].startswith("The 1 missing HITs cost $3.60 (you confirmed $1")
    assert refused.json()["field"] == "confirm_total_usd"
    fake_mturk.state.balance = Decimal("2.00")
    poor = client.post(url, {"confirm_total_usd": "3.60"}, content_type="application/json")
    assert poor.status_code == 400 and "has $2.00, less than the $3.60" in poor.json()["detail"]
    publication.refresh_from_db()
    assert publication.status == PublicationStatus.PARTIAL and len(fake_mturk.state.hits) == 2

    fake_mturk.state.balance = Decimal("100.00")
    with django_capture_on_commit_callbacks(execute=True):
        done = client.post(url, {"confirm_total_usd": "3.60"}, content_type="application/json")
    assert done.status_code == 202 and done.json() == {"id": publication.pk, "status": "pending"}
    publication.refresh_from_db()
    assert publication.status == PublicationStatus.PUBLISHED
    assert len(fake_mturk.state.hits) == 3

    again = client.post(url, {"confirm_total_usd": "0.00"}, content_type="application/json")
    assert again.status_code == 400 and "nothing to resume" in again.json()["detail"]


def test_the_api_refuses_a_resume_while_the_publish_runs(
    client, admin_user, mturk_settings, fake_mturk, crowd_batch
):
    publication = _partial(fake_mturk, crowd_batch)
    Publication.objects.filter(pk=publication.pk).update(
        status=PublicationStatus.PUBLISHING, heartbeat_at=timezone.now()
    )
    client.force_login(admin_user)
    url = reverse("crowd-api:resume", args=[publication.pk])
    answer = client.post(url, {"confirm_total_usd": "3.60"}, content_type="application/json")
    assert answer.status_code == 409 and "is being published" in answer.json()["detail"]
    assert len(fake_mturk.state.hits) == 2


def test_the_api_refuses_a_resume_without_a_total_and_to_non_admins(
    client, admin_user, researcher, mturk_settings, fake_mturk, crowd_batch
):
    publication = _partial(fake_mturk, crowd_batch)
    url = reverse("crowd-api:resume", args=[publication.pk])
    client.force_login(researcher)
    assert client.post(url, {"confirm_total_usd": "3.60"}).status_code == 404
    assert client.get(url).status_code == 404
    client.force_login(admin_user)
    missing = client.post(url, {}, content_type="application/json")
    assert missing.status_code == 400 and "confirm_total_usd" in missing.json()
    assert client.post(reverse("crowd-api:resume", args=[publication.pk + 99])).status_code == 404
    publication.refresh_from_db()
    assert publication.status == PublicationStatus.PARTIAL and len(fake_mturk.state.hits) == 2
