"""Export a study's sessions in the published KIWI format (JSON Lines) and as CSV (one row a turn).

Imported sessions come back with every field they had, unknown ones included, so import ->
export -> import stores the same data. Sessions still in progress are left out; of a finished
session only rated turns are written. As the label exports leave out the labels of annotators
whose kind is not decided, a session of an account whose kind no researcher has decided yet is
left out (annotate.revision.counting): the exports hold what the report counts.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import IO, Any

from django.db.models import Prefetch

from annotate.errors import NotFoundError
from annotate.revision.counting import counted_session_q, imported_annotator
from annotate.revision.models import RevisionSession, SessionStatus, Study, Turn
from annotate.selectors.names import names_there_are
from annotate.services.files import csv_writer

CSV_COLUMNS = [
    "study",
    "session",
    "question",
    "model_name",
    "annotator",
    "turn",
    "instruction_type",
    "instruction",
    "previous_answer",
    "answer_1",
    "answer_2",
    "rating",
    "comment",
    "instruction_category",
    "error_category",
    "seconds",
]
TURN_LABEL_FIELDS = ("instruction_type", "instruction_category", "error_category")


def study_get(*, name: str) -> Study:
    try:
        return Study.objects.get(name=name)
    except Study.DoesNotExist:
        known = names_there_are(Study.objects.all(), what="studies")
        raise NotFoundError(f"no study is named {name!r} ({known})") from None


def _finished_sessions(
    study: Study, *, done_in_app: bool = False, counted_only: bool = True
) -> Iterator[RevisionSession]:
    """The study's finished sessions with their rated turns; `counted_only`: of imported
    sessions and accounts whose kind is decided (the exports), else every one."""
    rated = Turn.objects.exclude(rating="").order_by("position")
    sessions = RevisionSession.objects.filter(study=study, status=SessionStatus.FINISHED)
    if counted_only:
        sessions = sessions.filter(counted_session_q())
    if done_in_app:  # not imported: an imported session keeps its line's key in source_key
        sessions = sessions.filter(source_key="")
    return (
        sessions.select_related("question", "system", "annotator")
        .prefetch_related(Prefetch("turns", queryset=rated))
        .order_by("source_position", "id")
        .iterator(chunk_size=500)
    )


def session_record(session: RevisionSession) -> dict[str, Any]:
    """Return one session as a KIWI JSON object (unknown imported fields included); a session
    done in the app names its annotator (`annotator`, as the published data does) and says
    whether it ended satisfied (`satisfied`)."""
    record = dict(session.extra)
    if session.annotator is not None:
        record["annotator"] = session.annotator.username
        # Not a KIWI field: whether the annotator ended it satisfied (rather than at the turn
        # limit), which the import reads back. An imported session keeps its line's fields.
        record["satisfied"] = session.satisfied
    record.update(
        original_question=session.question.text,
        model_name=session.system.name,
        initial_answer=session.initial_answer,
        interaction=[_turn_record(turn) for turn in session.turns.all()],
    )
    return record


def app_session_records(*, study: Study) -> Iterator[dict[str, Any]]:
    """Return every finished session done in the app as the export writes it, whatever its
    account's kind (an import recognises a line as one of them: annotate.revision.services
    .imports)."""
    sessions = _finished_sessions(study, done_in_app=True, counted_only=False)
    return (session_record(session) for session in sessions)


def _turn_record(turn: Turn) -> dict[str, Any]:
    record = dict(turn.extra)
    record.update(
        instruction=turn.instruction,
        answer_1=turn.answer,
        answer_2=turn.edited_answer,
        rating=turn.rating,
        comment=turn.comment,
    )
    for name in TURN_LABEL_FIELDS:
        if getattr(turn, name):
            record[name] = getattr(turn, name)
    return record


def sessions_export_jsonl(*, study: Study, output: IO[str]) -> int:
    """Write the study's counted finished sessions as JSON Lines; return how many."""
    count = 0
    for session in _finished_sessions(study):
        output.write(json.dumps(session_record(session), ensure_ascii=False) + "\n")
        count += 1
    return count


def _annotator(session: RevisionSession) -> str:
    """Who did the session: the app's annotator, else what an imported file said."""
    if session.annotator is not None:
        return session.annotator.username
    return imported_annotator(session.extra)


def sessions_export_csv(*, study: Study, output: IO[str]) -> int:
    """Write one CSV row per rated turn of the study's counted finished sessions; return how
    many rows."""
    writer = csv_writer(output)
    writer.writerow(CSV_COLUMNS)
    count = 0
    for session in _finished_sessions(study):
        for turn in session.turns.all():
            row = [
                study.name,
                session.pk,
                session.question.text,
                session.system.name,
                _annotator(session),
                turn.position,
                turn.instruction_type,
                turn.instruction,
                turn.previous_answer,
                turn.answer,
                turn.edited_answer,
                turn.rating,
                turn.comment,
                turn.instruction_category,
                turn.error_category,
                "" if turn.seconds is None else round(turn.seconds, 3),
            ]
            writer.writerow(row)
            count += 1
    return count
