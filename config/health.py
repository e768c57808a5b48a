"""Health endpoint for load balancers and monitoring: the database and the broker answer.

It needs no login and has no rate limit: a limit per address would be shared by every client
behind a proxy (TRUSTED_PROXY_COUNT), so a flood from anyone would answer the load balancer 429
and take the node out of service. What a hit costs is bounded instead: the broker check (a new
broker connection each time) is done at most once per HEALTH_BROKER_CHECK_SECONDS in each
process, whoever asks and however often; the database check is one `SELECT 1`.
"""

from __future__ import annotations

import threading
import time

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from annotate.throttling import NO_LIMIT, page_limit


def _database_status() -> str:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:  # noqa: BLE001 - any failure means "down"; the type is reported
        return f"error: {type(exc).__name__}"
    return "ok"


class _RecentBrokerStatus:
    """The last broker check of this process, given again while younger than the setting."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: tuple[str, float, str] | None = None  # (broker URL, checked at, status)

    def get(self, *, now: float) -> str:
        url, max_age = settings.CELERY_BROKER_URL, settings.HEALTH_BROKER_CHECK_SECONDS
        with self._lock:  # one check at a time: the others wait and take its answer
            last = self._last
            if last is None or last[0] != url or not 0 <= now - last[1] < max_age:
                self._last = last = (url, now, _broker_status())
        return last[2]


_recent_broker_status = _RecentBrokerStatus()


def _broker_status() -> str:
    if not settings.CELERY_BROKER_URL:
        return "not configured (tasks run in-process)"
    from config.celery import app

    try:
        with app.connection_for_write(settings.CELERY_BROKER_URL) as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
    except Exception as exc:  # noqa: BLE001
        return f"error: {type(exc).__name__}"
    return "ok"


@page_limit(NO_LIMIT)  # on purpose: see the module's docstring
@never_cache
@require_GET
def health(request: HttpRequest) -> JsonResponse:
    """Answer 200 when the database and (if configured) the broker answer, else 503."""
    checks = {
        "database": _database_status(),
        "broker": _recent_broker_status.get(now=time.monotonic()),
    }
    healthy = all(value == "ok" or value.startswith("not configured") for value in checks.values())
    return JsonResponse(
        {"status": "ok" if healthy else "error", **checks}, status=200 if healthy else 503
    )
