"""Reads of the engine: a run's progress (for its page and the JSON it polls), recent runs, and
whether a user has an endpoint to choose."""

from __future__ import annotations

from datetime import datetime

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet
from django.db.models.functions import Now
from django.urls import reverse
from django.utils import timezone

from annotate.engine.errors import EngineRunError
from annotate.engine.models import CallStatus, Endpoint, EngineCall, EngineRun, RunStatus
from annotate.engine.protocols import protocol_for
from annotate.engine.services.runs import engine_runs_reap
from annotate.roles import is_admin
from annotate.selectors.prerequisites import Prerequisite


def engine_run_progress(*, run: EngineRun, now: datetime | None = None) -> dict:
    """Return the run's counters as plain values; a run whose worker vanished is marked failed
    here too, so its page never shows "running" for ever.

    `percent_processed` counts the units ended either way (done, done before, failed): how far
    the run has got. `percent_done` counts only those done: how much of the work exists.
    `percent` is `percent_processed`, kept for the clients that read it. A unit is what the
    run's protocol does as one piece (`unit_name`: a judge run's units are conversations, one
    per response judged, so these percents are not its questions'). `preparing` is true while a
    started run has no units yet (its worker is making them): pages say so instead of "0 / 0".

    `now` is by default the database's clock for a running run (one query): its
    `running_since` was stamped by it, and a web host whose clock is off would count the
    time so far off by as much.
    """
    if now is None:
        now = _database_now(run) if run.status == RunStatus.RUNNING else timezone.now()
    if run.status == RunStatus.RUNNING and engine_runs_reap(now=now, run_id=run.pk):
        run.refresh_from_db()
    processed = _percent(run.units_done + run.units_failed, run.units_total)
    return {
        "run_id": run.pk,
        "kind": run.kind,
        "status": run.status,
        "status_display": run.get_status_display(),
        "active": run.is_active,
        "preparing": run.is_preparing,
        "units_total": run.units_total,
        "units_done": run.units_done,
        "units_failed": run.units_failed,
        "units_skipped": run.units_skipped,
        "units_done_earlier": run.units_done_earlier,
        "percent_processed": processed,
        "percent_done": _percent(run.units_done, run.units_total),
        "percent": processed,  # the name clients read before the two above; = percent_processed
        "unit_name": engine_run_unit_name(run=run),
        "calls": run.calls,
        "calls_failed": run.calls_failed,
        "prompt_tokens": run.prompt_tokens,
        "completion_tokens": run.completion_tokens,
        "cost_usd": str(run.cost_usd),
        "possibly_billed_usd": str(run.possibly_billed_usd),
        "spending_cap_usd": None if run.spending_cap_usd is None else str(run.spending_cap_usd),
        "elapsed_seconds": round(engine_run_seconds(run=run, now=now), 1),
        "call_seconds": round(run.call_seconds, 1),
        "stop_requested": run.stop_requested,
        "error": run.error,
    }


def engine_run_seconds(*, run: EngineRun, now: datetime) -> float:
    """Seconds the run has been running: its starts that ended, and the current one while it
    runs. The time between a stop (or an end) and the next start is not counted."""
    seconds = run.running_seconds
    if run.status == RunStatus.RUNNING and run.running_since is not None:
        seconds += (now - run.running_since).total_seconds()
    return max(0.0, seconds)


def _database_now(run: EngineRun) -> datetime:
    row = EngineRun.objects.filter(pk=run.pk).annotate(database_now=Now()).values("database_now")
    return next(iter(row), {}).get("database_now") or timezone.now()  # deleted: no better clock


def _percent(part: int, total: int) -> int:
    """Whole percent, rounded down (100 only when all of it); 0 of nothing is 0."""
    return 100 * part // total if total else 0


def engine_run_list(*, kind: str | None = None, now: datetime | None = None) -> QuerySet[EngineRun]:
    """Every run (of one kind if given); a running run whose worker stopped beating is marked
    failed first, as its own page does, so the list never says "Running" for a dead run."""
    runs = EngineRun.objects.select_related("endpoint", "created_by")
    if kind:
        runs = runs.filter(kind=kind)
    engine_runs_reap(now=now, run_ids=runs.filter(status=RunStatus.RUNNING).values("pk"))
    return runs


def engine_run_recent_errors(*, run: EngineRun, limit: int = 20) -> list[dict]:
    """Return the run's failed units with their messages, first failed first: `unit` is the
    key, `label` what a person knows it by (the protocol's `unit_labels`, else the key)."""
    failed = list(
        run.units.filter(status="failed")
        .order_by("updated_at", "pk")
        .values_list("key", "error")[:limit]
    )
    labels = _unit_labels(run, [key for key, _ in failed]) if failed else {}
    return [{"unit": key, "label": labels.get(key, key), "error": error} for key, error in failed]


def _unit_labels(run: EngineRun, keys: list[str]) -> dict[str, str]:
    try:
        protocol = protocol_for(run.kind)
    except EngineRunError:
        return {}
    return protocol.unit_labels(run, keys) if hasattr(protocol, "unit_labels") else {}


def endpoint_last_test(*, endpoint: Endpoint) -> EngineCall | None:
    return (
        EngineCall.objects.filter(endpoint=endpoint, purpose="test connection")
        .order_by("-created_at", "-pk")
        .first()
    )


def endpoint_test_verdict(*, call: EngineCall) -> tuple[bool, str]:
    """Return whether a test call shows the endpoint reachable, and that in words.

    The test asks for at most a few tokens, so an endpoint that answers at length (the offline
    fake, most chat models) ends "truncated": that is a success, and must not read as a failure.
    """
    if call.status == CallStatus.OK:
        return True, "Connected: the endpoint answered."
    if call.status == CallStatus.TRUNCATED:
        cut_at = call.request.get("max_tokens") or call.completion_tokens
        return True, (
            f"Connected: the endpoint answered (reply cut at {cut_at} tokens, as the test asks for)."
        )
    if call.status == CallStatus.REFUSED:
        return False, "Connected, but the endpoint refused to answer (content filter)."
    return False, "Failed: the endpoint gave no answer (the error below)."


def _protocol_says(run: EngineRun, hook: str) -> str:
    """What the run's protocol answers to an optional hook, or "" (no such hook or protocol)."""
    try:
        protocol = protocol_for(run.kind)
    except EngineRunError:
        return ""
    return getattr(protocol, hook)(run) if hasattr(protocol, hook) else ""


def engine_run_results_url(*, run: EngineRun) -> str:
    """Where the run's results are read, if its protocol says (`results_url`); else ""."""
    return _protocol_says(run, "results_url")


def engine_run_unit_name(*, run: EngineRun) -> str:
    """What the run's protocol calls its units, plural (`unit_name`: "conversations"), else
    "units": what the run's counts and percents count."""
    try:
        protocol = protocol_for(run.kind)
    except EngineRunError:
        return "units"
    return getattr(protocol, "unit_name", "units")


def engine_run_origin(*, run: EngineRun) -> tuple[str, str] | str:
    """Where the run was started from, as (url, name), if its protocol says (`origin`): the run
    page leads back there to start the next one; else ""."""
    return _protocol_says(run, "origin")


def engine_run_title(*, run: EngineRun) -> str:
    """The protocol's own name for the run's work, if it gives one (`title`); else ""."""
    return _protocol_says(run, "title")


def endpoint_prerequisite_missing(
    *, user: AbstractBaseUser, paid_action: str
) -> Prerequisite | None:
    """Return what a page that asks for an endpoint needs first: an endpoint, and for anyone
    but an admin one that spends no money (engine_run_check_may_start); `paid_action` is what to do when
    every endpoint spends money. None when the user has one to choose."""
    endpoints = list(Endpoint.objects.only("base_url"))
    admin = is_admin(user)
    if not endpoints:
        if admin:
            return Prerequisite(
                "There is no engine endpoint yet.",
                "Create one (a blank address is the offline fake model: it bills nobody, so "
                "researchers may use it).",
                reverse("engine:endpoint-new"),
            )
        return Prerequisite("There is no engine endpoint yet.", "Ask an admin to create one.")
    if not admin and all(endpoint.spends_money for endpoint in endpoints):
        return Prerequisite(
            "Every endpoint calls a paid API, and only an admin may start a run on one.",
            paid_action,
        )
    return None
