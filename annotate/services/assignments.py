"""Hand out tasks to annotators, and take them back when returned or abandoned.

Every change to how many assignments of a task are live or done happens under a row lock on the
task, so two annotators can never both take the last slot.
"""

from __future__ import annotations

import random
import secrets
from datetime import datetime, timedelta

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, connection, transaction
from django.db.models import (
    BooleanField,
    Count,
    Exists,
    ExpressionWrapper,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
)
from django.db.models.functions import Coalesce

from annotate.errors import AssignmentNotLiveError, ConflictError, NotFoundError, NoWorkError
from annotate.models import (
    Annotator,
    AnnotatorKind,
    Assignment,
    AssignmentStatus,
    Batch,
    DirectScore,
    Label,
    Project,
    Response,
    Task,
)

CANDIDATES_PER_CLAIM = 20


def counted_assignments(*, now: datetime, prefix: str = "") -> Q:
    """Assignments that hold a slot of their task: live claims and accepted submissions.

    `prefix` ("assignments__") lets the same condition filter an aggregate over tasks.
    """
    live = Q(**{f"{prefix}status": AssignmentStatus.CLAIMED, f"{prefix}expires_at__gt": now})
    done = Q(
        **{
            f"{prefix}status__in": [AssignmentStatus.SUBMITTED, AssignmentStatus.APPROVED],
            f"{prefix}is_late": False,
        }
    )
    return live | done


def annotator_for_user(*, user: AbstractBaseUser) -> Annotator:
    """Return the user's Annotator, creating it the first time they work.

    A new account is neither expert nor crowd: its labels count in no result until a researcher
    decides its kind (annotate.services.annotators.annotator_kind_set).
    """
    try:
        return Annotator.objects.get(user=user)
    except Annotator.DoesNotExist:
        pass
    name = user.get_username()
    if Annotator.objects.filter(name=name).exists():
        name = f"{name} (user {user.pk})"
    annotator, _ = Annotator.objects.get_or_create(
        user=user, defaults={"name": name, "kind": AnnotatorKind.UNDECIDED}
    )
    return annotator


def display_order_for(*, system_ids: list[int], seed: int) -> list[int]:
    """Return the system ids shuffled by the seed; index 0 is shown as System A."""
    return random.Random(seed).sample(sorted(system_ids), len(system_ids))


def claimable_tasks(
    *, project: Project, annotator: Annotator, now: datetime, batch: Batch | None = None
) -> QuerySet[Task]:
    """Tasks of the project's active batches (or of one batch) with a free slot, on instructions
    the annotator never worked on (in any project or import: an annotator labels a response
    once)."""
    tasks = Task.objects.filter(batch__project=project, batch__active=True)
    if batch is not None:
        tasks = tasks.filter(batch=batch)
    return (
        tasks.exclude(_worked_on(annotator=annotator, instruction=OuterRef("instruction_id")))
        .annotate(
            counted=Count(
                "assignments", filter=counted_assignments(now=now, prefix="assignments__")
            )
        )
        .filter(counted__lt=project.assignments_per_task)
    )


def _worked_on(*, annotator: Annotator, instruction) -> Q:
    """True where the annotator has an assignment, a label or a score on the instruction."""
    # Labels are reached through their response, not their question (the two share the
    # instruction): the (response, annotator) index then answers each task with a few index
    # lookups, where going through the question scans every label of the table per task.
    return (
        Q(Exists(Assignment.objects.filter(annotator=annotator, task__instruction_id=instruction)))
        | Q(Exists(Label.objects.filter(annotator=annotator, response__instruction_id=instruction)))
        | Q(
            Exists(
                DirectScore.objects.filter(
                    annotator=annotator, response__instruction_id=instruction
                )
            )
        )
    )


def assignment_claim_next(
    *, annotator: Annotator, project: Project, now: datetime, batch: Batch | None = None
) -> Assignment:
    """Return the annotator's live claim in the project, or claim the next free task (of `batch`
    only, when given: a self-hosted crowd link hands out one batch).

    The database holds one live "start next" claim per annotator and project
    (assignment_one_live_claim_per_project): of several requests racing from one session, one
    creates the claim and the others answer with it.

    Raises NoWorkError when every task is full or already done by this annotator, ConflictError
    when the annotator holds a task of another batch of the project.
    """
    try:
        with transaction.atomic():
            return _claim_next(annotator=annotator, project=project, now=now, batch=batch)
    except IntegrityError:
        current = _live_claim(annotator=annotator, project=project, now=now)
        if current is None:
            raise
        return _in_batch(current, batch)


def _claim_next(
    *, annotator: Annotator, project: Project, now: datetime, batch: Batch | None
) -> Assignment:
    current = _live_claim(annotator=annotator, project=project, now=now)
    if current is not None:
        return _in_batch(current, batch)
    # A claim past its time that the beat has not expired yet would block the new one.
    Assignment.objects.filter(
        annotator=annotator,
        queue_project=project,
        status=AssignmentStatus.CLAIMED,
        expires_at__lte=now,
    ).update(status=AssignmentStatus.EXPIRED)
    for skip_locked in (True, False):
        assignment = _claim_first_free(
            annotator=annotator, project=project, now=now, skip_locked=skip_locked, batch=batch
        )
        if assignment is not None:
            return assignment
    raise NoWorkError(f"No task left for you in '{project.name}'. Thank you!")


def _in_batch(current: Assignment, batch: Batch | None) -> Assignment:
    if batch is not None and current.task.batch_id != batch.pk:
        raise ConflictError(
            "You are holding a task of another study of this project: finish or return it first."
        )
    return current


def _live_claim(*, annotator: Annotator, project: Project, now: datetime) -> Assignment | None:
    return (
        Assignment.objects.filter(
            annotator=annotator,
            task__batch__project=project,
            status=AssignmentStatus.CLAIMED,
            expires_at__gt=now,
        )
        .order_by("claimed_at")
        .first()
    )


def _claim_first_free(
    *,
    annotator: Annotator,
    project: Project,
    now: datetime,
    skip_locked: bool,
    batch: Batch | None = None,
) -> Assignment | None:
    candidates = list(
        claimable_tasks(project=project, annotator=annotator, now=now, batch=batch)
        .order_by("counted", "batch__created_at", "position", "id")
        .values_list("id", flat=True)[:CANDIDATES_PER_CLAIM]
    )
    for task_id in candidates:
        task = _lock_task(task_id=task_id, skip_locked=skip_locked)
        if task is None:
            continue  # another annotator is claiming it right now; try the next one
        if _slot_free(task=task, project=project, annotator=annotator, now=now):
            return _assignment_create(
                task=task, project=project, annotator=annotator, now=now, from_queue=True
            )
    return None


@transaction.atomic
def assignment_claim_task(
    *, annotator: Annotator, task: Task, now: datetime, check_slots: bool = True
) -> Assignment:
    """Claim one given task (a crowd platform's HIT names it), under the task's row lock.

    `check_slots=False` when the platform itself limits how many workers take the task.
    Raises ConflictError if the annotator already worked on this instruction, NoWorkError if
    the task is full.
    """
    locked = _lock_task(task_id=task.pk, skip_locked=False)
    project = task.batch.project
    if Task.objects.filter(
        _worked_on(annotator=annotator, instruction=locked.instruction_id), pk=locked.pk
    ).exists():
        raise ConflictError("You have already worked on this task; it cannot be taken again.")
    if check_slots and not _slot_free(task=locked, project=project, annotator=annotator, now=now):
        raise NoWorkError("This task already has all the workers it needs.")
    return _assignment_create(task=locked, project=project, annotator=annotator, now=now)


def _lock_task(*, task_id: int, skip_locked: bool) -> Task | None:
    # No ordering: Task's default ordering joins Batch, and FOR UPDATE would lock the batch row
    # too, which deadlocks claimers of different tasks of the same batch.
    queryset = Task.objects.filter(pk=task_id).order_by()
    if connection.features.has_select_for_update_skip_locked:
        queryset = queryset.select_for_update(skip_locked=skip_locked, of=("self",))
    else:
        queryset = queryset.select_for_update()  # SQLite: the write transaction serialises
    return next(iter(queryset), None)


def _slot_free(*, task: Task, project: Project, annotator: Annotator, now: datetime) -> bool:
    """Recount under the task's row lock: the count before locking may be stale.

    One query: whether the annotator worked on the instruction, and how many assignments hold
    a slot of the task.
    """
    taken = (
        Assignment.objects.filter(task=OuterRef("pk"))
        .filter(counted_assignments(now=now))
        .order_by()
        .values("task")
        .annotate(n=Count("pk"))
        .values("n")
    )
    worked, count = (
        Task.objects.filter(pk=task.pk)
        .order_by()
        .annotate(
            worked=ExpressionWrapper(
                _worked_on(annotator=annotator, instruction=task.instruction_id),
                output_field=BooleanField(),
            ),
            taken=Coalesce(Subquery(taken), 0),
        )
        .values_list("worked", "taken")
        .get()
    )
    return not worked and count < project.assignments_per_task


def _assignment_create(
    *, task: Task, project: Project, annotator: Annotator, now: datetime, from_queue: bool = False
) -> Assignment:
    system_ids = list(
        Response.objects.filter(
            instruction_id=task.instruction_id, system__in=project.systems.all()
        )
        .order_by()  # the default ordering joins instruction and system only to sort
        .values_list("system_id", flat=True)
    )
    seed = secrets.randbits(62)
    return Assignment.objects.create(
        task=task,
        annotator=annotator,
        status=AssignmentStatus.CLAIMED,
        claimed_at=now,
        expires_at=now + timedelta(minutes=project.allotted_minutes),
        order_seed=seed,
        display_order=display_order_for(system_ids=system_ids, seed=seed),
        queue_project=project if from_queue else None,
    )


@transaction.atomic
def assignment_return(*, assignment_id: int, annotator: Annotator, now: datetime) -> Assignment:
    """Give a claimed task back so someone else can do it; the annotator will not get it again."""
    try:
        assignment = Assignment.objects.select_for_update().get(
            pk=assignment_id, annotator=annotator
        )
    except Assignment.DoesNotExist:
        raise NotFoundError("No such assignment.") from None
    if assignment.status != AssignmentStatus.CLAIMED:
        raise AssignmentNotLiveError(
            f"This assignment is {assignment.get_status_display().lower()}; only a claimed one can be returned."
        )
    assignment.status = AssignmentStatus.RETURNED
    assignment.save(update_fields=["status"])
    return assignment


def assignments_expire(*, now: datetime) -> int:
    """Mark claims past their time as expired, freeing their slots; return how many.

    Safe to run twice and concurrently: the update only touches rows still claimed and late.
    """
    return Assignment.objects.filter(status=AssignmentStatus.CLAIMED, expires_at__lte=now).update(
        status=AssignmentStatus.EXPIRED
    )
