"""CROWD_BONUS_MAX_USD is the most one assignment's (or answer's) bonuses come to together,
checked when a bonus is stored and again under the work's row lock just before it is sent;
every refusal of a bonus names its field. Against the fake MTurk server through real boto3."""

import threading
import time
from decimal import Decimal

import pytest
from django.db import connection
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from annotate.crowd import fake, tasks
from annotate.crowd.models import Bonus, BonusStatus
from annotate.crowd.services import review
from annotate.errors import (
    CrowdPlatformError,
    FieldInputError,
    PermissionDeniedError,
    TransientPlatformError,
)
from tests.annotate.crowd.conftest import (
    crowd_assignment,
    published_on_fake,
    submitted_on_fake_platform,
)
from tests.annotate.crowd.test_mturk_fees import _batch
from tests.annotate.crowd.test_review import work
from tests.threads import in_thread, waiting_for_a_row_lock


def _approved(client, live, fake_mturk, admin_user, *, hit=0, worker="AW1"):
    done = work(client, fake_mturk, list(live.hits.order_by("id"))[hit], worker)
    review.assignment_approve(assignment_id=done.pk, user=admin_user)
    return done


def _bonus(done, admin_user, amount: str, token: str = "") -> Bonus:
    return review.bonus_create(
        assignment_id=done.pk, amount_usd=Decimal(amount), reason=f"thanks {amount}",
        user=admin_user, request_token=token,
    )  # fmt: skip


@pytest.mark.django_db
def test_the_bonuses_of_one_assignment_together_stay_within_the_maximum(
    client, live, fake_mturk, admin_user, settings
):
    """Each bonus under the limit, several on one assignment paid more than it: the limit is
    what one assignment may be paid in bonuses, the pending ones counted with the paid."""
    settings.CROWD_BONUS_MAX_USD = Decimal("20.00")
    done = _approved(client, live, fake_mturk, admin_user)
    paid = _bonus(done, admin_user, "12.00")
    review.bonus_pay(bonus_id=paid.pk, user=admin_user, now=timezone.now())
    waiting = _bonus(done, admin_user, "5.00")  # stored, not sent yet
    with pytest.raises(FieldInputError) as refused:
        _bonus(done, admin_user, "3.01")
    assert refused.value.field == "amount_usd"
    assert str(refused.value) == (
        "Bonus amount: $3.01 would bring the bonuses of this assignment to $20.01 ($17.00 paid "
        "or being paid already), more than the most one assignment may be paid in bonuses, "
        "$20.00 (CROWD_BONUS_MAX_USD). Nothing was paid."
    )
    assert done.bonuses.count() == 2
    # A failed bonus holds nothing; the limit itself is allowed.
    Bonus.objects.filter(pk=waiting.pk).update(status=BonusStatus.FAILED)
    last = _bonus(done, admin_user, "8.00")
    assert review.bonus_pay(bonus_id=last.pk, user=admin_user, now=timezone.now()).status == "paid"
    assert [b["BonusAmount"] for b in fake_mturk.state.bonuses] == ["12.00", "8.00"]
    # Another assignment has a limit of its own.
    other = _approved(client, live, fake_mturk, admin_user, hit=1, worker="AW2")
    assert _bonus(other, admin_user, "20.00").status == BonusStatus.PENDING


@pytest.mark.django_db
def test_a_bonus_stored_under_a_higher_limit_is_not_sent_above_the_limit_now(
    client, live, fake_mturk, admin_user, settings, django_capture_on_commit_callbacks
):
    """The limit was checked when a bonus was stored only: one stored before the limit was
    lowered, and never sent, was sent whatever it had become. It is checked again just before
    the platform is first asked; over it, the bonus is marked failed, saying why. (A bonus sent
    before, waiting for a retry, is not: test_a_bonus_sent_before_is_sent_again_whatever_the_limit.)"""
    settings.CROWD_BONUS_MAX_USD = Decimal("20.00")
    done = _approved(client, live, fake_mturk, admin_user)
    bonus = _bonus(done, admin_user, "15.00")
    settings.CROWD_BONUS_MAX_USD = Decimal("10.00")
    with pytest.raises(FieldInputError, match=r"\$15\.00 .* \$10\.00 \(CROWD_BONUS") as refused:
        review.bonus_pay(bonus_id=bonus.pk, user=admin_user, now=timezone.now())
    assert refused.value.field == "amount_usd"
    bonus.refresh_from_db()
    assert bonus.status == BonusStatus.FAILED and "CROWD_BONUS_MAX_USD" in bonus.error
    assert fake_mturk.state.bonuses == []
    # The page's path (its Celery task) records the refusal on the row instead of raising it.
    assert tasks.pay_bonus(bonus.pk, admin_user.pk) == BonusStatus.FAILED
    client.force_login(admin_user)
    page = client.get(reverse("crowd:review", args=[live.pk])).text
    assert "failed</strong>" in page and "would bring the bonuses of this assignment" in page
    # Sent again under a limit that allows it, the same bonus (its token) is paid, once.
    settings.CROWD_BONUS_MAX_USD = Decimal("20.00")
    assert tasks.pay_bonus(bonus.pk, admin_user.pk) == BonusStatus.PAID
    bonus.refresh_from_db()
    assert (bonus.status, bonus.error) == (BonusStatus.PAID, "")
    assert [b["BonusAmount"] for b in fake_mturk.state.bonuses] == ["15.00"]


@pytest.mark.django_db
def test_only_an_admin_sends_a_stored_bonus(client, live, fake_mturk, admin_user, researcher):
    """The page stores a bonus and its task sends it as the admin who asked: a user who is no
    admin (any more) sends nothing, whichever way in asks."""
    done = _approved(client, live, fake_mturk, admin_user)
    bonus = _bonus(done, admin_user, "1.00")
    with pytest.raises(PermissionDeniedError):
        review.bonus_pay(bonus_id=bonus.pk, user=researcher, now=timezone.now())
    with pytest.raises(PermissionDeniedError):
        tasks.pay_bonus(bonus.pk, researcher.pk)
    with pytest.raises(PermissionDeniedError):
        review.human_answer_bonus_create(
            answer_id=1, amount_usd=Decimal("1"), reason="r", user=researcher
        )
    assert fake_mturk.state.bonuses == [] and Bonus.objects.get().status == BonusStatus.PENDING


@pytest.mark.django_db
def test_every_refusal_of_an_api_bonus_names_its_field(
    client, live, fake_mturk, admin_user, settings
):
    settings.CROWD_BONUS_MAX_USD = Decimal("20.00")
    done = _approved(client, live, fake_mturk, admin_user)
    waiting = work(client, fake_mturk, list(live.hits.order_by("id"))[1], "AW2")
    client.force_login(admin_user)

    def send(assignment_id=done.pk, **body):
        bonus = {"amount_usd": "1.00", "feedback": "thanks", **body}
        answer = client.post(
            f"/api/crowd/assignments/{assignment_id}/bonus/", bonus,
            content_type="application/json",
        )  # fmt: skip
        return answer.status_code, answer.json().get("field"), answer.json()

    assert send(request_token="short")[:2] == (400, "request_token")
    assert send(amount_usd="0")[:2] == (400, "amount_usd")
    assert send(feedback=" ")[:2] == (400, "feedback")
    assert send(assignment_id=waiting.pk)[:2] == (409, "assignment")  # not approved
    assert send(assignment_id=999_999)[:2] == (404, "assignment")
    status, _, first = send(amount_usd="15.00", request_token="first-bonus-token")
    assert status == 200 and first["status"] == "paid"
    assert send(amount_usd="15.00")[:2] == (409, "request_token")  # a retry without a token?
    assert send(assignment_id=waiting.pk, request_token="first-bonus-token")[:2] == (
        409,
        "request_token",
    )  # another assignment's form
    status, field, over = send(amount_usd="5.01", request_token="second-bonus-token")
    assert (status, field) == (400, "amount_usd")
    assert "to $20.01 ($15.00 paid or being paid already)" in over["detail"]
    assert send(amount_usd="21")[:2] == (400, "amount_usd")
    assert done.bonuses.count() == 1 and len(fake_mturk.state.bonuses) == 1


def _first_held_after(monkeypatch, name: str):
    """Hold the first thread through review.<name>, after it returns, until `go` is set (the
    work's row lock taken); return (reached, go)."""
    real, reached, go, first = getattr(review, name), threading.Event(), threading.Event(), []

    def held(*args, **kwargs):
        outcome = real(*args, **kwargs)
        if not first:
            first.append(threading.get_ident())
            reached.set()
            go.wait(30)
        return outcome

    monkeypatch.setattr(review, name, held)
    return reached, go


def _at_once(first, second, *, reached, go) -> tuple:
    """Run `first` in a thread until it is held, then `second` in another until it is done or
    waits for a row lock; let the first go on; return both outcomes."""
    outcomes_a, outcomes_b = [], []
    thread_a = in_thread(first, outcomes_a)
    assert reached.wait(30)
    thread_b = in_thread(second, outcomes_b)
    deadline = time.monotonic() + 30
    while thread_b.is_alive() and not waiting_for_a_row_lock():
        assert time.monotonic() < deadline, "neither done nor waiting for a lock"
        time.sleep(0.01)
    go.set()
    thread_a.join(30)
    thread_b.join(30)
    return outcomes_a[0], outcomes_b[0]


@pytest.mark.django_db(transaction=True)
def test_two_bonus_requests_at_once_cannot_both_pass_the_maximum(
    monkeypatch, client, live, fake_mturk, admin_user, settings
):
    """Two API requests for one assignment at once, $15 and $10 under a $20 limit: each read
    the other's bonus as not there yet and both were paid. The second now waits for the
    assignment's row, which the first holds from its check to its insert, then counts the
    first and is refused, naming the field."""
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's row locks: SQLite runs one writer at a time")
    settings.CROWD_BONUS_MAX_USD = Decimal("20.00")
    done = _approved(client, live, fake_mturk, admin_user)
    reached, go = _first_held_after(monkeypatch, "_bonus_total_check")

    def request(amount: str, token: str):
        def send():
            admin = Client()
            admin.force_login(admin_user)
            return admin.post(
                f"/api/crowd/assignments/{done.pk}/bonus/",
                {"amount_usd": amount, "feedback": "thanks", "request_token": token},
                content_type="application/json",
            )

        return send

    first, second = _at_once(
        request("15.00", "first-request-token"), request("10.00", "second-request-token"),
        reached=reached, go=go,
    )  # fmt: skip
    assert first.status_code == 200 and first.json()["status"] == "paid", first.content
    assert second.status_code == 400, second.content
    assert second.json()["field"] == "amount_usd"
    assert "to $25.00 ($15.00 paid or being paid already)" in second.json()["detail"]
    assert [b["BonusAmount"] for b in fake_mturk.state.bonuses] == ["15.00"]


@pytest.mark.django_db(transaction=True)
def test_two_failed_bonuses_sent_again_at_once_cannot_both_pass_the_maximum(
    monkeypatch, client, live, fake_mturk, admin_user, settings
):
    """Bonuses the platform refused once are sent again with their tokens (the same form or
    API request again): two at once, $15 and $10 under a $20 limit, each saw the other as
    failed, holding nothing, and both were paid. The one checked first now holds its place
    (pending again) under the work's row lock, and the second counts it."""
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's row locks: SQLite runs one writer at a time")
    settings.CROWD_BONUS_MAX_USD = Decimal("30.00")
    done = _approved(client, live, fake_mturk, admin_user)
    bonuses = [_bonus(done, admin_user, "15.00"), _bonus(done, admin_user, "10.00")]
    Bonus.objects.update(status=BonusStatus.FAILED, error="ServiceQuotaExceeded")
    settings.CROWD_BONUS_MAX_USD = Decimal("20.00")
    reached, go = _first_held_after(monkeypatch, "_bonus_total_check")

    def pay(bonus):
        return lambda: review.bonus_pay(bonus_id=bonus.pk, user=admin_user, now=timezone.now())

    first, second = _at_once(pay(bonuses[0]), pay(bonuses[1]), reached=reached, go=go)
    assert first.status == BonusStatus.PAID, first
    assert isinstance(second, FieldInputError) and second.field == "amount_usd", second
    assert [b["BonusAmount"] for b in fake_mturk.state.bonuses] == ["15.00"]
    assert sorted(Bonus.objects.values_list("status", flat=True)) == ["failed", "paid"]


@pytest.fixture
def offline():
    fake.FakePlatform.reset()
    yield fake.FakePlatform()
    fake.FakePlatform.reset()


def _approved_offline(admin_user):
    publication = published_on_fake(_batch(3), reward_usd=Decimal("0.40"))
    done = submitted_on_fake_platform(
        crowd_assignment(task=publication.hits.get().task, platform="fake", worker="W1"),
        publication=publication,
    )
    review.assignment_approve(assignment_id=done.pk, user=admin_user)
    return done


def _paid_but_reply_lost(done, admin_user, monkeypatch, amount: str) -> Bonus:
    """A bonus the platform paid whose reply was lost (a timeout: its task retries later)."""
    bonus = _bonus(done, admin_user, amount)
    real_send = fake.FakePlatform.bonus_send

    def paid_then_lost(self, **kwargs):
        real_send(self, **kwargs)
        raise TransientPlatformError("read timeout", code="ConnectionError")

    monkeypatch.setattr(fake.FakePlatform, "bonus_send", paid_then_lost)
    with pytest.raises(TransientPlatformError):
        review.bonus_pay(bonus_id=bonus.pk, user=admin_user, now=timezone.now())
    monkeypatch.undo()
    return bonus


@pytest.mark.django_db
def test_a_bonus_sent_before_is_sent_again_whatever_the_limit(
    admin_user, offline, settings, monkeypatch
):
    """A bonus sent once may have been paid though its reply was lost. Its retry, under a limit
    lowered meanwhile (or a worker process's other setting), was checked again, marked failed,
    "Nothing was paid" (false), and, a failed bonus counting for nothing, the next bonus was
    paid: $25 on a $10 limit. Sent before, it is sent again with its token and marked paid."""
    settings.CROWD_BONUS_MAX_USD = Decimal("20.00")
    done = _approved_offline(admin_user)
    bonus = _paid_but_reply_lost(done, admin_user, monkeypatch, "15.00")
    assert len(offline.store.bonuses) == 1  # the platform paid it
    bonus.refresh_from_db()
    assert bonus.status == BonusStatus.PENDING
    settings.CROWD_BONUS_MAX_USD = Decimal("10.00")
    review.bonus_pay(bonus_id=bonus.pk, user=admin_user, now=timezone.now())  # the retry
    bonus.refresh_from_db()
    assert (bonus.status, bonus.error) == (BonusStatus.PAID, "")
    # It holds its $15: a further bonus under the $10 limit is refused, nothing more paid.
    with pytest.raises(FieldInputError, match=r"\$15\.00 paid or being paid already"):
        _bonus(done, admin_user, "10.00")
    assert [b["amount"] for b in offline.store.bonuses] == [Decimal("15.00")]


@pytest.mark.django_db
def test_a_bonus_the_platform_refused_is_checked_against_the_limit_again(
    admin_user, offline, settings, monkeypatch
):
    """A bonus the platform refused (nothing paid) is not "sent before": tried again, the
    limit applies to it as to a new one."""
    settings.CROWD_BONUS_MAX_USD = Decimal("20.00")
    done = _approved_offline(admin_user)
    bonus = _bonus(done, admin_user, "15.00")

    def refused(self, **kwargs):
        raise CrowdPlatformError("Insufficient funds.")

    monkeypatch.setattr(fake.FakePlatform, "bonus_send", refused)
    assert review.bonus_pay(bonus_id=bonus.pk, user=admin_user, now=timezone.now()).status == (
        BonusStatus.FAILED
    )
    monkeypatch.undo()
    bonus.refresh_from_db()
    assert bonus.sent_at is None
    settings.CROWD_BONUS_MAX_USD = Decimal("10.00")
    with pytest.raises(FieldInputError, match="CROWD_BONUS_MAX_USD"):
        review.bonus_pay(bonus_id=bonus.pk, user=admin_user, now=timezone.now())
    assert offline.store.bonuses == []


def test_a_bonus_refused_on_its_retry_after_a_lost_reply_still_counts_toward_the_limit(
    admin_user, offline, settings, monkeypatch
):
    """Paid on its first send (the reply lost), then refused on its retry for another reason
    (credentials rotated: boto's error is a plain refusal): it was marked failed with `sent_at`
    cleared, as if nothing had been paid, and stopped counting, so a $10 bonus more was paid —
    $25 on a $20 limit. Kept counting (failed, `sent_at` kept), its retry sent with its token."""
    settings.CROWD_BONUS_MAX_USD = Decimal("20.00")
    done = _approved_offline(admin_user)
    bonus = _paid_but_reply_lost(done, admin_user, monkeypatch, "15.00")
    assert len(offline.store.bonuses) == 1  # the platform paid it

    def refused(self, **kwargs):
        raise CrowdPlatformError("MTurk send_bonus: Unable to locate credentials")

    monkeypatch.setattr(fake.FakePlatform, "bonus_send", refused)
    review.bonus_pay(bonus_id=bonus.pk, user=admin_user, now=timezone.now())
    monkeypatch.undo()
    bonus.refresh_from_db()
    assert bonus.status == BonusStatus.FAILED and bonus.sent_at is not None
    assert "may have paid it" in bonus.error
    with pytest.raises(FieldInputError, match="more than the most one"):
        _bonus(done, admin_user, "10.00")
    assert sum(b["amount"] for b in offline.store.bonuses) == Decimal("15.00")
    review.bonus_pay(bonus_id=bonus.pk, user=admin_user, now=timezone.now())  # Retry: its token
    bonus.refresh_from_db()
    assert bonus.status == BonusStatus.PAID
    assert sum(b["amount"] for b in offline.store.bonuses) == Decimal("15.00")


def test_a_refusal_never_overwrites_a_bonus_another_delivery_paid_meanwhile(
    admin_user, offline, monkeypatch
):
    """The refusal was saved after the row lock, unconditionally: a concurrent delivery of the
    same bonus (the form sent twice, the API's retry) that was paid meanwhile was overwritten
    as failed. Stored only if the bonus is still as this send left it."""
    done = _approved_offline(admin_user)
    bonus = _bonus(done, admin_user, "5.00")

    def paid_elsewhere_then_refused(self, **kwargs):
        Bonus.objects.filter(pk=bonus.pk).update(
            status=BonusStatus.PAID, paid_at=timezone.now(), sent_at=timezone.now()
        )
        raise CrowdPlatformError("refused")

    monkeypatch.setattr(fake.FakePlatform, "bonus_send", paid_elsewhere_then_refused)
    review.bonus_pay(bonus_id=bonus.pk, user=admin_user, now=timezone.now())
    bonus.refresh_from_db()
    assert bonus.status == BonusStatus.PAID
