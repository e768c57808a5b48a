"""An Expire's run as the publication page and the API show it: asked (waiting for its run),
running since a time, finished with its outcome, or stopped without finishing (its worker
killed: no sign of life for CROWD_EXPIRY_STALE_SECONDS), with Expire offered again. Over real
boto3 to the fake MTurk server; a kill is a BaseException raised inside the run, which nothing
of ours catches, as a SIGKILL leaves it."""

from datetime import timedelta

import pytest
from django.db.models.functions import Now
from django.urls import reverse
from django.utils import timezone

from annotate.crowd import tasks
from annotate.crowd.models import Hit, Publication
from annotate.crowd.services import expiry, review
from annotate.errors import ConflictError
from tests.clocks import clock_off_by

pytestmark = pytest.mark.django_db
REFRESH = 'http-equiv="refresh"'
REFUSED = ("RequestError", "RequestError: not now", 400)


class WorkerKilled(BaseException):
    """The worker's process ended mid-run: no `except Exception` of ours runs."""


def _press(client, publication, capture, *, run: bool):
    """Press Expire on the page; `run`: let its background run go (else it never starts)."""
    with capture(execute=False) as started:
        pressed = client.post(
            reverse("crowd:publication-action", args=[publication.pk]), {"action": "expire"}
        )
    assert pressed.status_code == 302
    if run:
        for callback in started:
            callback()
    return pressed


def _page(client, publication) -> str:
    return client.get(reverse("crowd:publication", args=[publication.pk])).text


def _api(client, publication) -> dict:
    return client.get(reverse("crowd-api:publication", args=[publication.pk])).json()["expiry"]


def _silent(publication, settings, field):
    """The run's `field` (its last sign of life, or the press) is older than the threshold."""
    then = timezone.now() - timedelta(seconds=settings.CROWD_EXPIRY_STALE_SECONDS + 1)
    Publication.objects.filter(pk=publication.pk).update(**{field: then})


def _offered(fake_mturk) -> set[str]:
    now = timezone.now().timestamp()
    return {hit_id for hit_id, hit in fake_mturk.state.hits.items() if hit["Expiration"] > now}


def test_a_run_killed_half_way_is_shown_stopped_with_expire_offered_again(
    client, admin_user, live, fake_mturk, monkeypatch, settings,
    django_capture_on_commit_callbacks,
):  # fmt: skip
    """The run's worker was killed after the first HIT: the page said "the platform is asked in
    the background" and refreshed every 2 s for ever (until a beat), as the run's end was
    only "no outcome stored yet"."""
    real, asked = expiry.hit_expire, []

    def killed_after_the_first(hit, platform, *, at):
        if asked:
            raise WorkerKilled()
        asked.append(hit.pk)
        return real(hit, platform, at=at)

    monkeypatch.setattr(expiry, "hit_expire", killed_after_the_first)
    client.force_login(admin_user)
    with pytest.raises(WorkerKilled):
        _press(client, live, django_capture_on_commit_callbacks, run=True)
    page = _page(client, live)
    assert 'id="expiry-run"' in page and "Running since" in page and REFRESH in page
    assert _api(client, live)["state"] == "running"

    _silent(live, settings, "expiry_heartbeat_at")
    page = _page(client, live)
    assert REFRESH not in page
    assert "stopped without finishing" in page and 'id="expire-again"' in page
    assert "2 HITs to end, not confirmed by the platform yet" in page
    body = _api(client, live)
    assert body["state"] == "stopped" and body["finished_at"] is None

    monkeypatch.setattr(expiry, "hit_expire", real)
    _press(client, live, django_capture_on_commit_callbacks, run=True)  # pressed again
    assert not _offered(fake_mturk)
    page = _page(client, live)
    assert "Last Expire: 2 HITs expired." in page and "stopped without finishing" not in page
    assert _api(client, live)["state"] == "finished"


def test_a_run_that_never_started_is_shown_waiting_then_stopped(
    client, admin_user, live, fake_mturk, settings, django_capture_on_commit_callbacks
):
    """The press stored, its task lost (a worker restarted before taking it): the page said
    "the platform is asked in the background" for ever."""
    client.force_login(admin_user)
    _press(client, live, django_capture_on_commit_callbacks, run=False)
    page = _page(client, live)
    assert "Asked at" in page and "waiting for its run to start" in page and REFRESH in page
    assert _api(client, live)["state"] == "asked"

    _silent(live, settings, "expiry_asked_at")
    page = _page(client, live)
    assert REFRESH not in page and "never started" in page and 'id="expire-again"' in page
    assert _api(client, live)["state"] == "stopped"
    assert "UpdateExpirationForHIT" not in fake_mturk.state.calls


def test_a_second_press_keeps_the_refusal_shown_until_the_platform_answers_again(
    client, admin_user, live, fake_mturk, settings, django_capture_on_commit_callbacks
):
    """A second press cleared the platform's refusal from the HIT before its run asked again:
    a run that then never ran showed the HIT as "expiring", its refusal gone."""
    first = live.hits.order_by("id").first()
    fake_mturk.fail_next("UpdateExpirationForHIT", *REFUSED)
    client.force_login(admin_user)
    _press(client, live, django_capture_on_commit_callbacks, run=True)
    assert "1 HIT could not be expired" in _page(client, live)

    _press(client, live, django_capture_on_commit_callbacks, run=False)  # its run lost
    first.refresh_from_db()
    assert "not now" in first.expiry_error
    _silent(live, settings, "expiry_asked_at")
    page = _page(client, live)
    assert "1 HIT could not be expired" in page and "RequestError: not now" in page
    assert "never started" in page and REFRESH not in page


def test_a_press_while_a_run_is_alive_is_refused_and_the_run_kept(
    client, admin_user, live, fake_mturk, django_capture_on_commit_callbacks
):
    client.force_login(admin_user)
    _press(client, live, django_capture_on_commit_callbacks, run=False)
    asked_at = Publication.objects.get(pk=live.pk).expiry_asked_at
    with pytest.raises(ConflictError, match="An Expire of this publication was asked"):
        review.publication_expire_start(publication_id=live.pk, now=timezone.now(), user=admin_user)
    assert Publication.objects.get(pk=live.pk).expiry_asked_at == asked_at


def test_a_run_that_fails_is_finished_with_its_error_never_left_running(
    client, admin_user, live, fake_mturk, monkeypatch, django_capture_on_commit_callbacks
):
    def broken(hits, platform, *, at):
        raise RuntimeError("database went away")

    monkeypatch.setattr(review, "hits_expire", broken)
    client.force_login(admin_user)
    with pytest.raises(RuntimeError):
        _press(client, live, django_capture_on_commit_callbacks, run=True)
    body = _api(client, live)
    assert body["state"] == "finished" and body["finished_at"] is not None
    assert "unexpected error (RuntimeError: database went away)" in body["outcome"]
    assert REFRESH not in _page(client, live)


def test_a_second_delivery_of_a_run_that_finished_asks_nothing(
    client, admin_user, live, fake_mturk, django_capture_on_commit_callbacks
):
    client.force_login(admin_user)
    _press(client, live, django_capture_on_commit_callbacks, run=True)
    calls = len(fake_mturk.state.calls)
    finished = Publication.objects.get(pk=live.pk).expiry_finished_at
    tasks.expire_publication.apply(args=[live.pk, admin_user.pk]).get()
    assert len(fake_mturk.state.calls) == calls
    assert Publication.objects.get(pk=live.pk).expiry_finished_at == finished
    assert not Hit.objects.filter(expiry_pending_since__isnull=False).exists()


@pytest.mark.parametrize("skewed", ["holder", "taker"])
def test_a_run_that_beats_is_not_taken_over_whatever_the_workers_clocks_say(
    client, admin_user, live, fake_mturk, monkeypatch, settings, skewed,
    django_capture_on_commit_callbacks,
):  # fmt: skip
    """Two workers whose clocks differ by two minutes, more than the stale threshold: the
    lease's age is the database's clock, so a second delivery of the run arriving while the
    first asks the platform neither sees the holder's slow clock nor reads by its own fast one
    a stale lease, and asks nothing."""
    settings.CROWD_EXPIRY_STALE_SECONDS = 60
    client.force_login(admin_user)
    _press(client, live, django_capture_on_commit_callbacks, run=False)
    real_now, real_expire, runs = timezone.now, review._publication_hits_expire, []

    def second_arrives(publication, *, now, user):
        runs.append(publication.expiry_lease)
        if len(runs) == 1:
            with monkeypatch.context() as clock:
                clock.setattr(timezone, "now", real_now)
                if skewed == "taker":
                    clock_off_by(clock, +120)
                review.publication_expire_run(
                    publication_id=live.pk, now=timezone.now(), user=admin_user
                )
        return real_expire(publication, now=now, user=user)

    monkeypatch.setattr(review, "_publication_hits_expire", second_arrives)
    with monkeypatch.context() as clock:
        if skewed == "holder":
            clock_off_by(clock, -120)
        outcome = review.publication_expire_run(
            publication_id=live.pk, now=timezone.now(), user=admin_user
        )
    assert len(runs) == 1  # the second delivery asked the platform nothing
    assert outcome.expired == 3 and not _offered(fake_mturk)
    assert Publication.objects.get(pk=live.pk).expiry_lease == runs[0]


def test_a_silent_run_is_taken_over_whatever_the_takers_clock_says(
    client, admin_user, live, fake_mturk, monkeypatch, settings,
    django_capture_on_commit_callbacks,
):  # fmt: skip
    settings.CROWD_EXPIRY_STALE_SECONDS = 60
    client.force_login(admin_user)
    _press(client, live, django_capture_on_commit_callbacks, run=False)
    Publication.objects.filter(pk=live.pk).update(
        expiry_started_at=Now() - timedelta(seconds=120),
        expiry_heartbeat_at=Now() - timedelta(seconds=61),
        expiry_lease="dead",
    )
    clock_off_by(monkeypatch, -120)  # by its own clock the last beat is a minute ahead
    outcome = review.publication_expire_run(
        publication_id=live.pk, now=timezone.now(), user=admin_user
    )
    assert outcome.expired == 3 and not _offered(fake_mturk)
    assert Publication.objects.get(pk=live.pk).expiry_lease not in ("", "dead")


def test_a_running_expire_is_shown_running_and_kept_whatever_the_web_hosts_clock_says(
    client, admin_user, live, fake_mturk, settings, monkeypatch, django_capture_on_commit_callbacks
):
    """The web host two minutes ahead of the database, more than the stale threshold: its run
    beat a moment ago by the database's clock, which writes the heartbeat. It was shown stopped,
    and a second press was taken: it reset the lease, the running Expire's outcome was lost and
    the platform asked twice."""
    settings.CROWD_EXPIRY_STALE_SECONDS = 60
    clock_off_by(monkeypatch, +120)
    client.force_login(admin_user)
    _press(client, live, django_capture_on_commit_callbacks, run=False)
    assert _api(client, live)["state"] == "asked"
    Publication.objects.filter(pk=live.pk).update(
        expiry_started_at=Now(), expiry_heartbeat_at=Now(), expiry_lease="the-run"
    )
    assert REFRESH in _page(client, live)
    assert _api(client, live)["state"] == "running"
    with pytest.raises(ConflictError, match="An Expire of this publication was asked"):
        review.publication_expire_start(publication_id=live.pk, now=timezone.now(), user=admin_user)
    assert Publication.objects.get(pk=live.pk).expiry_lease == "the-run"

    Publication.objects.filter(pk=live.pk).update(expiry_heartbeat_at=Now() - timedelta(seconds=61))
    assert _api(client, live)["state"] == "stopped"  # silent, truly: Expire may be pressed again
    review.publication_expire_start(publication_id=live.pk, now=timezone.now(), user=admin_user)
    assert Publication.objects.get(pk=live.pk).expiry_lease == ""


def test_a_finished_expire_is_never_shown_finished_before_it_was_asked_on_a_late_worker_host(
    client, admin_user, live, fake_mturk, monkeypatch, django_capture_on_commit_callbacks
):
    """The worker host an hour behind the database: the press is stamped by the database's
    clock, the end was stamped by the host's, so the page said "finished" an hour before
    "asked"."""
    clock_off_by(monkeypatch, -3600)
    client.force_login(admin_user)
    _press(client, live, django_capture_on_commit_callbacks, run=True)
    run = Publication.objects.get(pk=live.pk)
    assert run.expiry_finished_at is not None
    assert run.expiry_finished_at >= run.expiry_asked_at
