"""Writes of judge configurations, and turning one into a ready back-end."""

from __future__ import annotations

import os

from django.conf import settings
from django.db import IntegrityError, transaction

from annotate.models import Annotator, AnnotatorKind
from evaluation.errors import JudgeConfigError
from evaluation.judges import BackendOptions, JudgeBackend, backend_class
from evaluation.models import JudgeConfig


@transaction.atomic
def judge_config_create(*, name: str, **fields) -> JudgeConfig:
    """Create a judge configuration and the `llm` annotator its labels land under (same name)."""
    name = name.strip()
    if not name:
        raise JudgeConfigError("A judge configuration needs a name.")
    for field in ("concurrency", "requests_per_minute", "tokens_per_minute"):
        if field in fields and int(fields[field]) < 1:
            raise JudgeConfigError(f"{field.replace('_', ' ')} must be at least 1.")
    backend_class(fields.get("backend", ""))  # fails early on an unknown back-end
    if (
        Annotator.objects.filter(name=name).exists()
        or JudgeConfig.objects.filter(name=name).exists()
    ):
        raise JudgeConfigError(f"The name {name!r} is taken by an annotator or a judge.")
    annotator = Annotator.objects.create(name=name, kind=AnnotatorKind.LLM, judge_config=name)
    try:
        with transaction.atomic():
            return JudgeConfig.objects.create(name=name, annotator=annotator, **fields)
    except IntegrityError as error:
        raise JudgeConfigError(f"Invalid judge configuration {name!r}: {error}") from None


def judge_backend_class(*, config: JudgeConfig) -> type[JudgeBackend]:
    return backend_class(config.backend)


def judge_backend_build(*, config: JudgeConfig) -> JudgeBackend:
    """Return the configured back-end, with the API key read from the named environment variable."""
    api_key = ""
    cls = judge_backend_class(config=config)
    if config.api_key_env and cls.spends_money:
        api_key = os.environ.get(config.api_key_env, "")
        if not api_key:
            raise JudgeConfigError(
                f"Judge {config.name!r}: set the environment variable {config.api_key_env} "
                "to the API key (or clear 'API key env' for a server that needs none)."
            )
    options = BackendOptions(
        base_url=config.base_url or settings.OPENAI_BASE_URL,
        api_key=api_key,
        model=config.model,
        temperature=config.temperature,
        max_tokens=config.max_tokens,
        timeout_seconds=config.timeout_seconds,
    )
    return cls(options)
