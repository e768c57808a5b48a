"""The one client layer: build a request body, send it (OpenAI-compatible HTTP or the offline
fake), retry what is worth retrying, and say what came back.

Nothing here touches the database: `services.calls` turns a `CallOutcome` into a stored
EngineCall. A transport never retries; `call_with_retries` does, under the shared limiter.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import random
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from json.encoder import encode_basestring, encode_basestring_ascii
from typing import Any, Protocol

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


class JsonText(str):
    """A text that keeps its JSON string form, so a request body holding it is put together
    from that form instead of scanning the text again (`RequestBody`).

    A 10-shot judge prompt is 61 kB, 55 kB of it examples that other prompts of the run share;
    encoding every body whole cost 0.23 ms a call under the GIL that 32 workers share. Make
    the shared pieces JsonText (their form is worked out once, on first use), then `join` them
    or `fill` a template with them: the form of the result comes from theirs. The form is kept
    as UTF-8, the bytes sent: a prompt whose template has one non-ASCII character is a
    two-byte-a-character str, which encoding again cost 55 us a call. The bytes sent are the
    same as json.dumps of the plain text, encoded, would give.
    """

    _escaped: bytes | None = None

    @property
    def escaped(self) -> bytes:
        """The JSON string form without its quotes, in UTF-8 (as `_json_bytes` writes it)."""
        if self._escaped is None:
            self._escaped = _escaped_utf8(self)
        return self._escaped

    @classmethod
    def _made(cls, text: str, escaped: bytes) -> JsonText:
        made = cls(text)
        made._escaped = escaped
        return made

    @classmethod
    def join(cls, pieces: Sequence[str]) -> JsonText:
        """The pieces one after the other, as "".join(pieces)."""
        pieces = [piece if isinstance(piece, JsonText) else cls(piece) for piece in pieces]
        return cls._made("".join(pieces), b"".join(piece.escaped for piece in pieces))

    @classmethod
    def fill(cls, template: str, values: Mapping[str, str]) -> JsonText:
        """The template with each `{name}` replaced by its value, one name after the other in
        the values' order (text filled in earlier is searched again, as a chain of
        str.replace does).

        JSON escapes one character at a time, and a `{name}` never needs escaping nor can
        start inside an escape (`\\n`, `\\u001f`...), so the escaped result is the escaped
        pieces between the marks and the escaped values, in UTF-8 too. Without a brace in the
        values nor outside the marks, no replacement can make a new mark: the result is then
        put together in one join (`_template_cuts`); else the chain runs.
        """
        cuts = _template_cuts(template, tuple(values))
        if cuts is not None and not _braces_in(values, cuts.names):
            forms = {
                name: value.escaped if isinstance(value, JsonText) else _escaped_utf8(value)
                for name in set(cuts.names)
                for value in (values[name],)
            }
            text, escaped = [cuts.literals[0]], [cuts.escaped[0]]
            for name, literal, form in zip(
                cuts.names, cuts.literals[1:], cuts.escaped[1:], strict=True
            ):
                text += (values[name], literal)
                escaped += (forms[name], form)
            return cls._made("".join(text), b"".join(escaped))
        text, escaped = template, _template_escaped(template)
        for name, value in values.items():
            mark = "{" + name + "}"
            if mark not in text:  # nothing to replace (a system message): no value to escape
                continue
            if _escaped_utf8(mark) != mark.encode():  # never for a placeholder name
                return cls(_fill_plain(template, values))
            piece = value if isinstance(value, JsonText) else cls(value)
            text, escaped = text.replace(mark, piece), escaped.replace(mark.encode(), piece.escaped)
        return cls._made(text, escaped)


@dataclass(frozen=True)
class _Cuts:
    """A template cut at its `{name}` marks: the literal pieces around them (one more than
    the marks), their JSON forms, and the name of each mark in order."""

    literals: tuple[str, ...]
    escaped: tuple[bytes, ...]
    names: tuple[str, ...]


@functools.lru_cache(maxsize=256)
def _template_cuts(template: str, names: tuple[str, ...]) -> _Cuts | None:
    """The template cut at the marks of these names, or None when filling it in one pass could
    differ from the chain of replacements: a brace in a literal piece (a value filled in
    next to it could complete a mark the chain would then replace) or in a name. A run
    fills the same few prompt templates for every call."""
    present = [name for name in names if "{" + name + "}" in template]
    if any("{" in name or "}" in name for name in present):
        return None
    if present:
        marks = "|".join(re.escape(name) for name in sorted(set(present), key=len, reverse=True))
        parts = re.split(r"\{(" + marks + r")\}", template)
    else:
        parts = [template]
    literals, cut_names = tuple(parts[0::2]), tuple(parts[1::2])
    if any("{" in literal or "}" in literal for literal in literals):
        return None
    return _Cuts(literals, tuple(_escaped_utf8(literal) for literal in literals), cut_names)


def _braces_in(values: Mapping[str, str], names: Sequence[str]) -> bool:
    return any("{" in values[name] or "}" in values[name] for name in set(names))


def fill_text(template: str, values: Mapping[str, str]) -> str:
    """The template with each `{name}` replaced by its value, one name after the other in the
    values' order, as a chain of str.replace: in one join when that gives the same text
    (`_template_cuts`)."""
    cuts = _template_cuts(template, tuple(values))
    if cuts is None or _braces_in(values, cuts.names):
        return _fill_plain(template, values)
    text = [cuts.literals[0]]
    for name, literal in zip(cuts.names, cuts.literals[1:], strict=True):
        text += (values[name], literal)
    return "".join(text)


def _escaped_utf8(text: str) -> bytes:
    """json.dumps(text, ensure_ascii=False) without its quotes, in UTF-8. An ASCII text's form
    is the same with ensure_ascii, whose escaper takes half the time, unless it holds a DEL
    (which only ensure_ascii writes as an escape)."""
    ascii_form = text.isascii() and "\x7f" not in text
    escape = encode_basestring_ascii if ascii_form else encode_basestring
    return escape(text)[1:-1].encode()


@functools.lru_cache(maxsize=256)
def _template_escaped(template: str) -> bytes:
    # A run fills the same few prompt templates once per call, from 32 threads.
    return JsonText(template).escaped


def _fill_plain(template: str, values: Mapping[str, str]) -> str:
    for name, value in values.items():
        template = template.replace("{" + name + "}", value)
    return template


class RequestBody(dict):
    """A request body that is turned into JSON once: the bytes sent are the text stored.

    A 10-shot judge prompt is 60 kB; encoding it once for the wire and again for the database
    cost as much CPU as the rest of the call, in threads that share one GIL. Build a body, then
    leave it unchanged (the JSON is cached on first use). The database is given the same UTF-8
    bytes (`cached_json`), not a text that its driver would encode again.
    """

    _json: bytes | None = None

    def json_bytes(self) -> bytes:
        if self._json is None:
            self._json = _json_bytes(self)
        return self._json

    def cached_json(self) -> bytes | None:
        """The JSON (UTF-8) if it was made already (by sending the body), else None."""
        return self._json


def body_json(body: Mapping[str, Any]) -> bytes:
    """Encode a body as the `openai` client does (compact, UTF-8, no NaN): the same bytes."""
    if isinstance(body, RequestBody) and body._json is not None:
        return body._json
    return _json_bytes(body)


def _json_bytes(value: Any) -> bytes:
    """JSON as the `openai` client writes it (compact, UTF-8, no NaN); each JsonText inside a
    body's dicts and lists is written from its kept form.

    The pieces are joined once at the end: joining at every level of the body (the content,
    its message, the list, the body) copied a 60 kB prompt five times, 0.1 ms a call.
    """
    parts: list[bytes] = []
    _json_parts(value, parts)
    return b"".join(parts)


def _json_parts(value: Any, parts: list[bytes]) -> None:
    if isinstance(value, JsonText):
        parts += (b'"', value.escaped, b'"')
    elif isinstance(value, str):
        parts += (b'"', _escaped_utf8(value), b'"')  # json.dumps(ensure_ascii=False)'s form
    elif (
        isinstance(value, dict)
        and _holds_json_text(value)
        and all(isinstance(key, str) for key in value)
    ):
        parts.append(b"{")
        for n, (key, item) in enumerate(value.items()):
            parts += (b"," if n else b"", b'"', _escaped_utf8(key), b'":')
            _json_parts(item, parts)
        parts.append(b"}")
    elif isinstance(value, list) and _holds_json_text(value):
        parts.append(b"[")
        for n, item in enumerate(value):
            parts.append(b"," if n else b"")
            _json_parts(item, parts)
        parts.append(b"]")
    else:
        dumped = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        parts.append(dumped.encode())


def _holds_json_text(value: Any) -> bool:
    """Whether a dict or list holds a JsonText (at any depth: a body's messages' contents)."""
    items = value.values() if isinstance(value, dict) else value
    return any(
        isinstance(item, JsonText) or (isinstance(item, dict | list) and _holds_json_text(item))
        for item in items
    )


def _content(body: Mapping[str, Any]) -> bytes:
    return body.json_bytes() if isinstance(body, RequestBody) else body_json(body)


@dataclass(frozen=True)
class ChatReply:
    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str = "stop"
    usage_estimated: bool = False
    system_fingerprint: str = ""
    content_null: bool = False  # the message's content was null (text is then "")


@dataclass(frozen=True)
class EmbeddingReply:
    """The vectors of an embeddings request, one per input text, in the inputs' order."""

    vectors: list[list[float]]
    prompt_tokens: int
    usage_estimated: bool = False
    completion_tokens: int = 0  # embeddings have none; here so the limiter settles alike


# Told the reply's text so far, each time a streamed reply grows (a retry starts again at "").
TextCallback = Callable[[str], None]


class Transport(Protocol):
    """Send one request body; return the reply or raise CallTransientError/CallRejectedError.

    `send` posts to /chat/completions (streamed when the body says "stream": true, telling
    `on_text` the text so far), `embed` to /embeddings.
    """

    def __init__(self, options: TransportOptions) -> None: ...

    def send(self, body: Mapping[str, Any], on_text: TextCallback | None = None) -> ChatReply: ...

    def embed(self, body: Mapping[str, Any]) -> EmbeddingReply: ...


def estimate_tokens(text: str) -> int:
    """Estimate a token count as one per four characters (English text, OpenAI tokenizers)."""
    return max(1, math.ceil(len(text) / 4)) if text else 0


def estimate_prompt_tokens(messages: Sequence[Message]) -> int:
    """Estimate the prompt tokens of a chat request: its text plus ~4 tokens per message."""
    return sum(estimate_tokens(message.get("content") or "") + 4 for message in messages) + 3


def estimate_input_tokens(texts: str | Sequence[str]) -> int:
    """Estimate the tokens of an embeddings request's input (one text or a list)."""
    return sum(estimate_tokens(text) for text in ([texts] if isinstance(texts, str) else texts))


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


def _reply_from_stream(
    chunks: Iterator[Any], body: Mapping[str, Any], on_text: TextCallback | None
) -> ChatReply:
    """Add up a streamed completion's deltas; usage comes from the final chunk
    (stream_options.include_usage). A stream that ends without a finish_reason is broken."""
    text, finish_reason, fingerprint, usage = "", "", "", None
    for chunk in chunks:
        if not isinstance(chunk, dict):
            raise CallRejectedError(f"Not a chat completion chunk: {str(chunk)[:200]}")
        fingerprint = chunk.get("system_fingerprint") or fingerprint
        if isinstance(chunk.get("usage"), dict):
            usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            if (choice or {}).get("index", 0) != 0:
                continue
            delta = (choice.get("delta") or {}).get("content")
            if delta:
                text += delta
                if on_text is not None:
                    on_text(text)
            finish_reason = choice.get("finish_reason") or finish_reason
    if not finish_reason:
        raise CallTransientError("the stream ended before the reply was complete")
    if usage and isinstance(usage.get("prompt_tokens"), int):
        prompt, completion = usage["prompt_tokens"], usage.get("completion_tokens") or 0
        return ChatReply(text, prompt, completion, finish_reason, False, fingerprint)
    prompt = estimate_prompt_tokens(body.get("messages") or [])
    return ChatReply(text, prompt, estimate_tokens(text), finish_reason, True, fingerprint)


def _reply_from_embeddings(reply: Any, body: Mapping[str, Any]) -> EmbeddingReply:
    texts = body.get("input") or []
    count = 1 if isinstance(texts, str) else len(texts)
    data = reply.get("data") if isinstance(reply, dict) else None
    if not isinstance(data, list) or len(data) != count:
        raise CallRejectedError(f"Not {count} embeddings: {str(reply)[:200]}")
    try:
        ordered = sorted(data, key=lambda item: item["index"])
        vectors = [[float(x) for x in item["embedding"]] for item in ordered]
    except (KeyError, TypeError, ValueError) as error:
        raise CallRejectedError(f"Not an embeddings reply ({error}): {str(reply)[:200]}") from None
    usage = reply.get("usage") or {}
    if isinstance(usage.get("prompt_tokens"), int):
        return EmbeddingReply(vectors, usage["prompt_tokens"])
    return EmbeddingReply(vectors, estimate_input_tokens(texts), usage_estimated=True)


REDACTED_KEY = "[API key]"


# Statuses that say the request was not processed: rate limited, timed out waiting for the
# request, overloaded. Any other 5xx may come after the model ran (a gateway giving up on it).
_NOT_PROCESSED = (408, 429, 503)


def _sent(error: BaseException) -> bool:
    """Whether the request behind an `openai` timeout or connection error left: anything but a
    failure to connect may have reached the server."""
    import httpx2 as httpx  # the `openai` client's HTTP library, imported with it (OpenAITransport)

    # Raised before the request was sent: the provider cannot have processed (nor billed) it.
    not_sent = (
        httpx.ConnectError,
        httpx.ConnectTimeout,
        httpx.PoolTimeout,
        httpx.UnsupportedProtocol,
    )
    return not isinstance(error.__cause__, not_sent)


@contextmanager
def _api_errors(api_key: str = "") -> Iterator[None]:
    """Turn the `openai` client's errors into ours: transient (retried) or rejected, transient
    ones marked `billed` when the provider may have processed the request; and blank the API
    key out of any call error's message, ours included (a reply that could not be read): some
    servers and proxies echo the key they were sent ("invalid key sk-…", a reply dumped whole),
    and the message is stored on the call, shown on run pages and in the API, and logged."""
    import httpx2 as httpx  # the HTTP library of this `openai` client (its errors are the causes)
    import openai  # on first use, not with this module: see OpenAITransport

    try:
        try:
            yield
        except openai.APITimeoutError as error:
            raise CallTransientError(f"timeout: {error}", billed=_sent(error)) from error
        except openai.APIConnectionError as error:
            raise CallTransientError(f"connection error: {error}", billed=_sent(error)) from error
        except openai.APIStatusError as error:
            message = f"HTTP {error.status_code}: {error.message}"
            if error.status_code in (408, 429) or error.status_code >= 500:
                wait = retry_after_seconds(error.response.headers)
                billed = error.status_code not in _NOT_PROCESSED
                raise CallTransientError(message, retry_after=wait, billed=billed) from error
            raise CallRejectedError(message) from error
        except openai.APIError as error:  # an error event in the middle of a stream
            raise CallTransientError(f"the stream failed: {error.message}", billed=True) from error
        except openai.OpenAIError as error:  # a reply that is not JSON, say
            raise CallRejectedError(f"{type(error).__name__}: {error}") from error
        except httpx.TimeoutException as error:  # reading a stream the client does not wrap
            raise CallTransientError(f"timeout: {error}", billed=True) from error
        except httpx.TransportError as error:  # a stream's connection broken half-way
            raise CallTransientError(f"connection error: {error}", billed=True) from error
    except CallTransientError as error:
        if not api_key or api_key not in str(error):
            raise
        redacted = str(error).replace(api_key, REDACTED_KEY)
        raise CallTransientError(
            redacted,
            retry_after=error.retry_after,
            billed=error.billed,
            completion_tokens=error.completion_tokens,
        ) from None
    except CallRejectedError as error:
        if not api_key or api_key not in str(error):
            raise
        raise CallRejectedError(str(error).replace(api_key, REDACTED_KEY)) from None


class OpenAITransport:
    """Any OpenAI-compatible chat completions endpoint, through the official `openai` client.

    The `openai` package (and its HTTP library) is imported when the first transport is made,
    not with this module: importing it costs about 0.9 s of CPU, which every process start
    (each management command, gunicorn and Celery worker) paid through the engine's services
    and the admin, though most never call a model. tests/config/test_startup_imports.py keeps it
    out of Django's start-up.
    """

    def __init__(self, options: TransportOptions) -> None:
        import openai

        self.api_key = options.api_key
        self._stream_cls = openai.Stream[object]
        # max_retries=0: call_with_retries retries, under the run's limiter and retry budget.
        self.client = openai.OpenAI(
            base_url=options.base_url or None,
            api_key=options.api_key or "unused",
            timeout=options.timeout_seconds,
            max_retries=0,
        )

    def send(self, body: Mapping[str, Any], on_text: TextCallback | None = None) -> ChatReply:
        # The client's documented raw request (README: "undocumented requests"): the same
        # HTTP, auth, timeouts and error classes as chat.completions.create, without its
        # per-field walk over the messages and its response models, which cost more CPU than
        # the rest of a call and hold back a 32-thread run on the GIL. It also sends the body
        # exactly as built, which protocols that must match a reference script rely on.
        with _api_errors(self.api_key):
            if not body.get("stream"):
                completion = self.client.post(
                    "/chat/completions", content=_content(body), cast_to=object
                )
                return _reply_from_completion(completion, body)
            stream = self.client.post(
                "/chat/completions",
                content=_content(body),
                cast_to=object,
                stream=True,
                stream_cls=self._stream_cls,
            )
            received = [""]  # the text so far, for what a stream broken half-way cost

            def told(text: str) -> None:
                received[0] = text
                if on_text is not None:
                    on_text(text)

            try:
                with _api_errors(self.api_key), stream:
                    return _reply_from_stream(iter(stream), body, told)
            except CallTransientError as error:  # the server had answered: it ran the model
                error.billed = True
                error.completion_tokens = estimate_tokens(received[0])
                raise

    def embed(self, body: Mapping[str, Any]) -> EmbeddingReply:
        # The raw request again: embeddings.create would ask for base64 unless told otherwise,
        # so the body sent would not be the one stored.
        with _api_errors(self.api_key):
            reply = self.client.post("/embeddings", content=_content(body), cast_to=object)
            return _reply_from_embeddings(reply, body)


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


def _model_digest(model: str, text: str) -> bytes:
    """SHA-256 of the text as the fake model named `model` reads it: each model its own answers,
    the same every time, so two fake systems or judges compared in a table differ as two models
    would (they gave identical answers, whatever the model, before)."""
    return hashlib.sha256(f"{model}\n{text}".encode()).digest()


def _verdict(text: str, model: str) -> str:
    """Say YES to about four questions in five, the same way every time for the same text."""
    return "NO" if _model_digest(model, text)[0] % 5 == 0 else "YES"


# A prompt that asks for one of two quoted words (the verbalizer's prompts).
_WORD_CHOICE = re.compile(r'(?:Reply with|followed by) "([^"]+)" or "([^"]+)"')


def _word_choice(text: str, model: str) -> str:
    """Pick one of the two quoted words, the first about two times in three, fixed per text; in
    the form "The answer is <word>." when the prompt asks for that."""
    first, second = _WORD_CHOICE.search(text).groups()
    word = second if _model_digest(model, text)[0] % 3 == 0 else first
    return _word_reply(text, word)


def _word_reply(text: str, word: str) -> str:
    if _asks_chain_of_thought(text):
        return f"Let me think step by step. The text decides it. The answer is {word}."
    return word


def _asks_chain_of_thought(text: str) -> bool:
    return '"The answer is"' in text


# A request key only the offline fake reads: what a protocol tells the simulated model it would
# know if it read the text, so that a fake's accuracy means something. `endpoint_request_body`
# drops it for an endpoint with an address, so no server ever sees it. The verbalizer sends
# {"expected": the word the golden label asks for, "group": natural | neutral | unnatural,
# "item": what identifies the classified text across mappings and modes}.
FAKE_HINT = "fake_hint"
_MODEL_SIZE = re.compile(r"(\d+(?:\.\d+)?)b\b", re.IGNORECASE)


def fake_model_skill(model: str) -> float:
    """Return how often (0.1 to 0.9) the offline fake called `model` follows label words that
    contradict its priors: from the size its name states ("fake-70b": 70 billion parameters),
    0.15 + 0.25 * log10(billions) give or take 0.05 fixed by the name, since larger models
    follow flipped labels better (Li et al. 2023, Figure 2); without a size, fixed by the name."""
    if match := _MODEL_SIZE.search(model):
        billions = max(float(match.group(1)), 0.01)
        skill = 0.15 + 0.25 * math.log10(billions) + (_fraction("skill", model) - 0.5) / 10
        return min(0.9, max(0.1, skill))
    return 0.1 + 0.8 * _fraction("skill", model)


def _fraction(purpose: str, key: str) -> float:
    """A number in [0, 1), the same every time for the same purpose and key."""
    digest = hashlib.sha256(f"{purpose}|{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def _classification_reply(text: str, model: str, hint: Mapping[str, Any]) -> str | None:
    """Answer a two-word classification prompt as a model of `fake_model_skill`; None when the
    hint does not fit the prompt (its word is not one of the two quoted).

    The model reads an item right with probability 0.75 + 0.2 * skill, whatever the mapping.
    Natural label words: it answers what it read. Unnatural (flipped): it follows the
    instruction with probability skill (+0.1 when asked to think step by step), else answers by
    its priors, the other word. Neutral: it follows with probability (1 + skill) / 2, else picks
    one of the two words at random. How hard an item is to read and a prompt to follow is fixed
    per item and prompt, the same for every model, so a more skilled model reads and follows
    wherever a less skilled one does, as with real models (hard items are hard for all).
    """
    words = _WORD_CHOICE.search(text).groups()
    expected, group = hint.get("expected"), hint.get("group")
    if expected not in words or group not in ("natural", "neutral", "unnatural"):
        return None
    other = words[1] if expected == words[0] else words[0]
    skill = fake_model_skill(model)
    reads_right = _fraction("read", str(hint.get("item", text))) < 0.75 + 0.2 * skill
    read, misread = (expected, other) if reads_right else (other, expected)
    follow = {
        "natural": 1.0,
        "neutral": (1 + skill) / 2,
        "unnatural": skill + (0.1 if _asks_chain_of_thought(text) else 0.0),
    }[group]
    if _fraction("follow", text) < follow:
        word = read
    elif group == "unnatural":
        word = misread
    else:
        word = words[0] if _fraction("guess", f"{model}|{text}") < 0.5 else words[1]
    return _word_reply(text, word)


_RATING_CHOICE = "one of the two ratings: good, or bad"  # KIWI's rating judge (appendix A.5)
_CATEGORY_LINE = re.compile(r"^# Category: (.+)$", re.M)


def _category_choice(text: str, model: str) -> str:
    """Pick one of the categories the prompt's examples name (KIWI Tables 10/11), fixed per
    text; "others" when the prompt names none."""
    categories = sorted({c.strip() for c in _CATEGORY_LINE.findall(text) if c.strip()})
    if not categories:
        return "others"
    return categories[_model_digest(model, text)[0] % len(categories)]


# KIWI's answer prompts (annotate/revision/prompts): the initial answer, the summary of the
# passages found for an information-seeking instruction, and the revision. The fake answers them
# as annotate.revision.llm's fake model does, so a study system on an endpoint without an address
# revises like a system with no endpoint; read as a judge prompt, the initial one ("Question:")
# was answered YES or NO.
_KIWI_NEXT_LABEL = (
    r"(?=^(?:Original question:|Previous answer:|Feedback:|Extra information related to the "
    r"feedback:|Answer the original question|Generate an answer|Question:|Answer:)|\Z)"
)
_KIWI_INITIAL = re.compile(r"\ADocuments:\n.*^Question:.*^Answer:\s*\Z", re.M | re.S)
_KIWI_SUMMARY_END = "Generate an answer to the feedback."


def kiwi_prompt_field(text: str, label: str) -> str:
    """Return what follows `label:` in a KIWI prompt, up to the next label ("" if absent)."""
    match = re.search(rf"^{label}:\s?(.*?){_KIWI_NEXT_LABEL}", text, re.M | re.S)
    return match.group(1).strip() if match else ""


def kiwi_fake_initial(question: str) -> str:
    return f"Answer to: {question} The documents discuss this [0]."


def kiwi_fake_summary(feedback: str) -> str:
    return f"Relevant to '{feedback}': the passages add one finding [1]."


def kiwi_fake_revision(previous_answer: str, feedback: str) -> str:
    """The previous answer kept whole, and the instruction it was revised for."""
    return f"{previous_answer}\nRevised for: {feedback}"


def _kiwi_reply(prompt: str) -> str | None:
    """Return the fake's reply to one of KIWI's answer prompts, None to any other prompt."""
    if prompt.startswith("Original question:") and "\nFeedback:" in prompt:
        previous = kiwi_prompt_field(prompt, "Previous answer")
        return kiwi_fake_revision(previous, kiwi_prompt_field(prompt, "Feedback"))
    if prompt.startswith("Documents:") and prompt.rstrip().endswith(_KIWI_SUMMARY_END):
        return kiwi_fake_summary(kiwi_prompt_field(prompt, "Feedback"))
    if _KIWI_INITIAL.search(prompt):
        return kiwi_fake_initial(kiwi_prompt_field(prompt, "Question"))
    return None


_JUDGE_QUESTION = re.compile(r"(^|\n)Question:|YES or NO")


def _is_yes_no_question(text: str) -> bool:
    return bool(_JUDGE_QUESTION.search(text))


class FakeTransport:
    """A deterministic offline model for the demo and tests: no network, no money.

    A two-word classification prompt sent with a FAKE_HINT (the verbalizer's) is answered as a
    model of its own skill would (`fake_model_skill`: from the request's model name), so two
    fake models differ and both stay the same from run to run. KIWI's answer prompts get the
    revision fake's answers (the previous answer kept, with the
    instruction it was revised for); judge-style prompts (numbered "Questions:", or a YES/NO
    question) get YES or NO, about four in five YES; KIWI's rating judge gets good or bad
    (about three in five good) and its classifiers one of the categories their examples name;
    anything else gets a plausible reply built from the last user message. Each of these is
    fixed per text and the request's model (`_model_digest`): two fake models answer apart,
    each the same every time. `max_tokens` is
    honoured: a longer reply is cut and reported with finish_reason "length", as a real server
    does.
    """

    def __init__(self, options: TransportOptions) -> None:
        self.options = options

    def send(self, body: Mapping[str, Any], on_text: TextCallback | None = None) -> ChatReply:
        messages = body.get("messages") or []
        last = (messages[-1].get("content") if messages else "") or ""
        model = str(body.get("model") or "")
        if (classified := self._classified(body, last)) is not None:
            text = classified
        elif (kiwi := _kiwi_reply(last)) is not None:
            text = kiwi
        elif "\nQuestions:\n" in last:
            count = len(_NUMBERED_QUESTION.findall(last.split("\nQuestions:\n", 1)[1]))
            text = "\n".join(f"{n}. {_verdict(f'{last}#{n}', model)}" for n in range(1, count + 1))
        elif _is_yes_no_question(last):
            text = _verdict("\n".join(m.get("content") or "" for m in messages), model)
        elif _WORD_CHOICE.search(last):
            text = _word_choice(last, model)
        elif _RATING_CHOICE in last:
            text = "good" if _model_digest(model, last)[0] % 5 < 3 else "bad"
        elif last.rstrip().endswith("# Category:"):
            text = _category_choice(last, model)
        else:
            text = self._generate(last, model)
        finish_reason = "stop"
        limit = body.get("max_tokens")
        if isinstance(limit, int) and estimate_tokens(text) > limit:
            text, finish_reason = text[: max(1, limit * 4)], "length"
        if body.get("stream") and on_text is not None:
            for end in _word_ends(text):  # streamed a word at a time, as a server would
                on_text(text[:end])
        return ChatReply(
            text,
            estimate_prompt_tokens(messages),
            estimate_tokens(text),
            finish_reason,
            False,
            "fake",
        )

    def embed(self, body: Mapping[str, Any]) -> EmbeddingReply:
        texts = body.get("input") or []
        texts = [texts] if isinstance(texts, str) else list(texts)
        return EmbeddingReply([fake_embedding(t) for t in texts], estimate_input_tokens(texts))

    @staticmethod
    def _classified(body: Mapping[str, Any], prompt: str) -> str | None:
        """The simulated model's answer to a two-word prompt sent with a FAKE_HINT, else None."""
        hint = body.get(FAKE_HINT)
        if not isinstance(hint, Mapping) or not _WORD_CHOICE.search(prompt):
            return None
        return _classification_reply(prompt, str(body.get("model") or ""), hint)

    @staticmethod
    def _generate(prompt: str, model: str) -> str:
        """Return two or three sentences echoing the prompt's first line, fixed per prompt and
        model."""
        digest = _model_digest(model, prompt)
        topic = (prompt.strip().splitlines() or [""])[0][:120].rstrip(" .:?!")
        words = [_FAKE_WORDS[b % len(_FAKE_WORDS)] for b in digest[:12]]
        sentences = [
            f"Here is a response to: {topic}." if topic else "Here is a response.",
            " ".join(words[:6]).capitalize() + ".",
            " ".join(words[6:]).capitalize() + ".",
        ]
        return " ".join(sentences[: 2 + digest[12] % 2])


def _word_ends(text: str) -> list[int]:
    """Return where each word of the text ends (with its leading space), the last at len(text)."""
    ends = [match.end() for match in re.finditer(r"\s*\S+", text)]
    return ends[:-1] + [len(text)] if ends else [len(text)]


def fake_embedding(text: str, size: int = 64) -> list[float]:
    """Return the fake back-end's embedding: a bag of words hashed into `size` buckets."""
    vector = [0.0] * size
    for word in re.findall(r"\w+", text.lower()):
        digest = hashlib.sha256(word.encode()).digest()[:4]
        vector[int.from_bytes(digest, "big") % size] += 1.0
    return vector


_transports: dict[TransportOptions, OpenAITransport] = {}
_transports_lock = threading.Lock()


def transport_for(options: TransportOptions) -> Transport:
    """Return the fake for a blank base URL, else this process's OpenAI-compatible transport
    for these options (one `openai` client, thread-safe, kept: making one loads the TLS
    certificates, 50-150 ms, which a chat in a revision session would pay on every call)."""
    if not options.base_url:
        return FakeTransport(options)
    with _transports_lock:
        if options not in _transports:
            _transports[options] = OpenAITransport(options)
        return _transports[options]


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


# Told the tokens (prompt, completion) of a failed attempt the provider may have billed, before
# any retry; returns False when no further attempt may be sent (the run's spending cap).
BilledCallback = Callable[[int, int], bool]


@dataclass(frozen=True)
class CallOutcome:
    """What one call (with its retries) came to: a reply, or the error that ended it.

    `billed`: the estimated (prompt, completion) tokens of each failed attempt the provider may
    have billed (`CallTransientError.billed`), the final one included when it failed so.
    """

    reply: ChatReply | EmbeddingReply | None
    error: str
    retries: int
    latency_ms: int
    billed: tuple[tuple[int, int], ...] = ()


def call_with_retries(
    transport: Transport,
    policy: RetryPolicy,
    body: Mapping[str, Any],
    *,
    should_stop: Callable[[], bool] = lambda: False,
    on_text: TextCallback | None = None,
    embeddings: bool = False,
    on_billed: BilledCallback | None = None,
) -> CallOutcome:
    """Send `body` (chat, or embeddings), retrying only transient errors, at most
    policy.max_retries times.

    A rejected request (400, 401...) ends at once with its message; a stop between retries ends
    with the last error. Latency is that of the final attempt. A streamed chat reply tells
    `on_text` its text so far; a broken stream is retried like a broken connection. A failed
    attempt that may have been billed is estimated as its prompt plus the larger of the reply's
    tokens received and the completion the limiter assumed (max_tokens, else the policy's
    estimate), kept in `billed` and told to `on_billed` first, which may refuse a retry.
    """
    if embeddings:
        prompt = estimate_input_tokens(body.get("input") or [])
        completion = 0
        send: Callable[[Mapping[str, Any]], ChatReply | EmbeddingReply] = transport.embed
    else:
        prompt = estimate_prompt_tokens(body.get("messages") or [])
        completion = body.get("max_tokens") or policy.completion_estimate
        send = transport.send if on_text is None else lambda b: transport.send(b, on_text)
    estimate = prompt + completion
    attempt = 0
    billed: list[tuple[int, int]] = []
    while True:
        policy.limiter.acquire(estimate)
        started = time.monotonic()
        try:
            reply = send(body)
        except CallTransientError as error:
            latency = int((time.monotonic() - started) * 1000)
            attempt += 1
            may_retry = True
            if error.billed:
                billed.append((prompt, max(completion, error.completion_tokens)))
                if on_billed is not None:
                    may_retry = on_billed(*billed[-1])
            if attempt > policy.max_retries or should_stop() or not may_retry:
                message = f"gave up after {attempt - 1} retries: {error}"
                if not may_retry and attempt <= policy.max_retries:
                    message += " (another attempt could pass the run's spending cap)"
                return CallOutcome(None, message, attempt - 1, latency, tuple(billed))
            policy.sleep(policy.backoff(attempt, error.retry_after))
            continue
        except CallRejectedError as error:
            latency = int((time.monotonic() - started) * 1000)
            return CallOutcome(None, str(error), attempt, latency, tuple(billed))
        latency = int((time.monotonic() - started) * 1000)
        policy.limiter.settle(
            estimated=estimate, actual=reply.prompt_tokens + reply.completion_tokens
        )
        return CallOutcome(reply, "", attempt, latency, tuple(billed))
