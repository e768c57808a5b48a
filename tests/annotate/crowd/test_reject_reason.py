"""A reject's reason is kept on the work it rejects, whatever the platform (it vanished for a
web account and a self-hosted participant: only MTurk kept it, as RequesterFeedback), and a
web account reads it beside that work on their own "My tasks" page, as text, no one else's."""

import inspect

import pytest
from django.urls import reverse
from django.utils import timezone

from annotate.crowd.services import review
from annotate.models import AnnotatorKind, Assignment, AssignmentStatus
from annotate.roles import ANNOTATOR
from annotate.selectors import work as work_selectors
from annotate.services import assignments as assignment_services
from tests.annotate.crowd.conftest import crowd_assignment
from tests.annotate.crowd.test_review import work
from tests.factories import AssignmentFactory, UserFactory

pytestmark = pytest.mark.django_db


def web_account_user(username: str):
    """A logged-in web account counted as a crowd worker: (user, its annotator)."""
    user = UserFactory(username=username, roles=[ANNOTATOR])
    annotator = assignment_services.annotator_of_annotator_user(user=user)
    annotator.kind = AnnotatorKind.CROWD
    annotator.save(update_fields=["kind"])
    return user, annotator


def submitted(annotator):
    return AssignmentFactory(
        annotator=annotator, status=AssignmentStatus.SUBMITTED, submitted_at=timezone.now()
    )


def test_an_mturk_reject_keeps_the_feedback_the_worker_was_sent(
    client, live, fake_mturk, admin_user
):
    bad = work(client, fake_mturk, live.hits.order_by("id").first(), "AW1")
    review.assignment_reject(assignment_id=bad.pk, user=admin_user, feedback=" random answers ")

    bad.refresh_from_db()
    assert bad.status == AssignmentStatus.REJECTED
    assert bad.reject_reason == "random answers"
    remote = fake_mturk.state.assignments[bad.platform_assignment_id]
    assert remote["RequesterFeedback"] == bad.reject_reason


def test_a_self_hosted_participants_reject_keeps_its_reason_for_the_record(admin_user, crowd_batch):
    assignment = crowd_assignment(
        task=crowd_batch.tasks.first(), platform="selfhosted", worker="P1"
    )
    review.assignment_reject(assignment_id=assignment.pk, user=admin_user, feedback="bot")

    assignment.refresh_from_db()
    assert (assignment.status, assignment.reject_reason) == (AssignmentStatus.REJECTED, "bot")


def test_a_web_accounts_reject_through_the_api_keeps_its_reason(client, admin_user):
    _, annotator = web_account_user("web-api")
    assignment = submitted(annotator)
    client.force_login(admin_user)
    answer = client.post(
        reverse("crowd-api:reject", args=[assignment.pk]),
        {"feedback": "all UNKNOWN"},
        content_type="application/json",
    )

    assert answer.status_code == 200, answer.content
    assignment.refresh_from_db()
    assert assignment.reject_reason == "all UNKNOWN"


def test_a_web_account_reads_its_own_reject_reason_on_my_tasks_as_text(client, admin_user):
    """The worker saw only "Rejected". The reason is theirs alone: another worker's page does
    not show it; a tag typed in it is shown as typed, not rendered."""
    user, annotator = web_account_user("web-a")
    other_user, other = web_account_user("web-b")
    mine, theirs = submitted(annotator), submitted(other)
    review.assignment_reject(
        assignment_id=mine.pk, user=admin_user, feedback="<b>copied</b> the system's text"
    )
    review.assignment_reject(assignment_id=theirs.pk, user=admin_user, feedback="all UNKNOWN")

    client.force_login(user)
    page = client.get(reverse("work:dashboard")).content.decode()
    assert "&lt;b&gt;copied&lt;/b&gt; the system&#x27;s text" in page
    assert "<b>copied</b>" not in page
    assert "all UNKNOWN" not in page

    client.force_login(other_user)
    page = client.get(reverse("work:dashboard")).content.decode()
    assert "all UNKNOWN" in page
    assert "copied" not in page


def test_the_review_page_shows_the_admin_the_reason_given(client, live, fake_mturk, admin_user):
    bad = work(client, fake_mturk, live.hits.order_by("id").first(), "AW1")
    review.assignment_reject(assignment_id=bad.pk, user=admin_user, feedback="<i>spam</i>")
    client.force_login(admin_user)

    page = client.get(reverse("crowd:review", args=[live.pk])).content.decode()
    assert "Reason given:</span> &lt;i&gt;spam&lt;/i&gt;" in page
    listed = client.get(reverse("crowd-api:review", args=[live.pk])).json()
    assert [a["reject_reason"] for a in listed["assignments"]] == ["<i>spam</i>"]


def test_the_reasons_help_text_names_where_the_worker_reads_it(client, admin_user):
    """The field's help (the admin site, the schema) said the worker reads the reason on
    "their 'My tasks' page": it is beside the work under the page's 'Your recent assignments',
    their latest claims only; MTurk sends it only when told of the reject."""
    user, annotator = web_account_user("web-help")
    rejected = submitted(annotator)
    review.assignment_reject(assignment_id=rejected.pk, user=admin_user, feedback="too fast")
    client.force_login(user)
    page = client.get(reverse("work:dashboard")).content.decode()
    recent = page[page.index("<h2>Your recent assignments</h2>") :]
    assert "too fast" in recent

    help_text = Assignment._meta.get_field("reject_reason").help_text
    assert "under 'Your recent assignments' on 'My tasks'" in help_text
    latest = inspect.signature(work_selectors.recent_assignments).parameters["limit"].default
    assert f"(their {latest} latest claims)" in help_text
    assert "when the platform is told of the reject" in help_text


TOO_LONG = "x" * (review.FEEDBACK_MAX_CHARS + 1)


def test_a_reason_longer_than_mturk_takes_is_refused_before_it_is_sent_or_kept(
    client, live, fake_mturk, admin_user
):
    """MTurk caps RequesterFeedback at 1024 characters: a longer reason was sent as it was
    (MTurk refuses it). Refused first, 400 on "feedback" with the limit; 1024 goes through."""
    first, second = live.hits.order_by("id")[:2]
    bad = work(client, fake_mturk, first, "AW1")
    client.force_login(admin_user)

    refused = client.post(
        reverse("crowd-api:reject", args=[bad.pk]),
        {"feedback": TOO_LONG},
        content_type="application/json",
    )

    assert refused.status_code == 400
    assert refused.json()["field"] == "feedback"
    assert "at most 1024 characters" in refused.json()["detail"]
    bad.refresh_from_db()
    assert (bad.status, bad.reject_reason) == (AssignmentStatus.SUBMITTED, "")
    assert "RequesterFeedback" not in fake_mturk.state.assignments[bad.platform_assignment_id]
    longest = work(client, fake_mturk, second, "AW2")
    client.force_login(admin_user)
    review.assignment_reject(assignment_id=longest.pk, user=admin_user, feedback=TOO_LONG[1:])
    longest.refresh_from_db()
    assert longest.reject_reason == TOO_LONG[1:]


@pytest.mark.parametrize("platform", ["", "selfhosted"])
def test_the_same_limit_holds_for_every_platform_on_the_review_page(
    client, admin_user, crowd_batch, platform
):
    """A web account's and a self-hosted participant's reason are kept here only, and were
    kept whatever their length: the one limit holds for them too (the page says why)."""
    if platform:
        assignment = crowd_assignment(task=crowd_batch.tasks.first(), platform=platform)
    else:
        assignment = submitted(web_account_user("web-long")[1])
    client.force_login(admin_user)

    page = client.post(
        reverse("crowd:assignment-action", args=[assignment.pk]),
        {"action": "reject", "feedback": TOO_LONG},
        follow=True,
    )

    assert "at most 1024 characters" in page.text
    assignment.refresh_from_db()
    assert (assignment.status, assignment.reject_reason) == (AssignmentStatus.SUBMITTED, "")
