"""Reads of annotation work: the task page, the annotator's dashboard, researchers' progress."""

from __future__ import annotations

import string
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime

from django.contrib.auth.models import AbstractBaseUser
from django.db import connection
from django.db.models import Count, F, Q, QuerySet, Subquery, Sum, Window
from django.db.models.functions import RowNumber
from django.utils import timezone

from annotate.compiled import CompiledQuery, prepared_cursor
from annotate.errors import NotFoundError, SubmissionError
from annotate.models import (
    Annotator,
    Assignment,
    AssignmentStatus,
    DirectScore,
    Label,
    Project,
    ProjectMode,
    Response,
    Task,
)
from annotate.roles import is_admin, is_researcher
from annotate.selectors.results import (
    AnsweredWorkStatuses,
    WorkStatus,
    blocked_annotator_ids,
    counted_assignment_q,
    released_unconfirmed_q,
    sandbox_work_q,
)
from annotate.services.assignments import (
    claimable_task_counts,
    claimable_tasks_sql,
    counted_assignments,
    display_order_for,
)
from annotate.services.projects import (
    DEFAULT_GUIDELINES,
    DIRECT_SCORE_GUIDELINES,
    DIRECT_SCORE_RUBRIC,
)
from annotate.services.submissions import (
    FIELD_PATTERN,
    Phase,
    assignment_phase,
    question_field,
    score_field,
)


def system_label(position: int) -> str:
    """Return "System A" for position 1, ..., "System Z", then "System 27"."""
    letters = string.ascii_uppercase
    return f"System {letters[position - 1] if position <= len(letters) else position}"


@dataclass
class QuestionItem:
    name: str
    position: int
    text: str
    value: str = ""


@dataclass
class ResponseItem:
    position: int
    label: str
    text: str
    score_name: str
    score: str = ""
    questions: list[QuestionItem] = field(default_factory=list)


# An assignment in these, not submitted, takes answers (a claim past its time too: kept, counted
# only if the task's slot is still free).
OPEN_STATUSES = (AssignmentStatus.CLAIMED, AssignmentStatus.EXPIRED)


@dataclass
class TaskPage:
    assignment: Assignment
    project: Project
    phase: str
    responses: list[ResponseItem]
    field_names: list[str]
    rubric: dict[int, str]
    preview: bool = False  # a crowd worker looking before accepting: read-only, nothing stored

    @property
    def instruction(self):
        return self.assignment.task.instruction

    @property
    def asks_scores(self) -> bool:
        return self.phase == Phase.SCORES

    @property
    def asks_questions(self) -> bool:
        return self.phase == Phase.LABELS

    @property
    def guidelines(self) -> str:
        """Return the guidelines of the step on the page.

        A project's own guidelines are about its questions, except in a direct-score project
        whose researcher wrote their own; the scoring step otherwise gets the scoring ones.
        """
        project = self.project
        if self.asks_scores and (
            project.mode == ProjectMode.BOTH
            or project.guidelines.replace("\r\n", "\n") == DEFAULT_GUIDELINES
        ):
            return DIRECT_SCORE_GUIDELINES
        return project.guidelines

    @property
    def is_open(self) -> bool:
        """The page takes answers: a live claim, or one past its time not submitted yet.

        The beat marks a lapsed claim expired within a minute; the submit still takes it (kept,
        counted only if the task's slot is still free), so a reload then must not lock the form.
        """
        if self.preview or self.assignment.submitted_at is not None or self.batch_closed:
            return False
        return self.assignment.status in OPEN_STATUSES

    @property
    def batch_closed(self) -> bool:
        """A claim past its time, not submitted, in a batch deactivated since: it takes no more
        answers (assignment_submit refuses them), and the page says why."""
        assignment = self.assignment
        return (
            not self.preview
            and assignment.submitted_at is None
            and assignment.status in OPEN_STATUSES
            and not assignment.task.batch.active
            and (assignment.status == AssignmentStatus.EXPIRED or self.deadline_passed)
        )

    @property
    def may_return(self) -> bool:
        """Only a claim still held can be given back (assignment_return)."""
        return not self.preview and self.assignment.status == AssignmentStatus.CLAIMED

    @property
    def deadline_passed(self) -> bool:
        """The claim's time is up: a submit now counts only if the task's slot is still free."""
        expires_at = self.assignment.expires_at
        return expires_at is not None and expires_at <= timezone.now()

    @property
    def seconds_left(self) -> int:
        """Whole seconds until the claim's time is up (0 when it is): the page counts down from
        them by the browser's clock, so a browser clock set wrong does not move the deadline."""
        expires_at = self.assignment.expires_at
        if expires_at is None:
            return 0
        return max(0, int((expires_at - timezone.now()).total_seconds()))


def assignment_get_for_annotator(*, assignment_id: int, user: AbstractBaseUser) -> Assignment:
    """Return the user's own assignment with its task, instruction and project; 404 otherwise."""
    assignment = _ASSIGNMENT_OF_USER.first(assignment_id=assignment_id, user_id=user.pk)
    if assignment is None:
        raise NotFoundError("No such assignment.")
    return assignment


# Read on every task page view: compiled once (annotate.compiled).
_ASSIGNMENT_OF_USER = CompiledQuery(
    Assignment,
    lambda assignment_id, user_id: Assignment.objects.select_related(
        "task__instruction", "task__batch__project", "annotator"
    ).filter(pk=assignment_id, annotator__user_id=user_id),
    "assignment_id",
    "user_id",
)


def task_page_get(
    *, assignment_id: int, user: AbstractBaseUser, answers: dict[str, str] | None = None
) -> TaskPage:
    """Return what the task page shows, in the assignment's order, in two queries."""
    assignment = _TASK_PAGE_ASSIGNMENT.first(assignment_id=assignment_id, user_id=user.pk)
    if assignment is None:
        raise NotFoundError("No such assignment.")
    return task_page_for(assignment=assignment, answers=answers)


# The task page's read of the assignment: as _ASSIGNMENT_OF_USER, without the annotator (the
# page needs only its id) and without the model's ordering (one row). Planning the join of six
# tables and the sort was most of PostgreSQL's time on this query (0.46 ms of backend CPU per
# view); five tables and the annotator as a subquery by its user (unique) take 0.35 ms.
_TASK_PAGE_ASSIGNMENT = CompiledQuery(
    Assignment,
    lambda assignment_id, user_id: (
        Assignment.objects.select_related("task__instruction", "task__batch__project")
        .filter(
            pk=assignment_id,
            annotator_id=Subquery(
                Annotator.objects.filter(user_id=user_id).order_by().values("pk")
            ),
        )
        .order_by()
    ),
    "assignment_id",
    "user_id",
)


def task_page_preview(*, task: Task, seed: int) -> TaskPage:
    """Return the task page of a task nobody holds yet (a crowd worker's preview), read-only.

    The assignment is built in memory only and never saved; systems are shuffled by `seed` as
    an accepted assignment's are, so the preview never shows them in a fixed order.
    """
    project = task.batch.project
    system_ids = list(
        Response.objects.filter(
            instruction_id=task.instruction_id, system__in=project.systems.all()
        ).values_list("system_id", flat=True)
    )
    order = display_order_for(system_ids=system_ids, seed=seed)
    assignment = Assignment(task=task, status=AssignmentStatus.CLAIMED, display_order=order)
    page = task_page_for(assignment=assignment)
    page.preview = True
    return page


def task_page_for(*, assignment: Assignment, answers: dict[str, str] | None = None) -> TaskPage:
    """Return the task page of an assignment the caller already checked access to."""
    project = assignment.task.batch.project
    phase = assignment_phase(assignment=assignment, mode=project.mode)
    answers = answers if answers is not None else _stored_answers(assignment, phase)
    texts, questions = _texts_of(
        instruction_id=assignment.task.instruction_id,
        system_ids=assignment.display_order,
        with_questions=phase == Phase.LABELS,
    )
    scores = assignment.direct_scores or {}
    responses = []
    for position, system_id in enumerate(assignment.display_order, start=1):
        item = ResponseItem(
            position=position,
            label=system_label(position),
            text=texts.get(system_id, ""),
            score_name=score_field(position),
            score=str(answers.get(score_field(position)) or scores.get(score_field(position), "")),
        )
        for question_position, question_text in questions:
            name = question_field(position, question_position)
            item.questions.append(
                QuestionItem(name, question_position, question_text, str(answers.get(name, "")))
            )
        responses.append(item)
    field_names = [question.name for item in responses for question in item.questions] or [
        item.score_name for item in responses
    ]
    return TaskPage(assignment, project, phase, responses, field_names, DIRECT_SCORE_RUBRIC)


def _texts_of(
    *, instruction_id: int, system_ids: list[int], with_questions: bool
) -> tuple[dict[int, str], list[tuple[int, str]]]:
    """Return {system id: response text} and [(position, question text)] in one query.

    Both are rows of one instruction, read as one UNION ALL (a round trip less per page view).
    Plain SQL: the ORM spent 0.5 ms of the page's CPU compiling this union, the database a
    tenth of that running it; the models' default ordering (joins to instruction, benchmark and
    system only to sort by name) is not wanted here either.
    """
    if not system_ids and not with_questions:
        return {}, []
    parts, params = [], []
    if system_ids:
        marks = ", ".join(["%s"] * len(system_ids))
        parts.append(_RESPONSE_TEXTS.format(marks=marks))
        params += [instruction_id, *system_ids]
    if with_questions:
        parts.append(_QUESTION_TEXTS)
        params.append(instruction_id)
    with prepared_cursor(connection) as cursor:
        cursor.execute(" UNION ALL ".join(parts), params)
        rows = cursor.fetchall()
    texts = {key: text for kind, key, text in rows if kind == 0}
    questions = sorted((key, text) for kind, key, text in rows if kind == 1)
    return texts, questions


# Response's and Question's tables (the models have no db_table or db_column of their own).
_RESPONSE_TEXTS = (
    "SELECT 0, system_id, text FROM annotate_response "
    "WHERE instruction_id = %s AND system_id IN ({marks})"
)
_QUESTION_TEXTS = "SELECT 1, position, text FROM annotate_question WHERE instruction_id = %s"


@dataclass(frozen=True)
class ProjectStanding:
    """Where an annotator stands in a project: "task 3 of 8", and whether it is their first."""

    number: int  # this task's number among theirs (submitted ones first)
    total: int  # submitted + this one (if open) + those still claimable
    submitted: int

    @property
    def is_first(self) -> bool:
        return self.submitted == 0


def project_standing(
    *, assignment: Assignment, now: datetime, batch_only: bool = False
) -> ProjectStanding:
    """Return the assignment's place among the annotator's tasks of its project (of its batch
    only with `batch_only`: what a self-hosted link hands out), in one query."""
    project = assignment.task.batch.project
    batch = assignment.task.batch if batch_only else None
    # Only the annotator's id is read: the task page does not load the annotator itself.
    claimable, claimable_params = claimable_tasks_sql(
        project=project, annotator=Annotator(pk=assignment.annotator_id), now=now, batch=batch
    )
    submitted_at = assignment.submitted_at
    with prepared_cursor(connection) as cursor:
        cursor.execute(
            _STANDING.format(claimable=claimable, batch="AND b.id = %s" if batch else ""),
            [
                connection.ops.adapt_datetimefield_value(submitted_at),
                *claimable_params,
                assignment.annotator_id,
                project.pk,
                *([batch.pk] if batch else []),
            ],
        )
        submitted, earlier, left = cursor.fetchone()
    # Open as on the task page (TaskPage.is_open): a claim past its time still takes answers.
    is_open = submitted_at is None and assignment.status in (
        AssignmentStatus.CLAIMED,
        AssignmentStatus.EXPIRED,
    )
    if is_open:
        return ProjectStanding(submitted + 1, submitted + 1 + left, submitted)
    return ProjectStanding(
        (earlier if submitted_at else submitted) + 1, submitted + left, submitted
    )


# The annotator's submitted assignments of the project or batch (and those submitted before this
# one), and the tasks still claimable (services.assignments.claimable_tasks_sql), in one round trip.
_STANDING = """SELECT count(a.submitted_at), count(CASE WHEN a.submitted_at < %s THEN 1 END),
    (SELECT count(*) FROM ({claimable}) claimable)
    FROM annotate_assignment a JOIN annotate_task t ON t.id = a.task_id
    JOIN annotate_batch b ON b.id = t.batch_id
    WHERE a.annotator_id = %s AND b.project_id = %s {batch}"""


def submission_refusal(*, page: TaskPage, error: SubmissionError) -> tuple[str, list[dict]]:
    """Return a refused submit as its task page says it, and the missing answers, each as
    {"name", "title"}: the page names them by what a person calls them ("System B, question 2"),
    not by their field names (r2_q2), which only the API's callers need."""
    titles = dict(field_titles(page=page))
    missing = [{"name": name, "title": titles[name]} for name in error.missing if name in titles]
    if not missing:
        return str(error), []
    said = f"{len(missing)} of {len(titles)} answers are missing: they are listed below."
    return " ".join([said, *error.others]), missing


def field_titles(*, page: TaskPage) -> list[tuple[str, str]]:
    """Return (field name, what a person calls it) for every answer the page asks for."""
    titles = []
    for response in page.responses:
        if page.asks_scores:
            titles.append((response.score_name, f"{response.label}: direct score"))
        for question in response.questions:
            titles.append((question.name, f"{response.label}, question {question.position}"))
    return titles


def _stored_answers(assignment: Assignment, phase: str) -> dict[str, str]:
    return dict((assignment.submission or {}).get(phase) or {})


# --- The annotator's dashboard -------------------------------------------------------------


@dataclass
class ProjectWork:
    project: Project
    available: int
    submitted: int
    live_assignment: Assignment | None
    # Claims past their time, not submitted: the task page still takes them (TaskPage.is_open).
    lapsed_assignments: list[Assignment] = field(default_factory=list)


LAPSED_SHOWN = 5  # per project on the dashboard; the rest stay under "recent assignments"


def lapsed_unsubmitted(*, now: datetime) -> Q:
    """The claims past their time that the task page still takes (TaskPage.is_open): not
    submitted, expired by the beat or not yet, in a batch still active (TaskPage.batch_closed)."""
    return Q(submitted_at__isnull=True, status__in=OPEN_STATUSES, task__batch__active=True) & ~Q(
        status=AssignmentStatus.CLAIMED, expires_at__gt=now
    )


def dashboard_for_annotator(*, annotator: Annotator | None, now: datetime) -> list[ProjectWork]:
    """Return every project with an active batch and the annotator's own progress in it.

    Five queries whatever the number of projects (one per figure, each grouped by project),
    where reading each project's figures in turn cost four queries per project.
    """
    projects = list(Project.objects.filter(batches__active=True).distinct().order_by("name"))
    if not projects:
        return []
    if annotator is None:
        open_tasks = _open_task_counts(now)
        return [ProjectWork(project, open_tasks[project.pk], 0, None) for project in projects]
    # Assignments carry their project's id, read through the task and batch they already join.
    mine = (
        Assignment.objects.filter(annotator=annotator)
        .annotate(of_project=F("task__batch__project_id"))
        .order_by()
    )
    available = claimable_task_counts(annotator=annotator, now=now)
    submitted = dict(
        mine.filter(submitted_at__isnull=False)
        .values("of_project")
        .annotate(count=Count("id"))
        .values_list("of_project", "count")
    )
    live: dict[int, Assignment] = {}
    # Newest claim first, as the model orders them: the one the per-project read would take.
    for assignment in mine.filter(status=AssignmentStatus.CLAIMED, expires_at__gt=now).order_by(
        "-claimed_at", "-pk"
    ):
        live.setdefault(assignment.of_project, assignment)
    lapsed: dict[int, list[Assignment]] = {}
    # The LAPSED_SHOWN latest of each project, numbered within it by the database.
    newest_first = [F("expires_at").desc(), F("pk").desc()]
    ranked = (
        mine.filter(lapsed_unsubmitted(now=now))
        .annotate(
            rank=Window(
                RowNumber(), partition_by=F("task__batch__project_id"), order_by=newest_first
            )
        )
        .filter(rank__lte=LAPSED_SHOWN)
        .select_related("task__instruction")
        .order_by(*newest_first)
    )
    for assignment in ranked:
        lapsed.setdefault(assignment.of_project, []).append(assignment)
    return [
        ProjectWork(
            project=project,
            available=available.get(project.pk, 0),
            submitted=submitted.get(project.pk, 0),
            live_assignment=live.get(project.pk),
            lapsed_assignments=lapsed.get(project.pk, []),
        )
        for project in projects
    ]


def _open_task_counts(now: datetime) -> Counter[int]:
    """Return {project id: tasks of its active batches with a free slot} in one query."""
    open_tasks = (
        Task.objects.filter(batch__active=True)
        .annotate(
            counted=Count(
                "assignments", filter=counted_assignments(now=now, prefix="assignments__")
            )
        )
        .filter(counted__lt=F("batch__project__assignments_per_task"))
        .order_by()
    )
    return Counter(open_tasks.values_list("batch__project_id", flat=True))


def annotator_worked_in(*, annotator: Annotator, project: Project) -> bool:
    """Whether the annotator holds or ever held an assignment in the project."""
    return Assignment.objects.filter(annotator=annotator, task__batch__project=project).exists()


def project_hidden_from(*, annotator: Annotator, project: Project) -> bool:
    """Whether the project is missing to the annotator: never offered to them (no active batch)
    and never theirs. Its name is then no one's to read by trying ids, on the pages or the API."""
    if project.batches.filter(active=True).exists():
        return False
    return not annotator_worked_in(annotator=annotator, project=project)


def recent_assignments(*, annotator: Annotator, limit: int = 20) -> QuerySet[Assignment]:
    return (
        Assignment.objects.filter(annotator=annotator)
        .select_related("task__instruction", "task__batch__project")
        .order_by("-claimed_at")[:limit]
    )


# --- Researchers ---------------------------------------------------------------------------


def projects_for_researcher(*, user: AbstractBaseUser) -> QuerySet[Project]:
    """Admins see every project; researchers those they created or were added to."""
    if not is_researcher(user):
        return Project.objects.none()
    projects = Project.objects.select_related("benchmark").order_by("-created_at")
    if is_admin(user):
        return projects
    return projects.filter(Q(researchers=user) | Q(created_by=user)).distinct()


def project_get_for_researcher(*, project_id: int, user: AbstractBaseUser) -> Project:
    try:
        return projects_for_researcher(user=user).get(pk=project_id)
    except Project.DoesNotExist:
        raise NotFoundError("No such project.") from None


@dataclass
class Progress:
    tasks_total: int
    tasks_done: int
    assignments_submitted: int
    assignments_live: int
    assignments_late: int
    assignments_unconfirmed: int
    assignments_rejected: int
    assignments_blocked: int
    assignments_sandbox: int
    per_annotator: list[dict]
    per_batch: list[dict]


def project_progress(*, project: Project, now: datetime) -> Progress:
    """Return tasks done of total, and per annotator counts.

    A task is done when its N assignments count in results (annotate.selectors.results: in
    time, not rejected, the worker not blocked, confirmed by the crowd platform that handed
    them out). Each submitted assignment falls in one column: sandbox (test work through a
    HIT of a publication on MTurk's requester sandbox, synced or not: counted nowhere, paid by
    nobody, whatever else holds for it); rejected; blocked (a worker blocked now: kept,
    counted in no result while the block lasts); unconfirmed (a sync took its slot back
    because its platform did not list it: it waits for the platform's confirmation,
    results.released_unconfirmed_q); late (submitted after its claim lapsed and its task was
    filled, or confirmed by its platform only after that); else submitted (holds its slot:
    work still waiting for its platform's confirmation, no sync having released it, is here).
    """
    tasks = (
        Task.objects.filter(batch__project=project)
        .annotate(counted=Count("assignments", filter=counted_assignment_q("assignments__")))
        .values_list("batch_id", "counted")
    )
    per_batch = [
        {
            "batch__id": batch.id,
            "batch__name": batch.name,
            "batch__active": batch.active,
            "total": 0,
            "done": 0,
        }
        for batch in project.batches.order_by("id")
    ]
    by_id = {row["batch__id"]: row for row in per_batch}
    for batch_id, counted_count in tasks:
        by_id[batch_id]["total"] += 1
        by_id[batch_id]["done"] += counted_count >= project.assignments_per_task
    assignments = Assignment.objects.filter(task__batch__project=project)
    live = Q(status=AssignmentStatus.CLAIMED, expires_at__gt=now)
    # The sandbox's test work is never read as real work submitted, rejected or blocked.
    sandbox = Q(submitted_at__isnull=False) & sandbox_work_q()
    rejected = Q(status=AssignmentStatus.REJECTED) & ~sandbox
    # Rejected work stays under Rejected whoever did it; a blocked worker's other submitted
    # work counts nowhere while the block lasts, whatever else holds for it.
    blocked = (
        Q(submitted_at__isnull=False, annotator_id__in=blocked_annotator_ids())
        & ~rejected
        & ~sandbox
    )
    unconfirmed = released_unconfirmed_q() & ~blocked & ~sandbox
    per_annotator = list(
        assignments.values("annotator__name")
        .annotate(
            worker_blocked=Count("annotator__block", filter=Q(annotator__block__active=True)),
            # Rejected work (in review) is submitted but counts nowhere: a column of its own.
            submitted=Count(
                "id",
                filter=Q(submitted_at__isnull=False, is_late=False)
                & ~rejected
                & ~blocked
                & ~sandbox,
            ),
            sandbox=Count("id", filter=sandbox),
            rejected=Count("id", filter=rejected),
            blocked=Count("id", filter=blocked),
            late=Count(
                "id",
                filter=Q(is_late=True)
                & ~rejected
                & ~released_unconfirmed_q()
                & ~blocked
                & ~sandbox,
            ),
            unconfirmed=Count("id", filter=unconfirmed),
            live=Count("id", filter=live),
            returned=Count("id", filter=Q(status=AssignmentStatus.RETURNED)),
            active_seconds=Sum("active_seconds", filter=Q(submitted_at__isnull=False)),
        )
        .order_by("annotator__name")
    )
    for row in per_annotator:
        row["worker_blocked"] = bool(row["worker_blocked"])
    return Progress(
        tasks_total=sum(row["total"] for row in per_batch),
        tasks_done=sum(row["done"] for row in per_batch),
        assignments_submitted=sum(row["submitted"] for row in per_annotator),
        assignments_live=sum(row["live"] for row in per_annotator),
        assignments_late=sum(row["late"] for row in per_annotator),
        assignments_unconfirmed=sum(row["unconfirmed"] for row in per_annotator),
        assignments_rejected=sum(row["rejected"] for row in per_annotator),
        assignments_blocked=sum(row["blocked"] for row in per_annotator),
        assignments_sandbox=sum(row["sandbox"] for row in per_annotator),
        per_annotator=per_annotator,
        per_batch=per_batch,
    )


LABEL_CSV_HEADER = [
    "batch",
    "instruction_id",
    "system",
    "annotator",
    "assignment_id",
    "kind",
    "question",
    "value",
    "late",
    "work_status",
]


def project_label_rows(*, project: Project) -> Iterator[list[object]]:
    """Yield the CSV header, then one row per label and direct score of the project.

    Late submissions have no Label rows (they are not counted); their answers come from the
    submission kept on the assignment, with late=1. `work_status` says whether the work counts
    in results (annotate.selectors.results): rejected, blocked or unconfirmed work is listed too.
    """
    yield LABEL_CSV_HEADER
    statuses = AnsweredWorkStatuses(benchmark=project.benchmark)
    blocked = set(blocked_annotator_ids().values_list("annotator_id", flat=True))

    def status(assignment: Assignment) -> str:
        if assignment.annotator_id in blocked:
            return WorkStatus.BLOCKED
        return statuses(assignment.id)

    labels = (
        Label.objects.filter(assignment__task__batch__project=project)
        .select_related(
            "assignment__task__batch", "question__instruction", "response__system", "annotator"
        )
        .order_by("assignment_id", "response_id", "question__position")
    )
    for label in labels.iterator(chunk_size=2000):
        yield _row(
            label.assignment,
            label.question.instruction.external_id,
            label.response.system.name,
            "question",
            label.question.position,
            label.get_value_display(),
            late=0,
            status=status(label.assignment),
        )
    scores = (
        DirectScore.objects.filter(assignment__task__batch__project=project)
        .select_related(
            "assignment__task__batch", "response__instruction", "response__system", "annotator"
        )
        .order_by("assignment_id", "response_id")
    )
    for score in scores.iterator(chunk_size=2000):
        yield _row(
            score.assignment,
            score.response.instruction.external_id,
            score.response.system.name,
            "score",
            "",
            score.score,
            late=0,
            status=status(score.assignment),
        )
    yield from _late_rows(project=project, status=status, statuses=statuses)


def _row(
    assignment: Assignment,
    instruction: str,
    system: str,
    kind: str,
    question,
    value,
    *,
    late: int,
    status: str,
) -> list[object]:
    return [
        assignment.task.batch.name,
        instruction,
        system,
        assignment.annotator.name,
        assignment.id,
        kind,
        question,
        value,
        late,
        status,
    ]


def _late_rows(
    *, project: Project, status, statuses: AnsweredWorkStatuses
) -> Iterator[list[object]]:
    # Submitted work whose slot a sync took back (unconfirmed by its platform) has its label
    # rows, written at the submit: only work submitted late has its answers on the assignment.
    late = list(
        Assignment.objects.filter(
            task__batch__project=project, is_late=True, status=AssignmentStatus.EXPIRED
        ).select_related("task__batch", "task__instruction", "annotator")
    )
    # Read after the labels and scores streamed: a claim submitted late meanwhile was read as
    # a claim (not submitted) with the statuses; its status is the one it has now.
    statuses.ask_again(a.pk for a in late)
    system_names = dict(project.systems.values_list("id", "name"))
    for assignment in late:
        submission = assignment.submission or {}
        for name, score in (submission.get(Phase.SCORES) or {}).items():
            system = system_names.get(_system_id(assignment, name), "")
            yield _row(
                assignment,
                assignment.task.instruction.external_id,
                system,
                "score",
                "",
                score,
                late=1,
                status=status(assignment),
            )
        for name, value in (submission.get(Phase.LABELS) or {}).items():
            system = system_names.get(_system_id(assignment, name), "")
            question = int(FIELD_PATTERN.match(name).group(2))
            yield _row(
                assignment,
                assignment.task.instruction.external_id,
                system,
                "question",
                question,
                str(value).upper(),
                late=1,
                status=status(assignment),
            )


def _system_id(assignment: Assignment, field_name: str) -> int:
    position = int(FIELD_PATTERN.match(field_name).group(1))
    return assignment.display_order[position - 1]
