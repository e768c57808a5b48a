"""A revision call's task delivered again (Redis hands a task still running after the visibility
timeout to a second worker; a killed worker's task comes back after it too): the delivery finds
the call pending for longer than the page allows, fails it (the annotator's retry is offered)
and calls nothing, so no answer is paid for twice."""

import threading
from datetime import timedelta

import pytest
from django.utils import timezone

from annotate.revision import llm
from annotate.revision.models import CallStatus, RevisionSession
from annotate.revision.services import sessions
from annotate.revision.services.generation import session_generate_initial, turn_generate
from annotate.revision.services.sessions import call_retry, session_assign, turn_start
from tests.annotate.revision.conftest import make_live_study
from tests.factories import UserFactory
from tests.threads import in_thread

REDELIVERED = timedelta(seconds=900)  # CELERY_VISIBILITY_TIMEOUT


def calls_counted(monkeypatch, hold_first=None):
    real, calls = llm.chat, []

    def chat(**arguments):
        calls.append(arguments["purpose"])
        if hold_first is not None and len(calls) == 1:
            hold_first[0].set()
            hold_first[1].wait(30)
        return real(**arguments)

    monkeypatch.setattr(llm, "chat", chat)
    return calls


@pytest.mark.django_db(transaction=True)
def test_two_deliveries_of_one_initial_answer_at_once_pay_for_one_call(
    tmp_path, settings, monkeypatch
):
    study = make_live_study(tmp_path, settings)
    annotator = UserFactory(username="ann-r")
    monkeypatch.setattr(sessions, "generation_enqueue", lambda **job: None)  # the deliveries below
    session = session_assign(study=study, user=annotator, now=timezone.now())
    calling, finish = threading.Event(), threading.Event()
    calls = calls_counted(monkeypatch, hold_first=(calling, finish))

    thread = in_thread(lambda: session_generate_initial(session_id=session.pk), [])
    assert calling.wait(30)  # the first delivery waits for the model...
    later = timezone.now() + REDELIVERED  # ...when Redis hands the task to a second worker
    session_generate_initial(session_id=session.pk, now=later)
    finish.set()
    thread.join(30)

    assert calls == ["revision-initial"]
    session.refresh_from_db()
    assert session.initial_status == CallStatus.FAILED  # as the page showed it from 300 s on
    assert "retry" in session.initial_error and session.initial_answer == ""


@pytest.mark.django_db
def test_a_killed_workers_turn_is_failed_by_its_redelivery_and_generated_on_retry(
    study, django_capture_on_commit_callbacks, monkeypatch
):
    annotator = UserFactory(username="ann-k")
    with django_capture_on_commit_callbacks(execute=True):
        session = session_assign(study=study, user=annotator, now=timezone.now())
    # Its task never runs here (no commit): the worker was killed before it called.
    turn = turn_start(
        session_id=session.pk, user=annotator, instruction="Shorter.",
        instruction_type="stylistic", now=timezone.now(),
    )  # fmt: skip
    calls = calls_counted(monkeypatch)
    turn_generate(turn_id=turn.pk, now=turn.call_started_at + REDELIVERED)
    turn.refresh_from_db()
    assert calls == [] and turn.call_status == CallStatus.FAILED  # never left pending

    with django_capture_on_commit_callbacks(execute=True):
        call_retry(session_id=session.pk, user=annotator, now=timezone.now())
    turn.refresh_from_db()
    assert calls == ["revision-answer"] and turn.call_status == CallStatus.DONE
    assert RevisionSession.objects.get(pk=session.pk).initial_status == CallStatus.DONE
