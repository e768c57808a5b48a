"""Celery tasks of the annotation side: adapters that take ids and call one service."""

from celery import shared_task
from django.utils import timezone

from annotate.services.assignments import assignments_expire
from annotate.services.deferred_tasks import deferred_tasks_send
from annotate.services.import_jobs import import_job_run, import_jobs_fail_stale


@shared_task(acks_late=True)
def import_job_run_task(job_id: int) -> str:
    return import_job_run(job_id=job_id).status


@shared_task(name="annotate.tasks.expire_assignments")
def expire_assignments() -> int:
    """Free the slots of claims past their allotted time (run by beat every minute)."""
    return assignments_expire(now=timezone.now())


@shared_task(name="annotate.tasks.send_deferred_tasks")
def send_deferred_tasks() -> int:
    """Send the tasks stored while the broker was down (run by beat every minute)."""
    return deferred_tasks_send(now=timezone.now())


@shared_task(name="annotate.tasks.fail_stale_imports")
def fail_stale_imports() -> int:
    """Fail the imports whose worker stopped beating (run by beat every minute)."""
    return import_jobs_fail_stale(now=timezone.now())
