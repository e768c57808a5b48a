"""The upload page: researchers queue imports and see them finish or fail with the line named."""

import json
import threading
from datetime import timedelta

import pytest
from django.core.files.base import ContentFile
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db.models.functions import Now
from django.urls import reverse
from django.utils import timezone

from annotate.errors import ImportFileError
from annotate.models import ImportJob, Instruction
from annotate.services import import_jobs
from annotate.services.import_jobs import import_job_run
from tests.clocks import clock_off_by

pytestmark = pytest.mark.django_db

ROW = {
    "id": "u1",
    "input": "",
    "category": "Poems",
    "instruction": "Write a haiku.",
    "decomposed_questions": ["Is it a haiku?"],
    "subset": "Hard_set",
    "question_label": [["Format"]],
}


def upload(text: str, name: str = "bench.json") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, text.encode(), content_type="application/octet-stream")


def post(client, text, name="bench.json", **fields):
    data = {
        "kind": "instructions",
        "benchmark_name": "uploaded",
        "upload": upload(text, name),
        **fields,
    }
    return client.post(reverse("annotate:import-list"), data)


def test_researcher_uploads_a_benchmark_and_sees_it_imported(
    client, researcher, django_capture_on_commit_callbacks, settings, tmp_path
):
    settings.MEDIA_ROOT = tmp_path
    client.force_login(researcher)
    with django_capture_on_commit_callbacks(execute=True):
        page = post(client, json.dumps(ROW) + "\n")
    assert page.status_code == 302
    job = ImportJob.objects.get()
    assert job.status == "done" and job.created == 1
    assert Instruction.objects.get().external_id == "u1"
    detail = client.get(page["Location"])
    assert "Imported 1 instruction from bench.json" in detail.text
    assert 'http-equiv="refresh"' not in detail.text


def test_a_bad_line_fails_the_job_with_line_and_field_and_writes_nothing(
    client, researcher, django_capture_on_commit_callbacks, settings, tmp_path
):
    settings.MEDIA_ROOT = tmp_path
    client.force_login(researcher)
    bad = json.dumps(ROW) + "\n" + json.dumps({**ROW, "id": "u2", "subset": "Medium"}) + "\n"
    with django_capture_on_commit_callbacks(execute=True):
        page = post(client, bad)
    job = ImportJob.objects.get()
    assert job.status == "failed"
    assert "bench.json, line 2, field 'subset'" in job.message
    assert str(tmp_path) not in job.message
    assert Instruction.objects.count() == 0
    detail = client.get(page["Location"]).text
    assert "line 2" in detail and "none: a refused file writes nothing" in detail
    assert "Rows read" not in detail  # it read two, of which it kept none: no count to mislead
    # Running the job again (a redelivered task) changes nothing.
    assert import_job_run(job_id=job.pk).status == "failed"


def test_incomplete_form_is_refused_and_nothing_queued(client, researcher, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path
    client.force_login(researcher)
    page = post(client, '{"id": "x", "output": "y"}\n', name="r.jsonl", kind="responses")
    assert page.status_code == 400 and "name it" in page.text
    assert post(client, "", name="empty.json").status_code == 400
    assert not ImportJob.objects.exists()


def test_annotators_cannot_import(client, annotator_user):
    client.force_login(annotator_user)
    assert post(client, json.dumps(ROW)).status_code == 403
    assert client.get(reverse("annotate:import-list")).status_code == 403


def test_an_unexpected_error_fails_the_job_with_its_message_not_a_500(
    client, researcher, django_capture_on_commit_callbacks, settings, tmp_path, monkeypatch
):
    settings.MEDIA_ROOT = tmp_path
    client.force_login(researcher)

    def broken(*, path, **arguments):
        raise RuntimeError(f"disk on fire while reading {path}")

    monkeypatch.setattr(import_jobs, "import_file", broken)
    with django_capture_on_commit_callbacks(execute=True):
        page = post(client, json.dumps(ROW) + "\n")
    assert page.status_code == 302
    job = ImportJob.objects.get()
    assert job.status == "failed" and job.finished_at is not None
    assert "RuntimeError: disk on fire while reading bench.json" in job.message
    assert str(tmp_path) not in job.message
    assert "RuntimeError" in client.get(page["Location"]).text


def stuck_job(researcher, **fields) -> ImportJob:
    job = ImportJob(
        kind="instructions",
        benchmark_name="b",
        original_name="big.json",
        created_by=researcher,
        **fields,
    )
    job.upload.save("big.json", ContentFile(b"{}\n"), save=True)
    return job


def test_a_job_whose_worker_vanished_is_failed_after_the_timeout(
    client, researcher, settings, tmp_path
):
    settings.MEDIA_ROOT, settings.IMPORT_STALE_SECONDS = tmp_path, 600
    now = timezone.now()
    silent = stuck_job(researcher, status="running", heartbeat_at=now - timedelta(seconds=601))
    alive = stuck_job(researcher, status="running", heartbeat_at=now - timedelta(seconds=30))
    done = stuck_job(researcher, status="done", heartbeat_at=now - timedelta(days=1))
    assert import_jobs.import_jobs_fail_stale(now=now) == 1
    assert import_jobs.import_jobs_fail_stale(now=now) == 0  # safe to run twice
    silent.refresh_from_db(), alive.refresh_from_db(), done.refresh_from_db()
    assert (silent.status, alive.status, done.status) == ("failed", "running", "done")
    assert "stopped (no heartbeat for 600 s)" in silent.message
    assert "annotate.tasks.fail_stale_imports" in {
        entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()
    }


def test_the_import_page_fails_a_vanished_job_even_without_a_beat(
    client, researcher, settings, tmp_path
):
    settings.MEDIA_ROOT = tmp_path
    job = stuck_job(researcher, status="running", heartbeat_at=timezone.now() - timedelta(hours=2))
    client.force_login(researcher)
    page = client.get(reverse("annotate:import-detail", args=[job.pk]))
    assert "no heartbeat" in page.text
    job.refresh_from_db()
    assert job.status == "failed"


@pytest.mark.django_db(transaction=True)
def test_a_running_import_beats_while_it_works(settings, tmp_path, monkeypatch):
    settings.MEDIA_ROOT, settings.IMPORT_HEARTBEAT_SECONDS = tmp_path, 0.05
    job = stuck_job(None)  # no user: a flushed database (transaction=True) has no role groups
    seen = []

    def slow(*, path, **arguments):
        first = ImportJob.objects.get(pk=job.pk).heartbeat_at
        for _ in range(200):  # up to 10 s; the heartbeat comes every 0.05 s
            latest = ImportJob.objects.get(pk=job.pk).heartbeat_at
            if latest != first:
                seen.append((first, latest))
                break
            threading.Event().wait(0.05)
        raise ImportFileError(path, 1, None, "stop here")

    monkeypatch.setattr(import_jobs, "import_file", slow)
    assert import_jobs.import_job_run(job_id=job.pk).status == "failed"
    assert seen and seen[0][1] > seen[0][0]


def test_the_import_page_limits_uploads_per_user(
    client, researcher, worker_rates, settings, tmp_path
):
    settings.MEDIA_ROOT = tmp_path
    worker_rates(uploads="1/hour")
    client.force_login(researcher)
    assert post(client, json.dumps(ROW) + "\n").status_code == 302
    refused = post(client, json.dumps(ROW) + "\n")
    assert refused.status_code == 429 and refused["Retry-After"] == "3600"
    assert ImportJob.objects.count() == 1


def test_the_import_page_names_bad_labels_and_unknown_references_in_one_attempt(
    client, researcher, django_capture_on_commit_callbacks, settings, tmp_path
):
    from annotate.models import Label
    from tests.factories import benchmark_with_responses

    settings.MEDIA_ROOT = tmp_path
    benchmark, systems = benchmark_with_responses(instructions=1, systems=1, questions=2)
    instruction = benchmark.instructions.get().external_id
    labels = (
        "instruction_id,system,annotator,question_index,label\n"
        f"{instruction},{systems[0].name},ann,1,YES\n"
        f"{instruction},{systems[0].name},ann,1,MAYBE\n"
        f"{instruction},nosuch,ann,1,NO\n"
        f"{instruction},{systems[0].name},ann,3,NO\n"
    )
    client.force_login(researcher)
    with django_capture_on_commit_callbacks(execute=True):
        page = post(
            client,
            labels,
            name="labels.csv",
            kind="labels",
            benchmark_name=benchmark.name,
            annotator_kind="expert",
        )
    job = ImportJob.objects.get()
    assert job.status == "failed", job.message
    detail = client.get(page["Location"]).text
    assert "labels.csv: 3 wrong lines:" in detail
    for named in (
        "- line 3, field &#x27;label&#x27;",
        "- line 4, field &#x27;system&#x27;: no system named &#x27;nosuch&#x27;",
        "- line 5, field &#x27;question_index&#x27;",
    ):
        assert named in detail
    assert not Label.objects.exists()


def test_a_new_annotator_without_a_kind_is_refused_naming_the_pages_own_field(
    client, researcher, django_capture_on_commit_callbacks, settings, tmp_path
):
    """The page's refusal says where on the page a kind is given, not only the command line's
    --kind, which a researcher on the page does not have."""
    from annotate.models import Annotator, Label
    from tests.factories import benchmark_with_responses

    settings.MEDIA_ROOT = tmp_path
    benchmark, systems = benchmark_with_responses(instructions=1, systems=1, questions=1)
    instruction = benchmark.instructions.get().external_id
    labels = (
        "instruction_id,system,annotator,question_index,label\n"
        f"{instruction},{systems[0].name},newcomer,1,YES\n"
    )
    client.force_login(researcher)
    with django_capture_on_commit_callbacks(execute=True):
        page = post(client, labels, name="labels.csv", kind="labels", benchmark_name=benchmark.name)
    detail = client.get(page["Location"]).text
    assert "labels.csv, line 2, field &#x27;annotator&#x27;" in detail
    assert "&#x27;Kind of new annotators&#x27; on the import page" in detail
    field = client.get(reverse("annotate:import-list")).text
    assert '<label for="id_annotator_kind">Kind of new annotators</label>' in field
    assert not Label.objects.exists() and not Annotator.objects.filter(name="newcomer").exists()


@pytest.mark.parametrize("skewed", ["holder", "taker"])
def test_a_running_import_that_beats_is_not_taken_over_whatever_the_workers_clocks_say(
    researcher, settings, monkeypatch, skewed
):
    # Two workers whose clocks differ by two minutes, more than the stale threshold: the
    # lease's age is the database's clock, so neither the holder's slow clock nor the
    # taker's fast one makes a fresh lease look stale, and the file is not imported twice.
    settings.IMPORT_STALE_SECONDS = 60
    job = stuck_job(researcher, status="queued")
    with monkeypatch.context() as clock:
        if skewed == "holder":
            clock_off_by(clock, -120)
        token = import_jobs._import_job_claim(job_id=job.pk)
    assert token is not None
    if skewed == "taker":
        clock_off_by(monkeypatch, +120)

    second = import_job_run(job_id=job.pk)
    assert (second.status, second.lease, second.finished_at) == ("running", token, None)


def test_an_import_that_beats_is_not_failed_by_a_beat_whose_clock_runs_ahead(
    researcher, settings, monkeypatch
):
    settings.IMPORT_STALE_SECONDS = 60
    job = stuck_job(researcher, status="queued")
    token = import_jobs._import_job_claim(job_id=job.pk)
    clock_off_by(monkeypatch, +120)  # the beat's host: by its clock the job is two minutes silent
    assert import_jobs.import_jobs_fail_stale(now=timezone.now()) == 0
    ImportJob.objects.filter(pk=job.pk).update(heartbeat_at=Now() - timedelta(seconds=61))
    assert import_jobs.import_jobs_fail_stale(now=timezone.now()) == 1
    job.refresh_from_db()
    assert (job.status, job.lease) == ("failed", token)


def test_a_silent_import_is_taken_over_whatever_the_takers_clock_says(
    researcher, settings, monkeypatch
):
    settings.IMPORT_STALE_SECONDS = 60
    job = stuck_job(researcher, status="running", lease="dead")
    ImportJob.objects.filter(pk=job.pk).update(heartbeat_at=Now() - timedelta(seconds=61))
    clock_off_by(monkeypatch, -120)  # by its own clock the last beat is a minute ahead
    token = import_jobs._import_job_claim(job_id=job.pk)
    assert token is not None
    assert ImportJob.objects.get(pk=job.pk).lease == token
