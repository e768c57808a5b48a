"""Crowd tasks delivered twice at once (Redis hands a task still running after the visibility
timeout to a second worker): the platform's UniqueRequestToken, sent again by the second
delivery, makes no second HIT and pays no second bonus; two syncs store each assignment once.
Over real boto3 to the fake MTurk server, two threads on one database."""

import threading
from decimal import Decimal

import pytest
from django.utils import timezone

from annotate.crowd.models import BonusStatus, HitStatus, PlatformAssignment, PublicationStatus
from annotate.crowd.services import publishing, review
from annotate.crowd.services.publishing import PublishSettings
from annotate.services.leases import LeaseHeldError
from tests.annotate.crowd.test_review import work
from tests.threads import in_thread

pytestmark = pytest.mark.django_db(transaction=True)


def first_delivery_held(monkeypatch, module, name):
    """Hold the first thread that calls module.name, before the call, until `go` is set: the
    second delivery runs whole meanwhile. Return (reached, go)."""
    real, reached, go = getattr(module, name), threading.Event(), threading.Event()
    first = []

    def held(*args, **kwargs):
        if not first:
            first.append(threading.get_ident())
        if first == [threading.get_ident()] and not reached.is_set():
            reached.set()
            go.wait(30)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, held)
    return reached, go


def both_deliveries(monkeypatch, module, name, deliver):
    """Run `deliver` in a thread until it reaches module.name, then whole here, then let the
    first finish; return (first's outcome, second's)."""
    reached, go = first_delivery_held(monkeypatch, module, name)
    outcomes = []
    thread = in_thread(deliver, outcomes)
    assert reached.wait(30)
    second = deliver()
    go.set()
    thread.join(30)
    return outcomes[0], second


def test_two_deliveries_of_one_publish_at_once_make_each_hit_once(
    monkeypatch, mturk_settings, fake_mturk, crowd_batch
):
    publication = publishing.publication_create(
        batch=crowd_batch, platform_name="mturk",
        chosen=PublishSettings(title="t", description="d"), base_url="https://annotate.example.org",
    )  # fmt: skip

    def deliver():
        try:
            return publishing.publication_publish(publication_id=publication.pk, now=timezone.now())
        except LeaseHeldError as busy:
            return busy

    # The first delivery made a HIT, not yet stored, and holds the other two as missing: the
    # second, while the first holds the publication's lease, makes none and looks again later.
    first, second = both_deliveries(monkeypatch, publishing, "_hit_created", deliver)
    assert first.status == PublicationStatus.PUBLISHED
    assert isinstance(second, LeaseHeldError) and second.retry_in > 1
    assert len(fake_mturk.state.hits) == 3
    ours = set(publication.hits.filter(status=HitStatus.CREATED).values_list("hit_id", flat=True))
    assert ours == set(fake_mturk.state.hits)


def test_two_deliveries_of_one_bonus_at_once_pay_it_once(
    monkeypatch, client, live, fake_mturk, admin_user
):
    done = work(client, fake_mturk, live.hits.first(), "AW1")
    review.assignment_approve(assignment_id=done.pk, user=admin_user)
    bonus = review.bonus_create(
        assignment_id=done.pk, amount_usd=Decimal("0.50"), reason="careful work", user=admin_user
    )

    def deliver():
        return review.bonus_pay(bonus_id=bonus.pk, user=admin_user, now=timezone.now())

    # The first delivery sent the bonus and has not yet stored "paid".
    first, second = both_deliveries(monkeypatch, review, "_bonus_paid", deliver)
    assert (first.status, second.status) == (BonusStatus.PAID,) * 2
    assert len(fake_mturk.state.bonuses) == 1
    assert fake_mturk.state.balance == Decimal("9999.50")


def test_two_syncs_at_once_store_each_platform_assignment_once(
    monkeypatch, client, live, fake_mturk
):
    hits = list(live.hits.order_by("id"))
    for hit, worker in zip(hits, ("AW1", "AW2", "AW3"), strict=True):
        work(client, fake_mturk, hit, worker)

    def deliver():
        now = timezone.now() + review.release_grace()
        return review.publication_sync(publication_id=live.pk, now=now)

    # The first delivery listed a HIT's assignments, not yet stored, and holds the other two.
    first, second = both_deliveries(monkeypatch, review, "_hit_store", deliver)
    assert (first.seen, second.seen) == (3, 3)
    assert first.new + second.new == 3
    stored = PlatformAssignment.objects.filter(hit__publication=live)
    assert stored.count() == 3 and all(row.assignment_id for row in stored)
