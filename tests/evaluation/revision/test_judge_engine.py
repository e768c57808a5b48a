"""The KIWI judge and the session's model calls through the engine, against the stub over HTTP."""

from decimal import Decimal
from types import SimpleNamespace

import pytest
from django.utils import timezone

from annotate.engine.models import EngineCall
from annotate.revision.models import CallStatus
from annotate.revision.services.sessions import session_assign, turn_start
from evaluation.revision.judges import judge_run_create, judge_run_execute
from tests.annotate.engine.conftest import dollar_a_thousand, make_endpoint
from tests.annotate.revision.conftest import make_live_study
from tests.evaluation.openai_stub import StubOpenAI
from tests.evaluation.revision.sample import sample_study
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def study(db, tmp_path, settings):
    return make_live_study(tmp_path, settings)


def judge_reply(messages):
    target = messages[-1]["content"].rsplit("# Instruction:", 1)[1]
    return "Good" if "Tell me more" in target or "Add an example" in target else "bad."


def test_k_shot_judge_runs_through_the_engine_with_bm25_examples(tmp_path):
    study = sample_study(tmp_path)
    with StubOpenAI(responder=judge_reply) as stub:
        make_endpoint(stub.base_url, name="judge-stub", concurrency=4)
        run = judge_run_create(
            study=study,
            task="rating-judge",
            mode="k-shot",
            shots=2,
            endpoint_name="judge-stub",
            seed=2,
            now=timezone.now(),
        )
        run = judge_run_execute(run_id=run.pk)
    assert run.status == "done" and run.engine_run.status == "done"
    test_turns = run.split["test"]
    assert len(stub.requests) == len(test_turns) == 1
    labels = dict(run.predictions.values_list("turn__instruction", "label"))
    assert all(label in ("good", "bad") for label in labels.values())
    for instruction, label in labels.items():
        expected = (
            "good" if instruction in ("Tell me more.", "Add an example of results.") else "bad"
        )
        assert label == expected
    prompt = stub.requests[0]["messages"][-1]["content"]
    # Two training examples, each ending with its human rating collapsed to good/bad.
    assert prompt.count("# Rating of the Updated answer:") == 3
    assert prompt.count("\n# good\n") + prompt.count("\n# bad\n") == 2
    assert EngineCall.objects.filter(purpose="rating-judge", status="ok").count() == 1


def test_storing_a_turn_again_replaces_its_unread_prediction(tmp_path):
    from annotate.engine.protocols import UnitResult
    from evaluation.revision.models import RevisionPrediction
    from evaluation.revision.protocol import RevisionJudgeProtocol

    study = sample_study(tmp_path)
    run = judge_run_create(
        study=study, task="rating-judge", mode="zero-shot", seed=2, now=timezone.now()
    )
    (turn,) = run.split["test"]
    RevisionPrediction.objects.create(run=run, turn_id=turn, label="", error="timed out")
    protocol, handle = RevisionJudgeProtocol(), SimpleNamespace(params={"judge_run": run.pk})
    (key,) = protocol.units(handle)
    protocol.store(
        handle, [UnitResult(key=key, value="Good"), UnitResult(key=key + "0", error="x")]
    )
    assert list(run.predictions.values_list("turn_id", "label", "reply", "error")) == [
        (turn, "good", "Good", "")
    ]


def test_a_session_turn_calls_the_systems_endpoint_with_the_a1_prompts(
    study,
    django_capture_on_commit_callbacks,
):
    replies = ["The initial answer [0].", "Summary of passages [1].", "Revised answer [0][1]."]
    with StubOpenAI(replies=replies) as stub:
        make_endpoint(stub.base_url, name="alpha-endpoint")
        study.systems.filter(name="alpha").update(endpoint_name="alpha-endpoint")
        user = UserFactory(username="engine-annotator")
        with django_capture_on_commit_callbacks(execute=True):
            session = session_assign(study=study, user=user, now=timezone.now())
        with django_capture_on_commit_callbacks(execute=True):
            turn = turn_start(
                session_id=session.pk,
                user=user,
                instruction="Add citations.",
                instruction_type="information-seeking",
                now=timezone.now(),
            )
    session.refresh_from_db()
    turn.refresh_from_db()
    assert session.initial_answer == "The initial answer [0]."
    assert (turn.call_status, turn.summary, turn.answer) == (
        CallStatus.DONE,
        "Summary of passages [1].",
        "Revised answer [0][1].",
    )
    initial, summary, answer = (body["messages"] for body in stub.requests)
    assert initial[0]["content"].startswith("You are a helpful assistant which answers a question")
    assert "Paper title: Paper Zero\nPassage:" in initial[1]["content"]
    assert initial[1]["content"].endswith(
        "Question: How do retrieval-augmented models cite sources?\nAnswer:"
    )
    assert summary[1]["content"].endswith(
        "Previous answer:The initial answer [0].\nFeedback:Add citations.\n"
        "Generate an answer to the feedback."
    )
    assert (
        "Extra information related to the feedback: Summary of passages [1]."
        in answer[1]["content"]
    )
    assert list(EngineCall.objects.order_by("id").values_list("purpose", flat=True)) == [
        "revision-initial",
        "revision-summary",
        "revision-answer",
    ]


def test_a_failing_endpoint_leaves_the_turn_failed_not_answered(
    study,
    django_capture_on_commit_callbacks,
):
    with StubOpenAI() as stub:
        make_endpoint(stub.base_url, name="alpha-endpoint", max_retries=0)
        study.systems.filter(name="alpha").update(endpoint_name="alpha-endpoint")
        stub.fail_next(400, message="bad request from stub")
        user = UserFactory(username="engine-annotator")
        with django_capture_on_commit_callbacks(execute=True):
            session = session_assign(study=study, user=user, now=timezone.now())
    session.refresh_from_db()
    assert session.initial_status == CallStatus.FAILED and session.initial_answer == ""
    assert "bad request from stub" in session.initial_error


def test_dense_retrieval_asks_the_embeddings_endpoint():
    from annotate.revision.retrieval import DenseRetriever

    passages = [(1, "b b c"), (2, "a a a b"), (3, "c")]
    with StubOpenAI() as stub:
        make_endpoint(stub.base_url, name="embedder")
        ranked = DenseRetriever("embedder").retrieve("a a", passages, 2)
    # cosine with (2, 0, 0): passage 2 (3,1,0) first, then passage 1 (0,2,1) and 3 (0,0,1) tie at 0
    assert ranked == [2, 1]
    assert stub.requests[-1]["input"] == ["a a", "b b c", "a a a b", "c"]


@pytest.mark.parametrize(
    ("task", "mode", "labels"),
    [
        ("rating-judge", "zero-shot", {"good", "bad"}),
        ("rating-judge", "k-shot", {"good", "bad"}),
        ("instruction-category", "zero-shot", None),
        ("error-category", "zero-shot", None),
    ],
)
def test_the_offline_fake_endpoint_answers_every_task_in_words_the_report_reads(
    tmp_path, task, mode, labels
):
    """A run on the demo's free endpoint (no base URL) gives predictions, not unparsed replies."""
    from evaluation.revision.judges import CATEGORIES

    study = sample_study(tmp_path)
    make_endpoint("", name="offline-fake")
    run = judge_run_create(
        study=study,
        task=task,
        mode=mode,
        shots=2,
        endpoint_name="offline-fake",
        seed=2,
        now=timezone.now(),
    )
    run = judge_run_execute(run_id=run.pk)
    assert run.status == "done"
    predicted = list(run.predictions.values_list("label", flat=True))
    assert predicted and "" not in predicted
    assert set(predicted) <= (labels or set(CATEGORIES[task]))


def test_a_revision_judge_run_whose_worker_died_fails_with_its_engine_run(tmp_path, admin_user):
    from datetime import timedelta

    from django.conf import settings

    from annotate.engine.models import EngineRun
    from annotate.engine.services import engine_runs_reap
    from evaluation.revision.judges import judge_run_launch
    from evaluation.revision.models import RevisionJudgeRun

    study = sample_study(tmp_path)
    now = timezone.now()
    run = judge_run_launch(
        study=study,
        task="rating-judge",
        mode="zero-shot",
        endpoint=make_endpoint("", name="fake"),
        user=admin_user,
        now=now,
    )  # never starts: the test's transaction does not commit
    stale = now - timedelta(seconds=settings.ENGINE_HEARTBEAT_TIMEOUT_SECONDS + 60)
    RevisionJudgeRun.objects.filter(pk=run.pk).update(status="running")
    EngineRun.objects.filter(pk=run.engine_run_id).update(status="running", heartbeat=stale)

    assert engine_runs_reap(now=now) == 1

    run.refresh_from_db()
    assert run.status == "failed" and "stopped answering" in run.error


def _stuck_run(study, admin_user, *, engine_status="running", beat_age=None, status="running"):
    """A judge run of `study` marked `status` whose engine run is `engine_status`, its
    heartbeat `beat_age` seconds old (default: past the timeout)."""
    from datetime import timedelta

    from django.conf import settings

    from annotate.engine.models import Endpoint, EngineRun
    from evaluation.revision.judges import judge_run_launch
    from evaluation.revision.models import RevisionJudgeRun

    now = timezone.now()
    endpoint = Endpoint.objects.filter(name="fake").first() or make_endpoint("", name="fake")
    run = judge_run_launch(
        study=study,
        task="rating-judge",
        mode="zero-shot",
        endpoint=endpoint,
        user=admin_user,
        now=now,
    )  # fmt: skip  (never starts: the test's transaction does not commit)
    age = settings.ENGINE_HEARTBEAT_TIMEOUT_SECONDS + 60 if beat_age is None else beat_age
    RevisionJudgeRun.objects.filter(pk=run.pk).update(status=status)
    EngineRun.objects.filter(pk=run.engine_run_id).update(
        status=engine_status, heartbeat=now - timedelta(seconds=age), error="worker gone"
    )
    return run


def test_the_study_pages_fail_a_run_whose_worker_died_without_a_periodic_reaper(
    client, tmp_path, admin_user
):
    from django.urls import reverse

    study = sample_study(tmp_path)
    run, alive = _stuck_run(study, admin_user), _stuck_run(study, admin_user, beat_age=1)
    client.force_login(admin_user)

    page = client.get(reverse("revision-reports:report", args=[study.pk]))

    run.refresh_from_db()
    assert run.status == "failed" and "stopped answering" in run.error
    assert 'Failed<br><span class="run-message">The worker running this run stopped answering' in (
        page.text
    )
    alive.refresh_from_db()
    assert alive.status == "running"  # beating: left alone


@pytest.mark.parametrize("page", ["report", "judge-new"])
def test_the_study_pages_queries_do_not_grow_with_the_runs_that_are_beating(
    client, tmp_path, admin_user, page, django_assert_num_queries
):
    """Only a run past the heartbeat timeout goes to the reaper: one beating run or six, the
    page costs the same queries (each went to the reaper, one query apiece, before)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.urls import reverse

    study = sample_study(tmp_path)
    args = [study.pk] if page == "report" else [study.pk, "rating-judge"]
    url = reverse(f"revision-reports:{page}", args=args)
    client.force_login(admin_user)
    _stuck_run(study, admin_user, beat_age=1)
    client.get(url)  # the report's cache, filled once
    with CaptureQueriesContext(connection) as one_run:
        client.get(url)
    queries = len(one_run)  # now: the next request clears the connection's query log
    for _ in range(5):
        _stuck_run(study, admin_user, beat_age=1)
    client.get(url)

    with django_assert_num_queries(queries):
        answer = client.get(url)

    assert answer.status_code == 200
    assert answer.text.count(">Running<") == 6


def test_the_migration_repairs_runs_left_running_after_their_engine_run_ended(tmp_path, admin_user):
    import importlib
    from datetime import timedelta

    from django.apps import apps

    from annotate.engine.models import EngineRun
    from evaluation.revision.models import RevisionJudgeRun

    repair = importlib.import_module(
        "evaluation.revision.migrations.0003_repair_runs_left_running"
    ).repair
    study = sample_study(tmp_path)
    failed = _stuck_run(study, admin_user, engine_status="failed")
    done = _stuck_run(study, admin_user, engine_status="done")
    running = _stuck_run(study, admin_user, beat_age=1)
    cancelled = _stuck_run(study, admin_user, engine_status="cancelled", status="pending")
    EngineRun.objects.filter(pk=cancelled.engine_run_id).update(error="Stopped on request.")
    # Ended already: left as it is, whatever its engine run says since.
    finished = _stuck_run(study, admin_user, engine_status="failed", status="done")
    ended_at = timezone.now() - timedelta(days=1)
    RevisionJudgeRun.objects.filter(pk=finished.pk).update(finished_at=ended_at)

    repair(apps, None)

    states = dict(RevisionJudgeRun.objects.values_list("pk", "status"))
    assert states == {
        failed.pk: "failed",
        done.pk: "done",
        running.pk: "running",
        cancelled.pk: "failed",
        finished.pk: "done",
    }
    assert RevisionJudgeRun.objects.get(pk=failed.pk).error == "worker gone"
    assert RevisionJudgeRun.objects.get(pk=done.pk).finished_at is not None
    assert RevisionJudgeRun.objects.get(pk=cancelled.pk).error == "Stopped on request."
    finished.refresh_from_db()
    assert (finished.error, finished.finished_at) == ("", ended_at)


@pytest.mark.parametrize(
    ("task", "mode"),
    [("instruction-category", ""), ("error-category", ""), ("rating-judge", "k-shot")],
)
def test_the_estimate_counts_the_prompts_the_run_then_sends(tmp_path, task, mode):
    """Every unit one call, its prompt (the k-shot judge's BM25 examples included) counted as
    the engine counts a sent one; before the protocol had `estimate`, every prompt was 0."""
    from annotate.engine.client import estimate_prompt_tokens
    from annotate.engine.services import engine_run_estimate
    from evaluation.revision.judges import judge_run_prepare

    study = sample_study(tmp_path)
    with StubOpenAI(responder=judge_reply) as stub:
        endpoint = dollar_a_thousand(stub, concurrency=2)
        run = judge_run_prepare(
            study=study, task=task, endpoint=endpoint, user=None, mode=mode, shots=2, seed=2,
            now=timezone.now(),
        )  # fmt: skip
        estimate = engine_run_estimate(run=run.engine_run)
        judge_run_execute(run_id=run.pk)
    sent = [body["messages"] for body in stub.requests]
    assert estimate.units == estimate.calls == len(sent) > 0
    assert estimate.prompt_tokens == sum(estimate_prompt_tokens(m) for m in sent)
    assert estimate.completion_tokens == 100 * len(sent)  # the endpoint's max_tokens each


def test_the_spending_cap_stops_a_classifier_run_before_passing_it(tmp_path):
    # Each Table 10 call reserves about $1.30 (a prompt estimated at ~1,200 tokens + 100) and
    # costs about $0.97 (~965 prompt tokens): under $2.50 the second call fits ($0.97 + $1.30)
    # and the third would not ($1.93 + $1.30). Uncapped, all 6 rated turns are classified.
    from evaluation.revision.judges import judge_run_prepare

    study = sample_study(tmp_path)
    with StubOpenAI() as stub:
        endpoint = dollar_a_thousand(stub, concurrency=1)
        run = judge_run_prepare(
            study=study, task="instruction-category", endpoint=endpoint, user=None,
            spending_cap_usd=Decimal("2.50"), now=timezone.now(),
        )  # fmt: skip
        assert run.engine_run.spending_cap_usd == Decimal("2.50")
        run = judge_run_execute(run_id=run.pk)
    assert len(stub.requests) == 2 and run.predictions.count() == 2
    assert run.engine_run.status == "cancelled" and run.engine_run.cost_usd <= Decimal("2.50")
    assert run.status == "failed" and "spending cap" in run.error
