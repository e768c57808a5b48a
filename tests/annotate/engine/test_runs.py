"""Runs: generation through the stub, resume, idempotent reruns, cap, dry run, stop, failures."""

import logging
import threading
import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.db.models import F
from django.utils import timezone

from annotate.engine import tasks
from annotate.engine.errors import EngineNothingToDoError, EngineRunDoneError, EngineRunError
from annotate.engine.models import EngineCall, EngineRun, EngineUnit, RunStatus, UnitStatus
from annotate.engine.protocols import UnitResult
from annotate.engine.selectors import engine_run_progress
from annotate.engine.services import (
    endpoint_update,
    engine_run_create,
    engine_run_estimate,
    engine_run_estimate_new,
    engine_run_execute,
    engine_run_has_work_left,
    engine_run_reopen,
    engine_run_stopped_by_cap,
    engine_runs_reap,
    runs,
)
from annotate.engine.services.generation import (
    generating_system_get_or_create,
    generation_run_create,
)
from annotate.models import Response, System
from tests.annotate.engine import echo
from tests.annotate.engine.conftest import dollar_a_thousand, make_endpoint, make_instructions

pytestmark = pytest.mark.django_db


def _generation(endpoint, count=3, system="gen-a", **kwargs):
    benchmark, instructions = make_instructions(count)
    system = generating_system_get_or_create(name=system, endpoint=endpoint)
    run = generation_run_create(benchmark=benchmark, systems=[system], endpoint=endpoint, **kwargs)
    return run, system, instructions


def test_generation_sends_the_template_and_stores_ordinary_responses(stub):
    stub.responder = lambda messages: f"answer to {messages[-1]['content'][:12]}"
    endpoint = make_endpoint(stub.base_url)
    run, system, instructions = _generation(endpoint)

    run = engine_run_execute(run_id=run.pk)

    assert run.status == RunStatus.DONE
    assert (run.units_total, run.units_done, run.units_failed, run.calls) == (3, 3, 0, 3)
    sent = sorted(body["messages"][0]["content"] for body in stub.requests)
    # Instruction, a blank line, the input when there is one (task_1 and task_3 have one).
    assert sent == ["Write line 1.\n\nInput 1.", "Write line 2.", "Write line 3.\n\nInput 3."]
    assert all(body["temperature"] == 0 for body in stub.requests)
    response = Response.objects.get(instruction=instructions[1], system=system)
    assert response.text == "answer to Write line 2"
    assert response.generated_by.run_id == run.pk and response.generated_by.status == "ok"
    assert run.prompt_tokens == sum(u["prompt_tokens"] for u in stub.usages)


def test_a_rerun_makes_no_call_for_what_is_done_and_a_new_run_skips_it_too(stub):
    endpoint = make_endpoint(stub.base_url)
    run, system, _ = _generation(endpoint)
    engine_run_execute(run_id=run.pk)
    engine_run_execute(run_id=run.pk)
    assert len(stub.requests) == 3
    benchmark = system.responses.first().instruction.benchmark
    system.responses.filter(instruction__external_id="task_2").delete()
    second = generation_run_create(benchmark=benchmark, systems=[system], endpoint=endpoint)
    second = engine_run_execute(run_id=second.pk)
    assert len(stub.requests) == 4
    assert (second.status, second.units_done, second.units_skipped, second.calls) == (
        RunStatus.DONE,
        3,
        2,
        1,
    )


def test_a_new_generation_run_with_nothing_left_is_refused_and_not_recorded(stub):
    endpoint = make_endpoint(stub.base_url)
    run, system, _ = _generation(endpoint)
    engine_run_execute(run_id=run.pk)
    benchmark = system.responses.first().instruction.benchmark

    with pytest.raises(EngineNothingToDoError, match=r"Nothing to do: the 3 responses of gen-a"):
        generation_run_create(benchmark=benchmark, systems=[system], endpoint=endpoint)

    assert list(EngineRun.objects.values_list("pk", flat=True)) == [run.pk]
    assert len(stub.requests) == 3
    # Its estimate still says so, keeping nothing: 0 to do, 3 done already.
    estimate = engine_run_estimate_new(
        create=lambda: generation_run_create(
            benchmark=benchmark, systems=[system], endpoint=endpoint
        )
    )
    assert (estimate.units, estimate.units_done_before) == (0, 3)
    assert EngineRun.objects.count() == 1


def test_a_runs_counters_are_the_sums_of_its_stored_calls_over_two_starts(stub):
    """The batch's counters (one UPDATE of increments) and unit rows agree with the calls
    stored: counts, tokens, exact cost in dollars, seconds, attempts."""
    stub.fail_next(400, message="bad request")
    endpoint = dollar_a_thousand(stub, concurrency=1)
    run, _, _ = _generation(endpoint)

    engine_run_execute(run_id=run.pk)
    run = engine_run_execute(run_id=run.pk)  # the failed unit again

    calls = list(EngineCall.objects.filter(run=run))
    assert run.status == RunStatus.DONE and len(calls) == 4
    assert (run.units_done, run.units_failed, run.calls, run.calls_failed) == (3, 0, 4, 1)
    assert run.prompt_tokens == sum(c.prompt_tokens for c in calls) > 0
    assert run.completion_tokens == sum(c.completion_tokens for c in calls) > 0
    assert (
        run.cost_usd
        == sum(c.cost_usd for c in calls)
        == Decimal(run.prompt_tokens + run.completion_tokens) / 1000
    )  # $1 per 1k tokens either way
    assert run.call_seconds == pytest.approx(sum(c.latency_ms for c in calls) / 1000)
    units = EngineUnit.objects.filter(run=run).order_by("key")
    assert sorted(u.attempts for u in units) == [1, 1, 2]  # the failed one was tried twice
    assert all(u.status == UnitStatus.DONE and u.error == "" for u in units)
    assert all(u.updated_at >= run.started_at for u in units)


def test_failed_units_are_recorded_and_retried_by_the_next_start(stub):
    stub.fail_next(400, message="bad request")
    endpoint = make_endpoint(stub.base_url, concurrency=1)
    run, system, _ = _generation(endpoint)

    run = engine_run_execute(run_id=run.pk)
    assert run.status == RunStatus.FAILED and run.units_failed == 1 and run.units_done == 2
    assert "1 of 3 units failed" in run.error
    unit = EngineUnit.objects.get(run=run, status=UnitStatus.FAILED)
    assert "HTTP 400" in unit.error
    assert system.responses.count() == 2  # the failure is no response

    run = engine_run_execute(run_id=run.pk)
    assert run.status == RunStatus.DONE and run.units_done == 3 and run.units_failed == 0
    assert len(stub.requests) == 4 and system.responses.count() == 3


def test_a_run_started_again_after_its_endpoint_changed_counts_only_its_current_units(stub):
    # The units' keys hold the endpoint's settings; the rows of the keys from before the change
    # (failed here, reset to pending by the next start) are no longer the run's work: left in
    # the run they would be counted for ever, a "Done" run at 50 % with nothing left to do.
    stub.fail_next(400, times=3, message="bad request")
    endpoint = make_endpoint(stub.base_url, concurrency=1)
    run, system, _ = _generation(endpoint)
    run = engine_run_execute(run_id=run.pk)
    assert run.status == RunStatus.FAILED and run.units_failed == 3

    endpoint_update(endpoint=endpoint, temperature=0.5)
    run = engine_run_execute(run_id=run.pk)

    assert run.status == RunStatus.DONE and system.responses.count() == 3
    assert (run.units_total, run.units_done, run.units_failed) == (3, 3, 0)
    assert engine_run_progress(run=run)["percent_processed"] == 100
    assert EngineUnit.objects.filter(run=run).exclude(status=UnitStatus.DONE).count() == 0


def test_a_refused_reply_fails_its_unit_and_a_truncated_one_is_kept_with_its_status(stub):
    stub.replies.extend(
        [
            {"content": "", "finish_reason": "content_filter"},
            {"content": "cut", "finish_reason": "length"},
        ]
    )
    endpoint = make_endpoint(stub.base_url, concurrency=1)
    run, system, _ = _generation(endpoint, count=2)
    run = engine_run_execute(run_id=run.pk)
    assert run.units_failed == 1 and run.units_done == 1
    (response,) = system.responses.all()
    assert response.text == "cut" and response.generated_by.status == "truncated"
    assert EngineCall.objects.filter(status="refused", reply="").count() == 1


def test_stop_keeps_what_was_answered_and_a_resume_does_only_the_rest(stub):
    endpoint = make_endpoint(stub.base_url, concurrency=1)
    run, system, _ = _generation(endpoint, count=5)
    stop = threading.Event()
    stub.on_request = lambda count: count >= 2 and stop.set()

    run = engine_run_execute(run_id=run.pk, stop=stop)
    assert run.status == RunStatus.CANCELLED and run.units_done == 2
    assert system.responses.count() == 2

    run = engine_run_execute(run_id=run.pk)
    assert run.status == RunStatus.DONE and system.responses.count() == 5
    assert len(stub.requests) == 5  # nothing answered was asked again


def test_a_stop_that_comes_while_the_last_unit_is_answered_leaves_the_run_done(stub):
    # The calls in flight end and are stored after a stop: when they were the last ones, the
    # run has nothing left to do and is done, not "Stopped" at 100 %.
    endpoint = make_endpoint(stub.base_url, concurrency=1)
    run, system, _ = _generation(endpoint, count=3)
    stop = threading.Event()
    stub.on_request = lambda count: count >= 3 and stop.set()

    run = engine_run_execute(run_id=run.pk, stop=stop)

    assert (run.units_done, run.units_total) == (3, 3) and system.responses.count() == 3
    assert run.status == RunStatus.DONE and run.error == ""


def test_the_spending_cap_stops_before_the_call_that_would_exceed_it(stub):
    # Each call is estimated at (prompt ~10 tokens + max_tokens 100) at $1 per 1k tokens: about
    # $0.11 before it is sent; each costs about as much (the stub counts 500 characters as 101
    # completion tokens). After two calls ($0.23 spent) the third would pass the $0.25 cap.
    stub.responder = lambda messages: "x" * 500
    endpoint = dollar_a_thousand(stub, concurrency=1)
    run, system, _ = _generation(endpoint, count=4, spending_cap_usd=Decimal("0.25"))
    run = engine_run_execute(run_id=run.pk)
    assert len(stub.requests) == 2 and system.responses.count() == 2
    assert run.status == RunStatus.CANCELLED and "spending cap" in run.error
    assert run.cost_usd <= Decimal("0.25")


def test_a_cap_stop_is_told_apart_from_other_stops_whatever_the_cap_is_now(stub):
    """The commands' hint ("Raise the cap to go on") reads engine_run_stopped_by_cap: a stop at
    the cap stays one after the cap is changed; a stop from the page never is one."""
    from annotate.engine.management.commands._run_options import resume_hint
    from annotate.engine.services import engine_run_cap_set, engine_run_stop

    stub.responder = lambda messages: "x" * 500
    endpoint = dollar_a_thousand(stub, concurrency=1)
    run, _, _ = _generation(endpoint, count=4, spending_cap_usd=Decimal("0.25"))
    run = engine_run_execute(run_id=run.pk)
    assert engine_run_stopped_by_cap(run)
    engine_run_cap_set(run=run, cap=Decimal("0.30"))
    run.refresh_from_db()
    assert engine_run_stopped_by_cap(run)
    assert resume_hint("generate", run.pk, run).startswith("Raise the cap to go on")

    other = engine_run_create(
        kind="generation", endpoint=endpoint, params={}, spending_cap_usd=Decimal("1")
    )
    engine_run_stop(run=other)
    other.refresh_from_db()
    assert other.status == RunStatus.CANCELLED and not engine_run_stopped_by_cap(other)


def test_a_call_that_fits_the_cap_only_alone_waits_for_the_calls_in_flight(stub):
    """Each call reserves its worst cost (about $0.11) but costs about $0.015: two at once do not
    fit under a $0.20 cap. The run stopped after its first call ("would exceed the cap") though
    the whole run costs a third of the cap; the second call now waits for the first to end."""
    stub.responder = lambda messages: "short"
    stub.delay = 0.2
    endpoint = dollar_a_thousand(stub, concurrency=2)
    run, system, _ = _generation(endpoint, count=4, spending_cap_usd=Decimal("0.20"))
    run = engine_run_execute(run_id=run.pk)
    assert run.status == RunStatus.DONE and system.responses.count() == 4
    assert len(stub.requests) == 4 and run.cost_usd < Decimal("0.07")


def test_the_dry_run_estimate_counts_only_missing_units_and_sends_nothing(stub):
    endpoint = make_endpoint(
        stub.base_url,
        max_tokens=50,
        price_prompt_per_1k=Decimal("2"),
        price_completion_per_1k=Decimal("4"),
    )
    run, system, _ = _generation(endpoint, count=3)
    estimate = engine_run_estimate(run=run)
    # Prompts "Write line 1.\n\nInput 1." (23 chars -> 6 tokens), "Write line 2." (13 -> 4),
    # "Write line 3.\n\nInput 3." (6); each + 4 per message + 3 = 13, 11, 13 -> 37 tokens.
    assert (estimate.units, estimate.calls, estimate.prompt_tokens) == (3, 3, 37)
    assert estimate.completion_tokens == 150
    assert estimate.cost_usd == Decimal("0.674000")  # (37 * 2 + 150 * 4) / 1000
    assert stub.requests == []
    engine_run_execute(run_id=run.pk)
    assert engine_run_estimate(run=run).calls == 0


def test_an_estimate_of_a_new_run_is_the_runs_estimate_and_keeps_nothing(stub):
    endpoint = make_endpoint(stub.base_url, max_tokens=50, price_prompt_per_1k=Decimal("2"))
    benchmark, _ = make_instructions(3)

    def create():
        system = generating_system_get_or_create(name="new-sys", endpoint=endpoint)
        return generation_run_create(benchmark=benchmark, systems=[system], endpoint=endpoint)

    estimate = runs.engine_run_estimate_new(create=create)

    assert not EngineRun.objects.exists() and not System.objects.exists()  # the system too
    assert estimate == engine_run_estimate(run=create())
    assert (estimate.units, estimate.calls, estimate.prompt_tokens) == (3, 3, 37)
    assert stub.requests == []


def test_a_protocol_that_raises_fails_the_run_with_its_message(stub, echo_protocol):
    endpoint = make_endpoint(stub.base_url, concurrency=1)
    run = engine_run_create(kind="echo", endpoint=endpoint, params={"items": ["a", "boom", "c"]})
    run = engine_run_execute(run_id=run.pk)
    assert run.status == RunStatus.FAILED
    assert run.error == "RuntimeError: the protocol's own bug"
    assert ("echo:a") in [key for run_id, key, _ in echo.STORED if run_id == run.pk]


def test_a_unit_failed_by_its_protocol_is_counted_and_the_rest_is_stored(stub, echo_protocol):
    endpoint = make_endpoint(stub.base_url)
    run = engine_run_create(kind="echo", endpoint=endpoint, params={"items": ["a", "fail"]})
    run = engine_run_execute(run_id=run.pk)
    assert (run.status, run.units_done, run.units_failed) == (RunStatus.FAILED, 1, 1)
    assert EngineUnit.objects.get(run=run, key="echo:fail").error == "this unit cannot be done"


def test_a_run_whose_worker_stopped_beating_is_marked_failed():
    endpoint = make_endpoint("", name="fake")
    now = timezone.now()
    stale = EngineRun.objects.create(
        kind="generation",
        endpoint=endpoint,
        status=RunStatus.RUNNING,
        heartbeat=now - timedelta(hours=1),
    )
    alive = EngineRun.objects.create(
        kind="generation", endpoint=endpoint, status=RunStatus.RUNNING, heartbeat=now
    )
    assert engine_runs_reap(now=now) == 1
    stale.refresh_from_db()
    alive.refresh_from_db()
    assert stale.status == RunStatus.FAILED and "stopped answering" in stale.error
    assert alive.status == RunStatus.RUNNING


def test_a_running_run_that_never_beat_is_marked_failed():
    # Starting a run again already treats a running run without a heartbeat as dead
    # (engine_run_start): the reaper must end it too, or it says "running" for ever.
    endpoint = make_endpoint("", name="fake")
    never = EngineRun.objects.create(
        kind="generation", endpoint=endpoint, status=RunStatus.RUNNING, heartbeat=None
    )
    assert engine_runs_reap(now=timezone.now()) == 1
    never.refresh_from_db()
    assert never.status == RunStatus.FAILED and "stopped answering" in never.error


def test_a_reaped_run_tells_its_protocol_it_ended(echo_protocol):
    # A protocol keeps its own run row in step in on_finish: a reaped run must call it too, or
    # that row (a judge run) says "running" for ever after its worker died.
    endpoint = make_endpoint("", name="fake")
    now = timezone.now()
    stale = EngineRun.objects.create(
        kind="echo",
        endpoint=endpoint,
        status=RunStatus.RUNNING,
        heartbeat=now - timedelta(hours=1),
        params={"items": ["a"]},
    )
    echo.FINISHED.clear()

    assert engine_runs_reap(now=now) == 1
    assert engine_runs_reap(now=now) == 0  # reaped once: told once

    assert [(stale.pk, RunStatus.FAILED)] == echo.FINISHED


@pytest.fixture
def on_finish_fails(monkeypatch):
    """The protocol's on_finish writes, then raises (a judge run deleted meanwhile)."""

    def fail(self, run):
        echo.FINISHED.append((run.pk, run.status))
        EngineRun.objects.filter(pk=run.pk).update(params={"written": "by on_finish"})
        raise LookupError("its judge run was deleted")

    monkeypatch.setattr(echo.EchoProtocol, "on_finish", fail)


def test_a_run_whose_protocol_fails_at_its_end_ends_failed_and_run_again_records_it(
    stub, echo_protocol, on_finish_fails, monkeypatch
):
    # Every unit was answered, but the protocol's own records were not brought in step (a judge
    # run's labels and status): the run is not shown done, as if its results were all there.
    run = engine_run_create(
        kind="echo", endpoint=make_endpoint(stub.base_url), params={"items": ["a", "b"]}
    )

    returned = engine_run_execute(run_id=run.pk)

    run.refresh_from_db()
    assert (returned.status, run.status) == (RunStatus.FAILED, RunStatus.FAILED)
    assert run.finished_at is not None and run.running_since is None
    assert "recording its results in the echo records failed" in run.error
    assert "LookupError: its judge run was deleted" in run.error and "Run again" in run.error
    assert run.params == {"items": ["a", "b"]}  # what on_finish wrote before it raised is undone
    assert EngineUnit.objects.filter(run=run, status=UnitStatus.DONE).count() == 2
    assert len(stub.requests) == 2

    # Run again once the cause is gone: nothing is asked again, and its end is recorded.
    recorded = lambda self, run: echo.FINISHED.append((run.pk, run.status))  # noqa: E731
    monkeypatch.setattr(echo.EchoProtocol, "on_finish", recorded)
    assert engine_run_has_work_left(run=run)
    engine_run_reopen(run=run)
    echo.FINISHED.clear()
    again = engine_run_execute(run_id=run.pk)
    assert (again.status, again.error) == (RunStatus.DONE, "")
    assert [(run.pk, RunStatus.DONE)] == echo.FINISHED and len(stub.requests) == 2


def test_a_reaped_run_whose_protocol_fails_at_its_end_is_reaped_all_the_same(
    echo_protocol, on_finish_fails
):
    now = timezone.now()
    stale = EngineRun.objects.create(
        kind="echo",
        endpoint=make_endpoint("", name="fake"),
        status=RunStatus.RUNNING,
        heartbeat=now - timedelta(hours=1),
        params={"items": ["a"]},
    )
    echo.FINISHED.clear()

    assert engine_runs_reap(now=now) == 1
    assert engine_runs_reap(now=now) == 0

    stale.refresh_from_db()
    assert stale.status == RunStatus.FAILED and "stopped answering" in stale.error
    assert "LookupError: its judge run was deleted" in stale.error
    assert [(stale.pk, RunStatus.FAILED)] == echo.FINISHED


def test_regenerating_replaces_only_on_request_and_old_labels_stay_on_the_old_text(stub):
    from annotate.engine.services import endpoint_update
    from annotate.models import Label, System
    from tests.factories import AnnotatorFactory, QuestionFactory

    stub.responder = lambda messages: "first text"
    endpoint = make_endpoint(stub.base_url)
    run, system, (instruction,) = _generation(endpoint, count=1)
    engine_run_execute(run_id=run.pk)
    old = Response.objects.get(system=system)
    label = Label.objects.create(
        question=QuestionFactory(instruction=instruction, position=1),
        response=old,
        annotator=AnnotatorFactory(),
        value=1,
    )
    stub.responder = lambda messages: "second text"
    endpoint_update(endpoint=endpoint, temperature=0.7)  # other settings: another unit key
    benchmark = instruction.benchmark

    with pytest.raises(EngineNothingToDoError):  # no silent replacement
        generation_run_create(benchmark=benchmark, systems=[system], endpoint=endpoint)
    assert len(stub.requests) == 1

    replaced = generation_run_create(
        benchmark=benchmark, systems=[system], endpoint=endpoint, replace=True
    )
    replaced = engine_run_execute(run_id=replaced.pk)
    assert replaced.calls == 1 and stub.requests[-1]["temperature"] == 0.7
    new = Response.objects.get(system=system)
    assert new.text == "second text" and not new.labels.exists()
    old.refresh_from_db()
    label.refresh_from_db()
    retired = System.objects.get(retired_from=system)
    assert old.system == retired and old.text == "first text" and label.response == old
    assert retired.name == f"gen-a (replaced by run {replaced.pk})"


def test_runs_share_the_process_worker_threads_and_a_forked_child_starts_its_own(stub, monkeypatch):
    endpoint = make_endpoint(stub.base_url, concurrency=3)

    def workers() -> set[threading.Thread]:
        return {t for t in threading.enumerate() if t.name.startswith("engine-worker")}

    run, _, instructions = _generation(endpoint)
    engine_run_execute(run_id=run.pk)
    kept = workers()
    while runs._worker_pool()._idle_semaphore._value < 3:  # threads end a moment after a run
        time.sleep(0.001)
    other = generating_system_get_or_create(name="gen-b", endpoint=endpoint)
    benchmark = instructions[0].benchmark
    run = generation_run_create(benchmark=benchmark, systems=[other], endpoint=endpoint)
    assert engine_run_execute(run_id=run.pk).units_done == 3
    assert kept and workers() == kept  # no thread started for the second run
    pool = runs._worker_pool()
    monkeypatch.setattr(runs.os, "getpid", lambda: -1)  # as in a child after a fork
    assert runs._worker_pool() is not pool


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # closed once the block ends: connections are refused


def test_a_run_on_an_endpoint_that_answers_nothing_stops_after_calls_failing_in_a_row(settings):
    # A wrong address (or a server that died): every unit would spend its retries to fail the
    # same way. The run stops after ENGINE_FAILED_CALLS_IN_A_ROW, and says what to do.
    settings.ENGINE_FAILED_CALLS_IN_A_ROW = 5
    endpoint = make_endpoint(f"http://127.0.0.1:{_closed_port()}/v1", concurrency=2, max_retries=0)
    run, _, _ = _generation(endpoint, count=30)

    run = engine_run_execute(run_id=run.pk)

    assert run.status == RunStatus.FAILED
    assert "failed 5 calls in a row" in run.error and "Test connection" in run.error
    assert 5 <= EngineCall.objects.filter(run=run).count() <= 6  # and the one in flight
    assert EngineUnit.objects.filter(run=run, status=UnitStatus.PENDING).count() >= 24


def test_a_success_between_failures_starts_the_count_again(stub, settings):
    settings.ENGINE_FAILED_CALLS_IN_A_ROW = 3
    failures = iter([True, True, False, True, True, False, True, True, False])

    def responder(messages):
        if next(failures, False):
            raise RuntimeError("not this one")
        return "fine"

    stub.responder = responder
    endpoint = make_endpoint(stub.base_url, concurrency=1, max_retries=0)
    run, _, _ = _generation(endpoint, count=9)

    run = engine_run_execute(run_id=run.pk)

    assert (run.units_done, run.units_failed) == (3, 6)
    assert "in a row" not in run.error


@pytest.fixture
def clock(monkeypatch):
    """The time every part of the engine reads (timezone.now), moved by hand."""
    now = [datetime(2026, 3, 2, 9, 0, tzinfo=UTC)]
    monkeypatch.setattr(timezone, "now", lambda: now[0])
    return now


def _has_run_for(run: EngineRun, by: timedelta) -> None:
    """Move the current start back by `by` (the database's clock, which a start and its end
    are read by, cannot be moved by hand)."""
    EngineRun.objects.filter(pk=run.pk).update(running_since=F("running_since") - by)


def test_time_so_far_counts_only_the_time_the_run_was_running(echo_protocol, clock):
    run = engine_run_create(
        kind="echo", endpoint=make_endpoint("", name="fake"), params={"items": ["a", "b"]}
    )
    runs._claim(run.pk)
    _has_run_for(run, timedelta(hours=1))
    run = runs._finish(run.pk)  # an hour's run
    first = run.running_seconds
    assert timedelta(seconds=first) >= timedelta(hours=1)
    clock[0] += timedelta(days=1)
    assert engine_run_progress(run=run)["elapsed_seconds"] == round(first, 1)

    EngineRun.objects.filter(pk=run.pk).update(params={"items": ["a", "b", "c"]})  # one more
    run.refresh_from_db()
    engine_run_reopen(run=run)  # started again the next day
    runs._claim(run.pk)
    _has_run_for(run, timedelta(minutes=1))
    running = EngineRun.objects.get(pk=run.pk)
    later = running.running_since + timedelta(seconds=90)
    seen = engine_run_progress(run=running, now=later)
    assert (seen["status"], seen["elapsed_seconds"]) == (RunStatus.RUNNING, round(first + 90, 1))
    run = runs._finish(run.pk)
    assert (
        timedelta(minutes=1) <= timedelta(seconds=run.running_seconds - first) < timedelta(days=1)
    )


def test_a_reaped_run_counts_its_time_until_its_last_beat():
    now = timezone.now()
    run = EngineRun.objects.create(
        kind="generation",
        endpoint=make_endpoint("", name="fake"),
        status=RunStatus.RUNNING,
        started_at=now - timedelta(days=2),
        running_seconds=100,  # its earlier starts
        running_since=now - timedelta(hours=1),
        heartbeat=now - timedelta(minutes=50),  # its worker died then
    )
    assert engine_runs_reap(now=now) == 1
    run.refresh_from_db()
    assert (run.status, run.running_since) == (RunStatus.FAILED, None)
    assert engine_run_progress(run=run, now=now)["elapsed_seconds"] == 100 + 600


def test_a_stopped_run_whose_worker_died_counts_its_time_until_its_last_beat():
    """Asked to stop, its worker died before it could end it; delivered again, the run ended
    as stopped and counted the silence up to then as running time (an hour for 10 minutes)."""
    now = timezone.now()
    run = EngineRun.objects.create(
        kind="generation",
        endpoint=make_endpoint("", name="fake"),
        status=RunStatus.RUNNING,
        stop_requested=True,
        started_at=now - timedelta(hours=1),
        running_seconds=100,
        running_since=now - timedelta(hours=1),
        heartbeat=now - timedelta(minutes=50),
    )
    run = engine_run_execute(run_id=run.pk)
    assert (run.status, run.running_since) == (RunStatus.CANCELLED, None)
    assert engine_run_progress(run=run, now=now)["elapsed_seconds"] == 100 + 600


def test_a_second_start_is_refused_while_the_first_waits_for_a_worker_or_runs():
    endpoint = make_endpoint("", name="fake")
    run = EngineRun.objects.create(kind="generation", endpoint=endpoint, status="cancelled")
    # Two starts at once (a double click): each read the run stopped before either reopened it.
    first, second = EngineRun.objects.get(pk=run.pk), EngineRun.objects.get(pk=run.pk)

    engine_run_reopen(run=first)
    with pytest.raises(EngineRunError, match=f"Run {run.pk} is starting already"):
        engine_run_reopen(run=second)

    run.refresh_from_db()
    assert run.status == RunStatus.PENDING
    EngineRun.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING, heartbeat=timezone.now())
    with pytest.raises(EngineRunError, match=f"Run {run.pk} is running already"):
        engine_run_reopen(run=second)
    # A start no worker took (or a run whose worker died) may be asked again once silent.
    long_ago = timezone.now() - timedelta(hours=1)
    for status in (RunStatus.PENDING, RunStatus.RUNNING):
        EngineRun.objects.filter(pk=run.pk).update(status=status, heartbeat=long_ago)
        engine_run_reopen(run=second)
        run.refresh_from_db()
        assert run.status == RunStatus.PENDING


def test_a_done_run_is_not_started_again_unless_its_work_grew(echo_protocol):
    """Nothing left: starting it again (Run again, the API, --run) is refused and changes
    nothing, where it used to show the run "pending" for a moment. Work added since it ended
    (an edited endpoint's new keys, an item here) may be started."""
    endpoint = make_endpoint("", name="fake")
    run = engine_run_create(kind="echo", endpoint=endpoint, params={"items": ["a", "b"]})
    run = engine_run_execute(run_id=run.pk)
    assert run.status == RunStatus.DONE

    with pytest.raises(EngineRunDoneError, match=rf"^Run {run.pk} is done: nothing left"):
        engine_run_reopen(run=run)
    assert EngineRunDoneError.http_status == 409
    stored = EngineRun.objects.get(pk=run.pk)
    assert (stored.status, stored.heartbeat, stored.finished_at) == (
        RunStatus.DONE,
        None,
        run.finished_at,
    )

    EngineRun.objects.filter(pk=run.pk).update(params={"items": ["a", "b", "c"]})
    run.refresh_from_db()
    engine_run_reopen(run=run)
    run.refresh_from_db()
    assert run.status == RunStatus.PENDING


def test_a_failed_or_cap_stopped_run_may_still_be_started_again(stub, echo_protocol):
    failed = engine_run_create(
        kind="echo", endpoint=make_endpoint(stub.base_url), params={"items": ["a", "fail"]}
    )
    failed = engine_run_execute(run_id=failed.pk)
    stub.responder = lambda messages: "x" * 500
    capped, _, _ = _generation(
        dollar_a_thousand(stub, concurrency=1, name="paid"),
        count=4,
        spending_cap_usd=Decimal("0.25"),
    )
    capped = engine_run_execute(run_id=capped.pk)
    assert (failed.status, capped.status) == (RunStatus.FAILED, RunStatus.CANCELLED)

    for run in (failed, capped):
        engine_run_reopen(run=run)
        run.refresh_from_db()
        assert run.status == RunStatus.PENDING


def test_a_run_task_delivered_again_while_its_run_runs_does_nothing(echo_protocol, caplog):
    run = engine_run_create(
        kind="echo", endpoint=make_endpoint("", name="fake"), params={"items": ["a", "b"]}
    )
    redelivered = []

    def delivered_again(_ended):
        if not redelivered:  # the broker hands the same task to a second worker meanwhile
            redelivered.append(EngineRun.objects.get(pk=run.pk).status)
            tasks.engine_run_task(run.pk)

    with caplog.at_level(logging.WARNING, logger="annotate.engine.services.runs"):
        run = engine_run_execute(run_id=run.pk, on_progress=delivered_again)

    assert redelivered == [RunStatus.RUNNING]
    assert run.status == RunStatus.DONE
    assert EngineCall.objects.filter(run=run).count() == 2  # each unit asked once
    assert sorted(key for run_id, key, _ in echo.STORED if run_id == run.pk) == [
        "echo:a",
        "echo:b",
    ]
    assert f"Engine run {run.pk} is running in another worker" in caplog.text


def test_a_run_task_delivered_again_after_its_worker_vanished_does_the_rest(echo_protocol, clock):
    now = clock[0]
    run = EngineRun.objects.create(
        kind="echo",
        endpoint=make_endpoint("", name="fake"),
        params={"items": ["a", "b"]},
        status=RunStatus.RUNNING,
        started_at=now - timedelta(hours=2),
        running_since=now - timedelta(hours=2),
        heartbeat=now - timedelta(hours=1),  # silent for longer than the timeout
    )
    tasks.engine_run_task(run.pk)

    run.refresh_from_db()
    assert run.status == RunStatus.DONE
    assert EngineCall.objects.filter(run=run).count() == 2
    # The dead worker's hour until its last beat counts; the silent hour after it does not. The
    # start that did the rest counts too, for as long as this machine took to do it.
    assert 3600 <= engine_run_progress(run=run)["elapsed_seconds"] < 2 * 3600


@pytest.mark.django_db(transaction=True)
def test_a_whole_run_stalled_past_its_heartbeat_stores_no_unit_its_taker_did(stub, monkeypatch):
    # A whole run's executor (a thread of the embedded server, a command in the foreground)
    # stalls with an answer in hand and a call in flight (a laptop asleep, a paused VM) for
    # longer than ENGINE_HEARTBEAT_TIMEOUT_SECONDS: the run is taken over (Run again, or the
    # task delivered again) and its units still pending are asked again. When the first wakes
    # up, it must not store those units a second time nor end the run its taker runs; its
    # calls were paid and stay in the run's cost, each counted once.
    from annotate.engine.services import runs
    from tests.threads import in_thread

    units = 4
    endpoint = make_endpoint(
        stub.base_url, concurrency=1,
        price_prompt_per_1k=Decimal("1"), price_completion_per_1k=Decimal("1"),
    )  # fmt: skip
    run, system, _ = _generation(endpoint, count=units)
    stalled, wake, stored, answer = (threading.Event() for _ in range(4))
    stub.on_request = lambda count: count == 2 and answer.wait(60)  # the first's second call
    store_batch = runs._store_batch

    def store_batch_stalling_the_first(run, protocol, executor, batch, on_progress=None):
        if stalled.is_set() or not any(isinstance(item, UnitResult) for item in batch):
            return store_batch(run, protocol, executor, batch, on_progress)
        stalled.set()  # the first executor's first answer, in its storing thread
        assert wake.wait(60)
        store_batch(run, protocol, executor, batch, on_progress)
        stored.set()

    monkeypatch.setattr(runs, "_store_batch", store_batch_stalling_the_first)
    first = []
    one = in_thread(lambda: engine_run_execute(run_id=run.pk), first)
    assert stalled.wait(60)
    deadline = time.monotonic() + 30
    while len(stub.requests) < 2:  # the first's second call is in flight
        assert time.monotonic() < deadline
        time.sleep(0.01)
    # Its last beat is older than the timeout (set so, rather than waited for).
    EngineRun.objects.filter(pk=run.pk).update(heartbeat=timezone.now() - timedelta(hours=1))
    taker = engine_run_execute(run_id=run.pk)  # takes the run over and does it all
    assert taker.status == RunStatus.DONE, taker.error
    wake.set()
    assert stored.wait(60)  # the stalled batch, then the call in flight, come back
    answer.set()
    one.join(60)

    assert isinstance(first[0], EngineRun), first  # it returned: no duplicate broke its store
    run.refresh_from_db()
    assert run.status == RunStatus.DONE, run.error  # the late executor ended nothing
    assert (run.units_total, run.units_done, run.units_failed) == (units, units, 0)
    assert set(run.units.values_list("status", "attempts")) == {(UnitStatus.DONE, 1)}
    calls = EngineCall.objects.filter(run=run)
    unit_of = dict(calls.values_list("pk", "unit_key"))
    given_by = Response.objects.filter(system=system).values_list("generated_by", flat=True)
    assert sorted(unit_of[pk] for pk in given_by) == sorted(run.units.values_list("key", flat=True))
    assert len(stub.requests) == units + 2 == run.calls == calls.count()
    assert run.cost_usd == sum(call.cost_usd for call in calls) > 0


@pytest.mark.parametrize(
    "error",
    [RuntimeError("the store broke"), KeyboardInterrupt(), EngineRunError("a protocol gave up")],
    ids=["raises", "interrupted", "fails"],
)
def test_a_whole_run_stalled_past_its_heartbeat_ends_nothing_its_taker_holds_when_it_raises(
    stub, monkeypatch, error
):
    # The stalled executor wakes (no beat or store has yet told it so) to a raise, a Ctrl-C or
    # a protocol's error after another executor took the run over: the run stays its taker's,
    # running, not failed or stopped by the executor that lost it.
    run, _, _ = _generation(make_endpoint(stub.base_url))
    taken = []

    def stall_then_raise(run, *args, **kwargs):
        EngineRun.objects.filter(pk=run.pk).update(heartbeat=timezone.now() - timedelta(hours=1))
        taken.append(runs._claim(run.pk))  # the taker's start, as Run again makes it
        raise error

    monkeypatch.setattr(runs, "_execute_keys", stall_then_raise)
    if isinstance(error, EngineRunError):  # a run's own error is its end, not a raise
        engine_run_execute(run_id=run.pk)
    else:
        with pytest.raises(type(error)):
            engine_run_execute(run_id=run.pk)

    run.refresh_from_db()
    assert taken[0] is not None
    assert (run.status, run.error, run.finished_at) == (RunStatus.RUNNING, "", None)
    assert run.running_since == taken[0].running_since
