"""Streamed chat replies: server-sent events over real HTTP against the stub, usage from the
final chunk, a broken stream never an answer; the offline fake streams a word at a time."""

from decimal import Decimal

import pytest

from annotate.engine.client import FakeTransport, TransportOptions
from annotate.engine.models import EngineCall
from annotate.engine.services import endpoint_request_body, engine_call
from tests.annotate.engine.conftest import make_endpoint
from tests.evaluation.openai_stub import StubOpenAI

pytestmark = pytest.mark.django_db
HELLO = [{"role": "user", "content": "Say hello"}]


def test_an_endpoint_that_streams_asks_for_a_stream_with_usage():
    endpoint = make_endpoint("", name="s", stream=True)
    assert endpoint_request_body(endpoint=endpoint, messages=HELLO) == {
        "model": "stub-model",
        "messages": HELLO,
        "temperature": 0.0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    assert "stream" not in endpoint_request_body(
        endpoint=make_endpoint("", name="n"), messages=HELLO
    )


def test_a_streamed_reply_grows_and_is_stored_whole_with_the_final_usage():
    with StubOpenAI(replies=["Hello there, reader."]) as stub:
        endpoint = make_endpoint(
            stub.base_url, stream=True, price_prompt_per_1k=Decimal("1"), price_completion_per_1k=2
        )
        seen = []
        call = engine_call(endpoint=endpoint, messages=HELLO, on_text=seen.append)
    assert seen == ["Hello", "Hello there,", "Hello there, reader."]
    assert stub.raw_requests == [
        b'{"model":"stub-model","messages":[{"role":"user","content":"Say hello"}],'
        b'"temperature":0,"stream":true,"stream_options":{"include_usage":true}}'
    ]
    stored = EngineCall.objects.get()
    assert (stored.status, stored.reply, stored.finish_reason) == (
        "ok",
        "Hello there, reader.",
        "stop",
    )
    # The stub's usage: 10 + 9 // 5 = 11 prompt, 1 + 20 // 5 = 5 completion tokens.
    assert (stored.prompt_tokens, stored.completion_tokens, stored.usage_estimated) == (
        11,
        5,
        False,
    )
    assert stored.cost_usd == Decimal("0.021000")  # (11 x 1 + 5 x 2) / 1000
    assert stored.request == stub.requests[0] and call.pk == stored.pk


def test_a_stream_broken_half_way_is_a_failed_call_without_text():
    with StubOpenAI(replies=["One two three four five."]) as stub:
        stub.break_stream_after = 3  # role, "One", " two": then the connection closes
        endpoint = make_endpoint(stub.base_url, stream=True, max_retries=0)
        seen = []
        call = engine_call(endpoint=endpoint, messages=HELLO, on_text=seen.append)
    assert seen == ["One", "One two"]
    assert call.status == "error" and call.reply == ""
    assert call.error == ("gave up after 0 retries: the stream ended before the reply was complete")


def test_a_broken_stream_is_retried_from_the_start():
    with StubOpenAI(replies=["Alpha beta.", "Alpha beta."]) as stub:
        stub.break_stream_after = 2

        def heal(count):
            if count == 2:
                stub.break_stream_after = None

        stub.on_request = heal
        endpoint = make_endpoint(stub.base_url, stream=True, max_retries=2)
        seen = []
        call = engine_call(
            endpoint=endpoint, messages=HELLO, on_text=seen.append, sleep=lambda s: None
        )
    assert seen == ["Alpha", "Alpha", "Alpha beta."]
    assert (call.status, call.reply, call.retries) == ("ok", "Alpha beta.", 1)


def test_the_fake_back_end_streams_a_word_at_a_time():
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": "Write a line."}],
        "stream": True,
    }
    seen = []
    reply = FakeTransport(TransportOptions()).send(body, on_text=seen.append)
    assert seen[-1] == reply.text and len(seen) == len(reply.text.split())
    assert all(later.startswith(earlier) for earlier, later in zip(seen, seen[1:], strict=False))
    assert FakeTransport(TransportOptions()).send({**body, "stream": False}).text == reply.text
