"""Read a study's rated turns, classifier labels and re-ratings into plain arrays (four queries).

Only counted work is read (annotate.revision.counting): a session or re-rating of an account
whose kind no researcher has decided yet is left out, as InFoBench labels are. The report reads
all of it as of one moment (revision_reads).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np
from django.db.models import Count

from annotate.revision.counting import (
    LeftOut,
    counted_rerating_q,
    counted_session_q,
    rerating_is_own,
    study_blocked,
    study_waiting_for_kind,
)
from annotate.revision.models import (
    RerateStatus,
    Rerating,
    RevisionSession,
    SessionStatus,
    Study,
    Turn,
)
from annotate.selectors.annotator_kinds import kind_stamps
from evaluation.revision.models import JudgeTask, RevisionJudgeRun, RevisionPrediction, RunStatus
from evaluation.selectors.snapshot import read_snapshot

RATING_CODES = {"good": 0, "neutral": 1, "bad": 2}


@dataclass
class TurnData:
    """Parallel arrays over the study's rated turns of finished sessions, ordered by turn id."""

    turn_id: np.ndarray
    session_id: np.ndarray
    system: list[str]
    position: np.ndarray
    instruction_type: list[str]
    rating: np.ndarray  # 0 good, 1 neutral, 2 bad
    edited: np.ndarray
    instruction_category: list[str]  # human label or ""
    error_category: list[str]
    instruction: list[str]
    systems: list[str]  # in study order
    # Finished sessions per system, those without a rated turn (satisfied at once) included.
    sessions: dict[str, int] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.turn_id)


def counted_turns(*, study: Study):
    """The rated turns of the study's finished sessions that count (their account's kind)."""
    return Turn.objects.filter(
        counted_session_q("session__"), session__study=study, session__status=SessionStatus.FINISHED
    ).exclude(rating="")


def turns_read(*, study: Study) -> TurnData:
    rows = list(
        counted_turns(study=study)
        .order_by("id")
        .values_list(
            "id",
            "session_id",
            "session__system__name",
            "position",
            "instruction_type",
            "rating",
            "edited_answer",
            "instruction_category",
            "error_category",
            "instruction",
            "answer",
        )
    )
    columns = list(zip(*rows, strict=True)) if rows else [()] * 11
    return TurnData(
        turn_id=np.asarray(columns[0], dtype=np.int64),
        session_id=np.asarray(columns[1], dtype=np.int64),
        system=list(columns[2]),
        position=np.asarray(columns[3], dtype=np.int64),
        instruction_type=list(columns[4]),
        rating=np.asarray([RATING_CODES[r] for r in columns[5]], dtype=np.int64),
        # An "edit" equal to the model's answer (an imported answer_2) is no edit.
        edited=np.asarray(
            [bool(e) and e != a for e, a in zip(columns[6], columns[10], strict=True)], dtype=bool
        ),
        instruction_category=list(columns[7]),
        error_category=list(columns[8]),
        instruction=list(columns[9]),
        systems=list(study.systems.order_by("position", "id").values_list("name", flat=True)),
        sessions=dict(
            RevisionSession.objects.filter(
                counted_session_q(), study=study, status=SessionStatus.FINISHED
            )
            .values("system__name")
            .annotate(n=Count("id"))
            .values_list("system__name", "n")
        ),
    )


def figure_fingerprint(*, study: Study) -> str:
    """Name what Figure 2 draws as it stands: each counted rated turn of a finished session (its
    system, position, instruction type and rating), the study's systems in order and every
    annotator kind decision (kind_stamps), hashed.

    Read from the rows rather than counted, so an edit in the admin (a rating, a type, a
    session's status) names a new figure as an added turn or session does; a kind decided or
    taken back names a new one too, whichever sessions it lets in or out.
    """
    turns = (
        counted_turns(study=study)
        .order_by("id")
        .values_list("session__system__name", "position", "instruction_type", "rating")
    )
    systems = study.systems.order_by("position", "id").values_list("name", flat=True)
    digest = hashlib.sha256(repr((list(systems), list(turns), kind_stamps())).encode())
    return f"{study.pk}:{digest.hexdigest()[:24]}"


def latest_run(*, study: Study, task: str) -> RevisionJudgeRun | None:
    return (
        RevisionJudgeRun.objects.filter(study=study, task=task, status=RunStatus.DONE)
        .order_by("-finished_at", "-id")
        .first()
    )


def done_runs(*, study: Study, task: str) -> list[RevisionJudgeRun]:
    return list(
        RevisionJudgeRun.objects.filter(study=study, task=task, status=RunStatus.DONE).order_by(
            "id"
        )
    )


def predictions_read(*, runs: list[RevisionJudgeRun]) -> dict[int, dict[int, str]]:
    """Return {run id: {turn id: label}} for the runs (one query)."""
    result: dict[int, dict[int, str]] = {run.pk: {} for run in runs}
    for run_id, turn_id, label in RevisionPrediction.objects.filter(run__in=runs).values_list(
        "run_id", "turn_id", "label"
    ):
        result[run_id][turn_id] = label
    return result


def reratings_read(*, study: Study) -> list[tuple[int, str, str]]:
    """Return (turn id, original rating, re-rating) of every finished re-rating of the study,
    but one by the session's own annotator (`rerating_is_own`: in the app, or whom an imported
    session's line names): sent under an older rule, it is not a second annotator's rating
    (paper §5). Only counted work: the turn's session and the rater's kind
    (annotate.revision.counting)."""
    rows = (
        Rerating.objects.filter(
            counted_session_q("turn__session__"),
            counted_rerating_q(),
            turn__session__study=study,
            status=RerateStatus.DONE,
        )
        .exclude(turn__rating="")
        .order_by("turn_id", "id")
        .values_list(
            "turn_id",
            "turn__rating",
            "rating",
            "annotator_id",
            "annotator__username",
            "turn__session__annotator_id",
            "turn__session__extra",
        )
    )
    return [
        (turn_id, rating, rerating)
        for turn_id, rating, rerating, rater_id, username, owner_id, extra in rows
        if not rerating_is_own(
            rater_id=rater_id, rater_username=username, owner_id=owner_id, session_extra=extra
        )
    ]


@dataclass(frozen=True)
class RevisionReads:
    """Everything a study's report is computed from, read as of one moment (revision_reads)."""

    turns: TurnData
    waiting_for_kind: LeftOut
    blocked: LeftOut  # finished work of accounts blocked now
    category_run: RevisionJudgeRun | None  # the latest finished instruction-category run
    error_run: RevisionJudgeRun | None  # the latest finished error-category run
    rating_runs: list[RevisionJudgeRun]  # every finished rating run, by id
    predictions: dict[int, dict[int, str]]  # predictions_read of all of those runs
    reratings: list[tuple[int, str, str]]


def revision_reads(*, study: Study) -> RevisionReads:
    """Read the study's report inputs in one snapshot (read_snapshot): a kind decided, a
    session finished or a re-rating sent between two reads would count work in one table and
    not in the next (a turn in Table 2 but its re-rating left out of Table 5, the sessions
    waiting for a kind counted beside the same sessions in the tables)."""
    with read_snapshot():
        category_run = latest_run(study=study, task=JudgeTask.INSTRUCTION_CATEGORY)
        error_run = latest_run(study=study, task=JudgeTask.ERROR_CATEGORY)
        rating_runs = done_runs(study=study, task=JudgeTask.RATING)
        classified = [run for run in (category_run, error_run) if run]
        return RevisionReads(
            turns=turns_read(study=study),
            waiting_for_kind=study_waiting_for_kind(study=study),
            blocked=study_blocked(study=study),
            category_run=category_run,
            error_run=error_run,
            rating_runs=rating_runs,
            predictions=predictions_read(runs=[*classified, *rating_runs]),
            reratings=reratings_read(study=study),
        )
