"""A researcher who is not on a project does not see that project's crowd worker ids: the
instruction page, the report (page, API) and the raw labels of a report export show them a stable
pseudonym, and another user's export is not theirs to open; admins and the project's own
researchers see the ids."""

import csv
import io
import json
import zipfile

import pytest
from django.urls import reverse
from django.utils import timezone

from annotate.crowd.base import AssignmentInfo
from annotate.crowd.models import Hit, Publication
from annotate.crowd.services.review import _hit_store
from annotate.models import Annotator, AnnotatorKind, AssignmentStatus
from annotate.roles import ADMIN, RESEARCHER
from annotate.selectors.identities import crowd_pseudonym
from evaluation.models import ExportStatus, ReportExport
from tests.factories import AssignmentFactory, LabelFactory, UserFactory, project_with_tasks

pytestmark = pytest.mark.django_db


@pytest.fixture
def crowd_work(db):
    """One confirmed MTurk worker's labels on the first task of a project."""
    project = project_with_tasks(instructions=1, systems=2, questions=1, assignments_per_task=1)
    task = project.batches.get().tasks.get()
    worker = Annotator.objects.create(
        name="mturk:AWORKERSECRET",
        kind=AnnotatorKind.CROWD,
        platform="mturk",
        worker_id="AWORKERSECRET",
    )
    assignment = AssignmentFactory(
        task=task,
        annotator=worker,
        status=AssignmentStatus.SUBMITTED,
        submitted_at=timezone.now(),
        platform_hit_id="HIT1",
        platform_assignment_id="ASG1",
    )
    publication = Publication.objects.create(
        batch=task.batch,
        platform="mturk",
        title="t",
        description="d",
        reward_usd=1,
        fee_rate="0.25",
        assignments_per_task=1,
        assignment_duration_seconds=60,
        auto_approval_delay_seconds=60,
        lifetime_seconds=60,
        task_base_url="https://annotate.example.org",
        link_token="tok",
    )
    hit = Hit.objects.create(
        publication=publication,
        task=task,
        unique_request_token="u1",
        max_assignments=publication.assignments_per_task,
        hit_id="HIT1",
        status="created",
    )
    _hit_store(
        hit=hit,
        rows=[AssignmentInfo("ASG1", "AWORKERSECRET", "HIT1", "Submitted")],
        now=timezone.now(),
    )
    for response in task.instruction.responses.all():
        LabelFactory(
            question=task.instruction.questions.get(),
            response=response,
            annotator=worker,
            assignment=assignment,
            value=1,
        )
    return project, worker


def _views(client, project):
    benchmark = project.benchmark
    instruction = benchmark.instructions.get()
    return {
        "instruction page": client.get(
            f"/benchmarks/{benchmark.pk}/instructions/{instruction.pk}/"
        ).text,
        "report page": client.get(reverse("reports:detail", args=[benchmark.pk])).text,
        "report API": client.get(reverse("api-report", args=[benchmark.pk])).text,
    }


def test_outsider_researcher_sees_a_pseudonym_everywhere(client, crowd_work):
    project, worker = crowd_work
    client.force_login(UserFactory(username="outsider", roles=[RESEARCHER]))
    views = _views(client, project)
    assert views["instruction page"].count(crowd_pseudonym(worker.pk)) == 2
    for name, text in views.items():
        assert "AWORKERSECRET" not in text, name


@pytest.mark.parametrize("who", ["admin", "project researcher", "project creator"])
def test_admins_and_the_projects_researchers_see_the_worker_id(client, crowd_work, who):
    project, worker = crowd_work
    user = UserFactory(
        username=who.replace(" ", "-"), roles=[ADMIN if who == "admin" else RESEARCHER]
    )
    if who == "project researcher":
        project.researchers.add(user)
    elif who == "project creator":
        project.created_by = user
        project.save()
    client.force_login(user)
    page = _views(client, project)["instruction page"]
    assert page.count("mturk:AWORKERSECRET") == 2


def test_report_export_raw_labels_follow_the_requesters_scope(
    client, crowd_work, settings, tmp_path, django_capture_on_commit_callbacks
):
    project, worker = crowd_work
    settings.EXPORT_DIR = tmp_path
    settings.EXPORT_S3_BUCKET = ""
    client.force_login(UserFactory(username="outsider", roles=[RESEARCHER]))
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("reports:export", args=[project.benchmark.pk]), {"unknown": "no"})
    export = ReportExport.objects.get()
    assert export.status == ExportStatus.DONE, export.message
    for path in tmp_path.rglob("*"):
        if path.is_file() and path.suffix in (".csv", ".json", ".md", ".tex"):
            assert "AWORKERSECRET" not in path.read_text(), path.name
    raw = list(csv.DictReader(next(tmp_path.rglob("raw_labels.csv")).open()))
    assert {row["annotator"] for row in raw} == {crowd_pseudonym(worker.pk)}
    assert json.loads(next(tmp_path.rglob("report.json")).read_text())["benchmark"]


def test_an_admins_report_export_is_not_another_researchers_to_download(
    client, crowd_work, settings, tmp_path, django_capture_on_commit_callbacks
):
    """The admin's export names the worker; an outsider researcher neither sees it listed on
    the report page nor opens its status or zip (404), and their own export stays theirs."""
    project, worker = crowd_work
    benchmark = project.benchmark
    settings.EXPORT_DIR = tmp_path
    settings.EXPORT_S3_BUCKET = ""
    client.force_login(UserFactory(username="export-admin", roles=[ADMIN], is_staff=True))
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("reports:export", args=[benchmark.pk]), {"unknown": "no"})
    export = ReportExport.objects.get()
    assert export.status == ExportStatus.DONE, export.message
    download = reverse("reports:export-download", args=[benchmark.pk, export.pk])
    zipped = b"".join(client.get(download).streaming_content)
    assert b"AWORKERSECRET" in zipfile.ZipFile(io.BytesIO(zipped)).read("labels/raw_labels.csv")
    client.force_login(UserFactory(username="outsider", roles=[RESEARCHER]))
    assert client.get(download).status_code == 404
    status = reverse("reports:export-status", args=[benchmark.pk, export.pk])
    assert client.get(status).status_code == 404
    assert download not in client.get(reverse("reports:detail", args=[benchmark.pk])).text
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("reports:export", args=[benchmark.pk]), {"unknown": "no"})
    own = ReportExport.objects.exclude(pk=export.pk).get()
    own_download = reverse("reports:export-download", args=[benchmark.pk, own.pk])
    assert client.get(own_download).status_code == 200


def test_the_annotators_page_and_its_kind_messages_show_an_outsider_the_pseudonym(
    client, crowd_work
):
    """The page lists every person (a row without a project for those outside one's projects);
    a hidden worker's row, and the message after deciding their kind, name the pseudonym."""
    project, worker = crowd_work
    outsider = UserFactory(username="outsider", roles=[RESEARCHER])
    own = project_with_tasks(instructions=1, systems=1, questions=1)
    own.researchers.add(outsider)
    client.force_login(outsider)
    page = client.get(reverse("annotators:list")).text
    assert "AWORKERSECRET" not in page and crowd_pseudonym(worker.pk) in page
    url = reverse("annotators:kind", args=[worker.pk])
    for form in ({"kind": "crowd"}, {"kind": "", "project": own.pk}):
        answer = client.post(url, form, follow=True).text
        assert "AWORKERSECRET" not in answer and crowd_pseudonym(worker.pk) in answer, form
    project.researchers.add(outsider)  # now one of the worker's projects: the id is theirs
    assert "mturk:AWORKERSECRET" in client.get(reverse("annotators:list")).text


@pytest.mark.parametrize("kind", [AnnotatorKind.EXPERT, AnnotatorKind.UNDECIDED])
def test_a_platform_worker_given_another_kind_keeps_their_pseudonym(
    client, crowd_work, kind, admin_user
):
    """A platform worker is a crowd worker whatever kind results give them: an admin may set
    a kind on the annotators page, and setting "expert" (or "not decided yet") showed the
    worker's platform id to every researcher, on every page and in their exports."""
    project, worker = crowd_work
    client.force_login(admin_user)  # follow: the admin reads their own message (the id)
    client.post(reverse("annotators:kind", args=[worker.pk]), {"kind": kind}, follow=True)
    worker.refresh_from_db()
    assert worker.kind == kind
    client.force_login(UserFactory(username="outsider", roles=[RESEARCHER]))
    # (The report names each expert by annotator name for every viewer: not covered here.)
    views = {
        "instruction page": _views(client, project)["instruction page"],
        "annotators": client.get(reverse("annotators:list")).text,
    }
    for name, text in views.items():
        assert "AWORKERSECRET" not in text, name
        assert crowd_pseudonym(worker.pk) in text, name
