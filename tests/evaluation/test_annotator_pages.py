"""The annotators page: researchers see who did what, how well they agree, and decide kinds."""

import pytest
from django.urls import reverse
from django.utils import timezone

from annotate.crowd.models import WorkerBlock
from annotate.models import Annotator, AnnotatorKind, Label, LabelValue, ProjectAnnotatorKind
from annotate.roles import ANNOTATOR
from annotate.services.assignments import annotator_for_user, assignment_claim_next
from annotate.services.submissions import assignment_submit, expected_fields
from tests.factories import UserFactory, project_with_tasks

pytestmark = pytest.mark.django_db


def _submit_all(user, project, value):
    annotator = annotator_for_user(user=user)
    assignment = assignment_claim_next(annotator=annotator, project=project, now=timezone.now())
    positions = list(range(1, assignment.task.instruction.questions.count() + 1))
    fields = expected_fields(
        phase="labels", responses=len(assignment.display_order), question_positions=positions
    )
    assignment_submit(
        assignment_id=assignment.id,
        annotator=annotator,
        answers={name: value for name in fields},
        active_seconds=30,
        now=timezone.now(),
    )
    return annotator


@pytest.fixture
def worked_project(researcher):
    project = project_with_tasks(instructions=1, systems=2, questions=2)
    project.researchers.add(researcher)
    experts = [_submit_all(UserFactory(roles=[ANNOTATOR]), project, "yes") for _ in range(2)]
    for expert in experts:
        expert.kind = AnnotatorKind.EXPERT
        expert.save()
    newcomer = _submit_all(UserFactory(username="newbie", roles=[ANNOTATOR]), project, "no")
    return project, newcomer


def test_the_page_shows_work_and_agreement_of_an_undecided_newcomer(
    client, researcher, worked_project
):
    project, newcomer = worked_project
    client.force_login(researcher)
    page = client.get(reverse("annotators:list"))
    assert page.status_code == 200
    row = next(r for r in page.context["rows"] if r.annotator == newcomer)
    assert row.project == project and row.tasks_done == 1
    assert 0 < row.seconds_per_task <= 30  # active time is capped at the time since the claim
    assert row.agreement_majority == 0.0  # said NO where both experts said YES
    # 4 labels, each paired with the two experts' YES: 0 of 8 pairs equal.
    assert row.agreement_others == 0.0
    expert_row = next(r for r in page.context["rows"] if r.annotator.kind == AnnotatorKind.EXPERT)
    # Each expert: the other expert's majority is YES (4 of 4); pairs: 4 equal of 8.
    assert expert_row.agreement_majority == 1.0 and expert_row.agreement_others == 0.5
    assert "not decided yet" in page.text and "newbie" in page.text


def test_a_blocked_worker_is_marked_with_the_reason_until_unblocked(
    client, researcher, worked_project
):
    _, newcomer = worked_project
    block = WorkerBlock.objects.create(annotator=newcomer, reason="copied answers")
    client.force_login(researcher)
    page = client.get(reverse("annotators:list"))
    blocked = [r.annotator for r in page.context["rows"] if r.block]
    assert blocked == [newcomer]
    row = page.text.split('data-annotator="newbie"')[1].split("</th>")[0]
    assert ">blocked</strong>" in row and "copied answers" in row
    assert "1 row below belongs to blocked workers" in page.text

    block.active = False  # unblocked
    block.save()
    page = client.get(reverse("annotators:list"))
    assert not any(r.block for r in page.context["rows"])
    assert ">blocked</strong>" not in page.text and "blocked workers" not in page.text


def test_a_researcher_decides_the_kind_and_a_project_override(client, researcher, worked_project):
    project, newcomer = worked_project
    client.force_login(researcher)
    url = reverse("annotators:kind", args=[newcomer.pk])
    answer = client.post(url, {"kind": "crowd", "filter_kind": "undecided"})
    assert answer.status_code == 302 and answer["Location"].endswith("?kind=undecided")
    newcomer.refresh_from_db()
    assert newcomer.kind == AnnotatorKind.CROWD and newcomer.kind_changed_at is not None

    client.post(url, {"kind": "expert", "project": project.pk})
    assert ProjectAnnotatorKind.objects.get(annotator=newcomer, project=project).kind == "expert"
    client.post(url, {"kind": "", "project": project.pk})
    assert not ProjectAnnotatorKind.objects.exists()

    refused = client.post(url, {"kind": "llm"}, follow=True)
    assert "kind must be one of" in refused.text
    newcomer.refresh_from_db()
    assert newcomer.kind == AnnotatorKind.CROWD


def test_annotators_cannot_open_the_page_or_change_kinds(client, worked_project):
    _, newcomer = worked_project
    client.force_login(newcomer.user)
    assert client.get(reverse("annotators:list")).status_code == 403
    assert (
        client.post(reverse("annotators:kind", args=[newcomer.pk]), {"kind": "expert"}).status_code
        == 403
    )
    newcomer.refresh_from_db()
    assert newcomer.kind == AnnotatorKind.UNDECIDED
    assert Label.objects.filter(annotator=newcomer, value=LabelValue.NO).count() == 4
    assert Annotator.objects.count() == 3
