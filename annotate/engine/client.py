"""The one client layer: build a request body, send it (OpenAI-compatible HTTP or the offline
fake), retry what is worth retrying, and say what came back.

Nothing here touches the database: `services.calls` turns a `CallOutcome` into a stored
EngineCall. A transport never retries; `call_with_retries` does, under the shared limiter.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any, Protocol

import openai
from django.utils import timezone

from annotate.engine.errors import CallRejectedError, CallTransientError
from annotate.engine.limiter import RateLimiter

MAX_BACKOFF_SECONDS = 60.0
MAX_RETRY_AFTER_SECONDS = 300.0
# What the dry-run estimate and the spending cap assume a reply costs when max_tokens is not set.
DEFAULT_COMPLETION_ESTIMATE = 256

Message = Mapping[str, str]


@dataclass(frozen=True)
class TransportOptions:
    """What a transport needs from an Endpoint (transports never see models)."""

    base_url: str = ""
    api_key: str = ""
    timeout_seconds: float = 120.0


@dataclass(frozen=True)
class ChatReply:
    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str = "stop"
    usage_estimated: bool = False
    system_fingerprint: str = ""
    content_null: bool = False  # the message's content was null (text is then "")


class Transport(Protocol):
    """Send one request body; return the reply or raise CallTransientError/CallRejectedError."""

    def __init__(self, options: TransportOptions) -> None: ...

    def send(self, body: Mapping[str, Any]) -> ChatReply: ...


def estimate_tokens(text: str) -> int:
    """Estimate a token count as one per four characters (English text, OpenAI tokenizers)."""
    return max(1, math.ceil(len(text) / 4)) if text else 0


def estimate_prompt_tokens(messages: Sequence[Message]) -> int:
    """Estimate the prompt tokens of a chat request: its text plus ~4 tokens per message."""
    return sum(estimate_tokens(message.get("content") or "") + 4 for message in messages) + 3


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


def _reply_from_completion(completion: Any, body: Mapping[str, Any]) -> ChatReply:
    if not isinstance(completion, dict) or not isinstance(completion.get("choices"), list):
        raise CallRejectedError(f"Not a chat completion: {str(completion)[:200]}")
    choice = (completion["choices"] or [{}])[0] or {}
    content = (choice.get("message") or {}).get("content")
    text = content or ""
    null = content is None
    finish_reason = choice.get("finish_reason") or ""
    fingerprint = completion.get("system_fingerprint") or ""
    usage = completion.get("usage") or {}
    if isinstance(usage.get("prompt_tokens"), int):
        return ChatReply(
            text,
            usage["prompt_tokens"],
            usage.get("completion_tokens") or 0,
            finish_reason,
            False,
            fingerprint,
            null,
        )
    return ChatReply(
        text,
        estimate_prompt_tokens(body.get("messages") or []),
        estimate_tokens(text),
        finish_reason,
        True,
        fingerprint,
        null,
    )


class OpenAITransport:
    """Any OpenAI-compatible chat completions endpoint, through the official `openai` client."""

    def __init__(self, options: TransportOptions) -> None:
        # max_retries=0: call_with_retries retries, under the run's limiter and retry budget.
        self.client = openai.OpenAI(
            base_url=options.base_url or None,
            api_key=options.api_key or "unused",
            timeout=options.timeout_seconds,
            max_retries=0,
        )

    def send(self, body: Mapping[str, Any]) -> ChatReply:
        try:
            # The client's documented raw request (README: "undocumented requests"): the same
            # HTTP, auth, timeouts and error classes as chat.completions.create, without its
            # per-field walk over the messages and its response models, which cost more CPU than
            # the rest of a call and hold back a 32-thread run on the GIL. It also sends the body
            # exactly as built, which protocols that must match a reference script rely on.
            completion = self.client.post("/chat/completions", body=dict(body), cast_to=object)
        except openai.APITimeoutError as error:
            raise CallTransientError(f"timeout: {error}") from error
        except openai.APIConnectionError as error:
            raise CallTransientError(f"connection error: {error}") from error
        except openai.APIStatusError as error:
            message = f"HTTP {error.status_code}: {error.message}"
            if error.status_code in (408, 429) or error.status_code >= 500:
                wait = retry_after_seconds(error.response.headers)
                raise CallTransientError(message, retry_after=wait) from error
            raise CallRejectedError(message) from error
        except openai.OpenAIError as error:  # a reply that is not JSON, say
            raise CallRejectedError(f"{type(error).__name__}: {error}") from error
        return _reply_from_completion(completion, body)


_NUMBERED_QUESTION = re.compile(r"^(\d+)\. ", re.MULTILINE)
_FAKE_WORDS = [
    "clear",
    "concise",
    "answer",
    "follows",
    "the",
    "instruction",
    "closely",
    "with",
    "care",
    "and",
    "a",
    "short",
    "example",
    "covering",
    "each",
    "point",
    "asked",
    "while",
    "keeping",
    "the",
    "requested",
    "format",
    "tone",
    "and",
    "length",
]


def _verdict(text: str) -> str:
    """Say YES to about four questions in five, the same way every time for the same text."""
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return "NO" if digest[0] % 5 == 0 else "YES"


# A prompt that asks for one of two quoted words (the verbalizer's prompts).
_WORD_CHOICE = re.compile(r'(?:Reply with|followed by) "([^"]+)" or "([^"]+)"')


def _word_choice(text: str) -> str:
    """Pick one of the two quoted words, the first about two times in three, fixed per text; in
    the form "The answer is <word>." when the prompt asks for that."""
    first, second = _WORD_CHOICE.search(text).groups()
    word = second if hashlib.sha256(text.encode("utf-8")).digest()[0] % 3 == 0 else first
    if '"The answer is"' in text:
        return f"Let me think step by step. The text decides it. The answer is {word}."
    return word


_JUDGE_QUESTION = re.compile(r"(^|\n)Question:|YES or NO")


def _is_yes_no_question(text: str) -> bool:
    return bool(_JUDGE_QUESTION.search(text))


class FakeTransport:
    """A deterministic offline model for the demo and tests: no network, no money.

    Judge-style prompts (numbered "Questions:", or a YES/NO question) get YES or NO, about four
    in five YES, fixed per text; anything else gets a plausible reply built from the last user
    message, the same every time. `max_tokens` is honoured: a longer reply is cut and reported
    with finish_reason "length", as a real server does.
    """

    def __init__(self, options: TransportOptions) -> None:
        self.options = options

    def send(self, body: Mapping[str, Any]) -> ChatReply:
        messages = body.get("messages") or []
        last = (messages[-1].get("content") if messages else "") or ""
        if "\nQuestions:\n" in last:
            count = len(_NUMBERED_QUESTION.findall(last.split("\nQuestions:\n", 1)[1]))
            text = "\n".join(f"{n}. {_verdict(f'{last}#{n}')}" for n in range(1, count + 1))
        elif _is_yes_no_question(last):
            text = _verdict("\n".join(m.get("content") or "" for m in messages))
        elif _WORD_CHOICE.search(last):
            text = _word_choice(last)
        else:
            text = self._generate(last)
        finish_reason = "stop"
        limit = body.get("max_tokens")
        if isinstance(limit, int) and estimate_tokens(text) > limit:
            text, finish_reason = text[: max(1, limit * 4)], "length"
        return ChatReply(
            text,
            estimate_prompt_tokens(messages),
            estimate_tokens(text),
            finish_reason,
            False,
            "fake",
        )

    @staticmethod
    def _generate(prompt: str) -> str:
        """Return two or three sentences echoing the prompt's first line, fixed per prompt."""
        digest = hashlib.sha256(prompt.encode("utf-8")).digest()
        topic = (prompt.strip().splitlines() or [""])[0][:120].rstrip(" .:?!")
        words = [_FAKE_WORDS[b % len(_FAKE_WORDS)] for b in digest[:12]]
        sentences = [
            f"Here is a response to: {topic}." if topic else "Here is a response.",
            " ".join(words[:6]).capitalize() + ".",
            " ".join(words[6:]).capitalize() + ".",
        ]
        return " ".join(sentences[: 2 + digest[12] % 2])


def transport_for(options: TransportOptions) -> Transport:
    """Return the fake for a blank base URL, else the OpenAI-compatible transport."""
    return OpenAITransport(options) if options.base_url else FakeTransport(options)


@dataclass
class RetryPolicy:
    """How calls are retried: budget, backoff, the shared limiter, and injectable time."""

    limiter: RateLimiter
    max_retries: int = 5
    completion_estimate: int = DEFAULT_COMPLETION_ESTIMATE
    backoff_base: float = 1.0
    sleep: Callable[[float], None] = time.sleep
    rng: random.Random = field(default_factory=random.Random)

    def backoff(self, attempt: int, retry_after: float | None) -> float:
        """Return the wait before retry `attempt` (from 1): the server's, else exponential."""
        if retry_after is not None:
            return min(retry_after, MAX_RETRY_AFTER_SECONDS)
        ceiling = min(MAX_BACKOFF_SECONDS, self.backoff_base * 2 ** (attempt - 1))
        return ceiling * (0.5 + self.rng.random() / 2)


@dataclass(frozen=True)
class CallOutcome:
    """What one call (with its retries) came to: a reply, or the error that ended it."""

    reply: ChatReply | None
    error: str
    retries: int
    latency_ms: int


def call_with_retries(
    transport: Transport,
    policy: RetryPolicy,
    body: Mapping[str, Any],
    *,
    should_stop: Callable[[], bool] = lambda: False,
) -> CallOutcome:
    """Send `body`, retrying only transient errors, at most policy.max_retries times.

    A rejected request (400, 401...) ends at once with its message; a stop between retries ends
    with the last error. Latency is that of the final attempt.
    """
    estimate = estimate_prompt_tokens(body.get("messages") or []) + (
        body.get("max_tokens") or policy.completion_estimate
    )
    attempt = 0
    while True:
        policy.limiter.acquire(estimate)
        started = time.monotonic()
        try:
            reply = transport.send(body)
        except CallTransientError as error:
            latency = int((time.monotonic() - started) * 1000)
            attempt += 1
            if attempt > policy.max_retries or should_stop():
                message = f"gave up after {attempt - 1} retries: {error}"
                return CallOutcome(None, message, attempt - 1, latency)
            policy.sleep(policy.backoff(attempt, error.retry_after))
            continue
        except CallRejectedError as error:
            return CallOutcome(None, str(error), attempt, int((time.monotonic() - started) * 1000))
        latency = int((time.monotonic() - started) * 1000)
        policy.limiter.settle(
            estimated=estimate, actual=reply.prompt_tokens + reply.completion_tokens
        )
        return CallOutcome(reply, "", attempt, latency)
