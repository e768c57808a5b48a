"""Embeddings through the engine: the one client, limiter, retries and stored accounting, over
real HTTP against the stub (and the offline fake when the endpoint has no address)."""

from decimal import Decimal

import pytest

from annotate.engine.client import fake_embedding
from annotate.engine.models import EngineCall
from annotate.engine.services import engine_embed
from annotate.engine.services.calls import EMBEDDING_MAX_INPUTS, endpoint_limiter
from tests.annotate.engine.conftest import make_endpoint

pytestmark = pytest.mark.django_db


def test_embeddings_send_the_exact_body_and_store_the_call_with_usage_and_cost(stub):
    endpoint = make_endpoint(stub.base_url, price_prompt_per_1k=Decimal("2"))
    [call], vectors = engine_embed(endpoint=endpoint, texts=["a b a", "c"], unit_key="u1")
    assert stub.raw_requests == [b'{"model":"stub-model","input":["a b a","c"]}']
    # The stub's vectors count the words "a", "b", "c".
    assert vectors == [[2.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    stored = EngineCall.objects.get()
    assert stored == call
    assert (stored.status, stored.purpose, stored.unit_key) == ("ok", "embeddings", "u1")
    assert stored.request == {"model": "stub-model", "input": ["a b a", "c"]}
    # The stub reports one prompt token: 1 x $2 / 1k.
    assert (stored.prompt_tokens, stored.completion_tokens, stored.usage_estimated) == (1, 0, False)
    assert stored.cost_usd == Decimal("0.002000")
    assert stored.reply == "" and stored.retries == 0


def test_a_429_is_retried_after_the_servers_retry_after(stub):
    endpoint = make_endpoint(stub.base_url)
    stub.fail_next(429, retry_after="3")
    waits = []
    [call], vectors = engine_embed(endpoint=endpoint, texts=["b"], sleep=waits.append)
    assert waits == [3.0]
    assert vectors == [[0.0, 1.0, 0.0]]
    assert (call.status, call.retries) == ("ok", 1)
    assert stub.requests == [{"model": "stub-model", "input": ["b"]}] * 2


def test_a_500_is_retried_too_and_the_budget_ends_it(stub):
    endpoint = make_endpoint(stub.base_url, max_retries=1)
    stub.fail_next(500, times=2, retry_after="0")
    [call], vectors = engine_embed(endpoint=endpoint, texts=["a"], sleep=lambda s: None)
    assert vectors is None and len(stub.requests) == 2
    assert call.status == "error" and call.reply == ""
    assert call.error == "gave up after 1 retries: HTTP 500: Error code: 500 - stub error 500"


def test_a_400_is_not_retried(stub):
    endpoint = make_endpoint(stub.base_url)
    stub.fail_next(400, message="input too long")
    waits = []
    [call], vectors = engine_embed(endpoint=endpoint, texts=["a"], sleep=waits.append)
    assert vectors is None and waits == [] and len(stub.requests) == 1
    assert (call.status, call.error, call.retries) == (
        "error",
        "HTTP 400: Error code: 400 - input too long",
        0,
    )
    assert EngineCall.objects.get().status == "error"


def test_embeddings_take_from_the_endpoints_one_limiter(stub):
    endpoint = make_endpoint(stub.base_url, requests_per_minute=60, tokens_per_minute=6000)
    limiter = endpoint_limiter(endpoint=endpoint)
    before = (limiter.requests.level, limiter.tokens.level)
    engine_embed(endpoint=endpoint, texts=["a b c d"], sleep=lambda s: None)
    # One request of the 6 the bucket holds; 1 token settled (the stub's usage).
    assert limiter is endpoint_limiter(endpoint=endpoint)
    assert limiter.requests.level == pytest.approx(before[0] - 1, abs=0.01)
    assert limiter.tokens.level == pytest.approx(before[1] - 1, abs=1)


def test_an_endpoint_without_address_embeds_offline_and_stores_the_call():
    endpoint = make_endpoint("", name="fake")
    [call], vectors = engine_embed(endpoint=endpoint, texts=["citations help", "x"])
    assert vectors == [fake_embedding("citations help"), fake_embedding("x")]
    assert len(vectors[0]) == 64 and sum(vectors[0]) == 2.0
    assert (call.status, call.prompt_tokens) == ("ok", 5)  # ceil(14/4) + ceil(1/4)
    assert EngineCall.objects.filter(endpoint=endpoint).count() == 1


def counted_text(n: int) -> str:
    """A text whose stub vector is (n % 10, n // 10 % 10, n // 100): unique below 10,000."""
    return " ".join(["a"] * (n % 10) + ["b"] * (n // 10 % 10) + ["c"] * (n // 100)) or "none"


def test_more_inputs_than_a_request_takes_go_in_batches_in_order_each_a_stored_call(stub):
    endpoint = make_endpoint(stub.base_url, price_prompt_per_1k=Decimal("2"))
    texts = [counted_text(n) for n in range(5000)]
    calls, vectors = engine_embed(endpoint=endpoint, texts=texts, unit_key="big")
    assert EMBEDDING_MAX_INPUTS == 2048
    assert [len(body["input"]) for body in stub.requests] == [2048, 2048, 904]
    assert [text for body in stub.requests for text in body["input"]] == texts
    assert vectors == [[float(n % 10), float(n // 10 % 10), float(n // 100)] for n in range(5000)]
    stored = list(EngineCall.objects.order_by("pk"))
    assert stored == calls and len(calls) == 3
    assert {(c.status, c.unit_key, c.prompt_tokens, c.cost_usd) for c in stored} == {
        ("ok", "big", 1, Decimal("0.002000"))
    }


def test_a_failed_batch_ends_the_embedding_and_no_later_batch_is_sent(stub):
    endpoint = make_endpoint(stub.base_url)
    stub.fail_next(400, message="input too long")
    calls, vectors = engine_embed(endpoint=endpoint, texts=["a"] * (EMBEDDING_MAX_INPUTS + 1))
    assert vectors is None and len(stub.requests) == 1
    assert [c.status for c in calls] == ["error"] == [c.status for c in EngineCall.objects.all()]
