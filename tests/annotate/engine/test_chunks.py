"""Celery fan-out of a run: chunking and finishing, calling the chunk functions directly (no
broker). The real worker on Redis and PostgreSQL is in test_chunks_worker.py."""

import os
from decimal import Decimal

import pytest

from annotate.engine.models import ChunkStatus, EngineCall, EngineChunk, EngineUnit, RunStatus
from annotate.engine.services import engine_run_create, engine_run_execute, engine_run_stop
from annotate.engine.services.generation import (
    generating_system_get_or_create,
    generation_run_create,
)
from annotate.engine.services.runs import engine_run_chunk_execute, engine_run_dispatch
from annotate.models import Instruction, Response
from tests.annotate.engine import echo
from tests.annotate.engine.conftest import make_endpoint, make_instructions
from tests.threads import in_thread

pytestmark = pytest.mark.django_db


def _generation(endpoint, count, **kwargs):
    benchmark, _ = make_instructions(count)
    system = generating_system_get_or_create(name="gen-chunks", endpoint=endpoint)
    run = generation_run_create(benchmark=benchmark, systems=[system], endpoint=endpoint, **kwargs)
    return run, system


def _dispatch(run, size, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as callbacks:
        chunks = engine_run_dispatch(run_id=run.pk, chunk_units=size)
    return chunks, callbacks


def test_dispatch_splits_the_pending_units_into_chunks_and_enqueues_one_task_each(
    stub, django_capture_on_commit_callbacks
):
    endpoint = make_endpoint(stub.base_url)
    run, _ = _generation(endpoint, 23)
    chunks, callbacks = _dispatch(run, 10, django_capture_on_commit_callbacks)

    assert [len(chunk.keys) for chunk in chunks] == [10, 10, 3]
    assert len(callbacks) == 3  # one task per chunk, sent once the transaction commits
    keys = [key for chunk in chunks for key in chunk.keys]
    assert sorted(keys) == sorted(EngineUnit.objects.filter(run=run).values_list("key", flat=True))
    assert len(set(keys)) == 23  # every unit in exactly one chunk
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING and run.units_total == 23 and not stub.requests
    # A redelivered dispatch makes no second set of chunks.
    again, callbacks = _dispatch(run, 10, django_capture_on_commit_callbacks)
    assert again == [] and callbacks == [] and EngineChunk.objects.filter(run=run).count() == 3


def test_only_units_left_are_chunked_and_a_run_with_none_left_ends_done(
    stub, django_capture_on_commit_callbacks
):
    endpoint = make_endpoint(stub.base_url)
    run, system = _generation(endpoint, 5)
    # Made while its work was left (a new run with none left is refused), done by another after.
    second = generation_run_create(
        benchmark=Instruction.objects.first().benchmark, systems=[system], endpoint=endpoint
    )
    engine_run_execute(run_id=run.pk)  # all done in-process
    chunks, callbacks = _dispatch(second, 2, django_capture_on_commit_callbacks)
    second.refresh_from_db()
    assert chunks == [] and callbacks == []
    assert second.status == RunStatus.DONE and second.units_skipped == 5
    assert len(stub.requests) == 5


def test_each_chunk_does_only_its_units_and_the_last_to_end_finishes_the_run(
    stub, django_capture_on_commit_callbacks
):
    endpoint = make_endpoint(stub.base_url, concurrency=3)
    run, system = _generation(endpoint, 25)
    first, second, third = _dispatch(run, 10, django_capture_on_commit_callbacks)[0]

    engine_run_chunk_execute(chunk_id=first.pk, task_id="t-1")
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING and (run.units_done, run.calls) == (10, 10)
    assert {body["messages"][0]["content"].split("\n")[0] for body in stub.requests} == {
        instruction_text(key) for key in first.keys
    }
    engine_run_chunk_execute(chunk_id=third.pk, task_id="t-3")
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING and run.units_done == 15
    engine_run_chunk_execute(chunk_id=second.pk, task_id="t-2")
    run.refresh_from_db()
    assert run.status == RunStatus.DONE and run.finished_at and run.heartbeat is None
    assert (run.units_total, run.units_done, run.units_failed, run.calls) == (25, 25, 0, 25)
    assert run.prompt_tokens == sum(u["prompt_tokens"] for u in stub.usages)
    assert Response.objects.filter(system=system).count() == 25
    assert set(EngineChunk.objects.filter(run=run).values_list("task_id", "status")) == {
        ("t-1", ChunkStatus.DONE), ("t-2", ChunkStatus.DONE), ("t-3", ChunkStatus.DONE),
    }  # fmt: skip

    # A redelivered chunk task: nothing asked again, nothing counted twice.
    engine_run_chunk_execute(chunk_id=second.pk, task_id="t-2 again")
    run.refresh_from_db()
    assert len(stub.requests) == 25 and (run.status, run.units_done, run.calls) == (
        RunStatus.DONE, 25, 25,
    )  # fmt: skip


def instruction_text(key: str) -> str:
    """The instruction a generation unit key names (`gen:i<id>:...`) as the tests wrote it."""
    from annotate.models import Instruction

    return Instruction.objects.get(pk=int(key.split(":")[1][1:])).text


def test_a_chunk_redelivered_mid_way_does_only_its_units_still_pending(
    stub, django_capture_on_commit_callbacks
):
    endpoint = make_endpoint(stub.base_url)
    run, system = _generation(endpoint, 4)
    (chunk,) = _dispatch(run, 10, django_capture_on_commit_callbacks)[0]
    # The first delivery stored two units, then its worker died (the chunk stays running).
    EngineChunk.objects.filter(pk=chunk.pk).update(status=ChunkStatus.RUNNING)
    done_before = chunk.keys[:2]
    EngineUnit.objects.filter(run=run, key__in=done_before).update(status="done")
    engine_run_chunk_execute(chunk_id=chunk.pk)
    run.refresh_from_db()
    assert len(stub.requests) == 2 and run.status == RunStatus.DONE
    assert Response.objects.filter(system=system).count() == 2  # only the two it did


def test_failed_units_in_any_chunk_fail_the_run_with_their_count(
    stub, django_capture_on_commit_callbacks
):
    stub.fail_next(400, message="bad request")
    endpoint = make_endpoint(stub.base_url, concurrency=1)
    run, system = _generation(endpoint, 6)
    chunks = _dispatch(run, 3, django_capture_on_commit_callbacks)[0]
    for chunk in chunks:
        engine_run_chunk_execute(chunk_id=chunk.pk)
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED and run.error.startswith("1 of 6 units failed")
    assert (run.units_done, run.units_failed) == (5, 1)
    assert Response.objects.filter(system=system).count() == 5


def test_a_protocol_that_raises_in_one_chunk_stops_the_others_and_fails_the_run(
    stub, echo_protocol, django_capture_on_commit_callbacks
):
    endpoint = make_endpoint(stub.base_url, concurrency=1)
    run = engine_run_create(
        kind="echo", endpoint=endpoint, params={"items": ["boom", "a", "b", "c"]}
    )
    first, second = _dispatch(run, 2, django_capture_on_commit_callbacks)[0]
    engine_run_chunk_execute(chunk_id=first.pk)
    engine_run_chunk_execute(chunk_id=second.pk)
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED and run.error == "RuntimeError: the protocol's own bug"
    assert not [key for run_id, key, _ in echo.STORED if run_id == run.pk and key > "echo:a"]


def test_a_stop_cancels_the_chunks_not_yet_run_and_a_restart_does_the_rest(
    stub, django_capture_on_commit_callbacks
):
    endpoint = make_endpoint(stub.base_url)
    run, system = _generation(endpoint, 6)
    first, second = _dispatch(run, 3, django_capture_on_commit_callbacks)[0]
    engine_run_chunk_execute(chunk_id=first.pk)
    engine_run_stop(run=run)
    engine_run_chunk_execute(chunk_id=second.pk)
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED and run.error == "Stopped on request."
    assert run.units_done == 3 and len(stub.requests) == 3
    assert EngineChunk.objects.get(pk=second.pk).outcome == "cancelled"

    run.status, run.stop_requested = RunStatus.PENDING, False  # what engine_run_start resets
    run.save(update_fields=["status", "stop_requested"])
    (rest,) = _dispatch(run, 10, django_capture_on_commit_callbacks)[0]
    assert sorted(rest.keys) == sorted(second.keys)
    engine_run_chunk_execute(chunk_id=rest.pk)
    run.refresh_from_db()
    assert run.status == RunStatus.DONE and len(stub.requests) == 6
    assert Response.objects.filter(system=system).count() == 6


def test_a_chunk_of_a_run_reaped_meanwhile_makes_no_call(stub, django_capture_on_commit_callbacks):
    endpoint = make_endpoint(stub.base_url)
    run, _ = _generation(endpoint, 2)
    (chunk,) = _dispatch(run, 10, django_capture_on_commit_callbacks)[0]
    type(run).objects.filter(pk=run.pk).update(status=RunStatus.FAILED, error="reaped")
    engine_run_chunk_execute(chunk_id=chunk.pk)
    run.refresh_from_db()
    assert not stub.requests and run.status == RunStatus.FAILED and run.error == "reaped"


@pytest.mark.skipif(
    not os.environ.get("DATABASE_URL", "").startswith("postgres"),
    reason="needs PostgreSQL (.ci/run sets DATABASE_URL): SQLite's shared in-memory test database"
    " refuses writes from several threads at once (database table is locked)",
)
@pytest.mark.django_db(transaction=True)
def test_the_spending_cap_holds_across_chunks_running_at_once(stub, monkeypatch):
    # As in test_runs: each call reserves about $0.11 and costs about as much. Three chunks run
    # at the same time, each would send its first call at once; the reservations on the run's
    # row let only two through under the $0.25 cap, and no chunk sends a third afterwards.
    stub.responder = lambda messages: "x" * 500
    stub.delay = 0.3
    endpoint = make_endpoint(
        stub.base_url,
        concurrency=1,
        max_tokens=100,
        price_prompt_per_1k=Decimal("1"),
        price_completion_per_1k=Decimal("1"),
    )
    run, system = _generation(endpoint, 6, spending_cap_usd=Decimal("0.25"))
    monkeypatch.setattr(
        "annotate.services.deferred_tasks.task_enqueue_on_commit", lambda **kwargs: None
    )
    chunks = engine_run_dispatch(run_id=run.pk, chunk_units=2)
    assert len(chunks) == 3

    threads = [
        in_thread(lambda pk=chunk.pk: engine_run_chunk_execute(chunk_id=pk), []) for chunk in chunks
    ]
    for thread in threads:
        thread.join(60)
    run.refresh_from_db()
    assert len(stub.requests) == 2 and Response.objects.filter(system=system).count() == 2
    assert run.status == RunStatus.CANCELLED and "spending cap" in run.error
    assert run.cost_usd <= Decimal("0.25") and run.cost_reserved_usd == 0
    assert EngineCall.objects.filter(run=run).count() == 2


def test_a_run_started_again_with_a_broker_counts_what_its_earlier_start_did(
    stub, django_capture_on_commit_callbacks
):
    """The dispatch prepares the units as a whole run does: the units done by the run's first
    start are counted apart from those other runs did (the run page's "by its earlier starts")."""
    from annotate.engine.services import engine_run_reopen

    endpoint = make_endpoint(stub.base_url, concurrency=1)
    run, _ = _generation(endpoint, 4)
    stub.fail_next(400, message="bad request")
    run = engine_run_execute(run_id=run.pk)
    assert (run.units_done, run.units_failed, run.units_done_earlier) == (3, 1, 0)
    engine_run_reopen(run=run)
    (chunk,) = _dispatch(run, 10, django_capture_on_commit_callbacks)[0]
    engine_run_chunk_execute(chunk_id=chunk.pk, task_id="t-1")
    run.refresh_from_db()
    assert (run.status, run.units_done, run.units_skipped, run.units_done_earlier) == (
        RunStatus.DONE, 4, 0, 3,
    )  # fmt: skip
