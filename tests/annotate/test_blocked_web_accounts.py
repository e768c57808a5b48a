"""A web account (platform "") an admin blocked gets no more work: its "start next task" claim
and its answer to a human study's prompt are refused with a page that says so, nothing is
stored, and the slots and places stay free for the others."""

import pytest
from django.urls import reverse
from django.utils import timezone

from annotate.crowd.services import review
from annotate.errors import WorkerBlockedError
from annotate.models import AnnotatorKind, Assignment
from annotate.roles import ANNOTATOR
from annotate.selectors.results import counted_human_answers
from annotate.services import assignments as assignment_services
from annotate.verbalizer.models import HumanAnswer
from annotate.verbalizer.services.humans import human_answer_change, human_work_answer_submit
from tests.annotate.verbalizer.test_released_places import admin, study
from tests.factories import AnnotatorFactory, UserFactory, project_with_tasks

pytestmark = pytest.mark.django_db

__all__ = ["admin", "study"]  # fixtures

BLOCKED = "Your account is blocked from new work here"


@pytest.fixture
def blocked_user(db, admin):
    """A logged-in web account counted as a crowd worker, blocked by an admin."""
    user = UserFactory(username="blocked-web", roles=[ANNOTATOR])
    annotator = assignment_services.annotator_of_annotator_user(user=user)
    annotator.kind = AnnotatorKind.CROWD
    annotator.save(update_fields=["kind"])
    review.worker_block(annotator_id=annotator.pk, reason="copied answers", user=admin)
    return user, annotator


def _answer(study, prompt_id, annotator):
    return human_work_answer_submit(
        study=study, prompt_id=prompt_id, annotator=annotator, key=1, seconds=1.0
    )


def test_a_blocked_web_accounts_answer_is_refused_and_takes_no_place(study, blocked_user):
    """Its answer was stored holding one of the prompt's three crowd places, counted nowhere:
    the prompt ended an answer short."""
    _, annotator = blocked_user
    prompt_id = study.prompts.order_by("pk").first().pk
    with pytest.raises(WorkerBlockedError, match=BLOCKED):
        _answer(study, prompt_id, annotator)
    assert not HumanAnswer.objects.filter(annotator=annotator).exists()
    for _ in range(3):
        _answer(study, prompt_id, AnnotatorFactory(kind=AnnotatorKind.CROWD))
    answers = HumanAnswer.objects.filter(prompt_id=prompt_id)
    assert counted_human_answers(answers).count() == 3


def test_the_answer_page_tells_a_blocked_web_account_so(client, study, blocked_user):
    user, annotator = blocked_user
    client.force_login(user)
    prompt = study.prompts.order_by("pk").first()
    page = client.post(
        reverse("verbalizer:work-answer", args=[study.pk]),
        {"prompt": prompt.pk, "key": "1", "seconds": "2"},
    )
    assert page.status_code == 403
    assert BLOCKED in page.content.decode()
    assert not HumanAnswer.objects.filter(annotator=annotator).exists()
    page = client.get(reverse("verbalizer:work-next", args=[study.pk]))
    assert page.status_code == 403 and BLOCKED in page.content.decode()


def test_a_blocked_web_account_gets_no_claim(blocked_user):
    """A live claim of theirs took a slot, and its submit counted nowhere."""
    _, annotator = blocked_user
    project = project_with_tasks(instructions=1, systems=2, questions=1, assignments_per_task=1)
    with pytest.raises(WorkerBlockedError, match=BLOCKED):
        assignment_services.assignment_claim_next(
            annotator=annotator, project=project, now=timezone.now()
        )
    assert not Assignment.objects.filter(annotator=annotator).exists()
    other = assignment_services.assignment_claim_next(
        annotator=AnnotatorFactory(), project=project, now=timezone.now()
    )
    assert other.status == "claimed"


def test_the_start_next_page_tells_a_blocked_web_account_so(client, blocked_user):
    user, annotator = blocked_user
    project = project_with_tasks(instructions=1, systems=2, questions=1, assignments_per_task=1)
    client.force_login(user)
    page = client.post(reverse("work:start-next", args=[project.id]))
    assert page.status_code == 403
    assert BLOCKED in page.content.decode()
    assert not Assignment.objects.filter(annotator=annotator).exists()


def test_my_tasks_shows_a_blocked_web_account_a_notice_and_no_start_button(client, blocked_user):
    """It listed the project with "Start next task", and the click was refused."""
    user, annotator = blocked_user
    project = project_with_tasks(instructions=1, systems=2, questions=1, assignments_per_task=1)
    other = UserFactory(username="not-blocked", roles=[ANNOTATOR])
    client.force_login(other)
    offered = client.get(reverse("work:dashboard")).text
    assert "Start next task" in offered and project.name in offered
    client.force_login(user)

    page = client.get(reverse("work:dashboard")).text

    assert BLOCKED in page and 'id="blocked-from-new-work"' in page
    assert "Start next task" not in page and project.name not in page
    assert "copied answers" not in page  # the admin's note, not written to them
    refused = client.post(reverse("work:start-next", args=[project.id]))
    assert refused.status_code == 403
    assert not Assignment.objects.filter(annotator=annotator).exists()


def test_label_word_tasks_shows_a_blocked_web_account_a_notice_and_no_study(
    client, study, blocked_user
):
    user, annotator = blocked_user
    client.force_login(UserFactory(username="not-blocked", roles=[ANNOTATOR]))
    assert study.name in client.get(reverse("verbalizer:work-list")).text
    client.force_login(user)

    page = client.get(reverse("verbalizer:work-list")).text

    assert BLOCKED in page and 'id="blocked-from-new-work"' in page
    assert study.name not in page
    assert reverse("verbalizer:work-next", args=[study.pk]) not in page
    prompt = study.prompts.order_by("pk").first()
    refused = client.post(
        reverse("verbalizer:work-answer", args=[study.pk]), {"prompt": prompt.pk, "key": "1"}
    )
    assert refused.status_code == 403
    assert not HumanAnswer.objects.filter(annotator=annotator).exists()


def test_a_blocked_account_cannot_change_its_last_answer(client, study, admin):
    """Blocked as a crowd worker and made an expert since (the block stays), it changed the
    answer it gave just before the block: the change was stored, and counts after an unblock."""
    user = UserFactory(username="blocked-later", roles=[ANNOTATOR])
    annotator = assignment_services.annotator_of_annotator_user(user=user)
    annotator.kind = AnnotatorKind.CROWD
    annotator.save(update_fields=["kind"])
    prompt = study.prompts.order_by("pk").first()
    answer = _answer(study, prompt.pk, annotator)
    review.worker_block(annotator_id=annotator.pk, reason="copied answers", user=admin)
    annotator.kind = AnnotatorKind.EXPERT
    annotator.save(update_fields=["kind"])
    client.force_login(user)

    refused = client.post(
        reverse("verbalizer:work-answer-change", args=[study.pk]),
        {"prompt": prompt.pk, "key": "2"},
    )

    assert refused.status_code == 403 and BLOCKED in refused.content.decode()
    answer.refresh_from_db()
    assert (answer.word, answer.changed_at) == (prompt.positive_word, None)
    with pytest.raises(WorkerBlockedError, match=BLOCKED):
        human_answer_change(
            study=study, annotator=annotator, prompt_id=prompt.pk, key=2, now=timezone.now()
        )
