"""Writes of judge configurations. A judge calls its model through an engine Endpoint."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction

from annotate.engine.errors import EngineError
from annotate.engine.models import Endpoint
from annotate.engine.services import endpoint_create
from annotate.engine.services.runs import engine_run_check_may_start
from annotate.models import Annotator, AnnotatorKind
from evaluation.errors import JudgeConfigError
from evaluation.models import JudgeConfig

BACKENDS = ("openai", "fake")
OPENAI_URL = "https://api.openai.com/v1"
# What a judge endpoint gets unless told otherwise: the InFoBench paper's judge and pace.
JUDGE_ENDPOINT_DEFAULTS: dict[str, Any] = {
    "model": "gpt-4-0314",
    "api_key_env": "OPENAI_API_KEY",
    "temperature": 0.0,
    "max_tokens": 16,
    "timeout_seconds": 60.0,
    "concurrency": 8,
    "requests_per_minute": 200,
    "tokens_per_minute": 40_000,
    "max_retries": 5,
    "price_prompt_per_1k": Decimal("0.03"),
    "price_completion_per_1k": Decimal("0.06"),
}


def judge_base_url(*, backend: str, base_url: str) -> str:
    """Return the endpoint address for the judge's old-style back-end name.

    "fake" (or blank with JUDGE_BACKEND=fake) is the offline fake (blank address); "openai" is
    `base_url`, else the OPENAI_BASE_URL setting, else OpenAI's own API.
    """
    backend = backend or settings.JUDGE_BACKEND
    if backend not in BACKENDS:
        raise JudgeConfigError(
            f"Unknown judge back-end {backend!r}: expected one of {', '.join(BACKENDS)}."
        )
    if backend == "fake":
        return ""
    return base_url or settings.OPENAI_BASE_URL or OPENAI_URL


@transaction.atomic
def judge_config_create(
    *,
    name: str,
    endpoint: Endpoint | None = None,
    protocol: str = "multi_turn",
    backend: str = "",
    base_url: str = "",
    user: AbstractBaseUser | None = None,
    **endpoint_fields: Any,
) -> JudgeConfig:
    """Create a judge configuration and the `llm` annotator its labels land under (same name).

    Without `endpoint`, an endpoint of the same name is created from `backend`, `base_url` and
    the endpoint fields (model, concurrency, prices...; defaults: JUDGE_ENDPOINT_DEFAULTS).
    `user` is who asks (None = the console): only an admin may put a judge on an endpoint that
    spends money, as only an admin may start a run on one.
    """
    name = judge_config_name_check(name=name)
    if endpoint is None:
        endpoint = _judge_endpoint_create(
            name=name, backend=backend, base_url=base_url, fields=endpoint_fields
        )
    elif backend or base_url or endpoint_fields:
        raise JudgeConfigError("Give either an endpoint or its settings, not both.")
    # The engine's rule, checked when the judge is made as the generation page checks it before
    # binding a system: a researcher's judge on a paid API could never be started. An endpoint
    # made above is rolled back with the refusal.
    engine_run_check_may_start(user=user, endpoint=endpoint)
    try:
        with transaction.atomic():
            annotator = Annotator.objects.create(
                name=name, kind=AnnotatorKind.LLM, judge_config=name
            )
    except IntegrityError:  # made by another request since the check above
        raise JudgeConfigError(_taken(name), field="name") from None
    try:
        with transaction.atomic():
            return JudgeConfig.objects.create(
                name=name, annotator=annotator, endpoint=endpoint, protocol=protocol
            )
    except IntegrityError as error:
        raise JudgeConfigError(f"Invalid judge configuration {name!r}: {error}") from None


def _taken(name: str) -> str:
    return f"The name {name!r} is taken by an annotator or a judge."


def judge_config_name_check(*, name: str) -> str:
    """Return the name a new judge would get (stripped), or refuse a blank or taken one: its
    labels land under an annotator of the same name."""
    name = name.strip()
    if not name:
        raise JudgeConfigError("A judge configuration needs a name.", field="name")
    taken = [
        *Annotator.objects.filter(name__iexact=name).values_list("name", flat=True),
        *JudgeConfig.objects.filter(name__iexact=name).values_list("name", flat=True),
    ]
    if name in taken:
        raise JudgeConfigError(_taken(name), field="name")
    if taken:  # the same name in other capitals: two llm annotators that read alike
        raise JudgeConfigError(
            f"The name {name!r} is taken by an annotator or a judge ({taken[0]!r}); names that "
            "differ only in capitals are the same name.",
            field="name",
        )
    return name


def _judge_endpoint_create(*, name: str, backend: str, base_url: str, fields: dict) -> Endpoint:
    for field in ("concurrency", "requests_per_minute", "tokens_per_minute"):
        if field in fields and int(fields[field]) < 1:
            raise JudgeConfigError(f"{field.replace('_', ' ')} must be at least 1.")
    address = judge_base_url(backend=backend, base_url=base_url)
    settings_ = {**JUDGE_ENDPOINT_DEFAULTS, **fields}
    if not address and "api_key_env" not in fields:
        settings_["api_key_env"] = ""  # the fake needs no key (a named one is still checked)
    if not address:  # GPT-4's limits would pace the fake; limits given are kept
        for field in ("requests_per_minute", "tokens_per_minute"):
            if field not in fields:
                del settings_[field]
    endpoint_name = (
        name if not Endpoint.objects.filter(name__iexact=name).exists() else f"{name} (judge)"
    )
    try:
        return endpoint_create(name=endpoint_name, base_url=address, **settings_)
    except EngineError as error:
        raise JudgeConfigError(str(error)) from None


def judge_spends_money(*, config: JudgeConfig) -> bool:
    return config.endpoint.spends_money
