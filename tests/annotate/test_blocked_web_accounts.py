"""A web account (platform "") an admin blocked gets no more work: its "start next task" claim
and its answer to a human study's prompt are refused with a page that says so, nothing is
stored, and the slots and places stay free for the others."""

import pytest
from django.urls import reverse
from django.utils import timezone

from annotate.crowd.services import review
from annotate.errors import WorkerBlockedError
from annotate.models import AnnotatorKind, Assignment
from annotate.revision.models import CallStatus, RevisionSession, Turn
from annotate.revision.services.sessions import (
    call_retry,
    session_assign,
    session_finish,
    turn_rate,
    turn_withdraw,
)
from annotate.roles import ANNOTATOR, RESEARCHER
from annotate.selectors.results import counted_human_answers
from annotate.services import assignments as assignment_services
from annotate.verbalizer.models import HumanAnswer
from annotate.verbalizer.services.humans import human_answer_change, human_work_answer_submit
from tests.annotate.revision.conftest import instruct, make_live_study
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


def test_all_done_shows_a_blocked_web_account_a_notice_and_no_start_button(client, blocked_user):
    """It offered "Start next task" in the project and a Start button for every other project
    with work, as the dashboard did before it was given the notice."""
    user, annotator = blocked_user
    here = project_with_tasks(instructions=1, systems=2, questions=1, assignments_per_task=1)
    there = project_with_tasks(instructions=1, systems=2, questions=1, assignments_per_task=1)
    there.name = "Another project"
    there.save(update_fields=["name"])
    done_page = reverse("work:project-done", args=[here.id])
    client.force_login(UserFactory(username="not-blocked", roles=[ANNOTATOR]))
    offered = client.get(done_page).text
    assert "Start next task" in offered and there.name in offered
    client.force_login(user)

    page = client.get(done_page).text

    assert BLOCKED in page and 'id="blocked-from-new-work"' in page
    assert "Start next task" not in page and "start-next" not in page
    assert there.name not in page and "copied answers" not in page
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


@pytest.fixture
def kiwi(db, tmp_path, settings):
    """A revision study (KIWI): two questions, two models, model calls run inline."""
    return make_live_study(tmp_path, settings)


def test_a_blocked_web_account_starts_no_revision_session(client, kiwi, blocked_user):
    """Revision sessions read no block: a blocked account started a new session (a new
    question, and a model call for its initial answer) as if nothing had happened."""
    user, _ = blocked_user
    with pytest.raises(WorkerBlockedError, match=BLOCKED):
        session_assign(study=kiwi, user=user, now=timezone.now())
    client.force_login(user)

    page = client.post(reverse("revision:start", args=[kiwi.pk]))

    assert page.status_code == 403 and BLOCKED in page.content.decode()
    assert not RevisionSession.objects.filter(annotator=user).exists()


def test_a_session_in_progress_at_the_block_takes_no_new_instruction_but_its_rating(
    client, kiwi, admin, django_capture_on_commit_callbacks
):
    """What the model already answered may still be rated and the session finished; a new
    instruction (a model call) or a retry is refused, and so is the next session."""
    capture = django_capture_on_commit_callbacks
    user = UserFactory(username="kiwi-web", roles=[ANNOTATOR])
    annotator = assignment_services.annotator_of_annotator_user(user=user)
    annotator.kind = AnnotatorKind.CROWD
    annotator.save(update_fields=["kind"])
    with capture(execute=True):
        session = session_assign(study=kiwi, user=user, now=timezone.now())
    turn = instruct(capture, session, user, "Add citations.")
    review.worker_block(annotator_id=annotator.pk, reason="copied answers", user=admin)
    client.force_login(user)

    assert session_assign(study=kiwi, user=user, now=timezone.now()) == session  # continued
    rated = turn_rate(
        session_id=session.pk, user=user, rating="bad", comment="no", now=timezone.now()
    )
    assert rated.pk == turn.pk and rated.rating == "bad"
    refused = client.post(
        reverse("revision:turn-new", args=[session.pk]),
        {"instruction": "Shorter.", "instruction_type": "stylistic", "position": "2"},
    )
    assert refused.status_code == 403 and BLOCKED in refused.content.decode()
    assert session.turns.count() == 1
    with pytest.raises(WorkerBlockedError, match=BLOCKED):
        call_retry(session_id=session.pk, user=user, now=timezone.now())
    session_finish(session_id=session.pk, user=user, now=timezone.now())
    with pytest.raises(WorkerBlockedError, match=BLOCKED):
        session_assign(study=kiwi, user=user, now=timezone.now())
    assert RevisionSession.objects.filter(annotator=user).count() == 1


def test_the_session_page_shows_a_blocked_account_the_notice_not_the_instruction_box(
    client, kiwi, admin, django_capture_on_commit_callbacks
):
    """The page offered the instruction box; what was typed there was refused (403) and lost.
    Blocked, the page says why in its place, and still offers the rating of the turn the model
    answered already, then ending the session; unblocked, the box is back."""
    capture = django_capture_on_commit_callbacks
    user = UserFactory(username="kiwi-page", roles=[ANNOTATOR])
    annotator = assignment_services.annotator_of_annotator_user(user=user)
    annotator.kind = AnnotatorKind.CROWD
    annotator.save(update_fields=["kind"])
    with capture(execute=True):
        session = session_assign(study=kiwi, user=user, now=timezone.now())
    instruct(capture, session, user, "Add citations.")
    review.worker_block(annotator_id=annotator.pk, reason="copied answers", user=admin)
    client.force_login(user)
    url = reverse("revision:session", args=[session.pk])

    rating = client.get(url).text
    assert 'id="rate-form"' in rating and 'id="turn-form"' not in rating
    turn_rate(session_id=session.pk, user=user, rating="good", comment="ok", now=timezone.now())
    page = client.get(url).text

    assert BLOCKED in page and 'id="blocked-from-new-work"' in page
    assert 'id="turn-form"' not in page and 'name="instruction"' not in page
    assert 'id="satisfied"' in page and "copied answers" not in page
    review.worker_unblock(annotator_id=annotator.pk, user=admin)
    page = client.get(url).text
    assert 'id="turn-form"' in page and BLOCKED not in page


def test_a_blocked_accounts_failed_session_offers_no_retry_but_giving_up(
    client, kiwi, admin, blocked_user, django_capture_on_commit_callbacks
):
    """Retry is a model call and refused (403) to a blocked account: the page no longer offers
    it; giving the session up stays."""
    user, annotator = blocked_user
    review.worker_unblock(annotator_id=annotator.pk, user=admin)  # to start a session
    with django_capture_on_commit_callbacks(execute=True):
        session = session_assign(study=kiwi, user=user, now=timezone.now())
    RevisionSession.objects.filter(pk=session.pk).update(
        initial_status=CallStatus.FAILED, initial_error="endpoint down"
    )
    review.worker_block(annotator_id=annotator.pk, reason="again", user=admin)
    client.force_login(user)

    page = client.get(reverse("revision:session", args=[session.pk])).text

    assert "The model did not answer." in page and BLOCKED in page
    assert 'id="retry"' not in page and 'id="give-up"' in page


def test_a_blocked_accounts_finished_session_offers_the_notice_not_next_session(
    client, kiwi, admin, blocked_user, django_capture_on_commit_callbacks
):
    """A finished session offered "Next session", which a blocked account posts and is refused
    (403): the page says why in its place; unblocked, Next session is back."""
    user, annotator = blocked_user
    review.worker_unblock(annotator_id=annotator.pk, user=admin)  # to start a session
    with django_capture_on_commit_callbacks(execute=True):
        session = session_assign(study=kiwi, user=user, now=timezone.now())
    session_finish(session_id=session.pk, user=user, now=timezone.now())
    review.worker_block(annotator_id=annotator.pk, reason="copied answers", user=admin)
    client.force_login(user)
    url = reverse("revision:session", args=[session.pk])
    start = reverse("revision:start", args=[kiwi.pk])

    page = client.get(url).text

    assert 'id="finished"' in page and BLOCKED in page and 'id="blocked-from-new-work"' in page
    assert start not in page and "Next session" not in page and 'id="study-done"' not in page
    review.worker_unblock(annotator_id=annotator.pk, user=admin)
    page = client.get(url).text
    assert start in page and "Next session" in page and BLOCKED not in page


def test_revision_home_shows_a_blocked_account_the_notice_and_only_continue(
    client, kiwi, admin, blocked_user, django_capture_on_commit_callbacks
):
    """The home page offered "Start a session", refused (403) to a blocked account: it says
    why instead, and keeps "Continue" for the session in progress, which may still be rated
    and ended."""
    user, annotator = blocked_user
    client.force_login(user)
    home = reverse("revision:home")
    start = reverse("revision:start", args=[kiwi.pk])

    page = client.get(home).text

    assert BLOCKED in page and 'id="blocked-from-new-work"' in page
    assert start not in page and "Start a session" not in page
    review.worker_unblock(annotator_id=annotator.pk, user=admin)  # to start a session
    with django_capture_on_commit_callbacks(execute=True):
        session_assign(study=kiwi, user=user, now=timezone.now())
    review.worker_block(annotator_id=annotator.pk, reason="again", user=admin)
    page = client.get(home).text
    assert BLOCKED in page and start in page and "Continue" in page
    assert "Start a session" not in page
    review.worker_unblock(annotator_id=annotator.pk, user=admin)
    page = client.get(home).text
    assert BLOCKED not in page and "Continue" in page


def test_a_blocked_accounts_failed_instruction_is_kept_not_withdrawn(
    client, kiwi, admin, django_capture_on_commit_callbacks
):
    """Withdrawing deleted the turn and put its text back in the instruction box, which a
    blocked account is not shown: the instruction it had sent was gone for good. Blocked, the
    page offers no Withdraw, a withdrawal is refused, and the turn stays for the researchers'
    read-only page; unblocked, Withdraw is back."""
    capture = django_capture_on_commit_callbacks
    user = UserFactory(username="kiwi-withdraw", roles=[ANNOTATOR])
    annotator = assignment_services.annotator_of_annotator_user(user=user)
    annotator.kind = AnnotatorKind.CROWD
    annotator.save(update_fields=["kind"])
    with capture(execute=True):
        session = session_assign(study=kiwi, user=user, now=timezone.now())
    turn = instruct(capture, session, user, "Cite the 2019 survey.")
    Turn.objects.filter(pk=turn.pk).update(call_status=CallStatus.FAILED, call_error="down")
    review.worker_block(annotator_id=annotator.pk, reason="copied answers", user=admin)
    client.force_login(user)
    url = reverse("revision:session", args=[session.pk])
    withdraw = reverse("revision:withdraw", args=[session.pk])

    page = client.get(url).text
    assert 'id="withdraw"' not in page and withdraw not in page and 'id="instruction-kept"' in page
    refused = client.post(withdraw)
    assert refused.status_code == 403 and "it stays in the session" in refused.text
    with pytest.raises(WorkerBlockedError):
        turn_withdraw(session_id=session.pk, user=user)
    assert Turn.objects.get(pk=turn.pk).instruction == "Cite the 2019 survey."
    client.force_login(UserFactory(username="kiwi-reader", roles=[RESEARCHER]))
    read = client.get(reverse("revision:session-read", args=[session.pk])).text
    assert "Cite the 2019 survey." in read

    review.worker_unblock(annotator_id=annotator.pk, user=admin)
    client.force_login(user)
    assert 'id="withdraw"' in client.get(url).text
