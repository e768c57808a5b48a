from datetime import timedelta

import pytest
from django.utils import timezone

from annotate.errors import AssignmentNotLiveError, NotFoundError, NoWorkError
from annotate.models import Assignment, AssignmentStatus
from annotate.services.assignments import (
    annotator_for_user,
    assignment_claim_next,
    assignment_return,
    assignments_expire,
    display_order_for,
)
from annotate.tasks import expire_assignments
from tests.factories import AnnotatorFactory, UserFactory, project_with_tasks

pytestmark = pytest.mark.django_db
NOW = timezone.now()


def test_claim_gives_a_task_with_a_shuffled_permutation_of_the_systems():
    project = project_with_tasks(systems=4)
    assignment = assignment_claim_next(annotator=AnnotatorFactory(), project=project, now=NOW)
    system_ids = sorted(project.systems.values_list("id", flat=True))
    assert sorted(assignment.display_order) == system_ids
    assert assignment.display_order == display_order_for(
        system_ids=system_ids, seed=assignment.order_seed
    )
    assert assignment.expires_at == NOW + timedelta(minutes=project.allotted_minutes)
    assert assignment.status == AssignmentStatus.CLAIMED


def test_order_depends_on_the_seed():
    ids = list(range(1, 6))
    orders = {tuple(display_order_for(system_ids=ids, seed=seed)) for seed in range(20)}
    assert len(orders) > 5
    assert display_order_for(system_ids=ids, seed=3) == display_order_for(system_ids=ids, seed=3)


def test_claiming_again_resumes_the_live_claim():
    project = project_with_tasks()
    annotator = AnnotatorFactory()
    first = assignment_claim_next(annotator=annotator, project=project, now=NOW)
    again = assignment_claim_next(annotator=annotator, project=project, now=NOW)
    assert again.pk == first.pk


def test_never_more_than_n_per_task_and_never_the_same_task_twice():
    project = project_with_tasks(instructions=2, assignments_per_task=2)
    annotators = [AnnotatorFactory() for _ in range(5)]
    for annotator in annotators:
        for _ in range(3):
            try:
                assignment = assignment_claim_next(annotator=annotator, project=project, now=NOW)
            except NoWorkError:
                break
            assignment.status = AssignmentStatus.SUBMITTED
            assignment.submitted_at = NOW
            assignment.save()
    for task in project.batches.get().tasks.all():
        assert task.assignments.count() == 2
    pairs = list(Assignment.objects.values_list("task_id", "annotator_id"))
    assert len(pairs) == len(set(pairs)) == 4
    with pytest.raises(NoWorkError):
        assignment_claim_next(annotator=annotators[-1], project=project, now=NOW)


def test_expired_claim_frees_its_slot_and_the_periodic_task_marks_it():
    project = project_with_tasks(instructions=1, assignments_per_task=1, allotted_minutes=10)
    first = assignment_claim_next(annotator=AnnotatorFactory(), project=project, now=NOW)
    other = AnnotatorFactory()
    with pytest.raises(NoWorkError):
        assignment_claim_next(annotator=other, project=project, now=NOW + timedelta(minutes=9))
    later = NOW + timedelta(minutes=11)
    assert assignments_expire(now=later) == 1
    assert assignments_expire(now=later) == 0  # safe to run twice
    first.refresh_from_db()
    assert first.status == AssignmentStatus.EXPIRED
    second = assignment_claim_next(annotator=other, project=project, now=later)
    assert second.task_id == first.task_id


def test_celery_task_expires_claims_past_their_time():
    project = project_with_tasks(instructions=1, allotted_minutes=1)
    assignment = assignment_claim_next(
        annotator=AnnotatorFactory(), project=project, now=timezone.now() - timedelta(minutes=5)
    )
    assert expire_assignments.delay().get() == 1
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.EXPIRED


def test_celery_beat_runs_the_expiry_every_minute(settings):
    schedule = settings.CELERY_BEAT_SCHEDULE["annotate-expire-assignments"]
    assert schedule["task"] == expire_assignments.name and schedule["schedule"] == 60


def test_returned_task_goes_to_someone_else_but_not_back():
    project = project_with_tasks(instructions=1, assignments_per_task=1)
    annotator = AnnotatorFactory()
    assignment = assignment_claim_next(annotator=annotator, project=project, now=NOW)
    assignment_return(assignment_id=assignment.id, annotator=annotator, now=NOW)
    with pytest.raises(NoWorkError):
        assignment_claim_next(annotator=annotator, project=project, now=NOW)
    assert assignment_claim_next(annotator=AnnotatorFactory(), project=project, now=NOW)
    with pytest.raises(AssignmentNotLiveError):
        assignment_return(assignment_id=assignment.id, annotator=annotator, now=NOW)


def test_a_return_runs_a_fixed_number_of_queries(django_assert_num_queries):
    """The return's savepoint, its row read under its lock (with whether left-out work waits
    for the slot it frees: none here), its update, the savepoint's release."""
    project = project_with_tasks(instructions=1, assignments_per_task=1)
    annotator = AnnotatorFactory()
    assignment = assignment_claim_next(annotator=annotator, project=project, now=NOW)
    with django_assert_num_queries(4):
        assignment_return(assignment_id=assignment.id, annotator=annotator, now=NOW)


def test_the_expiry_runs_one_query_when_no_claim_lapsed_and_two_when_one_did(
    django_assert_num_queries,
):
    """The beat runs it every minute: the lapsed claims' tasks (and whether left-out work waits
    in each, none here), then their update."""
    project = project_with_tasks(instructions=1, allotted_minutes=10)
    assignment_claim_next(annotator=AnnotatorFactory(), project=project, now=NOW)
    with django_assert_num_queries(1):
        assert assignments_expire(now=NOW) == 0
    with django_assert_num_queries(2):
        assert assignments_expire(now=NOW + timedelta(minutes=11)) == 1


def test_returning_someone_elses_assignment_is_not_found():
    project = project_with_tasks(instructions=1)
    assignment = assignment_claim_next(annotator=AnnotatorFactory(), project=project, now=NOW)
    with pytest.raises(NotFoundError):
        assignment_return(assignment_id=assignment.id, annotator=AnnotatorFactory(), now=NOW)


def test_inactive_batch_gives_no_work():
    project = project_with_tasks(instructions=1)
    project.batches.update(active=False)
    with pytest.raises(NoWorkError):
        assignment_claim_next(annotator=AnnotatorFactory(), project=project, now=NOW)


def test_annotator_for_user_is_created_once():
    user = UserFactory(username="ann")
    first = annotator_for_user(user=user)
    assert annotator_for_user(user=user).pk == first.pk
    assert first.name == "ann"


def test_instruction_the_annotator_already_labelled_elsewhere_is_not_offered():
    from tests.factories import LabelFactory

    project = project_with_tasks(instructions=2)
    annotator = AnnotatorFactory()
    tasks = list(project.batches.get().tasks.order_by("position"))
    question = tasks[0].instruction.questions.first()
    response = tasks[0].instruction.responses.first()
    LabelFactory(annotator=annotator, question=question, response=response)
    assignment = assignment_claim_next(annotator=annotator, project=project, now=NOW)
    assert assignment.task_id == tasks[1].id
    assignment.status = AssignmentStatus.SUBMITTED
    assignment.save()
    with pytest.raises(NoWorkError):
        assignment_claim_next(annotator=annotator, project=project, now=NOW)


def _work_elsewhere(kind: str, annotator, tasks) -> None:
    """Leave the annotator's earlier work of one `kind` on each task's instruction."""
    from annotate.models import Label
    from annotate.services.projects import InstructionSelection, project_create
    from tests.factories import AssignmentFactory, DirectScoreFactory, LabelFactory

    project = tasks[0].batch.project
    if kind in ("assignment elsewhere", "label of a deleted assignment"):
        other = project_create(
            name="other",
            benchmark=project.benchmark,
            systems=list(project.systems.all()),
            selection=InstructionSelection(),
        )
        others = {t.instruction_id: t for t in other.batches.get().tasks.all()}
    for task in tasks:
        response = task.instruction.responses.order_by("id").last()
        if kind == "direct score":
            DirectScoreFactory(annotator=annotator, response=response)
            continue
        assignment = None
        if kind != "imported label":
            assignment = AssignmentFactory(task=others[task.instruction_id], annotator=annotator)
        if kind != "assignment elsewhere":
            question = task.instruction.questions.first()
            LabelFactory(
                annotator=annotator, question=question, response=response, assignment=assignment
            )
    if kind == "label of a deleted assignment":
        # As SET_NULL left them before Label.assignment was PROTECT: the labels stay, without it.
        Label.objects.filter(annotator=annotator).update(assignment=None)
        other.batches.all().delete()


@pytest.mark.parametrize(
    "kind",
    ["imported label", "label of a deleted assignment", "direct score", "assignment elsewhere"],
)
def test_earlier_work_on_more_tasks_than_a_claim_looks_at_is_never_offered(kind):
    from annotate.models import Label
    from annotate.services.assignments import CANDIDATES_PER_CLAIM, claimable_task_count

    project = project_with_tasks(instructions=CANDIDATES_PER_CLAIM + 3, assignments_per_task=2)
    tasks = list(project.batches.get().tasks.order_by("position"))
    worked = CANDIDATES_PER_CLAIM + 1  # the first in claim order, and more than one claim reads
    annotator = AnnotatorFactory()
    _work_elsewhere(kind, annotator, tasks[:worked])
    if kind == "label of a deleted assignment":
        assert Label.objects.filter(annotator=annotator, assignment__isnull=True).count() == worked
    assert claimable_task_count(project=project, annotator=annotator, now=NOW) == 2
    claimed = []
    for _ in range(2):
        assignment = assignment_claim_next(annotator=annotator, project=project, now=NOW)
        claimed.append(assignment.task_id)
        assignment.status = AssignmentStatus.SUBMITTED
        assignment.submitted_at = NOW
        assignment.save()
    assert claimed == [tasks[worked].id, tasks[worked + 1].id]
    with pytest.raises(NoWorkError):
        assignment_claim_next(annotator=annotator, project=project, now=NOW)
