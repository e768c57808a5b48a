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
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.db.models.expressions import RawSQL

from annotate.compiled import CompiledQuery, CompiledSql, prepared_cursor
from annotate.crowd.models import WorkerBlock
from annotate.errors import (
    AssignmentNotLiveError,
    ConflictError,
    NotFoundError,
    NoWorkError,
    WorkerBlockedError,
)
from annotate.models import (
    Annotator,
    AnnotatorKind,
    Assignment,
    AssignmentStatus,
    Batch,
    Project,
    Task,
)
from annotate.roles import ANNOTATOR, ANNOTATORS_ONLY, require_role
from annotate.selectors.results import left_out_q

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


def annotator_of_annotator_user(*, user: AbstractBaseUser) -> Annotator:
    """Return the Annotator of a user with the annotator role (PermissionDenied otherwise),
    creating it the first time they work."""
    # The usual case in one query, compiled once (annotate.compiled): an active user in the
    # annotator group who has worked before.
    if user.is_active:
        known = _ANNOTATOR_OF_USER.first(user_id=user.pk)
        if known is not None:
            return known
    require_role(user, ANNOTATOR, message=ANNOTATORS_ONLY)
    return annotator_for_user(user=user)


# The group's name is a constant of the code, written into the SQL (CompiledQuery's parameters
# are the caller's integers only).
_ANNOTATOR_OF_USER = CompiledQuery(
    Annotator,
    lambda user_id: Annotator.objects.filter(
        user_id=user_id,
        user__groups__name=RawSQL(f"'{ANNOTATOR}'", ()),  # noqa: S611 (a constant)
    ).order_by(),
    "user_id",
)


def display_order_for(*, system_ids: list[int], seed: int) -> list[int]:
    """Return the system ids shuffled by the seed; index 0 is shown as System A."""
    return random.Random(seed).sample(sorted(system_ids), len(system_ids))


def claimable_tasks_sql(
    *, project: Project, annotator: Annotator, now: datetime, batch: Batch | None = None
) -> tuple[str, list]:
    """Return SQL (and its parameters) selecting the tasks the annotator may claim next.

    Tasks of the project's active batches (or of one batch) with a free slot, on instructions
    the annotator never worked on (in any project or import: an annotator labels a response
    once). Columns: id, taken (assignments holding a slot), batch_created, position.
    Plain SQL, portable to SQLite: the ORM spent several times the database's own time
    compiling this query on every task page, claim and submit.
    """
    sql = _CLAIMABLE.format(slot_free=_slot_free_sql(batch), worked=_WORKED_ON_TASKS)
    return sql, [*_slot_free_params(project, now, batch), *[annotator.pk] * 3]


def _slot_free_sql(batch: Batch | None) -> str:
    return _SLOT_FREE.format(batch="AND b.id = %s" if batch is not None else "")


def _slot_free_params(project: Project, now: datetime, batch: Batch | None) -> list:
    late = [AssignmentStatus.CLAIMED.value, connection.ops.adapt_datetimefield_value(now)]
    where = [project.pk, *([batch.pk] if batch is not None else [])]
    limit = project.assignments_per_task
    return [*late, *where, limit, *where, limit, limit]


def claimable_task_count(
    *, project: Project, annotator: Annotator, now: datetime, batch: Batch | None = None
) -> int:
    """Return how many tasks the annotator may still claim in the project (or batch)."""
    sql, params = claimable_tasks_sql(project=project, annotator=annotator, now=now, batch=batch)
    with prepared_cursor(connection) as cursor:
        cursor.execute(_COUNT.format(claimable=sql), params)
        return cursor.fetchone()[0]


def claimable_task_counts(*, annotator: Annotator, now: datetime) -> dict[int, int]:
    """Return {project id: tasks the annotator may still claim} for every project with one, in
    one query: claimable_task_count of each project with an active batch."""
    params = [
        AssignmentStatus.CLAIMED.value,
        connection.ops.adapt_datetimefield_value(now),
        *[annotator.pk] * 3,
    ]
    with prepared_cursor(connection) as cursor:
        cursor.execute(_COUNTS_PER_PROJECT.format(worked=_WORKED_ON_TASKS), params)
        return dict(cursor.fetchall())


def batch_slot_free(*, batch: Batch, now: datetime) -> bool:
    """Whether a task of the batch has a free slot: what a newcomer's claim needs (someone with
    no earlier work on its instructions), read from the slot counters as the claim's candidates
    are (_SLOT_FREE), so a full batch costs an empty index range, not a scan of its tasks."""
    with prepared_cursor(connection) as cursor:
        cursor.execute(
            _ANY.format(slot_free=_slot_free_sql(batch)),
            _slot_free_params(batch.project, now, batch),
        )
        return cursor.fetchone() is not None


def claimable_task_ids(
    *,
    project: Project,
    annotator: Annotator,
    now: datetime,
    batch: Batch | None = None,
    limit: int = CANDIDATES_PER_CLAIM,
) -> list[int]:
    """Return up to `limit` claimable task ids, the least-filled first, then batch and position."""
    sql, params = _claimable_ids_sql(
        project=project, annotator=annotator, now=now, batch=batch, limit=limit
    )
    with prepared_cursor(connection) as cursor:
        cursor.execute(sql, params)
        return [row[0] for row in cursor.fetchall()]


def _claimable_ids_sql(
    *, project: Project, annotator: Annotator, now: datetime, batch: Batch | None, limit: int
) -> tuple[str, list]:
    sql = _FIRST.format(slot_free=_slot_free_sql(batch), worked=_WORKED_ON_TASKS)
    return sql, [*_slot_free_params(project, now, batch), *[annotator.pk] * 3, limit]


# The tables and columns of Task, Batch, Assignment, Label, Response and DirectScore (no
# db_table or db_column of their own). An assignment holds a slot of its task while it is a
# live claim or an accepted submission: the same rule as counted_assignments().
_TAKEN = """SELECT count(*) FROM annotate_assignment a WHERE a.task_id = {task}
    AND ({holds_slot})"""
_HOLDS_SLOT = "(a.status = %s AND a.expires_at > %s) OR (a.status IN (%s, %s) AND NOT a.is_late)"
# Worked on an instruction: an assignment, a label or a score of the annotator on it. Labels
# and scores are reached through their response, not their question (the two share the
# instruction): the (response, annotator) index then answers each task with a few index
# lookups, where going through the question scans every label of the table per task.
_WORKED = """EXISTS(SELECT 1 FROM annotate_assignment w JOIN annotate_task wt ON wt.id = w.task_id
        WHERE w.annotator_id = %s AND wt.instruction_id = {instruction})
    OR EXISTS(SELECT 1 FROM annotate_label l JOIN annotate_response lr ON lr.id = l.response_id
        WHERE l.annotator_id = %s AND lr.instruction_id = {instruction})
    OR EXISTS(SELECT 1 FROM annotate_directscore d
        JOIN annotate_response dr ON dr.id = d.response_id
        WHERE d.annotator_id = %s AND dr.instruction_id = {instruction})"""
# The same rule over many tasks (t): the instructions the annotator worked on are read once, as
# one set (assignments and scores through their annotator indexes), instead of per task, and of
# their labels only those without an assignment are looked for. Every label with one was stored
# by that assignment's submission (same annotator, that task's instruction), which the
# assignment part already finds; imported labels and those whose assignment was deleted have
# none, and the partial label_unassigned index holds just those: an annotator without any is
# answered from an empty index range. One IN over a UNION ALL rather than two INs and an
# EXISTS: PostgreSQL plans one subquery instead of three (the correlated EXISTS twice, per task
# and hashed), 0.2 ms of backend CPU less on every task page, claim and submit, and reads
# imported labels once rather than for each task. Instruction ids are never NULL, so NOT IN
# excludes exactly what the three tests did. The claim re-checks the full rule (_WORKED) under
# the task's lock.
_WORKED_ON_TASKS = """t.instruction_id IN (SELECT wt.instruction_id FROM annotate_assignment w
        JOIN annotate_task wt ON wt.id = w.task_id WHERE w.annotator_id = %s
    UNION ALL SELECT dr.instruction_id FROM annotate_directscore d
        JOIN annotate_response dr ON dr.id = d.response_id WHERE d.annotator_id = %s
    UNION ALL SELECT lr.instruction_id FROM annotate_label l
        JOIN annotate_response lr ON lr.id = l.response_id
        WHERE l.annotator_id = %s AND l.assignment_id IS NULL)"""
# Slots are counted first, from each task's TaskSlots counter (kept by triggers: every claim
# and every on-time accepted submission) less its claims past their time that the beat has not
# expired yet (the assignment (status, expires_at) index: a few rows, not the project's
# thousands of assignments); only tasks with a free slot are then checked for the annotator's
# earlier work (a full project: none at all). This is the same rule as _HOLDS_SLOT; the claim
# re-counts under the task's lock. Two disjoint parts, so that neither reads a full task: those
# whose counter alone leaves a slot (the index range (batch, held < limit), empty once a project
# is full), and those whose counter is full but whose claims past their time free one (found
# from those claims). The claims past their time are read once, for both.
_SLOT_FREE = """WITH late AS (SELECT x.task_id, count(*) AS late FROM annotate_assignment x
        WHERE x.status = %s AND x.expires_at <= %s GROUP BY x.task_id)
    SELECT t.id AS id, t.instruction_id AS instruction_id,
        s.held - COALESCE(x.late, 0) AS taken, b.created_at AS batch_created,
        t.position AS position
    FROM annotate_batch b JOIN annotate_taskslots s ON s.batch_id = b.id
    JOIN annotate_task t ON t.id = s.task_id
    LEFT JOIN late x ON x.task_id = s.task_id
    WHERE b.project_id = %s AND b.active {batch} AND s.held < %s
    UNION ALL
    SELECT t.id, t.instruction_id, s.held - x.late, b.created_at, t.position
    FROM late x JOIN annotate_taskslots s ON s.task_id = x.task_id
    JOIN annotate_batch b ON b.id = s.batch_id JOIN annotate_task t ON t.id = s.task_id
    WHERE b.project_id = %s AND b.active {batch} AND s.held >= %s AND s.held - x.late < %s"""
# _SLOT_FREE over every project at once, each task against its own project's limit, for the
# dashboard's counts: the same two disjoint parts, keeping only what the count needs.
_COUNTS_PER_PROJECT = """WITH late AS (SELECT x.task_id, count(*) AS late
        FROM annotate_assignment x WHERE x.status = %s AND x.expires_at <= %s GROUP BY x.task_id)
    SELECT t.project_id, count(*) FROM (
        SELECT b.project_id AS project_id, t.instruction_id AS instruction_id
        FROM annotate_project p JOIN annotate_batch b ON b.project_id = p.id
        JOIN annotate_taskslots s ON s.batch_id = b.id JOIN annotate_task t ON t.id = s.task_id
        WHERE b.active AND s.held < p.assignments_per_task
        UNION ALL
        SELECT b.project_id, t.instruction_id
        FROM late x JOIN annotate_taskslots s ON s.task_id = x.task_id
        JOIN annotate_batch b ON b.id = s.batch_id JOIN annotate_project p ON p.id = b.project_id
        JOIN annotate_task t ON t.id = s.task_id
        WHERE b.active AND s.held >= p.assignments_per_task
            AND s.held - x.late < p.assignments_per_task) t
    WHERE NOT ({worked}) GROUP BY t.project_id"""
_CLAIMABLE = "SELECT id, taken, batch_created, position FROM ({slot_free}) t WHERE NOT ({worked})"
_COUNT = "SELECT count(*) FROM ({claimable}) claimable"
_ANY = "SELECT 1 FROM ({slot_free}) free LIMIT 1"
# The claim wants the first few in claim order: the slot-free tasks are sorted first and checked
# for earlier work in that order until `limit` pass (PostgreSQL keeps the inner order through
# the filter, so it stops early instead of probing every task; the outer ORDER BY states the
# order for any database). With 500 open tasks the check then costs ~20 tasks' probes, not 500.
_FIRST = """SELECT id FROM ({slot_free} ORDER BY taken, batch_created, position, id) t
    WHERE NOT ({worked}) ORDER BY taken, batch_created, position, id LIMIT %s"""


def _taken_params(now: datetime) -> list:
    return [
        AssignmentStatus.CLAIMED.value,
        connection.ops.adapt_datetimefield_value(now),
        AssignmentStatus.SUBMITTED.value,
        AssignmentStatus.APPROVED.value,
    ]


def _worked_params(annotator_id: int, instruction_id: int) -> list:
    """Parameters of _WORKED: the annotator and the instruction, for each of its three parts."""
    return [annotator_id, instruction_id] * 3


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
    assignment, _ = assignment_claim_next_made(
        annotator=annotator, project=project, now=now, batch=batch
    )
    return assignment


def assignment_claim_next_made(
    *, annotator: Annotator, project: Project, now: datetime, batch: Batch | None = None
) -> tuple[Assignment, bool]:
    """`assignment_claim_next`, and whether this call made the claim (False: it returns the
    live claim the annotator held already, or one a racing request made first)."""
    try:
        with transaction.atomic():
            return _claim_next(annotator=annotator, project=project, now=now, batch=batch)
    except IntegrityError:
        current, _ = _claims(annotator=annotator, project=project, now=now)
        if current is None:
            raise
        return _in_batch(current, batch), False


def annotator_locked_unblocked(annotator: Annotator) -> Annotator:
    """Lock the person's row (FOR NO KEY UPDATE, to the end of the caller's transaction) and
    read it again, refusing a person an admin blocked (WorkerBlockedError).

    A block takes the same lock first (review.worker_block), so it either waits for the work
    going in and then releases it, or the work waits for it and reads the block here. A web
    account's block (platform "") was read by nothing on its paths: its claims and answers
    went in, counted nowhere and holding a slot or a place nobody else was then offered."""
    locked = Annotator.objects.select_for_update(no_key=True).filter(pk=annotator.pk)
    annotator = locked.order_by().first()
    if annotator is None:
        raise NotFoundError("No such annotator.")
    annotator_block_check(annotator)
    return annotator


# What a blocked person is told, on the pages that would offer them work and on the refusal
# of a claim, a prompt or an answer. The block's reason is not in it: it is the admin's note
# (the one MTurk keeps, and does not show its worker), not written to the person.
BLOCKED_FROM_NEW_WORK = (
    "Your account is blocked from new work here: an admin stopped it, so you get no new tasks, "
    "study prompts or revision sessions, and a session in progress takes no new instruction. "
    "Ask the organizers if you think this is a mistake."
)


def annotator_blocked(annotator: Annotator) -> bool:
    """Whether an admin blocked the person now (their pages offer them no work)."""
    return _active_blocks(annotator=annotator).exists()


def _active_blocks(**whose) -> QuerySet[WorkerBlock]:
    """The blocks in force on the person `whose` names (their annotator, or their account)."""
    return WorkerBlock.objects.filter(active=True, **whose)


def annotator_block_check(annotator: Annotator) -> None:
    """Refuse a person an admin blocked (WorkerBlockedError), with what their page says; to
    store their work, annotator_locked_unblocked reads it under their row's lock."""
    if annotator_blocked(annotator):
        raise WorkerBlockedError(BLOCKED_FROM_NEW_WORK)


def account_blocked(user: AbstractBaseUser) -> bool:
    """Whether an admin blocked the account's annotator now (its session page offers it no new
    instruction). An account that never worked has no annotator, so no block."""
    return _active_blocks(annotator__user=user).exists()


def account_block_check(user: AbstractBaseUser) -> None:
    """Refuse an account whose annotator an admin blocked (WorkerBlockedError), as
    annotator_block_check does, on the paths that know the user only (revision sessions). Read
    without a lock: a block releases no revision work, so a session or turn that slips in
    beside it is one started just before it."""
    if account_blocked(user):
        raise WorkerBlockedError(BLOCKED_FROM_NEW_WORK)


def _claim_next(
    *, annotator: Annotator, project: Project, now: datetime, batch: Batch | None
) -> tuple[Assignment, bool]:
    # The person's row before any task's lock, as a block takes them (review.worker_block).
    annotator = annotator_locked_unblocked(annotator)
    current, stale = _claims(annotator=annotator, project=project, now=now)
    if current is not None:
        return _in_batch(current, batch), False
    if stale:
        # A claim past its time that the beat has not expired yet would block the new one.
        _lapsed_claims_expired(
            Assignment.objects.filter(
                annotator=annotator,
                queue_project=project,
                status=AssignmentStatus.CLAIMED,
                expires_at__lte=now,
            ),
            now=now,
        )
    # First past the tasks other claimers hold locked; only if some were passed over, again
    # waiting for their locks. No candidate at all (every task full or done by this annotator,
    # the usual end of a project and of each "submit and continue" after it) asks once.
    for skip_locked in (True, False):
        assignment, passed_over = _claim_first_free(
            annotator=annotator, project=project, now=now, skip_locked=skip_locked, batch=batch
        )
        if assignment is not None:
            return assignment, True
        if not passed_over:
            break
    raise NoWorkError(f"No task left for you in '{project.name}'. Thank you!")


def _in_batch(current: Assignment, batch: Batch | None) -> Assignment:
    if batch is not None and current.task.batch_id != batch.pk:
        raise ConflictError(
            "You are holding a task of another study of this project: finish or return it first."
        )
    return current


def _claims(
    *, annotator: Annotator, project: Project, now: datetime
) -> tuple[Assignment | None, bool]:
    """Return the annotator's earliest live claim in the project, and whether a "start next"
    claim of it is past its time but not expired yet, in one query."""
    rows = list(
        Assignment.objects.raw(
            _CLAIMS,
            [connection.ops.adapt_datetimefield_value(now), annotator.pk]
            + [AssignmentStatus.CLAIMED.value, project.pk],
        )
    )
    live = next((row for row in rows if row.is_live), None)
    stale = any(not row.is_live and row.queue_project_id == project.pk for row in rows)
    return live, stale


_CLAIMS = """SELECT a.*, CASE WHEN a.expires_at > %s THEN 1 ELSE 0 END AS is_live
    FROM annotate_assignment a JOIN annotate_task t ON t.id = a.task_id
    JOIN annotate_batch b ON b.id = t.batch_id
    WHERE a.annotator_id = %s AND a.status = %s AND b.project_id = %s
    ORDER BY a.claimed_at, a.id"""


def _claim_first_free(
    *,
    annotator: Annotator,
    project: Project,
    now: datetime,
    skip_locked: bool,
    batch: Batch | None = None,
) -> tuple[Assignment | None, bool]:
    """Claim the first candidate task still free under its lock: (the new assignment or None,
    whether a candidate was passed over because another claimer held its lock)."""
    candidates = claimable_task_ids(project=project, annotator=annotator, now=now, batch=batch)
    passed_over = False
    for task_id in candidates:
        # The pass that waits for locks takes each task's lock in a savepoint, rolled back (and
        # the lock with it) when the task is not taken: a claimer waiting for one task then holds
        # no other, so two claimers waiting in opposite orders cannot deadlock. The first pass
        # never waits, and saves the two statements.
        savepoint = None if skip_locked else transaction.savepoint()
        task = _lock_task(task_id=task_id, skip_locked=skip_locked)
        if task is None:
            passed_over = True  # another annotator is claiming it right now; try the next one
            if savepoint is not None:
                transaction.savepoint_rollback(savepoint)
            continue
        worked, taken, system_ids = _task_standing(
            task=task, project=project, annotator=annotator, now=now
        )
        if not worked and taken < project.assignments_per_task:
            assignment = _assignment_create(
                task=task,
                project=project,
                annotator=annotator,
                now=now,
                system_ids=system_ids,
                from_queue=True,
            )
            if savepoint is not None:
                transaction.savepoint_commit(savepoint)
            return assignment, passed_over
        if savepoint is not None:
            transaction.savepoint_rollback(savepoint)
    return None, passed_over


@transaction.atomic
def assignment_claim_task(
    *, annotator: Annotator, task: Task, now: datetime, check_slots: bool = True
) -> Assignment:
    """Claim one given task (a crowd platform's HIT names it), under the task's row lock.

    `check_slots=False` when the platform itself limits how many workers take the task (the
    caller checks the slots its HIT may take: annotate.crowd.services.workers).
    Raises ConflictError if the annotator already worked on this instruction, NoWorkError if
    the task is full.
    """
    locked = _lock_task(task_id=task.pk, skip_locked=False)
    project = task.batch.project
    worked, taken, system_ids = _task_standing(
        task=locked, project=project, annotator=annotator, now=now
    )
    if worked:
        raise ConflictError("You have already worked on this task; it cannot be taken again.")
    if check_slots and taken >= project.assignments_per_task:
        raise NoWorkError("This task already has all the workers it needs.")
    return _assignment_create(
        task=locked, project=project, annotator=annotator, now=now, system_ids=system_ids
    )


def task_lock(*, task_id: int) -> None:
    """Take a task's row lock, as every claim does, for a check of its slots that a caller
    makes before claiming it in the same transaction."""
    _lock_task(task_id=task_id, skip_locked=False)


def _lock_task(*, task_id: int, skip_locked: bool) -> Task | None:
    # No ordering: Task's default ordering joins Batch, and FOR UPDATE would lock the batch row
    # too, which deadlocks claimers of different tasks of the same batch.
    queryset = Task.objects.filter(pk=task_id).order_by()
    if connection.features.has_select_for_update_skip_locked:
        queryset = queryset.select_for_update(skip_locked=skip_locked, of=("self",))
    else:
        queryset = queryset.select_for_update()  # SQLite: the write transaction serialises
    return next(iter(queryset), None)


def _task_standing(
    *, task: Task, project: Project, annotator: Annotator, now: datetime
) -> tuple[bool, int, list[int]]:
    """Return whether the annotator worked on the task's instruction, how many assignments
    hold a slot of it, and the project's systems with a response to it, in one query.

    Run under the task's row lock, in a statement of its own: the count before locking may be
    stale. A free slot goes to the task's left-out work first (task_left_out_restore), so a
    claim never takes the place of accepted work that waits for one; the query tells whether
    the task has any (left_out_q's rule, not a copy of it: a blocked worker's work, or work
    released unconfirmed, waits for no slot), so a task without (nearly every one, and every
    one a block just freed) costs no statement more.
    """
    left_out_sql, left_out_params = _LEFT_OUT.sql(connection, task_id=task.pk)
    sql = _TASK_STANDING.format(
        taken=_TAKEN.format(task="%s", holds_slot=_HOLDS_SLOT),
        worked=_WORKED.format(instruction="%s"),
        left_out=left_out_sql,
    )
    instruction_id = task.instruction_id
    params = [task.pk, *_taken_params(now)]
    params += _worked_params(annotator.pk, instruction_id)
    params += left_out_params
    params += [instruction_id, project.pk]
    with prepared_cursor(connection) as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    taken, worked = next((first, second) for kind, first, second in rows if kind == 0)
    left_out = next(first for kind, first, _ in rows if kind == 2)
    system_ids = [first for kind, first, _ in rows if kind == 1]
    if left_out and taken < project.assignments_per_task:
        taken += _left_out_restored(task_id=task.pk, free=project.assignments_per_task - taken)
    return bool(worked), taken, system_ids


_TASK_STANDING = """SELECT 0, ({taken}), CASE WHEN {worked} THEN 1 ELSE 0 END
    UNION ALL
    SELECT 2, count(*), 0 FROM ({left_out}) left_out
    UNION ALL
    SELECT 1, r.system_id, 0 FROM annotate_response r
    JOIN annotate_project_systems ps ON ps.system_id = r.system_id
    WHERE r.instruction_id = %s AND ps.project_id = %s"""


def _task_left_out(task_id: int) -> QuerySet[Assignment]:
    """The task's left-out work (annotate.selectors.results.left_out_q)."""
    return Assignment.objects.filter(left_out_q(), task_id=task_id)


# _task_left_out as the claim's standing reads it, compiled once: the claim is the hot path.
_LEFT_OUT = CompiledSql(lambda task_id: _task_left_out(task_id).order_by().values("pk"), "task_id")


def task_left_out_restore(*, task_id: int, now: datetime) -> int:
    """Give the task's free slots to its left-out work, if it has any; return how many pieces
    of work hold a slot and count again.

    Left-out work (annotate.selectors.results.left_out_q) is accepted work that holds no slot
    because its task was filled while it was out: a worker unblocked, or work the platform
    confirmed, after other workers took its place. Called wherever a slot frees up (a reject,
    a block, a sync's release, a return, a claim's lapse) and by every claim before it counts,
    so that work gets the first slot free, the earliest submitted first: never one assignment
    more than the project's assignments per task (the count is made under the task's lock, as
    every claim makes it).

    A task with none (nearly every one) costs the one statement that says so: no savepoint
    and no lock, which the hot paths calling this (an MTurk accept, a return) would pay for
    nothing. Work left out after that statement began is restored by whoever left it out
    (an unblock, a confirming sync), under the task's lock.
    """
    if not _task_left_out(task_id).exists():
        return 0
    with transaction.atomic():
        _lock_task(task_id=task_id, skip_locked=False)
        per_task = (
            Project.objects.filter(batches__tasks__id=task_id).values_list(
                "assignments_per_task", flat=True
            )
        ).get()
        free = per_task - task_slots_taken(task_id=task_id, now=now)
        return _left_out_restored(task_id=task_id, free=free)


def _left_out_restored(*, task_id: int, free: int) -> int:
    """task_left_out_restore under the task's lock, taken by the caller, who counted the
    task's `free` slots under it."""
    if free <= 0:
        return 0
    waiting = _task_left_out(task_id)
    # Each piece's row first, then the rule read again in a statement of its own: a block of
    # its worker holds that row until it commits (review.worker_block), and a statement that
    # waited for it still reads the block as it was when the statement began.
    list(_locked_rows(waiting).values_list("pk", flat=True))
    first = waiting.order_by("submitted_at", "pk").values_list("pk", flat=True)[:free]
    return Assignment.objects.filter(pk__in=list(first)).update(is_late=False)


def _locked_rows(assignments: QuerySet[Assignment]) -> QuerySet[Assignment]:
    """The assignments under their row locks, not the rows of the tables the filter joins."""
    if connection.features.has_select_for_update_of:
        return assignments.select_for_update(of=("self",)).order_by("pk")
    return assignments.select_for_update().order_by("pk")  # SQLite: the writer is alone


def task_slots_taken(*, task_id: int, now: datetime, exclude_id: int | None = None) -> int:
    """How many assignments hold a slot of the task (counted_assignments), but `exclude_id`;
    exact under the task's lock (task_lock)."""
    taken = Assignment.objects.filter(counted_assignments(now=now), task_id=task_id)
    if exclude_id is not None:
        taken = taken.exclude(pk=exclude_id)
    return taken.count()


def _assignment_create(
    *,
    task: Task,
    project: Project,
    annotator: Annotator,
    now: datetime,
    system_ids: list[int],
    from_queue: bool = False,
) -> Assignment:
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
        assignment = (
            Assignment.objects.select_for_update()
            .annotate(left_out_waits=_left_out_waits())
            .get(pk=assignment_id, annotator=annotator)
        )
    except Assignment.DoesNotExist:
        raise NotFoundError("No such assignment.") from None
    if assignment.status != AssignmentStatus.CLAIMED:
        raise AssignmentNotLiveError(
            f"This assignment is {assignment.get_status_display().lower()}; only a claimed one can be returned."
        )
    assignment.status = AssignmentStatus.RETURNED
    assignment.save(update_fields=["status"])
    if assignment.left_out_waits:  # nearly never: the return costs no statement more
        task_left_out_restore(task_id=assignment.task_id, now=now)
    return assignment


def assignments_expire(*, now: datetime) -> int:
    """Mark claims past their time as expired, freeing their slots; return how many. Their
    tasks' left-out work takes the slots freed (task_left_out_restore).

    Safe to run twice and concurrently: the update only touches rows still claimed and late.
    """
    return _lapsed_claims_expired(
        Assignment.objects.filter(status=AssignmentStatus.CLAIMED, expires_at__lte=now), now=now
    )


def _lapsed_claims_expired(lapsed: QuerySet[Assignment], *, now: datetime) -> int:
    """Mark these claims past their time expired; their tasks' left-out work takes the slots
    they held (the beat runs no other step for a claim that lapsed).

    Their tasks are read first, with whether left-out work waits in each: a run with no claim
    lapsed (nearly every run of the beat) is that one statement. A claim that lapses after it
    is expired by the next run, and any claim of its task meanwhile gives the slot to the
    task's left-out work before counting (_task_standing).
    """
    tasks = dict(
        lapsed.order_by()
        .annotate(left_out_waits=_left_out_waits())
        .values_list("task_id", "left_out_waits")
        .distinct()
    )
    if not tasks:
        return 0
    expired = lapsed.update(status=AssignmentStatus.EXPIRED)
    for task_id in sorted(task_id for task_id, waits in tasks.items() if waits):
        task_left_out_restore(task_id=task_id, now=now)
    return expired


def _left_out_waits() -> Exists:
    """Whether an assignment's task has left-out work, as an annotation."""
    return Exists(_task_left_out(OuterRef("task_id")))
