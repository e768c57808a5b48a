"""One live "start next" claim per annotator and project, held by the database itself
(assignment_one_live_claim_per_project), and what a claim that loses the race answers."""

from datetime import timedelta

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from annotate.errors import ConflictError
from annotate.models import Assignment, AssignmentStatus
from annotate.services import assignments
from tests.factories import AnnotatorFactory, project_with_tasks

pytestmark = pytest.mark.django_db


@pytest.fixture
def project():
    return project_with_tasks(instructions=4, systems=2, questions=1)


def test_the_database_refuses_a_second_live_claim_in_the_project(project):
    annotator, now = AnnotatorFactory(), timezone.now()
    first = assignments.assignment_claim_next(annotator=annotator, project=project, now=now)
    other_task = project.batches.get().tasks.exclude(pk=first.task_id).first()
    with pytest.raises(IntegrityError), transaction.atomic():
        Assignment.objects.create(
            task=other_task,
            annotator=annotator,
            claimed_at=now,
            expires_at=now + timedelta(hours=1),
            order_seed=1,
            queue_project=project,
        )


def test_a_claim_that_loses_the_race_answers_with_the_winners_claim(project, monkeypatch):
    annotator, now = AnnotatorFactory(), timezone.now()
    winner = assignments.assignment_claim_next(annotator=annotator, project=project, now=now)
    real = assignments._claims
    calls = []

    def not_yet_committed(**kwargs):
        # What a parallel request sees while the winner's transaction is still open.
        calls.append(kwargs)
        return (None, False) if len(calls) == 1 else real(**kwargs)

    monkeypatch.setattr(assignments, "_claims", not_yet_committed)
    again = assignments.assignment_claim_next(annotator=annotator, project=project, now=now)
    assert again == winner
    assert Assignment.objects.filter(annotator=annotator).count() == 1


def test_a_claim_past_its_time_does_not_block_the_next_one(project):
    annotator, now = AnnotatorFactory(), timezone.now()
    old = assignments.assignment_claim_next(annotator=annotator, project=project, now=now)
    later = now + timedelta(minutes=project.allotted_minutes + 1)
    new = assignments.assignment_claim_next(annotator=annotator, project=project, now=later)
    assert new != old
    old.refresh_from_db()
    assert old.status == AssignmentStatus.EXPIRED
    assert Assignment.objects.filter(annotator=annotator, status="claimed").get() == new


def test_a_study_link_does_not_hand_a_second_task_while_one_of_another_batch_is_held(project):
    from annotate.models import Batch

    annotator, now = AnnotatorFactory(), timezone.now()
    held = assignments.assignment_claim_next(annotator=annotator, project=project, now=now)
    other = Batch.objects.create(project=project, name="second")
    with pytest.raises(ConflictError, match="another study"):
        assignments.assignment_claim_next(
            annotator=annotator, project=project, now=now, batch=other
        )
    assert Assignment.objects.filter(annotator=annotator).get() == held


def test_crowd_hits_of_one_project_may_be_held_together(project):
    """MTurk lets a worker accept several HITs at once: those claims are outside the rule."""
    annotator, now = AnnotatorFactory(), timezone.now()
    tasks = list(project.batches.get().tasks.all()[:2])
    for task in tasks:
        assignments.assignment_claim_task(annotator=annotator, task=task, now=now)
    assert Assignment.objects.filter(annotator=annotator, status="claimed").count() == 2
