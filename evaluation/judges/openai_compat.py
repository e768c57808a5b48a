"""A judge on any OpenAI-compatible chat completions endpoint (OpenAI, Azure, vLLM, llama.cpp,
Ollama), through the official `openai` client."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from email.utils import parsedate_to_datetime

import openai
from django.utils import timezone

from evaluation.errors import JudgeRejectedError, JudgeTransientError
from evaluation.judges import BackendOptions, ChatReply, estimate_prompt_tokens, estimate_tokens


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """Return the wait a server asked for (retry-after-ms, or Retry-After seconds or date)."""
    if headers.get("retry-after-ms"):
        try:
            return max(0.0, float(headers["retry-after-ms"]) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, (parsedate_to_datetime(value) - timezone.now()).total_seconds())
    except (TypeError, ValueError):
        return None


class OpenAICompatibleBackend:
    spends_money = True

    def __init__(self, options: BackendOptions) -> None:
        self.options = options
        # max_retries=0: the caller retries, under the run's rate limits and retry budget.
        self.client = openai.OpenAI(
            base_url=options.base_url or None,
            api_key=options.api_key or "unused",
            timeout=options.timeout_seconds,
            max_retries=0,
        )

    def chat(self, messages: Sequence[Mapping[str, str]]) -> ChatReply:
        body = {
            "model": self.options.model,
            "messages": [{"role": m["role"], "content": m["content"]} for m in messages],
            "temperature": self.options.temperature,
            "max_tokens": self.options.max_tokens,
        }
        try:
            # The client's documented raw request (README: "undocumented requests"): the same
            # HTTP, auth, timeouts and error classes as chat.completions.create, without its
            # per-field walk over the messages and its response models, which cost more CPU than
            # the rest of a call and hold back a 32-thread run on the GIL.
            completion = self.client.post("/chat/completions", body=body, cast_to=object)
        except openai.APITimeoutError as error:
            raise JudgeTransientError(f"timeout: {error}") from error
        except openai.APIConnectionError as error:
            raise JudgeTransientError(f"connection error: {error}") from error
        except openai.APIStatusError as error:
            message = f"HTTP {error.status_code}: {error.message}"
            if error.status_code in (408, 429) or error.status_code >= 500:
                wait = retry_after_seconds(error.response.headers)
                raise JudgeTransientError(message, retry_after=wait) from error
            raise JudgeRejectedError(message) from error
        except openai.OpenAIError as error:  # a reply that is not a chat completion, say
            raise JudgeRejectedError(f"{type(error).__name__}: {error}") from error
        if not isinstance(completion, dict):
            raise JudgeRejectedError(f"Not a chat completion: {str(completion)[:200]}")
        choices = completion.get("choices") or [{}]
        text = ((choices[0] or {}).get("message") or {}).get("content") or ""
        usage = completion.get("usage") or {}
        if isinstance(usage.get("prompt_tokens"), int):
            return ChatReply(text, usage["prompt_tokens"], usage.get("completion_tokens") or 0)
        return ChatReply(
            text, estimate_prompt_tokens(messages), estimate_tokens(text), usage_estimated=True
        )
