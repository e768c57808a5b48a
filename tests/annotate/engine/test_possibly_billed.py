"""Failed attempts the provider may have billed (a timeout once sent, a broken stream, a 5xx
but 503) count toward the run's spending cap and its "possibly billed" amount; what cannot
have been processed (a refused connection, 429, 503) counts nowhere. Over real HTTP."""

import os
from decimal import Decimal

import pytest
from django.urls import reverse

from annotate.engine.client import (
    RetryPolicy,
    TransportOptions,
    call_with_retries,
    estimate_prompt_tokens,
    estimate_tokens,
    transport_for,
)
from annotate.engine.limiter import RateLimiter
from annotate.engine.models import CallStatus, EngineCall, RunStatus
from annotate.engine.services import engine_run_execute
from annotate.engine.services.generation import (
    generating_system_get_or_create,
    generation_run_create,
)
from annotate.templatetags.money import usd
from tests.annotate.engine.conftest import dollar_a_thousand, make_endpoint, make_instructions
from tests.evaluation.openai_stub import StubOpenAI

HELLO = [{"role": "user", "content": "Hello there"}]


def _policy(max_retries: int) -> RetryPolicy:
    return RetryPolicy(
        limiter=RateLimiter(requests_per_minute=1_000_000, tokens_per_minute=100_000_000),
        max_retries=max_retries,
        sleep=lambda seconds: None,
    )


def _send(base_url: str, body: dict, *, max_retries: int = 0, timeout: float = 5.0):
    transport = transport_for(TransportOptions(base_url=base_url, timeout_seconds=timeout))
    return call_with_retries(transport, _policy(max_retries), body)


def _generation(endpoint, count: int, **kwargs):
    benchmark, _ = make_instructions(count)
    system = generating_system_get_or_create(name="gen-billed", endpoint=endpoint)
    return generation_run_create(benchmark=benchmark, systems=[system], endpoint=endpoint, **kwargs)


def test_a_timeout_after_sending_is_possibly_billed_a_refused_connection_is_not(stub):
    body = {"model": "m", "messages": HELLO, "max_tokens": 50}
    stub.delay = 0.5
    timed_out = _send(stub.base_url, body, max_retries=1, timeout=0.2)
    assert timed_out.reply is None and "timeout" in timed_out.error
    prompt = estimate_prompt_tokens(HELLO)
    assert timed_out.billed == ((prompt, 50), (prompt, 50))  # both attempts, at max_tokens

    refused = _send("http://127.0.0.1:9/v1", body, max_retries=1)  # nothing listens: never sent
    assert refused.reply is None and "connection error" in refused.error
    assert refused.billed == ()


@pytest.mark.parametrize(
    ("status", "billed"), [(429, False), (503, False), (408, False), (500, True), (502, True)]
)
def test_which_server_errors_may_have_been_billed(stub, status, billed):
    stub.fail_next(status)
    outcome = _send(stub.base_url, {"model": "m", "messages": HELLO, "max_tokens": 20})
    assert outcome.reply is None and f"HTTP {status}" in outcome.error
    assert bool(outcome.billed) is billed


def test_a_broken_stream_counts_the_reply_received_when_it_passes_the_estimate():
    reply = "word " * 600
    with StubOpenAI(replies=[reply]) as stub:
        stub.break_stream_after = 401  # the role chunk and 400 words: 2,000 characters
        body = {"model": "m", "messages": HELLO, "stream": True}  # no max_tokens: 256 assumed
        outcome = _send(stub.base_url, body)
    assert outcome.reply is None and "stream ended" in outcome.error
    received = estimate_tokens("word " * 400)
    assert received > 256
    assert outcome.billed == ((estimate_prompt_tokens(HELLO), received),)


@pytest.mark.django_db
def test_a_capped_run_whose_calls_time_out_stops_within_the_cap_counting_them(stub):
    """Every attempt times out after it was sent. Each may have been billed its prompt plus
    max_tokens 100 at $1 per 1k tokens (about $0.12): the run counts them and stops before an
    attempt could pass the $0.50 cap; it spent nothing billed for sure. Before, the timeouts
    counted nowhere and the run went on paying for them."""
    stub.delay = 0.6
    endpoint = dollar_a_thousand(stub, concurrency=1)
    endpoint.timeout_seconds, endpoint.max_retries = 0.2, 5
    endpoint.save()
    run = _generation(endpoint, 4, spending_cap_usd=Decimal("0.50"))
    run = engine_run_execute(run_id=run.pk, sleep=lambda seconds: None)

    assert run.status == RunStatus.CANCELLED and "spending cap" in run.error
    assert run.cost_usd == 0 and run.possibly_billed_usd > 0
    assert run.cost_usd + run.possibly_billed_usd <= run.spending_cap_usd
    # Each request sent is counted once, at its prompt + max_tokens.
    prompt = estimate_prompt_tokens(stub.requests[0]["messages"])
    each = Decimal(prompt + 100) / 1000
    assert run.possibly_billed_usd == each * len(stub.requests)
    assert len(stub.requests) == 4  # a fifth attempt (of the six allowed) would pass the cap
    # The stored calls stay exact: a timed-out call billed nothing known.
    calls = EngineCall.objects.filter(run=run)
    assert [c.status for c in calls] == [CallStatus.ERROR]
    assert calls[0].cost_usd == 0 and "spending cap" in calls[0].error
    # The unit whose call was cut by the cap stays pending for the next start.
    assert run.units_failed == 0 and run.units_done == 0


@pytest.mark.django_db
def test_the_run_page_and_the_api_show_the_possibly_billed_amount(stub, admin_client):
    stub.delay = 0.6
    endpoint = dollar_a_thousand(stub, concurrency=1)
    endpoint.timeout_seconds = 0.2
    endpoint.save()
    run = _generation(endpoint, 2, spending_cap_usd=Decimal("0.30"))
    run = engine_run_execute(run_id=run.pk, sleep=lambda seconds: None)
    assert run.possibly_billed_usd > 0

    data = admin_client.get(reverse("api-engine-run", args=[run.pk])).json()
    assert data["possibly_billed_usd"] == str(run.possibly_billed_usd)
    assert data["cost_usd"] == str(run.cost_usd)
    progress = admin_client.get(reverse("engine:run-progress", args=[run.pk])).json()
    assert progress["possibly_billed_usd"] == str(run.possibly_billed_usd)
    page = admin_client.get(reverse("engine:run-detail", args=[run.pk])).content.decode()
    shown = usd(run.possibly_billed_usd)  # the page's money filter: dollars and cents
    assert f'<span id="run-possibly-billed">{shown}</span> possibly billed' in page


@pytest.mark.django_db
def test_a_refused_connection_adds_nothing_to_a_capped_run(settings):
    """Nothing listens: no request was sent, so nothing may have been billed and the cap is not
    what stops the run (its calls fail after their retries)."""
    settings.ENGINE_FAILED_CALLS_IN_A_ROW = 0
    endpoint = make_endpoint(
        "http://127.0.0.1:9/v1",
        max_tokens=100,
        price_prompt_per_1k=Decimal("1"),
        price_completion_per_1k=Decimal("1"),
    )
    run = _generation(endpoint, 3, spending_cap_usd=Decimal("0.20"))
    run = engine_run_execute(run_id=run.pk, sleep=lambda seconds: None)
    assert run.possibly_billed_usd == 0 and run.cost_usd == 0
    assert run.status == RunStatus.FAILED and run.units_failed == 3
    assert "spending cap" not in run.error


@pytest.mark.django_db
def test_a_broken_stream_in_a_run_is_counted_possibly_billed():
    with StubOpenAI(responder=lambda messages: "One two three four five six.") as stub:
        stub.break_stream_after = 3
        endpoint = make_endpoint(
            stub.base_url,
            stream=True,
            max_retries=1,
            max_tokens=10,
            price_prompt_per_1k=Decimal("1"),
            price_completion_per_1k=Decimal("1"),
        )
        run = _generation(endpoint, 1)
        run = engine_run_execute(run_id=run.pk, sleep=lambda seconds: None)
    prompt = estimate_prompt_tokens(stub.requests[0]["messages"])
    assert run.units_failed == 1 and run.cost_usd == 0
    assert run.possibly_billed_usd == 2 * Decimal(prompt + 10) / 1000  # both attempts


@pytest.mark.skipif(
    not os.environ.get("DATABASE_URL", "").startswith("postgres"),
    reason="needs PostgreSQL (.ci/run sets DATABASE_URL): SQLite's shared in-memory test database"
    " refuses the cap's writes from a chunk's calling thread beside its storing thread",
)
@pytest.mark.django_db(transaction=True)
def test_chunks_count_the_possibly_billed_attempts_on_the_runs_row(stub, monkeypatch):
    """Across Celery chunks the cap is held on the run's row. The first chunk's two timed-out
    attempts (then answered) are counted there; the cap then leaves less than one call's worst
    cost beside them, so the second chunk sends nothing. Not counted, they would leave room."""
    from annotate.engine.models import EngineRun
    from annotate.engine.services.runs import engine_run_chunk_execute, engine_run_dispatch

    stub.responder = lambda messages: "short"
    stub.delay = 0.6
    stub.on_request = lambda count: setattr(stub, "delay", 0.6 if count <= 2 else 0)
    endpoint = dollar_a_thousand(stub, concurrency=1)
    endpoint.timeout_seconds = 0.2
    endpoint.save()
    run = _generation(endpoint, 4)
    monkeypatch.setattr(
        "annotate.services.deferred_tasks.task_enqueue_on_commit", lambda **kwargs: None
    )
    first, second = engine_run_dispatch(run_id=run.pk, chunk_units=2)

    engine_run_chunk_execute(chunk_id=first.pk, sleep=lambda seconds: None)
    run.refresh_from_db()
    worst = Decimal(estimate_prompt_tokens(stub.requests[0]["messages"]) + 100) / 1000
    assert len(stub.requests) == 4 and run.units_done == 2  # two timeouts, then two answers
    assert run.possibly_billed_usd == 2 * worst
    assert run.cost_usd == sum((c.cost_usd for c in EngineCall.objects.filter(run=run)), Decimal(0))
    spent = run.cost_usd + run.possibly_billed_usd
    EngineRun.objects.filter(pk=run.pk).update(spending_cap_usd=spent + worst * Decimal("0.9"))

    engine_run_chunk_execute(chunk_id=second.pk, sleep=lambda seconds: None)
    run.refresh_from_db()
    assert len(stub.requests) == 4  # nothing sent: a call's worst cost no longer fits
    assert run.status == RunStatus.CANCELLED and "spending cap" in run.error
    assert run.cost_reserved_usd == 0
