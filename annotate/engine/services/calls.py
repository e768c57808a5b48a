"""One model call: send it through the endpoint's limiter and retries, describe what came back
as an EngineCall (status ok, error, truncated or refused), store it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.db.models import F

from annotate.engine.client import (
    BilledCallback,
    CallOutcome,
    EmbeddingReply,
    RequestBody,
    RetryPolicy,
    TextCallback,
    Transport,
    call_with_retries,
    estimate_prompt_tokens,
)
from annotate.engine.errors import EndpointError
from annotate.engine.limiter import RateLimiter
from annotate.engine.models import (
    EMPTY_REPLY,
    NULL_CONTENT,
    CallStatus,
    Endpoint,
    EngineCall,
    EngineRun,
)
from annotate.engine.services.endpoints import (
    endpoint_embeddings_body,
    endpoint_request_body,
    endpoint_transport,
)

_THOUSAND = Decimal(1000)
_COST_PLACES = Decimal("0.000001")
_FINISH_STATUS = {"length": CallStatus.TRUNCATED, "content_filter": CallStatus.REFUSED}

_limiters: dict[tuple[int, int, int], RateLimiter] = {}
_limiters_lock = threading.Lock()


def endpoint_limiter(*, endpoint: Endpoint) -> RateLimiter:
    """Return this process's limiter for an endpoint, shared by all its threads and runs."""
    key = (endpoint.pk, endpoint.requests_per_minute, endpoint.tokens_per_minute)
    with _limiters_lock:
        if key not in _limiters:
            _limiters[key] = RateLimiter(
                requests_per_minute=endpoint.requests_per_minute,
                tokens_per_minute=endpoint.tokens_per_minute,
            )
        return _limiters[key]


def retry_policy(*, endpoint: Endpoint, sleep: Callable[[float], None] = time.sleep) -> RetryPolicy:
    policy = RetryPolicy(limiter=endpoint_limiter(endpoint=endpoint), sleep=sleep)
    policy.max_retries = endpoint.max_retries
    return policy


def call_cost(*, endpoint: Endpoint, prompt_tokens: int, completion_tokens: int) -> Decimal:
    """Return the price of the tokens at the endpoint's per-1k prices, to the micro-dollar."""
    cost = (
        Decimal(prompt_tokens) * endpoint.price_prompt_per_1k
        + Decimal(completion_tokens) * endpoint.price_completion_per_1k
    ) / _THOUSAND
    return cost.quantize(_COST_PLACES)


def call_from_outcome(
    *,
    endpoint: Endpoint,
    body: Mapping[str, Any],
    outcome: CallOutcome,
    run_id: int | None = None,
    unit_key: str = "",
    purpose: str = "",
) -> EngineCall:
    """Return an unsaved EngineCall for one outcome. Only ok/truncated calls keep reply text.

    An empty reply with finish_reason "stop" is an error: a failure is never an answer. An
    embeddings call that came back is ok with no text (the vectors are the caller's).
    """
    call = EngineCall(
        run_id=run_id,
        endpoint=endpoint,
        unit_key=unit_key,
        purpose=purpose,
        request=body if isinstance(body, RequestBody) else dict(body),
        retries=outcome.retries,
        latency_ms=outcome.latency_ms,
    )
    if outcome.billed:  # failed attempts the provider may have billed: the run counts them
        call.possibly_billed_usd = sum(
            (
                call_cost(endpoint=endpoint, prompt_tokens=p, completion_tokens=c)
                for p, c in outcome.billed
            ),
            Decimal(0),
        )
    reply = outcome.reply
    if reply is None:
        call.status, call.error = CallStatus.ERROR, outcome.error
        return call
    call.prompt_tokens, call.completion_tokens = reply.prompt_tokens, reply.completion_tokens
    call.usage_estimated = reply.usage_estimated
    call.cost_usd = call_cost(
        endpoint=endpoint,
        prompt_tokens=reply.prompt_tokens,
        completion_tokens=reply.completion_tokens,
    )
    if isinstance(reply, EmbeddingReply):
        call.status = CallStatus.OK
        return call
    call.finish_reason = reply.finish_reason
    call.system_fingerprint = reply.system_fingerprint[:200]
    call.status = _FINISH_STATUS.get(reply.finish_reason, CallStatus.OK)
    if call.status == CallStatus.REFUSED:
        call.error = "refused by the server's content filter (finish_reason content_filter)"
    elif not reply.text:
        call.status = CallStatus.ERROR
        what = NULL_CONTENT if reply.content_null else EMPTY_REPLY
        call.error = f"{what} (finish_reason {reply.finish_reason or 'missing'})"
    else:
        call.reply = reply.text
    return call


def call_send(
    *,
    endpoint: Endpoint,
    transport: Transport,
    policy: RetryPolicy,
    messages: Sequence[Mapping[str, str]],
    run_id: int | None = None,
    unit_key: str = "",
    purpose: str = "",
    params: Mapping[str, Any] | None = None,
    should_stop: Callable[[], bool] = lambda: False,
    on_text: TextCallback | None = None,
    on_billed: BilledCallback | None = None,
) -> EngineCall:
    """Send one call (limiter and retries inside) and return it unsaved. No database access.

    On an endpoint that streams, `on_text` is told the reply's text so far as it grows;
    `on_billed` is told each failed attempt that may have been billed (`call_with_retries`).
    """
    body = endpoint_request_body(endpoint=endpoint, messages=messages, params=params)
    outcome = call_with_retries(
        transport, policy, body, should_stop=should_stop, on_text=on_text, on_billed=on_billed
    )
    return call_from_outcome(
        endpoint=endpoint,
        body=body,
        outcome=outcome,
        run_id=run_id,
        unit_key=unit_key,
        purpose=purpose,
    )


def estimated_call_cost(
    *, endpoint: Endpoint, messages: Sequence[Mapping[str, str]], completion_tokens: int
) -> Decimal:
    return call_cost(
        endpoint=endpoint,
        prompt_tokens=estimate_prompt_tokens(messages),
        completion_tokens=completion_tokens,
    )


def engine_call(
    *,
    endpoint: Endpoint,
    messages: Sequence[Mapping[str, str]],
    run: EngineRun | None = None,
    unit_key: str = "",
    purpose: str = "",
    params: Mapping[str, Any] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    on_text: TextCallback | None = None,
) -> EngineCall:
    """Make one stored call, synchronously. For background code only, never a web request.

    A missing API key is stored as a failed call too (nothing is sent). On an endpoint that
    streams, `on_text(text so far)` is called as the reply grows (in this thread); the call is
    stored, as any other, only once the reply is complete.
    """
    try:
        transport = endpoint_transport(endpoint=endpoint)
    except EndpointError as error:
        body = endpoint_request_body(endpoint=endpoint, messages=messages, params=params)
        call = call_from_outcome(
            endpoint=endpoint,
            body=body,
            outcome=CallOutcome(None, str(error), 0, 0),
            run_id=run.pk if run else None,
            unit_key=unit_key,
            purpose=purpose,
        )
    else:
        call = call_send(
            endpoint=endpoint,
            transport=transport,
            policy=retry_policy(endpoint=endpoint, sleep=sleep),
            messages=messages,
            run_id=run.pk if run else None,
            unit_key=unit_key,
            purpose=purpose,
            params=params,
            on_text=on_text,
        )
    _call_save(call, run)
    return call


def _call_save(call: EngineCall, run: EngineRun | None) -> None:
    with transaction.atomic():
        call.save()
        if run is not None:
            EngineRun.objects.filter(pk=run.pk).update(**run_totals_delta([call]))


# OpenAI's /embeddings takes at most this many inputs in one request.
EMBEDDING_MAX_INPUTS = 2048


def engine_embed(
    *,
    endpoint: Endpoint,
    texts: Sequence[str],
    run: EngineRun | None = None,
    unit_key: str = "",
    purpose: str = "embeddings",
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[list[EngineCall], list[list[float]] | None]:
    """Embed the texts, EMBEDDING_MAX_INPUTS at most per stored call (POST /embeddings, body
    {"model", "input"}), each under the endpoint's limiter, retries and prices; return the
    calls and one vector per text in the texts' order, or None when a call failed (the last
    call's error says why; no later batch is sent). Background code only.
    """
    calls: list[EngineCall] = []
    vectors: list[list[float]] = []
    for start in range(0, len(texts), EMBEDDING_MAX_INPUTS):
        batch = texts[start : start + EMBEDDING_MAX_INPUTS]
        call, batch_vectors = _embed_once(
            endpoint=endpoint, texts=batch, run=run, unit_key=unit_key, purpose=purpose, sleep=sleep
        )
        calls.append(call)
        if batch_vectors is None:
            return calls, None
        vectors.extend(batch_vectors)
    return calls, vectors


def _embed_once(
    *,
    endpoint: Endpoint,
    texts: Sequence[str],
    run: EngineRun | None,
    unit_key: str,
    purpose: str,
    sleep: Callable[[float], None],
) -> tuple[EngineCall, list[list[float]] | None]:
    body = endpoint_embeddings_body(endpoint=endpoint, texts=texts)
    try:
        transport = endpoint_transport(endpoint=endpoint)
    except EndpointError as error:
        outcome = CallOutcome(None, str(error), 0, 0)
    else:
        policy = retry_policy(endpoint=endpoint, sleep=sleep)
        outcome = call_with_retries(transport, policy, body, embeddings=True)
    call = call_from_outcome(
        endpoint=endpoint,
        body=body,
        outcome=outcome,
        run_id=run.pk if run else None,
        unit_key=unit_key,
        purpose=purpose,
    )
    _call_save(call, run)
    reply = outcome.reply
    return call, reply.vectors if isinstance(reply, EmbeddingReply) else None


def run_totals(calls: Sequence[EngineCall]) -> dict[str, Any]:
    """Return what each of a run's call counters grows by for these calls."""
    return {
        "calls": len(calls),
        "calls_failed": sum(1 for c in calls if not c.answered),
        "prompt_tokens": sum(c.prompt_tokens for c in calls),
        "completion_tokens": sum(c.completion_tokens for c in calls),
        "cost_usd": sum((c.cost_usd for c in calls), Decimal(0)),
        "possibly_billed_usd": sum((c.possibly_billed_usd for c in calls), Decimal(0)),
        "call_seconds": sum(c.latency_ms for c in calls) / 1000,
    }


def run_totals_delta(calls: Sequence[EngineCall]) -> dict[str, Any]:
    """Return the F() increments of a run's counters for these calls."""
    return {name: F(name) + value for name, value in run_totals(calls).items()}


TEST_TIMEOUT_SECONDS = 10.0


def endpoint_test(*, endpoint: Endpoint) -> EngineCall:
    """Make one tiny stored call (at most 8 tokens, no retries, a 10 s timeout at most) to check
    that an endpoint answers; the call's reply or exact error is what to show."""
    messages = [{"role": "user", "content": "Reply with the single word: ready"}]
    try:
        transport = endpoint_transport(
            endpoint=endpoint,
            timeout_seconds=min(endpoint.timeout_seconds, TEST_TIMEOUT_SECONDS),
        )
    except EndpointError as error:
        outcome = CallOutcome(None, str(error), 0, 0)
        body = endpoint_request_body(endpoint=endpoint, messages=messages)
    else:
        policy = retry_policy(endpoint=endpoint)
        policy.max_retries = 0
        body = endpoint_request_body(endpoint=endpoint, messages=messages, params={"max_tokens": 8})
        outcome = call_with_retries(transport, policy, body)
    call = call_from_outcome(
        endpoint=endpoint, body=body, outcome=outcome, purpose="test connection"
    )
    call.save()
    return call
