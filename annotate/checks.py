"""Deployment checks of our own (`manage.py check --deploy`, `make prod-check`)."""

from __future__ import annotations

from django.conf import settings
from django.core.checks import Error, Tags, Warning, register

_PER_PROCESS_CACHES = (
    "django.core.cache.backends.locmem.LocMemCache",
    "django.core.cache.backends.dummy.DummyCache",
)


@register(Tags.caches, deploy=True)
def shared_cache_check(app_configs=None, **kwargs) -> list[Warning]:
    """Without a shared cache (CACHE_URL) each web process keeps its own counters: the pages'
    and the API's rate limits, a crowd address's open claims and the paid Start's double-click
    guard would each allow as many times more as there are processes."""
    backend = settings.CACHES.get("default", {}).get("BACKEND", "")
    if backend not in _PER_PROCESS_CACHES:
        return []
    return [
        Warning(
            "No shared cache: the rate limits, a crowd address's open claims and the paid "
            "Start's double-click guard are counted per process.",
            hint="Set CACHE_URL to a Redis database, e.g. redis://127.0.0.1:6379/1 (docs/deploy.md).",
            id="annotate.W001",
        )
    ]


@register(Tags.caches)
def workers_without_shared_cache_check(app_configs=None, **kwargs) -> list[Warning]:
    """With a broker (CELERY_BROKER_URL, tasks not run eagerly) the site runs as several
    processes, web and workers, so a per-process cache is a mistake whatever the command: said
    at every start (`migrate`, `runserver`, `check`), not only by `check --deploy` (W001). A
    run's spending cap does not depend on it (it is held on the run's row)."""
    if not settings.CELERY_BROKER_URL or getattr(settings, "CELERY_TASK_ALWAYS_EAGER", False):
        return []
    backend = settings.CACHES.get("default", {}).get("BACKEND", "")
    if backend not in _PER_PROCESS_CACHES:
        return []
    return [
        Warning(
            "CELERY_BROKER_URL is set but CACHE_URL is not: each process counts its own "
            "rate limits (runs started, model calls, API and page requests), a crowd "
            "address's open claims and the paid Start's double-click guard, so together they "
            "allow as many times more as there are processes.",
            hint="Set CACHE_URL to a Redis database other than the broker's, e.g. "
            "redis://127.0.0.1:6379/1 (docs/deploy.md).",
            id="annotate.W003",
        )
    ]


# kombu's Redis transport hands a task out again after this many seconds when the settings give
# no visibility_timeout.
_KOMBU_VISIBILITY_TIMEOUT = 3600
_REDELIVERING_TRANSPORTS = ("redis", "rediss", "sqs")


def visibility_timeout_in_use() -> int | None:
    """Seconds after which the broker hands a task still unacknowledged to another worker (the
    Celery app's CELERY_BROKER_TRANSPORT_OPTIONS, else kombu's default); None without such a
    broker (tasks run in-process: nothing is redelivered)."""
    broker = settings.CELERY_BROKER_URL
    if not broker or getattr(settings, "CELERY_TASK_ALWAYS_EAGER", False):
        return None
    if broker.split("://", 1)[0].split("+")[0] not in _REDELIVERING_TRANSPORTS:
        return None
    options = getattr(settings, "CELERY_BROKER_TRANSPORT_OPTIONS", None) or {}
    return int(options.get("visibility_timeout", _KOMBU_VISIBILITY_TIMEOUT))


@register("celery", deploy=True)
def revision_call_timeout_check(app_configs=None, **kwargs) -> list[Error]:
    """A revision call pending past REVISION_CALL_TIMEOUT_SECONDS is failed, and a later
    delivery of its task calls nothing; a delivery that comes earlier calls again. The broker
    redelivers a task still running after its visibility timeout, so a timeout not below it
    lets a second worker ask (and pay for) a call the first is still making."""
    timeout = settings.REVISION_CALL_TIMEOUT_SECONDS
    visibility = visibility_timeout_in_use()
    if visibility is None or timeout < visibility:
        return []
    return [
        Error(
            f"REVISION_CALL_TIMEOUT_SECONDS ({timeout} s) is not below the broker's visibility "
            f"timeout ({visibility} s): a revision call still running when its task is handed "
            "to a second worker is asked, and paid for, twice.",
            hint="Set REVISION_CALL_TIMEOUT_SECONDS below CELERY_VISIBILITY_TIMEOUT (defaults "
            "300 and 900; docs/deploy.md).",
            id="annotate.E001",
        )
    ]


@register(Tags.database)
def unassigned_platform_work_check(app_configs=None, databases=None, **kwargs) -> list[Warning]:
    """Labels and direct scores of a platform's worker with no assignment that no import wrote
    count in no result since annotate 0018 (annotate.selectors.results): left by an assignment
    deleted before its work was protected, or written by a label import before imports marked
    what they write. Said at `migrate` (and `check --database default`), since the numbers of a
    report may have moved with the upgrade."""
    if not databases:
        return []
    from django.db import DatabaseError

    from annotate.models import DirectScore, Label
    from annotate.selectors.results import platform_annotator_ids

    unmarked = {"assignment__isnull": True, "imported": False}
    try:
        labels = Label.objects.filter(**unmarked, annotator_id__in=platform_annotator_ids()).count()
        scores = DirectScore.objects.filter(
            **unmarked, annotator_id__in=platform_annotator_ids()
        ).count()
    except DatabaseError:  # not migrated yet: nothing to say before 0018 is in
        return []
    if not labels and not scores:
        return []
    return [
        Warning(
            f"{labels} labels and {scores} direct scores of crowd platform workers have no "
            "assignment and were not marked as imported: they count in no result (the raw "
            "export calls them 'not confirmed by the platform').",
            hint="Work left by a deleted assignment should stay out. If they came from a label "
            "import, delete them and import the file again (imports now mark their rows), or "
            "re-import the raw export of a backup taken before the upgrade (docs/crowd.md, "
            "What counts in results).",
            id="annotate.W002",
        )
    ]
