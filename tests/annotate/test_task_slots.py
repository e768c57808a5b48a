"""The per-task slot counter (TaskSlots) that the claim's candidates and "task N of M" read.

Database triggers keep it: whatever path changes an assignment (a service, a queryset update, a
bulk insert, a cascade delete), the counter must equal the assignments that hold or may hold a
slot, and the tasks offered must be exactly those with a free slot by the rule of
counted_assignments(). Runs on SQLite and, with DATABASE_URL set, on PostgreSQL (its triggers
are a different text).
"""

import contextlib
import importlib
import random
from datetime import timedelta

import pytest
from django.db import connection
from django.db.models import Count, Q
from django.utils import timezone

from annotate.errors import NoWorkError
from annotate.models import Assignment, AssignmentStatus, Task, TaskSlots
from annotate.services import assignments
from tests.factories import AnnotatorFactory, BatchFactory, project_with_tasks

pytestmark = pytest.mark.django_db

HOLDING = Q(status=AssignmentStatus.CLAIMED) | Q(
    status__in=[AssignmentStatus.SUBMITTED, AssignmentStatus.APPROVED], is_late=False
)


def _held_by_counting() -> dict[int, int]:
    rows = Assignment.objects.filter(HOLDING).values("task_id").annotate(n=Count("id"))
    return {row["task_id"]: row["n"] for row in rows}


def _held_by_counter() -> dict[int, int]:
    return {row.task_id: row.held for row in TaskSlots.objects.all() if row.held}


def _slot_free_by_rule(project, now) -> set[int]:
    tasks = Task.objects.filter(batch__project=project, batch__active=True).annotate(
        taken=Count(
            "assignments", filter=assignments.counted_assignments(now=now, prefix="assignments__")
        )
    )
    return {task.pk for task in tasks if task.taken < project.assignments_per_task}


def test_the_counter_follows_every_way_an_assignment_changes():
    project = project_with_tasks(instructions=6, systems=2, questions=1, assignments_per_task=2)
    tasks = list(Task.objects.filter(batch__project=project))
    people = [AnnotatorFactory() for _ in range(8)]
    now = timezone.now()
    rng = random.Random(7)
    statuses = [choice for choice, _ in AssignmentStatus.choices]
    for step in range(120):
        action = rng.choice(["create", "status", "late", "move", "delete", "bulk"])
        existing = list(Assignment.objects.order_by("id"))
        if action == "create" or not existing:
            task, person = rng.choice(tasks), rng.choice(people)
            if not Assignment.objects.filter(task=task, annotator=person).exists():
                Assignment.objects.create(
                    task=task,
                    annotator=person,
                    status=rng.choice(statuses),
                    is_late=rng.random() < 0.3,
                    claimed_at=now,
                    expires_at=now + timedelta(minutes=rng.choice([-5, 30])),
                    order_seed=step,
                )
        elif action == "status":
            chosen = rng.choice(existing)
            chosen.status = rng.choice(statuses)
            chosen.save(update_fields=["status"])
        elif action == "late":
            chosen = rng.choice(existing)
            Assignment.objects.filter(pk=chosen.pk).update(is_late=not chosen.is_late)
        elif action == "move":
            chosen = rng.choice(existing)
            target = rng.choice(tasks)
            if not Assignment.objects.filter(task=target, annotator=chosen.annotator).exists():
                Assignment.objects.filter(pk=chosen.pk).update(task=target)
        elif action == "delete":
            rng.choice(existing).delete()
        else:
            Assignment.objects.filter(status=AssignmentStatus.CLAIMED).update(
                status=AssignmentStatus.EXPIRED
            )
        assert _held_by_counter() == _held_by_counting(), f"step {step}: {action}"
    # A task deleted with its assignments leaves no counter behind.
    doomed = tasks[0]
    doomed.delete()
    assert not TaskSlots.objects.filter(task_id=doomed.pk).exists()
    assert _held_by_counter() == _held_by_counting()


def test_bulk_inserted_assignments_are_counted():
    project = project_with_tasks(instructions=2, systems=2, questions=1)
    task = Task.objects.filter(batch__project=project).first()
    now = timezone.now()
    Assignment.objects.bulk_create(
        Assignment(
            task=task,
            annotator=AnnotatorFactory(),
            status=status,
            claimed_at=now,
            expires_at=now + timedelta(hours=1),
            order_seed=1,
        )
        for status in [
            AssignmentStatus.CLAIMED,
            AssignmentStatus.SUBMITTED,
            AssignmentStatus.RETURNED,
        ]
    )
    assert TaskSlots.objects.get(task=task).held == 2


def test_the_offered_tasks_are_those_with_a_free_slot_by_the_rule():
    """Claims, submits, returns, late claims not yet expired and the beat, in a random order:
    after each, the tasks offered (and "N of M"'s count) match counted_assignments()."""
    project = project_with_tasks(instructions=8, systems=2, questions=1, assignments_per_task=2)
    people = [AnnotatorFactory() for _ in range(12)]
    rng = random.Random(3)
    now = timezone.now()
    outsider = AnnotatorFactory()  # never works, so only slots decide what it is offered
    for step in range(60):
        now += timedelta(minutes=rng.choice([0, 1, 40]))
        person = rng.choice(people)
        action = rng.choice(["claim", "claim", "return", "expire"])
        if action == "claim":
            with contextlib.suppress(NoWorkError):
                assignments.assignment_claim_next(annotator=person, project=project, now=now)
        elif action == "return":
            live = Assignment.objects.filter(
                annotator=person, status=AssignmentStatus.CLAIMED
            ).first()
            if live is not None:
                assignments.assignment_return(assignment_id=live.pk, annotator=person, now=now)
        else:
            assignments.assignments_expire(now=now)
        expected = _slot_free_by_rule(project, now)
        offered = assignments.claimable_task_ids(
            project=project, annotator=outsider, now=now, limit=100
        )
        assert set(offered) == expected, f"step {step}: {action}"
        assert assignments.claimable_task_count(
            project=project, annotator=outsider, now=now
        ) == len(expected)


def test_a_task_full_of_claims_past_their_time_is_offered_before_the_beat_runs():
    project = project_with_tasks(instructions=1, systems=2, questions=1, assignments_per_task=2)
    now = timezone.now()
    first = assignments.assignment_claim_next(
        annotator=AnnotatorFactory(), project=project, now=now
    )
    assignments.assignment_claim_next(annotator=AnnotatorFactory(), project=project, now=now)
    with pytest.raises(NoWorkError):
        assignments.assignment_claim_next(annotator=AnnotatorFactory(), project=project, now=now)
    later = now + timedelta(minutes=project.allotted_minutes + 1)
    third = assignments.assignment_claim_next(
        annotator=AnnotatorFactory(), project=project, now=later
    )
    assert third.task_id == first.task_id
    assert Assignment.objects.filter(status=AssignmentStatus.CLAIMED).count() == 3  # beat not run


def test_the_migration_backfill_counts_what_the_triggers_would():
    project = project_with_tasks(instructions=3, systems=2, questions=1, assignments_per_task=3)
    now = timezone.now()
    for _ in range(5):
        try:
            assignments.assignment_claim_next(
                annotator=AnnotatorFactory(), project=project, now=now
            )
        except NoWorkError:
            break
    Assignment.objects.filter(pk=Assignment.objects.first().pk).update(
        status=AssignmentStatus.SUBMITTED, is_late=True
    )
    kept = _held_by_counter()
    assert kept == _held_by_counting()
    counting = importlib.import_module("annotate.migrations.0011_taskslots").BACKFILL
    with connection.cursor() as cursor:
        # 0011's count (its INSERT's SELECT: the column batch_id came in 0014).
        cursor.execute(counting[counting.index("SELECT") :])
        assert {task_id: held for task_id, held in cursor.fetchall()} == kept
        # 0014: a row for every task, with its batch.
        cursor.execute("DELETE FROM annotate_taskslots")
        for statement in importlib.import_module(
            "annotate.migrations.0014_taskslots_batch"
        ).BACKFILL:
            cursor.execute(statement)
    rows = {row.task_id: (row.batch_id, row.held) for row in TaskSlots.objects.all()}
    assert rows == {task.pk: (task.batch_id, 0) for task in Task.objects.all()}


def test_every_task_has_its_counter_with_its_batch_from_the_start():
    # However a task is made (a service, bulk_create) or moved, its row is there with its batch:
    # the tasks offered are read from the rows, so a task without one would never be offered.
    project = project_with_tasks(instructions=3, systems=2, questions=1)
    other = project_with_tasks(instructions=1, systems=2, questions=1)
    batch = project.batches.get()
    extra = Task.objects.bulk_create(
        Task(batch=batch, instruction=task.instruction, position=9)
        for task in Task.objects.filter(batch__project=other)
    )
    assert {row.task_id: (row.batch_id, row.held) for row in TaskSlots.objects.all()} == {
        task.pk: (task.batch_id, 0) for task in Task.objects.all()
    }
    moved, elsewhere = extra[0], BatchFactory(project=other, name="second")
    Task.objects.filter(pk=moved.pk).update(batch=elsewhere)
    assert TaskSlots.objects.get(task_id=moved.pk).batch_id == elsewhere.pk
    offered = assignments.claimable_task_ids(
        project=project, annotator=AnnotatorFactory(), now=timezone.now(), limit=100
    )
    assert set(offered) == set(Task.objects.filter(batch=batch).values_list("pk", flat=True))


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's trigger functions")
def test_an_on_time_submit_does_not_call_the_counter_function():
    # A claim and its on-time submission both hold the slot: the update trigger's WHEN skips
    # the PL/pgSQL call (which every new connection would compile) when nothing changes.
    project = project_with_tasks(instructions=2, systems=2, questions=1)
    person = AnnotatorFactory()
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL track_functions = 'pl'")

    def calls() -> int:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT coalesce(sum(calls), 0) FROM pg_stat_xact_user_functions "
                "WHERE funcname = 'annotate_taskslots_count'"
            )
            return cursor.fetchone()[0]

    claim = assignments.assignment_claim_next(annotator=person, project=project, now=timezone.now())
    assert calls() == 1  # the claim's insert
    Assignment.objects.filter(pk=claim.pk).update(status=AssignmentStatus.SUBMITTED)
    assert calls() == 1
    Assignment.objects.filter(pk=claim.pk).update(status=AssignmentStatus.REJECTED)
    assert calls() == 2  # no longer holds its slot
    assert _held_by_counter() == _held_by_counting()
