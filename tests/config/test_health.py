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
