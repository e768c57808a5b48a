"""A whole run's heartbeat and its silence, judged by the database's clock: the hosts that run,
reap and take over runs may have clocks minutes apart. And an executor or a dispatch that lost
its run (stalled while another start took it) ends nothing."""

from datetime import timedelta

import pytest
from django.db.models import F
from django.db.models.functions import Now
from django.utils import timezone

from annotate.engine.errors import EngineRunError
from annotate.engine.models import EngineCall, EngineChunk, EngineRun, RunStatus
from annotate.engine.services import engine_run_create, engine_run_execute, engine_runs_reap, runs
from tests.annotate.engine.conftest import make_endpoint

pytestmark = pytest.mark.django_db

SKEW = timedelta(hours=2)  # far more than ENGINE_HEARTBEAT_TIMEOUT_SECONDS


@pytest.fixture
def host_clock(monkeypatch):
    """Set this process's clock (timezone.now) off the database's by a timedelta."""
    real_now = timezone.now

    def set_off(by: timedelta) -> None:
        monkeypatch.setattr(timezone, "now", lambda: real_now() + by)

    return set_off


def _running_echo(*, silent_for: timedelta) -> EngineRun:
    """An echo run marked running, its last beat `silent_for` ago by the database's clock."""
    run = engine_run_create(
        kind="echo", endpoint=make_endpoint("", name="fake"), params={"items": ["a", "b"]}
    )
    EngineRun.objects.filter(pk=run.pk).update(
        status=RunStatus.RUNNING,
        started_at=timezone.now(),
        running_since=timezone.now(),
        heartbeat=Now() - silent_for,
    )
    run.refresh_from_db()
    return run


@pytest.mark.parametrize("skew", [SKEW, -SKEW], ids=["ahead", "behind"])
def test_a_run_that_beats_is_neither_reaped_nor_taken_over_whatever_the_hosts_clock(
    echo_protocol, host_clock, skew
):
    run = _running_echo(silent_for=timedelta(0))
    host_clock(skew)

    assert engine_runs_reap(now=timezone.now()) == 0
    again = engine_run_execute(run_id=run.pk)  # its task delivered again on this host

    assert (again.status, again.running_since) == (RunStatus.RUNNING, run.running_since)
    assert not EngineCall.objects.filter(run=run).exists()


@pytest.mark.parametrize("skew", [SKEW, -SKEW], ids=["ahead", "behind"])
def test_a_run_silent_by_the_databases_clock_is_reaped_whatever_the_hosts_clock(
    echo_protocol, host_clock, skew
):
    run = _running_echo(silent_for=timedelta(hours=1))
    host_clock(skew)

    assert engine_runs_reap(now=timezone.now()) == 1

    run.refresh_from_db()
    assert run.status == RunStatus.FAILED and "stopped answering" in run.error


def test_a_run_silent_by_the_databases_clock_is_taken_over_by_a_host_whose_clock_lags(
    echo_protocol, host_clock
):
    run = _running_echo(silent_for=timedelta(hours=1))
    host_clock(-SKEW)

    run = engine_run_execute(run_id=run.pk)  # Run again, on a host two hours behind

    assert (run.status, run.units_done, run.calls) == (RunStatus.DONE, 2, 2)


def test_an_executor_whose_clock_lags_beats_by_the_databases_clock(echo_protocol, host_clock):
    # Its start, its batches and its claim's renewals each stamp the heartbeat: written by its
    # own clock, an hour behind, a reaper elsewhere would find the run silent while it runs.
    run = engine_run_create(
        kind="echo", endpoint=make_endpoint("", name="fake"), params={"items": ["a", "b"]}
    )
    right_now = timezone.now
    host_clock(-timedelta(hours=1))
    reaped = []

    def reaper_elsewhere(_ended) -> None:  # after the start and after each stored batch
        reaped.append(engine_runs_reap(now=right_now(), run_id=run.pk))

    run = engine_run_execute(run_id=run.pk, on_progress=reaper_elsewhere)

    assert run.status == RunStatus.DONE, run.error
    assert len(reaped) >= 2 and not any(reaped)

    run = runs._claim(run.pk)  # started again, by a clock that is right
    claim = runs._RunClaim(run.pk, run.running_since)
    host_clock(-timedelta(hours=1))
    EngineRun.objects.filter(pk=run.pk).update(heartbeat=Now() - timedelta(minutes=1))
    assert claim.renew()
    assert engine_runs_reap(now=right_now(), run_id=run.pk) == 0
    EngineRun.objects.filter(pk=run.pk).update(heartbeat=Now() - timedelta(minutes=1))
    runs._store(run, runs.protocol_for("echo"), [], lease=claim)  # a batch with nothing in it
    assert engine_runs_reap(now=right_now(), run_id=run.pk) == 0


def _pending_echo(items=("a", "b")) -> EngineRun:
    return engine_run_create(
        kind="echo", endpoint=make_endpoint("", name="fake"), params={"items": list(items)}
    )


@pytest.mark.parametrize(
    "error", [EngineRunError("a protocol gave up"), RuntimeError("the database went away")]
)
def test_a_dispatch_that_stalled_while_another_took_the_run_ends_nothing_when_it_fails(
    echo_protocol, monkeypatch, error
):
    # A dispatch stalls (a paused worker) while the task's second delivery dispatches the run
    # and its chunks start; then the first wakes to an error. The run is the second's.
    run = _pending_echo()
    real_protocol_for, taker = runs.protocol_for, []

    def stall_then_fail(kind):
        if taker:  # the second delivery's own dispatch
            return real_protocol_for(kind)
        taker.append(None)
        taker[0] = runs.engine_run_dispatch(run_id=run.pk, chunk_units=1)
        raise error

    monkeypatch.setattr(runs, "protocol_for", stall_then_fail)
    if isinstance(error, EngineRunError):
        assert runs.engine_run_dispatch(run_id=run.pk, chunk_units=1) == []
    else:
        with pytest.raises(RuntimeError):
            runs.engine_run_dispatch(run_id=run.pk, chunk_units=1)

    taken = EngineRun.objects.get(pk=run.pk)
    assert len(taker[0]) == 2
    assert (taken.status, taken.error, taken.finished_at) == (RunStatus.RUNNING, "", None)
    assert EngineChunk.objects.filter(run=run).count() == 2


@pytest.mark.parametrize("where", ["protocol_for", "_prepare_units"])
def test_a_dispatch_that_fails_on_its_own_pending_run_fails_it(echo_protocol, monkeypatch, where):
    run = _pending_echo()

    def fail(*args, **kwargs):
        raise EngineRunError("a protocol gave up")

    monkeypatch.setattr(runs, where, fail)
    assert runs.engine_run_dispatch(run_id=run.pk, chunk_units=1) == []

    run.refresh_from_db()
    assert (run.status, run.error) == (RunStatus.FAILED, "a protocol gave up")
    assert not EngineChunk.objects.filter(run=run).exists()  # its transaction rolled back


def test_an_executor_that_stalled_before_ending_its_run_ends_nothing_its_taker_holds(
    echo_protocol, monkeypatch
):
    # Its last answer stored, the executor stalls past the timeout before it ends the run; the
    # run is started again meanwhile. Its end (here: stopped) is not written over the taker's.
    run = _pending_echo()
    real_outcome, taken = runs._outcome, []

    def stall_then_stop(run, executor):
        EngineRun.objects.filter(pk=run.pk).update(heartbeat=Now() - timedelta(hours=1))
        taken.append(runs._claim(run.pk))
        real_outcome(run, executor)
        return "", runs.STOPPED

    monkeypatch.setattr(runs, "_outcome", stall_then_stop)
    engine_run_execute(run_id=run.pk)

    run.refresh_from_db()
    assert (run.status, run.error, run.finished_at) == (RunStatus.RUNNING, "", None)
    assert run.running_since == taken[0].running_since


def _started_by_a_host_then_silent(host_clock, skew: timedelta) -> EngineRun:
    """An echo run started by a host whose clock is `skew` off the database's, that ran 90 s
    by the database's clock and has been silent for an hour since its last beat."""
    run = _pending_echo()
    host_clock(skew)
    runs._claim(run.pk)
    # What the start stamped, moved back: its start 1 h 90 s ago, its last beat 1 h ago.
    EngineRun.objects.filter(pk=run.pk).update(
        running_since=F("running_since") - timedelta(hours=1, seconds=90),
        heartbeat=F("heartbeat") - timedelta(hours=1),
    )
    return run


@pytest.mark.parametrize("skew", [SKEW, -SKEW], ids=["ahead", "behind"])
def test_a_reaped_run_ran_till_its_last_beat_whatever_the_starting_hosts_clock(
    echo_protocol, host_clock, skew
):
    run = _started_by_a_host_then_silent(host_clock, skew)
    host_clock(timedelta(0))

    assert engine_runs_reap(now=timezone.now(), run_id=run.pk) == 1

    run.refresh_from_db()
    assert (run.status, run.running_seconds, run.running_since) == (RunStatus.FAILED, 90.0, None)


@pytest.mark.parametrize("skew", [SKEW, -SKEW], ids=["ahead", "behind"])
def test_a_run_taken_over_keeps_the_time_it_ran_whatever_the_hosts_clocks(
    echo_protocol, host_clock, skew
):
    run = _started_by_a_host_then_silent(host_clock, skew)
    host_clock(-skew)  # taken over by a host whose clock is off the other way

    taken = runs._claim(run.pk)

    assert (taken.status, taken.running_seconds) == (RunStatus.RUNNING, 90.0)
    assert taken.running_since == EngineRun.objects.get(pk=run.pk).running_since


@pytest.mark.parametrize("skew", [SKEW, -SKEW], ids=["ahead", "behind"])
def test_a_run_ended_on_another_host_ran_for_what_the_databases_clock_says(
    echo_protocol, host_clock, skew
):
    # Started by a dispatch on one host, ended by its last chunk on another (a second's work
    # for the ends' calls, not the two hours between the hosts' clocks).
    run = _pending_echo()
    host_clock(skew)
    runs._claim(run.pk)
    EngineRun.objects.filter(pk=run.pk).update(
        running_since=F("running_since") - timedelta(seconds=90)
    )
    host_clock(timedelta(0))

    run = runs._finish(run.pk)

    assert run.running_seconds == pytest.approx(90, abs=60)
    assert EngineRun.objects.get(pk=run.pk).running_seconds == run.running_seconds
