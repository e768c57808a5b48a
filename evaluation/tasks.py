"""Celery entry points of the measuring side. Each takes ids and is safe to run twice."""

from __future__ import annotations

from celery import shared_task

from annotate.services.leases import LeaseHeldError
from evaluation.services import judge_runs, report_runs


@shared_task(acks_late=True)
def judge_run_task(run_id: int) -> None:
    """Run a whole judge run in this worker through the engine (tasks sent before the engine
    existed; new runs are started as engine runs, annotate.engine.tasks.engine_run_task)."""
    judge_runs.judge_run_execute(run_id=run_id)


@shared_task(bind=True, acks_late=True, max_retries=None)
def report_export_task(self, export_id: int) -> None:
    """Write one report export to storage; a finished export is not written again.

    A delivery while another writes the export (Redis hands a task out again once it has run
    past the visibility timeout) writes nothing and looks again once that one's lease could be
    stale: if its worker died meanwhile, this one writes the export."""
    try:
        report_runs.report_export_execute(export_id=export_id)
    except LeaseHeldError as busy:
        raise self.retry(countdown=busy.retry_in, exc=busy) from None
