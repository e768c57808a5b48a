"""A real Celery worker, started as a process, runs an import taken from Redis end to end."""

import contextlib
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from django.conf import settings
from django.core.files.base import ContentFile
from django.db import connection

from annotate.models import ImportJob, Instruction
from annotate.tasks import import_job_run_task
from config.celery import app as celery_app

ROW = {
    "id": "w1",
    "input": "",
    "category": "Poems",
    "instruction": "Write a limerick.",
    "decomposed_questions": ["Is it a limerick?", "Does it rhyme?"],
    "subset": "Easy_set",
    "question_label": [["Format"], ["Linguistic"]],
}

needs_services = pytest.mark.skipif(
    not os.environ.get("CELERY_BROKER_URL")
    or not os.environ.get("DATABASE_URL", "").startswith("postgres"),
    reason="needs CELERY_BROKER_URL (Redis) and DATABASE_URL (PostgreSQL), as .ci/run sets them",
)


@pytest.fixture
def worker(transactional_db, tmp_path):
    """Start `celery worker` on a queue of its own, against the test database."""
    queue = f"test-{uuid.uuid4().hex[:8]}"
    with worker_process(queue, tmp_path):
        yield queue, tmp_path


@contextlib.contextmanager
def worker_process(queue: str, tmp_path: Path, *, log: str = "worker.log", env=None):
    """Run one `celery worker` (solo pool) on `queue` against the test database, its output in
    `tmp_path / log`, with `env` added to this process's environment; stop it at the end."""
    database = connection.settings_dict
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        "DATABASE_URL": f"postgres://{database['USER']}@{database['HOST']}:{database['PORT']}/{database['NAME']}",
        "MEDIA_ROOT": str(tmp_path),
        **(env or {}),
    }
    output = open(tmp_path / log, "w")  # noqa: SIM115 - closed below
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "config",
            "worker",
            "--pool",
            "solo",
            "-Q",
            queue,
            "--without-gossip",
            "--without-mingle",
            "--loglevel",
            "INFO",
            "--hostname",
            f"{Path(log).stem}@%h",
        ],
        cwd=settings.BASE_DIR,
        env=env,
        stdout=output,
        stderr=subprocess.STDOUT,
    )
    try:
        yield process
    finally:
        process.terminate()
        process.wait(timeout=30)
        output.close()


@needs_services
def test_worker_takes_an_import_from_redis_and_stores_it(worker, settings, monkeypatch):
    queue, media = worker
    monkeypatch.setitem(celery_app.conf, "task_always_eager", False)
    settings.MEDIA_ROOT = media
    job = ImportJob(kind="instructions", benchmark_name="from-worker", original_name="w.json")
    job.upload.save("w.json", ContentFile(json.dumps(ROW) + "\n"), save=False)
    job.save()

    result = import_job_run_task.apply_async((job.pk,), queue=queue)

    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        job.refresh_from_db()
        if job.status in ("done", "failed"):
            break
        time.sleep(0.2)
    log = (Path(media) / "worker.log").read_text()
    assert job.status == "done", f"job {job.status}: {job.message}\n--- worker log ---\n{log}"
    assert list(Instruction.objects.values_list("external_id", flat=True)) == ["w1"]
    assert result.id in log  # the worker process, not this one, ran it
