"""A researcher who is not on a project does not see that project's crowd worker ids: the
instruction page, the report (page, API, downloads, figures; a worker made an expert is a source of
its own there) and a report export show them a stable pseudonym, and another user's export is not
theirs to open; admins and the project's own researchers see the ids."""

import csv
import io
import json
import zipfile

import pytest
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from annotate.crowd.base import AssignmentInfo
from annotate.crowd.models import Hit, Publication
from annotate.crowd.services.review import _hit_store
from annotate.models import Annotator, AnnotatorKind, AssignmentStatus, Label
from annotate.roles import ADMIN, RESEARCHER
from annotate.selectors.identities import OPERATOR, crowd_pseudonym
from annotate.services.annotators import annotator_kind_set
from evaluation.models import ExportStatus, ReportExport
from evaluation.report_formats import TABLES
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


def _exported_by_an_outsider(client, project, settings, folder, capture_on_commit) -> None:
    """A researcher of none of the worker's projects exports the project's report into
    `folder` (run at once); the export ended done."""
    settings.EXPORT_DIR = folder
    settings.EXPORT_S3_BUCKET = ""
    client.force_login(UserFactory(username="outsider", roles=[RESEARCHER]))
    with capture_on_commit(execute=True):
        client.post(reverse("reports:export", args=[project.benchmark.pk]), {"unknown": "no"})
    export = ReportExport.objects.get()
    assert export.status == ExportStatus.DONE, export.message


def test_report_export_raw_labels_follow_the_requesters_scope(
    client, crowd_work, settings, tmp_path, django_capture_on_commit_callbacks
):
    project, worker = crowd_work
    _exported_by_an_outsider(
        client, project, settings, tmp_path, django_capture_on_commit_callbacks
    )
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
    # (The report, where such a worker is an expert source: the tests below.)
    views = {
        "instruction page": _views(client, project)["instruction page"],
        "annotators": client.get(reverse("annotators:list")).text,
    }
    for name, text in views.items():
        assert "AWORKERSECRET" not in text, name
        assert crowd_pseudonym(worker.pk) in text, name


@pytest.fixture
def expert_worker(crowd_work):
    """The platform worker of `crowd_work`, made an expert: an expert source of the report."""
    project, worker = crowd_work
    annotator_kind_set(annotator=worker, kind=AnnotatorKind.EXPERT, now=timezone.now())
    return project, worker


def _report_texts(client, benchmark, source: str) -> dict[str, str]:
    """The report page, the API, every download of the report and the figure of `source`."""
    detail = reverse("reports:detail", args=[benchmark.pk])
    texts = {"report page": client.get(detail).text}
    texts["report API"] = client.get(reverse("api-report", args=[benchmark.pk])).text
    for fmt in ("json", "csv", "tex", "md"):
        texts[f"report.{fmt}"] = client.get(
            reverse("reports:download", args=[benchmark.pk, fmt])
        ).text
    for table in TABLES:
        for fmt in ("csv", "json"):
            url = reverse("reports:table", args=[benchmark.pk, table, fmt])
            texts[f"{table}.{fmt}"] = client.get(url).text
    figure = reverse("reports:figure", args=[benchmark.pk, "leaderboard", "svg"])
    texts["leaderboard figure"] = client.get(figure, {"source": source}).text  # its title names it
    return texts


def test_a_platform_worker_made_expert_is_a_pseudonym_in_an_outsiders_report(client, expert_worker):
    """The report names an expert source after the annotator: a platform worker made an expert
    showed `mturk:<workerId>` to every researcher, on the page and in every download."""
    project, worker = expert_worker
    client.force_login(UserFactory(username="outsider", roles=[RESEARCHER]))
    pseudonym = crowd_pseudonym(worker.pk)
    texts = _report_texts(client, project.benchmark, source=pseudonym)
    for name, text in texts.items():
        assert "AWORKERSECRET" not in text, name
    tables = ("leaderboard", "sources", "constraints", "domains")  # a row per source
    named = ["report page", "report API", "leaderboard figure"]
    named += [f"report.{fmt}" for fmt in ("json", "csv", "tex", "md")]
    named += [f"{table}.{fmt}" for table in tables for fmt in ("csv", "json")]
    for name in named:
        assert pseudonym in texts[name], name


@pytest.mark.parametrize("who", ["admin", "project researcher"])
def test_who_may_see_the_worker_id_sees_it_in_the_report_and_its_downloads(
    client, expert_worker, who
):
    project, worker = expert_worker
    user = UserFactory(username="seer", roles=[ADMIN if who == "admin" else RESEARCHER])
    if who == "project researcher":
        project.researchers.add(user)
    client.force_login(user)
    texts = _report_texts(client, project.benchmark, source="mturk:AWORKERSECRET")
    for name in ("report page", "report API", "report.md", "leaderboard.csv", "sources.json"):
        assert "mturk:AWORKERSECRET" in texts[name], name
    assert crowd_pseudonym(worker.pk) not in texts["report API"]


def test_one_cached_report_serves_both_readers_with_the_same_numbers(
    client, expert_worker, admin_user, monkeypatch
):
    """The cache holds the report computed once, annotators by id; each reader gets their names
    put in after, and nothing else differs (numbers as `manage.py report` computes them)."""
    from django.core.cache import cache

    from evaluation.services import reports

    project, worker = expert_worker
    benchmark = project.benchmark
    cache.clear()
    builds = []
    cached = reports.cache_get_or_build

    def counted(*, key, read_key, build, timeout):
        def counted_build():
            builds.append(key)
            return build()

        return cached(key=key, read_key=read_key, build=counted_build, timeout=timeout)

    monkeypatch.setattr(reports, "cache_get_or_build", counted)
    api = reverse("api-report", args=[benchmark.pk])
    client.force_login(UserFactory(username="outsider", roles=[RESEARCHER]))
    outsider = client.get(api).json()
    client.get(reverse("reports:detail", args=[benchmark.pk]))
    client.force_login(admin_user)
    admin = client.get(api).json()
    client.get(reverse("reports:download", args=[benchmark.pk, "md"]))
    assert len(builds) == 1
    renamed = json.loads(
        json.dumps(admin).replace("mturk:AWORKERSECRET", crowd_pseudonym(worker.pk))
    )
    assert renamed == outsider
    assert "mturk:AWORKERSECRET" in json.dumps(admin)
    command = reports.report_build(scope=OPERATOR, benchmark=benchmark)  # every name
    for table in ("leaderboard", "sources", "constraints", "domains", "votes"):
        assert admin[table] == command[table], table


def test_an_outsiders_export_of_a_report_with_the_worker_as_expert_names_no_worker_id(
    client, expert_worker, settings, tmp_path, django_capture_on_commit_callbacks
):
    project, worker = expert_worker
    _exported_by_an_outsider(
        client, project, settings, tmp_path, django_capture_on_commit_callbacks
    )
    archive = zipfile.ZipFile(next(tmp_path.rglob("export.zip")))
    for name in archive.namelist():
        assert b"AWORKERSECRET" not in archive.read(name), name
    report = json.loads(archive.read("report.json"))
    assert crowd_pseudonym(worker.pk) in {row["source"] for row in report["leaderboard"]}


def test_the_report_command_run_by_an_operator_names_the_worker(expert_worker):
    """Whoever runs manage.py runs the site: the command names every annotator, as
    `manage.py export_labels` does."""
    project, _ = expert_worker
    output = io.StringIO()
    call_command("report", benchmark=project.benchmark.name, format="md", stdout=output)
    assert "mturk:AWORKERSECRET" in output.getvalue()


def test_a_pseudonym_that_is_another_experts_name_leaves_two_sources_apart(client, expert_worker):
    """A pseudonym is `crowd-worker-<id>`, which an imported expert may be called: the two
    sources keep a name each, so no table, download or figure puts one's numbers for the
    other's."""
    project, worker = expert_worker
    namesake = Annotator.objects.create(name=crowd_pseudonym(worker.pk), kind=AnnotatorKind.EXPERT)
    label = Label.objects.filter(annotator=worker).first()
    LabelFactory(question=label.question, response=label.response, annotator=namesake, value=0)
    client.force_login(UserFactory(username="outsider", roles=[RESEARCHER]))
    report = client.get(reverse("api-report", args=[project.benchmark.pk])).json()
    system = report["systems"][0]
    for table in ("leaderboard", "sources"):
        rows = [
            row
            for row in report[table]
            if row["subset"] == "overall" and row.get("system", system) == system
        ]
        named = [row["source"] for row in rows if row["source"].startswith(namesake.name)]
        assert len(named) == len(set(named)) == 2, (table, named)  # the worker, the namesake
        assert "AWORKERSECRET" not in str(report[table])
