"""Take an annotator's answers for one assignment: validate everything, then write.

Form fields never name a system: `r<N>_q<M>` answers question M about the response shown N-th
(System A is N = 1), `r<N>_score` is its direct score. The assignment's display order maps N back
to a system only here, on the server.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from django.contrib.auth.models import AbstractBaseUser
from django.db import connection, transaction
from django.utils import timezone

from annotate.compiled import CompiledQuery, prepared_cursor
from annotate.errors import (
    AssignmentNotLiveError,
    BatchClosedError,
    ConflictError,
    NotFoundError,
    SubmissionError,
)
from annotate.models import (
    Annotator,
    Assignment,
    AssignmentStatus,
    DirectScore,
    Label,
    LabelValue,
    ProjectMode,
    Task,
)
from annotate.selectors.results import blocked_annotator_ids
from annotate.services.assignments import counted_assignments

LABEL_VALUES = {"yes": LabelValue.YES, "no": LabelValue.NO, "unknown": LabelValue.UNKNOWN}
SCORE_VALUES = {str(score): score for score in range(1, 6)}
FIELD_PATTERN = re.compile(r"^r(\d+)_(?:q(\d+)|score)$")


class Phase:
    SCORES = "scores"
    LABELS = "labels"


class Outcome:
    ACCEPTED = "accepted"  # labels written
    LATE = "late"  # kept on the assignment, not counted
    SCORED = "scored"  # first phase of `both` mode done; questions come next
    UNCHANGED = "unchanged"  # identical repeat


@dataclass(frozen=True)
class SubmitResult:
    assignment: Assignment
    outcome: str

    @property
    def questions_next(self) -> bool:
        """Whether the task goes on with its decomposed questions: its direct scores were just
        saved, or sent again (a double click, a resent form) before the questions were."""
        return self.outcome == Outcome.SCORED or (
            self.outcome == Outcome.UNCHANGED and self.assignment.submitted_at is None
        )

    @property
    def accepted(self) -> bool:
        """Whether the task's answers are stored and count: accepted now, or by an identical
        send before this one."""
        return self.outcome in (Outcome.ACCEPTED, Outcome.UNCHANGED) and not (
            self.assignment.is_late or self.assignment.submitted_at is None
        )


def score_field(position: int) -> str:
    return f"r{position}_score"


def question_field(position: int, question_position: int) -> str:
    return f"r{position}_q{question_position}"


def expected_fields(*, phase: str, responses: int, question_positions: list[int]) -> list[str]:
    """Return the field names a complete submission of this phase has, in page order."""
    if phase == Phase.SCORES:
        return [score_field(n) for n in range(1, responses + 1)]
    return [question_field(n, m) for n in range(1, responses + 1) for m in question_positions]


def assignment_phase(*, assignment: Assignment, mode: str) -> str:
    """Return what the annotator answers next: direct scores, or the decomposed questions."""
    if mode == ProjectMode.DIRECT_SCORE:
        return Phase.SCORES
    if mode == ProjectMode.BOTH and assignment.scored_at is None:
        return Phase.SCORES
    return Phase.LABELS


def assignment_submit(
    *,
    assignment_id: int,
    annotator: Annotator | None = None,
    user: AbstractBaseUser | None = None,
    answers: Mapping[str, object],
    active_seconds: object = 0,
    now: datetime,
) -> SubmitResult:
    """Validate a submission for the annotator's assignment and store it.

    The assignment must be the `annotator`'s, or (for a page, which knows the logged-in user
    and need not read the annotator first) the annotator of `user`'s.
    Raises NotFoundError (not theirs), AssignmentNotLiveError (returned or rejected),
    SubmissionError (missing, extra or bad values) and ConflictError (different answers after a
    successful submit). Nothing is written when any of them is raised.
    """
    if (annotator is None) == (user is None):
        raise TypeError("assignment_submit takes an annotator or a user, not both")
    with transaction.atomic():
        assignment = _locked_assignment(assignment_id=assignment_id, annotator=annotator, user=user)
        _closed_batch_check(assignment=assignment, now=now)
        mode = assignment.task.batch.project.mode
        question_ids, responses = _instruction_rows(assignment=assignment)
        phase = _phase_of_answers(assignment=assignment, mode=mode, answers=answers)
        fields = expected_fields(
            phase=phase,
            responses=len(assignment.display_order),
            question_positions=sorted(question_ids),
        )
        cleaned = _clean(answers=answers, fields=fields, phase=phase)
        seconds = _clean_seconds(value=active_seconds, assignment=assignment, now=now)
        previous = _previous_answers(assignment=assignment, mode=mode, phase=phase)
        if previous is not None:
            if previous == cleaned:
                return SubmitResult(assignment, Outcome.UNCHANGED)
            raise ConflictError(
                "You already submitted different answers for this task; nothing was changed."
            )
        assignment.active_seconds += seconds
        if mode == ProjectMode.BOTH and phase == Phase.SCORES:
            assignment.direct_scores = cleaned
            assignment.scored_at = now
            assignment.save(update_fields=["direct_scores", "scored_at", "active_seconds"])
            return SubmitResult(assignment, Outcome.SCORED)
        return _finish(
            assignment=assignment,
            mode=mode,
            cleaned=cleaned,
            question_ids=question_ids,
            responses=responses,
            now=now,
        )


def _locked_assignment(
    *, assignment_id: int, annotator: Annotator | None, user: AbstractBaseUser | None
) -> Assignment:
    if annotator is not None:
        assignment = _LOCKED_OF_ANNOTATOR.first(assignment_id=assignment_id, owner_id=annotator.pk)
    else:
        assignment = _LOCKED_OF_USER.first(assignment_id=assignment_id, owner_id=user.pk)
    if assignment is None:
        raise NotFoundError("No such assignment.")
    if assignment.status in (AssignmentStatus.RETURNED, AssignmentStatus.REJECTED):
        raise AssignmentNotLiveError(
            f"This assignment was {assignment.get_status_display().lower()}; it takes no answers."
        )
    return assignment


def _closed_batch_check(*, assignment: Assignment, now: datetime) -> None:
    """Refuse answers to a claim past its time in a deactivated batch (TaskPage.batch_closed):
    a live claim may still be finished there, a lapsed one no longer."""
    live = assignment.status == AssignmentStatus.CLAIMED and assignment.expires_at > now
    if live or assignment.submitted_at is not None or assignment.task.batch.active:
        return
    raise BatchClosedError(
        "This batch is closed and the time for this task is up: it takes no more answers, "
        "and nothing was saved."
    )


def _locked_of(owner: str) -> CompiledQuery:
    """The assignment of an annotator (or of a user's annotator) under its row lock, with its
    task, batch, project and annotator: compiled once (annotate.compiled), read every submit."""
    return CompiledQuery(
        Assignment,
        lambda assignment_id, owner_id: (
            Assignment.objects.select_for_update(of=("self",))
            .select_related("task__batch__project", "annotator")
            .filter(pk=assignment_id, **{owner: owner_id})
        ),
        "assignment_id",
        "owner_id",
    )


_LOCKED_OF_ANNOTATOR = _locked_of("annotator_id")
_LOCKED_OF_USER = _locked_of("annotator__user_id")


def _instruction_rows(
    *, assignment: Assignment
) -> tuple[dict[int, int], list[tuple[int, int, bool, bool]]]:
    """Return the instruction's {question position: id} and its responses to the assignment's
    systems as (system id, response id, labelled, scored) by this annotator, in one query.

    One UNION ALL instead of two reads (a round trip less per submit), in plain SQL (the ORM
    spent more CPU compiling it than the database running it). Whether the annotator already
    labelled or scored a response is looked up through the (response, annotator) indexes;
    _unlabelled_response_ids raises on it only once the answers are known to be valid.
    """
    system_ids = list(assignment.display_order)
    marks = ", ".join(["%s"] * len(system_ids)) or "NULL"
    instruction_id = assignment.task.instruction_id
    annotator_id = assignment.annotator_id
    with prepared_cursor(connection) as cursor:
        cursor.execute(
            _INSTRUCTION_ROWS.format(marks=marks),
            [instruction_id, annotator_id, annotator_id, instruction_id, *system_ids],
        )
        rows = cursor.fetchall()
    question_ids = {key: row_id for kind, key, row_id, _, _ in rows if kind == 0}
    responses = [
        (key, row_id, bool(labelled), bool(scored))
        for kind, key, row_id, labelled, scored in rows
        if kind == 1
    ]
    return question_ids, responses


# Question's, Response's, Label's and DirectScore's tables (no db_table or db_column of their own).
_INSTRUCTION_ROWS = """
    SELECT 0, position, id, 0, 0 FROM annotate_question WHERE instruction_id = %s
    UNION ALL
    SELECT 1, r.system_id, r.id,
        CASE WHEN EXISTS(
            SELECT 1 FROM annotate_label l WHERE l.response_id = r.id AND l.annotator_id = %s
        ) THEN 1 ELSE 0 END,
        CASE WHEN EXISTS(
            SELECT 1 FROM annotate_directscore d WHERE d.response_id = r.id AND d.annotator_id = %s
        ) THEN 1 ELSE 0 END
    FROM annotate_response r WHERE r.instruction_id = %s AND r.system_id IN ({marks})
"""


def _phase_of_answers(*, assignment: Assignment, mode: str, answers: Mapping[str, object]) -> str:
    phase = assignment_phase(assignment=assignment, mode=mode)
    only_scores = bool(answers) and all(key.endswith("_score") for key in answers)
    if mode == ProjectMode.BOTH and phase == Phase.LABELS and only_scores:
        return Phase.SCORES  # a repeat of the first phase: checked against the stored scores
    return phase


def _clean(*, answers: Mapping[str, object], fields: list[str], phase: str) -> dict[str, object]:
    extra = sorted(set(answers) - set(fields))
    if extra:
        raise SubmissionError(
            "Unexpected field(s): " + ", ".join(extra[:10]) + ". " + _phase_hint(phase)
        )
    missing = [name for name in fields if _blank(answers.get(name))]
    allowed = SCORE_VALUES if phase == Phase.SCORES else LABEL_VALUES
    cleaned: dict[str, object] = {}
    invalid: list[str] = []
    for name in fields:
        if name in missing:
            continue
        value = answers[name]
        key = value.strip().lower() if isinstance(value, str) else None
        if key not in allowed:
            invalid.append(f"Field {name}: '{str(value)[:20]}' is not one of {', '.join(allowed)}.")
            continue
        cleaned[name] = allowed[key] if phase == Phase.SCORES else key
    problems = invalid[:10]
    if missing:
        problems.insert(
            0, f"{len(missing)} of {len(fields)} answers are missing: " + ", ".join(missing[:10])
        )
    if problems:
        # Every problem at once: fixing the missing ones alone must not reveal another round.
        raise SubmissionError(" ".join(problems), missing=missing, others=invalid[:10])
    return cleaned


def _blank(value: object) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def _phase_hint(phase: str) -> str:
    if phase == Phase.SCORES:
        return "This step takes one direct score (1-5) per response, fields r<N>_score."
    return "This step takes the decomposed questions, fields r<N>_q<M> (yes, no or unknown)."


def _clean_seconds(*, value: object, assignment: Assignment, now: datetime) -> float:
    """Return the active time the page reported, clamped to what could have elapsed."""
    try:
        seconds = float(value or 0)
    except (TypeError, ValueError):
        raise SubmissionError("active_seconds must be a number of seconds.") from None
    if seconds != seconds:  # NaN
        seconds = 0.0
    elapsed = (now - assignment.claimed_at).total_seconds()
    unaccounted = max(elapsed - assignment.active_seconds, 0.0)
    return min(max(seconds, 0.0), unaccounted)


def _previous_answers(*, assignment: Assignment, mode: str, phase: str) -> dict | None:
    if mode == ProjectMode.BOTH and phase == Phase.SCORES:
        return assignment.direct_scores
    if assignment.submitted_at is None:
        return None
    return (assignment.submission or {}).get(phase)


def _finish(
    *,
    assignment: Assignment,
    mode: str,
    cleaned: dict[str, object],
    question_ids: dict[int, int],
    responses: list[tuple[int, int, bool, bool]],
    now: datetime,
) -> SubmitResult:
    submission = {
        ProjectMode.DRFR: {Phase.LABELS: cleaned},
        ProjectMode.DIRECT_SCORE: {Phase.SCORES: cleaned},
        ProjectMode.BOTH: {Phase.SCORES: assignment.direct_scores, Phase.LABELS: cleaned},
    }[mode]
    assignment.submission = submission
    assignment.submitted_at = now
    live = assignment.status == AssignmentStatus.CLAIMED and assignment.expires_at > now
    # A crowd worker blocked while holding the claim (the block ended it): the answers are kept
    # as their other work is, counted nowhere and holding no slot (is_late), and count again
    # only if an unblock finds their task a free slot (annotate.crowd.services.review).
    held_back = not live and _worker_blocked(assignment)
    if not held_back and not _has_slot(assignment=assignment, now=now):
        assignment.status = AssignmentStatus.EXPIRED
        assignment.is_late = True
        assignment.save(update_fields=SUBMIT_FIELDS)
        return SubmitResult(assignment, Outcome.LATE)
    assignment.status = AssignmentStatus.SUBMITTED
    assignment.is_late = held_back
    assignment.save(update_fields=SUBMIT_FIELDS)
    # Practice answers stay on the assignment only: no label or score row, so no report,
    # majority or export can ever count them.
    if not assignment.task.batch.project.practice:
        _write_rows(
            assignment=assignment,
            submission=submission,
            question_ids=question_ids,
            response_ids=_unlabelled_response_ids(assignment=assignment, responses=responses),
        )
    return SubmitResult(assignment, Outcome.ACCEPTED)


# What a final submit changes on the assignment (and nothing else, so no other column is
# rewritten from a possibly older copy).
SUBMIT_FIELDS = ["submission", "submitted_at", "status", "is_late", "active_seconds"]


def _worker_blocked(assignment: Assignment) -> bool:
    return blocked_annotator_ids().filter(annotator_id=assignment.annotator_id).exists()


def _has_slot(*, assignment: Assignment, now: datetime) -> bool:
    """A live claim keeps its slot; a late one gets a slot only if the task still has one."""
    if assignment.status == AssignmentStatus.CLAIMED and assignment.expires_at > now:
        return True
    task = Task.objects.select_for_update().get(pk=assignment.task_id)
    taken = task.assignments.filter(counted_assignments(now=now)).exclude(pk=assignment.pk).count()
    return taken < assignment.task.batch.project.assignments_per_task


def _write_rows(
    *,
    assignment: Assignment,
    submission: dict,
    question_ids: dict[int, int],
    response_ids: list[int],
) -> None:
    labels = []
    for name, value in (submission.get(Phase.LABELS) or {}).items():
        position, question_position = (int(group) for group in FIELD_PATTERN.match(name).groups())
        labels.append(
            (question_ids[question_position], response_ids[position - 1], LABEL_VALUES[value])
        )
    _insert_labels(assignment=assignment, labels=labels)
    DirectScore.objects.bulk_create(
        DirectScore(
            response_id=response_ids[int(FIELD_PATTERN.match(name).group(1)) - 1],
            annotator=assignment.annotator,
            score=score,
            assignment=assignment,
        )
        for name, score in (submission.get(Phase.SCORES) or {}).items()
    )


def _unlabelled_response_ids(
    *, assignment: Assignment, responses: list[tuple[int, int, bool, bool]]
) -> list[int]:
    """Return the response ids in display order, from _instruction_rows' response rows.

    Raises ConflictError if the annotator already has a label or score on one of them.
    """
    response_by_system = {}
    for system_id, response_id, labelled, scored in responses:
        if labelled or scored:
            raise ConflictError("You already labelled these responses in another project.")
        response_by_system[system_id] = response_id
    return [response_by_system[system_id] for system_id in assignment.display_order]


def _insert_labels(*, assignment: Assignment, labels: list[tuple[int, int, int]]) -> None:
    """Insert (question id, response id, value) rows as labels of the assignment's annotator.

    On PostgreSQL one INSERT from three arrays: the ORM's bulk_create spends several times the
    database's own time building and converting 75 model instances per submission.
    """
    if not labels:
        return
    if connection.vendor != "postgresql":
        Label.objects.bulk_create(
            Label(
                question_id=question_id,
                response_id=response_id,
                annotator_id=assignment.annotator_id,
                value=value,
                assignment=assignment,
            )
            for question_id, response_id, value in labels
        )
        return
    question_ids, response_ids, values = (list(column) for column in zip(*labels, strict=True))
    with prepared_cursor(connection) as cursor:
        cursor.execute(
            _INSERT_LABELS,
            [assignment.annotator_id, assignment.id, timezone.now()]
            + [question_ids, response_ids, values],
        )


# Label's table and columns (the model has no db_table or db_column of its own).
_INSERT_LABELS = """
    INSERT INTO annotate_label
        (question_id, response_id, value, annotator_id, assignment_id, created_at)
    SELECT question_id, response_id, value, %s, %s, %s
    FROM unnest(%s::bigint[], %s::bigint[], %s::smallint[]) AS row(question_id, response_id, value)
"""
