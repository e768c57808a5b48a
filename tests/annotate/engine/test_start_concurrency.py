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
from tests.threads import in_thread

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

    def second() -> None:
        stale = EngineRun.objects.get(pk=run.pk)  # read stopped, as both requests did
        first_reopened.wait(10)
        try:
            with transaction.atomic():
                engine_run_reopen(run=stale)
            outcomes["second"] = "reopened"
        except EngineRunError as error:
            outcomes["second"] = str(error)

    threads = [in_thread(first, []), in_thread(second, [])]
    for thread in threads:
        thread.join(30)

    assert outcomes["first"] == "reopened"
    assert outcomes["second"].startswith(f"Run {run.pk} is starting already")
    run.refresh_from_db()
    assert run.status == RunStatus.PENDING


def test_a_price_edit_waits_for_a_confirmed_start_to_commit(stub, echo_protocol):
    """The confirmed total is checked with the endpoint's row locked till the start commits
    (engine_run_cost_confirmed): an edit of its prices in another transaction waits, so the
    start goes at the price it checked. PostgreSQL only: SQLite has no row locks to show."""
    from decimal import Decimal

    from annotate.engine.models import Endpoint
    from annotate.engine.services import engine_run_create, engine_run_estimate, engine_run_start
    from annotate.engine.services.runs import engine_run_cost_confirmed

    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL only")
    endpoint = make_endpoint(stub.base_url, name="paid", price_prompt_per_1k="1")
    run = engine_run_create(kind="echo", endpoint=endpoint, params={"items": ["a", "b"]})
    total = engine_run_estimate(run=run).cost_usd
    checked, edited, outcomes = threading.Event(), threading.Event(), {}

    def start() -> None:
        try:
            with transaction.atomic():
                with engine_run_cost_confirmed(total=total):
                    engine_run_start(run=EngineRun.objects.get(pk=run.pk))
                checked.set()
                outcomes["edited before the start committed"] = edited.wait(0.5)
                transaction.set_rollback(True)  # nothing to run: the lock is what is measured
        finally:
            checked.set()

    def edit() -> None:
        checked.wait(10)
        with transaction.atomic():
            Endpoint.objects.filter(pk=endpoint.pk).update(price_prompt_per_1k=Decimal("9"))
        edited.set()

    threads = [in_thread(start, []), in_thread(edit, [])]
    for thread in threads:
        thread.join(30)
    assert outcomes == {"edited before the start committed": False}
    assert edited.is_set()  # once the start ended, the edit went through
