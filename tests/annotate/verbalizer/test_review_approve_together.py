"""A human study's review page approves answers together (those ticked, or every submitted and
confirmed answer it showed), each as its own Approve button would, and a single approve or
reject returns to the answer's own row, not the top of the page."""

import re

import pytest
from django.urls import reverse
from django.utils import timezone

from annotate.crowd.services import review
from annotate.errors import TransientPlatformError
from annotate.models import AssignmentStatus
from annotate.verbalizer.models import HumanAnswer
from tests.annotate.verbalizer.test_crowd_spending import _answer_on_fake, _publish
from tests.annotate.verbalizer.test_released_places import admin, study

pytestmark = pytest.mark.django_db

__all__ = ["admin", "study"]  # fixtures


@pytest.fixture
def answers(study):
    """Three confirmed answers on the offline platform, and one whose worker has not handed
    its assignment back (the platform has not confirmed it: it cannot be approved)."""
    publication = _publish(study, "fake", "0.20")
    hit = publication.hits.order_by("id").first()
    confirmed = [_answer_on_fake(hit, worker) for worker in ("W1", "W2", "W3")]
    review.publication_sync(publication_id=publication.pk, now=timezone.now())
    other_hit = publication.hits.order_by("id").last()
    unconfirmed = _answer_on_fake(other_hit, "W4", hand_back=False)
    return publication, confirmed, unconfirmed


def _statuses(*answers: HumanAnswer) -> list[str]:
    return [HumanAnswer.objects.get(pk=answer.pk).status for answer in answers]


def _messages(client, response) -> str:
    return " ".join(str(m) for m in client.get(response["Location"]).context["messages"])


def test_every_confirmed_answer_shown_is_approved_together(client, admin, answers):
    publication, confirmed, unconfirmed = answers
    client.force_login(admin)
    page = client.get(reverse("verbalizer:crowd-review", args=[publication.pk])).text
    shown = [a.pk for a in confirmed]
    # Each confirmed answer is offered, the unconfirmed one is not.
    assert f'name="shown" value="{",".join(map(str, shown))}"' in page
    assert "Approve every submitted, confirmed answer shown (3)" in page

    done = client.post(
        reverse("verbalizer:crowd-review-approve", args=[publication.pk]),
        {"scope": "shown", "shown": [*shown, unconfirmed.pk], "answer": [], "feedback": "ok"},
    )

    assert done["Location"] == reverse("verbalizer:crowd-review", args=[publication.pk])
    assert _statuses(*confirmed) == [AssignmentStatus.APPROVED] * 3
    assert _statuses(unconfirmed) == [AssignmentStatus.SUBMITTED]
    assert "Approved 3 answers. 1 left as it was" in _messages(client, done)


def test_only_the_ticked_answers_are_approved(client, admin, answers):
    publication, confirmed, _ = answers
    client.force_login(admin)
    done = client.post(
        reverse("verbalizer:crowd-review-approve", args=[publication.pk]),
        {"scope": "selected", "answer": [confirmed[1].pk], "shown": [a.pk for a in confirmed]},
    )
    assert _statuses(*confirmed) == [
        AssignmentStatus.SUBMITTED, AssignmentStatus.APPROVED, AssignmentStatus.SUBMITTED,
    ]  # fmt: skip
    assert "Approved 1 answer." in _messages(client, done)
    nothing = client.post(
        reverse("verbalizer:crowd-review-approve", args=[publication.pk]), {"scope": "selected"}
    )
    assert "Tick the answers to approve first" in _messages(client, nothing)


def test_a_throttled_platform_stops_the_rest_and_says_how_many_were_not_tried(
    client, admin, answers, monkeypatch
):
    publication, confirmed, _ = answers
    approve = review.human_answer_approve
    calls = []

    def throttled_second(**kwargs):
        calls.append(kwargs["answer_id"])
        if len(calls) == 2:
            raise TransientPlatformError("The platform asks to slow down.")
        return approve(**kwargs)

    monkeypatch.setattr(review, "human_answer_approve", throttled_second)
    client.force_login(admin)
    done = client.post(
        reverse("verbalizer:crowd-review-approve", args=[publication.pk]),
        {"scope": "shown", "shown": [a.pk for a in confirmed]},
    )
    assert _statuses(*confirmed) == [
        AssignmentStatus.APPROVED, AssignmentStatus.SUBMITTED, AssignmentStatus.SUBMITTED,
    ]  # fmt: skip
    said = _messages(client, done)
    assert "Approved 1 answer." in said and "2 answers not tried yet" in said


def test_a_single_approve_returns_to_the_answers_row(client, admin, answers):
    publication, confirmed, _ = answers
    client.force_login(admin)
    page = reverse("verbalizer:crowd-review", args=[publication.pk])
    assert f'id="answer-{confirmed[1].pk}"' in client.get(page).text
    done = client.post(
        reverse("verbalizer:answer-action", args=[confirmed[1].pk]),
        {"action": "approve", "feedback": ""},
        HTTP_REFERER=f"http://testserver{page}",
    )
    assert done["Location"] == f"http://testserver{page}#answer-{confirmed[1].pk}"


def test_approving_every_answer_shown_posts_a_few_fields_however_many_answers_there_are(
    client, admin, answers, settings
):
    """The form sends the answers shown in one field: one field each put a page of more
    answers than DATA_UPLOAD_MAX_NUMBER_FIELDS (1,000) past Django's limit, and its button
    answered 400 Bad Request, approving nothing."""
    publication, confirmed, _ = answers
    client.force_login(admin)
    page = client.get(reverse("verbalizer:crowd-review", args=[publication.pk])).text
    shown = re.findall(r'name="shown" value="([^"]*)"', page)
    # Three answers shown: a limit of five fields stands for 1,000 with a thousand of them.
    settings.DATA_UPLOAD_MAX_NUMBER_FIELDS = 5
    done = client.post(
        reverse("verbalizer:crowd-review-approve", args=[publication.pk]),
        {"csrfmiddlewaretoken": "x", "scope": "shown", "shown": shown, "feedback": ""},
    )
    assert done.status_code == 302
    assert _statuses(*confirmed) == [AssignmentStatus.APPROVED] * 3


def test_a_blocked_workers_answers_are_left_out_of_approving_together(client, admin, answers):
    """Blocking says their waiting answers are paid unless rejected: approving every answer
    shown (or a tick sent anyway) leaves theirs to their own buttons, not paid with the rest."""
    publication, confirmed, _ = answers
    review.worker_block(annotator_id=confirmed[1].annotator_id, reason="random", user=admin)
    client.force_login(admin)
    page = client.get(reverse("verbalizer:crowd-review", args=[publication.pk])).text
    assert "Approve every submitted, confirmed answer shown (2)" in page
    assert f'name="answer" value="{confirmed[1].pk}"' not in page  # no tick beside it
    done = client.post(
        reverse("verbalizer:crowd-review-approve", args=[publication.pk]),
        {"scope": "shown", "shown": ",".join(str(a.pk) for a in confirmed)},
    )
    assert _statuses(*confirmed) == [
        AssignmentStatus.APPROVED, AssignmentStatus.SUBMITTED, AssignmentStatus.APPROVED,
    ]  # fmt: skip
    assert "Approved 2 answers. 1 left as it was" in _messages(client, done)
