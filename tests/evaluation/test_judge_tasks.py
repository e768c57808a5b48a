"""Celery entry points of the judge: per-conversation tasks, safe to run twice."""

import os
import time

import pytest

from annotate.models import Label
from config.celery import app as celery_app
from evaluation.models import ConversationStatus, JudgeCall, RunStatus
from evaluation.services.judge_runs import judge_run_create, judge_run_start
from evaluation.tasks import judge_conversation_task
from tests.config.test_celery_worker import worker  # noqa: F401 - the fixture
from tests.evaluation.judge_helpers import make_benchmark, make_judge
from tests.evaluation.openai_stub import StubOpenAI

pytestmark = pytest.mark.django_db


def test_conversation_task_is_safe_to_run_twice():
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(3, 2))
    with StubOpenAI() as stub:
        judge = make_judge(stub.base_url)
        run = judge_run_create(config=judge, benchmark=benchmark, systems=systems)
        first, second = run.conversations.order_by("pk")
        judge_conversation_task(first.pk)
        judge_conversation_task(first.pk)
        assert len(stub.requests) == 3
        run.refresh_from_db()
        assert run.status == RunStatus.PENDING  # the other conversation is still to do
        judge_conversation_task(second.pk)
    run.refresh_from_db()
    assert run.status == RunStatus.DONE and run.finished_at
    assert JudgeCall.objects.count() == Label.objects.filter(annotator=judge.annotator).count() == 5


def test_a_duplicate_answer_is_kept_once_and_counted_once():
    """Two deliveries of one task racing: the second answer for a question is dropped."""
    from evaluation.judges.conversation import Answered
    from evaluation.services.judge_runs import judge_events_store

    benchmark, systems, (instruction,) = make_benchmark(questions_per_instruction=(1,))
    run = judge_run_create(config=make_judge(backend="fake"), benchmark=benchmark, systems=systems)
    conversation = run.conversations.get()
    question = instruction.questions.get()
    answer = Answered(conversation.pk, [question.pk], "YES", [1], 100, 1, False, 5, 0)
    judge_events_store(run=run, events=[answer])
    judge_events_store(
        run=run, events=[answer.__class__(**{**answer.__dict__, "raw_reply": "NO", "parsed": [0]})]
    )
    run.refresh_from_db()
    assert run.prompt_tokens == 200 and run.completion_tokens == 2  # both calls were paid for
    assert JudgeCall.objects.get().raw_reply == "YES"
    assert Label.objects.get().value == 1


needs_services = pytest.mark.skipif(
    not os.environ.get("CELERY_BROKER_URL")
    or not os.environ.get("DATABASE_URL", "").startswith("postgres"),
    reason="needs CELERY_BROKER_URL (Redis) and DATABASE_URL (PostgreSQL), as .ci/run sets them",
)


@needs_services
def test_a_real_worker_takes_one_task_per_conversation(worker, monkeypatch):  # noqa: F811
    queue, _ = worker
    monkeypatch.setitem(celery_app.conf, "task_always_eager", False)
    monkeypatch.setitem(celery_app.conf, "task_default_queue", queue)
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(2, 3, 1))
    with StubOpenAI() as stub:
        judge = make_judge(stub.base_url)
        run = judge_run_create(config=judge, benchmark=benchmark, systems=systems)
        judge_run_start(run=run)  # no surrounding transaction: on_commit sends at once
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            run.refresh_from_db()
            if run.status in (RunStatus.DONE, RunStatus.FAILED):
                break
            time.sleep(0.2)
    assert run.status == RunStatus.DONE
    assert set(run.conversations.values_list("status", flat=True)) == {ConversationStatus.DONE}
    assert len(stub.answered) == 6 == Label.objects.filter(annotator=judge.annotator).count()
