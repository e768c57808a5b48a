"""The embedded beat: without a broker the serving process runs CELERY_BEAT_SCHEDULE itself, one
process at a time, and a task that fails stops none of the others."""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from annotate.crowd.fake import FakePlatform
from annotate.engine.models import EngineRun, RunStatus
from annotate.models import Assignment, AssignmentStatus
from config import embedded_beat
from config.embedded_beat import LOCK_FILE_NAME, LOCK_RETRY_SECONDS, EmbeddedBeat
from tests.annotate.crowd.conftest import published_on_fake
from tests.annotate.embedded_server import EmbeddedServer
from tests.annotate.engine.conftest import make_endpoint
from tests.factories import AssignmentFactory, project_with_tasks

EXPIRE = {"task": "annotate.tasks.expire_assignments", "schedule": 10.0}
REAP = {"task": "annotate.engine.tasks.engine_runs_reap_task", "schedule": 100.0}
CROWD_SYNC = {"task": "annotate.crowd.tasks.sync_all_publications", "schedule": 10.0}
SERVER_PORT = 8771


def abandoned_claim() -> Assignment:
    """A claim whose allotted time ended a minute ago, which the beat has not expired yet."""
    claimed = timezone.now() - timedelta(hours=1)
    return AssignmentFactory(
        status=AssignmentStatus.CLAIMED,
        claimed_at=claimed,
        expires_at=timezone.now() - timedelta(minutes=1),
    )


def run_of_a_killed_worker() -> EngineRun:
    """A run still "running" whose worker stopped beating an hour ago."""
    return EngineRun.objects.create(
        kind="generation",
        endpoint=make_endpoint("", name="fake"),
        status=RunStatus.RUNNING,
        heartbeat=timezone.now() - timedelta(hours=1),
    )


def status_of(row) -> str:
    row.refresh_from_db()
    return row.status


@pytest.fixture
def beat(tmp_path):
    made: list[EmbeddedBeat] = []

    def make(schedule: dict) -> EmbeddedBeat:
        made.append(EmbeddedBeat(schedule=schedule, lock_path=tmp_path / LOCK_FILE_NAME))
        return made[-1]

    yield make
    for each in made:
        each.stop()


@pytest.mark.django_db
def test_each_task_runs_at_its_own_interval_and_not_before(beat):
    schedule = beat({"expire": EXPIRE, "reap": REAP})
    schedule.step(now=0.0)  # the first step runs every entry
    claim, run = abandoned_claim(), run_of_a_killed_worker()

    assert schedule.step(now=9.0) == 10.0  # nothing due yet: the expiry is next, at 10
    assert status_of(claim) == AssignmentStatus.CLAIMED

    assert schedule.step(now=10.0) == 20.0
    assert status_of(claim) == AssignmentStatus.EXPIRED
    assert status_of(run) == RunStatus.RUNNING  # its 100 s are not up

    schedule.step(now=100.0)
    assert status_of(run) == RunStatus.FAILED


@pytest.mark.django_db
def test_a_failing_task_is_logged_and_the_others_run_on(beat, caplog):
    # The platform lost the publication's HITs (its state file was deleted): every sync fails.
    lost = published_on_fake(project_with_tasks(instructions=2).batches.get())
    FakePlatform.reset()
    # The one publication's sync also as an entry of its own: its error reaches the beat.
    one_sync = {
        "task": "annotate.crowd.tasks.sync_publication",
        "schedule": 10.0,
        "args": [lost.pk],
    }
    schedule = beat({"crowd-sync": CROWD_SYNC, "one-sync": one_sync, "expire": EXPIRE})
    first = abandoned_claim()

    with caplog.at_level(logging.ERROR):
        schedule.step(now=0.0)
    messages = [r.getMessage() for r in caplog.records]
    # The crowd task logs each publication's failure itself, so that the next publications
    # still sync (tests/annotate/crowd/test_tasks.py); an entry that raises, the beat.
    assert messages == [
        f"Crowd sync of publication {lost.pk} failed",
        "Embedded beat: one-sync (annotate.crowd.tasks.sync_publication) failed",
    ]
    assert all("does not exist" in str(r.exc_info[1]) for r in caplog.records)
    second = abandoned_claim()
    schedule.step(now=10.0)
    assert status_of(first) == status_of(second) == AssignmentStatus.EXPIRED


LOCK_HOLDER = """
import fcntl, sys
lock = open(sys.argv[1], "a")
fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
print("locked", flush=True)
sys.stdin.read()
"""


@pytest.mark.django_db
def test_nothing_runs_while_another_process_holds_the_lock_and_it_takes_over_after(beat, tmp_path):
    holder = subprocess.Popen(
        [sys.executable, "-c", LOCK_HOLDER, str(tmp_path / LOCK_FILE_NAME)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline() == "locked\n"
    schedule = beat({"expire": EXPIRE})
    claim = abandoned_claim()

    assert schedule.step(now=0.0) == LOCK_RETRY_SECONDS
    assert status_of(claim) == AssignmentStatus.CLAIMED

    holder.communicate(input="", timeout=30)  # the other server stops
    schedule.step(now=LOCK_RETRY_SECONDS)
    assert status_of(claim) == AssignmentStatus.EXPIRED


def test_it_does_not_start_with_a_broker(settings, tmp_path, monkeypatch):
    monkeypatch.setattr(embedded_beat, "_started", None)
    settings.EMBEDDED_BEAT = True
    settings.VAR_DIR = tmp_path
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:6379/7"

    assert embedded_beat.embedded_beat_start() is None
    assert not (tmp_path / LOCK_FILE_NAME).exists()
    assert "embedded-beat" not in {thread.name for thread in threading.enumerate()}


def test_without_a_broker_it_starts_once_and_takes_the_lock(settings, tmp_path, monkeypatch):
    monkeypatch.setattr(embedded_beat, "_started", None)
    settings.EMBEDDED_BEAT = True
    settings.VAR_DIR = tmp_path
    settings.CELERY_BROKER_URL = ""
    settings.CELERY_BEAT_SCHEDULE = {}

    started = embedded_beat.embedded_beat_start()
    try:
        assert started is not None and started.thread.is_alive()
        assert embedded_beat.embedded_beat_start() is started
        lock = tmp_path / LOCK_FILE_NAME
        assert poll(lambda: lock.exists() and lock.read_text().strip() != "")
        other = EmbeddedBeat(schedule={}, lock_path=lock)
        assert other.step(now=0.0) == LOCK_RETRY_SECONDS  # held: the other waits
    finally:
        started.stop()


def poll(condition, timeout: float = 60.0) -> bool:
    """Whether `condition()` became true within `timeout` seconds (checked every 0.2 s)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return condition()


FORGED_SUBMISSION = """
import django
django.setup()
from annotate.crowd.models import Hit
from annotate.models import Project
from tests.annotate.crowd.conftest import crowd_assignment, published_on_fake

if not Hit.objects.exists():
    published_on_fake(Project.objects.get(pk={project}).batches.get())
hit = Hit.objects.get()
forged = crowd_assignment(
    task=hit.task, platform="fake", worker="AFORGER{n}", hit_id=hit.hit_id,
    assignment_id="FORGED{n}",
)
print(forged.pk)
"""


def test_make_run_syncs_the_crowd_platform_on_its_own(tmp_path):
    """`manage.py runserver` under its autoreloader, as `make run` serves: a submission the
    platform never confirmed gives its slot back at the next sync, with nobody pressing Sync,
    and the sync runs again (the second forgery is made after the first was released)."""
    server = EmbeddedServer(
        tmp_path, users=0, tasks=1, port=SERVER_PORT, reload=True,
        # No hand-back grace: a forged submission is released at the first sync after it.
        env={"CROWD_SYNC_INTERVAL_SECONDS": "1", "CROWD_RELEASE_GRACE_SECONDS": "0"},
    )  # fmt: skip
    try:

        def released(assignment_id: int) -> bool:
            rows = server.query(
                "SELECT is_late FROM annotate_assignment WHERE id = ?", assignment_id
            )
            return rows == [(1,)]

        first = int(server.python(FORGED_SUBMISSION.format(project=server.project_id, n=1)))
        assert poll(lambda: released(first)), server.log()
        second = int(server.python(FORGED_SUBMISSION.format(project=server.project_id, n=2)))
        assert poll(lambda: released(second)), server.log()
        # One process ran the schedule: the serving child, never the autoreloader's parent.
        started = [line for line in server.log().splitlines() if "Embedded beat: process" in line]
        assert len(started) == 1, server.log()
        assert f"process {server.process.pid} " not in started[0]
    finally:
        server.stop()
