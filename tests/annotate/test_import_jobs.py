"""The upload page: researchers queue imports and see them finish or fail with the line named."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from annotate.models import ImportJob, Instruction
from annotate.services.import_jobs import import_job_run

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
    assert "Imported 1 instructions from bench.json" in detail.text
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
    assert "line 2" in client.get(page["Location"]).text
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
    assert post(client, json.dumps(ROW)).status_code == 404
    assert client.get(reverse("annotate:import-list")).status_code == 404
