"""Celery entry points of the engine. Each takes ids and is safe to run twice."""

from __future__ import annotations

from celery import shared_task
from django.utils import timezone

from annotate.engine.errors import EngineChunkLeasedError
from annotate.engine.services import runs


@shared_task(acks_late=True)
def engine_run_task(run_id: int, chunk_units: int | None = None) -> None:
    """Start a run. Sent by `engine_run_start` with `chunk_units`: split the missing units into
    chunk tasks (several workers share the run). Without it (a task sent before chunks existed,
    a direct call): do the whole run here, unless a worker runs it already (a delivery again
    while it runs does nothing). A redelivered task never redoes a unit."""
    if chunk_units:
        runs.engine_run_dispatch(run_id=run_id, chunk_units=chunk_units)
    else:
        runs.engine_run_execute(run_id=run_id)


@shared_task(bind=True, acks_late=True, max_retries=None)
def engine_run_chunk_task(self, chunk_id: int) -> None:
    """Do one chunk of a run's units; the last chunk to end finishes the run.

    A delivery while another runs the chunk (Redis hands a task out again once it has run past
    the visibility timeout) calls nothing and looks again once that one's lease could be stale:
    if its worker died meanwhile, this one does the rest."""
    try:
        runs.engine_run_chunk_execute(
            chunk_id=chunk_id, task_id=self.request.id or "", worker=self.request.hostname or ""
        )
    except EngineChunkLeasedError as busy:
        raise self.retry(countdown=busy.retry_in, exc=busy) from None


@shared_task
def engine_runs_reap_task() -> int:
    """Mark failed the runs whose worker stopped beating (a killed or lost worker)."""
    return runs.engine_runs_reap(now=timezone.now())
