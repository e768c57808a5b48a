"""LLM judges: one Protocol, one module per back-end, chosen per configuration or in settings.

A back-end sends one list of chat messages and returns the reply text with its token usage. It
never retries: retries, rate limits and concurrency belong to the caller (evaluation.judges.
conversation), which knows the run's budget.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from django.conf import settings
from django.utils.module_loading import import_string

from evaluation.errors import JudgeConfigError

BACKENDS = {
    "openai": "evaluation.judges.openai_compat.OpenAICompatibleBackend",
    "fake": "evaluation.judges.fake.FakeBackend",
}


@dataclass(frozen=True)
class BackendOptions:
    """What a back-end needs to know, copied out of a JudgeConfig (judges never see models)."""

    base_url: str = ""
    api_key: str = ""
    model: str = "gpt-4-0314"
    temperature: float = 0.0
    max_tokens: int = 16
    timeout_seconds: float = 60.0


@dataclass(frozen=True)
class ChatReply:
    text: str
    prompt_tokens: int
    completion_tokens: int
    usage_estimated: bool = False


class JudgeBackend(Protocol):
    """Send chat messages to a model; raise JudgeTransientError or JudgeRejectedError on failure."""

    spends_money: bool

    def __init__(self, options: BackendOptions) -> None: ...

    def chat(self, messages: Sequence[Mapping[str, str]]) -> ChatReply: ...


def backend_path(name: str) -> str:
    """Return the dotted path for a back-end name; blank means the JUDGE_BACKEND setting."""
    name = name or settings.JUDGE_BACKEND
    path = BACKENDS.get(name, name)
    if "." not in path:
        raise JudgeConfigError(
            f"Unknown judge back-end {name!r}: expected one of {', '.join(BACKENDS)} "
            "or a dotted path."
        )
    return path


def backend_class(name: str) -> type[JudgeBackend]:
    try:
        return import_string(backend_path(name))
    except ImportError as error:
        raise JudgeConfigError(f"Cannot load judge back-end {name!r}: {error}") from None


def estimate_tokens(text: str) -> int:
    """Estimate a token count as one per four characters (English text, OpenAI tokenizers)."""
    return max(1, math.ceil(len(text) / 4)) if text else 0


def estimate_prompt_tokens(messages: Sequence[Mapping[str, str]]) -> int:
    """Estimate the prompt tokens of a chat request: its text plus ~4 tokens per message."""
    return sum(estimate_tokens(message["content"]) + 4 for message in messages) + 3
