"""A real Celery worker on Redis and PostgreSQL runs a generation run as several chunk tasks.

Skipped without CELERY_BROKER_URL and a PostgreSQL DATABASE_URL (.ci/run sets both)."""

import os
import time

import pytest

from annotate.engine.models import ChunkStatus, EngineCall, EngineChunk, RunStatus
from annotate.engine.services import engine_run_start, engine_run_stop
from annotate.engine.services.generation import (
    generating_system_get_or_create,
    generation_run_create,
)
from annotate.models import Response
from config.celery import app as celery_app
from tests.annotate.engine.conftest import make_endpoint, make_instructions
from tests.config.test_celery_worker import worker  # noqa: F401 - the fixture
from tests.evaluation.openai_stub import StubOpenAI

needs_services = pytest.mark.skipif(
    not os.environ.get("CELERY_BROKER_URL")
    or not os.environ.get("DATABASE_URL", "").startswith("postgres"),
    reason="needs CELERY_BROKER_URL (Redis) and DATABASE_URL (PostgreSQL), as .ci/run sets them",
)

COUNT = 40


def _start(started_worker, monkeypatch, settings, stub, **endpoint_fields):
    queue, _ = started_worker
    monkeypatch.setitem(celery_app.conf, "task_always_eager", False)
    monkeypatch.setitem(celery_app.conf, "task_default_queue", queue)
    settings.ENGINE_CELERY_CHUNK_UNITS = 10
    endpoint = make_endpoint(stub.base_url, **endpoint_fields)
    benchmark, instructions = make_instructions(COUNT)
    system = generating_system_get_or_create(name="gen-worker", endpoint=endpoint)
    run = generation_run_create(benchmark=benchmark, systems=[system], endpoint=endpoint)
    engine_run_start(run=run)  # no surrounding transaction: on_commit sends at once
    return run, system


def _wait(run, until, timeout=90):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run.refresh_from_db()
        if until(run):
            return run
        time.sleep(0.2)
    raise AssertionError(f"run {run.pk} still {run.status}, {run.units_done} units done")


@needs_services
def test_a_real_worker_runs_a_run_as_several_chunk_tasks(worker, monkeypatch, settings):  # noqa: F811
    with StubOpenAI(delay=0.02) as stub:
        run, system = _start(worker, monkeypatch, settings, stub, concurrency=2)
        run = _wait(run, lambda r: r.status not in (RunStatus.PENDING, RunStatus.RUNNING))
    assert run.status == RunStatus.DONE, run.error
    chunks = list(EngineChunk.objects.filter(run=run))
    assert [len(chunk.keys) for chunk in chunks] == [10, 10, 10, 10]
    assert {chunk.status for chunk in chunks} == {ChunkStatus.DONE}
    task_ids = {chunk.task_id for chunk in chunks}
    assert len(task_ids) == 4 and "" not in task_ids  # four tasks, each took its chunk
    assert all(chunk.worker for chunk in chunks)
    # Every unit asked and stored exactly once; the counters add up from four processes' writes.
    assert len(stub.requests) == COUNT
    responses = Response.objects.filter(system=system)
    assert responses.count() == COUNT == responses.values("instruction").distinct().count()
    assert (run.units_total, run.units_done, run.units_failed) == (COUNT, COUNT, 0)
    assert run.calls == COUNT == EngineCall.objects.filter(run=run).count()
    assert run.prompt_tokens == sum(u["prompt_tokens"] for u in stub.usages)
    assert run.finished_at and run.heartbeat is None


@needs_services
def test_a_stop_in_the_middle_cancels_the_run_on_the_worker(worker, monkeypatch, settings):  # noqa: F811
    with StubOpenAI(delay=0.2) as stub:
        run, system = _start(worker, monkeypatch, settings, stub, concurrency=1)
        run = _wait(run, lambda r: r.units_done >= 3)
        engine_run_stop(run=run)
        run = _wait(run, lambda r: r.status not in (RunStatus.PENDING, RunStatus.RUNNING))
        asked = len(stub.requests)
    assert run.status == RunStatus.CANCELLED and run.error == "Stopped on request."
    assert 3 <= run.units_done < COUNT and asked < COUNT
    # What was answered is stored; nothing else.
    assert Response.objects.filter(system=system).count() == run.units_done
    assert set(EngineChunk.objects.filter(run=run).values_list("status", flat=True)) == {
        ChunkStatus.DONE
    }
