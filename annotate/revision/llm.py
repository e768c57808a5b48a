"""The one seam between revision sessions (and their judges) and the model engine.

`chat` makes one stored model call for a named endpoint and returns its text; `embed` returns
embeddings. A blank endpoint name is the offline fake model, which revises deterministically so
that demos and tests need no network. Any other name is an engine Endpoint (docs/engine.md):
the call goes through `engine_call` / `engine_embed` (limiter, retries, stored EngineCall,
cost); this module holds no client, limiter or retry logic of its own.
"""

from __future__ import annotations

import hashlib
import re

from annotate.engine.client import (
    TextCallback,
    fake_embedding,
    kiwi_fake_initial,
    kiwi_fake_revision,
    kiwi_fake_summary,
    kiwi_prompt_field,
)
from annotate.engine.models import CallStatus as EngineCallStatus
from annotate.engine.models import Endpoint
from annotate.engine.services.calls import engine_call, engine_embed

FAKE = ""
_INSTRUCTION_LINE = re.compile(r"^#?\s*Instruction:\s*(.*)$", re.MULTILINE)
_COMMENT_LINE = re.compile(r"^#?\s*Comment:\s*(.*)$", re.MULTILINE)


class ModelCallError(Exception):
    """A model call failed after the engine's retries; the message says why."""


def chat(
    *,
    endpoint_name: str,
    messages: list[dict],
    purpose: str,
    unit_key: str = "",
    on_text: TextCallback | None = None,
) -> str:
    """Return the model's reply to the messages (background code only, never in a request).

    On an endpoint that streams, `on_text` is told the reply so far as it grows; the text
    returned is the complete reply, never a partial one (a broken stream raises).
    """
    if endpoint_name == FAKE:
        return fake_reply(messages, purpose)
    call = engine_call(
        endpoint=endpoint_named(endpoint_name),
        messages=messages,
        unit_key=unit_key,
        purpose=purpose,
        on_text=on_text,
    )
    if call.status not in (EngineCallStatus.OK, EngineCallStatus.TRUNCATED):
        raise ModelCallError(call.error or f"the model call ended {call.status}")
    return call.reply


def endpoint_named(endpoint_name: str) -> Endpoint:
    try:
        return Endpoint.objects.get(name=endpoint_name)
    except Endpoint.DoesNotExist:
        raise ModelCallError(f"no engine endpoint is named {endpoint_name!r}") from None


def embed(*, endpoint_name: str, texts: list[str], unit_key: str = "") -> list[list[float]]:
    """Return one embedding per text from the endpoint, through the engine (stored calls of
    at most EMBEDDING_MAX_INPUTS texts each, with the endpoint's limiter, retries and prices;
    an endpoint without an address is the engine's offline fake). No endpoint name: the same
    fake, without a stored call.
    """
    if endpoint_name == FAKE:
        return [fake_embedding(text) for text in texts]
    calls, vectors = engine_embed(
        endpoint=endpoint_named(endpoint_name),
        texts=texts,
        unit_key=unit_key,
        purpose="revision-retrieval",
    )
    if vectors is None:
        raise ModelCallError(f"endpoint {endpoint_name!r}: embeddings failed: {calls[-1].error}")
    return vectors


# --- The fake model --------------------------------------------------------------------------


def _last_user(messages: list[dict]) -> str:
    return next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")


def _digest(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big")


FAKE_CATEGORY_WORDS = (
    ("remove", ("remove", "delete", "drop")),
    ("condense", ("shorten", "shorter", "condense", "concise", "summarize")),
    ("reorganize", ("reorganize", "move", "reorder", "restructure")),
    ("categorization", ("categor", "group")),
    ("direct verbatim edit", ("add this sentence", "add the sentence", "verbatim")),
    ("asking for clarification", ("does this mean", "clarify", "what do you mean")),
    ("expand answer coverage", ("papers", "coverage", "all documents")),
    ("asking for more information", ("how", "what", "add", "example", "more")),
)
FAKE_ERROR_WORDS = (
    ("introduced unrequested changes", ("also", "removed", "deleted", "unrequested")),
    ("instruction is ignored", ("not", "ignored", "did nothing", "unchanged")),
    ("failed to follow hard constraint", ("position", "length", "sentence", "place")),
    ("added information but made answer less coherent/correct", ("coherent", "order")),
)


def fake_reply(messages: list[dict], purpose: str) -> str:
    """Reply like a model would, deterministically, from the prompt's own text."""
    user = _last_user(messages)
    if purpose == "revision-initial":
        return kiwi_fake_initial(kiwi_prompt_field(user, "Question"))
    if purpose == "revision-summary":
        return kiwi_fake_summary(kiwi_prompt_field(user, "Feedback"))
    if purpose == "revision-answer":
        previous = kiwi_prompt_field(user, "Previous answer")
        return kiwi_fake_revision(previous, kiwi_prompt_field(user, "Feedback"))
    if purpose == "instruction-category":
        instruction = (_INSTRUCTION_LINE.findall(user) or [""])[-1].lower()
        for category, words in FAKE_CATEGORY_WORDS:
            if any(word in instruction for word in words):
                return category
        return "others"
    if purpose == "error-category":
        comment = (_COMMENT_LINE.findall(user) or [""])[-1].lower()
        for category, words in FAKE_ERROR_WORDS:
            if any(word in comment for word in words):
                return category
        return "others"
    if purpose == "rating-judge":
        return "good" if _digest(user) % 3 else "bad"
    return f"fake reply {_digest(user) % 1000}"
