"""Two `load_demo` at once (`make run` in two terminals): the second waits for the first, its
migrations (`--migrate`) included."""

from __future__ import annotations

import fcntl
import queue
import threading
from unittest import mock

import pytest
from django.core.management import call_command
from django.db import connection

from annotate.engine.models import Endpoint
from annotate.management.commands.load_demo import LOCK_FILE_NAME
from annotate.models import Benchmark
from annotate.services.demo import DEMO_ENDPOINT
from annotate.services.demo_data import DEMO_BENCHMARK


class _Lines:
    """A command's stdout whose writes a test reads as they come."""

    def __init__(self) -> None:
        self.written: queue.SimpleQueue[str] = queue.SimpleQueue()

    def write(self, text: str) -> None:
        self.written.put(text)

    def flush(self) -> None:
        pass


@pytest.mark.django_db(transaction=True)
def test_a_load_started_during_another_waits_for_it_then_adds_nothing_twice(settings, tmp_path):
    settings.DEBUG = True
    settings.VAR_DIR = tmp_path
    first_load = open(tmp_path / LOCK_FILE_NAME, "a")  # noqa: SIM115 - closed below
    fcntl.flock(first_load, fcntl.LOCK_EX)  # a first load in progress
    out, errors = _Lines(), []

    def second_load() -> None:
        try:
            call_command("load_demo", stdout=out)
        except Exception as error:  # noqa: BLE001 - reported by the test
            errors.append(error)
        finally:
            connection.close()

    thread = threading.Thread(target=second_load)
    thread.start()
    try:
        assert out.written.get(timeout=120).startswith("Waiting for another set-up to end")
        assert not Benchmark.objects.filter(name=DEMO_BENCHMARK).exists()
    finally:
        first_load.close()  # the first load ends
        thread.join(timeout=600)
    assert not thread.is_alive() and errors == []
    assert Benchmark.objects.filter(name=DEMO_BENCHMARK).count() == 1
    assert Endpoint.objects.filter(name=DEMO_ENDPOINT).count() == 1


def _held_by_another(path) -> bool:
    with open(path, "a") as probe:
        try:
            fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(probe, fcntl.LOCK_UN)
        return False


@pytest.mark.django_db
def test_migrate_runs_under_the_set_up_lock_before_the_load(settings, tmp_path):
    # Two `make run` on a fresh VAR_DIR both migrated at once: one failed with
    # 'table "django_content_type" already exists' on SQLite.
    settings.DEBUG = True
    settings.VAR_DIR = tmp_path
    seen = []

    def migrate(name, **options):
        seen.append((name, _held_by_another(tmp_path / LOCK_FILE_NAME)))
        assert not Benchmark.objects.filter(name=DEMO_BENCHMARK).exists()

    with mock.patch("annotate.management.commands.load_demo.call_command", migrate):
        call_command("load_demo", "--migrate", stdout=_Lines())
    assert seen == [("migrate", True)]
    assert Benchmark.objects.filter(name=DEMO_BENCHMARK).count() == 1
