"""One chunk delivered twice at once (Redis hands a chunk task that runs longer than its
visibility timeout to a second worker): only the first delivery calls; the second comes back
later and resumes only if the first has stopped beating. Over real HTTP to the stub server."""

import os
import threading
import time
import uuid
from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from annotate.engine.errors import EngineChunkLeasedError
from annotate.engine.models import (
    ChunkStatus,
    EngineCall,
    EngineChunk,
    EngineRun,
    EngineUnit,
    RunStatus,
)
from annotate.engine.protocols import UnitResult
from annotate.engine.services.generation import (
    generating_system_get_or_create,
    generation_run_create,
)
from annotate.engine.services.runs import engine_run_chunk_execute, engine_run_dispatch
from annotate.models import Response
from tests.annotate.engine.conftest import make_endpoint, make_instructions
from tests.threads import in_thread

pytestmark = pytest.mark.django_db


def _one_chunk(stub, count, monkeypatch, **fields):
    endpoint = make_endpoint(stub.base_url, **fields)
    benchmark, _ = make_instructions(count)
    system = generating_system_get_or_create(name="gen-lease", endpoint=endpoint)
    run = generation_run_create(benchmark=benchmark, systems=[system], endpoint=endpoint)
    monkeypatch.setattr(
        "annotate.services.deferred_tasks.task_enqueue_on_commit", lambda **kwargs: None
    )
    (chunk,) = engine_run_dispatch(run_id=run.pk, chunk_units=count)
    return run, system, chunk


def _wait_for(condition, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


@pytest.mark.django_db(transaction=True)
def test_two_deliveries_of_one_chunk_at_once_call_each_unit_once(stub, monkeypatch):
    run, system, chunk = _one_chunk(stub, 8, monkeypatch, concurrency=2)
    answer = threading.Event()
    stub.on_request = lambda count: answer.wait(60)  # no answer till the second has tried
    first, second = [], []
    one = in_thread(lambda: engine_run_chunk_execute(chunk_id=chunk.pk, task_id="a"), first)
    _wait_for(lambda: len(stub.requests) >= 1)  # the first delivery is calling
    two = in_thread(lambda: engine_run_chunk_execute(chunk_id=chunk.pk, task_id="b"), second)
    two.join(60)
    answer.set()
    one.join(60)

    # The second delivery made no call: it is told to come back once the lease may be stale.
    assert isinstance(second[0], EngineChunkLeasedError), second
    assert 0 < second[0].retry_in <= 61
    assert len(stub.requests) == 8  # one call per unit, not 8 + what was pending at the second
    run.refresh_from_db()
    assert run.status == RunStatus.DONE and (run.units_done, run.calls) == (8, 8)
    assert EngineCall.objects.filter(run=run).count() == 8
    assert Response.objects.filter(system=system).count() == 8
    chunk.refresh_from_db()
    assert chunk.status == ChunkStatus.DONE and chunk.task_id == "a"


def _hold(chunk, *, age_seconds: float, token: str = "first-delivery"):
    """Make the chunk look taken by another delivery whose last beat was `age_seconds` ago."""
    beat = timezone.now() - timedelta(seconds=age_seconds)
    EngineChunk.objects.filter(pk=chunk.pk).update(
        status=ChunkStatus.RUNNING, lease=token, heartbeat=beat, task_id="first"
    )


def test_a_delivery_while_another_holds_a_fresh_lease_calls_nothing_and_changes_nothing(
    stub, monkeypatch, settings
):
    settings.ENGINE_CHUNK_LEASE_SECONDS = 60
    run, system, chunk = _one_chunk(stub, 3, monkeypatch)
    _hold(chunk, age_seconds=20)

    with pytest.raises(EngineChunkLeasedError) as raised:
        engine_run_chunk_execute(chunk_id=chunk.pk, task_id="second")
    assert 40 < raised.value.retry_in <= 41  # when the lease would be stale: 60 - 20 s, + 1
    assert f"Chunk {chunk.pk} is held by another delivery of its task" in str(raised.value)
    assert not stub.requests
    chunk.refresh_from_db()
    assert (chunk.status, chunk.lease, chunk.task_id) == (
        ChunkStatus.RUNNING, "first-delivery", "first",
    )  # fmt: skip
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING and not run.stop_requested and run.units_done == 0


def test_a_delivery_takes_over_a_chunk_whose_lease_is_stale_and_does_what_is_left(
    stub, monkeypatch, settings
):
    settings.ENGINE_CHUNK_LEASE_SECONDS = 60
    run, system, chunk = _one_chunk(stub, 4, monkeypatch)
    _hold(chunk, age_seconds=61)  # its worker died a minute ago, after storing two units
    EngineUnit.objects.filter(run=run, key__in=chunk.keys[:2]).update(status="done")

    engine_run_chunk_execute(chunk_id=chunk.pk, task_id="second")
    assert len(stub.requests) == 2  # only the two units left
    chunk.refresh_from_db()
    assert chunk.status == ChunkStatus.DONE and chunk.task_id == "second"
    assert chunk.lease not in ("", "first-delivery")
    run.refresh_from_db()
    assert run.status == RunStatus.DONE


def test_a_delivery_whose_chunk_was_taken_over_stops_asking_and_leaves_the_chunk(
    stub, monkeypatch, settings
):
    # The storing thread renews the lease; once the first answer is stored and the stub has the
    # second call, the row says another delivery took the chunk over (its worker thought this
    # one dead). The second call is answered only once this delivery's renewal has found that
    # out, so what it sends after does not depend on how fast the threads run.
    from annotate.engine.services import runs

    settings.ENGINE_HEARTBEAT_SECONDS = 0.02
    run, system, chunk = _one_chunk(stub, 10, monkeypatch, concurrency=1)
    renew = runs._ChunkLease.renew
    taken_over = threading.Event()

    def renew_after_a_takeover(lease):
        first_stored = EngineUnit.objects.filter(run=run, status="done").exists()
        if len(stub.requests) < 2 or not first_stored:
            return renew(lease)
        _hold(chunk, age_seconds=0, token="other-delivery")
        held = renew(lease)
        taken_over.set()
        return held

    monkeypatch.setattr(runs._ChunkLease, "renew", renew_after_a_takeover)
    stub.on_request = lambda count: count == 2 and taken_over.wait(60)
    with pytest.raises(EngineChunkLeasedError):
        engine_run_chunk_execute(chunk_id=chunk.pk, task_id="first")
    assert len(stub.requests) == 2  # the call in flight at the takeover ends; no other is sent
    run.refresh_from_db()
    # What was stored before the takeover is kept; the answer that came after it is not (its
    # unit is the other delivery's now, which asks it again), but its call was paid and is
    # counted. The chunk and the run are left to the other delivery.
    assert run.units_done == 1 == Response.objects.filter(system=system).count()
    assert EngineUnit.objects.filter(run=run, status="done").count() == 1
    assert run.calls == 2 == EngineCall.objects.filter(run=run).count()
    assert run.status == RunStatus.RUNNING and not run.stop_requested
    chunk.refresh_from_db()
    assert (chunk.status, chunk.lease) == (ChunkStatus.RUNNING, "other-delivery")


def test_a_lease_not_renewed_in_time_sends_no_more_calls_and_is_given_up(
    stub, monkeypatch, settings
):
    # The storing thread stalls (its write to renew the lease never returns in time): past
    # ENGINE_CHUNK_LEASE_SECONDS another delivery may take the chunk, so no call is sent on it.
    # The lease's clock is driven, not waited on: it passes the lease while the third call is in
    # flight, however fast or slow the machine.
    from annotate.engine.services import runs

    settings.ENGINE_CHUNK_LEASE_SECONDS = 60
    run, system, chunk = _one_chunk(stub, 20, monkeypatch, concurrency=1)
    renew = runs._ChunkLease.renew
    monkeypatch.setattr(runs._ChunkLease, "renew", lambda lease: lease.held())
    seconds = [0.0]
    stub.on_request = lambda count: count == 3 and seconds.__setitem__(0, 60.0)

    with pytest.raises(EngineChunkLeasedError) as raised:
        engine_run_chunk_execute(chunk_id=chunk.pk, task_id="first", clock=lambda: seconds[0])
    assert raised.value.retry_in == 1.0
    assert len(stub.requests) == 3  # none after the lease ran out
    chunk.refresh_from_db()
    assert chunk.status == ChunkStatus.RUNNING and chunk.heartbeat is None  # free to take now
    run.refresh_from_db()
    assert run.units_done == 3 == run.calls and not run.stop_requested

    monkeypatch.setattr(runs._ChunkLease, "renew", renew)
    stub.on_request = None
    engine_run_chunk_execute(chunk_id=chunk.pk, task_id="next")  # the retry: does the rest
    run.refresh_from_db()
    assert run.status == RunStatus.DONE and len(stub.requests) == 20 == run.calls


def test_the_chunk_task_tries_again_when_the_lease_could_be_stale(stub, monkeypatch, settings):
    from annotate.engine import tasks

    settings.ENGINE_CHUNK_LEASE_SECONDS = 60
    run, system, chunk = _one_chunk(stub, 2, monkeypatch)
    _hold(chunk, age_seconds=30)
    retried = {}

    class Retry(Exception):
        pass

    def retry(**kwargs):
        retried.update(kwargs)
        return Retry()

    monkeypatch.setattr(tasks.engine_run_chunk_task, "retry", retry)
    with pytest.raises(Retry):
        tasks.engine_run_chunk_task(chunk.pk)
    assert 30 < retried["countdown"] <= 31 and isinstance(retried["exc"], EngineChunkLeasedError)
    assert tasks.engine_run_chunk_task.max_retries is None  # for as long as the other one runs
    assert not stub.requests


needs_services = pytest.mark.skipif(
    not os.environ.get("CELERY_BROKER_URL")
    or not os.environ.get("DATABASE_URL", "").startswith("postgres"),
    reason="needs CELERY_BROKER_URL (Redis) and DATABASE_URL (PostgreSQL), as .ci/run sets them",
)


@needs_services
@pytest.mark.django_db(transaction=True)
def test_two_real_workers_given_one_chunk_task_twice_ask_each_unit_once(
    tmp_path, monkeypatch, settings
):
    # What Redis does to a chunk running past the visibility timeout, done by hand: the same
    # chunk task sent again while a worker runs it. The other worker takes it, sends no call and
    # tries again (a new message on the same queue) until the chunk is done.
    from annotate.engine import tasks
    from config.celery import app as celery_app
    from tests.config.test_celery_worker import worker_process
    from tests.evaluation.openai_stub import StubOpenAI

    queue = f"test-{uuid.uuid4().hex[:8]}"
    monkeypatch.setitem(celery_app.conf, "task_always_eager", False)
    monkeypatch.setitem(celery_app.conf, "task_default_queue", queue)
    fast = {
        "ENGINE_CHUNK_LEASE_SECONDS": "2",
        "ENGINE_HEARTBEAT_SECONDS": "0.2",
        # The test settings run tasks eagerly, a retry included: these workers send theirs.
        "DJANGO_SETTINGS_MODULE": "config.settings.base",
    }
    with (
        StubOpenAI(delay=0.3) as stub,
        worker_process(queue, tmp_path, log="one.log", env=fast),
        worker_process(queue, tmp_path, log="two.log", env=fast),
    ):
        endpoint = make_endpoint(stub.base_url, concurrency=1)
        benchmark, _ = make_instructions(12)
        system = generating_system_get_or_create(name="gen-two", endpoint=endpoint)
        run = generation_run_create(benchmark=benchmark, systems=[system], endpoint=endpoint)
        # Dispatched here, so that the chunk task goes to this test's queue once it commits.
        (chunk,) = engine_run_dispatch(run_id=run.pk, chunk_units=12)
        _wait_for(lambda: len(stub.requests) >= 2, timeout=60)
        again = tasks.engine_run_chunk_task.apply_async((chunk.pk,), queue=queue)
        _wait_for(lambda: _ended(run), timeout=90)
        chunk.refresh_from_db()
        # The second delivery was tried again until the chunk was done, then did nothing.
        second = f"engine_run_chunk_task[{again.id}]"
        _wait_for(lambda: f"{second} succeeded" in _logs(tmp_path), timeout=30)
        logs = _logs(tmp_path)
    assert len(stub.requests) == 12 == EngineCall.objects.filter(run=run).count()
    assert run.status == RunStatus.DONE, run.error
    assert f"{second} retry: Retry in" in logs, logs
    assert Response.objects.filter(system=system).count() == 12
    assert chunk.status == ChunkStatus.DONE


def _ended(run) -> bool:
    run.refresh_from_db()
    return run.status not in (RunStatus.PENDING, RunStatus.RUNNING)


def _logs(tmp_path) -> str:
    return "".join((tmp_path / name).read_text() for name in ("one.log", "two.log"))


@pytest.mark.parametrize("cap", [None, Decimal("1000")], ids=["no-cap", "shared-cap"])
@pytest.mark.django_db(transaction=True)
def test_a_delivery_stalled_past_its_lease_stores_no_unit_the_next_one_took_over(
    stub, monkeypatch, settings, cap
):
    # The first delivery's storing thread stalls (a lock, a long GC, a paused VM) with its first
    # answer in hand and its second call in flight, for longer than the lease: a second delivery
    # takes the chunk over and asks every unit still pending, those two included. When the first
    # wakes up, its answers must not be stored a second time; its two calls were paid, and stay
    # in the run's cost.
    from annotate.engine.services import runs

    settings.ENGINE_CHUNK_LEASE_SECONDS = 60
    settings.ENGINE_HEARTBEAT_SECONDS = 0.05
    units = 4
    run, system, chunk = _one_chunk(
        stub, units, monkeypatch, concurrency=1,
        price_prompt_per_1k=Decimal("1"), price_completion_per_1k=Decimal("1"),
    )  # fmt: skip
    EngineRun.objects.filter(pk=run.pk).update(spending_cap_usd=cap)
    stalled, wake, stored, answer = (threading.Event() for _ in range(4))
    stub.on_request = lambda count: count == 2 and answer.wait(60)  # the first's second call
    store_batch = runs._store_batch

    def store_batch_stalling_the_first(run, protocol, executor, batch, on_progress=None):
        if stalled.is_set() or not any(isinstance(item, UnitResult) for item in batch):
            return store_batch(run, protocol, executor, batch, on_progress)
        stalled.set()
        assert wake.wait(60)
        store_batch(run, protocol, executor, batch, on_progress)
        stored.set()

    monkeypatch.setattr(runs, "_store_batch", store_batch_stalling_the_first)
    first = []
    one = in_thread(lambda: engine_run_chunk_execute(chunk_id=chunk.pk, task_id="first"), first)
    assert stalled.wait(60)
    _wait_for(lambda: len(stub.requests) == 2)  # the first delivery's second call is in flight
    # The stall outlasts the lease: the first delivery's last beat is older than the lease (set
    # so, rather than waited for, so that no clock decides what the test sees).
    EngineChunk.objects.filter(pk=chunk.pk).update(heartbeat=timezone.now() - timedelta(seconds=61))
    second = engine_run_chunk_execute(chunk_id=chunk.pk, task_id="second")  # does it all
    wake.set()
    assert stored.wait(60)  # the first's stalled batch, then its call in flight, come back
    answer.set()
    one.join(60)

    assert isinstance(first[0], EngineChunkLeasedError), first
    assert second.status == ChunkStatus.DONE and second.task_id == "second"
    run.refresh_from_db()
    assert run.status == RunStatus.DONE, run.error
    assert (run.units_total, run.units_done, run.units_failed) == (units, units, 0)
    assert list(
        EngineUnit.objects.filter(run=run).values_list("status", "attempts").distinct()
    ) == [("done", 1)]
    # One response a unit, each given by a call of its own unit.
    calls = EngineCall.objects.filter(run=run)
    unit_of = dict(calls.values_list("pk", "unit_key"))
    given_by = Response.objects.filter(system=system).values_list("generated_by", flat=True)
    assert sorted(unit_of[pk] for pk in given_by) == sorted(chunk.keys)
    # Every call sent was paid: the first delivery's two as well, each counted once.
    assert len(stub.requests) == units + 2 == run.calls == calls.count()
    assert run.cost_usd == sum(call.cost_usd for call in calls) > 0
    assert run.cost_reserved_usd == 0
    assert run.heartbeat is None  # ended; the late delivery did not beat it back to life


def _clock_off_by(monkeypatch, seconds: float) -> None:
    """Set this process's clock `seconds` off the database's (a worker host whose clock is
    skewed): timezone.now() is what the process reads; the database keeps its own."""
    real_now = timezone.now
    monkeypatch.setattr(timezone, "now", lambda: real_now() + timedelta(seconds=seconds))


@pytest.mark.parametrize("skewed", ["holder", "taker"])
def test_a_lease_held_and_beating_is_not_taken_over_whatever_the_workers_clocks_say(
    stub, monkeypatch, settings, skewed
):
    # Two workers whose clocks differ by two minutes, more than the lease: the lease's age is
    # told by the database's clock, so the one whose clock runs behind (holder) or ahead
    # (taker) does not make a fresh lease look stale, and no second delivery asks its units.
    from annotate.engine.services import runs

    settings.ENGINE_CHUNK_LEASE_SECONDS = 60
    run, system, chunk = _one_chunk(stub, 3, monkeypatch)
    with monkeypatch.context() as clock:
        if skewed == "holder":
            _clock_off_by(clock, -120)
        _, lease = runs._chunk_lease_take(chunk.pk, task_id="first", worker="a")
        assert lease is not None and lease.renew()  # it beats, with its clock two minutes slow
    if skewed == "taker":
        _clock_off_by(monkeypatch, +120)

    with pytest.raises(EngineChunkLeasedError) as raised:
        engine_run_chunk_execute(chunk_id=chunk.pk, task_id="second")
    assert 59 < raised.value.retry_in <= 61  # the lease is fresh: stale in a minute
    assert not stub.requests
    chunk.refresh_from_db()
    assert (chunk.lease, chunk.task_id) == (lease.token, "first")
