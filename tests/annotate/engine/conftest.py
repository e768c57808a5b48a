"""Shared set-up of the engine tests: the stub server, endpoints on it, a small benchmark."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest

from annotate.engine.services import endpoint_create
from tests.evaluation.openai_stub import StubOpenAI
from tests.factories import BenchmarkFactory, InstructionFactory


@pytest.fixture
def stub():
    with StubOpenAI() as server:
        yield server


def make_endpoint(base_url: str = "", *, name: str = "stub", **fields):
    fields.setdefault("model", "stub-model")
    fields.setdefault("max_retries", 3)
    # Tests measure behaviour, not the default pace.
    fields.setdefault("requests_per_minute", 1_000_000)
    fields.setdefault("tokens_per_minute", 100_000_000)
    return endpoint_create(name=name, base_url=base_url, **fields)


def endpoint_with_unset_key(monkeypatch, *, name: str):
    """An endpoint on an address (nothing listens there) reading OPENAI_API_KEY, which this
    test unsets: every run on it is refused with `unset_key_message(name)`."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    return make_endpoint("http://127.0.0.1:9/v1", name=name, api_key_env="OPENAI_API_KEY")


def unset_key_message(name: str) -> str:
    """The start of the refusal of a run on `endpoint_with_unset_key(name=name)`."""
    return f"Endpoint '{name}': set the environment variable OPENAI_API_KEY to the API key"


# The endpoints page's form, filled in as an admin would (override any field).
ENDPOINT_FORM = {
    "name": "local-vllm",
    "base_url": "http://127.0.0.1:9/v1",
    "model": "llama",
    "api_key_env": "",
    "temperature": "0",
    "max_tokens": "",
    "top_p": "",
    "seed": "",
    "stop": "END\n###",
    "timeout_seconds": "30",
    "concurrency": "4",
    "requests_per_minute": "100",
    "tokens_per_minute": "10000",
    "max_retries": "2",
    "price_prompt_per_1k": "0.001",
    "price_completion_per_1k": "0.002",
}


def dollar_a_thousand(stub, *, concurrency: int, name: str = "stub"):
    """An endpoint on the stub at $1 per 1k tokens either way, replies capped at 100 tokens:
    the spending-cap tests' endpoint."""
    return make_endpoint(
        stub.base_url,
        name=name,
        concurrency=concurrency,
        max_tokens=100,
        price_prompt_per_1k=Decimal("1"),
        price_completion_per_1k=Decimal("1"),
    )


def start_confirmed(client, url: str, form: dict):
    """Press Start on a run form with a paid endpoint, then the "Start for $X" it shows: the
    second answer (the first starts nothing, annotate/engine/pages.py)."""
    asked = client.post(url, form)
    confirm = asked.context["confirm"]
    assert asked.status_code == 200 and confirm.asked, asked.text
    return client.post(url, {**form, confirm.field: confirm.value})


def again_total(page: str) -> str:
    """The total a run page's "Run again" form confirms (a paid endpoint's; "" when none)."""
    found = re.search(r'name="confirm_total"[^>]*value="([^"]*)"', page)
    assert found, "the page has no Run again form"
    return found.group(1)


def make_instructions(count: int = 3, *, benchmark=None):
    """Create `count` instructions, every other one with an input; return (benchmark, list)."""
    benchmark = benchmark or BenchmarkFactory(name="bench")
    instructions = [
        InstructionFactory(
            benchmark=benchmark,
            external_id=f"task_{n}",
            position=n,
            text=f"Write line {n}.",
            input_text=f"Input {n}." if n % 2 else "",
        )
        for n in range(1, count + 1)
    ]
    return benchmark, instructions


@pytest.fixture
def echo_protocol(settings):
    from tests.annotate.engine import echo

    echo.STORED.clear()  # run ids come again in the next test's database (SQLite)
    settings.ENGINE_PROTOCOLS = {
        **settings.ENGINE_PROTOCOLS,
        "echo": "tests.annotate.engine.echo.EchoProtocol",
    }


def system_of_a_failed_generation(benchmark, *, name: str = "downsys"):
    """Generate `benchmark` under a new system through an endpoint nothing listens on: every
    call fails, the run ends, and its system (made before the first call) has no response."""
    from annotate.engine.services import engine_run_execute
    from annotate.engine.services.generation import (
        generating_system_get_or_create,
        generation_run_create,
    )

    endpoint = make_endpoint("http://127.0.0.1:9/v1", name=f"down-{name}", max_retries=0)
    system = generating_system_get_or_create(name=name, endpoint=endpoint)
    run = generation_run_create(benchmark=benchmark, systems=[system], endpoint=endpoint)
    engine_run_execute(run_id=run.pk, sleep=lambda _seconds: None)
    run.refresh_from_db()
    assert run.units_failed == run.units_total > 0 and not system.responses.exists()
    return system
