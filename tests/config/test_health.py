import os

import pytest
from django.test import override_settings

pytestmark = pytest.mark.django_db


def test_health_reports_database_and_broker(client):
    answer = client.get("/health/")
    assert answer.status_code == 200
    body = answer.json()
    assert body["database"] == "ok"
    if os.environ.get("CELERY_BROKER_URL"):
        assert body["broker"] == "ok"
    else:
        assert body["broker"].startswith("not configured")


@override_settings(CELERY_BROKER_URL="redis://127.0.0.1:1/0")
def test_health_is_503_when_the_broker_is_down(client):
    answer = client.get("/health/")
    assert answer.status_code == 503
    assert answer.json()["broker"].startswith("error")


class _UnreachableDatabase:
    def cursor(self):
        from django.db import OperationalError

        raise OperationalError("connection refused")


def test_health_is_503_naming_the_database_when_it_is_down(client, monkeypatch):
    monkeypatch.setattr("config.health.connection", _UnreachableDatabase())
    answer = client.get("/health/")
    assert answer.status_code == 503
    body = answer.json()
    assert body["status"] == "error"
    assert body["database"] == "error: OperationalError"
    assert body["broker"] == "ok" or body["broker"].startswith("not configured")


def test_the_broker_is_checked_at_most_once_per_interval_however_often_health_is_asked(
    client, settings, monkeypatch
):
    """/health/ needs no login and no limit holds it, and each broker check opens a broker
    connection: one check serves every request for HEALTH_BROKER_CHECK_SECONDS, then it is
    done again (so a broker coming back shows)."""
    from config import health
    from config.celery import app

    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"  # nothing listens: the check fails
    settings.HEALTH_BROKER_CHECK_SECONDS = 5
    now = [1_000.0]
    monkeypatch.setattr(health.time, "monotonic", lambda: now[0])
    opened = []
    connect = app.connection_for_write
    monkeypatch.setattr(app, "connection_for_write", lambda url: opened.append(url) or connect(url))
    for _ in range(16):
        answer = client.get("/health/")
        assert answer.status_code == 503 and answer.json()["broker"].startswith("error")
        now[0] += 0.25
    assert len(opened) == 1
    now[0] += 1  # 5 s after the check
    client.get("/health/")
    assert len(opened) == 2
