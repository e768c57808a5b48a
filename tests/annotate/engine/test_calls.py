"""One stored call through the real openai client to the stub over HTTP: bodies, statuses,
retries, usage, cost."""

from decimal import Decimal

import pytest

from annotate.engine.errors import EndpointError
from annotate.engine.models import CallStatus, EngineCall
from annotate.engine.services import endpoint_create, endpoint_test, engine_call
from tests.annotate.engine.conftest import make_endpoint

pytestmark = pytest.mark.django_db

HELLO = [{"role": "user", "content": "Hello there"}]


def test_the_request_body_is_exactly_the_endpoints_settings(stub):
    endpoint = make_endpoint(
        stub.base_url, temperature=0.5, max_tokens=40, top_p=0.9, seed=7, stop=["END"]
    )
    call = engine_call(endpoint=endpoint, messages=HELLO)
    expected = {
        "model": "stub-model",
        "messages": [{"role": "user", "content": "Hello there"}],
        "temperature": 0.5,
        "max_tokens": 40,
        "top_p": 0.9,
        "seed": 7,
        "stop": ["END"],
    }
    assert stub.requests == [expected]
    assert call.request == expected and call.status == CallStatus.OK and call.reply == "YES"


def test_unset_options_are_not_sent_and_a_protocol_can_remove_or_override_any(stub):
    endpoint = make_endpoint(stub.base_url, max_tokens=16)
    engine_call(endpoint=endpoint, messages=HELLO)
    engine_call(endpoint=endpoint, messages=HELLO, params={"max_tokens": None, "n": 1})
    assert stub.requests[0] == {
        "model": "stub-model",
        "messages": HELLO,
        "temperature": 0.0,
        "max_tokens": 16,
    }
    assert stub.requests[1] == {
        "model": "stub-model",
        "messages": HELLO,
        "temperature": 0.0,
        "n": 1,
    }


def test_usage_latency_fingerprint_and_cost_are_stored(stub):
    stub.replies.append({"content": "Hi!", "system_fingerprint": "fp_123"})
    endpoint = make_endpoint(
        stub.base_url, price_prompt_per_1k=Decimal("0.03"), price_completion_per_1k=Decimal("0.06")
    )
    call = EngineCall.objects.get(pk=engine_call(endpoint=endpoint, messages=HELLO).pk)
    # The stub's usage: 10 + 11 chars // 5 = 12 prompt tokens, 1 + 3 // 5 = 1 completion token.
    assert (call.prompt_tokens, call.completion_tokens, call.usage_estimated) == (12, 1, False)
    assert call.cost_usd == Decimal("0.000420")  # (12 * 0.03 + 1 * 0.06) / 1000
    assert call.system_fingerprint == "fp_123" and call.finish_reason == "stop"
    assert call.latency_ms >= 0 and call.retries == 0


def test_usage_is_estimated_and_marked_when_the_server_leaves_it_out(stub):
    stub.usage = False
    stub.replies.append("Twelve chars")
    call = engine_call(endpoint=make_endpoint(stub.base_url), messages=HELLO)
    # 11 characters -> 3 tokens + 4 per message + 3; reply 12 characters -> 3 tokens.
    assert (call.prompt_tokens, call.completion_tokens, call.usage_estimated) == (10, 3, True)


def test_429_and_500_are_retried_honouring_retry_after_and_backoff_is_bounded(stub):
    stub.fail_next(429, retry_after="3")
    stub.fail_next(500, retry_after="1.5")
    stub.fail_next(503)
    sleeps = []
    call = engine_call(endpoint=make_endpoint(stub.base_url), messages=HELLO, sleep=sleeps.append)
    assert len(stub.requests) == 4 and stub.requests[0] == stub.requests[3]
    assert sleeps[:2] == [3.0, 1.5]
    assert 2.0 <= sleeps[2] <= 4.0  # no Retry-After: 2 ** (3 - 1) s with jitter down to half
    assert call.status == CallStatus.OK and call.retries == 3


def test_retries_are_bounded_and_the_failure_is_stored_with_no_reply(stub):
    stub.fail_next(500, times=4, message="overloaded")
    call = engine_call(
        endpoint=make_endpoint(stub.base_url, max_retries=2), messages=HELLO, sleep=lambda s: 0
    )
    assert len(stub.requests) == 3
    assert call.status == CallStatus.ERROR and call.reply == ""
    assert "gave up after 2 retries" in call.error and "overloaded" in call.error


def test_400_is_not_retried_and_the_servers_message_is_kept(stub):
    stub.fail_next(400, message="context length exceeded")
    sleeps = []
    call = engine_call(endpoint=make_endpoint(stub.base_url), messages=HELLO, sleep=sleeps.append)
    assert sleeps == [] and len(stub.requests) == 1
    assert call.status == CallStatus.ERROR and call.reply == ""
    assert "HTTP 400" in call.error and "context length exceeded" in call.error


def test_a_timeout_is_retried(stub):
    stub.delay = 0.5

    def speed_up(count):
        if count >= 2:
            stub.delay = 0

    stub.on_request = speed_up
    call = engine_call(
        endpoint=make_endpoint(stub.base_url, timeout_seconds=0.2),
        messages=HELLO,
        sleep=lambda s: None,
    )
    assert call.status == CallStatus.OK and call.retries == 1


def test_truncated_and_content_filtered_replies_keep_their_status(stub):
    stub.replies.extend(
        [
            {"content": "A reply cut sh", "finish_reason": "length"},
            {"content": "", "finish_reason": "content_filter"},
            {"content": "", "finish_reason": "stop"},
            {"content": None, "finish_reason": "stop"},
        ]
    )
    endpoint = make_endpoint(stub.base_url)
    truncated, refused, empty, null = (
        engine_call(endpoint=endpoint, messages=HELLO) for _ in range(4)
    )
    assert (truncated.status, truncated.reply) == (CallStatus.TRUNCATED, "A reply cut sh")
    assert refused.status == CallStatus.REFUSED and refused.reply == ""
    assert "content filter" in refused.error
    # An empty answer is a failure, never an answer.
    assert empty.status == CallStatus.ERROR and empty.reply == "" and "empty reply" in empty.error
    # An empty string and a null content are told apart (the official InFoBench protocol reads
    # the first as an unparseable answer and retries the second).
    assert null.status == CallStatus.ERROR and null.reply == "" and "null content" in null.error
    assert (empty.empty_reply, empty.content_null) == (True, False)
    assert (null.empty_reply, null.content_null) == (False, True)
    assert not refused.empty_reply and not refused.content_null


def test_the_api_key_comes_only_from_an_allowed_variable(stub, monkeypatch, settings):
    settings.ENGINE_API_KEY_ENVS = ["OPENAI_API_KEY"]
    with pytest.raises(EndpointError, match="api_key_env.*not an allowed API key variable"):
        endpoint_create(
            name="x", model="m", base_url=stub.base_url, api_key_env="DJANGO_SECRET_KEY"
        )
    endpoint = make_endpoint(stub.base_url, api_key_env="OPENAI_API_KEY")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    missing = engine_call(endpoint=endpoint, messages=HELLO)
    assert missing.status == CallStatus.ERROR and "set the environment variable" in missing.error
    assert stub.requests == []
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-123")
    engine_call(endpoint=endpoint, messages=HELLO)
    assert stub.authorizations == ["Bearer sk-test-123"]


def test_the_fake_back_end_is_deterministic_and_plausible():
    endpoint = make_endpoint("", name="fake")
    prompt = [{"role": "user", "content": "Write a haiku about autumn."}]
    first, second = (engine_call(endpoint=endpoint, messages=prompt) for _ in range(2))
    assert first.reply == second.reply and first.status == CallStatus.OK
    assert first.reply.startswith("Here is a response to: Write a haiku about autumn.")
    judge = engine_call(
        endpoint=endpoint, messages=[{"role": "user", "content": "Text\n\nQuestion:\nIs it?"}]
    )
    assert judge.reply in ("YES", "NO")
    short = make_endpoint("", name="short", max_tokens=3)
    cut = engine_call(endpoint=short, messages=prompt)
    assert cut.status == CallStatus.TRUNCATED and len(cut.reply) == 12


def test_two_fake_models_answer_apart_each_the_same_every_time():
    # Two fake endpoints compared side by side (two judges, two generating systems in a demo
    # table) gave identical answers whatever their model: the table said they agree perfectly.
    small, large = (make_endpoint("", name=n, model=n) for n in ("fake-7b", "fake-70b"))
    judged = [
        [{"role": "user", "content": f"Response {n}\n\nQuestion:\nIs it polite? YES or NO"}]
        for n in range(40)
    ]

    def replies(endpoint, prompts):
        return [engine_call(endpoint=endpoint, messages=m).reply for m in prompts]

    verdicts = replies(small, judged)
    assert verdicts == replies(small, judged)  # the same model: the same answers, every time
    assert set(verdicts) == {"YES", "NO"}
    assert replies(large, judged) != verdicts  # another model: answers of its own
    haiku = [[{"role": "user", "content": "Write a haiku about autumn."}]]
    assert replies(small, haiku) != replies(large, haiku)
    assert replies(small, haiku)[0].startswith("Here is a response to: Write a haiku")


def test_test_connection_shows_the_answer_or_the_exact_error(stub):
    ok = endpoint_test(endpoint=make_endpoint(stub.base_url))
    assert ok.status == CallStatus.OK and stub.requests[0]["max_tokens"] == 8
    stub.fail_next(401, message="invalid api key")
    failed = endpoint_test(endpoint=make_endpoint(stub.base_url, name="other"))
    assert failed.status == CallStatus.ERROR
    assert failed.error.startswith("HTTP 401") and "invalid api key" in failed.error
