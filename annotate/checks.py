"""Deployment checks of our own (`manage.py check --deploy`, `make prod-check`)."""

from __future__ import annotations

from django.conf import settings
from django.core.checks import Tags, Warning, register

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
