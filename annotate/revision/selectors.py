"""Reads of revision sessions for pages: access-checked, a fixed number of queries."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from django.contrib.auth.models import AbstractBaseUser, User
from django.db.models import Count, Exists, Min, OuterRef, Q, QuerySet, Subquery
from django.urls import reverse

from annotate.compiled import CompiledQuery
from annotate.errors import NotFoundError
from annotate.revision.counting import counted_session_q, imported_annotator, rerating_is_own
from annotate.revision.history import next_previous_answer
from annotate.revision.models import (
    WORKS_PAIR,
    CallStatus,
    Document,
    InstructionType,
    Passage,
    Rating,
    RerateStatus,
    Rerating,
    RevisionSession,
    SessionStatus,
    Study,
    StudyQuestion,
    StudySystem,
    Turn,
)
from annotate.revision.services.sessions import (
    STALE_CALL_ERROR,
    session_available,
    session_for_annotator,
    session_unavailable_reason,
    stale_calls_fail,
)
from annotate.roles import ANNOTATOR, is_admin
from annotate.selectors.prerequisites import Prerequisite


@dataclass
class SessionPage:
    session: RevisionSession
    titles: list[str]
    turns: list[Turn]
    passages: list[Passage] = field(default_factory=list)
    # The turn whose retrieval `passages` are (0: a0's, retrieved for the question).
    passages_turn: int = 0

    @property
    def last(self) -> Turn | None:
        return self.turns[-1] if self.turns else None

    @property
    def waiting(self) -> bool:
        if self.session.initial_status == CallStatus.PENDING:
            return True
        return self.last is not None and self.last.call_status == CallStatus.PENDING

    @property
    def failed(self) -> bool:
        """Whether the session's last model call failed. Its message (naming the endpoint or
        the model, which annotators must not learn) is for researchers only: the admin's
        session and turn pages and the log have it."""
        if self.session.initial_status == CallStatus.FAILED:
            return True
        return self.last is not None and self.last.call_status == CallStatus.FAILED

    @property
    def may_give_up(self) -> bool:
        """Whether the session may be given up: its last call failed and nothing is rated."""
        return (
            self.session.status == SessionStatus.ACTIVE
            and self.failed
            and not any(turn.rating for turn in self.turns)
        )

    @property
    def to_rate(self) -> Turn | None:
        last = self.last
        if last is not None and last.call_status == CallStatus.DONE and not last.rating:
            return last
        return None

    @property
    def rate_turn(self) -> Turn | None:
        """The turn the rating form is for: the one to rate, or the one being written (its
        form stays hidden until the answer is there)."""
        last = self.last
        if last is not None and last.call_status == CallStatus.PENDING:
            return last
        return self.to_rate

    @property
    def instruct_next(self) -> bool:
        """Show the instruction form now, or (hidden) once the initial answer is there."""
        if self.session.initial_status == CallStatus.PENDING:
            return self.session.status == SessionStatus.ACTIVE and self.session.study.max_turns > 0
        return self.may_instruct

    @property
    def offers_model_call(self) -> bool:
        """Whether the page offers a new instruction or a Retry: the model calls an account an
        admin blocked is refused (assignments.account_block_check), unlike a rating."""
        if self.session.status != SessionStatus.ACTIVE:
            return False
        return self.failed or (self.instruct_next and self.rate_turn is None)

    @property
    def may_instruct(self) -> bool:
        return (
            self.session.status == SessionStatus.ACTIVE
            and self.session.initial_status == CallStatus.DONE
            and (self.last is None or bool(self.last.rating))
            and len(self.turns) < self.session.study.max_turns
        )

    @property
    def dropped(self) -> bool:
        """Whether the last revision was rated bad and not edited: it left the answer history
        (paper §2.2), so the next instruction revises the answer before it."""
        last = self.last
        return (
            last is not None
            and last.call_status == CallStatus.DONE
            and last.rating == Rating.BAD
            and not last.edited_answer
        )

    @property
    def retried_at(self) -> datetime | None:
        """When the failed call was last tried again (Retry), None when it failed on its first
        try: a retry starts the call anew (`call_retry`), after the turn or session began."""
        if not self.failed:
            return None
        last = self.last
        if self.session.initial_status == CallStatus.FAILED or last is None:
            started, first = self.session.initial_started_at, self.session.created_at
        else:
            started, first = last.call_started_at, last.started_at
        return started if started and first and started > first else None

    @property
    def timed_out(self) -> bool:
        """Whether the failed call failed for not finishing in time (`stale_calls_fail`), the one
        reason the annotator may be told: other errors name the endpoint or the model."""
        if self.session.initial_status == CallStatus.FAILED or self.last is None:
            error = self.session.initial_error
        else:
            error = self.last.call_error
        return self.failed and error == STALE_CALL_ERROR

    @property
    def current_answer(self) -> str:
        """The answer the annotator reads now: the last revision to rate, else the answer the
        next instruction revises (the edit, the revision, or for a revision rated bad and not
        edited the answer before it), or a0. While the last turn's call is pending or failed,
        the answer its instruction revises."""
        last = self.last
        if last is None:
            return self.session.initial_answer
        if last.call_status != CallStatus.DONE:
            return last.previous_answer
        if not last.rating:
            return last.final_answer
        return next_previous_answer(
            last.previous_answer,
            answer=last.answer,
            edited=last.edited_answer,
            rating=last.rating,
        )


def _refresh(session: RevisionSession, query, fields: list[str]) -> None:
    """As refresh_from_db(fields=...) did, with its SQL compiled once (annotate.compiled)."""
    fresh = query.first(session_id=session.pk)
    if fresh is None:
        raise RevisionSession.DoesNotExist("RevisionSession matching query does not exist.")
    for name in fields:
        setattr(session, name, getattr(fresh, name))


def session_page_get(*, session_id: int, user: AbstractBaseUser, now: datetime) -> SessionPage:
    """The annotator's own session with its turns and the last information-seeking passages."""
    session = session_for_annotator(session_id=session_id, user=user)
    stale_calls_fail(session=session, now=now)
    _refresh(session, _SESSION_ANSWER, ["initial_status", "initial_error", "initial_answer"])
    titles = [d.title for d in _TITLES.all(question_id=session.question_id)]
    turns = _TURNS.all(session_id=session.pk)
    # A turn whose call is pending or failed has retrieved nothing (yet): the passages shown are
    # the last answered information-seeking turn's, or a0's.
    info = [
        t
        for t in turns
        if t.instruction_type == InstructionType.INFORMATION_SEEKING
        and t.call_status == CallStatus.DONE
    ]
    ids = info[-1].passages if info else session.initial_passages
    by_id = _passages_by_id(ids) if ids else {}
    passages = [by_id[i] for i in ids if i in by_id]
    return SessionPage(session, titles, turns, passages, info[-1].position if info else 0)


@dataclass(frozen=True)
class SessionRecord:
    """A session as a researcher reads it: a0 and every turn, each with the passages it
    retrieved, in retrieval order (the order the answers' [0], [1]... cite)."""

    session: RevisionSession
    titles: list[str]
    initial_passages: list[Passage]
    turns: list[tuple[Turn, list[Passage]]]


def session_record_get(*, session_id: int) -> SessionRecord:
    """Any session of any study, for a researcher (the view checks the role): four queries, the
    session, its paper titles, its turns and the passages they retrieved (three when none
    did, as for an imported session)."""
    session = (
        RevisionSession.objects.select_related("study", "question", "system", "annotator")
        .filter(pk=session_id)
        .first()
    )
    if session is None:
        raise NotFoundError("no such session")
    titles = list(session.question.documents.order_by("position").values_list("title", flat=True))
    turns = list(session.turns.order_by("position"))
    ids = [*session.initial_passages, *(i for turn in turns for i in turn.passages)]
    by_id = Passage.objects.select_related("document").in_bulk(set(ids)) if ids else {}

    def shown(passage_ids: list[int]) -> list[Passage]:
        return [by_id[i] for i in passage_ids if i in by_id]

    turn_rows = [(turn, shown(turn.passages)) for turn in turns]
    return SessionRecord(session, titles, shown(session.initial_passages), turn_rows)


def study_sessions(*, study: Study) -> QuerySet[RevisionSession]:
    """Every session of the study with its annotator, system, question and number of turns,
    the most recent first, for the researcher's list (one query per page of it)."""
    return (
        RevisionSession.objects.filter(study=study)
        .select_related("annotator", "system", "question")
        .annotate(turn_count=Count("turns"))
        .order_by("-id")
    )


# The session page's reads, compiled once per process (annotate.compiled): compiling them
# through the ORM on every view cost more CPU than PostgreSQL spent running them.
_SESSION_ANSWER = CompiledQuery(
    RevisionSession,
    lambda session_id: RevisionSession.objects.filter(pk=session_id).only(
        "initial_answer", "initial_status", "initial_error"
    ),
    "session_id",
)
_TITLES = CompiledQuery(
    Document,
    lambda question_id: (
        Document.objects.filter(question_id=question_id).order_by("position").only("title")
    ),
    "question_id",
)
_TURNS = CompiledQuery(
    Turn,
    lambda session_id: Turn.objects.filter(session_id=session_id).order_by("position"),
    "session_id",
)
# Passages by id with their documents, as in_bulk(ids) read them: one query per number of ids.
_PASSAGES: dict[int, CompiledQuery] = {}


def _passages_by_id(ids: list[int]) -> dict[int, Passage]:
    unique = list(dict.fromkeys(ids))
    query = _PASSAGES.get(len(unique))
    if query is None:
        names = [f"p{n}" for n in range(len(unique))]
        query = _PASSAGES[len(unique)] = CompiledQuery(
            Passage,
            lambda **values: (
                Passage.objects.select_related("document")
                .filter(pk__in=[values[name] for name in names])
                .order_by()
            ),
            *names,
        )
    values = {f"p{n}": pk for n, pk in enumerate(unique)}
    return {p.pk: p for p in query.all(**values)}


def session_state(*, session_id: int, user: AbstractBaseUser, now: datetime) -> dict:
    """What the polling page needs: is a model call still running (and its text streamed so
    far, `partial`), did one fail; once it is done, the `answer` and, for an answer that
    retrieved passages, those `passages` (title and text), so the page shows them in place.

    `partial` is never the answer: it is only there while the call is pending.
    """
    session = session_for_annotator(session_id=session_id, user=user)
    stale_calls_fail(session=session, now=now)
    _refresh(
        session,
        _SESSION_POLLED,
        ["initial_status", "initial_partial", "initial_answer", "initial_passages"],
    )
    last = _LAST_TURN.first(session_id=session.pk)
    call = session.initial_status if last is None else last.call_status
    statuses = [session.initial_status] + ([last.call_status] if last else [])
    state = {
        "waiting": CallStatus.PENDING in statuses,
        "failed": CallStatus.FAILED in statuses,
        "partial": "",
        "answer": None,
        "passages": None,
    }
    if session.initial_status == CallStatus.PENDING:
        state["partial"] = session.initial_partial
    elif last is not None and last.call_status == CallStatus.PENDING:
        state["partial"] = last.partial_answer
    elif call == CallStatus.DONE and not state["failed"]:
        state["answer"] = session.initial_answer if last is None else last.final_answer
        ids = session.initial_passages if last is None else last.passages
        if ids:
            state["passages"] = _passages_shown(ids)
    return state


_SESSION_POLLED = CompiledQuery(
    RevisionSession,
    lambda session_id: RevisionSession.objects.filter(pk=session_id).only(
        "initial_status", "initial_partial", "initial_answer", "initial_passages"
    ),
    "session_id",
)
_LAST_TURN = CompiledQuery(
    Turn,
    lambda session_id: (
        Turn.objects.filter(session_id=session_id)
        .order_by("-position")
        .only("call_status", "partial_answer", "answer", "edited_answer", "passages")[:1]
    ),
    "session_id",
)


def _passages_shown(ids: list[int]) -> list[dict]:
    by_id = _passages_by_id(ids)
    return [{"title": by_id[i].document.title, "text": by_id[i].text} for i in ids if i in by_id]


def studies_for_annotator(*, user: AbstractBaseUser) -> list[dict]:
    """Every study with live systems, with the annotator's own session counts."""
    live = StudyQuestion.objects.filter(study=OuterRef("pk"), documents__isnull=False)
    system = StudySystem.objects.filter(study=OuterRef("pk"), live=True)
    seen = RevisionSession.objects.filter(annotator=user, study=OuterRef("pk")).values(
        "question_id"
    )
    studies = (
        # a question with documents and a system: no join to count over
        Study.objects.filter(Exists(live), Exists(system))
        .annotate(
            # a session given up counts nowhere, here neither
            mine=Count(
                "sessions",
                filter=Q(sessions__annotator=user) & ~Q(sessions__status=SessionStatus.GIVEN_UP),
            ),
            active=Count(
                "sessions",
                filter=Q(sessions__annotator=user, sessions__status=SessionStatus.ACTIVE),
            ),
            given_up=Count(
                "sessions",
                filter=Q(sessions__annotator=user, sessions__status=SessionStatus.GIVEN_UP),
            ),
            # Pairs held by anyone's session given up and not reopened, on a question the
            # annotator has not seen: why no question may be left for them. Only pairs anyone
            # can be given, as study_collection_progress counts them (given_up_holding_q: a
            # system unticked since holds nothing a reopening would free).
            held=Count(
                "sessions",
                filter=given_up_holding_q("sessions__") & ~Q(sessions__question__in=Subquery(seen)),
            ),
        )
        .order_by("name")
    )
    rows = []
    for s in studies:
        # one query per study (a handful): Start only where a question is left, and a few more
        # where none is, to say why beside "No question left for you"
        is_open = bool(s.active) or session_available(study=s, user=user)
        why = "" if is_open else session_unavailable_reason(study=s, user=user)
        rows.append(
            {
                "study": s,
                "mine": s.mine,
                "active": s.active,
                "given_up": s.given_up,
                "held": s.held,
                "open": is_open,
                "why": why,
            }
        )
    return rows


def reratings_for_annotator(*, user: AbstractBaseUser) -> list[Rerating]:
    return list(
        Rerating.objects.filter(annotator=user, status=RerateStatus.PENDING)
        .select_related("turn__session__question", "turn__session__study")
        .order_by("id")
    )


def finished_sessions_for_annotator(*, user: AbstractBaseUser) -> QuerySet[RevisionSession]:
    """The annotator's own finished sessions, the latest first (each opens read-only)."""
    return (
        RevisionSession.objects.filter(annotator=user, status=SessionStatus.FINISHED)
        .select_related("study", "question")
        .annotate(turn_count=Count("turns"))
        .order_by("-finished_at", "-pk")
    )


def done_reratings_for_annotator(*, user: AbstractBaseUser) -> QuerySet[Rerating]:
    """The annotator's own re-ratings already given, the latest first (each opens read-only)."""
    return (
        Rerating.objects.filter(annotator=user, status=RerateStatus.DONE)
        .select_related("turn__session__question", "turn__session__study")
        .order_by("-rated_at", "-pk")
    )


def rerating_get(*, rerating_id: int, user: AbstractBaseUser) -> Rerating:
    try:
        return Rerating.objects.select_related(
            "turn__session__question", "turn__session__study"
        ).get(pk=rerating_id, annotator=user)
    except Rerating.DoesNotExist:
        raise NotFoundError("no such re-rating") from None


@dataclass(frozen=True)
class ReratingPage:
    rerating: Rerating
    titles: list[str]  # the question's papers, numbered from 0 as the answers cite them
    done: int  # of the annotator's re-ratings in this study
    total: int


def rerating_page_get(*, rerating_id: int, user: AbstractBaseUser) -> ReratingPage:
    """The annotator's own re-rating with what judging it needs: the question's paper titles
    and how many of the turns sent to them in the study they re-rated. Three queries."""
    rerating = rerating_get(rerating_id=rerating_id, user=user)
    session = rerating.turn.session
    titles = [d.title for d in _TITLES.all(question_id=session.question_id)]
    progress = rerating_progress(user=user, study_id=session.study_id)
    return ReratingPage(rerating, titles, progress["done"], progress["total"])


def rerating_next_elsewhere(*, user: AbstractBaseUser, study_id: int) -> Rerating | None:
    """The annotator's first re-rating still waiting in another study than `study_id`, with
    its study (saving the last of one study goes on to it), or None."""
    return (
        Rerating.objects.filter(annotator=user, status=RerateStatus.PENDING)
        .exclude(turn__session__study_id=study_id)
        .select_related("turn__session__study")
        .order_by("id")
        .first()
    )


def rerating_progress(*, user: AbstractBaseUser, study_id: int) -> dict:
    """How many of the turns sent to the annotator in the study they re-rated (`done` of
    `total`), and the first one still waiting (`next_id`, None when none is)."""
    mine = Rerating.objects.filter(annotator=user, turn__session__study_id=study_id)
    return mine.aggregate(
        total=Count("id"),
        done=Count("id", filter=Q(status=RerateStatus.DONE)),
        next_id=Min("id", filter=Q(status=RerateStatus.PENDING)),
    )


def study_annotators(*, study: Study) -> QuerySet:
    """The accounts that may re-rate the study's turns: active annotators, by username, each
    with `study_sessions`, how many of the study's sessions they did (given up ones not)."""
    done = Q(revision_sessions__study=study) & ~Q(revision_sessions__status=SessionStatus.GIVEN_UP)
    return (
        User.objects.filter(is_active=True, groups__name=ANNOTATOR)
        .annotate(study_sessions=Count("revision_sessions", filter=done))
        .order_by("username")
    )


def session_study_id(*, session_id: int) -> int:
    """The study of any session (a researcher's action on it goes back to its report)."""
    study_id = (
        RevisionSession.objects.filter(pk=session_id).values_list("study_id", flat=True).first()
    )
    if study_id is None:
        raise NotFoundError("no such session")
    return study_id


@dataclass(frozen=True)
class GivenUpSession:
    session: RevisionSession
    holder: RevisionSession | None  # the pair's session in progress or finished, since reopened


def given_up_sessions(*, study: Study) -> list[GivenUpSession]:
    """The study's given-up sessions, newest first, each with who gave it up and when, who
    reopened it and when, and the session that has its (question, system) now, if any (two
    queries)."""
    given_up = list(
        RevisionSession.objects.filter(study=study, status=SessionStatus.GIVEN_UP)
        .select_related("question", "system", "annotator", "given_up_by", "reopened_by")
        .order_by("-given_up_at", "-id")
    )
    live = RevisionSession.objects.filter(
        WORKS_PAIR, study=study, question__in={s.question_id for s in given_up}
    ).select_related("annotator")
    holders = {(s.question_id, s.system_id): s for s in live}
    return [GivenUpSession(s, holders.get((s.question_id, s.system_id))) for s in given_up]


def rerate_candidates(*, study: Study) -> list[tuple[int, int | None, int]]:
    """(turn id, session's annotator id or None, session id) of every rated turn of the study's
    finished sessions that count (their account's kind decided, or imported:
    annotate.revision.counting) that has no re-rating by another person yet (sent or rated), by
    turn id.

    A turn re-rated only by its own annotator is still a candidate: that re-rating never counts,
    so without a second person the turn would be missing from the Human row for good."""
    sent = Rerating.objects.filter(turn__session__study=study).values_list(
        "turn_id",
        "annotator_id",
        "annotator__username",
        "turn__session__annotator_id",
        "turn__session__extra",
    )
    rerated = {
        turn_id
        for turn_id, rater_id, rater, owner_id, extra in sent
        if not rerating_is_own(
            rater_id=rater_id, rater_username=rater, owner_id=owner_id, session_extra=extra
        )
    }
    turns = (
        Turn.objects.filter(
            counted_session_q("session__"),
            session__study=study,
            session__status=SessionStatus.FINISHED,
        )
        .exclude(rating="")
        .order_by("id")
        .values_list("id", "session__annotator_id", "session_id")
    )
    return [turn for turn in turns if turn[0] not in rerated]


def rerate_owners(
    *,
    study: Study,
    annotators: Sequence[AbstractBaseUser],
    candidates: list[tuple[int, int | None, int]],
) -> list[tuple[int, int | None]]:
    """(turn id, id of whoever did its session, None if that is no account) of `candidates`
    (`rerate_candidates`): an imported session has no annotator in the app, and is owned by the
    chosen annotator its line names (`imported_annotator`), if any."""
    ids = {annotator.get_username(): annotator.pk for annotator in annotators}
    imported = RevisionSession.objects.filter(study=study, annotator__isnull=True)
    imported_owner = {
        session_id: ids[name]
        for session_id, extra in imported.values_list("id", "extra")
        if (name := imported_annotator(extra)) in ids
    }
    return [
        (turn_id, owner_id or imported_owner.get(session_id))
        for turn_id, owner_id, session_id in candidates
    ]


def rerate_left_per_annotator(
    *, study: Study, annotators: Sequence[AbstractBaseUser]
) -> dict[int, int]:
    """{annotator id: how many of the turns left to send that annotator alone may re-rate}:
    every one but those of their own sessions. Two or more annotators together may take all."""
    candidates = rerate_candidates(study=study)
    owned = Counter(
        owner
        for _, owner in rerate_owners(study=study, annotators=annotators, candidates=candidates)
    )
    return {annotator.pk: len(candidates) - owned[annotator.pk] for annotator in annotators}


def rerate_candidates_count(*, study: Study) -> int:
    """How many rated turns of finished sessions are left to send for re-rating."""
    return len(rerate_candidates(study=study))


@dataclass(frozen=True)
class RerateSummary:
    left: int  # rated turns of finished sessions not sent yet
    sent: int
    rated: int
    by_annotator: list[dict]  # username, sent, rated


def rerate_sent_count(*, study: Study) -> int:
    """How many of the study's turns were ever sent for re-rating (rated or not)."""
    return Rerating.objects.filter(turn__session__study=study).count()


def rerate_summary(*, study: Study) -> RerateSummary:
    reratings = Rerating.objects.filter(turn__session__study=study)
    by_annotator = list(
        reratings.values("annotator__username")
        .annotate(sent=Count("id"), rated=Count("id", filter=Q(status=RerateStatus.DONE)))
        .order_by("annotator__username")
    )
    return RerateSummary(
        left=rerate_candidates_count(study=study),
        sent=sum(row["sent"] for row in by_annotator),
        rated=sum(row["rated"] for row in by_annotator),
        by_annotator=[
            {"username": row["annotator__username"], "sent": row["sent"], "rated": row["rated"]}
            for row in by_annotator
        ],
    )


def rerate_prerequisites_missing(*, study: Study, user: AbstractBaseUser) -> list[Prerequisite]:
    """What sending turns for re-rating needs first: finished turns left, annotator accounts."""
    missing = []
    if not rerate_candidates_count(study=study):
        missing.append(
            Prerequisite(
                "No rated turn of a finished session is left to re-rate.",
                "Import finished KIWI sessions, or wait until annotators finish theirs.",
                reverse("revision:upload"),
            )
        )
    if not study_annotators(study=study).exists():
        if is_admin(user):
            url, action = (
                reverse("admin:auth_user_add"),
                "Create one and give it the annotator role.",
            )
        else:
            url, action = "", "Ask an admin to create annotator accounts."
        missing.append(Prerequisite("There is no annotator account.", action, url))
    return missing


@dataclass(frozen=True)
class CollectionProgress:
    """How far annotators are through a study: paper §3.2 wants one session per question (with
    its papers) and live system, each annotator seeing a question at most once."""

    questions: int
    systems: int
    finished: int
    active: int
    # Given up when the model kept failing: counted nowhere, but their pairs are not handed
    # out again, so they are not "not started" either.
    given_up: int
    imported: int  # records, not work: they count in the report, never here

    @property
    def wanted(self) -> int:
        return self.questions * self.systems

    @property
    def not_started(self) -> int:
        return max(self.wanted - self.finished - self.active - self.given_up, 0)


def offered_pair_q(prefix: str = "") -> Q:
    """Sessions (reached through `prefix`, e.g. "sessions__" from a Study) of an annotator on a
    pair the study hands out: a live system and a question with papers. An imported session
    leaves its pair free (HOLDS_PAIR)."""
    return Q(
        **{
            f"{prefix}annotator__isnull": False,
            f"{prefix}system__live": True,
            f"{prefix}question__in": Document.objects.values("question_id"),
        }
    )


def given_up_holding_q(prefix: str = "") -> Q:
    """Sessions on a pair the study hands out (offered_pair_q) given up and not reopened:
    each holds its pair from every annotator until a researcher reopens it (a reopened one
    holds it no more: that pair is not started, or has a session). The collection's progress
    counts them as given up, and an annotator's list of studies as held."""
    return offered_pair_q(prefix) & Q(
        **{f"{prefix}status": SessionStatus.GIVEN_UP, f"{prefix}reopened_at__isnull": True}
    )


def study_collection_progress(*, study: Study) -> CollectionProgress:
    """Count the sessions annotators can do in the study, those finished, in progress and given
    up, and the imported sessions (which leave every question and system free for annotators)."""
    with_papers = Exists(Document.objects.filter(question=OuterRef("pk")))
    questions = StudyQuestion.objects.filter(study=study).filter(with_papers)
    sessions = RevisionSession.objects.filter(offered_pair_q(), study=study).aggregate(
        finished=Count("id", filter=Q(status=SessionStatus.FINISHED)),
        active=Count("id", filter=Q(status=SessionStatus.ACTIVE)),
        given_up=Count("id", filter=given_up_holding_q()),
    )
    return CollectionProgress(
        questions=questions.count(),
        systems=StudySystem.objects.filter(study=study, live=True).count(),
        imported=RevisionSession.objects.filter(study=study, annotator__isnull=True).count(),
        **sessions,
    )
