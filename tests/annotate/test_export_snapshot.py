"""The raw label export reads the work statuses first and the labels after: a submission that
commits in between must be exported with its own status, not crash the download half-way."""

import io

import pytest
from django.utils import timezone

import annotate.selectors.results as results
import annotate.services.exports as exports
from annotate.models import (
    Annotator,
    AnnotatorKind,
    Assignment,
    AssignmentStatus,
    Label,
    LabelValue,
)
from annotate.services.assignments import annotator_for_user, assignment_claim_next
from annotate.services.submissions import assignment_submit
from tests.factories import project_with_tasks

pytestmark = pytest.mark.django_db


def test_work_submitted_while_the_export_starts_is_exported_with_its_status(
    annotator_user, monkeypatch
):
    project = project_with_tasks(instructions=1, systems=2, questions=1)
    read_statuses = results.work_statuses

    def statuses_then_a_submission(*, benchmark):
        statuses = read_statuses(benchmark=benchmark)
        annotator = annotator_for_user(user=annotator_user)
        Annotator.objects.filter(pk=annotator.pk).update(kind=AnnotatorKind.EXPERT)
        claim = assignment_claim_next(annotator=annotator, project=project, now=timezone.now())
        Assignment.objects.filter(pk=claim.pk).update(
            status=AssignmentStatus.SUBMITTED, submitted_at=timezone.now()
        )
        question = claim.task.instruction.questions.first()
        for response in claim.task.instruction.responses.all():
            Label.objects.create(
                question=question, response=response, annotator=annotator, value=LabelValue.YES,
                assignment=claim,
            )  # fmt: skip
        return statuses

    monkeypatch.setattr(results, "work_statuses", statuses_then_a_submission)
    out = io.StringIO()
    exports.labels_export(benchmark_name=project.benchmark.name, output=out, file_format="csv")
    rows = out.getvalue().strip().splitlines()
    assert len(rows) == 1 + 2  # the header and both labels of the new submission
    assert all(row.endswith(",counted") for row in rows[1:])


def test_a_claim_submitted_on_time_as_the_export_starts_is_exported_as_counted(
    annotator_user, monkeypatch
):
    # The claim is read with the statuses ("not submitted"), submitted on time after: its
    # labels, read after, were written "not submitted" (and a label import dropped them).
    project = project_with_tasks(instructions=1, systems=2, questions=1)
    annotator = annotator_for_user(user=annotator_user)
    Annotator.objects.filter(pk=annotator.pk).update(kind=AnnotatorKind.EXPERT)
    claim = assignment_claim_next(annotator=annotator, project=project, now=timezone.now())
    read_statuses = results.work_statuses

    def statuses_then_the_submit(*, benchmark):
        statuses = read_statuses(benchmark=benchmark)
        assert statuses[claim.pk] == "not submitted"
        answers = {f"r{n}_q1": "yes" for n in range(1, len(claim.display_order) + 1)}
        assignment_submit(
            assignment_id=claim.pk, annotator=annotator, answers=answers, now=timezone.now()
        )
        return statuses

    monkeypatch.setattr(results, "work_statuses", statuses_then_the_submit)
    out = io.StringIO()
    exports.labels_export(benchmark_name=project.benchmark.name, output=out, file_format="csv")
    rows = out.getvalue().strip().splitlines()
    assert len(rows) == 1 + 2  # the header and both labels of the submission
    assert all(row.endswith(",counted") for row in rows[1:])
