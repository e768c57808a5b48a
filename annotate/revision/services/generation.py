"""The model's side of a session (paper §2.2, appendix A.1): a0 and each turn's revision.

Runs in the background only (a Celery task, or a thread of the process when no broker is
configured), never inside a web request. Each function is safe to run twice: it acts only on an
answer still pending and stores its result only if the answer is still pending then. A failure
is stored as FAILED with its message, never as an answer.

On an endpoint that streams, the answer's text so far is stored on the pending row
(`initial_partial`, `Turn.partial_answer`) at most every PARTIAL_EVERY_SECONDS, for the page to
show; it is emptied when the call ends and is never the answer.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime
from typing import NamedTuple

from django.utils import timezone

from annotate.revision import llm
from annotate.revision.models import (
    CallStatus,
    InstructionType,
    Passage,
    RevisionSession,
    Turn,
)
from annotate.revision.prompting import passages_block, revision_prompt
from annotate.revision.retrieval import retriever_for
from annotate.revision.services.sessions import STALE_AFTER, stale_calls_fail

logger = logging.getLogger(__name__)

PARTIAL_EVERY_SECONDS = 0.25


class PartialWriter:
    """Store a streamed reply's text so far, at most once every `every` seconds.

    `store(text)` writes it (on the pending row only); `on_stored(text)` is told after each
    write (progress displays, tests). The first piece is stored at once.
    """

    def __init__(
        self,
        store: Callable[[str], object],
        *,
        every: float = PARTIAL_EVERY_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        on_stored: Callable[[str], None] | None = None,
    ) -> None:
        self.store, self.every, self.clock, self.on_stored = store, every, clock, on_stored
        self.last: float | None = None

    def __call__(self, text: str) -> None:
        now = self.clock()
        if self.last is not None and now - self.last < self.every:
            return
        self.last = now
        self.store(text)
        if self.on_stored is not None:
            self.on_stored(text)


class RetrievedPassage(NamedTuple):
    pk: int
    title: str
    text: str


def _retrieve(session: RevisionSession, query: str) -> list[RetrievedPassage]:
    """The study's retriever's top passages for the query, best first, with their titles."""
    study = session.study
    rows = [
        RetrievedPassage(*row)
        for row in Passage.objects.filter(question_id=session.question_id)
        .order_by("id")
        .values_list("id", "document__title", "text")
    ]
    retriever = retriever_for(
        retrieval=study.retrieval, embedding_endpoint=study.embedding_endpoint
    )
    # Each passage is searched with its paper's title, as dense retrievers index "title, text":
    # an instruction naming a paper finds it even where its passages do not repeat the words.
    searched = [(p.pk, f"{p.title}\n{p.text}" if p.title else p.text) for p in rows]
    ids = retriever.retrieve(query, searched, study.passages_per_retrieval)
    by_id = {p.pk: p for p in rows}
    return [by_id[i] for i in ids]


def _block(passages: list[RetrievedPassage]) -> str:
    return passages_block([(p.title, p.text) for p in passages])


def session_generate_initial(
    *,
    session_id: int,
    clock: Callable[[], float] = time.monotonic,
    on_partial: Callable[[str], None] | None = None,
    now: datetime | None = None,
) -> None:
    """Generate a0 = M(q, R(q, D)) for a session whose initial answer is pending.

    `clock` paces the stored partial text; `on_partial` is told each piece stored. An answer
    pending for longer than STALE_AFTER is failed instead, with no call (`_too_late`).
    """
    session = RevisionSession.objects.select_related("study", "question", "system").get(
        pk=session_id
    )
    if session.initial_status != CallStatus.PENDING:
        return
    started = session.initial_started_at or session.created_at
    if _too_late(session, started, now or timezone.now()):
        return
    pending = RevisionSession.objects.filter(pk=session.pk, initial_status=CallStatus.PENDING)
    partial = PartialWriter(
        lambda text: pending.update(initial_partial=text), clock=clock, on_stored=on_partial
    )
    try:
        passages = _retrieve(session, session.question.text)
        messages = revision_prompt("initial").messages(
            passages=_block(passages), question=session.question.text
        )
        answer = llm.chat(
            endpoint_name=session.system.endpoint_name,
            messages=messages,
            purpose="revision-initial",
            unit_key=f"revision-session-{session.pk}-initial",
            on_text=partial,
        )
    except Exception as error:  # noqa: BLE001 - any failure is shown with a retry button
        logger.warning("initial answer of session %s failed: %s", session.pk, error)
        pending.update(
            initial_status=CallStatus.FAILED, initial_error=str(error)[:2000], initial_partial=""
        )
        return
    pending.update(
        initial_status=CallStatus.DONE,
        initial_answer=answer,
        initial_passages=[p.pk for p in passages],
        initial_error="",
        initial_partial="",
    )


def _too_late(session: RevisionSession, started: datetime, now: datetime) -> bool:
    """Fail the session's calls pending since before STALE_AFTER (the page shows them failed,
    with a retry, from then on) and say whether the one started at `started` was one of them.

    Redis hands a task still running after CELERY_VISIBILITY_TIMEOUT (longer than STALE_AFTER)
    to a second worker, and a killed worker's task comes back only after it: such a delivery
    must not pay for the calls again while the first may still be making them. The annotator's
    retry starts a new attempt (a new start time), which is generated."""
    if started >= now - STALE_AFTER:
        return False
    stale_calls_fail(session=session, now=now)
    return True


def _revise(turn: Turn, partial: PartialWriter) -> tuple[str, str, list[int]]:
    """Return (answer, summary, passage ids); only the answer's text is streamed to the page."""
    session = turn.session
    endpoint, question = session.system.endpoint_name, session.question.text
    key = f"revision-turn-{turn.pk}"
    if turn.instruction_type == InstructionType.INFORMATION_SEEKING:
        passages = _retrieve(session, turn.instruction)
        summary = llm.chat(
            endpoint_name=endpoint,
            messages=revision_prompt("info-summary").messages(
                passages=_block(passages),
                previous_answer=turn.previous_answer,
                instruction=turn.instruction,
            ),
            purpose="revision-summary",
            unit_key=f"{key}-summary",
        )
        prompt = revision_prompt("info-answer")
        values = {"summary": summary}
    else:
        passages, summary, prompt, values = [], "", revision_prompt("stylistic"), {}
    answer = llm.chat(
        endpoint_name=endpoint,
        messages=prompt.messages(
            question=question,
            previous_answer=turn.previous_answer,
            instruction=turn.instruction,
            **values,
        ),
        purpose="revision-answer",
        unit_key=f"{key}-answer",
        on_text=partial,
    )
    return answer, summary, [p.pk for p in passages]


def turn_generate(
    *,
    turn_id: int,
    clock: Callable[[], float] = time.monotonic,
    on_partial: Callable[[str], None] | None = None,
    now: datetime | None = None,
) -> None:
    """Revise the previous answer for a pending turn: retrieve, summarise, answer (or directly).

    `clock` paces the stored partial text; `on_partial` is told each piece stored. A turn
    pending for longer than STALE_AFTER is failed instead, with no call (`_too_late`).
    """
    turn = Turn.objects.select_related(
        "session__study", "session__question", "session__system"
    ).get(pk=turn_id)
    if turn.call_status != CallStatus.PENDING:
        return
    started = turn.call_started_at or turn.session.created_at
    if _too_late(turn.session, started, now or timezone.now()):
        return
    pending = Turn.objects.filter(pk=turn.pk, call_status=CallStatus.PENDING)
    partial = PartialWriter(
        lambda text: pending.update(partial_answer=text), clock=clock, on_stored=on_partial
    )
    try:
        answer, summary, passage_ids = _revise(turn, partial)
    except Exception as error:  # noqa: BLE001 - any failure is shown with a retry button
        logger.warning("revision of turn %s failed: %s", turn.pk, error)
        pending.update(
            call_status=CallStatus.FAILED, call_error=str(error)[:2000], partial_answer=""
        )
        return
    pending.update(
        call_status=CallStatus.DONE,
        answer=answer,
        summary=summary,
        passages=passage_ids,
        call_error="",
        partial_answer="",
    )
