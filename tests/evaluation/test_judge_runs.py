"""Judge runs against the stub OpenAI-compatible server, through the real openai client."""

import threading
from decimal import Decimal

import pytest

from annotate.engine.models import EngineRun
from annotate.models import AnnotatorKind, Label, LabelValue
from evaluation.errors import JudgeRunError
from evaluation.judges import prompting as p
from evaluation.models import ConversationStatus, JudgeCall, JudgeProtocol, JudgeRun, RunStatus
from evaluation.selectors.judge_runs import judge_run_progress
from evaluation.services.judge_configs import judge_config_create
from evaluation.services.judge_runs import judge_run_create, judge_run_execute
from tests.annotate.engine.conftest import dollar_a_thousand
from tests.evaluation.judge_helpers import make_benchmark, make_judge
from tests.evaluation.openai_stub import StubOpenAI

pytestmark = pytest.mark.django_db


@pytest.fixture
def stub():
    with StubOpenAI() as server:
        yield server


def _run(judge, benchmark, systems, **kwargs):
    return judge_run_create(config=judge, benchmark=benchmark, systems=systems, **kwargs)


def test_multi_turn_sends_the_official_message_sequence_with_history(stub):
    benchmark, systems, (first, second) = make_benchmark(
        questions_per_instruction=(3, 1), inputs=["The input.", ""]
    )
    stub.replies.extend(["YES", "no.", "Not sure", "NO"])
    judge = make_judge(stub.base_url, model="judge-model", max_tokens=7)
    run = _run(judge, benchmark, systems, instruction_ids=["task_1"])

    judge_run_execute(run_id=run.pk)

    prompt = p.load_prompt()
    opening = p.first_turn(
        prompt, input_text="The input.", response="sys-a answer 1", question="task_1 question 1?"
    )
    bodies = stub.requests
    assert [body["messages"] for body in bodies] == [
        [{"role": "user", "content": opening}],
        [
            {"role": "user", "content": opening},
            {"role": "assistant", "content": "YES"},
            {"role": "user", "content": "Question:\ntask_1 question 2?\n"},
        ],
        [
            {"role": "user", "content": opening},
            {"role": "assistant", "content": "YES"},
            {"role": "user", "content": "Question:\ntask_1 question 2?\n"},
            {"role": "assistant", "content": "no."},
            {"role": "user", "content": "Question:\ntask_1 question 3?\n"},
        ],
    ]
    assert all(body["model"] == "judge-model" and body["temperature"] == 0 for body in bodies)
    assert all(body["max_tokens"] == 7 for body in bodies)
    assert first.text not in opening  # the instruction itself is never sent
    assert not any(m["role"] == "system" for body in bodies for m in body["messages"])
    labels = Label.objects.filter(annotator=judge.annotator).order_by("question__position")
    assert [label.value for label in labels] == [LabelValue.YES, LabelValue.NO, LabelValue.UNKNOWN]
    assert judge.annotator.kind == AnnotatorKind.LLM and judge.annotator.name == judge.name
    calls = JudgeCall.objects.order_by("question__position")
    assert [c.raw_reply for c in calls] == ["YES", "no.", "Not sure"]
    assert {c.prompt_version for c in calls} == {"infobench_v1"}
    assert all(c.label.judge_calls.get() == c for c in calls)
    run.refresh_from_db()
    assert run.status == RunStatus.DONE and run.finished_at and run.prompt_version == "infobench_v1"


def test_unparseable_replies_become_unknown_and_the_rest_is_still_asked(stub):
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(3,))
    stub.replies.extend(["NOTHING to judge", "Not quite", "YES"])
    run = _run(make_judge(stub.base_url), benchmark, systems)

    judge_run_execute(run_id=run.pk)

    assert len(stub.requests) == 3
    assert stub.requests[2]["messages"][3] == {"role": "assistant", "content": "Not quite"}
    values = list(JudgeCall.objects.order_by("question__position").values_list("parsed", flat=True))
    assert values == [LabelValue.UNKNOWN, LabelValue.UNKNOWN, LabelValue.YES]
    conversation = run.conversations.get()
    assert conversation.status == ConversationStatus.DONE
    assert conversation.kept_going_after_unparseable is True


def test_an_empty_reply_is_a_failed_call_never_an_answer_and_a_rerun_asks_again(stub):
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(3,))
    stub.replies.extend(["YES", "", "NO", "YES"])
    run = _run(make_judge(stub.base_url), benchmark, systems)

    judge_run_execute(run_id=run.pk)
    conversation = run.conversations.get()
    assert conversation.status == ConversationStatus.FAILED and "empty reply" in conversation.error
    assert JudgeCall.objects.count() == 1  # only the real answer is stored
    assert run.engine_run.engine_calls.filter(status="error", reply="").count() == 1

    judge_run_execute(run_id=run.pk)
    conversation.refresh_from_db()
    assert conversation.status == ConversationStatus.DONE and len(stub.requests) == 4
    assert stub.requests[2] == stub.requests[1]  # the question is asked again with its history
    values = list(JudgeCall.objects.order_by("question__position").values_list("parsed", flat=True))
    assert values == [LabelValue.YES, LabelValue.NO, LabelValue.YES]


def test_clear_answers_do_not_set_kept_going(stub):
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(2,))
    run = _run(make_judge(stub.base_url), benchmark, systems)
    judge_run_execute(run_id=run.pk)
    assert run.conversations.get().kept_going_after_unparseable is False


def test_429_and_500_are_retried_honouring_retry_after(stub):
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(2,))
    stub.fail_next(429, retry_after="3")
    stub.fail_next(500, retry_after="1.5")
    stub.fail_next(503)
    run = _run(make_judge(stub.base_url, max_retries=3), benchmark, systems)
    sleeps = []

    judge_run_execute(run_id=run.pk, sleep=sleeps.append)

    assert len(stub.requests) == 5 and len(stub.answered) == 2
    assert sleeps[:2] == [3.0, 1.5]
    assert 2.0 <= sleeps[2] <= 4.0  # no Retry-After: 2 ** (3 - 1) seconds, jittered down to half
    assert stub.requests[0] == stub.requests[3]  # the same request sent again
    call = JudgeCall.objects.order_by("question__position").first()
    assert call.retries == 3
    assert run.conversations.get().status == ConversationStatus.DONE


def test_retries_are_bounded_then_the_conversation_fails_and_a_rerun_finishes_it(stub):
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(2,))
    stub.fail_next(500, times=3)
    run = _run(make_judge(stub.base_url, max_retries=2), benchmark, systems)

    judge_run_execute(run_id=run.pk, sleep=lambda s: None)

    conversation = run.conversations.get()
    assert len(stub.requests) == 3
    assert conversation.status == ConversationStatus.FAILED
    assert "gave up after 2 retries" in conversation.error and "500" in conversation.error
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED
    assert judge_run_progress(run=run).retries == 2  # the failed call's, though nothing answered

    judge_run_execute(run_id=run.pk, sleep=lambda s: None)
    conversation.refresh_from_db()
    assert conversation.status == ConversationStatus.DONE and conversation.error == ""
    run.refresh_from_db()
    assert run.status == RunStatus.DONE


def test_retries_count_the_calls_the_official_judge_sent_again_and_gave_up_on(stub):
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(1, 1))
    stub.fail_next(400, times=2)  # the first conversation's call and its one retry
    judge = make_judge(stub.base_url, protocol="official", max_retries=1, concurrency=1)
    run = _run(judge, benchmark, systems)

    judge_run_execute(run_id=run.pk, sleep=lambda s: None)

    progress = judge_run_progress(run=run)
    assert progress.conversations_failed == 1 and progress.conversations_done == 1
    assert "gave up after 1 retries" in progress.errors[0]["error"]
    assert progress.retries == 1


def test_400_fails_the_conversation_without_retrying(stub):
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(2, 2))
    stub.fail_next(400, message="context length exceeded")
    judge = make_judge(stub.base_url, concurrency=1)
    run = _run(judge, benchmark, systems)
    sleeps = []

    judge_run_execute(run_id=run.pk, sleep=sleeps.append)

    assert sleeps == [] and len(stub.requests) == 3  # 1 refused + 2 for the other conversation
    failed, done = run.conversations.order_by("response__instruction__position")
    assert failed.status == ConversationStatus.FAILED
    assert "HTTP 400" in failed.error and "context length exceeded" in failed.error
    assert done.status == ConversationStatus.DONE
    assert not JudgeCall.objects.filter(conversation=failed).exists()


def test_timeouts_are_retried(stub):
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(1,))
    stub.delay = 0.5
    calls = {"n": 0}

    def speed_up(count):
        calls["n"] = count
        if count >= 2:
            stub.delay = 0

    stub.on_request = speed_up
    run = _run(make_judge(stub.base_url, timeout_seconds=0.2), benchmark, systems)
    judge_run_execute(run_id=run.pk, sleep=lambda s: None)
    assert calls["n"] == 2
    assert JudgeCall.objects.get().retries == 1


def test_connection_refused_is_retried_then_fails(stub):
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(1,))
    stub.stop()
    run = _run(make_judge(stub.base_url, max_retries=1), benchmark, systems)
    sleeps = []
    judge_run_execute(run_id=run.pk, sleep=sleeps.append)
    conversation = run.conversations.get()
    assert len(sleeps) == 1
    assert conversation.status == ConversationStatus.FAILED
    assert "connection error" in conversation.error


def test_resume_after_a_stop_asks_only_what_is_missing(stub):
    benchmark, systems, instructions = make_benchmark(
        questions_per_instruction=(4, 3, 2), systems=("sys-a", "sys-b")
    )
    stop = threading.Event()
    stub.on_request = lambda count: stop.set() if count == 5 else None
    stub.responder = lambda messages: "YES" if len(messages) % 4 == 1 else "NO"
    judge = make_judge(stub.base_url, concurrency=2)
    run = _run(judge, benchmark, systems)
    total = 2 * (4 + 3 + 2)

    judge_run_execute(run_id=run.pk, stop=stop)

    first_pass = len(stub.answered)
    assert 5 <= first_pass < total  # the calls in flight finish; no new call starts
    assert JudgeCall.objects.count() == first_pass
    run.refresh_from_db()
    # Stopped, as its engine run is ("Stopped" on both pages); running it again resumes it.
    assert run.status == RunStatus.CANCELLED == run.engine_run.status
    assert run.get_status_display() == "Stopped"
    stub.on_request = None

    judge_run_execute(run_id=run.pk)

    assert len(stub.answered) == total
    assert JudgeCall.objects.count() == total
    assert Label.objects.filter(annotator=judge.annotator).count() == total
    # A resumed multi-turn conversation rebuilds its history from the stored replies.
    for body in stub.answered[first_pass:]:
        messages = body["messages"]
        replies = [m["content"] for m in messages if m["role"] == "assistant"]
        assert replies == ["YES" if i % 2 == 0 else "NO" for i in range(len(replies))]
    run.refresh_from_db()
    assert run.status == RunStatus.DONE

    judge_run_execute(run_id=run.pk)  # nothing missing: no call at all
    assert len(stub.requests) == total


def test_token_and_cost_sums(stub):
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(3, 2), systems=("a", "b"))
    judge = make_judge(
        stub.base_url,
        price_prompt_per_1k=Decimal("0.03"),
        price_completion_per_1k=Decimal("0.06"),
    )
    run = _run(judge, benchmark, systems)

    judge_run_execute(run_id=run.pk)

    prompt = sum(u["prompt_tokens"] for u in stub.usages)
    completion = sum(u["completion_tokens"] for u in stub.usages)
    run.refresh_from_db()
    assert len(stub.usages) == 10
    assert (run.prompt_tokens, run.completion_tokens) == (prompt, completion)
    expected = (Decimal(prompt) * Decimal("0.03") + Decimal(completion) * Decimal("0.06")) / 1000
    assert run.cost_usd == expected.quantize(Decimal("0.000001"))
    assert not JudgeCall.objects.filter(usage_estimated=True).exists()


def test_the_spending_cap_is_the_engine_runs_and_stops_the_judge_before_passing_it(stub):
    # The spending-cap tests' endpoint ($1 per 1k tokens, max_tokens 100). Each judge call
    # reserves about $0.40 before it is sent (a prompt estimated at ~300 tokens + 100) and
    # costs about $0.25 (~245 prompt tokens, 1 completion): under a $0.70 cap the second call
    # fits ($0.25 spent + $0.40) and the third would not ($0.50 + $0.40). Uncapped: 4 calls.
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(2, 2))
    judge = judge_config_create(name="capped", endpoint=dollar_a_thousand(stub, concurrency=1))
    run = _run(judge, benchmark, systems, spending_cap_usd=Decimal("0.70"))
    assert run.engine_run.spending_cap_usd == Decimal("0.70")

    run = judge_run_execute(run_id=run.pk)

    assert len(stub.requests) == 2 and JudgeCall.objects.count() == 2
    engine_run = run.engine_run
    assert engine_run.status == "cancelled" and "spending cap" in engine_run.error
    assert Decimal("0.45") < engine_run.cost_usd <= Decimal("0.70")
    assert run.status == RunStatus.CANCELLED  # "Stopped": running it again does the rest


def test_a_negative_cap_is_refused_naming_the_field_and_nothing_is_kept(stub):
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(1,))
    with pytest.raises(JudgeRunError, match="spending_cap_usd.*cannot be negative"):
        _run(make_judge(stub.base_url), benchmark, systems, spending_cap_usd=Decimal("-1"))
    assert not JudgeRun.objects.exists() and not EngineRun.objects.exists()


def test_usage_is_estimated_when_the_server_leaves_it_out(stub):
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(2,))
    stub.usage = False
    run = _run(make_judge(stub.base_url), benchmark, systems)
    judge_run_execute(run_id=run.pk)
    calls = JudgeCall.objects.all()
    assert all(c.usage_estimated and c.prompt_tokens > 100 for c in calls)
    run.refresh_from_db()
    assert run.prompt_tokens == sum(c.prompt_tokens for c in calls) and run.cost_usd > 0


def test_all_in_one_protocol_asks_once_per_conversation(stub):
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(3,), inputs=["In."])
    stub.replies.append("1. YES\n2. NO\n3. unsure")
    run = _run(make_judge(stub.base_url, protocol=JudgeProtocol.ALL_IN_ONE), benchmark, systems)
    judge_run_execute(run_id=run.pk)
    (body,) = stub.requests
    (message,) = body["messages"]
    assert (
        "Questions:\n1. task_1 question 1?\n2. task_1 question 2?\n3. task_1 question 3?\n"
        in (message["content"])
    )
    calls = JudgeCall.objects.order_by("question__position")
    assert [c.parsed for c in calls] == [LabelValue.YES, LabelValue.NO, LabelValue.UNKNOWN]
    run.refresh_from_db()
    assert run.prompt_tokens == stub.usages[0]["prompt_tokens"]  # counted once, not per question


def test_independent_protocol_sends_each_question_alone(stub):
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(2,))
    run = _run(make_judge(stub.base_url, protocol=JudgeProtocol.INDEPENDENT), benchmark, systems)
    judge_run_execute(run_id=run.pk)
    assert [len(body["messages"]) for body in stub.requests] == [1, 1]
    assert stub.requests[1]["messages"][0]["content"].endswith("Question:\ntask_1 question 2?\n")


def test_a_second_run_of_the_same_judge_overwrites_its_labels_and_keeps_both_calls(stub):
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(2,))
    judge = make_judge(stub.base_url)
    stub.replies.extend(["YES", "YES", "NO", "YES"])
    first = _run(judge, benchmark, systems)
    judge_run_execute(run_id=first.pk)
    created = dict(Label.objects.values_list("question__position", "created_at"))

    second = _run(judge, benchmark, systems)
    judge_run_execute(run_id=second.pk)

    labels = Label.objects.filter(annotator=judge.annotator).order_by("question__position")
    assert [label.value for label in labels] == [LabelValue.NO, LabelValue.YES]
    assert {label.question.position: label.created_at for label in labels} == created
    calls = JudgeCall.objects.order_by("conversation__run_id", "question__position")
    assert [(c.conversation.run_id, c.raw_reply) for c in calls] == [
        (first.pk, "YES"),
        (first.pk, "YES"),
        (second.pk, "NO"),
        (second.pk, "YES"),
    ]
    assert [c.label_id for c in calls[:2]] == [c.label_id for c in calls[2:]]
    assert all(c.created_at is not None and c.latency_ms >= 0 for c in calls)


def test_a_protocol_can_override_the_request_body(stub, monkeypatch):
    from evaluation.judges import request_params

    monkeypatch.setitem(request_params.REQUEST_PARAMS, "multi_turn", {"max_tokens": None})
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(1,))
    run = _run(make_judge(stub.base_url), benchmark, systems)
    judge_run_execute(run_id=run.pk)
    assert set(stub.requests[0]) == {"model", "messages", "temperature"}


def _benchmark_where_alpha_answers_elsewhere():
    """Small IFB, answered by beta-7b; alpha-7b answers only in another benchmark."""
    benchmark, (beta,), _ = make_benchmark(questions_per_instruction=(1, 1), systems=("beta-7b",))
    benchmark.name = "Small IFB"
    benchmark.save()
    _, (alpha,), _ = make_benchmark(questions_per_instruction=(1,), systems=("alpha-7b",))
    return benchmark, alpha, beta


def test_a_system_with_no_response_in_the_benchmark_is_refused_by_name_and_nothing_is_kept():
    benchmark, alpha, beta = _benchmark_where_alpha_answers_elsewhere()

    with pytest.raises(JudgeRunError) as refused:
        _run(make_judge(backend="fake"), benchmark, [alpha, beta])

    assert str(refused.value) == (
        "Every chosen system needs a response to every selected instruction: alpha-7b has no "
        "response to task_1, task_2. Leave those systems or instructions out, or import the "
        "responses first."
    )
    assert refused.value.field == "systems"
    assert not JudgeRun.objects.exists() and not EngineRun.objects.exists()


def test_a_system_lacking_some_chosen_instructions_is_refused_naming_them_only():
    benchmark, (full, partial), (first, second) = make_benchmark(
        questions_per_instruction=(1, 1), systems=("full", "partial")
    )
    partial.responses.filter(instruction=second).delete()
    judge = make_judge(backend="fake")

    with pytest.raises(JudgeRunError, match=r"partial has no response to task_2\. ") as refused:
        _run(judge, benchmark, [full, partial])
    assert "full has" not in str(refused.value)
    assert not JudgeRun.objects.exists()
    # Left out of the selection, the instruction it lacks asks nothing of it.
    run = _run(judge, benchmark, [full, partial], instruction_ids=["task_1"])
    assert set(run.systems.all()) == {full, partial}
    assert run.conversations.count() == 2
