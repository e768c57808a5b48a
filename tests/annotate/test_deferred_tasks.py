"""Redis down when work is queued: the request still succeeds and the work runs once Redis is back."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from django.utils import timezone

from annotate.models import DeferredTask, ImportJob, Instruction
from annotate.services.deferred_tasks import deferred_tasks_send, task_send
from annotate.tasks import expire_assignments
from config.celery import app as celery_app

pytestmark = pytest.mark.django_db

ROW = {
    "id": "d1",
    "input": "",
    "category": "Poems",
    "instruction": "Write a haiku.",
    "decomposed_questions": ["Is it a haiku?"],
    "subset": "Hard_set",
    "question_label": [["Format"]],
}


def _forget_connections() -> None:
    """Drop pooled broker connections so the next send dials the current broker_url."""
    celery_app._after_fork()  # what Celery itself does to start afresh in a forked child


@pytest.fixture
def broker_down(monkeypatch):
    """Point Celery at a closed port on this machine, as if Redis were stopped."""
    monkeypatch.setitem(celery_app.conf, "task_always_eager", False)
    closed = "redis://127.0.0.1:1/0"
    monkeypatch.setitem(celery_app.conf, "broker_url", closed)
    monkeypatch.setenv("CELERY_BROKER_URL", closed)  # Celery reads it before its own setting
    _forget_connections()
    yield
    monkeypatch.undo()
    _forget_connections()


def test_upload_succeeds_while_the_broker_is_down_and_the_import_runs_when_it_returns(
    client, researcher, broker_down, django_capture_on_commit_callbacks, settings, tmp_path
):
    settings.MEDIA_ROOT = tmp_path
    client.force_login(researcher)
    upload = SimpleUploadedFile("b.json", (json.dumps(ROW) + "\n").encode())
    data = {"kind": "instructions", "benchmark_name": "during outage", "upload": upload}
    with django_capture_on_commit_callbacks(execute=True):
        page = client.post(reverse("annotate:import-list"), data)

    assert page.status_code == 302
    job = ImportJob.objects.get()
    assert job.status == "queued"
    deferred = DeferredTask.objects.get()
    assert (deferred.name, deferred.args) == ("annotate.tasks.import_job_run_task", [job.pk])
    assert "127.0.0.1:1" in deferred.last_error

    # Still down: the beat's send keeps the task and counts the attempt.
    assert deferred_tasks_send(now=timezone.now()) == 0
    assert DeferredTask.objects.get().attempts == 2

    celery_app.conf.task_always_eager = True  # the broker is back (tasks run here, at once)
    assert deferred_tasks_send(now=timezone.now()) == 1
    job.refresh_from_db()
    assert job.status == "done"
    assert Instruction.objects.get().external_id == "d1"
    assert not DeferredTask.objects.exists()
    assert deferred_tasks_send(now=timezone.now()) == 0  # sent once, not again


def test_a_task_sent_while_the_broker_answers_is_not_stored(settings):
    assert celery_app.conf.task_always_eager or settings.CELERY_BROKER_URL
    assert task_send(task=expire_assignments) is True
    assert not DeferredTask.objects.exists()
