"""Review and payment against the fake MTurk server through real boto3."""

import re
from datetime import timedelta
from decimal import Decimal

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from annotate.crowd import selectors
from annotate.crowd.models import (
    Bonus,
    BonusStatus,
    GoldAnswer,
    HitStatus,
    PlatformAssignment,
    PlatformCall,
)
from annotate.crowd.services import publishing, review
from annotate.crowd.services.publishing import PublishSettings
from annotate.errors import AnnotateError, ConflictError, PermissionDeniedError
from annotate.models import Assignment, AssignmentStatus, LabelValue, Question, Response
from tests.threads import other_verdict_first

pytestmark = pytest.mark.django_db


def work(client, fake_mturk, hit, worker, value="yes", post_back=True):
    """A worker accepts on MTurk, answers on our page, and the browser posts back to MTurk."""
    assignment_id = fake_mturk.api.worker_accept(hit.hit_id, worker)
    opened = client.get(
        reverse("crowd:mturk-task", args=[hit.unique_request_token]),
        {
            "assignmentId": assignment_id,
            "hitId": hit.hit_id,
            "workerId": worker,
            "turkSubmitTo": fake_mturk.url,
        },
    )
    page = client.get(opened["Location"]).text
    names = set(re.findall(r'name="(r\d+_q\d+)"', page))
    done = client.post(opened["Location"], {name: value for name in names})
    assert done.status_code == 200
    if post_back:
        fake_mturk.api.worker_submit(assignment_id, {"summary": "x"})
    return Assignment.objects.get(platform_assignment_id=assignment_id)


def _sync(publication):
    """A sync once the hand-back grace of the work submitted so far is over."""
    now = timezone.now() + review.release_grace()
    return review.publication_sync(publication_id=publication.pk, now=now)


def test_sync_pages_through_assignments_and_matches_ours(client, live, fake_mturk, settings):
    hit = live.hits.order_by("id").first()
    fake_mturk.state.hits[hit.hit_id]["MaxAssignments"] = 150
    hit.max_assignments = live.batch.project.assignments_per_task = 150
    hit.save()
    live.batch.project.save()
    for n in range(3):
        work(client, fake_mturk, hit, f"AW{n}")
    for n in range(105):  # more than one page of 100, submitted on MTurk only
        fake_mturk.api.worker_submit(fake_mturk.api.worker_accept(hit.hit_id, f"AX{n}"), {})
    result = _sync(live)
    assert result.seen == 108 and result.new == 108 and result.missing_here == 105
    assert PlatformAssignment.objects.filter(assignment__isnull=False).count() == 3
    assert _sync(live).new == 0  # safe to run twice


def test_reconcile_flags_both_directions(client, live, fake_mturk):
    hits = list(live.hits.order_by("id"))
    work(client, fake_mturk, hits[0], "AW1")
    lost = work(client, fake_mturk, hits[1], "AW2", post_back=False)  # never reached MTurk
    fake_mturk.api.worker_submit(fake_mturk.api.worker_accept(hits[2].hit_id, "AW3"), {})
    _sync(live)
    found = selectors.reconciliation(publication=live)
    assert [row.worker_id for row in found.missing_here] == ["AW3"]
    # Our answers are stored but the hand-back never reached MTurk: flagged for the admin.
    assert found.missing_on_platform == [lost]
    fake_mturk.api.worker_submit(lost.platform_assignment_id, {})
    _sync(live)
    assert selectors.reconciliation(publication=live).missing_on_platform == []


def test_approve_and_reject_reach_mturk(client, live, fake_mturk, admin_user):
    hits = list(live.hits.order_by("id"))
    good = work(client, fake_mturk, hits[0], "AW1")
    bad = work(client, fake_mturk, hits[1], "AW2")
    review.assignment_approve(assignment_id=good.pk, user=admin_user, feedback="thanks")
    with pytest.raises(AnnotateError, match="Say why"):
        review.assignment_reject(assignment_id=bad.pk, user=admin_user, feedback=" ")
    review.assignment_reject(assignment_id=bad.pk, user=admin_user, feedback="random answers")
    remote = fake_mturk.state.assignments
    assert remote[good.platform_assignment_id]["AssignmentStatus"] == "Approved"
    assert remote[bad.platform_assignment_id]["AssignmentStatus"] == "Rejected"
    assert remote[bad.platform_assignment_id]["RequesterFeedback"] == "random answers"
    good.refresh_from_db()
    bad.refresh_from_db()
    assert (good.status, bad.status) == (AssignmentStatus.APPROVED, AssignmentStatus.REJECTED)
    with pytest.raises(ConflictError):
        review.assignment_approve(assignment_id=bad.pk, user=admin_user)


def test_approve_retried_after_a_crash_is_harmless(client, live, fake_mturk, admin_user):
    done = work(client, fake_mturk, live.hits.first(), "AW1")
    fake_mturk.api.call("ApproveAssignment", {"AssignmentId": done.platform_assignment_id})
    review.assignment_approve(assignment_id=done.pk, user=admin_user)  # MTurk already approved
    done.refresh_from_db()
    assert done.status == AssignmentStatus.APPROVED


def test_only_admins_spend_money(client, live, fake_mturk, researcher):
    done = work(client, fake_mturk, live.hits.first(), "AW1")
    with pytest.raises(PermissionDeniedError):
        review.assignment_approve(assignment_id=done.pk, user=researcher)
    with pytest.raises(PermissionDeniedError):
        review.bonus_create(
            assignment_id=done.pk, amount_usd=Decimal("1"), reason="r", user=researcher
        )
    assert fake_mturk.state.assignments[done.platform_assignment_id]["AssignmentStatus"] == (
        "Submitted"
    )


def test_bonus_is_never_paid_twice(client, live, fake_mturk, admin_user):
    done = work(client, fake_mturk, live.hits.first(), "AW1")
    review.assignment_approve(assignment_id=done.pk, user=admin_user)
    bonus = review.bonus_create(
        assignment_id=done.pk, amount_usd=Decimal("0.50"), reason="careful work", user=admin_user
    )
    # An earlier try reached MTurk but its reply was lost before we stored "paid":
    fake_mturk.api.call(
        "SendBonus",
        {
            "WorkerId": "AW1",
            "AssignmentId": done.platform_assignment_id,
            "BonusAmount": "0.50",
            "Reason": "careful work",
            "UniqueRequestToken": bonus.unique_request_token,
        },
    )
    paid = review.bonus_pay(bonus_id=bonus.pk, user=admin_user, now=timezone.now())
    review.bonus_pay(bonus_id=bonus.pk, user=admin_user, now=timezone.now())
    assert paid.status == BonusStatus.PAID
    assert len(fake_mturk.state.bonuses) == 1
    assert fake_mturk.state.balance == Decimal("9999.50")


def test_a_bonus_whose_reply_was_lost_is_not_paid_again_once_mturk_forgot_its_token(
    client, live, fake_mturk, admin_user
):
    """MTurk keeps a UniqueRequestToken for 24 hours: a bonus sent again with it after that
    (the same form, or its task, a day later) is paid a second time."""
    from tests.annotate.crowd.fake_mturk import FakeMTurkError

    done = work(client, fake_mturk, live.hits.first(), "AW1")
    review.assignment_approve(assignment_id=done.pk, user=admin_user)
    kept = review.bonus_create(
        assignment_id=done.pk, amount_usd=Decimal("0.50"), reason="careful work", user=admin_user
    )
    paid = review.bonus_create(  # another bonus, the same, paid on purpose and marked paid
        assignment_id=done.pk, amount_usd=Decimal("0.50"), reason="careful work", user=admin_user,
        request_token="on-purpose-second",
    )  # fmt: skip
    review.bonus_pay(bonus_id=paid.pk, user=admin_user, now=timezone.now())
    original = fake_mturk.api.op_SendBonus
    sent = []

    def paid_then_every_reply_lost(body):
        if not sent:
            sent.append(original(body))
        raise FakeMTurkError("ServiceUnavailable", "Service unavailable", status=503)

    fake_mturk.api.op_SendBonus = paid_then_every_reply_lost
    with pytest.raises(review.TransientPlatformError):
        review.bonus_pay(bonus_id=kept.pk, user=admin_user, now=timezone.now())
    kept.refresh_from_db()
    assert kept.status == BonusStatus.PENDING and len(fake_mturk.state.bonuses) == 2
    fake_mturk.api.op_SendBonus = original
    fake_mturk.forget_tokens()
    later = timezone.now() + timedelta(days=2)
    assert review.bonus_pay(bonus_id=kept.pk, user=admin_user, now=later).status == "paid"
    assert len(fake_mturk.state.bonuses) == 2  # each bonus paid once
    # A third one, never sent, is paid: the platform's two are the two marked paid here.
    third = review.bonus_create(
        assignment_id=done.pk, amount_usd=Decimal("0.50"), reason="careful work", user=admin_user,
        request_token="on-purpose-third",
    )  # fmt: skip
    Bonus.objects.filter(pk=third.pk).update(created_at=timezone.now() - timedelta(days=1))
    review.bonus_pay(bonus_id=third.pk, user=admin_user, now=timezone.now())
    assert len(fake_mturk.state.bonuses) == 3


def test_a_bonus_form_sent_twice_pays_the_worker_once(
    client, live, fake_mturk, admin_user, django_capture_on_commit_callbacks
):
    """A double click, or the browser sending the form again, once paid a second bonus: the
    form carries the bonus's idempotency token, so the same form is the same bonus."""
    done = work(client, fake_mturk, live.hits.first(), "AW1")
    review.assignment_approve(assignment_id=done.pk, user=admin_user)
    client.force_login(admin_user)
    url = reverse("crowd:review", args=[live.pk])
    token = re.search(r'name="request_token" value="(\w+)"', client.get(url).text).group(1)
    action = reverse("crowd:assignment-action", args=[done.pk])
    form = {"action": "bonus", "amount": "0.40", "feedback": "thanks", "request_token": token}
    for _ in range(2):
        with django_capture_on_commit_callbacks(execute=True):
            client.post(action, form, HTTP_REFERER=url)
    assert [b.unique_request_token for b in done.bonuses.all()] == [token]
    assert len(fake_mturk.state.bonuses) == 1
    # A fresh page is a fresh form: the admin may pay another bonus on purpose.
    again = re.search(r'name="request_token" value="(\w+)"', client.get(url).text).group(1)
    assert again != token
    # The token names one bonus of one assignment, never another's.
    other = work(client, fake_mturk, list(live.hits.order_by("id"))[1], "AW2")
    review.assignment_approve(assignment_id=other.pk, user=admin_user)
    with pytest.raises(ConflictError):
        review.bonus_create(
            assignment_id=other.pk, amount_usd=Decimal("0.40"), reason="r", user=admin_user,
            request_token=token,
        )  # fmt: skip


def test_a_bonus_is_only_for_approved_work(client, live, fake_mturk, admin_user):
    """Bonuses paid on rejected or unreviewed work were paid on the platform but counted in no
    spending figure (the review page offers the form on approved rows only; a POST did not)."""
    hits = list(live.hits.order_by("id"))
    waiting = work(client, fake_mturk, hits[0], "AW1")
    rejected = work(client, fake_mturk, hits[1], "AW2")
    review.assignment_reject(assignment_id=rejected.pk, user=admin_user, feedback="bad")
    for assignment in (waiting, rejected):
        with pytest.raises(ConflictError, match="approved work"):
            review.bonus_create(
                assignment_id=assignment.pk, amount_usd=Decimal("0.50"), reason="r",
                user=admin_user,
            )  # fmt: skip
    assert not Bonus.objects.exists() and fake_mturk.state.bonuses == []


@pytest.mark.parametrize("amount", ["0", "-1", "0.001", "NaN", "Infinity", "1e400"])
def test_bad_bonus_amount_is_refused(client, live, fake_mturk, admin_user, amount):
    done = work(client, fake_mturk, live.hits.first(), "AW1")
    with pytest.raises(AnnotateError, match="positive amount"):
        review.bonus_create(
            assignment_id=done.pk, amount_usd=Decimal(amount), reason="r", user=admin_user
        )


def test_a_bonus_above_the_maximum_is_refused_on_the_page_and_nothing_is_paid(
    client, live, fake_mturk, admin_user, settings, django_capture_on_commit_callbacks
):
    """A browser walkthrough sent $10,000 on a $0.40 task "for payment" after one generic
    confirm: above CROWD_BONUS_MAX_USD the page says which field and what limit, and nothing is
    stored or sent to the platform; the limit itself is allowed."""
    settings.CROWD_BONUS_MAX_USD = Decimal("5.00")
    done = work(client, fake_mturk, live.hits.first(), "AW1")
    review.assignment_approve(assignment_id=done.pk, user=admin_user)
    client.force_login(admin_user)
    url = reverse("crowd:review", args=[live.pk])
    assert "at most $5.00" in client.get(url).text
    action = reverse("crowd:assignment-action", args=[done.pk])
    for amount in ("10000", "5.01"):
        with django_capture_on_commit_callbacks(execute=True):
            refused = client.post(
                action, {"action": "bonus", "amount": amount, "feedback": "thanks"},
                HTTP_REFERER=url, follow=True,
            )  # fmt: skip
        assert "Bonus amount: $" in refused.text
        assert "more than the most one bonus may be, $5.00 (CROWD_BONUS_MAX_USD)" in refused.text
        assert "sent for payment" not in refused.text
    assert not Bonus.objects.exists() and fake_mturk.state.bonuses == []
    with django_capture_on_commit_callbacks(execute=True):
        client.post(action, {"action": "bonus", "amount": "5.00", "feedback": "thanks"})
    assert [b["BonusAmount"] for b in fake_mturk.state.bonuses] == ["5.00"]


def test_the_api_refuses_a_bonus_above_the_maximum_naming_the_field(
    client, live, fake_mturk, admin_user, settings
):
    settings.CROWD_BONUS_MAX_USD = Decimal("20.00")
    done = work(client, fake_mturk, live.hits.first(), "AW1")
    review.assignment_approve(assignment_id=done.pk, user=admin_user)
    client.force_login(admin_user)
    answer = client.post(
        f"/api/crowd/assignments/{done.pk}/bonus/",
        {"amount_usd": "10000.00", "feedback": "thanks", "request_token": "t" * 20},
        content_type="application/json",
    )
    assert answer.status_code == 400, answer.content
    assert answer.json() == {
        "detail": "Bonus amount: $10,000.00 is more than the most one bonus may be, $20.00 "
        "(CROWD_BONUS_MAX_USD). Nothing was paid.",
        "field": "amount_usd",
    }
    assert not Bonus.objects.exists() and fake_mturk.state.bonuses == []


def test_block_unblock_and_notify(client, live, fake_mturk, admin_user):
    done = work(client, fake_mturk, live.hits.first(), "AW1")
    worker = done.annotator
    review.worker_block(annotator_id=worker.pk, reason="spam", user=admin_user)
    assert fake_mturk.state.blocks == {"AW1": "spam"}
    blocked = client.get(
        reverse("crowd:mturk-task", args=[live.hits.last().unique_request_token]),
        {
            "assignmentId": "X" * 30,
            "hitId": live.hits.last().hit_id,
            "workerId": "AW1",
            "turkSubmitTo": fake_mturk.url,
        },
    )
    assert blocked.status_code == 403
    review.worker_unblock(annotator_id=worker.pk, user=admin_user)
    assert fake_mturk.state.blocks == {}
    done = review.workers_notify(
        annotator_ids=[worker.pk], subject="New batch", message="Come back", user=admin_user
    )
    assert done == review.Notified(failed=[], not_sent=[])
    assert fake_mturk.state.notifications[0]["WorkerIds"] == ["AW1"]


def test_blocking_says_how_much_of_the_workers_work_the_platform_will_still_pay(
    client, live, fake_mturk, admin_user
):
    hits = list(live.hits.order_by("id"))
    first = work(client, fake_mturk, hits[0], "AW1")
    work(client, fake_mturk, hits[1], "AW1")
    review.assignment_approve(assignment_id=first.pk, user=admin_user)
    client.force_login(admin_user)
    answer = client.post(
        reverse("crowd:worker-action", args=[first.annotator_id]),
        {"action": "block", "reason": "copied answers"},
        follow=True,
    )
    said = [str(m) for m in answer.context["messages"]]
    assert said[0].startswith("Worker blocked")
    # the approved one is done; one waiting submission is not "1 ... wait for review"
    assert said[1].startswith("Still waiting for review: 1 of their submissions.")
    assert fake_mturk.state.blocks == {"AW1": "copied answers"}


def test_extend_expire_and_delete_finished_hits(client, live, fake_mturk, admin_user):
    hits = list(live.hits.order_by("id"))
    later = timezone.now() + timedelta(days=3)
    review.hit_set_expiration(hit_pk=hits[0].pk, expires_at=later, user=admin_user)
    assert fake_mturk.state.hits[hits[0].hit_id]["Expiration"] == pytest.approx(later.timestamp())
    done = work(client, fake_mturk, hits[1], "AW1")
    expired = review.publication_expire(publication_id=live.pk, now=timezone.now(), user=admin_user)
    assert (expired.expired, expired.failed) == (3, 0)
    deleted, busy = review.publication_delete_finished(publication_id=live.pk, user=admin_user)
    assert (deleted, busy) == (2, 1)  # hits[1] has work waiting for review
    review.assignment_approve(assignment_id=done.pk, user=admin_user)
    assert review.publication_delete_finished(publication_id=live.pk, user=admin_user) == (1, 0)
    assert not fake_mturk.state.hits
    assert live.hits.filter(status=HitStatus.DELETED).count() == 3


def test_gold_accuracy_suggests_approve_or_reject(client, live, fake_mturk):
    hits = list(live.hits.order_by("id"))
    task = hits[0].task
    for question in Question.objects.filter(instruction=task.instruction):
        for response in Response.objects.filter(instruction=task.instruction):
            GoldAnswer.objects.create(
                project=live.batch.project,
                question=question,
                response=response,
                value=LabelValue.YES,
            )
    work(client, fake_mturk, hits[0], "AGOOD", value="yes")
    work(client, fake_mturk, hits[0], "ABAD", value="no")
    rows = {row.worker.worker_id: row for row in selectors.review_rows(publication=live)}
    assert (rows["AGOOD"].gold.correct, rows["AGOOD"].gold.total) == (4, 4)
    assert rows["AGOOD"].suggestion == "approve"
    assert rows["ABAD"].gold.accuracy == 0 and rows["ABAD"].suggestion == "reject"


def test_selfhosted_work_cannot_be_paid_through_us(client, crowd_batch, admin_user):
    from tests.annotate.crowd.conftest import crowd_assignment

    done = crowd_assignment(task=crowd_batch.tasks.first(), platform="selfhosted", worker="P1")
    with pytest.raises(AnnotateError, match="self-hosted"):
        review.bonus_create(
            assignment_id=done.pk, amount_usd=Decimal("1"), reason="r", user=admin_user
        )
    review.assignment_approve(assignment_id=done.pk, user=admin_user)
    done.refresh_from_db()
    assert done.status == AssignmentStatus.APPROVED


def test_work_rejected_here_before_the_platform_had_it_is_rejected_there_once_it_has_it(
    client, live, fake_mturk, admin_user
):
    """Work the platform did not know yet (the hand-back had not arrived) is rejected here only.
    If the hand-back arrives later, the platform would pay it when the auto-approval delay ends
    while every figure here leaves it out: the review page offers to reject it there too."""
    late = work(client, fake_mturk, live.hits.first(), "AW1", post_back=False)
    _sync(live)
    client.force_login(admin_user)
    url = reverse("crowd:review", args=[live.pk])
    action = reverse("crowd:assignment-action", args=[late.pk])
    page = client.post(
        action, {"action": "reject", "feedback": "not handed back"}, HTTP_REFERER=url, follow=True
    )
    assert "Rejected here only: the platform does not know this assignment" in page.text
    remote = fake_mturk.state.assignments[late.platform_assignment_id]
    assert remote["AssignmentStatus"] == "Accepted"
    fake_mturk.api.worker_submit(late.platform_assignment_id, {})  # it arrives after all
    _sync(live)
    row = client.get(url).text.split(f'data-assignment="{late.pk}"')[1].split("</tr>")[0]
    assert "Rejected" in row and "(platform: Submitted)" in row
    assert "Reject on the platform too" in row
    page = client.post(
        action, {"action": "reject", "feedback": "handed back too late"}, HTTP_REFERER=url,
        follow=True,
    )  # fmt: skip
    assert "Rejected." in page.text and "Rejected here only" not in page.text
    assert remote["AssignmentStatus"] == "Rejected"
    assert remote["RequesterFeedback"] == "handed back too late"
    row = client.get(url).text.split(f'data-assignment="{late.pk}"')[1].split("</tr>")[0]
    assert "(platform: Rejected)" in row and "Reject on the platform" not in row


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ({}, "positive amount in dollars and cents"),  # a 500 before
        ({"amount_usd": 0}, "positive amount in dollars and cents"),
        ({"amount_usd": None}, "amount_usd"),
    ],
)
def test_the_api_refuses_a_bonus_without_an_amount_naming_what_it_needs(
    client, live, fake_mturk, admin_user, body, said
):
    done = work(client, fake_mturk, live.hits.first(), "AW1")
    review.assignment_approve(assignment_id=done.pk, user=admin_user)
    client.force_login(admin_user)
    answer = client.post(
        f"/api/crowd/assignments/{done.pk}/bonus/",
        {"feedback": "thanks", **body},
        content_type="application/json",
    )
    assert answer.status_code == 400, answer.content
    assert said in answer.content.decode()
    assert not Bonus.objects.exists() and fake_mturk.state.bonuses == []


def test_an_api_bonus_without_a_token_retried_after_a_lost_reply_pays_once(
    client, live, fake_mturk, admin_user
):
    """A client that sent no request_token and retried after losing the reply paid the
    worker a second bonus: the same work, amount and reason within 24 hours is refused (409)
    unless a token says the second one is meant."""
    done = work(client, fake_mturk, live.hits.first(), "AW1")
    review.assignment_approve(assignment_id=done.pk, user=admin_user)
    client.force_login(admin_user)
    url = f"/api/crowd/assignments/{done.pk}/bonus/"

    def send(**body):
        bonus = {"amount_usd": "0.50", "feedback": "careful work", **body}
        return client.post(url, bonus, content_type="application/json")

    first = send()
    assert first.status_code == 200 and first.json()["status"] == "paid"
    retried = send(feedback=" careful work ")  # the same reason, as stored
    assert retried.status_code == 409, retried.content
    said = retried.json()["detail"]
    assert f"Bonus {first.json()['bonus']} of $0.50" in said and "(paid)" in said
    assert "send a new request_token" in said
    assert done.bonuses.count() == 1 and len(fake_mturk.state.bonuses) == 1
    # Another amount or reason is another bonus; a token makes a second one deliberate.
    assert send(amount_usd="0.25").status_code == 200
    on_purpose = send(request_token="second-on-purpose-1")
    assert on_purpose.status_code == 200 and on_purpose.json()["status"] == "paid"
    assert send(request_token="second-on-purpose-1").json() == on_purpose.json()  # a retry
    assert done.bonuses.count() == 3 and len(fake_mturk.state.bonuses) == 3
    # A day later the same bonus without a token is no longer taken for a retry.
    Bonus.objects.update(created_at=timezone.now() - timedelta(hours=25))
    assert send().status_code == 200
    assert len(fake_mturk.state.bonuses) == 4


@pytest.mark.parametrize("kind", ["undecided", "expert"])
def test_a_platform_worker_given_another_kind_keeps_their_task_and_their_review_row(
    client, live, fake_mturk, admin_user, kind
):
    """A researcher makes an MTurk worker "not decided yet" (or an expert) while they work: the
    worker's task page answered 404, and their work left the review page and the approve and
    reject buttons, while MTurk pays it when the auto-approval delay ends unless it is
    rejected."""
    from annotate.models import Annotator
    from annotate.services.annotators import annotator_kind_set

    hit = live.hits.order_by("id").first()
    assignment_id = fake_mturk.api.worker_accept(hit.hit_id, "AW1")
    worker = client.get(
        reverse("crowd:mturk-task", args=[hit.unique_request_token]),
        {"assignmentId": assignment_id, "hitId": hit.hit_id, "workerId": "AW1",
         "turkSubmitTo": fake_mturk.url},
    )["Location"]  # fmt: skip
    annotator = Annotator.objects.get(platform="mturk", worker_id="AW1")
    annotator_kind_set(annotator=annotator, kind=kind, now=timezone.now())

    page = client.get(worker)
    assert page.status_code == 200
    names = set(re.findall(r'name="(r\d+_q\d+)"', page.text))
    assert names and client.post(worker, {name: "yes" for name in names}).status_code == 200
    fake_mturk.api.worker_submit(assignment_id, {"summary": "x"})
    _sync(live)

    client.force_login(admin_user)
    url = reverse("crowd:review", args=[live.pk])
    done = Assignment.objects.get(platform_assignment_id=assignment_id)
    row = client.get(url).text.split(f'data-assignment="{done.pk}"')[1].split("</tr>")[0]
    assert "AW1" in row and 'value="reject"' in row
    client.post(
        reverse("crowd:assignment-action", args=[done.pk]),
        {"action": "reject", "feedback": "random answers"},
        HTTP_REFERER=url,
    )
    assert fake_mturk.state.assignments[assignment_id]["AssignmentStatus"] == "Rejected"
    client.post(
        reverse("crowd:worker-action", args=[annotator.pk]),
        {"action": "block", "reason": "random answers"},
        HTTP_REFERER=url,
    )
    assert annotator.block.active


def _messages(page) -> list[str]:
    return [str(message) for message in page.context["messages"]]


def test_sync_now_on_the_review_page_says_what_the_sync_changed(
    client, live, fake_mturk, admin_user, settings
):
    """The reviewer syncs from the page they judge on, at once (the publication page's sync
    goes through the task queue), and learns what moved: confirmations, the platform's own
    verdicts, slots freed from work it does not know, and slots given back."""
    settings.CROWD_RELEASE_GRACE_SECONDS = 0
    hits = list(live.hits.order_by("id"))
    handed_back = work(client, fake_mturk, hits[0], "AW1")
    never_arrived = work(client, fake_mturk, hits[1], "AW2", post_back=False)
    fake_mturk.api.worker_submit(fake_mturk.api.worker_accept(hits[2].hit_id, "AW3"), {})
    client.force_login(admin_user)
    url = reverse("crowd:review", args=[live.pk])
    assert 'id="sync-now"' in client.get(url).text
    sync_url = reverse("crowd:review-sync", args=[live.pk])

    page = client.post(sync_url, follow=True)
    assert page.redirect_chain == [(url, 302)]
    assert _messages(page) == [
        "Synced 3 HITs with Amazon Mechanical Turk (2 assignments listed there): 1 newly confirmed by "
        "the platform; 1 not found there for their worker: their task slots are freed. "
        "1 assignment on the platform with no work here: see Needs attention."
    ]
    handed_back.refresh_from_db()
    never_arrived.refresh_from_db()
    assert PlatformAssignment.objects.filter(assignment=handed_back).exists()
    assert never_arrived.is_late and never_arrived.status == AssignmentStatus.SUBMITTED

    fake_mturk.state.assignments[handed_back.platform_assignment_id]["AssignmentStatus"] = (
        "Approved"
    )
    fake_mturk.api.worker_submit(never_arrived.platform_assignment_id, {})
    again = _messages(client.post(sync_url, follow=True))[0]
    assert again.startswith(
        "Synced 3 HITs with Amazon Mechanical Turk (3 assignments listed there): 1 newly confirmed by "
        "the platform; 1 approved by the platform (its auto-approval delay ended); 1 confirmed "
        "after their slots were freed: they hold them again."
    )
    never_arrived.refresh_from_db()
    assert not never_arrived.is_late
    assert "nothing changed." in _messages(client.post(sync_url, follow=True))[0]


def test_sync_now_is_a_post_by_an_admin_with_the_forms_csrf_token(
    client, live, fake_mturk, admin_user, researcher
):
    sync_url = reverse("crowd:review-sync", args=[live.pk])
    client.force_login(researcher)
    assert client.post(sync_url).status_code == 403
    client.force_login(admin_user)
    assert client.get(sync_url).status_code == 405
    checked = Client(enforce_csrf_checks=True)
    checked.force_login(admin_user)
    assert checked.post(sync_url).status_code == 403
    assert not PlatformCall.objects.filter(operation="assignments_list").exists()
    assert not live.hits.filter(synced_at__isnull=False).exists()
    page = checked.get(reverse("crowd:review", args=[live.pk]))
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    assert checked.post(sync_url, {"csrfmiddlewaretoken": token}).status_code == 302
    assert live.hits.filter(synced_at__isnull=False).count() == 3


def test_a_selfhosted_link_has_no_sync_button_and_no_sync(client, crowd_batch, admin_user):
    link = publishing.publication_create(
        batch=crowd_batch,
        platform_name="selfhosted",
        chosen=PublishSettings(title="t", description="d"),
        base_url="https://annotate.example.org",
    )
    client.force_login(admin_user)
    url = reverse("crowd:review", args=[link.pk])
    assert 'id="sync-now"' not in client.get(url).text
    page = client.post(reverse("crowd:review-sync", args=[link.pk]), HTTP_REFERER=url, follow=True)
    assert _messages(page) == ["A self-hosted link has no platform to sync with."]
    assert not PlatformCall.objects.exists()


def test_claims_never_submitted_are_listed_apart_and_cannot_be_decided(
    client, live, fake_mturk, admin_user
):
    """A claim that ran out and one returned before a submit are not review rows (they were
    listed among the submissions, with their status), and approve or reject refuses them."""
    from annotate.services.assignments import assignments_expire

    hit = live.hits.order_by("id").first()
    accepted = fake_mturk.api.worker_accept(hit.hit_id, "AIDLE")
    client.get(
        reverse("crowd:mturk-task", args=[hit.unique_request_token]),
        {"assignmentId": accepted, "hitId": hit.hit_id, "workerId": "AIDLE",
         "turkSubmitTo": fake_mturk.url},
    )  # fmt: skip
    idle = Assignment.objects.get(annotator__worker_id="AIDLE")
    assert assignments_expire(now=idle.expires_at + timedelta(seconds=1)) == 1
    done = work(client, fake_mturk, hit, "AW1")

    rows = selectors.review_rows(publication=live)
    assert [row.assignment.pk for row in rows] == [done.pk]
    assert [row.assignment.pk for row in selectors.never_submitted(publication=live)] == [idle.pk]
    admin = Client()
    admin.force_login(admin_user)
    page = admin.get(reverse("crowd:review", args=[live.pk])).text
    assert f'data-assignment="{idle.pk}"' not in page
    assert f'data-unsubmitted="{idle.pk}"' in page and "Never submitted" in page
    for action in ("approve", "reject"):
        answer = admin.post(
            reverse("crowd:assignment-action", args=[idle.pk]),
            {"action": action, "feedback": "no work"},
            follow=True,
        )
        assert "Only a submitted assignment can be" in answer.text
    idle.refresh_from_db()
    assert idle.status == AssignmentStatus.EXPIRED


def test_a_claim_ended_by_a_block_says_so_on_the_review_page_not_ran_out(
    client, live, fake_mturk, admin_user
):
    """Blocking a worker ends their open claims: the review page listed such a claim as "Ran
    out", though most of its time was left. One that ran out before the block still did."""
    from annotate.services.assignments import assignments_expire

    first, second = live.hits.order_by("id")[:2]

    def claimed(hit, worker):
        accepted = fake_mturk.api.worker_accept(hit.hit_id, worker)
        client.get(
            reverse("crowd:mturk-task", args=[hit.unique_request_token]),
            {"assignmentId": accepted, "hitId": hit.hit_id, "workerId": worker,
             "turkSubmitTo": fake_mturk.url},
        )  # fmt: skip
        return Assignment.objects.get(annotator__worker_id=worker, task=hit.task)

    lapsed = claimed(first, "ABLOCKED")
    assert assignments_expire(now=lapsed.expires_at + timedelta(seconds=1)) == 1
    open_claim = claimed(second, "ABLOCKED")
    now = open_claim.claimed_at + timedelta(minutes=1)
    review.worker_block(
        annotator_id=open_claim.annotator_id, reason="spam", user=admin_user, now=now
    )
    admin = Client()
    admin.force_login(admin_user)
    page = admin.get(reverse("crowd:review", args=[live.pk])).text
    row = re.search(rf'<tr data-unsubmitted="{open_claim.pk}">.*?</tr>', page, re.S).group(0)
    when = timezone.localtime(now).strftime("%Y-%m-%d %H:%M")
    assert f"Ended by the block, {when} UTC, with time left" in row and "Ran out" not in row
    row = re.search(rf'<tr data-unsubmitted="{lapsed.pk}">.*?</tr>', page, re.S).group(0)
    assert "Ran out" in row and "Ended by the block" not in row


def test_an_approve_mturk_paid_while_a_reject_was_stored_here_says_both(
    client, live, fake_mturk, admin_user, monkeypatch
):
    """A reject recorded here only landed between the approve's read and its lock; MTurk took
    the approve (the worker is paid). The refusal said "so it was not approved"."""
    done = work(client, fake_mturk, live.hits.first(), "AW1")
    other_verdict_first(  # a reject recorded here only, as for work MTurk had not confirmed
        monkeypatch,
        lambda: review._verdict_stored(
            Assignment.objects.get(pk=done.pk), AssignmentStatus.REJECTED
        ),
    )
    with pytest.raises(ConflictError) as refused:
        review.assignment_approve(assignment_id=done.pk, user=admin_user)

    said = str(refused.value)
    assert "The platform has this work approved now (the worker is paid)" in said
    assert "here it was rejected meanwhile" in said and "not approved" not in said
    remote = fake_mturk.state.assignments[done.platform_assignment_id]
    assert remote["AssignmentStatus"] == "Approved"
    done.refresh_from_db()
    assert done.status == AssignmentStatus.REJECTED
