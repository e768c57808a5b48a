"""Runs: create one, estimate it, start it in the background, execute it, stop it, reap it.

With a broker a run is split into chunks (`EngineChunk`), one Celery task each, so several
workers share it; each chunk runs the same executor on its own keys and the last chunk to end
finishes the run (`engine_run_dispatch`, `engine_run_chunk_execute`).

Execution: worker threads (the endpoint's concurrency) only talk to the API; the thread that
called `engine_run_execute` stores their results in one transaction per batch (calls, the
protocol's own rows, unit statuses, run counters) once a burst of replies is in, at most
BATCH_SECONDS after the first, beats the heartbeat and watches for a stop asked from a page. A
crash loses at most the last batch window of answers; a rerun does only the units not stored as
done.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import wait as futures_wait
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import connection, connections, transaction
from django.db.models import BooleanField, Count, ExpressionWrapper, F, Q
from django.db.models.functions import Now
from django.utils import timezone

from annotate.engine.bulk import rows_insert
from annotate.engine.client import DEFAULT_COMPLETION_ESTIMATE, RequestBody
from annotate.engine.errors import (
    EndpointError,
    EngineChunkLeasedError,
    EngineCostNotConfirmedError,
    EngineNotFoundError,
    EngineNothingToDoError,
    EnginePermissionError,
    EngineRunDoneError,
    EngineRunEndedError,
    EngineRunError,
)
from annotate.engine.models import (
    CallStatus,
    ChunkStatus,
    Endpoint,
    EngineCall,
    EngineChunk,
    EngineRun,
    EngineUnit,
    RunStatus,
    UnitStatus,
)
from annotate.engine.protocols import (
    RunContext,
    RunProtocol,
    UnitEstimate,
    UnitFailed,
    UnitResult,
    UnitStopped,
    protocol_for,
)
from annotate.engine.services.calls import call_cost, call_send, retry_policy, run_totals
from annotate.engine.services.endpoints import endpoint_api_key, endpoint_transport
from annotate.roles import is_admin, is_researcher
from annotate.services.leases import lease_retry_in, lease_silent, lease_take
from annotate.throttling import RUN_STARTS_SCOPE, user_rate_limited
from config.celery import app as celery_app

logger = logging.getLogger(__name__)

BATCH_SECONDS = 0.25
MAX_BATCH = 500
_ACTIVE = (RunStatus.PENDING, RunStatus.RUNNING)
# True while `engine_run_estimate_new` makes a run only to estimate it (rolled back): what only
# a run that will call needs (the endpoint's API key, work left to do) is not asked of it.
_ESTIMATING: ContextVar[bool] = ContextVar("engine_run_estimating", default=False)
# The total an admin confirmed for the runs started inside `engine_run_cost_confirmed`.
_CONFIRMED_COST: ContextVar[Decimal | None] = ContextVar("engine_run_confirmed", default=None)


# --- Creating and estimating ------------------------------------------------------------------


def engine_run_check_may_start(*, user: AbstractBaseUser | None, endpoint: Endpoint) -> None:
    """Researchers may use the offline fake (it bills nobody); only admins spend money. None =
    the console."""
    _check_may_use(user, endpoint, action="start")


def engine_run_check_may_stop(*, user: AbstractBaseUser | None, endpoint: Endpoint) -> None:
    """Who may start a run on the endpoint may stop one: on a paid one, only admins."""
    _check_may_use(user, endpoint, action="stop")


def engine_run_may_control(*, user: AbstractBaseUser | None, endpoint: Endpoint) -> bool:
    """Whether the user may start and stop runs on the endpoint (the run page's buttons)."""
    try:
        _check_may_use(user, endpoint, action="start")
    except (EngineNotFoundError, EnginePermissionError):
        return False
    return True


def _check_may_use(user: AbstractBaseUser | None, endpoint: Endpoint, *, action: str) -> None:
    if user is None:
        return
    if not is_researcher(user):
        raise EngineNotFoundError("No such page.")
    if endpoint.spends_money and not is_admin(user):
        raise EnginePermissionError(
            f"Endpoint {endpoint.name!r} calls a paid API: only an admin may {action} a run on it."
        )


def engine_run_create(
    *,
    kind: str,
    endpoint: Endpoint,
    params: dict[str, Any],
    created_by: AbstractBaseUser | None = None,
    spending_cap_usd: Decimal | None = None,
    description: str = "",
) -> EngineRun:
    """Create a pending run of `kind` (a key of ENGINE_PROTOCOLS); nothing is called yet.

    Every run is made here (generation, the judges, the verbalizer, from a page, the API or a
    command), so this is where a run the endpoint could not call is refused: its API key
    variable unset in this process (`engine_run_check_key`). A run made only to be estimated
    is not refused for it: nothing is sent.
    """
    protocol_for(kind)  # fails early on an unknown kind
    if spending_cap_usd is not None and spending_cap_usd < 0:
        raise EngineRunError(
            "Field 'spending_cap_usd': a cap cannot be negative.", field="spending_cap_usd"
        )
    if not _ESTIMATING.get():
        engine_run_check_key(endpoint=endpoint)
    return EngineRun.objects.create(
        kind=kind,
        endpoint=endpoint,
        params=params,
        description=description[:300],
        spending_cap_usd=spending_cap_usd,
        created_by=created_by if created_by is not None and created_by.is_authenticated else None,
    )


def engine_run_check_key(*, endpoint: Endpoint) -> None:
    """Refuse (EngineRunError, field "endpoint") a run on an endpoint whose API key this process
    cannot read: its variable not allowed or not set. The offline fake needs none. Checked before
    a run is made or started again, so a run that could only fail is never recorded."""
    try:
        endpoint_api_key(endpoint=endpoint)
    except EndpointError as error:
        raise EngineRunError(f"{error} Nothing was started.", field="endpoint") from None


def engine_run_check_work(*, run: EngineRun, nothing_to_do: Callable[[int], str]) -> None:
    """Refuse a new run whose every unit is done already (EngineNothingToDoError, with the
    message `nothing_to_do(units)` makes), so that a rerun calling nothing records no run; call
    it inside the transaction that made the run, which the refusal then rolls back. A run made
    only to be estimated is not refused: its estimate says how many units are done already."""
    if _ESTIMATING.get():
        return
    keys, missing = _missing_keys(run, protocol_for(run.kind))
    if not missing:
        raise EngineNothingToDoError(nothing_to_do(len(keys)))


def engine_run_get(*, run_id: int) -> EngineRun:
    try:
        return EngineRun.objects.select_related("endpoint").get(pk=run_id)
    except EngineRun.DoesNotExist:
        raise EngineNotFoundError(f"No run {run_id}.") from None


@dataclass(frozen=True)
class RunEstimate:
    """The most a run will still spend: units left, calls, tokens, dollars (estimated)."""

    units: int
    units_done_before: int
    calls: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: Decimal


def _completion_estimate(endpoint: Endpoint) -> int:
    return endpoint.max_tokens or DEFAULT_COMPLETION_ESTIMATE


def engine_run_estimate(*, run: EngineRun) -> RunEstimate:
    """Estimate what the run's missing units will cost, without sending anything.

    Prompt tokens are counted at four characters a token; each reply is assumed as long as the
    endpoint's max_tokens (else DEFAULT_COMPLETION_ESTIMATE): an upper bound for most runs.
    """
    protocol = protocol_for(run.kind)
    keys, missing = _missing_keys(run, protocol)
    work = _load(protocol, run, missing)
    calls = prompt = completion = 0
    for key in missing:
        unit = (
            protocol.estimate(run, key, work.get(key))
            if hasattr(protocol, "estimate")
            else UnitEstimate(calls=1, prompt_tokens=0)
        )
        calls += unit.calls
        prompt += unit.prompt_tokens
        each = (
            unit.completion_tokens
            if unit.completion_tokens is not None
            else _completion_estimate(run.endpoint)
        )
        completion += each * unit.calls
    return RunEstimate(
        units=len(missing),
        units_done_before=len(keys) - len(missing),
        calls=calls,
        prompt_tokens=prompt,
        completion_tokens=completion,
        cost_usd=call_cost(
            endpoint=run.endpoint, prompt_tokens=prompt, completion_tokens=completion
        ),
    )


def engine_run_estimate_new(*, create: Callable[[], EngineRun]) -> RunEstimate:
    """Estimate a run not made yet, leaving nothing behind.

    `create()` makes the run as starting it would (its checks, its protocol's rows) inside a
    transaction that is rolled back once the run is estimated, so the pages, the API and the
    commands estimate exactly what they would start.
    """
    estimating = _ESTIMATING.set(True)
    try:
        with transaction.atomic():
            estimate = engine_run_estimate(run=create())
            transaction.set_rollback(True)
    finally:
        _ESTIMATING.reset(estimating)
    return estimate


def _missing_keys(run: EngineRun, protocol: RunProtocol) -> tuple[list[str], list[str]]:
    """The run's unit keys, and those not done here or elsewhere (`_done_keys`)."""
    keys = protocol.units(run)
    done = _done_keys(run, protocol, keys)
    return keys, [key for key in keys if key not in done]


def _done_keys(run: EngineRun, protocol: RunProtocol, keys: Sequence[str]) -> set[str]:
    done = set(
        EngineUnit.objects.filter(
            run=run, status__in=(UnitStatus.DONE, UnitStatus.SKIPPED)
        ).values_list("key", flat=True)
    )
    rest = [key for key in keys if key not in done]
    if rest and hasattr(protocol, "done_units"):
        done |= set(protocol.done_units(run, rest))
    return done


def _load(protocol: RunProtocol, run: EngineRun, keys: Sequence[str]) -> dict[str, Any]:
    if not keys or not hasattr(protocol, "load"):
        return {}
    return protocol.load(run, list(keys))


# --- Starting, stopping, reaping --------------------------------------------------------------

_threads: list[threading.Thread] = []


def _broker_configured() -> bool:
    return bool(settings.CELERY_BROKER_URL) and not celery_app.conf.task_always_eager


def cap_text(cap: Decimal | None) -> str:
    """A spending cap as people read it: "$0.7", "$12", "no cap"."""
    return "no cap" if cap is None else f"${cap.normalize():f}"


@transaction.atomic
def engine_run_cap_set(
    *, run: EngineRun, cap: Decimal | None, user: AbstractBaseUser | None = None
) -> None:
    """Set the spending cap a run goes on with (None: no cap), before running it again.

    A run stopped by its cap stops again at once unless the cap is raised. Who may start the
    run may change it (a paid endpoint's: only an admin); not while it runs, and not below what
    the run has spent already.
    """
    engine_run_check_may_start(user=user, endpoint=run.endpoint)
    locked = _run_locked(run.pk)
    if locked.status == RunStatus.RUNNING and not locked.silent:
        raise EngineRunError(f"Run {run.pk} is running: stop it before changing its cap.")
    if cap is not None and cap < 0:
        raise EngineRunError(
            "Field 'spending_cap_usd': a cap cannot be negative.", field="spending_cap_usd"
        )
    spent = locked.cost_usd + locked.possibly_billed_usd
    if cap is not None and cap < spent:
        billed = locked.possibly_billed_usd
        of_which = (
            f" ({cap_text(billed)} of it possibly billed by failed attempts)" if billed else ""
        )
        raise EngineRunError(
            f"The run has spent {cap_text(spent)} already{of_which}; "
            f"a cap of {cap_text(cap)} is below it.",
            field="spending_cap_usd",
        )
    EngineRun.objects.filter(pk=run.pk).update(spending_cap_usd=cap)
    run.spending_cap_usd = cap


@transaction.atomic
def engine_run_reopen(*, run: EngineRun, user: AbstractBaseUser | None = None) -> None:
    """Make a new, stopped or failed run pending again, its stop request cleared.

    `engine_run_start` starts it so; the commands' `--run` then execute it in the foreground.
    A done run is refused (EngineRunDoneError) unless its work grew since it ended (an edited
    endpoint's new keys): starting it would do nothing, yet show it pending for a moment.
    Refused while a worker runs it, or while a start asked already waits for one (two starts
    at once: a double click, the page and the API): two executors would each spend up to the
    whole rest of its cap, and ask its units twice. The check and the change are made under a
    lock of the run's row, so of two starts at the same instant only the first goes on. For
    the same reason the chunks of an earlier start go: their tasks may still wait in the
    Celery queue (a run stopped or reaped before a worker took them), and would otherwise do
    their units beside this start once it runs.
    """
    engine_run_check_may_start(user=user, endpoint=run.endpoint)
    # The chunks' rows before the run's, in the order a chunk's store locks them (_chunk_end).
    list(EngineChunk.objects.select_for_update().filter(run=run).values_list("pk", flat=True))
    locked = _run_locked(run.pk)
    if locked.status in _ACTIVE and not locked.silent:
        raise EngineRunError(_already_started(locked))
    if not engine_run_has_work_left(run=locked):
        raise EngineRunDoneError(run.pk)
    engine_run_check_key(endpoint=run.endpoint)  # a run that could only fail stays as it was
    EngineChunk.objects.filter(run=run).delete()  # a queued task of one finds nothing to do
    # The heartbeat of a pending run says when its start was asked (refused above till stale).
    now = locked.database_now
    EngineRun.objects.filter(pk=run.pk).update(
        status=RunStatus.PENDING, stop_requested=False, error="", finished_at=None, heartbeat=now,
        **_running_ended(locked, _last_sign_of_life(locked)),
    )  # fmt: skip
    run.status, run.stop_requested, run.error, run.heartbeat = RunStatus.PENDING, False, "", now


def engine_run_has_work_left(*, run: EngineRun) -> bool:
    """Whether starting the run again would do anything (else `engine_run_reopen` refuses it).

    A run that is not done may always go on (its failed units are tried again); a done run only
    when a unit its protocol gives is not done here or elsewhere (as `engine_run_estimate`
    counts them). A run whose kind is unknown says yes, so its start fails as it always did.
    Reads the run's units: for one run's page, not per row of a list.
    """
    if run.status != RunStatus.DONE:
        return True
    protocol = _protocol_or_none(run.kind)
    return protocol is None or bool(_missing_keys(run, protocol)[1])


@dataclass(frozen=True)
class AgainWarning:
    """What running a run again would overwrite that another run wrote: the sentence a page
    shows ("" when nothing) and `seen`, what its form sends back with "replace" (replace_seen),
    so a Run again whose labels changed since the page was shown is asked again."""

    text: str = ""
    seen: str = ""


def engine_run_again_warning(*, run: EngineRun) -> AgainWarning:
    """What running `run` again would overwrite that another run wrote, as its protocol says
    it (optional hook `again_warning`: a judge run after a later run of its judge labelled its
    responses); an empty AgainWarning when nothing, or when its kind has no such hook."""
    protocol = _protocol_or_none(run.kind)
    if protocol is None or not hasattr(protocol, "again_warning"):
        return AgainWarning()
    return protocol.again_warning(run)


def engine_run_check_again(*, run: EngineRun, replace: bool, seen: str | None = None) -> None:
    """Refuse (an AnnotateError naming the field "replace") to run `run` again over what
    `engine_run_again_warning` names unless `replace` confirms it (optional hook
    `check_again`); with `seen` (the warning's `seen` the page showed, "" when it showed none),
    only if that is still what it replaces. Every Run again (the run pages, the API) calls it
    in the transaction that starts the run, which the refusal rolls back."""
    protocol = _protocol_or_none(run.kind)
    if protocol is not None and hasattr(protocol, "check_again"):
        protocol.check_again(run, replace=replace, seen=seen)


def _already_started(run: EngineRun) -> str:
    doing = "running already" if run.status == RunStatus.RUNNING else "starting already"
    return (
        f"Run {run.pk} is {doing}: stop it (its page) or wait for it to end. If the process "
        f"running it was killed, it can go on once it has been silent for "
        f"{settings.ENGINE_HEARTBEAT_TIMEOUT_SECONDS} s."
    )


def _last_sign_of_life(run: EngineRun) -> datetime | None:
    """When a run whose worker vanished last ran: its last beat (None if it never beat)."""
    return run.heartbeat if run.status == RunStatus.RUNNING else None


def _end_running(run: EngineRun, end: datetime | None) -> None:
    """Store the end of the run's running interval at `end` (`_running_ended`), on its row and
    on `run`."""
    ended = _running_ended(run, end)
    EngineRun.objects.filter(pk=run.pk).update(**ended)
    for name, value in ended.items():
        setattr(run, name, value)


def _running_ended(run: EngineRun, end: datetime | None) -> dict[str, Any]:
    """The fields that end the run's current running interval at `end`: its seconds added to
    `running_seconds` (none without an interval or an end), `running_since` cleared.

    Both ends are the database's clock (a start stamps `running_since` as it stamps its first
    beat; an end is a last beat or the database's now): the hosts that start, reap, take over
    and end a run may have clocks minutes apart, which an interval across two of them counted."""
    seconds = run.running_seconds
    if run.running_since is not None and end is not None:
        seconds += max(0.0, (end - run.running_since).total_seconds())
    return {"running_seconds": seconds, "running_since": None}


def engine_run_start(*, run: EngineRun, user: AbstractBaseUser | None = None) -> None:
    """Start (or resume) the run once this transaction commits, and return at once.

    With a broker, a Celery worker runs it; otherwise a background thread of this process
    (never the web request itself). Only missing units are done.

    Every page and API that starts or resumes a run comes here with its user, whose starts
    count against RUN_START_RATE (admins' too): over it RateLimitedError (429), and the
    caller's transaction, which made the run, keeps nothing. Only a start accepted counts (a
    done run, a paid endpoint refused, cost nothing). The console (user None) is not limited.
    """
    with _run_starts_limited(user):
        engine_run_reopen(run=run, user=user)
        _check_cost_confirmed(run)
    if _broker_configured():
        from annotate.engine import tasks  # tasks import this module
        from annotate.services.deferred_tasks import task_enqueue_on_commit

        chunk_units = settings.ENGINE_CELERY_CHUNK_UNITS
        task_enqueue_on_commit(task=tasks.engine_run_task, args=(run.pk, chunk_units))
        return
    transaction.on_commit(lambda: _start_thread(run.pk))


@contextlib.contextmanager
def engine_run_cost_confirmed(*, total: Decimal | None) -> Iterator[None]:
    """Let the runs started in the block (`engine_run_start`) start only at the cost `total`
    that the admin confirmed (None: nothing was confirmed, nothing is checked).

    The pages check the confirmed total against an estimate before they start; this makes the
    start check it again inside its own transaction, with the endpoint's row locked, so that a
    price edited in between cannot start a run at a cost nobody confirmed."""
    confirmed = _CONFIRMED_COST.set(total)
    try:
        yield
    finally:
        _CONFIRMED_COST.reset(confirmed)


def _check_cost_confirmed(run: EngineRun) -> None:
    """Refuse the start (EngineCostNotConfirmedError, with the new total) when the confirmed
    total is no longer the run's estimate. The endpoint's row stays locked till the start
    commits: an edit of its prices waits for it, so the start goes at the price checked here."""
    confirmed = _CONFIRMED_COST.get()
    if confirmed is None or _ESTIMATING.get():
        return
    run.endpoint = Endpoint.objects.select_for_update().get(pk=run.endpoint_id)
    now = engine_run_estimate(run=run).cost_usd
    if now != confirmed:
        raise EngineCostNotConfirmedError(
            f"The prices of endpoint {run.endpoint.name!r} changed: this run would now cost at "
            f"most ${now} (you confirmed ${confirmed}). Nothing was started; confirm the new "
            "total to start it.",
            total=now,
        )


def _run_starts_limited(user: AbstractBaseUser | None):
    if user is None:
        return contextlib.nullcontext()
    return user_rate_limited(
        user=user, scope=RUN_STARTS_SCOPE, what="run starts", outcome="Nothing was started."
    )


def _start_thread(run_id: int) -> None:
    thread = threading.Thread(
        target=_execute_in_thread, args=(run_id,), name=f"engine-run-{run_id}", daemon=True
    )
    _threads[:] = [t for t in _threads if t.is_alive()] + [thread]
    thread.start()


def _execute_in_thread(run_id: int) -> None:
    try:
        engine_run_execute(run_id=run_id)
    except Exception:  # recorded on the run by engine_run_execute; a thread has nobody to tell
        logger.exception("Engine run %s failed", run_id)
    finally:
        connection.close()


def engine_background_wait(timeout: float = 60.0) -> None:
    """Wait for this process's background runs to end (tests and management commands)."""
    deadline = time.monotonic() + timeout
    for thread in list(_threads):
        thread.join(max(0.0, deadline - time.monotonic()))


def engine_run_stop(*, run: EngineRun) -> None:
    """Ask the run to stop after the calls in flight; a pending run is stopped at once.

    A run that has ended (done, failed, stopped) is refused with EngineRunEndedError and left
    as it was: there is nothing to stop, and its page's state should say so, not a 200."""
    if not EngineRun.objects.filter(pk=run.pk, status__in=_ACTIVE).update(stop_requested=True):
        ended = EngineRun.objects.get(pk=run.pk)
        raise EngineRunEndedError(run.pk, ended.get_status_display().lower())
    with transaction.atomic():
        if EngineRun.objects.filter(pk=run.pk, status=RunStatus.PENDING).update(
            status=RunStatus.CANCELLED,
            finished_at=timezone.now(),
            error="Stopped before it started.",
            heartbeat=None,
        ):
            _tell_finished(EngineRun.objects.select_related("endpoint").get(pk=run.pk))


def _run_silent() -> Q:
    """Runs whose executor gave no sign of life for ENGINE_HEARTBEAT_TIMEOUT_SECONDS, by the
    database's clock, which every start and beat writes (not a host's: two hosts whose clocks
    differ by minutes would take over a run that beats, or never reap a dead one); or that never
    beat: every start stamps one, so a row without one (written by hand, or by an older version)
    has no worker behind it. The reaper's and a start's one test of a run's silence."""
    silent = lease_silent(
        stale_seconds=settings.ENGINE_HEARTBEAT_TIMEOUT_SECONDS, heartbeat_field="heartbeat"
    )
    return Q(heartbeat__isnull=True) | silent


def _run_locked(run_id: int, *related: str) -> EngineRun:
    """The run's row, locked till the transaction ends, with `silent` (`_run_silent`) and
    `database_now` (the database's clock, which a start stamps its first beat by) read with it."""
    silent = ExpressionWrapper(_run_silent(), output_field=BooleanField())
    runs = EngineRun.objects.select_for_update().select_related(*related)
    return runs.annotate(silent=silent, database_now=Now()).get(pk=run_id)


def engine_runs_reap(
    *, now: datetime | None = None, run_id: int | None = None, run_ids=None
) -> int:
    """Mark failed the running runs (or the one run, or those among `run_ids`: ids or a
    queryset of them) whose worker stopped beating, and tell each run's protocol (`on_finish`),
    as any other end of a run does; return how many. Runs still beating cost one query.

    Silent by the database's clock (`_run_silent`), not this process's; `now` is only the
    failure's time."""
    stale = EngineRun.objects.filter(_run_silent(), status=RunStatus.RUNNING)
    if run_id is not None:
        stale = stale.filter(pk=run_id)
    if run_ids is not None:
        stale = stale.filter(pk__in=run_ids)
    error = (
        "The worker running this run stopped answering (no heartbeat for "
        f"{settings.ENGINE_HEARTBEAT_TIMEOUT_SECONDS} s). Start it again to do what is left."
    )
    reaped = 0
    for pk in list(stale.values_list("pk", flat=True)):
        with transaction.atomic():
            # Again under the condition: a beat or another reaper may have come in between.
            if not stale.filter(pk=pk).update(
                status=RunStatus.FAILED, finished_at=now or timezone.now(), error=error
            ):
                continue
            reaped += 1
            run = EngineRun.objects.select_related("endpoint").get(pk=pk)
            _end_running(run, run.heartbeat)  # the silence after its last beat is no running time
            _tell_finished(run)
    return reaped


# --- Executing --------------------------------------------------------------------------------


class _Budget:
    """Spending so far plus calls in flight, against the run's cap (thread-safe).

    A call whose worst cost does not fit beside the calls in flight waits for them to end (they
    mostly cost far less than their worst): the cap is reached only when the call does not fit
    with nothing in flight. Reservations keep the worst case, so spending never passes the cap.
    `spent` counts what failed attempts may have been billed (`charge`) as well as the calls.
    """

    def __init__(self, *, spent: Decimal, cap: Decimal | None) -> None:
        self.spent, self.cap, self.reserved = spent, cap, Decimal(0)
        self.settled = threading.Condition()
        self.exceeded = False

    def reserve(self, amount: Decimal, should_stop: Callable[[], bool] = lambda: False) -> bool:
        with self.settled:
            while self.cap is not None and self.spent + self.reserved + amount > self.cap:
                if self.reserved == 0:
                    self.exceeded = True
                    return False
                if should_stop():
                    return False
                self.settled.wait(timeout=CAP_WAIT_SECONDS)
            self.reserved += amount
            return True

    def settle(self, *, reserved: Decimal, actual: Decimal) -> None:
        with self.settled:
            self.reserved -= reserved
            self.spent += actual
            self.settled.notify_all()

    def charge(self, amount: Decimal) -> bool:
        """Count a failed attempt that may have been billed, its call still holding its
        reservation; return whether that reservation (its retry) still fits under the cap."""
        with self.settled:
            self.spent += amount
            return self.cap is None or self.spent + self.reserved <= self.cap


# How often a call waiting for room under the cap looks again (the shared cap polls its row).
CAP_WAIT_SECONDS = 0.05


class _SharedBudget:
    """The cap across the chunks of a run, held on the run's row (several worker processes).

    Before each call its worst cost is added to `cost_reserved_usd` by one conditional UPDATE
    (cost_usd + cost_reserved_usd + worst <= cap), atomic on every database. After the call the
    reservation becomes the actual cost, which leaves `cost_reserved_usd` in the transaction
    that adds it to `cost_usd` (`_store`), so spent + in flight is never counted short. A call
    that does not fit waits while other calls are in flight, as in _Budget.
    """

    def __init__(self, *, run_id: int, cap: Decimal | None) -> None:
        self.run_id, self.cap = run_id, cap
        self.exceeded = False

    def reserve(self, amount: Decimal, should_stop: Callable[[], bool] = lambda: False) -> bool:
        if self.cap is None:
            return True
        try:
            while True:
                reserved = (
                    EngineRun.objects.filter(pk=self.run_id)
                    .filter(
                        cost_usd__lte=self.cap
                        - amount
                        - F("cost_reserved_usd")
                        - F("possibly_billed_usd")
                    )
                    .update(cost_reserved_usd=F("cost_reserved_usd") + amount)
                )
                if reserved:
                    return True
                in_flight = (
                    EngineRun.objects.filter(pk=self.run_id)
                    .values_list("cost_reserved_usd", flat=True)
                    .first()
                )
                if not in_flight:
                    self.exceeded = True
                    return False
                if should_stop():
                    return False
                time.sleep(CAP_WAIT_SECONDS)
        finally:
            connection.close()  # a worker thread's own connection

    def settle(self, *, reserved: Decimal, actual: Decimal) -> None:
        if self.cap is None or reserved == actual:
            return
        try:
            EngineRun.objects.filter(pk=self.run_id).update(
                cost_reserved_usd=F("cost_reserved_usd") - reserved + actual
            )
        finally:
            connection.close()

    def charge(self, amount: Decimal) -> bool:
        """Count a failed attempt that may have been billed at once, as more reserved (it
        leaves `cost_reserved_usd` for `possibly_billed_usd` in the batch that stores its call);
        return whether the call's own reservation (its retry) still fits under the cap. Only
        with a cap, and only for such an attempt: one UPDATE, not one per call."""
        if self.cap is None:
            return True
        try:
            EngineRun.objects.filter(pk=self.run_id).update(
                cost_reserved_usd=F("cost_reserved_usd") + amount
            )
            row = EngineRun.objects.filter(pk=self.run_id).values_list(
                "cost_usd", "possibly_billed_usd", "cost_reserved_usd"
            )
            spent, billed, reserved = row.first() or (Decimal(0), Decimal(0), Decimal(0))
            return spent + billed + reserved <= self.cap
        finally:
            connection.close()


class _CapReached(Exception):  # noqa: N818 - control flow
    pass


class _LeaseLost(Exception):  # noqa: N818 - control flow
    pass


class _ChunkLease:
    """This delivery's lease on a chunk (`EngineChunk.lease`): held while renewed.

    Another delivery takes the chunk over once its heartbeat is ENGINE_CHUNK_LEASE_SECONDS old,
    so a lease not renewed for that long (as this process's clock counts, from before the
    renewing write) is taken as lost: no new call is sent on it. A renewal that finds another
    token on the row (taken over) loses it too. The heartbeat is the database's clock, which
    every delivery's take reads it by: the workers' own clocks may disagree by more than the
    lease, and would make a fresh lease look stale to a worker whose clock runs ahead.
    """

    def __init__(
        self, chunk_id: int, token: str, renewed: float, clock: Callable[[], float]
    ) -> None:
        self.chunk_id, self.token, self.renewed, self.clock = chunk_id, token, renewed, clock
        self.lost = False

    @staticmethod
    def every() -> float:
        return min(settings.ENGINE_HEARTBEAT_SECONDS, settings.ENGINE_CHUNK_LEASE_SECONDS / 4)

    def renew(self) -> bool:
        started = self.clock()
        if EngineChunk.objects.filter(pk=self.chunk_id, lease=self.token).update(heartbeat=Now()):
            self.renewed = started
        else:
            self.lost = True
        return self.held()

    def held(self) -> bool:
        if self.clock() - self.renewed >= settings.ENGINE_CHUNK_LEASE_SECONDS:
            self.lost = True
        return not self.lost

    def release(self) -> None:
        """Give the lease up (if still ours), so the next delivery takes the chunk at once."""
        EngineChunk.objects.filter(pk=self.chunk_id, lease=self.token).update(heartbeat=None)

    def fence(self) -> bool:
        """Whether this delivery still holds the chunk, asked first in the transaction that
        stores its answers: the chunk's row stays locked till it commits, so no other delivery
        takes the chunk over (and reads its units still pending) in between. A delivery stalled
        past its lease (a lock, a long GC, a paused VM) finds another token and loses it."""
        if EngineChunk.objects.filter(pk=self.chunk_id, lease=self.token).update(lease=self.token):
            return True
        self.lost = True
        return False


class _RunClaim:
    """This executor's claim on a whole run (`_claim`): held while the run is running under
    the start this claim made, its `running_since`.

    A run silent for ENGINE_HEARTBEAT_TIMEOUT_SECONDS is reaped or taken over by another
    executor (Run again, the task delivered again), which asks its units still pending. An
    executor that was only stalled (a laptop asleep, a paused VM) finds on waking that the row
    is no longer its start's: as a chunk's delivery that lost its lease, it stores only its
    calls (paid), sends no new one, beats nothing and leaves the run to its new holder.
    """

    def __init__(self, run_id: int, since: datetime | None) -> None:
        self.run_id, self.since = run_id, since
        self.lost = False

    @staticmethod
    def every() -> float:
        return settings.ENGINE_HEARTBEAT_SECONDS

    def _mine(self):
        return EngineRun.objects.filter(
            pk=self.run_id, status=RunStatus.RUNNING, running_since=self.since
        )

    def renew(self) -> bool:
        """Beat (the database's clock, which `_run_silent` ages it by) while the run is ours."""
        if not self._mine().update(heartbeat=Now()):
            self.lost = True
        return not self.lost

    def held(self) -> bool:
        return not self.lost

    def fence(self) -> bool:
        """Whether the run is still this executor's, asked first in the transaction that stores
        its answers: the run's row stays locked till it commits, so no other executor claims it
        (and reads its units still pending) in between."""
        if self._mine().update(status=F("status")):
            return True
        self.lost = True
        return False


class _DispatchClaim(_RunClaim):
    """A dispatch's claim on the run (`engine_run_dispatch`): held while the run is as this
    dispatch left it, pending as the start it was sent for asked it (`asked`: the pending
    run's heartbeat, which the start stamps) or, once it marked the run running, running under
    that start (`since`). Its transaction may have rolled back either way: a raise inside it
    leaves the run pending as it was. A dispatch that stalled meanwhile finds neither (another
    start took the run) and ends nothing."""

    def __init__(self, asked: EngineRun) -> None:
        super().__init__(asked.pk, since=None)  # set once it marks the run running
        self.asked = asked.heartbeat if asked.status == RunStatus.PENDING else _NOT_PENDING

    def _mine(self):
        mine = Q(pk__in=[])  # found not pending: the dispatch of a start that is not this one's
        if self.asked is not _NOT_PENDING:
            mine = Q(status=RunStatus.PENDING, heartbeat=self.asked)
        if self.since is not None:
            mine |= Q(status=RunStatus.RUNNING, running_since=self.since)
        return EngineRun.objects.filter(mine, pk=self.run_id)


_NOT_PENDING = object()


class _Executor:
    def __init__(
        self,
        run: EngineRun,
        protocol: RunProtocol,
        stop: threading.Event,
        sleep,
        budget: _Budget | _SharedBudget | None = None,
        lease: _ChunkLease | _RunClaim | None = None,
    ):
        self.run, self.protocol, self.stop, self.lease = run, protocol, stop, lease
        self.endpoint = run.endpoint
        self.transport = endpoint_transport(endpoint=self.endpoint)
        self.policy = retry_policy(endpoint=self.endpoint, sleep=sleep)
        self.budget = budget or _Budget(
            spent=run.cost_usd + run.possibly_billed_usd, cap=run.spending_cap_usd
        )
        self.results: queue.Queue[UnitResult | EngineCall] = queue.Queue()
        self.fatal: list[str] = []
        self.completion_estimate = _completion_estimate(self.endpoint)
        # Set once `first_calls` calls have been sent (see _run_pool).
        self.first_calls, self.calls_started = 0, 0
        self.first_calls_sent = threading.Event()
        self._count_lock = threading.Lock()
        self.failed_in_a_row = 0  # calls that ended in an error after their retries, none OK since

    def send(self, *, messages, unit_key, purpose, params) -> EngineCall:
        from annotate.engine.client import estimate_prompt_tokens

        completion = (params or {}).get("max_tokens") or self.completion_estimate
        reserved = call_cost(
            endpoint=self.endpoint,
            prompt_tokens=estimate_prompt_tokens(messages),
            completion_tokens=completion,
        )
        if self.lease is not None and not self.lease.held():
            self.stop.set()  # another delivery may be doing this chunk's units now
            raise _LeaseLost
        if not self.budget.reserve(reserved, self.stop.is_set):
            self.stop.set()
            raise _CapReached
        if not self.first_calls_sent.is_set():  # counted only until then
            with self._count_lock:
                self.calls_started += 1
                if self.calls_started >= self.first_calls:
                    self.first_calls_sent.set()
        call, capped = None, []

        def billed(prompt_tokens: int, completion_tokens: int) -> bool:
            amount = call_cost(
                endpoint=self.endpoint,
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
            )
            fits = self.budget.charge(amount)
            if not fits:
                capped.append(amount)
            return fits

        try:
            call = call_send(
                endpoint=self.endpoint,
                transport=self.transport,
                policy=self.policy,
                messages=messages,
                run_id=self.run.pk,
                unit_key=unit_key,
                purpose=purpose,
                params=params,
                should_stop=self.stop.is_set,
                on_billed=billed,
            )
        finally:
            self.budget.settle(reserved=reserved, actual=call.cost_usd if call else Decimal(0))
        self.results.put(call)  # stored with the next batch, before its unit ends
        if capped:  # no retry could fit under the cap: the unit stays pending, the run stops
            self.budget.exceeded = True
            self.stop.set()
            raise _CapReached
        self._count_failure(call)
        return call

    def _count_failure(self, call: EngineCall) -> None:
        """Stop the run once ENGINE_FAILED_CALLS_IN_A_ROW calls in a row failed after their
        retries: the endpoint is down or refuses everything (a wrong address, key or model),
        and every unit left would spend its retries to fail the same way."""
        limit = settings.ENGINE_FAILED_CALLS_IN_A_ROW
        with self._count_lock:
            if call.status != CallStatus.ERROR:
                self.failed_in_a_row = 0
                return
            self.failed_in_a_row += 1
            if not limit or self.failed_in_a_row < limit or self.fatal:
                return
            self.fatal.append(
                f"The endpoint failed {self.failed_in_a_row} calls in a row, each after its "
                f"retries (the last: {call.error[:300]}). The run stopped; what was done is kept. "
                "Check the endpoint (Test connection on its page), then run it again."
            )
        self.stop.set()

    def do_unit(self, key: str, work: Any) -> None:
        if self.stop.is_set():
            return
        ctx = RunContext(
            run=self.run,
            unit_key=key,
            work=work,
            send=self.send,
            stop=self.stop,
            policy=self.policy,
        )
        result = UnitResult(key=key)
        try:
            result.value = self.protocol.execute(self.run, key, ctx)
        except UnitFailed as error:
            result.error, result.value = str(error) or "failed", error.value
        except (UnitStopped, _CapReached, _LeaseLost):
            result.finished = False  # stays pending for the next start
        except Exception as error:  # a bug in the protocol: the whole run fails, loudly
            self.fatal.append(f"{type(error).__name__}: {error}")
            logger.error("Run %s unit %s raised:\n%s", self.run.pk, key, traceback.format_exc())
            self.stop.set()
            result.finished = False
        result.calls = ctx.calls
        self.results.put(result)


def _prepare_units(run: EngineRun, protocol: RunProtocol) -> list[str]:
    """Create the run's unit rows, mark those done elsewhere skipped, failed ones pending again.

    Return the keys left to do, in the protocol's order.
    """
    keys = protocol.units(run)
    if len(set(keys)) != len(keys):
        raise EngineRunError(f"Run {run.pk}: the protocol {run.kind!r} returned duplicate keys.")
    known = dict(EngineUnit.objects.filter(run=run).values_list("key", "status"))
    _forget_stale_units(run, known, keys)
    new = [key for key in keys if key not in known]
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    rows_insert(
        EngineUnit,
        ["run", "key", "status", "error", "attempts", "updated_at"],
        [(run.pk, key, UnitStatus.PENDING, "", 0, now) for key in new],
        on_conflict="(run_id, key) DO NOTHING",
    )
    EngineUnit.objects.filter(run=run, status=UnitStatus.FAILED).update(
        status=UnitStatus.PENDING, error=""
    )
    pending = [key for key in keys if known.get(key) not in (UnitStatus.DONE, UnitStatus.SKIPPED)]
    if pending and hasattr(protocol, "done_units"):
        skipped = set(protocol.done_units(run, pending))
        if skipped:
            EngineUnit.objects.filter(run=run, key__in=skipped).update(status=UnitStatus.SKIPPED)
            pending = [key for key in pending if key not in skipped]
    # Done by this run's earlier starts: not "skipped" (this run called for them, and its calls
    # and cost count them), yet done before this start, which the run's page says apart.
    _recount(run.pk, done_earlier=sum(1 for key in keys if known.get(key) == UnitStatus.DONE))
    return pending


def _forget_stale_units(run: EngineRun, known: dict[str, str], keys: Sequence[str]) -> None:
    """Delete the run's units whose keys the protocol no longer gives (and drop them from
    `known`): keys hold what decides the work (a generation unit's endpoint settings), so after
    an endpoint is edited the run's work has new keys. Left in place, the old rows would be
    counted for ever and never done: a "Done" run at half its units."""
    current = set(keys)
    stale = [key for key in known if key not in current]
    for start in range(0, len(stale), MAX_BATCH):
        EngineUnit.objects.filter(run=run, key__in=stale[start : start + MAX_BATCH]).delete()
    for key in stale:
        del known[key]


def _recount(run_id: int, *, done_earlier: int | None = None) -> None:
    """Count the run's units by status onto its row; `done_earlier` (given as a start prepares
    its units) is how many its earlier starts had done."""
    counts = dict(
        EngineUnit.objects.filter(run_id=run_id)
        .values_list("status")
        .annotate(n=Count("pk"))
        .values_list("status", "n")
    )
    earlier = {} if done_earlier is None else {"units_done_earlier": done_earlier}
    EngineRun.objects.filter(pk=run_id).update(
        units_total=sum(counts.values()),
        units_done=counts.get(UnitStatus.DONE, 0) + counts.get(UnitStatus.SKIPPED, 0),
        units_skipped=counts.get(UnitStatus.SKIPPED, 0),
        units_failed=counts.get(UnitStatus.FAILED, 0),
        **earlier,
    )


def _store(
    run: EngineRun,
    protocol: RunProtocol,
    items: Sequence[UnitResult | EngineCall],
    *,
    shared_cap: bool = False,
    lease: _ChunkLease | _RunClaim | None = None,
) -> None:
    """Save the calls, let the protocol store its rows, mark units, add to the run's totals.

    `items` are calls made (each put on the queue as soon as it returned) and units ended.
    A chunk's delivery that no longer holds its `lease` (`_ChunkLease.fence`), or a whole
    run's executor whose run was taken over or reaped (`_RunClaim.fence`), stores only its
    calls and their cost, which were paid: its units, and what its calls answered, are the
    new holder's, which asks them again.
    """
    results = [item for item in items if isinstance(item, UnitResult)]
    calls = [item for item in items if isinstance(item, EngineCall) and item.pk is None]
    queued = {id(call) for call in calls}
    calls += [c for r in results for c in r.calls if c.pk is None and id(c) not in queued]
    now = timezone.now()
    with transaction.atomic():
        held = lease is None or lease.fence()
        if calls:
            calls_insert(calls, now=now)
            if held and hasattr(protocol, "store_calls"):
                protocol.store_calls(run, calls)
        finished = [r for r in results if r.finished] if held else []
        done = [r for r in finished if not r.failed]
        if finished and hasattr(protocol, "store"):
            protocol.store(run, finished)
        if done:
            _units_mark_done(run.pk, [r.key for r in done], now=now)
        for result in finished:
            if result.failed:
                EngineUnit.objects.filter(run=run, key=result.key).update(
                    status=UnitStatus.FAILED,
                    error=result.error[:2000],
                    attempts=F("attempts") + 1,
                    updated_at=now,
                )
        _run_counters_add(
            run.pk, done=len(done), failed=len(finished) - len(done), calls=calls,
            now=now, shared_cap=shared_cap, beat=held,
        )  # fmt: skip


# The two UPDATEs of every batch, written here instead of compiled by the ORM per batch: its
# update() with F() expressions cost 0.5-0.7 ms of the storing thread's CPU each, a third of a
# zero-shot judge batch's, on the GIL the API workers wait for between bursts. The statements
# are the ORM's: the same increments, on SQLite the same NUMERIC casts around decimals.
def _units_mark_done(run_id: int, keys: Sequence[str], *, now: datetime) -> None:
    """Mark the run's units of these keys done: status, error cleared, one attempt more."""
    ops = connection.ops
    table = ops.quote_name(EngineUnit._meta.db_table)
    status, error, attempts, updated_at, run, key = (
        ops.quote_name(EngineUnit._meta.get_field(name).column)
        for name in ("status", "error", "attempts", "updated_at", "run", "key")
    )
    with connection.cursor() as cursor:
        for start in range(0, len(keys), MAX_BATCH):
            chunk = keys[start : start + MAX_BATCH]
            marks = ", ".join(["%s"] * len(chunk))
            # Names from model metadata; the values go as parameters.
            cursor.execute(
                f"UPDATE {table} SET {status} = %s, {error} = '', {attempts} = {attempts} + 1, "  # noqa: S608
                f"{updated_at} = %s WHERE {run} = %s AND {key} IN ({marks})",
                [UnitStatus.DONE, ops.adapt_datetimefield_value(now), run_id, *chunk],
            )


def _run_counters_add(
    run_id: int,
    *,
    done: int,
    failed: int,
    calls: Sequence[EngineCall],
    now: datetime,
    shared_cap: bool,
    beat: bool = True,
) -> None:
    """Add a batch to the run's counters (units ended, `run_totals` of its calls) with one
    UPDATE of increments, so chunks in several processes never lose one, and beat the
    heartbeat (unless `beat` is false: a delivery whose chunk was taken over is no sign that
    the run lives). With `shared_cap` the calls' cost also moves from reserved to spent."""
    increments: dict[str, Any] = {"units_done": done, "units_failed": failed}
    if calls:
        increments.update(run_totals(calls))
        if shared_cap:  # reserved until now: the calls' cost and their possibly billed attempts
            increments["cost_reserved_usd"] = -(
                increments["cost_usd"] + increments["possibly_billed_usd"]
            )
    ops = connection.ops
    sets, values = [], []
    if beat:  # the database's clock, as every beat of a run (`_run_silent`)
        sets.append(f"{ops.quote_name('heartbeat')} = {_database_now_sql()}")
    for name, value in increments.items():
        column = ops.quote_name(EngineRun._meta.get_field(name).column)
        if isinstance(value, Decimal):
            sets.append(f"{column} = CAST({column} + CAST(%s AS NUMERIC) AS NUMERIC)")
        else:
            sets.append(f"{column} = {column} + %s")
        values.append(value)
    table = ops.quote_name(EngineRun._meta.db_table)
    with connection.cursor() as cursor:  # names from model metadata, values as parameters
        cursor.execute(f"UPDATE {table} SET {', '.join(sets)} WHERE id = %s", [*values, run_id])  # noqa: S608


_NOW_SQL: dict[str, str] = {}


def _database_now_sql() -> str:
    """`Now()` as SQL of this connection's database, for a statement written by hand."""
    if connection.vendor not in _NOW_SQL:
        compiler = EngineRun.objects.none().query.get_compiler(connection=connection)
        sql, params = compiler.compile(Now())
        assert not params
        _NOW_SQL[connection.vendor] = sql
    return _NOW_SQL[connection.vendor]


_CALL_FIELDS = (
    "run",
    "endpoint",
    "unit_key",
    "purpose",
    "status",
    "request",
    "reply",
    "error",
    "finish_reason",
    "prompt_tokens",
    "completion_tokens",
    "usage_estimated",
    "latency_ms",
    "retries",
    "system_fingerprint",
    "cost_usd",
    "possibly_billed_usd",
    "created_at",
)


def _request_value(request: Any, field: Any) -> Any:
    """The database value of a call's request: the JSON bytes it was sent as, when there are
    some (no second encoding of a 60 kB prompt), else the field's own preparation.

    SQLite is given them as a blob that the insert casts to text (`_REQUEST_AS_TEXT`): a blob
    cast to text is its bytes read as UTF-8, the same text the driver would have encoded from
    a str, stored as text (its JSON_VALID check included). That encoding of 11 MB of 10-shot
    prompts a run was a fifth of the storing thread's CPU.
    """
    data = request.cached_json() if isinstance(request, RequestBody) else None
    if data is None or connection.vendor not in ("sqlite", "postgresql"):
        return field.get_db_prep_save(request, connection)
    if connection.vendor == "postgresql":
        from psycopg.types.json import Jsonb

        return Jsonb(request, dumps=lambda _value: data)
    return data


_REQUEST_AS_TEXT = {"request": "CAST(%s AS TEXT)"}  # SQLite: see _request_value


def calls_insert(calls: Sequence[EngineCall], *, now: datetime) -> None:
    """Save new calls with one INSERT per 500 and set their ids (no per-field model work)."""
    request_field = EngineCall._meta.get_field("request")
    cost_field = EngineCall._meta.get_field("cost_usd")
    created = connection.ops.adapt_datetimefield_value(now)
    rows = [
        (
            c.run_id,
            c.endpoint_id,
            c.unit_key,
            c.purpose,
            c.status,
            _request_value(c.request, request_field),
            c.reply,
            c.error,
            c.finish_reason,
            c.prompt_tokens,
            c.completion_tokens,
            c.usage_estimated,
            c.latency_ms,
            c.retries,
            c.system_fingerprint,
            cost_field.get_db_prep_save(c.cost_usd, connection),
            cost_field.get_db_prep_save(c.possibly_billed_usd, connection),
            created,
        )
        for c in calls
    ]
    placeholders = _REQUEST_AS_TEXT if connection.vendor == "sqlite" else None
    ids = rows_insert(EngineCall, _CALL_FIELDS, rows, returning=True, placeholders=placeholders)
    for call, pk in zip(calls, ids, strict=True):
        call.pk, call.created_at = pk, now
        call._state.adding = False


STOP_CHECK_SECONDS = 1.0
QUIET_SECONDS = 0.005
_ENDED = object()  # put on the results queue by the worker that ends the last unit


def _next_batch(results: queue.Queue) -> list:
    """Wait for results and return them once the workers pause: no new result for
    QUIET_SECONDS, BATCH_SECONDS after the first, or the last unit ended. Nothing if none came
    within BATCH_SECONDS.

    Replies come in bursts (the calls sent together come back together) and each worker then
    sends its next call. Storing after the burst, while the workers wait on the API, keeps the
    writer off the GIL they need; storing at fixed times made them wait for it mid-burst.
    """
    try:
        items = [results.get(timeout=BATCH_SECONDS)]
    except queue.Empty:
        return []
    deadline = time.monotonic() + BATCH_SECONDS
    while items[-1] is not _ENDED and (left := deadline - time.monotonic()) > 0:
        try:
            items.append(results.get(timeout=min(QUIET_SECONDS, left)))
        except queue.Empty:
            break
    return [item for item in items if item is not _ENDED]


def _store_batch(run, protocol, executor: _Executor, batch: list, on_progress=None) -> None:
    for start in range(0, len(batch), MAX_BATCH):
        chunk = batch[start : start + MAX_BATCH]
        _store(
            run,
            protocol,
            chunk,
            shared_cap=isinstance(executor.budget, _SharedBudget)
            and executor.budget.cap is not None,
            lease=executor.lease,
        )
        if executor.lease is not None and executor.lease.lost:
            executor.stop.set()  # taken over: nothing more is asked
        if on_progress:
            on_progress(sum(1 for r in chunk if isinstance(r, UnitResult) and r.finished))


def _store_left(run, protocol, executor: _Executor) -> None:
    """Store what the workers answered and nobody stored yet (they have all ended)."""
    left = []
    while True:
        try:
            item = executor.results.get_nowait()
        except queue.Empty:
            break
        if item is not _ENDED:
            left.append(item)
    _store_batch(run, protocol, executor, left)


def _drain(run, protocol, executor: _Executor, ended: threading.Event, on_progress) -> None:
    last_beat = last_stop_check = last_renewal = 0.0
    lease = executor.lease
    while True:
        batch: list[UnitResult | EngineCall] = _next_batch(executor.results)
        _store_batch(run, protocol, executor, batch, on_progress)
        if lease is not None and time.monotonic() - last_renewal > lease.every():
            last_renewal = time.monotonic()
            if not lease.renew():
                executor.stop.set()  # what was answered is stored; nothing more is asked
        if time.monotonic() - last_beat > settings.ENGINE_HEARTBEAT_SECONDS and not (
            lease is not None and lease.lost  # taken over: no sign that the run lives
        ):
            last_beat = time.monotonic()
            EngineRun.objects.filter(pk=run.pk, status=RunStatus.RUNNING).update(heartbeat=Now())
        if time.monotonic() - last_stop_check > STOP_CHECK_SECONDS:
            last_stop_check = time.monotonic()
            if EngineRun.objects.filter(pk=run.pk, stop_requested=True).exists():
                executor.stop.set()
        if ended.is_set() and executor.results.empty():
            return


_pool: tuple[int, ThreadPoolExecutor] | None = None
_pool_lock = threading.Lock()
# More threads than the runs of one process keep in flight at once (a run takes as many as its
# endpoint's concurrency), so that no run's worker ever waits for another run's to end.
POOL_THREADS = 4096


def _worker_pool() -> ThreadPoolExecutor:
    """This process's worker threads, kept between runs (a new pool after a fork: the threads
    stay behind in the parent). Starting 32 threads took 3 ms on a quiet machine and 30-60 ms
    on a loaded one, before a run's first call: each start waits until the new thread has run,
    up to a scheduler tick when the cores are busy."""
    global _pool
    with _pool_lock:
        if _pool is None or _pool[0] != os.getpid():
            pool = ThreadPoolExecutor(max_workers=POOL_THREADS, thread_name_prefix="engine-worker")
            _pool = (os.getpid(), pool)
        return _pool[1]


def _run_pool(run, protocol, executor, keys, on_progress) -> None:
    """Do the units on `endpoint.concurrency` threads, in the keys' order, storing as they end.

    The first `concurrency` units are loaded (`protocol.load`) before the threads take any,
    the rest once those first calls are sent (or a unit ended without one), while they are in
    flight: a 10-shot judge spends a fifth of a second building its prompts, which would
    otherwise all come before the first call, and loading while the threads encode and send
    their first requests held them back on the GIL. The threads (kept between runs,
    `_worker_pool`) all wait until every one has its place before any takes a unit: a thread
    started while others are already encoding and sending requests waits for the GIL to say
    it started, which cost up to a quarter of a second over 32 threads.
    """
    size = run.endpoint.concurrency
    work = _load(protocol, run, keys[:size])
    ended = threading.Event()
    go = threading.Event()
    todo: queue.SimpleQueue[str | None] = queue.SimpleQueue()
    for key in keys[:size]:
        todo.put(key)
    left = [len(keys)]
    lock = threading.Lock()

    def worker() -> None:
        try:
            go.wait()
            while (key := todo.get()) is not None:
                try:
                    executor.do_unit(key, work.get(key))
                finally:
                    executor.first_calls_sent.set()  # a free thread needs the rest loaded
                    with lock:
                        left[0] -= 1
                        if not left[0]:
                            ended.set()
                            executor.results.put(_ENDED)
        finally:
            connections.close_all()  # a kept thread holds no connection between runs

    if not keys:
        ended.set()
        executor.results.put(_ENDED)
    threads = max(1, min(size, len(keys)))
    executor.first_calls = threads
    pool = _worker_pool()
    futures = [pool.submit(worker) for _ in range(threads)]
    go.set()
    try:
        try:
            if keys[size:]:
                executor.first_calls_sent.wait()
                work.update(_load(protocol, run, keys[size:]))
                for key in keys[size:]:
                    todo.put(key)
        finally:
            for _ in range(threads):
                todo.put(None)
        _drain(run, protocol, executor, ended, on_progress)
    except KeyboardInterrupt:
        # Ctrl-C: the calls in flight end, and are paid. Their answers are stored before
        # leaving, or the run's cost (what its cap counts) would leave them out and going on
        # would ask, and pay for, their units again.
        executor.stop.set()
        futures_wait(futures)
        _store_left(run, protocol, executor)
        raise
    except BaseException:
        executor.stop.set()  # a database error: workers end after their call
        raise
    finally:
        futures_wait(futures)  # the run ends once its workers have
    for future in futures:
        future.result()


def engine_run_execute(
    *,
    run_id: int,
    stop: threading.Event | None = None,
    on_progress: Callable[[int], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> EngineRun:
    """Do every missing unit of the run, `endpoint.concurrency` at a time; return the run.

    Ends done (every unit done), failed (a unit failed, or the protocol's code raised: the
    message is on the run), or cancelled (stopped, or the spending cap would be exceeded by the
    next call). `on_progress(n)` is told how many units ended since its last call.
    """
    run = _claim(run_id)
    if run is None:  # delivered again while its first delivery runs it
        logger.warning(
            "Engine run %s is running in another worker (fresh heartbeat): this delivery "
            "does nothing.",
            run_id,
        )
        return engine_run_get(run_id=run_id)
    if run.stop_requested:  # a task delivered again after a stop
        return _finish(run.pk, cancelled=run.error or "Stopped on request.")
    stop = stop or threading.Event()
    claim = _RunClaim(run.pk, run.running_since)
    try:
        protocol = protocol_for(run.kind)
        keys = _prepare_units(run, protocol)
        if hasattr(protocol, "on_start"):
            protocol.on_start(run)
        if on_progress:
            on_progress(0)
        run.refresh_from_db()
        executor = _execute_keys(
            run, protocol, keys, stop=stop, sleep=sleep, on_progress=on_progress, lease=claim
        )
    except (EngineRunError, EndpointError) as error:
        return _finish_held(claim, failed=str(error))
    except KeyboardInterrupt:  # Ctrl-C in a command: stopped, not running on without a worker
        _finish_held(claim, cancelled=STOPPED)
        raise
    except Exception as error:
        _finish_held(claim, failed=f"{type(error).__name__}: {error}")
        raise
    if claim.lost:
        return _finish_held(claim)
    failed, cancelled = _outcome(run, executor)
    return _finish_held(claim, failed=failed, cancelled=cancelled)


def _finish_held(claim: _RunClaim, *, failed: str = "", cancelled: str = "") -> EngineRun:
    """End the run as `_finish` does if this executor still holds it; else leave it as it is.

    An executor reaped or taken over while it stalled may wake to a raise as well as a return:
    either way the run is its new holder's, to end (or already ended) by that holder's rules.
    The claim is asked again, not only remembered, as a stall can end in a raise before any
    beat or store found it lost; asked first in the transaction that ends the run, whose row
    stays locked till it commits, so no other executor takes it over in between.
    """
    with transaction.atomic():
        if not claim.lost and claim.fence():
            return _finish(claim.run_id, failed=failed, cancelled=cancelled)
    logger.warning(
        "Engine run %s was taken over or reaped while this executor stalled: its answers "
        "since are not stored (their calls are), and the run is left as it is.",
        claim.run_id,
    )
    return engine_run_get(run_id=claim.run_id)


@transaction.atomic
def _claim(run_id: int) -> EngineRun | None:
    """Mark the run running for this executor, under a lock of its row; None when a worker
    runs it already (running, with a fresh heartbeat). A run whose worker vanished is taken
    over: the time it ran until its last beat is kept, the silence after is not counted.
    Silent by the database's clock (`_run_silent`), which the start's first beat and its
    `running_since` are stamped by, as its end is (`_running_ended`)."""
    try:
        run = _run_locked(run_id, "endpoint")
    except EngineRun.DoesNotExist:
        raise EngineNotFoundError(f"No run {run_id}.") from None
    if run.status == RunStatus.RUNNING and not run.silent:
        return None
    if run.stop_requested:  # the caller ends it as stopped, with the message it has
        # A vanished worker's silence is no running time: its interval ends at its last beat.
        _end_running(run, _last_sign_of_life(run))
        return run
    fields = {
        **_running_ended(run, _last_sign_of_life(run)),
        "status": RunStatus.RUNNING,
        "started_at": run.started_at or timezone.now(),
        "running_since": run.database_now,
        "heartbeat": run.database_now,
        "finished_at": None,
        "error": "",
    }
    EngineRun.objects.filter(pk=run.pk).update(**fields)
    for name, value in fields.items():
        setattr(run, name, value)
    return run


def _execute_keys(
    run: EngineRun,
    protocol: RunProtocol,
    keys: Sequence[str],
    *,
    stop: threading.Event,
    sleep: Callable[[float], None],
    on_progress: Callable[[int], None] | None = None,
    budget: _Budget | _SharedBudget | None = None,
    lease: _ChunkLease | _RunClaim | None = None,
) -> _Executor:
    """The executor: do these units (a whole run, or one chunk of it) and store them."""
    executor = _Executor(run, protocol, stop, sleep, budget, lease)
    _run_pool(run, protocol, executor, list(keys), on_progress)
    return executor


def _outcome(run: EngineRun, executor: _Executor) -> tuple[str, str]:
    """(failed, cancelled) messages of an executor that returned; both blank if it ran out."""
    if executor.fatal:
        return executor.fatal[0], ""
    if executor.budget.exceeded:
        return "", _cap_message(run)
    if executor.stop.is_set():
        return "", STOPPED
    return "", ""


STOPPED = "Stopped on request."


# How every stop at the spending cap begins, whatever the cap was then (it may change since).
CAP_STOP = "Stopped: the next call would exceed the spending cap"


def engine_run_stopped_by_cap(run: EngineRun) -> bool:
    """Whether the run's last start ended at its spending cap (raise it to go on)."""
    return run.status == RunStatus.CANCELLED and run.error.startswith(CAP_STOP)


def _cap_message(run: EngineRun) -> str:
    return f"{CAP_STOP} of {cap_text(run.spending_cap_usd)} (raise the cap to do the rest)."


# --- Celery: one task per chunk of units ------------------------------------------------------


def engine_run_dispatch(*, run_id: int, chunk_units: int | None = None) -> list[EngineChunk]:
    """Split a run's pending units into chunks and enqueue one Celery task per chunk.

    Runs in a worker (the task `engine_run_task`): prepares the units as a whole run does, marks
    the run running and enqueues the chunks once this commits. A run with nothing left ends at
    once. A redelivered dispatch finds the run no longer pending and sends nothing; the chunks
    of an earlier start were deleted by `engine_run_reopen`. An error ends the run only while
    this dispatch holds it (`_DispatchClaim`): a dispatch that stalled while another start took
    the run over leaves it to that start.
    """
    from annotate.engine import tasks  # tasks import this module
    from annotate.services.deferred_tasks import task_enqueue_on_commit

    size = max(1, chunk_units or settings.ENGINE_CELERY_CHUNK_UNITS)
    asked = engine_run_get(run_id=run_id)
    claim = _DispatchClaim(asked)
    try:
        protocol = protocol_for(asked.kind)
        with transaction.atomic():
            run = _run_locked(run_id, "endpoint")
            if run.status != RunStatus.PENDING:
                return []  # redelivered (its chunks are queued), or stopped before it started
            run.chunks.all().delete()  # chunks of an earlier start
            claim.since = run.database_now
            EngineRun.objects.filter(pk=run.pk).update(
                status=RunStatus.RUNNING,
                started_at=run.started_at or timezone.now(),
                running_since=run.database_now,
                heartbeat=run.database_now,
                finished_at=None,
                error="",
                cost_reserved_usd=Decimal(0),
            )
            keys = _prepare_units(run, protocol)
            if hasattr(protocol, "on_start"):
                protocol.on_start(run)
            if hasattr(protocol, "on_dispatch"):  # what every chunk would otherwise make again
                protocol.on_dispatch(run)
            chunks = EngineChunk.objects.bulk_create(
                EngineChunk(run=run, index=n, keys=list(keys[start : start + size]))
                for n, start in enumerate(range(0, len(keys), size))
            )
            for chunk in chunks:
                task_enqueue_on_commit(task=tasks.engine_run_chunk_task, args=(chunk.pk,))
    except (EngineRunError, EndpointError) as error:
        _finish_held(claim, failed=str(error))
        return []
    except Exception as error:
        _finish_held(claim, failed=f"{type(error).__name__}: {error}")
        raise
    if not chunks:
        _finish_held(claim)
    return chunks


def engine_run_chunk_execute(
    *,
    chunk_id: int,
    task_id: str = "",
    worker: str = "",
    stop: threading.Event | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> EngineChunk | None:
    """Do one chunk's pending units with the run's executor; the last chunk finishes the run.

    Safe to run twice, even at once: a chunk already done does nothing, and a delivery calls
    only with the chunk's lease (`_chunk_lease_take`), so while another delivery holds it and
    beats this one raises EngineChunkLeasedError (no call, nothing changed) to be tried again
    later. One taking over a dead delivery's chunk does only its units still pending. A
    delivery that loses its lease mid-way stops asking, stores what was answered and raises
    the same error. A run no longer running (stopped before it started, reaped) ends the chunk
    without a call. `clock` (seconds, monotonic) tells how long ago this delivery last renewed
    its lease; a test passes one it drives instead of waiting a lease out.
    """
    chunk, lease = _chunk_lease_take(chunk_id, task_id=task_id, worker=worker, clock=clock)
    if chunk is None or lease is None:
        return chunk  # the run was started again or deleted; or the chunk is done
    run = chunk.run
    failed = cancelled = ""
    if run.stop_requested:
        cancelled = STOPPED
    elif run.status != RunStatus.RUNNING:
        cancelled = run.error or f"The run is {run.status}."
    else:
        try:
            protocol = protocol_for(run.kind)
            pending = set(
                EngineUnit.objects.filter(
                    run=run, key__in=chunk.keys, status=UnitStatus.PENDING
                ).values_list("key", flat=True)
            )
            keys = [key for key in chunk.keys if key in pending]
            budget = _SharedBudget(run_id=run.pk, cap=run.spending_cap_usd)
            stop = stop or threading.Event()
            executor = _execute_keys(
                run, protocol, keys, stop=stop, sleep=sleep, budget=budget, lease=lease
            )
            failed, cancelled = _outcome(run, executor)
        except (EngineRunError, EndpointError) as error:
            failed = str(error)
        except Exception as error:
            _chunk_end(chunk, lease, failed=f"{type(error).__name__}: {error}")
            raise
        if not lease.held():  # its stop was ours, not the run's: the next delivery goes on
            lease.release()
            raise EngineChunkLeasedError(chunk.pk, retry_in=1.0)
    if failed or cancelled:  # the other chunks stop too, as one run's threads would
        EngineRun.objects.filter(pk=run.pk).update(stop_requested=True)
    return _chunk_end(chunk, lease, failed=failed, cancelled=cancelled)


def _chunk_lease_take(
    chunk_id: int, *, task_id: str, worker: str, clock: Callable[[], float] = time.monotonic
) -> tuple[EngineChunk | None, _ChunkLease | None]:
    """Take the chunk's lease for this delivery: (chunk, lease); (chunk, None) when it is done,
    (None, None) when it is gone. One conditional UPDATE, so of two deliveries at once only one
    takes it. Raise EngineChunkLeasedError while another delivery holds it and beats.

    The lease's age is the database's clock (`Now()`), as its renewals write it: not this
    process's, which may be off the holder's by more than the lease."""
    renewed = clock()
    silent = lease_silent(
        stale_seconds=settings.ENGINE_CHUNK_LEASE_SECONDS, heartbeat_field="heartbeat"
    )
    token = lease_take(
        job=EngineChunk.objects.filter(pk=chunk_id),
        claimable=~Q(status=ChunkStatus.DONE) & (Q(heartbeat__isnull=True) | silent),
        now=Now(), heartbeat_field="heartbeat", status=ChunkStatus.RUNNING, task_id=task_id[:255],
        worker=worker[:255], started_at=Now(),
    )  # fmt: skip
    try:
        chunk = (
            EngineChunk.objects.select_related("run__endpoint")
            .annotate(database_now=Now())
            .get(pk=chunk_id)
        )
    except EngineChunk.DoesNotExist:
        return None, None
    if token is not None:
        return chunk, _ChunkLease(chunk.pk, token, renewed, clock)
    if chunk.status == ChunkStatus.DONE:
        return chunk, None
    retry_in = lease_retry_in(
        heartbeat_at=chunk.heartbeat,
        stale_seconds=settings.ENGINE_CHUNK_LEASE_SECONDS,
        now=chunk.database_now,
    )
    raise EngineChunkLeasedError(chunk.pk, retry_in=retry_in)


def _chunk_end(
    chunk: EngineChunk, lease: _ChunkLease, *, failed: str = "", cancelled: str = ""
) -> EngineChunk:
    """Mark the chunk done if this delivery still holds its lease; if it is the run's last,
    finish the run (under the run's row lock).

    The chunk's row is locked before the run's, in the order `_store` takes them (its lease's
    fence, then the run's counters): the other way round, a delivery whose chunk was taken over
    storing its calls while the new holder ends the chunk would deadlock."""
    with transaction.atomic():
        ended = (
            EngineChunk.objects.filter(pk=chunk.pk, lease=lease.token)
            .exclude(status=ChunkStatus.DONE)
            .update(
                status=ChunkStatus.DONE,
                outcome="failed" if failed else "cancelled" if cancelled else "",
                error=failed or cancelled,
                finished_at=timezone.now(),
            )
        )
        if not ended:  # done or taken over by another delivery, or the run was started again
            return chunk
        run = EngineRun.objects.select_for_update().get(pk=chunk.run_id)
        chunk.refresh_from_db()
        if run.status != RunStatus.RUNNING:
            return chunk
        if run.chunks.exclude(status=ChunkStatus.DONE).exists():
            return chunk
        _finish_from_chunks(run)
    return chunk


def _finish_from_chunks(run: EngineRun) -> EngineRun:
    """The run's end, by the rules of a whole run: a raised protocol, the cap, a stop, units."""
    ends = list(run.chunks.exclude(outcome="").order_by("index").values_list("outcome", "error"))
    failed = next((error for outcome, error in ends if outcome == "failed"), "")
    if not failed and any(error.startswith(CAP_STOP) for _, error in ends):
        return _finish(run.pk, cancelled=_cap_message(run))
    if not failed and (ends or run.stop_requested):
        cancelled = next((error for _, error in ends if error == STOPPED), None)
        return _finish(run.pk, cancelled=cancelled or (ends[0][1] if ends else STOPPED))
    return _finish(run.pk, failed=failed)


def _finish(run_id: int, *, failed: str = "", cancelled: str = "") -> EngineRun:
    _recount(run_id)
    run = EngineRun.objects.select_related("endpoint").annotate(database_now=Now()).get(pk=run_id)
    run.finished_at, run.heartbeat = timezone.now(), None
    ended = _running_ended(run, run.database_now)
    run.running_seconds, run.running_since = ended["running_seconds"], ended["running_since"]
    # A stop (or the cap) met after the calls in flight answered the last units stops nothing.
    nothing_left = run.units_total and run.units_done == run.units_total
    if failed:
        run.status, run.error = RunStatus.FAILED, failed
    elif cancelled and not nothing_left:
        run.status, run.error = RunStatus.CANCELLED, cancelled
    elif run.units_failed:
        run.status = RunStatus.FAILED
        run.error = f"{run.units_failed} of {run.units_total} units failed; start again to retry."
    else:
        run.status, run.error = RunStatus.DONE, ""
    run.save(
        update_fields=[
            "status", "error", "finished_at", "heartbeat", "running_seconds", "running_since"
        ]
    )  # fmt: skip
    _tell_finished(run)
    return run


def _tell_finished(run: EngineRun) -> None:
    """Call the protocol's `on_finish`: every end of a run (reaped too) keeps its rows in step.

    The end is stored whatever `on_finish` does: it runs in a savepoint of the transaction
    that ends the run, so a raise undoes its own writes only, and is logged. Raised through, it
    rolled the end back and left the run running with no worker (a judge run deleted
    meanwhile: its on_finish found no row). The run is then failed, whatever its end was: its
    results are not all recorded, and a run shown done (or stopped) would be read as if they
    were. Run again records them, asking no unit done already."""
    protocol = _protocol_or_none(run.kind)
    if protocol is None or not hasattr(protocol, "on_finish"):
        return
    try:
        with transaction.atomic():
            protocol.on_finish(run)
    except Exception as error:
        logger.exception("Engine run %s ended, but its protocol's on_finish failed.", run.pk)
        note = (
            f"Its calls ended, but recording its results in the {run.kind} records failed: "
            f"{type(error).__name__}: {error}. Run again to record them (units done already "
            "are not asked again)."
        )
        run.status = RunStatus.FAILED
        run.error = f"{run.error} {note}" if run.error else note
        EngineRun.objects.filter(pk=run.pk).update(status=run.status, error=run.error)


def _protocol_or_none(kind: str) -> RunProtocol | None:
    try:
        return protocol_for(kind)
    except EngineRunError:
        return None


def engine_run_failed_units(*, run: EngineRun, limit: int = 20) -> list[tuple[str, str]]:
    return list(
        run.units.filter(status=UnitStatus.FAILED)
        .order_by("pk")
        .values_list("key", "error")[:limit]
    )
