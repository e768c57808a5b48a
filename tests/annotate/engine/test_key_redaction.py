"""The endpoint's API key never reaches a stored call error: a server that echoes the key it
was sent (a proxy's "invalid key sk-…", a reply dumped into an error) has it blanked out before
the message leaves the transport, so run pages, the API and logs cannot show it."""

from __future__ import annotations

import httpx2 as httpx
import pytest

from annotate.engine.client import OpenAITransport, TransportOptions
from annotate.engine.errors import CallRejectedError, CallTransientError

KEY = "test-key-for-redaction-0123456789"
BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def _transport(handler) -> OpenAITransport:
    transport = OpenAITransport(TransportOptions(base_url="https://llm.test/v1", api_key=KEY))
    mocked = httpx.Client(transport=httpx.MockTransport(handler))
    transport.client = transport.client.with_options(http_client=mocked)
    return transport


@pytest.mark.parametrize(
    ("status", "error_class"), [(401, CallRejectedError), (503, CallTransientError)]
)
def test_a_status_error_echoing_the_key_is_stored_without_it(status, error_class):
    def handler(request: httpx.Request) -> httpx.Response:
        sent = request.headers["authorization"].removeprefix("Bearer ")
        return httpx.Response(status, json={"error": {"message": f"Invalid API key: {sent}"}})

    with pytest.raises(error_class) as raised:
        _transport(handler).send(BODY)
    assert KEY not in str(raised.value)
    assert "Invalid API key" in str(raised.value)  # the rest of the server's message is kept


def test_a_malformed_reply_echoing_the_key_is_stored_without_it():
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"echo": dict(request.headers)})

    with pytest.raises(CallRejectedError) as raised:
        _transport(handler).send(BODY)
    assert KEY not in str(raised.value)
    assert "Not a chat completion" in str(raised.value)


def test_embeddings_errors_are_redacted_too():
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(400, json={"error": {"message": f"bad key {KEY}"}})

    with pytest.raises(CallRejectedError) as raised:
        _transport(handler).embed({"model": "e", "input": ["x"]})
    assert KEY not in str(raised.value)
