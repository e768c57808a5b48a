"""Celery tasks of the annotation side: thin entry points over services."""

from celery import shared_task
from django.utils import timezone

from annotate.services.assignments import assignments_expire


@shared_task(name="annotate.tasks.expire_assignments")
def expire_assignments() -> int:
    """Free the slots of claims past their allotted time (run by beat every minute)."""
    return assignments_expire(now=timezone.now())
