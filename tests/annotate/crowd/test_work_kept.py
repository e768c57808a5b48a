"""Submitted work keeps its assignment, and a HIT its confirmations: nothing that decides whether
crowd work counts is deleted from under it, and work without an assignment counts only when
it was imported or its annotator came through no platform (annotate.selectors.results)."""

import csv
import io

import pytest
from django.db.models import ProtectedError

from annotate.crowd.models import Hit, PlatformAssignment, Publication
from annotate.models import (
    AnnotatorKind,
    Assignment,
    AssignmentStatus,
    DirectScore,
    Label,
    LabelValue,
    Project,
)
from annotate.selectors.identities import OPERATOR
from annotate.selectors.labels import benchmark_labels, label_annotators, label_rows
from annotate.selectors.results import WorkStatus, counted_work, work_statuses
from annotate.services.exports import labels_export
from evaluation.selectors.report_data import benchmark_arrays, fetch_label_columns
from tests.annotate.crowd.conftest import crowd_assignment
from tests.annotate.crowd.test_counted_work import _hits, _sync, do_task
from tests.factories import AnnotatorFactory, UserFactory, project_with_tasks

pytestmark = pytest.mark.django_db


@pytest.fixture
def superuser(db):
    return UserFactory(username="root", is_staff=True, is_superuser=True)


def _labelled(assignment) -> None:
    """Store a YES on every question and response of the assignment's task, through it."""
    instruction = assignment.task.instruction
    for question in instruction.questions.all():
        for response in instruction.responses.all():
            Label.objects.create(
                question=question,
                response=response,
                annotator=assignment.annotator,
                value=LabelValue.YES,
                assignment=assignment,
            )


def _uncounted(status, worker="SPAMMER"):
    """A worker's submitted (never confirmed: forged) or rejected work on a one-task project."""
    project = project_with_tasks(instructions=1, systems=2, questions=2)
    assignment = crowd_assignment(
        task=project.batches.get().tasks.get(), worker=worker, assignment_id=f"FORGED-{worker}"
    )
    Assignment.objects.filter(pk=assignment.pk).update(status=status)
    _labelled(assignment)
    return project, assignment


def _counted(benchmark) -> tuple[int, int]:
    """The benchmark's counted labels, by the ORM rule and by the report's SQL."""
    labels = Label.objects.filter(response__instruction__benchmark=benchmark)
    return counted_work(labels).count(), len(fetch_label_columns(benchmark.pk).value)


def _raw_statuses(benchmark) -> set[tuple[str, str]]:
    output = io.StringIO()
    labels_export(benchmark_name=benchmark.name, output=output, file_format="csv")
    return {
        (r["annotator"], r["work_status"]) for r in csv.DictReader(io.StringIO(output.getvalue()))
    }


# --- An assignment holding work is not deleted -------------------------------------------------


@pytest.mark.parametrize("status", [AssignmentStatus.SUBMITTED, AssignmentStatus.REJECTED])
def test_an_assignment_holding_labels_is_not_deleted(status):
    project, assignment = _uncounted(status)
    assert _counted(project.benchmark) == (0, 0)
    for doomed in (assignment, assignment.task, project.batches.get(), project):
        with pytest.raises(ProtectedError):
            doomed.delete()
    assert Label.objects.filter(assignment=assignment).count() == 4
    assert _counted(project.benchmark) == (0, 0)


def test_an_assignment_holding_a_direct_score_is_not_deleted():
    project, assignment = _uncounted(AssignmentStatus.REJECTED)
    Label.objects.filter(assignment=assignment).delete()
    response = assignment.task.instruction.responses.first()
    DirectScore.objects.create(
        response=response, annotator=assignment.annotator, score=5, assignment=assignment
    )
    with pytest.raises(ProtectedError):
        assignment.delete()
    assert counted_work(DirectScore.objects.all()).count() == 0


@pytest.mark.parametrize("model", ["assignment", "task", "batch", "project"])
def test_the_admin_refuses_to_delete_what_holds_work(client, superuser, model):
    project, assignment = _uncounted(AssignmentStatus.REJECTED)
    target = {
        "assignment": assignment,
        "task": assignment.task,
        "batch": project.batches.get(),
        "project": project,
    }[model]
    client.force_login(superuser)
    url = f"/admin/annotate/{model}/{target.pk}/delete/"
    page = client.get(url)
    assert page.status_code == 200
    assert f"Cannot delete {model}" in page.text
    assert "4 labels and 0 direct scores submitted through" in page.text
    refused = client.post(url, {"post": "yes"})
    assert refused.status_code == 200 and "Cannot delete" in refused.text
    assert type(target).objects.filter(pk=target.pk).exists()
    assert _counted(project.benchmark) == (0, 0)


def test_the_admin_delete_selected_action_refuses_too(client, superuser):
    project, assignment = _uncounted(AssignmentStatus.REJECTED)
    client.force_login(superuser)
    page = client.post(
        "/admin/annotate/assignment/",
        {"action": "delete_selected", "_selected_action": [assignment.pk], "post": "yes"},
    )
    assert page.status_code == 200
    assert "Cannot delete assignment" in page.text
    assert "4 labels and 0 direct scores submitted through it" in page.text
    assert Assignment.objects.filter(pk=assignment.pk).exists()


def test_the_admin_still_deletes_a_draft_project_and_a_claim_without_work(client, superuser):
    project = project_with_tasks(instructions=2, systems=2, questions=2)
    claim = crowd_assignment(task=project.batches.get().tasks.first(), worker="IDLE")
    Assignment.objects.filter(pk=claim.pk).update(status=AssignmentStatus.CLAIMED)
    client.force_login(superuser)
    gone = client.post(f"/admin/annotate/assignment/{claim.pk}/delete/", {"post": "yes"})
    assert gone.status_code == 302 and not Assignment.objects.exists()
    gone = client.post(f"/admin/annotate/project/{project.pk}/delete/", {"post": "yes"})
    assert gone.status_code == 302 and not Project.objects.exists()


# --- Work without an assignment --------------------------------------------------------------


def _orphaned(status):
    """Labels left without their assignment, as SET_NULL left them before it was PROTECT."""
    project, assignment = _uncounted(status)
    Label.objects.filter(assignment=assignment).update(assignment=None)
    assignment.delete()
    return project, assignment.annotator


@pytest.mark.parametrize("status", [AssignmentStatus.SUBMITTED, AssignmentStatus.REJECTED])
def test_a_platform_workers_labels_without_an_assignment_do_not_count(status):
    project, annotator = _orphaned(status)
    assert Label.objects.filter(annotator=annotator, assignment=None).count() == 4
    assert _counted(project.benchmark) == (0, 0)
    assert _raw_statuses(project.benchmark) == {(annotator.name, WorkStatus.UNCONFIRMED)}
    labels = list(benchmark_labels(benchmark=project.benchmark))
    rows = label_rows(
        labels=labels, annotators=label_annotators(benchmark=project.benchmark, scope=OPERATOR)
    )
    assert {(row.counted, row.why_not) for row in rows} == {(False, WorkStatus.UNCONFIRMED)}


@pytest.mark.parametrize("platform", ["", "selfhosted"])
def test_labels_without_an_assignment_count_only_for_an_annotator_of_no_platform(platform):
    project = project_with_tasks(instructions=1, systems=2, questions=2)
    annotator = AnnotatorFactory(kind=AnnotatorKind.CROWD, platform=platform, worker_id="W")
    instruction = project.batches.get().tasks.get().instruction
    for question in instruction.questions.all():
        for response in instruction.responses.all():
            Label.objects.create(
                question=question, response=response, annotator=annotator, value=LabelValue.NO
            )
    expected = (4, 4) if platform == "" else (0, 0)
    assert _counted(project.benchmark) == expected
    status = WorkStatus.COUNTED if platform == "" else WorkStatus.UNCONFIRMED
    assert _raw_statuses(project.benchmark) == {(annotator.name, status)}


def test_imported_labels_of_a_platform_worker_count():
    project, annotator = _orphaned(AssignmentStatus.SUBMITTED)
    Label.objects.filter(annotator=annotator).update(imported=True)
    assert _counted(project.benchmark) == (4, 4)
    assert _raw_statuses(project.benchmark) == {(annotator.name, WorkStatus.COUNTED)}


def test_a_raw_export_read_back_counts_the_same_crowd_work(tmp_path):
    """Export → delete the labels → import: the platform worker's counted work counts again as
    imported work, the rejected work (not counted in the file) is not read back."""
    from annotate.services.label_imports import labels_import

    project, rejected = _uncounted(AssignmentStatus.REJECTED, worker="ANO")
    task = project.batches.get().tasks.get()
    approved = crowd_assignment(task=task, worker="AYES", platform="selfhosted")
    _labelled(approved)
    benchmark = project.benchmark
    assert _counted(benchmark) == (4, 4)
    output = io.StringIO()
    labels_export(benchmark_name=benchmark.name, output=output, file_format="csv")
    path = tmp_path / "raw.csv"
    path.write_text(output.getvalue())
    Label.objects.all().delete()
    assert labels_import(path=str(path), benchmark_name=benchmark.name).created == 4
    assert _counted(benchmark) == (4, 4)
    imported = Label.objects.all()
    assert {label.annotator.name for label in imported} == {approved.annotator.name}
    assert all(label.imported and label.assignment_id is None for label in imported)
    assert not Label.objects.filter(annotator=rejected.annotator).exists()


# --- A publication's HITs and the platform's assignments are kept ------------------------------


def test_a_publication_its_hits_and_their_task_are_not_deleted(client, live, fake_mturk):
    first = _hits(live)[0]
    benchmark = first.task.instruction.benchmark
    real, _ = do_task(client, fake_mturk, first, "AREAL1", "yes")
    _sync(live)
    assert benchmark_arrays(benchmark=benchmark).annotator_names == ["mturk:AREAL1"]
    with pytest.raises(ProtectedError):
        Publication.objects.filter(pk=live.pk).delete()
    with pytest.raises(ProtectedError):
        Hit.objects.filter(pk=first.pk).delete()
    with pytest.raises(ProtectedError):
        first.task.delete()
    assert PlatformAssignment.objects.get(assignment=real).hit_id == first.pk
    assert benchmark_arrays(benchmark=benchmark).annotator_names == ["mturk:AREAL1"]
    assert work_statuses(benchmark=benchmark)[real.pk] == WorkStatus.COUNTED


@pytest.mark.parametrize("model", ["publication", "hit", "platformassignment"])
def test_the_admin_cannot_delete_crowd_records(client, live, superuser, model):
    record = {
        "publication": live,
        "hit": live.hits.first(),
        "platformassignment": None,
    }[model]
    if record is None:
        hit = live.hits.first()
        record = PlatformAssignment.objects.create(
            hit=hit, platform_assignment_id="A1", worker_id="W1", status="Submitted",
            synced_at=hit.created_at,
        )  # fmt: skip
    client.force_login(superuser)
    url = f"/admin/crowd/{model}/{record.pk}/delete/"
    assert client.post(url, {"post": "yes"}).status_code == 403
    assert type(record).objects.filter(pk=record.pk).exists()
