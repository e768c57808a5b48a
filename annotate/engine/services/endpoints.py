"""Writes of endpoints, and what a call needs from one: its request body and its transport."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.urls import reverse

from annotate.engine.client import (
    FAKE_HINT,
    RequestBody,
    Transport,
    TransportOptions,
    transport_for,
)
from annotate.engine.errors import EndpointError, EndpointNameTakenError, EngineNotFoundError
from annotate.engine.models import Endpoint
from annotate.secrets import ApiKeyEnvError, api_key_env_validate

EDITABLE_FIELDS = (
    "base_url",
    "model",
    "api_key_env",
    "temperature",
    "max_tokens",
    "top_p",
    "seed",
    "stop",
    "stream",
    "timeout_seconds",
    "concurrency",
    "requests_per_minute",
    "tokens_per_minute",
    "max_retries",
    "price_prompt_per_1k",
    "price_completion_per_1k",
)
# The offline fake answers in-process, costs nothing and has no server limit to respect, so an
# endpoint on it paces nothing unless its creator sets limits (the model's defaults, 500
# requests a minute, are a paid API's and held the fake to about 8 calls a second).
FAKE_DEFAULT_LIMITS = {"requests_per_minute": 1_000_000, "tokens_per_minute": 1_000_000_000}


def _validate(fields: Mapping[str, Any]) -> dict[str, Any]:
    """Return the fields cleaned, or raise EndpointError naming the first bad field."""
    unknown = set(fields) - set(EDITABLE_FIELDS)
    if unknown:
        raise EndpointError(f"Unknown endpoint field(s): {', '.join(sorted(unknown))}.")
    cleaned = dict(fields)
    if "model" in cleaned and not str(cleaned["model"]).strip():
        raise EndpointError("an endpoint needs a model name.", field="model")
    base_url = str(cleaned.get("base_url") or "").strip()
    if base_url and not base_url.startswith(("http://", "https://")):
        raise EndpointError(f"{base_url!r} is not an http(s) address.", field="base_url")
    if "base_url" in cleaned:
        cleaned["base_url"] = base_url
    if "api_key_env" in cleaned:
        try:
            cleaned["api_key_env"] = api_key_env_validate(str(cleaned["api_key_env"] or ""))
        except ApiKeyEnvError as error:
            raise EndpointError(str(error), field="api_key_env") from None
    _check_with_the_model(cleaned)
    if cleaned.get("max_tokens") is not None and int(cleaned["max_tokens"]) < 1:
        raise EndpointError("must be at least 1 (or blank: not sent).", field="max_tokens")
    for name in ("price_prompt_per_1k", "price_completion_per_1k"):
        if name in cleaned:
            try:
                cleaned[name] = Decimal(str(cleaned[name]))
            except InvalidOperation:
                raise EndpointError(f"{cleaned[name]!r} is not a number.", field=name) from None
            if cleaned[name] < 0:
                raise EndpointError("a price cannot be negative.", field=name)
    if "stop" in cleaned:
        stop = cleaned["stop"] or []
        if isinstance(stop, str):
            stop = [stop]
        if not all(isinstance(item, str) for item in stop):
            raise EndpointError("expected a list of strings.", field="stop")
        cleaned["stop"] = list(stop)
    return cleaned


def _check_with_the_model(cleaned: dict[str, Any]) -> None:
    """Convert each number and run the model field's validators (ranges, the base URL's end),
    so the command, the services' callers and the form refuse the same values."""
    for name, value in cleaned.items():
        if name == "stop" or value is None:
            continue
        field = Endpoint._meta.get_field(name)
        try:
            cleaned[name] = field.to_python(value)
            field.run_validators(cleaned[name])
        except ValidationError as error:
            raise EndpointError(" ".join(error.messages), field=name) from None


def _check_name_free(name: str, *, endpoint: Endpoint | None = None) -> None:
    """Refuse a name taken, also in other capitals (the API and commands find endpoints by
    name; "STUB-PAID" beside "stub-paid" is one name to a person), saying which endpoint has
    it and where its page is: the admin most likely meant to change that one."""
    others = Endpoint.objects.filter(name__iexact=name)
    if endpoint is not None:
        others = others.exclude(pk=endpoint.pk)
    taken = others.only("pk", "name").first()
    if taken is None:
        return
    capitals = (
        "" if taken.name == name else "; names that differ only in capitals are the same name"
    )
    page = reverse("engine:endpoint-edit", args=[taken.pk])
    raise EndpointNameTakenError(
        f"an endpoint named {taken.name!r} exists already{capitals}. To change it, open its "
        f"page ({page}, Endpoints list); to add another endpoint, give it another name.",
        endpoint=taken,
    )


@transaction.atomic
def endpoint_create(*, name: str, model: str, **fields: Any) -> Endpoint:
    """Create an endpoint; a blank base_url means the offline fake back-end.

    Limits not given are the model's defaults for an address and FAKE_DEFAULT_LIMITS for the
    fake; limits given are kept as they are, for either.
    """
    name = name.strip()
    if not name:
        raise EndpointError("an endpoint needs a name.", field="name")
    _check_name_free(name)
    if not str(fields.get("base_url") or "").strip():
        fields = {**FAKE_DEFAULT_LIMITS, **fields}
    cleaned = _validate({"model": model, **fields})
    try:
        with transaction.atomic():
            return Endpoint.objects.create(name=name, **cleaned)
    except IntegrityError as error:
        _check_name_free(name)  # made by another request since the check above
        raise EndpointError(f"Invalid endpoint {name!r}: {error}") from None


@transaction.atomic
def endpoint_update(*, endpoint: Endpoint, name: str | None = None, **fields: Any) -> Endpoint:
    """Change an endpoint's name or settings; stored calls keep the request they were sent."""
    if name is not None and name.strip() != endpoint.name:
        name = name.strip()
        if not name:
            raise EndpointError("an endpoint needs a name.", field="name")
        _check_name_free(name, endpoint=endpoint)
        endpoint.name = name
    cleaned = _validate(fields)
    if not endpoint.base_url and cleaned.get("base_url"):
        _check_paced(
            {field: cleaned.get(field, getattr(endpoint, field)) for field in FAKE_DEFAULT_LIMITS}
        )
    for name, value in cleaned.items():
        setattr(endpoint, name, value)
    endpoint.save()
    return endpoint


def _check_paced(limits: Mapping[str, Any]) -> None:
    """Refuse the offline fake's unpaced limits on an endpoint that now calls an address: given
    an address, a fake endpoint kept its 1,000,000 requests a minute, and a paid API was sent
    calls with no pacing."""
    for field, unpaced in FAKE_DEFAULT_LIMITS.items():
        if limits[field] == unpaced:
            raise EndpointError(
                f"{unpaced:,} is the offline fake's 'no limit'; an endpoint that calls an "
                "address needs that API's limit (500 requests and 200,000 tokens a minute if "
                "unsure).",
                field=field,
            )


def endpoint_get(*, name: str | None = None, endpoint_id: int | None = None) -> Endpoint:
    try:
        if endpoint_id is not None:
            return Endpoint.objects.get(pk=endpoint_id)
        return Endpoint.objects.get(name=name)
    except Endpoint.DoesNotExist:
        raise EngineNotFoundError(f"No endpoint {name or endpoint_id!r}.") from None


def endpoint_request_body(
    *,
    endpoint: Endpoint,
    messages: Sequence[Mapping[str, str]],
    params: Mapping[str, Any] | None = None,
) -> RequestBody:
    """Return the exact body to send: model, messages, the endpoint's decoding parameters.

    Optional parameters (max_tokens, top_p, seed, stop) are sent only when set. `params`
    overrides any key; a value of None removes it (a protocol that must send exactly
    model, messages and temperature passes {"max_tokens": None}). An endpoint that streams
    adds "stream": true and "stream_options": {"include_usage": true} (usage in the last chunk).
    A FAKE_HINT in `params` goes to the offline fake only: a server is never told the answer.
    """
    body = RequestBody(
        {
            "model": endpoint.model,
            "messages": [{"role": m["role"], "content": m["content"]} for m in messages],
            "temperature": endpoint.temperature,
        }
    )
    optional = {
        "max_tokens": endpoint.max_tokens,
        "top_p": endpoint.top_p,
        "seed": endpoint.seed,
        "stop": endpoint.stop or None,
    }
    body.update({key: value for key, value in optional.items() if value is not None})
    if endpoint.stream:
        body.update(stream=True, stream_options={"include_usage": True})
    for key, value in (params or {}).items():
        if value is None or (key == FAKE_HINT and not endpoint.is_fake):
            body.pop(key, None)
        else:
            body[key] = value
    return body


def endpoint_embeddings_body(*, endpoint: Endpoint, texts: Sequence[str]) -> RequestBody:
    """Return the exact body of an embeddings request: the endpoint's model and the texts."""
    return RequestBody({"model": endpoint.model, "input": list(texts)})


def endpoint_api_key(*, endpoint: Endpoint) -> str:
    """Return the API key the endpoint sends, read from its allowed variable in this process's
    environment ("" when it names none, and for the offline fake); raise EndpointError naming
    the endpoint and the variable when that variable is not allowed or not set."""
    if not endpoint.api_key_env or endpoint.is_fake:
        return ""
    try:  # checked again here: the allow-list may have shrunk since the endpoint was saved
        api_key_env_validate(endpoint.api_key_env)
    except ApiKeyEnvError as error:
        raise EndpointError(f"Endpoint {endpoint.name!r}: {error}") from None
    api_key = os.environ.get(endpoint.api_key_env, "")
    if not api_key:
        raise EndpointError(
            f"Endpoint {endpoint.name!r}: set the environment variable "
            f"{endpoint.api_key_env} to the API key (or clear 'API key env' for a server "
            "that needs none)."
        )
    return api_key


def endpoint_transport(*, endpoint: Endpoint, timeout_seconds: float | None = None) -> Transport:
    """Return the transport, with the API key read from the endpoint's allowed variable."""
    api_key = endpoint_api_key(endpoint=endpoint)
    return transport_for(
        TransportOptions(
            base_url=endpoint.base_url,
            api_key=api_key,
            timeout_seconds=timeout_seconds or endpoint.timeout_seconds,
        )
    )
