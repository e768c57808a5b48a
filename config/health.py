"""Health endpoint for load balancers and monitoring: the database and the broker answer."""

from __future__ import annotations

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET


def _database_status() -> str:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:  # noqa: BLE001 - any failure means "down"; the type is reported
        return f"error: {type(exc).__name__}"
    return "ok"


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


@never_cache
@require_GET
def health(request: HttpRequest) -> JsonResponse:
    """Answer 200 when the database and (if configured) the broker answer, else 503."""
    checks = {"database": _database_status(), "broker": _broker_status()}
    healthy = all(value == "ok" or value.startswith("not configured") for value in checks.values())
    return JsonResponse(
        {"status": "ok" if healthy else "error", **checks}, status=200 if healthy else 503
    )
