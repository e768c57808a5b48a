"""Celery entry points of the measuring side. Each takes ids and is safe to run twice."""

from __future__ import annotations

from celery import shared_task

from evaluation.services import judge_runs, report_runs


@shared_task(acks_late=True)
def judge_run_task(run_id: int) -> None:
    """Run a whole judge run in this worker through the engine (tasks sent before the engine
    existed; new runs are started as engine runs, annotate.engine.tasks.engine_run_task)."""
    judge_runs.judge_run_execute(run_id=run_id)


@shared_task(acks_late=True)
def report_export_task(export_id: int) -> None:
    """Write one report export to storage; a finished export is not written again."""
    report_runs.report_export_execute(export_id=export_id)
