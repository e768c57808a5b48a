"""Import revision data: the published KIWI sessions and a study's questions with documents.

Both are JSON Lines, validated line by line before anything is written: each wrong line (up to
MAX_PROBLEMS) is named with the file, line and field in one ImportFileError, and nothing is
stored (one transaction). Fields
the app does not know are kept in `extra` and given back on export.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.template.defaultfilters import pluralize
from django.utils import timezone

from annotate.engine.models import Endpoint
from annotate.engine.services.runs import engine_run_check_may_start
from annotate.errors import ImportFileError, PermissionDeniedError
from annotate.revision.history import previous_answers
from annotate.revision.models import (
    EDITED_ANSWER_MARGIN_CHARS,
    EDITED_ANSWER_MAX_CHARS,
    Document,
    ErrorCategory,
    InstructionCategory,
    InstructionType,
    Passage,
    Rating,
    RevisionSession,
    Study,
    StudyQuestion,
    StudySystem,
    Turn,
    edited_answer_limit,
)
from annotate.revision.services.exports import app_session_records
from annotate.services.files import ImportProblems, json_type, read_jsonl
from annotate.services.imports import ImportSummary

SESSION_FIELDS = ("original_question", "model_name", "initial_answer", "interaction")
TURN_FIELDS = ("instruction", "answer_1", "answer_2", "rating", "comment")
# Optional turn fields of this app (human labels); values are checked like the rating.
TURN_LABELS = {
    "instruction_type": InstructionType,
    "instruction_category": InstructionCategory,
    "error_category": ErrorCategory,
}
PARAGRAPH_BREAK = re.compile(r"\n\s*\n")
# A paragraph longer than this many words is cut into pieces of about this size for retrieval.
PASSAGE_MAX_WORDS = 200


@dataclass
class _TurnRow:
    values: dict[str, str]
    extra: dict[str, Any]


@dataclass
class _SessionRow:
    line: int
    key: str  # of the line as the export writes it back (ratings lower-case...)
    raw_key: str  # of the line as given: what imports before the export's key stored
    question: str
    model_name: str
    initial_answer: str
    turns: list[_TurnRow] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    blank_key: str = ""  # as `key`, the question's outer blanks kept (imports before they went)
    satisfied: bool = False  # the export's `satisfied` (kept in `extra` too, as given)

    @property
    def keys(self) -> tuple[str, ...]:
        """Every key the line may be stored under: any of them stored, it is not new."""
        return (self.key, self.raw_key, self.blank_key)


def _text(path: str, line: int, value: Any, name: str, *, blank: bool = True) -> str:
    if not isinstance(value, str):
        raise ImportFileError(path, line, name, f"must be a string, not {json_type(value)}")
    if not blank and not value.strip():
        raise ImportFileError(path, line, name, "must not be empty")
    return value


def _choice(path: str, line: int, value: Any, name: str, choices: type) -> str:
    text = _text(path, line, value, name).strip().lower()
    allowed = [choice.value for choice in choices]
    if text not in allowed:
        raise ImportFileError(
            path, line, name, f"{value!r} is not one of: {', '.join(allowed)} (any case)"
        )
    return text


def _parse_turn(path: str, line: int, index: int, raw: Any) -> _TurnRow:
    where = f"interaction[{index}]"
    if not isinstance(raw, dict):
        raise ImportFileError(path, line, where, "each turn must be a JSON object {...}")
    values: dict[str, str] = {}
    for name in TURN_FIELDS:
        if name not in raw:
            raise ImportFileError(path, line, f"{where}.{name}", "is missing")
    values["instruction"] = _text(
        path, line, raw["instruction"], f"{where}.instruction", blank=False
    )
    values["answer"] = _text(path, line, raw["answer_1"], f"{where}.answer_1")
    values["edited_answer"] = _text(path, line, raw["answer_2"], f"{where}.answer_2")
    limit = edited_answer_limit(values["answer"])
    if len(values["edited_answer"]) > limit:
        raise ImportFileError(
            path, line, f"{where}.answer_2",
            f"is {len(values['edited_answer']):,} characters long; at most {limit:,} are taken "
            f"(the larger of {EDITED_ANSWER_MAX_CHARS:,} and answer_1's length plus "
            f"{EDITED_ANSWER_MARGIN_CHARS:,})",
        )  # fmt: skip
    values["rating"] = _choice(path, line, raw["rating"], f"{where}.rating", Rating)
    values["comment"] = _text(path, line, raw["comment"], f"{where}.comment")
    for name, choices in TURN_LABELS.items():
        if raw.get(name) not in (None, ""):
            values[name] = _choice(path, line, raw[name], f"{where}.{name}", choices)
    # A label given empty (null or "") is kept as given, so that the export writes it back.
    known = {*TURN_FIELDS, *(name for name in TURN_LABELS if raw.get(name) not in (None, ""))}
    return _TurnRow(values, {key: value for key, value in raw.items() if key not in known})


def _content_key(row: dict) -> str:
    canonical = json.dumps(row, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def _as_exported(row: _SessionRow) -> dict[str, Any]:
    """Return the line as the export writes the session back (exports.session_record)."""
    names = {"answer": "answer_1", "edited_answer": "answer_2"}
    return {
        **row.extra,
        "original_question": row.question,
        "model_name": row.model_name,
        "initial_answer": row.initial_answer,
        "interaction": [
            {**turn.extra, **{names.get(k, k): v for k, v in turn.values.items()}}
            for turn in row.turns
        ],
    }


# A line of the other format, told apart by its first field: a file uploaded as the wrong kind
# then says which kind it is, not only that every line lacks a field.
WRONG_KIND = {
    "sessions": "is missing: this is a question with documents, not a KIWI session (upload it "
    'as "Questions with documents", or with import_study)',
    "questions": "is missing: this is a KIWI session, not a question with documents (upload it "
    'as "Sessions (KIWI format)", or with import_sessions)',
}


def _parse_session(path: str, line: int, raw: dict) -> _SessionRow:
    if "original_question" not in raw and "question" in raw and "documents" in raw:
        raise ImportFileError(path, line, "original_question", WRONG_KIND["sessions"])
    for name in SESSION_FIELDS:
        if name not in raw:
            raise ImportFileError(path, line, name, "is missing")
    interaction = raw["interaction"]
    if not isinstance(interaction, list):
        raise ImportFileError(path, line, "interaction", "must be a list of turns [...]")
    session = _SessionRow(
        line=line,
        key="",
        raw_key=_content_key(raw),
        question=_text(path, line, raw["original_question"], "original_question", blank=False),
        model_name=_text(path, line, raw["model_name"], "model_name", blank=False).strip(),
        initial_answer=_text(path, line, raw["initial_answer"], "initial_answer"),
        extra={key: value for key, value in raw.items() if key not in SESSION_FIELDS},
    )
    session.satisfied = raw.get("satisfied", False)
    if not isinstance(session.satisfied, bool):
        raise ImportFileError(
            path, line, "satisfied", f"must be true or false, not {json_type(session.satisfied)}"
        )
    session.turns = [_parse_turn(path, line, i, turn) for i, turn in enumerate(interaction)]
    # Imports before questions were stored without outer blanks keyed the line with them.
    session.blank_key = _content_key(_as_exported(session))
    # "GOOD" and "good" are one rating, " Q " and "Q" one question: a file and its export are
    # one line, imported once.
    session.question = session.question.strip()
    session.key = _content_key(_as_exported(session))
    return session


def _study_for_import(name: str) -> Study:
    name = name.strip()  # " KIWI" made a second study beside "KIWI"
    if not name:
        raise ImportFileError("--study", None, None, "the study needs a name")
    study, _ = Study.objects.get_or_create(name=name, defaults={"created_at": timezone.now()})
    return study


@transaction.atomic
def sessions_import(*, path: str, study_name: str) -> ImportSummary:
    """Import KIWI sessions (JSON Lines) into the study, created if new; re-import adds nothing."""
    problems, rows = ImportProblems(path), []
    for line, raw in read_jsonl(path, problems):
        with problems.line():
            rows.append(_parse_session(path, line, raw))
    problems.raise_found()
    if not rows:  # nothing to import: no study made for it either
        raise ImportFileError(path, None, None, "the file holds no sessions")
    summary = ImportSummary(path=path, what="sessions", rows=len(rows))
    study = _study_for_import(study_name)
    stored = set(
        RevisionSession.objects.filter(study=study)
        .exclude(source_key="")
        .values_list("source_key", flat=True)
    )
    # A session done in the app has no source key: its exported line, imported back into the
    # study, would otherwise come in as a second copy of it and count twice in the report.
    stored.update(_content_key(record) for record in app_session_records(study=study))
    new, first_line = [], {}
    for row in rows:
        repeated = next((first_line[key] for key in row.keys if key in first_line), None)
        if repeated is not None:  # not "already stored": the study had none of it before
            summary.skipped += 1
            summary.skipped_why = summary.skipped_why or (
                f"a session repeated in the file is imported once (line {row.line} repeats"
                f" line {repeated})"
            )
        elif any(key in stored for key in row.keys):
            summary.unchanged += 1
        else:
            stored.update(row.keys)
            first_line.update(dict.fromkeys(row.keys, row.line))
            new.append(row)
    if not new:
        return summary
    systems = _systems_by_name(study, {row.model_name for row in new})
    questions = _questions_by_text(study, [row.question for row in new])
    position = RevisionSession.objects.filter(study=study).count()
    now = timezone.now()
    sessions = RevisionSession.objects.bulk_create(
        [
            RevisionSession(
                study=study,
                question=questions[row.question],
                system=systems[row.model_name],
                status="finished",
                satisfied=row.satisfied,
                initial_answer=row.initial_answer,
                source_key=row.key,
                source_position=position + offset,
                extra=row.extra,
                created_at=now,
                finished_at=now,
            )
            for offset, row in enumerate(new)
        ]
    )
    if sessions and sessions[0].pk is None:  # backends that do not return ids
        by_key = dict(
            RevisionSession.objects.filter(
                study=study, source_key__in=[r.key for r in new]
            ).values_list("source_key", "pk")
        )
        for session, row in zip(sessions, new, strict=True):
            session.pk = by_key[row.key]
    Turn.objects.bulk_create(_turns(sessions, new), batch_size=1000)
    summary.created = len(new)
    return summary


def _turns(sessions: list[RevisionSession], rows: list[_SessionRow]) -> list[Turn]:
    turns = []
    for session, row in zip(sessions, rows, strict=True):
        history = previous_answers(
            row.initial_answer,
            [
                (t.values["answer"], t.values["edited_answer"], t.values["rating"])
                for t in row.turns
            ],
        )
        for position, (turn, previous) in enumerate(zip(row.turns, history, strict=True), 1):
            turns.append(
                Turn(
                    session_id=session.pk,
                    position=position,
                    previous_answer=previous,
                    extra=turn.extra,
                    **turn.values,
                )
            )
    return turns


def _systems_by_name(study: Study, names: set[str]) -> dict[str, StudySystem]:
    systems = {system.name: system for system in study.systems.all()}
    next_position = len(systems)
    for name in sorted(names - systems.keys()):
        systems[name] = StudySystem.objects.create(
            study=study, name=name, position=next_position, live=False
        )
        next_position += 1
    return systems


def _questions_by_text(study: Study, texts: list[str]) -> dict[str, StudyQuestion]:
    """The study's questions by text, made for the texts it has not: matched, and stored, with
    no outer blanks, as the questions' upload (study_upload) stores and matches them."""
    questions = {question.text.strip(): question for question in study.questions.all()}
    next_position = len(questions) + 1
    for text in texts:
        if text.strip() not in questions:
            questions[text.strip()] = StudyQuestion.objects.create(
                study=study, text=text.strip(), position=next_position
            )
            next_position += 1
    return {text: questions[text.strip()] for text in texts}


# --- Study upload: questions with their documents -------------------------------------------


@dataclass
class _DocumentRow:
    title: str
    passages: list[str]
    extra: dict[str, Any]


@dataclass
class _QuestionRow:
    line: int
    text: str
    documents: list[_DocumentRow]
    extra: dict[str, Any]


def passages_split(text: str) -> list[str]:
    """Split a document's text into passages: paragraphs, long ones cut every ~200 words."""
    passages = []
    for paragraph in PARAGRAPH_BREAK.split(text):
        words = paragraph.split()
        for start in range(0, len(words), PASSAGE_MAX_WORDS):
            passages.append(" ".join(words[start : start + PASSAGE_MAX_WORDS]))
    return passages


def _parse_document(path: str, line: int, index: int, raw: Any) -> _DocumentRow:
    where = f"documents[{index}]"
    if not isinstance(raw, dict):
        raise ImportFileError(
            path, line, where, 'each document must be {"title": ..., "text": ...}'
        )
    for name in ("title", "text"):
        if name not in raw:
            raise ImportFileError(path, line, f"{where}.{name}", "is missing")
    title = _text(path, line, raw["title"], f"{where}.title", blank=False)
    text = _text(path, line, raw["text"], f"{where}.text", blank=False)
    extra = {key: value for key, value in raw.items() if key not in ("title", "text")}
    return _DocumentRow(title.strip(), passages_split(text), extra | {"text": text})


def _question_text(path: str, line: int, raw: dict) -> str:
    if "question" not in raw and "original_question" in raw:
        raise ImportFileError(path, line, "question", WRONG_KIND["questions"])
    if "question" not in raw:
        raise ImportFileError(path, line, "question", "is missing")
    return _text(path, line, raw["question"], "question", blank=False).strip()


def _parse_question(path: str, line: int, raw: dict, text: str) -> _QuestionRow:
    if "documents" not in raw:
        raise ImportFileError(path, line, "documents", "is missing")
    documents = raw["documents"]
    if not isinstance(documents, list) or not documents:
        raise ImportFileError(path, line, "documents", "must be a non-empty list of documents")
    return _QuestionRow(
        line=line,
        text=text,
        documents=[_parse_document(path, line, i, doc) for i, doc in enumerate(documents)],
        extra={key: value for key, value in raw.items() if key not in ("question", "documents")},
    )


def _parse_system(spec: str) -> tuple[str, str]:
    name, _, endpoint = spec.partition("=")
    if not name.strip():
        raise ImportFileError("--system", None, None, f"{spec!r}: expected NAME or NAME=ENDPOINT")
    endpoint = endpoint.strip()
    # Checked now: an unknown name would otherwise fail only when an annotator starts a session.
    if endpoint and not Endpoint.objects.filter(name=endpoint).exists():
        raise ImportFileError(
            "--system",
            None,
            None,
            f"{spec!r}: no engine endpoint named {endpoint!r}; create it first "
            "(endpoint_create, or the Endpoints page), or give NAME alone for the offline fake model",
        )
    return name.strip(), endpoint


class SystemEndpointRefused(PermissionDeniedError):
    """A web user named an endpoint for a study's system that they may not make others call."""

    field = "systems"  # the upload page's Systems, the API's `systems`


def _check_may_bind(endpoint_name: str, user: AbstractBaseUser | None) -> None:
    """Refuse a system endpoint the uploader may not spend on: every turn of every annotator's
    session then calls it, so binding a paid one is spending, which only admins may do. (An
    endpoint that does not exist was refused already, by _parse_system.)"""
    if user is None or not endpoint_name:  # the console, or the free offline fake model
        return
    endpoint = Endpoint.objects.filter(name=endpoint_name).first()
    if endpoint is None:
        raise SystemEndpointRefused(f"Systems: no engine endpoint is named {endpoint_name!r}")
    try:
        engine_run_check_may_start(user=user, endpoint=endpoint)
    except PermissionDeniedError:
        raise SystemEndpointRefused(
            f"Systems: endpoint {endpoint_name!r} calls a paid API: only an admin may give it "
            "to a study's system (every session turn calls it)"
        ) from None


def _endpoint_text(endpoint_name: str) -> str:
    return endpoint_name or "the offline fake model"


def _system_set(study: Study, name: str, endpoint: str) -> str:
    """Add the system, or give it this endpoint and make it live; return what changed, in a
    sentence ("" if nothing did): a re-upload naming another endpoint changes who answers."""
    system = StudySystem.objects.filter(study=study, name=name).first()
    if system is None:
        position = study.systems.count()
        StudySystem.objects.create(
            study=study, name=name, endpoint_name=endpoint, position=position
        )
        return f"System {name} added (endpoint: {_endpoint_text(endpoint)})."
    told = []
    if system.endpoint_name != endpoint:
        before, after = _endpoint_text(system.endpoint_name), _endpoint_text(endpoint)
        told.append(f"endpoint changed from {before} to {after}")
    if not system.live:
        told.append("now live (annotators get sessions with it)")
    if not told:
        return ""
    system.endpoint_name, system.live = endpoint, True
    system.save(update_fields=["endpoint_name", "live"])
    return f"System {name}: {'; '.join(told)}."


@transaction.atomic
def study_upload(
    *, path: str, study_name: str, systems: list[str], user: AbstractBaseUser | None = None
) -> ImportSummary:
    """Add questions with documents (JSON Lines) and systems (NAME or NAME=ENDPOINT) to a study.

    A question already in the study is left as it is; a line repeating a question is refused.
    `user` is the web uploader (None: the console), who may name only endpoints they may spend on.
    """
    parsed = [_parse_system(spec) for spec in systems]
    for _name, endpoint in parsed:
        _check_may_bind(endpoint, user)
    rows, seen, problems = [], {}, ImportProblems(path)
    for line, raw in read_jsonl(path, problems):
        with problems.line():
            # Kept before the rest of the line is read: a later line repeating a question
            # whose own line is wrong elsewhere is named in the same round, beside it.
            text = _question_text(path, line, raw)
            first = seen.setdefault(text, line)
            if first != line:
                raise ImportFileError(
                    path, line, "question", f"repeats the question of line {first}"
                )
            rows.append(_parse_question(path, line, raw, text))
    problems.raise_found()
    if not rows:  # an empty file is a wrong file, not "nothing new": no study made for it
        raise ImportFileError(path, None, None, "the file holds no questions")
    study = _study_for_import(study_name)
    told = (_system_set(study, name, endpoint) for name, endpoint in parsed)
    summary = ImportSummary(
        path=path, what="questions", rows=len(rows), changes=[change for change in told if change]
    )
    # Matched as the session import matches them: by the text without outer blanks.
    existing = {question.text.strip(): question for question in study.questions.all()}
    stored_documents = _documents_of([q.pk for text, q in existing.items() if text in seen])
    to_document = []
    for row in rows:
        question = existing.get(row.text)
        if question is None:
            continue
        stored = stored_documents.get(question.pk, [])
        if not stored:
            # Known only from imported sessions: the upload gives it the papers to answer from.
            to_document.append((question, row))
        elif stored != (given := [(d.title, d.extra["text"].strip()) for d in row.documents]):
            problems.add(
                ImportFileError(
                    path,
                    row.line,
                    "documents",
                    f"the study holds this question already, {_documents_differ(stored, given)}"
                    ": a question keeps the documents its sessions were answered from",
                )
            )
    problems.raise_found()
    position = study.questions.count()
    for row in rows:
        if row.text in existing:
            continue
        position += 1
        _question_create(study, row, position)
        summary.created += 1
    for question, row in to_document:
        _documents_create(question, row)
        if row.extra and not question.extra:
            question.extra = row.extra
            question.save(update_fields=["extra"])
    summary.unchanged = len(rows) - summary.created - len(to_document)
    if to_document:
        count = len(to_document)
        summary.changes.append(
            f"Documents added to {count} question{'s' if count > 1 else ''} the study knew only "
            "from imported sessions (annotators may now get sessions on "
            f"{'them' if count > 1 else 'it'})."
        )
    if not study.systems.filter(live=True).exists():
        summary.note = (
            "The study has no system yet, so annotators get no session: name one "
            "(Systems on the upload page, --system with import_study)."
        )
    return summary


def _documents_differ(stored: list[tuple[str, str]], given: list[tuple[str, str]]) -> str:
    """How a question's stored documents (title, text) differ from a line's: other text under
    the same titles (naming those whose text differs), or other titles."""

    def titles(documents: list[tuple[str, str]]) -> str:
        return ", ".join(repr(title) for title, _ in documents)

    if [title for title, _ in stored] == [title for title, _ in given]:
        changed = [pair for pair, (_, text) in zip(stored, given, strict=True) if pair[1] != text]
        return f"with different text under the same title{pluralize(changed)}: {titles(changed)}"
    return (
        f"with other documents: {len(stored)} stored ({titles(stored)}), {len(given)} on this "
        f"line ({titles(given)})"
    )


def _documents_of(question_ids: list[int]) -> dict[int, list[tuple[str, str]]]:
    """The (title, text without outer blanks) of each question's documents, in order."""
    documents: dict[int, list[tuple[str, str]]] = {}
    for question_id, title, text in (
        Document.objects.filter(question_id__in=question_ids)
        .order_by("question_id", "position", "id")
        .values_list("question_id", "title", "text")
    ):
        documents.setdefault(question_id, []).append((title, text.strip()))
    return documents


def _question_create(study: Study, row: _QuestionRow, position: int) -> None:
    question = StudyQuestion.objects.create(
        study=study, text=row.text, position=position, extra=row.extra
    )
    _documents_create(question, row)


def _documents_create(question: StudyQuestion, row: _QuestionRow) -> None:
    passages = []
    for index, doc in enumerate(row.documents):
        extra = {key: value for key, value in doc.extra.items() if key != "text"}
        document = Document.objects.create(
            question=question, position=index, title=doc.title, text=doc.extra["text"], extra=extra
        )
        passages += [
            Passage(document=document, question=question, position=i, text=passage)
            for i, passage in enumerate(doc.passages)
        ]
    Passage.objects.bulk_create(passages)
