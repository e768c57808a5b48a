"""Web accounts (people who signed up on this site, platform "") counted as crowd workers have
no platform account: a message, a bonus or a block of theirs goes to no platform, and the
admin is told what happened instead (real boto3 against the fake MTurk server, with
CROWD_BACKEND=mturk, the platform get_platform("") used to pick for them)."""

from decimal import Decimal

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse
from django.utils import timezone

from annotate.crowd.models import Bonus, BonusStatus
from annotate.crowd.services import review
from annotate.errors import AnnotateError, ConflictError, FieldInputError
from annotate.models import AnnotatorKind, AssignmentStatus
from annotate.verbalizer.models import HumanAnswer
from tests.annotate.crowd.test_reject_reason import web_account_user
from tests.annotate.verbalizer.test_released_places import study
from tests.factories import AnnotatorFactory, AssignmentFactory

pytestmark = pytest.mark.django_db

__all__ = ["study"]  # fixtures


@pytest.fixture
def web_account(db):
    return AnnotatorFactory(kind=AnnotatorKind.CROWD, name="web-ann")


@pytest.fixture
def platform_worker(db):
    return AnnotatorFactory(
        kind=AnnotatorKind.CROWD, platform="mturk", worker_id="AW1", name="mturk:AW1"
    )


def _approved_work(annotator):
    return AssignmentFactory(
        annotator=annotator, status=AssignmentStatus.APPROVED, submitted_at=timezone.now()
    )


def _messages(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


def test_a_message_to_web_accounts_and_mturk_workers_reaches_the_workers_and_names_the_others(
    mturk_settings, fake_mturk, admin_user, web_account, platform_worker
):
    """The web account was messaged on MTurk with an empty WorkerId, which boto3 refused, so
    the call failed and the MTurk worker beside it was not messaged either."""
    done = review.workers_notify(
        annotator_ids=[web_account.pk, platform_worker.pk],
        subject="New batch",
        message="Come back",
        user=admin_user,
    )

    assert done.failed == [] and done.not_sent == ["web-ann"]
    assert [n["WorkerIds"] for n in fake_mturk.state.notifications] == [["AW1"]]


def test_a_message_to_a_web_account_alone_is_refused_saying_nothing_was_sent(
    client, mturk_settings, fake_mturk, admin_user, web_account
):
    client.force_login(admin_user)
    page = client.post(
        reverse("crowd:worker-action", args=[web_account.pk]),
        {"action": "notify", "subject": "New batch", "message": "Come back"},
        HTTP_REFERER="/crowd/",
    )

    assert _messages(page) == [
        "Nothing was sent. Not sent to web-ann: a web account (signed up on this site) has no "
        "crowd platform to message it through, and this site sends no messages of its own."
    ]
    api = client.post(
        reverse("crowd-api:notify", args=[web_account.pk]),
        {"subject": "New batch", "message": "Come back"},
        content_type="application/json",
    )
    assert api.status_code == 409
    assert "Nothing was sent" in api.json()["detail"]
    assert "NotifyWorkers" not in fake_mturk.state.calls


def test_blocking_a_web_account_says_what_the_block_does_to_it(
    client, mturk_settings, fake_mturk, admin_user, web_account
):
    """The page said their tasks were offered on Mechanical Turk: no platform is told; this site
    refuses them new work."""
    client.force_login(admin_user)
    page = client.post(
        reverse("crowd:worker-action", args=[web_account.pk]),
        {"action": "block", "reason": "copied answers"},
        HTTP_REFERER="/annotators/",
    )

    [said] = _messages(page)
    assert said.startswith("Web account blocked: their work counts in no result")
    assert "No platform was told" in said and "deactivate their user account" in said
    assert "no more tasks, study prompts or revision sessions here" in said
    assert "Mechanical Turk" not in said
    assert "CreateWorkerBlock" not in fake_mturk.state.calls


def test_a_bonus_for_a_web_accounts_work_is_refused_and_nothing_is_sent(
    client, mturk_settings, fake_mturk, admin_user, web_account
):
    """It was stored and sent to MTurk with an empty WorkerId (with the offline fake, paid)."""
    work = _approved_work(web_account)
    client.force_login(admin_user)

    answer = client.post(
        reverse("crowd-api:bonus", args=[work.pk]),
        {"amount_usd": "1.00", "feedback": "thanks", "request_token": "w" * 20},
        content_type="application/json",
    )

    assert answer.status_code == 400, answer.content
    assert answer.json() == {"detail": review.WEB_ACCOUNT_UNPAID, "field": "assignment"}
    assert not Bonus.objects.exists()
    assert "SendBonus" not in fake_mturk.state.calls
    with pytest.raises(FieldInputError, match="web account"):
        review.bonus_create(
            assignment_id=work.pk, amount_usd=Decimal("1.00"), reason="thanks", user=admin_user
        )


def test_a_web_accounts_bonus_stored_earlier_fails_saying_why_and_sends_nothing(
    mturk_settings, fake_mturk, admin_user, web_account
):
    work = _approved_work(web_account)
    bonus = Bonus.objects.create(
        assignment=work, amount_usd=Decimal("1.00"), reason="thanks",
        unique_request_token="w" * 20, created_by=admin_user,
    )  # fmt: skip

    paid = review.bonus_pay(bonus_id=bonus.pk, user=admin_user, now=timezone.now())

    assert (paid.status, paid.error) == (BonusStatus.FAILED, review.WEB_ACCOUNT_UNPAID)
    assert "SendBonus" not in fake_mturk.state.calls


def test_workers_notify_of_web_accounts_only_refuses_before_any_call(
    mturk_settings, fake_mturk, admin_user, web_account
):
    with pytest.raises(ConflictError, match="Not sent to web-ann"):
        review.workers_notify(
            annotator_ids=[web_account.pk], subject="s", message="m", user=admin_user
        )
    assert fake_mturk.state.notifications == []


def test_a_message_to_nobody_is_refused_as_such(admin_user):
    """An empty list is not "all web accounts": it was refused as "Not sent to : a web
    account…"; it names nobody, and says so."""
    with pytest.raises(AnnotateError, match="at least one worker"):
        review.workers_notify(annotator_ids=[], subject="s", message="m", user=admin_user)


def _submitted_work(annotator):
    return AssignmentFactory(
        annotator=annotator, status=AssignmentStatus.SUBMITTED, submitted_at=timezone.now()
    )


def test_a_reject_without_a_reason_says_where_each_worker_reads_it(
    client, admin_user, web_account, platform_worker
):
    """It said "the worker sees the feedback" to a web account, whom no platform tells, then
    that they were not told: the reason is kept now, and their "My tasks" page shows it. An
    MTurk worker reads it on the platform."""
    client.force_login(admin_user)
    said = {}
    for worker in (web_account, platform_worker):
        work = _submitted_work(worker)
        answer = client.post(
            reverse("crowd-api:reject", args=[work.pk]),
            {"feedback": " "},
            content_type="application/json",
        )
        assert answer.status_code == 400, answer.content
        said[worker.platform] = answer.json()["detail"]
        work.refresh_from_db()
        assert work.status == AssignmentStatus.SUBMITTED

    assert "sees the feedback" not in said[""] and "not told" not in said[""]
    # the page lists the 20 most recent assignments only, not every rejected one
    assert (
        "reads it beside the rejected work among their recent tasks on their 'My tasks' page"
        in said[""]
    )
    assert said["mturk"].endswith("the worker sees the feedback on the platform.")


def test_a_reject_of_a_web_accounts_study_answer_without_a_reason_names_their_page(
    admin_user, web_account, study
):
    prompt = study.prompts.order_by("pk").first()
    answer = HumanAnswer.objects.create(
        study=study, prompt=prompt, annotator=web_account, word=prompt.positive_word
    )

    with pytest.raises(AnnotateError) as refused:
        review.human_answer_reject(answer_id=answer.pk, user=admin_user, feedback="")

    assert "sees the feedback" not in str(refused.value)
    assert (
        "beside the rejected work among their recent tasks on their 'Label-word tasks' page"
        in str(refused.value)
    )
    answer.refresh_from_db()
    assert answer.status == AssignmentStatus.SUBMITTED


def test_a_web_account_reads_its_own_rejected_answers_reason_on_label_word_tasks(
    client, admin_user, study
):
    """The reason of a rejected study answer was kept nowhere. Now it is stored with the
    reject, and the person's "Label-word tasks" lists it, as text; another person's page does
    not show it, and theirs shows only their own."""
    prompt = study.prompts.order_by("pk").first()
    (user, annotator), (other_user, other) = web_account_user("web-a"), web_account_user("web-b")
    mine, theirs = (
        HumanAnswer.objects.create(
            study=study, prompt=prompt, annotator=person, word=prompt.positive_word
        )
        for person in (annotator, other)
    )
    review.human_answer_reject(answer_id=mine.pk, user=admin_user, feedback="<b>pressed 1</b>")
    review.human_answer_reject(answer_id=theirs.pk, user=admin_user, feedback="too fast")

    mine.refresh_from_db()
    assert (mine.status, mine.reject_reason) == (AssignmentStatus.REJECTED, "<b>pressed 1</b>")
    client.force_login(user)
    page = client.get(reverse("verbalizer:work-list")).content.decode()
    assert "&lt;b&gt;pressed 1&lt;/b&gt;" in page and "<b>pressed 1</b>" not in page
    assert "too fast" not in page
    client.force_login(other_user)
    page = client.get(reverse("verbalizer:work-list")).content.decode()
    assert "too fast" in page and "pressed 1" not in page


def test_a_reject_of_an_experts_work_without_a_reason_is_worded_for_no_crowd_worker(
    client, admin_user
):
    """An in-house expert (platform "", as a web account's) got the web account's wording,
    "reads it beside the rejected work on their 'My tasks' page", then, with a reason, 404 "No
    such crowd assignment": no reject takes an expert's work, and no page of theirs shows one."""
    expert = AnnotatorFactory(kind=AnnotatorKind.EXPERT, name="in-house")
    work = _submitted_work(expert)
    client.force_login(admin_user)

    blank = client.post(
        reverse("crowd-api:reject", args=[work.pk]),
        {"feedback": ""},
        content_type="application/json",
    )

    assert blank.status_code == 400
    assert blank.json()["detail"] == "Say why you reject this work."
    given = client.post(
        reverse("crowd-api:reject", args=[work.pk]),
        {"feedback": "off topic"},
        content_type="application/json",
    )
    assert given.status_code == 404
    work.refresh_from_db()
    assert (work.status, work.reject_reason) == (AssignmentStatus.SUBMITTED, "")


def test_a_study_answers_reason_longer_than_mturk_takes_is_refused_on_its_page(
    client, admin_user, web_account, study
):
    prompt = study.prompts.order_by("pk").first()
    answer = HumanAnswer.objects.create(
        study=study, prompt=prompt, annotator=web_account, word=prompt.positive_word
    )
    client.force_login(admin_user)

    page = client.post(
        reverse("verbalizer:answer-action", args=[answer.pk]),
        {"action": "reject", "feedback": "x" * (review.FEEDBACK_MAX_CHARS + 1)},
        follow=True,
    )

    assert "feedback: at most 1024 characters" in page.text
    answer.refresh_from_db()
    assert (answer.status, answer.reject_reason) == (AssignmentStatus.SUBMITTED, "")
