"""An import task delivered twice (Redis hands a task still running after the visibility timeout
to a second worker): only the delivery that claimed the job imports; a job whose worker died is
taken over by the next delivery, never left running."""

import json
import threading
from datetime import timedelta

import pytest
from django.core.files.base import ContentFile
from django.urls import reverse
from django.utils import timezone

from annotate.models import ImportJob, Instruction
from annotate.services import import_jobs
from annotate.services.import_jobs import import_job_run
from tests.threads import in_thread

ROW = {
    "id": "u1",
    "input": "",
    "category": "Poems",
    "instruction": "Write a haiku.",
    "decomposed_questions": ["Is it a haiku?"],
    "subset": "Hard_set",
    "question_label": [["Format"]],
}


def queued_job(**fields) -> ImportJob:
    job = ImportJob(kind="instructions", benchmark_name="b", original_name="bench.json", **fields)
    job.upload.save("bench.json", ContentFile((json.dumps(ROW) + "\n").encode()), save=True)
    return job


@pytest.mark.django_db(transaction=True)
def test_two_deliveries_of_one_import_at_once_import_it_once(settings, tmp_path, monkeypatch):
    settings.MEDIA_ROOT = tmp_path
    job = queued_job()
    real_import, calls = import_jobs.import_file, []
    importing, finish = threading.Event(), threading.Event()

    def held_open(**arguments):
        calls.append(arguments["path"])
        if len(calls) == 1:  # the first delivery is importing when the second arrives
            importing.set()
            finish.wait(30)
        return real_import(**arguments)

    monkeypatch.setattr(import_jobs, "import_file", held_open)
    outcomes = []
    thread = in_thread(lambda: import_job_run(job_id=job.pk), outcomes)
    assert importing.wait(30)
    second = import_job_run(job_id=job.pk)
    finish.set()
    thread.join(30)

    assert second.status == "running"  # left to the first delivery, nothing imported
    assert len(calls) == 1
    (first,) = outcomes
    job.refresh_from_db()
    assert (first.status, job.status, job.created, job.rows) == ("done", "done", 1, 1)
    assert Instruction.objects.count() == 1


@pytest.mark.django_db
def test_a_redelivered_import_whose_worker_died_is_taken_over_and_finished(settings, tmp_path):
    settings.MEDIA_ROOT, settings.IMPORT_STALE_SECONDS = tmp_path, 600
    now = timezone.now()
    dead = queued_job(status="running", heartbeat_at=now - timedelta(seconds=601), lease="old")
    job = import_job_run(job_id=dead.pk)
    assert (job.status, job.created) == ("done", 1)
    assert job.lease not in ("", "old")


@pytest.mark.django_db
def test_a_delivery_leaves_an_import_another_worker_beats_for(settings, tmp_path, monkeypatch):
    settings.MEDIA_ROOT, settings.IMPORT_STALE_SECONDS = tmp_path, 600
    beating = timezone.now() - timedelta(seconds=30)
    alive = queued_job(status="running", heartbeat_at=beating, lease="theirs")
    monkeypatch.setattr(import_jobs, "import_file", pytest.fail)
    job = import_job_run(job_id=alive.pk)
    assert (job.status, job.heartbeat_at, job.lease) == ("running", beating, "theirs")
    assert Instruction.objects.count() == 0


@pytest.mark.django_db
def test_a_delivery_that_lost_its_claim_does_not_write_the_end(settings, tmp_path, monkeypatch):
    settings.MEDIA_ROOT = tmp_path
    job = queued_job()
    real_import = import_jobs.import_file

    def taken_over_meanwhile(**arguments):
        ImportJob.objects.filter(pk=job.pk).update(lease="another delivery")
        return real_import(**arguments)

    monkeypatch.setattr(import_jobs, "import_file", taken_over_meanwhile)
    assert import_job_run(job_id=job.pk).status == "running"  # the other delivery ends it


@pytest.mark.django_db
def test_the_admin_shows_the_lease_and_heartbeat_without_letting_them_be_edited(
    client, admin_user, settings, tmp_path
):
    settings.MEDIA_ROOT = tmp_path
    job = queued_job(status="running", heartbeat_at=timezone.now(), lease="a-delivery")
    admin_user.is_superuser = True
    admin_user.save()
    client.force_login(admin_user)
    page = client.get(reverse("admin:annotate_importjob_change", args=[job.pk])).text
    assert "a-delivery" in page
    assert 'name="lease"' not in page and 'name="heartbeat_at' not in page
