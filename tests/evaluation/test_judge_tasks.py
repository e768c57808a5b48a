"""The judge's background entry points, now the engine's: safe to run twice."""

import os
import time

import pytest

from annotate.engine.models import EngineCall
from annotate.engine.tasks import engine_run_task
from annotate.models import Label
from config.celery import app as celery_app
from evaluation.judges.conversation import Answered
from evaluation.judges.protocol import JudgeRunProtocol
from evaluation.models import ConversationStatus, JudgeCall, RunStatus
from evaluation.services.judge_runs import judge_run_create, judge_run_start
from tests.config.test_celery_worker import worker  # noqa: F401 - the fixture
from tests.evaluation.judge_helpers import make_benchmark, make_judge
from tests.evaluation.openai_stub import StubOpenAI

pytestmark = pytest.mark.django_db


def test_the_run_task_is_safe_to_run_twice():
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(3, 2))
    with StubOpenAI() as stub:
        judge = make_judge(stub.base_url)
        run = judge_run_create(config=judge, benchmark=benchmark, systems=systems)
        engine_run_task(run.engine_run_id)
        engine_run_task(run.engine_run_id)  # a redelivered task: nothing left to ask
        assert len(stub.requests) == 5
    run.refresh_from_db()
    assert run.status == RunStatus.DONE and run.finished_at
    assert JudgeCall.objects.count() == Label.objects.filter(annotator=judge.annotator).count() == 5
    assert run.engine_run.calls == 5 and run.prompt_tokens == sum(
        u["prompt_tokens"] for u in stub.usages
    )


def test_a_duplicate_answer_is_kept_once_and_both_calls_are_accounted():
    """Two deliveries of one conversation racing: the second answer for a question is dropped."""
    benchmark, systems, (instruction,) = make_benchmark(questions_per_instruction=(1,))
    run = judge_run_create(config=make_judge(backend="fake"), benchmark=benchmark, systems=systems)
    conversation = run.conversations.get()
    question = instruction.questions.get()
    protocol = JudgeRunProtocol()
    stored = []
    for reply, value in (("YES", 1), ("NO", 0)):
        call = EngineCall.objects.create(
            run=run.engine_run, endpoint=run.config.endpoint, status="ok", request={},
            reply=reply, prompt_tokens=100, completion_tokens=1,
        )  # fmt: skip
        call.meta = Answered(
            conversation.pk, [question.pk], reply, [value], 100, 1, False, 5, 0, call
        )
        protocol.store_calls(run.engine_run, [call])
        stored.append(call)
    assert JudgeCall.objects.get().raw_reply == "YES"
    assert JudgeCall.objects.get().engine_call == stored[0]
    assert Label.objects.get().value == 1
    assert EngineCall.objects.filter(run=run.engine_run).count() == 2  # both were paid for


needs_services = pytest.mark.skipif(
    not os.environ.get("CELERY_BROKER_URL")
    or not os.environ.get("DATABASE_URL", "").startswith("postgres"),
    reason="needs CELERY_BROKER_URL (Redis) and DATABASE_URL (PostgreSQL), as .ci/run sets them",
)


@needs_services
def test_a_real_worker_runs_a_judge_run(worker, monkeypatch):  # noqa: F811
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
