"""The annotator's dashboard: a fixed number of queries whatever the number of projects, and the
same numbers as the per-project reads it replaced (kept below as the reference)."""

import itertools
from datetime import timedelta

import pytest
from django.db import connection
from django.db.models import Count
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from annotate.crowd.models import WorkerBlock
from annotate.models import Assignment, AssignmentStatus, Label, Project, Task
from annotate.roles import ANNOTATOR
from annotate.selectors import work as work_selectors
from annotate.selectors.work import LAPSED_SHOWN, ProjectWork, dashboard_for_annotator
from annotate.services.assignments import (
    annotator_for_user,
    claimable_task_count,
    counted_assignments,
)
from tests.factories import (
    AnnotatorFactory,
    AssignmentFactory,
    BatchFactory,
    TaskFactory,
    UserFactory,
    project_with_tasks,
)

pytestmark = pytest.mark.django_db


def _dashboard_before(*, annotator, now):
    """The dashboard as it was read before (four queries per project): the reference."""
    projects = Project.objects.filter(batches__active=True).distinct().order_by("name")
    rows = []
    for project in projects:
        if annotator is None:
            rows.append(ProjectWork(project, _open_tasks_before(project, now), 0, None))
            continue
        mine = Assignment.objects.filter(annotator=annotator, task__batch__project=project)
        rows.append(
            ProjectWork(
                project=project,
                available=claimable_task_count(project=project, annotator=annotator, now=now),
                submitted=mine.filter(submitted_at__isnull=False).count(),
                live_assignment=mine.filter(
                    status=AssignmentStatus.CLAIMED, expires_at__gt=now
                ).first(),
                lapsed_assignments=list(
                    mine.filter(work_selectors.lapsed_unsubmitted(now=now))
                    .select_related("task__instruction")
                    .order_by("-expires_at")[:LAPSED_SHOWN]
                ),
            )
        )
    return rows


def _open_tasks_before(project, now):
    return (
        Task.objects.filter(batch__project=project, batch__active=True)
        .annotate(
            counted=Count(
                "assignments", filter=counted_assignments(now=now, prefix="assignments__")
            )
        )
        .filter(counted__lt=project.assignments_per_task)
        .count()
    )


def _shown(rows):
    return [
        (
            row.project.pk,
            row.available,
            row.submitted,
            row.live_assignment.pk if row.live_assignment else None,
            [(a.pk, a.task.instruction.external_id) for a in row.lapsed_assignments],
        )
        for row in rows
    ]


_claims = itertools.count()


def _assign(task, annotator, now, *, minutes_left=30, **fields):
    # Claimed a second apart: which of two live claims is shown never rests on a tie.
    return AssignmentFactory(
        task=task,
        annotator=annotator,
        claimed_at=now - timedelta(minutes=60, seconds=next(_claims)),
        expires_at=now + timedelta(minutes=minutes_left),
        **fields,
    )


def _varied_projects(me, now):
    """Projects in every state the dashboard tells apart; returns the other annotators."""
    other, blocked = AnnotatorFactory(), AnnotatorFactory(platform="selfhosted", worker_id="w1")
    WorkerBlock.objects.create(annotator=blocked, reason="spam")
    submitted = {"status": AssignmentStatus.SUBMITTED, "submitted_at": now}

    # One slot per task: the first task full (someone else's work), the second held by another's
    # live claim, the third by another's lapsed claim (a free slot again), the fourth by a
    # blocked worker's work, the fifth by late work (holds no slot); the sixth mine, submitted.
    a = project_with_tasks(instructions=7, systems=1, questions=1, assignments_per_task=1)
    tasks = list(_tasks_of(a))
    _assign(tasks[0], other, now, **submitted)
    _assign(tasks[1], other, now)
    _assign(tasks[2], other, now, minutes_left=-5)
    _assign(tasks[3], blocked, now, **submitted)
    _assign(tasks[4], other, now, status=AssignmentStatus.EXPIRED, is_late=True, submitted_at=now)
    _assign(tasks[5], me, now, **submitted)
    # The seventh: another's lapsed claim and a live one since, over the limit: still full.
    _assign(tasks[6], other, now, minutes_left=-6)
    _assign(tasks[6], AnnotatorFactory(), now)

    # Two slots per task: my live claim, more lapsed claims than are shown (some expired by the
    # beat), a returned one, and my late work; a second batch, inactive, with my lapsed claim.
    b = project_with_tasks(instructions=LAPSED_SHOWN + 6, systems=1, questions=1)
    b.assignments_per_task = 2
    b.save(update_fields=["assignments_per_task"])
    tasks = list(_tasks_of(b))
    _assign(tasks[0], me, now)
    for index, task in enumerate(tasks[1 : LAPSED_SHOWN + 3]):
        status = AssignmentStatus.EXPIRED if index % 2 else AssignmentStatus.CLAIMED
        _assign(task, me, now, minutes_left=-1 - index, status=status)
    _assign(tasks[LAPSED_SHOWN + 3], me, now, status=AssignmentStatus.RETURNED)
    _assign(
        tasks[LAPSED_SHOWN + 4],
        me,
        now,
        minutes_left=-3,
        status=AssignmentStatus.EXPIRED,
        is_late=True,
        submitted_at=now,
    )
    _assign(tasks[LAPSED_SHOWN + 5], other, now, **submitted)
    _assign(tasks[LAPSED_SHOWN + 5], blocked, now, **submitted)
    closed = BatchFactory(project=b, active=False)
    _assign(TaskFactory(batch=closed), me, now, minutes_left=-2)
    _assign(TaskFactory(batch=closed), me, now, **submitted)

    # My work in a project whose only batch is closed: not listed at all.
    c = project_with_tasks(instructions=2, systems=1, questions=1)
    _assign(_tasks_of(c).first(), me, now, **submitted)
    c.batches.update(active=False)

    # An instruction I labelled outside any assignment (imported): not offered to me again.
    d = project_with_tasks(instructions=3, systems=1, questions=1)
    task = _tasks_of(d).first()
    question, response = task.instruction.questions.first(), task.instruction.responses.first()
    Label.objects.create(question=question, response=response, annotator=me, value=1)
    # A project nobody worked in, and a project with two active batches.
    project_with_tasks(instructions=2, systems=1, questions=1)
    e = project_with_tasks(instructions=1, systems=1, questions=1)
    _assign(TaskFactory(batch=BatchFactory(project=e)), me, now, minutes_left=-4)
    return other, blocked


def _tasks_of(project):
    return Task.objects.filter(batch__project=project).order_by("batch_id", "position", "id")


def test_the_dashboard_shows_the_same_numbers_as_the_per_project_reads():
    now = timezone.now()
    me = annotator_for_user(user=UserFactory(username="dash-me", roles=[ANNOTATOR]))
    other, blocked = _varied_projects(me, now)
    for when in (now, now + timedelta(minutes=31), now - timedelta(minutes=3)):
        for who in (me, other, blocked, AnnotatorFactory(), None):
            expected = _shown(_dashboard_before(annotator=who, now=when))
            assert _shown(dashboard_for_annotator(annotator=who, now=when)) == expected, who
    rows = {row[0]: row for row in _shown(dashboard_for_annotator(annotator=me, now=now))}
    # The data does reach every case: a limited lapsed list, a live claim, counts.
    assert any(len(row[4]) == LAPSED_SHOWN for row in rows.values())
    assert any(row[3] for row in rows.values()) and any(row[2] for row in rows.values())
    assert len(rows) == 5


def _projects_with_my_work(count, user, now):
    me = annotator_for_user(user=user)
    for _ in range(count):
        project = project_with_tasks(instructions=4, systems=1, questions=1)
        tasks = list(_tasks_of(project))
        _assign(tasks[0], me, now, status=AssignmentStatus.SUBMITTED, submitted_at=now)
        _assign(tasks[1], me, now)
        _assign(tasks[2], me, now, minutes_left=-1)
    return me


def _queries(read):
    with CaptureQueriesContext(connection) as captured:
        read()
    return len(captured.captured_queries)


def _measure(client, me, now):
    project = Project.objects.order_by("pk").first()
    return (
        _queries(lambda: dashboard_for_annotator(annotator=me, now=now)),
        _queries(lambda: client.get(reverse("work:dashboard"))),
        _queries(lambda: client.get(reverse("work:project-done", args=[project.pk]))),
    )


@pytest.mark.parametrize("count", [5, 20])
def test_the_dashboard_reads_as_many_queries_for_many_projects_as_for_one(client, count):
    """The selector, the page (template included) and the all-done page run a fixed number of
    queries: four more per project before."""
    now = timezone.now()
    user = UserFactory(username="dash-many", roles=[ANNOTATOR])
    me = _projects_with_my_work(1, user, now)
    client.force_login(user)
    client.get(reverse("work:dashboard"))  # warm up: the session, templates
    with_one = _measure(client, me, now)
    _projects_with_my_work(count - 1, user, now)
    rows = dashboard_for_annotator(annotator=me, now=now)
    assert len(rows) == count and sum(row.submitted for row in rows) == count
    assert all(row.live_assignment and row.lapsed_assignments for row in rows)
    assert client.get(reverse("work:dashboard")).text.count("Continue your task") == count
    assert _measure(client, me, now) == with_one
