"""Two starts of one run at the same instant, each in its own transaction and connection: only
one reopens it (a lock of the run's row; on SQLite the write lock every transaction takes)."""

import threading
import time

import pytest
from django.db import connection, transaction

from annotate.engine.errors import EngineRunError
from annotate.engine.models import EngineRun, RunStatus
from annotate.engine.services import engine_run_reopen
from tests.annotate.engine.conftest import make_endpoint

pytestmark = pytest.mark.django_db(transaction=True)


def test_of_two_starts_at_once_only_the_first_reopens_the_run():
    endpoint = make_endpoint("", name="fake")
    run = EngineRun.objects.create(kind="generation", endpoint=endpoint, status="cancelled")
    first_reopened, outcomes = threading.Event(), {}

    def first() -> None:
        try:
            with transaction.atomic():  # as the page's request: the start commits at its end
                engine_run_reopen(run=EngineRun.objects.get(pk=run.pk))
                first_reopened.set()
                time.sleep(0.5)  # the second start comes before this one commits
            outcomes["first"] = "reopened"
        finally:
            first_reopened.set()
            connection.close()

    def second() -> None:
        stale = EngineRun.objects.get(pk=run.pk)  # read stopped, as both requests did
        first_reopened.wait(10)
        try:
            with transaction.atomic():
                engine_run_reopen(run=stale)
            outcomes["second"] = "reopened"
        except EngineRunError as error:
            outcomes["second"] = str(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    assert outcomes["first"] == "reopened"
    assert outcomes["second"].startswith(f"Run {run.pk} is starting already")
    run.refresh_from_db()
    assert run.status == RunStatus.PENDING
