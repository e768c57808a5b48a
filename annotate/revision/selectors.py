"""Reads of revision sessions for pages: access-checked, a fixed number of queries."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Count, Q

from annotate.errors import NotFoundError
from annotate.revision.models import (
    CallStatus,
    Document,
    InstructionType,
    Passage,
    RerateStatus,
    Rerating,
    RevisionSession,
    SessionStatus,
    Study,
    Turn,
)
from annotate.revision.services.sessions import session_for_annotator, stale_calls_fail


@dataclass
class SessionPage:
    session: RevisionSession
    titles: list[str]
    turns: list[Turn]
    passages: list[Passage] = field(default_factory=list)

    @property
    def last(self) -> Turn | None:
        return self.turns[-1] if self.turns else None

    @property
    def waiting(self) -> bool:
        if self.session.initial_status == CallStatus.PENDING:
            return True
        return self.last is not None and self.last.call_status == CallStatus.PENDING

    @property
    def failed_error(self) -> str:
        if self.session.initial_status == CallStatus.FAILED:
            return self.session.initial_error
        if self.last is not None and self.last.call_status == CallStatus.FAILED:
            return self.last.call_error
        return ""

    @property
    def to_rate(self) -> Turn | None:
        last = self.last
        if last is not None and last.call_status == CallStatus.DONE and not last.rating:
            return last
        return None

    @property
    def may_instruct(self) -> bool:
        return (
            self.session.status == SessionStatus.ACTIVE
            and self.session.initial_status == CallStatus.DONE
            and (self.last is None or bool(self.last.rating))
            and len(self.turns) < self.session.study.max_turns
        )

    @property
    def current_answer(self) -> str:
        """The answer the annotator reads now: the last revision, or a0."""
        if self.last is not None and self.last.call_status == CallStatus.DONE:
            return self.last.final_answer
        return self.session.initial_answer


def session_page_get(*, session_id: int, user: AbstractBaseUser, now: datetime) -> SessionPage:
    """The annotator's own session with its turns and the last information-seeking passages."""
    session = session_for_annotator(session_id=session_id, user=user)
    stale_calls_fail(session=session, now=now)
    session.refresh_from_db(fields=["initial_status", "initial_error", "initial_answer"])
    titles = list(
        Document.objects.filter(question_id=session.question_id)
        .order_by("position")
        .values_list("title", flat=True)
    )
    turns = list(Turn.objects.filter(session=session).order_by("position"))
    info = [t for t in turns if t.instruction_type == InstructionType.INFORMATION_SEEKING]
    ids = info[-1].passages if info else session.initial_passages
    by_id = Passage.objects.select_related("document").in_bulk(ids) if ids else {}
    passages = [by_id[i] for i in ids if i in by_id]
    return SessionPage(session, titles, turns, passages)


def session_state(*, session_id: int, user: AbstractBaseUser, now: datetime) -> dict:
    """What the polling page needs: is a model call still running, did one fail."""
    session = session_for_annotator(session_id=session_id, user=user)
    stale_calls_fail(session=session, now=now)
    session.refresh_from_db(fields=["initial_status"])
    last = Turn.objects.filter(session=session).order_by("-position").only("call_status").first()
    statuses = [session.initial_status] + ([last.call_status] if last else [])
    return {
        "waiting": CallStatus.PENDING in statuses,
        "failed": CallStatus.FAILED in statuses,
    }


def studies_for_annotator(*, user: AbstractBaseUser) -> list[dict]:
    """Every study with live systems, with the annotator's own session counts."""
    studies = Study.objects.annotate(
        mine=Count("sessions", filter=Q(sessions__annotator=user)),
        active=Count(
            "sessions",
            filter=Q(sessions__annotator=user, sessions__status=SessionStatus.ACTIVE),
        ),
        live_questions=Count("questions__documents", distinct=True),
    ).order_by("name")
    return [{"study": s, "mine": s.mine, "active": s.active} for s in studies if s.live_questions]


def reratings_for_annotator(*, user: AbstractBaseUser) -> list[Rerating]:
    return list(
        Rerating.objects.filter(annotator=user, status=RerateStatus.PENDING)
        .select_related("turn__session__question")
        .order_by("id")
    )


def rerating_get(*, rerating_id: int, user: AbstractBaseUser) -> Rerating:
    try:
        return Rerating.objects.select_related("turn__session__question").get(
            pk=rerating_id, annotator=user
        )
    except Rerating.DoesNotExist:
        raise NotFoundError("no such re-rating") from None
