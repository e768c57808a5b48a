"""The annotator's side of a session (paper §2.2 and §3.2): assignment, turns, ratings, edits.

Every write is one transaction on rows locked for the session, so a double click or two tabs
cannot create two turns or rate one twice. Model calls are enqueued, never made here.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, connections, router, transaction
from django.db.models import Exists, OuterRef, Subquery

from annotate.compiled import CompiledQuery, prepared_cursor
from annotate.errors import (
    ConflictError,
    NotFoundError,
    NoWorkError,
    SubmissionError,
    WorkerBlockedError,
)
from annotate.revision.dispatch import generation_enqueue
from annotate.revision.history import next_previous_answer
from annotate.revision.models import (
    COMMENT_MAX_CHARS,
    HOLDS_PAIR,
    INSTRUCTION_MAX_CHARS,
    WORKS_PAIR,
    CallStatus,
    Document,
    InstructionType,
    Rating,
    RevisionSession,
    SessionStatus,
    Study,
    StudyQuestion,
    StudySystem,
    Turn,
)
from annotate.services.assignments import account_block_check, account_blocked

# A form sent for a step the session has left (another tab moved it on): refused, not applied
# to the step the session is at now.
OUT_OF_DATE = "this page was out of date: reload"

# An answer still pending after this long (a worker or process died) is shown as failed.
STALE_AFTER = timedelta(seconds=settings.REVISION_CALL_TIMEOUT_SECONDS)

WITHDRAW_REFUSED_BLOCKED = (
    "Your account is blocked from new work here, so an instruction withdrawn now could not be "
    "sent again: it stays in the session as you sent it, where the researchers can read it. "
    "Once the block is lifted you may retry it or withdraw it."
)


def session_for_annotator(*, session_id: int, user: AbstractBaseUser, lock: bool = False):
    """Return the annotator's own session; another's or a missing one is a NotFoundError."""
    if not lock:
        session = _SESSION_OF_ANNOTATOR.first(session_id=session_id, user_id=user.pk)
        if session is None:
            raise NotFoundError("no such session")
        return session
    sessions = RevisionSession.objects.select_related("study", "question", "system")
    try:
        return sessions.select_for_update(of=("self",)).get(pk=session_id, annotator=user)
    except RevisionSession.DoesNotExist:
        raise NotFoundError("no such session") from None


# Read on every session page view and poll: compiled once (annotate.compiled).
_SESSION_OF_ANNOTATOR = CompiledQuery(
    RevisionSession,
    lambda session_id, user_id: RevisionSession.objects.select_related(
        "study", "question", "system"
    ).filter(pk=session_id, annotator_id=user_id),
    "session_id",
    "user_id",
)


@transaction.atomic
def session_assign(*, study: Study, user: AbstractBaseUser, now: datetime) -> RevisionSession:
    """Return the annotator's session in progress, else start one on a free (question, system).

    Paper §3.2: an annotator gets each question at most once, and each question gets one
    session per system. The pair chosen is the first question (in study order) the annotator
    has not done, with its first system that has no session yet.

    An account an admin blocked starts none (WorkerBlockedError, as a claim or a study prompt
    is refused): a new session is new work, and its initial answer a model call we pay for.
    Its session in progress is still returned: it may rate what the model already answered,
    finish or give up (turn_start refuses it a new instruction).
    """
    failed = None
    while True:
        active = session_active(study=study, user=user)
        if active:
            return active
        account_block_check(user)
        pair = _free_pair(study=study, user=user)
        if pair is None:
            reason = session_unavailable_reason(study=study, user=user)
            raise NoWorkError(f"no question is left for you in this study: {reason}")
        try:
            with transaction.atomic():
                session = RevisionSession.objects.create(
                    study=study,
                    question_id=pair[0],
                    system_id=pair[1],
                    annotator=user,
                    initial_status=CallStatus.PENDING,
                    initial_started_at=now,
                    created_at=now,
                )
        except IntegrityError:
            # Another transaction took the pair (or this annotator started in another tab) and
            # committed: its session is visible to the next statement, so the loop moves on.
            # The same pair failing twice is some other integrity error: not hidden.
            if pair == failed:
                raise
            failed = pair
            continue
        generation_enqueue(what="initial", object_id=session.pk)
        return session


def session_active(*, study: Study, user: AbstractBaseUser) -> RevisionSession | None:
    """The annotator's session in progress in the study, if any (session_assign returns it)."""
    return RevisionSession.objects.filter(
        study=study, annotator=user, status=SessionStatus.ACTIVE
    ).first()


def session_available(*, study: Study, user: AbstractBaseUser) -> bool:
    """Whether session_assign would give the annotator a new session in this study now."""
    return _free_pair(study=study, user=user) is not None


def session_unavailable_reason(*, study: Study, user: AbstractBaseUser) -> str:
    """Say why session_assign gives the annotator no new session in this study, as a clause
    ("you have had a session on each of its 2 questions"), for a study it found no free pair in.

    The cases of _free_pair's rule, each said only when it holds, in this order: no question
    with papers; every such question done by the annotator (a session of theirs on it, given up
    too: a question is theirs once), whatever the models; no live system (none ever, or none
    ticked now); else each question left to them has a session with every live system, by
    other annotators (theirs are on the questions they have done): in progress, finished, or
    given up and not reopened, which studies_for_annotator counts as `held` for the page to
    say where a researcher reopens them. That last is checked once more (a session reopened
    or a model ticked since the caller found no free pair): when a pair is free now, the clause
    says one came free, which stays true.
    """
    answerable = StudyQuestion.objects.filter(study=study).filter(
        Exists(Document.objects.filter(question=OuterRef("pk")))
    )
    questions = answerable.count()
    if not questions:
        return "no question with papers to answer from has been imported into it yet"
    done = RevisionSession.objects.filter(
        study=study, annotator=user, question__in=answerable.values("pk")
    ).count()  # one session per question and annotator (a constraint)
    if done >= questions:
        each = "its question" if questions == 1 else f"each of its {questions} questions"
        return f"you have had a session on {each}, and an annotator gets a question once"
    systems = StudySystem.objects.filter(study=study)
    if not systems.filter(live=True).exists():
        if systems.exists():
            return "no model is offered in it now"
        return "it has no model for annotators to work with yet"
    if _free_pair(study=study, user=user) is not None:
        return "a question came free for you just as this was checked; try again"
    left = questions - done
    if not done:
        taken = "its question" if questions == 1 else f"each of its {questions} questions"
        verb = "has"
    else:
        taken = "the other" if left == 1 else f"the {left} others"
        taken = f"you have had a session on {done} of its {questions} questions, and {taken}"
        verb = "has" if left == 1 else "have"
    return f"{taken} already {verb} a session with every model, by other annotators"


def _free_pair(*, study: Study, user: AbstractBaseUser) -> tuple[int, int] | None:
    """The (question id, system id) session_assign gives next, found in one query."""
    taken = RevisionSession.objects.filter(
        HOLDS_PAIR, question_id=OuterRef(OuterRef("pk")), system_id=OuterRef("pk")
    )
    first_free_system = (
        StudySystem.objects.filter(study=study, live=True)
        .filter(~Exists(taken))
        .order_by("position", "id")
        .values("pk")[:1]
    )
    done = RevisionSession.objects.filter(study=study, annotator=user).values("question_id")
    return (
        StudyQuestion.objects.filter(study=study)
        # A question known only from imported sessions has no papers to answer from.
        .filter(Exists(Document.objects.filter(question=OuterRef("pk"))))
        .exclude(pk__in=done)
        .annotate(free_system=Subquery(first_free_system))
        .filter(free_system__isnull=False)
        .order_by("position", "id")
        .values_list("pk", "free_system")
        .first()
    )


def _last_turn(session: RevisionSession) -> Turn | None:
    return session.turns.order_by("-position").first()


def _previous_answer(session: RevisionSession, last: Turn | None) -> str:
    if last is None:
        return session.initial_answer
    return next_previous_answer(
        last.previous_answer, answer=last.answer, edited=last.edited_answer, rating=last.rating
    )


@transaction.atomic
def turn_start(
    *,
    session_id: int,
    user: AbstractBaseUser,
    instruction: str,
    instruction_type: str,
    now: datetime,
    position: int | None = None,
) -> Turn:
    """Start turn t: store the instruction and its type and enqueue the model's revision.

    `position` is the turn the form was shown for (the page's form sends it): another position
    is the next one no longer, the page out of date. None (callers with no page) takes the next.
    An account an admin blocked is refused (WorkerBlockedError): a turn is new work and a model
    call; rating the turn already answered is not refused (turn_rate).
    """
    account_block_check(user)
    session = session_for_annotator(session_id=session_id, user=user, lock=True)
    if session.status != SessionStatus.ACTIVE:
        raise ConflictError(_ended(session))
    if session.initial_status != CallStatus.DONE:
        raise ConflictError("the initial answer is not there yet")
    instruction = _plain(instruction)
    if not instruction:
        raise SubmissionError("write an instruction", missing=["instruction"])
    text_length_check(field="instruction", text=instruction, limit=INSTRUCTION_MAX_CHARS)
    if instruction_type not in InstructionType.values:
        raise SubmissionError(
            "tick the instruction's type: information-seeking or stylistic",
            missing=["instruction_type"],
        )
    last = _last_turn(session)
    next_position = 1 if last is None else last.position + 1
    if position is not None and position != next_position:
        raise ConflictError(OUT_OF_DATE)
    if last is not None and not last.rating:
        raise ConflictError("rate the last revision before the next instruction")
    position = next_position
    if position > session.study.max_turns:
        raise ConflictError(f"a session has at most {session.study.max_turns} turns")
    turn = Turn.objects.create(
        session=session,
        position=position,
        instruction=instruction,
        instruction_type=instruction_type,
        previous_answer=_previous_answer(session, last),
        call_status=CallStatus.PENDING,
        started_at=now,
        call_started_at=now,
    )
    generation_enqueue(what="turn", object_id=turn.pk)
    return turn


@transaction.atomic
def call_retry(*, session_id: int, user: AbstractBaseUser, now: datetime) -> None:
    """Enqueue again the failed model call of the session (initial answer or last turn); not for
    an account an admin blocked (WorkerBlockedError: a model call, as a new turn is)."""
    account_block_check(user)
    session = session_for_annotator(session_id=session_id, user=user, lock=True)
    if session.status != SessionStatus.ACTIVE:
        raise ConflictError(_ended(session))
    if session.initial_status == CallStatus.FAILED:
        RevisionSession.objects.filter(pk=session.pk).update(
            initial_status=CallStatus.PENDING,
            initial_error="",
            initial_partial="",
            initial_started_at=now,
        )
        generation_enqueue(what="initial", object_id=session.pk)
        return
    last = _last_turn(session)
    if last is None or last.call_status != CallStatus.FAILED:
        raise ConflictError("nothing to retry: no model call has failed")
    Turn.objects.filter(pk=last.pk).update(
        call_status=CallStatus.PENDING, call_error="", partial_answer="", call_started_at=now
    )
    generation_enqueue(what="turn", object_id=last.pk)


@transaction.atomic
def turn_withdraw(*, session_id: int, user: AbstractBaseUser) -> Turn:
    """Take back the last instruction when its model call failed (the model keeps failing):
    the turn had no answer and no rating, so nothing measured is lost; the annotator may send
    it again later, write another, or end the session. Returns the withdrawn (deleted) turn.

    An account an admin blocked is refused (WorkerBlockedError): it can send no instruction,
    so a withdrawn one would be lost; the turn stays as sent, read on the session's read-only
    page, to be retried or withdrawn once the block is lifted."""
    session = session_for_annotator(session_id=session_id, user=user, lock=True)
    if session.status != SessionStatus.ACTIVE:
        raise ConflictError(_ended(session))
    if account_blocked(user):
        raise WorkerBlockedError(WITHDRAW_REFUSED_BLOCKED)
    last = _last_turn(session)
    if last is None or last.call_status != CallStatus.FAILED or last.rating:
        raise ConflictError("only an instruction whose model call failed can be withdrawn")
    last.delete()
    return last


@transaction.atomic
def session_give_up(*, session_id: int, user: AbstractBaseUser, now: datetime) -> RevisionSession:
    """Give up the annotator's session whose last model call failed before any turn was rated
    (the endpoint keeps failing): kept, marked given up by them now, and counted nowhere.

    It keeps its (question, system), so the pair is not handed out again while the system may
    still be failing, and its question stays seen by the annotator: their next session is on
    another question."""
    session = session_for_annotator(session_id=session_id, user=user, lock=True)
    if session.status != SessionStatus.ACTIVE:
        raise ConflictError(_ended(session))
    if session.turns.exclude(rating="").exists():
        raise ConflictError("a session with a rated turn is ended, not given up")
    last = _last_turn(session)
    failed = session.initial_status == CallStatus.FAILED or (
        last is not None and last.call_status == CallStatus.FAILED
    )
    if not failed:
        raise ConflictError("only a session whose model call failed can be given up")
    session.status, session.given_up_at, session.given_up_by = SessionStatus.GIVEN_UP, now, user
    session.save(update_fields=["status", "given_up_at", "given_up_by"])
    return session


@transaction.atomic
def session_reopen(*, session_id: int, user: AbstractBaseUser, now: datetime) -> RevisionSession:
    """Put a given-up session's (question, system) back for annotators (a researcher's action,
    once its system answers again): the session stays given up, with who gave it up and when,
    and is marked reopened by `user` now; it holds the pair no more, so the next annotator who
    has not seen the question gets it (never its own annotator: they saw the question).

    Refused (nothing changed) unless the session is given up and not reopened yet, and while
    another annotator's session of the pair is in progress or finished."""
    sessions = RevisionSession.objects.select_related(
        "question", "system", "annotator", "reopened_by"
    )
    try:
        # FOR NO KEY UPDATE: two reopens of it wait for each other; nothing else is held up.
        session = sessions.select_for_update(no_key=True, of=("self",)).get(pk=session_id)
    except RevisionSession.DoesNotExist:
        raise NotFoundError("no such session") from None
    if session.status != SessionStatus.GIVEN_UP:
        raise ConflictError(
            f"session {session.pk} is {session.get_status_display().lower()}, not given up: "
            "only a given-up session can be reopened"
        )
    holder = (
        RevisionSession.objects.filter(
            WORKS_PAIR, question=session.question_id, system=session.system_id
        )
        .select_related("annotator")
        .first()
    )
    if holder is not None:
        raise ConflictError(
            f"session {session.pk}'s question and system {session.system.name} already have "
            f"session {holder.pk} by {holder.annotator.get_username()}, "
            f"{holder.get_status_display().lower()}"
        )
    if session.reopened_at is not None:
        by = session.reopened_by.get_username() if session.reopened_by else "someone"
        raise ConflictError(
            f"session {session.pk} was reopened already, by {by} at "
            f"{session.reopened_at:%Y-%m-%d %H:%M} UTC"
        )
    session.reopened_at, session.reopened_by = now, user
    session.save(update_fields=["reopened_at", "reopened_by"])
    return session


def _ended(session: RevisionSession) -> str:
    """Why an action of a session in progress is refused on this one."""
    if session.status == SessionStatus.GIVEN_UP:
        return "the session was given up"
    return "the session is finished"


def text_length_check(*, field: str, text: str, limit: int) -> None:
    """Refuse a typed text longer than its limit, saying by how much (the form keeps it)."""
    if len(text) > limit:
        raise SubmissionError(
            f"the {field} is {len(text):,} characters long; at most {limit:,} are taken: "
            "shorten it and send it again"
        )


def _plain(text: str) -> str:
    """The text with its line breaks as the model's answers have them (LF) and no outer blanks.

    Browsers send a textarea's line breaks as CRLF: compared as sent, an answer left as the
    model wrote it would count as the annotator's edit (and stay in the answer history even
    when rated bad)."""
    return text.replace("\r\n", "\n").replace("\r", "\n").strip()


@transaction.atomic
def turn_rate(
    *,
    session_id: int,
    user: AbstractBaseUser,
    rating: str,
    comment: str,
    edited_answer: str = "",
    now: datetime,
    turn_id: int | None = None,
) -> Turn:
    """Rate the last revision good/neutral/bad with a comment; an edit only when not good.

    `turn_id` is the turn the form was shown for (the page's form sends it): a rating for a
    turn that is not the last one now is refused, never saved against the last. None (callers
    with no page) rates the last turn.
    """
    session = session_for_annotator(session_id=session_id, user=user, lock=True)
    last = _last_turn(session)
    if turn_id is not None and (last is None or last.pk != turn_id):
        raise ConflictError(OUT_OF_DATE)
    if last is None or last.call_status != CallStatus.DONE:
        raise ConflictError("there is no revision to rate")
    if last.rating:
        raise ConflictError("this revision is already rated")
    rating = rating.strip().lower()  # "Good", " bad ": any case, as the imports take them
    if rating not in Rating.values:
        raise SubmissionError("rate the revision good, neutral or bad", missing=["rating"])
    comment = _plain(comment)
    if not comment:
        raise SubmissionError("a comment explaining the rating is required", missing=["comment"])
    text_length_check(field="comment", text=comment, limit=COMMENT_MAX_CHARS)
    edited_answer = _plain(edited_answer)
    text_length_check(field="edited answer", text=edited_answer, limit=last.edited_answer_limit)
    if edited_answer == _plain(last.answer):
        edited_answer = ""  # the model's answer sent back as it was shown: not an edit
    if edited_answer and rating == Rating.GOOD:
        raise SubmissionError("only a revision rated neutral or bad can be edited")
    last.rating, last.comment, last.edited_answer = rating, comment, edited_answer
    last.rated_at = now
    last.seconds = (now - last.started_at).total_seconds() if last.started_at else None
    last.save(update_fields=["rating", "comment", "edited_answer", "rated_at", "seconds"])
    if last.position >= session.study.max_turns:
        _finish(session, satisfied=False, now=now)
    return last


def _finish(session: RevisionSession, *, satisfied: bool, now: datetime) -> None:
    session.status, session.satisfied, session.finished_at = SessionStatus.FINISHED, satisfied, now
    session.save(update_fields=["status", "satisfied", "finished_at"])


@transaction.atomic
def session_finish(
    *, session_id: int, user: AbstractBaseUser, now: datetime, turns: int | None = None
) -> RevisionSession:
    """End the session because the annotator is satisfied with the answer.

    `turns` is how many turns the page showed (its form sends it): satisfied with the answer
    after another number of turns is not satisfied with this one, and is refused. None
    (callers with no page) ends the session as it is.
    """
    session = session_for_annotator(session_id=session_id, user=user, lock=True)
    if session.status != SessionStatus.ACTIVE:
        return session
    last = _last_turn(session)
    if turns is not None and turns != (0 if last is None else last.position):
        raise ConflictError(OUT_OF_DATE)
    if last is not None and not last.rating:
        raise ConflictError("rate the last revision before finishing")
    if session.initial_status != CallStatus.DONE:
        raise ConflictError("the initial answer is not there yet")
    _finish(session, satisfied=True, now=now)
    return session


# The error of a call failed for being pending too long: ours, naming no endpoint or model, so
# the session page may tell the annotator that this is why.
STALE_CALL_ERROR = "the model call did not finish in time; retry"


def stale_calls_fail(*, session: RevisionSession, now: datetime) -> None:
    """Mark the session's calls pending for longer than STALE_AFTER as failed (retry shown)."""
    cutoff = now - STALE_AFTER
    message = STALE_CALL_ERROR
    started = session.initial_started_at or session.created_at
    if session.initial_status == CallStatus.PENDING and started < cutoff:
        RevisionSession.objects.filter(pk=session.pk, initial_status=CallStatus.PENDING).update(
            initial_status=CallStatus.FAILED, initial_error=message, initial_partial=""
        )
    _stale_turns_fail(session_id=session.pk, cutoff=cutoff, message=message)


def _stale_turns_fail(*, session_id: int, cutoff: datetime, message: str) -> None:
    """Turn.objects.filter(call_started_at__lt=cutoff, session_id=session_id,
    call_status=PENDING).update(call_status=FAILED, call_error=message, partial_answer=""),
    written as the SQL that update gives: run on every session page view and poll, its
    compilation by the ORM cost more CPU than the database spent on it."""
    db = router.db_for_write(Turn)
    connection = connections[db]
    name = connection.ops.quote_name
    table = name(Turn._meta.db_table)
    sql = (
        f"UPDATE {table} SET {name('call_status')} = %s, {name('call_error')} = %s, "  # noqa: S608 (names only)
        f"{name('partial_answer')} = %s WHERE ({table}.{name('call_started_at')} < %s "
        f"AND {table}.{name('call_status')} = %s AND {table}.{name('session_id')} = %s)"
    )
    params = [
        CallStatus.FAILED.value,
        message,
        "",
        connection.ops.adapt_datetimefield_value(cutoff),
        CallStatus.PENDING.value,
        session_id,
    ]
    with transaction.mark_for_rollback_on_error(using=db), prepared_cursor(connection) as cursor:
        cursor.execute(sql, params)
