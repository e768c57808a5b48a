"""The one place the verbalizer touches the model engine (annotate.engine, docs/engine.md)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from annotate.engine.models import Endpoint, EngineRun
from annotate.engine.services import (
    RunEstimate,
    engine_run_create,
    engine_run_estimate_new,
    engine_run_execute,
    engine_run_start,
)
from annotate.engine.services.runs import engine_run_check_may_start, engine_run_check_work

KIND = "verbalizer"


def engine_endpoint_get(*, name: str) -> Endpoint | None:
    return Endpoint.objects.filter(name=name).first()


def engine_endpoints():
    """Every endpoint (a queryset), for a refusal naming the ones there are; the run form lists
    them all to whoever may start a run."""
    return Endpoint.objects.all()


def engine_run_check_user(*, user, endpoint: Endpoint) -> None:
    """Refuse a researcher a paid endpoint (only admins spend money; None: the console)."""
    engine_run_check_may_start(user=user, endpoint=endpoint)


def engine_run_new(
    *,
    endpoint: Endpoint,
    params: dict[str, Any],
    created_by=None,
    spending_cap_usd=None,
    description: str = "",
) -> EngineRun:
    return engine_run_create(
        kind=KIND, endpoint=endpoint, params=params, created_by=created_by,
        spending_cap_usd=spending_cap_usd, description=description,
    )  # fmt: skip


def engine_run_refuse_if_done(*, run: EngineRun, nothing_to_do: Callable[[int], str]) -> None:
    """Refuse (EngineNothingToDoError, 409) a new run with every prompt answered already, so no
    empty run is recorded; call it in the transaction that made the run."""
    engine_run_check_work(run=run, nothing_to_do=nothing_to_do)


def engine_run_background(*, run: EngineRun, user=None) -> None:
    """Start the run after commit (Celery or a thread); the engine checks who may spend."""
    engine_run_start(run=run, user=user)


def engine_run_foreground(*, run: EngineRun, on_progress=None) -> EngineRun:
    """Do the run in this process (management commands), returning the finished run."""
    return engine_run_execute(run_id=run.pk, on_progress=on_progress)


def engine_run_estimate(*, create: Callable[[], EngineRun], user=None) -> RunEstimate:
    """What the run `create` makes would call and cost; nothing is kept. A paid endpoint's
    estimate is an admin's, as starting the run is."""

    def checked() -> EngineRun:
        run = create()
        engine_run_check_may_start(user=user, endpoint=run.endpoint)
        return run

    return engine_run_estimate_new(create=checked)
