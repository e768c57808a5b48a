"""The beat's tasks run twice at once (two `celery beat`s, or Redis handing a task still running
after the visibility timeout to a second worker): each claim is expired, each silent import and
run failed, each stored task sent, once."""

import os
import threading
from datetime import timedelta

import pytest
from django.core.files.base import ContentFile
from django.utils import timezone

from annotate.engine.models import EngineRun, RunStatus
from annotate.models import Assignment, AssignmentStatus, DeferredTask, ImportJob
from annotate.services.assignments import assignments_expire
from annotate.services.deferred_tasks import deferred_tasks_send
from annotate.services.import_jobs import import_jobs_fail_stale
from annotate.tasks import expire_assignments
from config.celery import app as celery_app
from tests.annotate.engine.conftest import make_endpoint
from tests.factories import AssignmentFactory
from tests.threads import at_once, in_thread

pytestmark = pytest.mark.django_db(transaction=True)


def test_two_expiries_at_once_expire_each_claim_once():
    now = timezone.now()
    late = [AssignmentFactory(expires_at=now - timedelta(minutes=1)) for _ in range(5)]
    AssignmentFactory(expires_at=now + timedelta(minutes=5))
    counts = at_once(lambda: assignments_expire(now=now), lambda: assignments_expire(now=now))
    assert sum(counts) == len(late)
    expired = Assignment.objects.filter(status=AssignmentStatus.EXPIRED)
    assert sorted(expired.values_list("pk", flat=True)) == sorted(a.pk for a in late)


def test_two_stale_import_sweeps_at_once_fail_each_job_once(settings, tmp_path):
    settings.MEDIA_ROOT, settings.IMPORT_STALE_SECONDS = tmp_path, 600
    now = timezone.now()
    job = ImportJob(kind="instructions", benchmark_name="b", original_name="big.json")
    job.status, job.heartbeat_at = "running", now - timedelta(seconds=601)
    job.upload.save("big.json", ContentFile(b"{}\n"), save=True)
    counts = at_once(
        lambda: import_jobs_fail_stale(now=now), lambda: import_jobs_fail_stale(now=now)
    )
    assert sorted(counts) == [0, 1]
    assert ImportJob.objects.get(pk=job.pk).status == "failed"


def test_two_reaps_at_once_fail_each_silent_run_once(settings):
    from tests.annotate.engine import echo

    echo_kind = {"echo": "tests.annotate.engine.echo.EchoProtocol"}
    settings.ENGINE_PROTOCOLS = {**settings.ENGINE_PROTOCOLS, **echo_kind}

    now = timezone.now()
    silent = EngineRun.objects.create(
        kind="echo", endpoint=make_endpoint("", name="fake"), status=RunStatus.RUNNING,
        heartbeat=now - timedelta(hours=1), params={"items": ["a"]},
    )  # fmt: skip
    echo.FINISHED.clear()
    from annotate.engine.services.runs import engine_runs_reap

    counts = at_once(lambda: engine_runs_reap(now=now), lambda: engine_runs_reap(now=now))
    assert sorted(counts) == [0, 1]
    assert [(silent.pk, RunStatus.FAILED)] == echo.FINISHED  # its protocol told once


@pytest.mark.skipif(
    not os.environ.get("DATABASE_URL", "").startswith("postgres"),
    reason="SKIP LOCKED needs PostgreSQL (the embedded SQLite default runs one beat, flocked)",
)
def test_two_deferred_sends_at_once_send_each_stored_task_once(monkeypatch):
    DeferredTask.objects.create(
        name="annotate.tasks.expire_assignments", args=[], created_at=timezone.now()
    )
    task = celery_app.tasks[expire_assignments.name]
    sent, sending, finish = [], threading.Event(), threading.Event()

    def held_send(*args, **kwargs):
        sent.append(args)
        sending.set()
        finish.wait(10)  # the first send waits on the broker while the second beat runs

    monkeypatch.setattr(task, "apply_async", held_send)
    outcomes = []
    first = in_thread(lambda: deferred_tasks_send(now=timezone.now()), outcomes)
    assert sending.wait(10)
    second = deferred_tasks_send(now=timezone.now())
    finish.set()
    first.join(10)
    assert (outcomes, second, len(sent)) == ([1], 0, 1)
    assert not DeferredTask.objects.exists()
